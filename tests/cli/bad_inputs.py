#!/usr/bin/env python3
"""ctest bad_inputs: the bad-input table (tests/cli/bad_inputs.jsonl) run against the real binary.

Each row of the table is one hostile or mistaken invocation of `mlasim`: the command line, the
files it needs, the exit code it must give and fragments its stderr must hold (the field and the
reason). Every row must exit with its code (2 for bad input) without a crash, print its fragments,
and, at exit 2, keep stdout empty and print one `mlasim [command]: error: ` line (docs/cli.md).
A failing row is reported by its id.

Usage: bad_inputs.py PATH/TO/mlasim [TABLE.jsonl] [--only ID,...] [--jobs N] [--verbose]

Row keys (docs/reliability.md, "Bad inputs"):
  id        unique name
  argv      the arguments after `mlasim`; placeholders: {tmp} (the row's own empty folder),
            {fixtures} (shared valid inputs, read only: seed.json, layout.json, request.json,
            record.jsonl, update.jsonl, contract.json, fault.log, case/, campaign/), {bin} (the
            folder of mlasim: the kernel-under-test example libraries), {src} (the repository)
  copy      fixture names copied into {tmp} before the run (case, campaign, ...), to be edited
  files     {path under {tmp}: content}: a string (written as is), a JSON value (dumped), or
            {"npy": {...}} (a .npy file: descr, shape, values, and optional fortran, magic,
            version, header, truncate), {"bytes_hex": "..."}, {"repeat": text, "count": n},
            {"from_fixture": name, "text_replace": [old, new]} (a fixture's text with one
            replacement: numbers JSON cannot round-trip, 18446744073709551616), {"xz_of": name,
            "truncate": n} (a fixture xz-compressed, its last n bytes cut), {"gzip_of": name}
            (a fixture gzip-compressed)
  edits     [{"file": path under {tmp}, "set"|"delete": [JSON path keys], "value": ...}] or
            {"file": ..., "line": n, "set"|"delete": [...], ...} for one line of a .jsonl file,
            or {"file": ..., "append": "text"}
  setup     [{"mkdir": path}, {"chmod": [path, "000"]}, {"symlink": [target, path]},
             {"remove": path}, {"replace_with_dir": path}, {"mount_ro": path},
             {"mount_full": path}]: mount_ro / mount_full run the command in a private mount
            namespace with a read-only, or a full 64 KiB, tmpfs at {tmp}/path (skipped where
            mounting is not allowed)
  as_user   "nobody": run without root's privileges (setpriv), so permission bits apply
  env       extra environment variables
  exit      the expected exit code
  stderr    a fragment, or a list of fragments, that stderr must contain
  note      free text for the reader (why a fragment stops where it does)
"""
import concurrent.futures
import gzip
import json
import lzma
import os
import re
import shutil
import stat
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
ERROR_LINE = re.compile(r"^mlasim( [a-z-]+)?: error: ", re.M)


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def npy_bytes(spec):
    """A .npy file as numpy.save writes it (version 1.0), with optional damage."""
    descr = spec["descr"]
    shape = spec["shape"]
    fortran = "True" if spec.get("fortran") else "False"
    shape_text = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
    header = spec.get("header") or (
        "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape_text))
    total = 10 + len(header) + 1
    header += " " * ((total + 63) // 64 * 64 - total) + "\n"
    magic = bytes.fromhex(spec.get("magic", "934e554d5059"))  # \x93NUMPY
    version = bytes(spec.get("version", [1, 0]))
    out = magic + version + struct.pack("<H", len(header)) + header.encode("latin-1")
    fmt = {"<i4": "<i", "<u8": "<Q", "<i8": "<q", "<u2": "<H", "|u1": "<B", "<f4": "<f",
           "<f2": "<e", "|b1": "<?"}.get(descr, "<i")
    values = spec.get("values", [])
    out += b"".join(struct.pack(fmt, v) for v in values)
    if spec.get("truncate"):
        out = out[: len(out) - spec["truncate"]]
    return out


def write_file(path, content, fixtures=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if isinstance(content, str):
        data = content.encode()
    elif isinstance(content, dict) and "npy" in content:
        data = npy_bytes(content["npy"])
    elif isinstance(content, dict) and "bytes_hex" in content:
        data = bytes.fromhex(content["bytes_hex"])
    elif isinstance(content, dict) and "repeat" in content:
        data = content["repeat"].encode() * content["count"]
    elif isinstance(content, dict) and "from_fixture" in content:
        with open(os.path.join(fixtures, content["from_fixture"])) as f:
            text = f.read()
        old, new = content["text_replace"]
        if old not in text:
            raise ValueError(f"{content['from_fixture']} holds no {old!r}")
        data = text.replace(old, new).encode()
    elif isinstance(content, dict) and "xz_of" in content:
        with open(os.path.join(fixtures, content["xz_of"]), "rb") as f:
            data = lzma.compress(f.read())
        data = data[: len(data) - content.get("truncate", 0)]
    elif isinstance(content, dict) and "gzip_of" in content:
        with open(os.path.join(fixtures, content["gzip_of"]), "rb") as f:
            data = gzip.compress(f.read(), mtime=0)
    else:
        data = json.dumps(content).encode()
    with open(path, "wb") as f:
        f.write(data)


def edit_json(doc, edit):
    keys = edit["set"] if "set" in edit else edit["delete"]
    node = doc
    for k in keys[:-1]:
        node = node[k]
    if "set" in edit:
        node[keys[-1]] = edit["value"]
    else:
        del node[keys[-1]]


def apply_edit(tmp, edit):
    path = os.path.join(tmp, edit["file"])
    if "append" in edit:
        with open(path, "a") as f:
            f.write(edit["append"])
        return
    with open(path) as f:
        text = f.read()
    if "line" in edit:
        lines = text.splitlines()
        doc = json.loads(lines[edit["line"]])
        edit_json(doc, edit)
        lines[edit["line"]] = json.dumps(doc)
        text = "\n".join(lines) + "\n"
    else:
        doc = json.loads(text)
        edit_json(doc, edit)
        text = json.dumps(doc, indent=1)
    with open(path, "w") as f:
        f.write(text)


class Fixtures:
    """Valid inputs of every format, made once with the binary under test (or from the repo)."""

    def __init__(self, mlasim, root):
        self.mlasim = mlasim
        self.dir = os.path.join(root, "fixtures")
        os.makedirs(self.dir)
        d = self.dir
        self.check([mlasim, "replay", "--builtin", "seed", "--scenario-out", f"{d}/seed.json",
                    "--layout-out", f"{d}/layout.json"], (1,))
        shutil.copy(os.path.join(SRC, "tests/cases/contracts/tile64-decode.json"),
                    f"{d}/contract.json")
        for name, corpus in (("record", "aiter-v12-dev"), ("update", "aiter-decode-update-dev")):
            with lzma.open(os.path.join(SRC, f"tests/golden/{corpus}.jsonl.xz"), "rt") as f:
                line = f.readline()
            with open(f"{d}/{name}.jsonl", "w") as f:
                f.write(line)
            if name == "record":
                with open(f"{d}/request.json", "w") as f:
                    json.dump(json.loads(line)["input"], f, indent=1)
        with open(f"{d}/fault.log", "w") as f:
            f.write("[rank0] Memory access fault by GPU node-2 (Agent handle: 0x55d0c0a0) on "
                    "address 0x7f1000200000. Reason: Page not present or supervisor privilege.\n")
        self.make_case(f"{d}/case")
        self.check([mlasim, "check", f"{d}/case"], (0,))
        self.check([mlasim, "fuzz", "--cases", "20", "--seed", "7", "--out", f"{d}/campaign"],
                   (1,))

    def check(self, cmd, codes):
        p = run(cmd)
        if p.returncode not in codes:
            sys.exit(f"fixture: {' '.join(cmd)}: exit {p.returncode}\n{p.stderr}")

    def make_case(self, case):
        """A case directory as mlasim.capture writes it: the request and aiter's plan."""
        kv_lens = [300, 40, 700]
        self.check([self.mlasim, "plan", "--kv-lens", ",".join(map(str, kv_lens)), "--clusters",
                    "8", "--npy", case], (0,))
        tensors = {}
        for i, name in enumerate(sorted(os.listdir(case))):
            with open(os.path.join(case, name), "rb") as f:
                data = f.read()
            hlen = struct.unpack("<H", data[8:10])[0]
            header = data[10:10 + hlen].decode("latin-1")
            descr = re.search(r"'descr': '([^']+)'", header).group(1)
            shape = [int(x) for x in re.findall(r"\d+", re.search(r"'shape': \(([^)]*)\)",
                                                                  header).group(1))]
            tensors[name[:-4]] = (descr, shape, 0x7f1000000000 + 0x10000 * i)
        kv_indptr = [0]
        for n in kv_lens:
            kv_indptr.append(kv_indptr[-1] + n)
        arrays = {"qo_indptr": [0, 1, 2, 3], "kv_indptr": kv_indptr, "kv_last_page_lens": [1, 1, 1]}
        for i, (name, values) in enumerate(arrays.items()):
            write_file(os.path.join(case, name + ".npy"),
                       {"npy": {"descr": "<i4", "shape": [len(values)], "values": values}})
            tensors[name] = ("<i4", [len(values)], 0x7f0000001000 + 0x1000 * i)
        entries = {}
        for name, (descr, shape, ptr) in sorted(tensors.items()):
            dtype = {"<i4": "int32", "<u8": "uint64"}[descr]
            strides, s = [], 1
            for extent in reversed(shape):
                strides.insert(0, s)
                s *= extent
            n = 1
            for extent in shape:
                n *= extent
            entries[name] = {"file": name + ".npy", "dtype": dtype, "descr": descr,
                             "shape": shape, "strides": strides,
                             "nbytes": n * (8 if descr == "<u8" else 4),
                             "data_ptr": hex(ptr), "device": "cuda:0"}
        planner = {"target": "gfx942", "cu_count": 8, "heads_per_head_k": 16, "num_heads_k": 1,
                   "q_dtype": "bf16", "kv_dtype": "bf16", "page_size": 1, "kv_granularity": 16,
                   "qlen": 1, "max_seqlen_qo": 1, "uni_seqlen_qo": 1, "is_causal": True,
                   "topk": -1, "max_split_per_batch": -1}
        manifest = {"format": "mlasim-case", "schema_version": 1, "call": "mla_decode_fwd",
                    "versions": {"mlasim": "0.1.0"}, "config": {"planner": planner},
                    "tensors": entries}
        with open(os.path.join(case, "manifest.json"), "w") as f:
            json.dump(manifest, f, indent=2, sort_keys=True)


def can_mount_ro(root):
    probe = os.path.join(root, "mount-probe")
    os.makedirs(probe)
    p = run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
             'mount -t tmpfs -o ro,size=64k tmpfs "$0" && ! touch "$0/x" 2>/dev/null', probe])
    return p.returncode == 0


def substitute(text, where):
    for k, v in where.items():
        text = text.replace("{" + k + "}", v)
    return text


def run_row(row, ctx):
    """Returns (status, message): status is 'pass', 'fail' or 'skip'."""
    tmp = tempfile.mkdtemp(prefix=re.sub(r"[^A-Za-z0-9_-]", "_", row["id"]) + "-", dir=ctx["root"])
    where = {"tmp": tmp, "fixtures": ctx["fixtures"], "bin": ctx["bin"], "src": SRC}
    for name in row.get("copy", []):
        src = os.path.join(ctx["fixtures"], name)
        (shutil.copytree if os.path.isdir(src) else shutil.copy)(src, os.path.join(tmp, name))
    for path, content in row.get("files", {}).items():
        if isinstance(content, str):
            content = substitute(content, where)
        write_file(os.path.join(tmp, path), content, ctx["fixtures"])
    for edit in row.get("edits", []):
        apply_edit(tmp, edit)
    prefix = []
    mount, mount_full = None, False
    for step in row.get("setup", []):
        if "mkdir" in step:
            os.makedirs(os.path.join(tmp, step["mkdir"]), exist_ok=True)
        elif "chmod" in step:
            os.chmod(os.path.join(tmp, step["chmod"][0]), int(step["chmod"][1], 8))
        elif "remove" in step:
            os.remove(os.path.join(tmp, step["remove"]))
        elif "replace_with_dir" in step:
            os.remove(os.path.join(tmp, step["replace_with_dir"]))
            os.makedirs(os.path.join(tmp, step["replace_with_dir"]))
        elif "symlink" in step:
            os.symlink(substitute(step["symlink"][0], where), os.path.join(tmp, step["symlink"][1]))
        elif "mount_ro" in step or "mount_full" in step:
            if not ctx["mount_ro"]:
                return "skip", "no private mount namespace here (unshare --mount refused)"
            mount = os.path.join(tmp, step.get("mount_ro") or step["mount_full"])
            mount_full = "mount_full" in step
            os.makedirs(mount, exist_ok=True)
    if row.get("as_user") == "nobody" and os.geteuid() == 0:
        if not shutil.which("setpriv"):
            return "skip", "running as root without setpriv: permission bits do not apply"
        if not ctx["nobody_runs"]:
            return "skip", ("user nobody cannot run " + ctx["mlasim"] +
                            " (a folder above it is private to root): permission rows skipped")
        for dirpath, _, _ in os.walk(tmp):  # nobody must reach the row's files
            mode = os.stat(dirpath).st_mode
            if dirpath == tmp or stat.S_IMODE(mode) == 0o700:
                os.chmod(dirpath, 0o755)
        os.chmod(ctx["root"], 0o755)
        prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    argv = [substitute(a, where) for a in row["argv"]]
    cmd = prefix + [ctx["mlasim"]] + argv
    if mount and not mount_full:
        cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
               'mount -t tmpfs -o ro,size=64k tmpfs "$0" && exec "$@"', mount] + cmd
    elif mount:  # a 64 KiB file system, filled to the last block
        cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
               'mount -t tmpfs -o size=64k tmpfs "$0" && chmod 777 "$0" && '
               '{ head -c 1048576 /dev/zero > "$0/fill" 2>/dev/null; exec "$@"; }', mount] + cmd
    env = dict(os.environ)
    env.pop("MLASIM_LIMITS", None)
    env.update({k: substitute(v, where) for k, v in row.get("env", {}).items()})
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp,
                           timeout=ctx["timeout"])
    except subprocess.TimeoutExpired:
        return "fail", f"timed out after {ctx['timeout']} s"
    out = p.stdout.decode(errors="replace")
    err = p.stderr.decode(errors="replace")
    problems = []
    if p.returncode < 0 or p.returncode == 3:
        problems.append(f"crashed or internal error (exit {p.returncode})")
    if p.returncode != row["exit"]:
        problems.append(f"exit {p.returncode}, expected {row['exit']}")
    fragments = row["stderr"] if isinstance(row["stderr"], list) else [row["stderr"]]
    for frag in fragments:
        frag = substitute(frag, where)
        if frag not in err:
            problems.append(f"stderr lacks {frag!r}")
    if row["exit"] == 2:
        if out:
            problems.append(f"stdout is not empty at exit 2: {out[:200]!r}")
        if len(ERROR_LINE.findall(err)) != 1:
            problems.append("stderr holds no single 'mlasim [command]: error: ' line")
    if problems:
        return "fail", "; ".join(problems) + f"\n    command: {' '.join(argv)}\n    stderr: {err.strip()[:600]}"
    if not ctx["keep"]:
        shutil.rmtree(tmp, ignore_errors=True)
    return "pass", err.strip().splitlines()[-1] if err.strip() else ""


def load_rows(path):
    rows, ids = [], set()
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            for k in ("id", "argv", "exit", "stderr"):
                if k not in row:
                    sys.exit(f"{path}:{n}: row without {k}")
            if row["id"] in ids:
                sys.exit(f"{path}:{n}: duplicate id {row['id']}")
            ids.add(row["id"])
            rows.append(row)
    return rows


def nobody_runs(mlasim):
    """Whether user nobody can run the binary (a clone under a root-only folder: no)."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return False
    probe = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            mlasim, "--version"], capture_output=True, timeout=60)
    return probe.returncode == 0


def main():
    args = sys.argv[1:]
    only, jobs, verbose = None, 2, False
    if "--only" in args:
        i = args.index("--only")
        only = set(args[i + 1].split(","))
        del args[i:i + 2]
    if "--jobs" in args:
        i = args.index("--jobs")
        jobs = int(args[i + 1])
        del args[i:i + 2]
    if "--verbose" in args:
        args.remove("--verbose")
        verbose = True
    if not args:
        sys.exit(__doc__)
    mlasim = os.path.abspath(args[0])
    table = args[1] if len(args) > 1 else os.path.join(HERE, "bad_inputs.jsonl")
    rows = load_rows(table)
    if only:
        rows = [r for r in rows if r["id"] in only]
    root = tempfile.mkdtemp(prefix="mlasim-bad-inputs-")
    try:
        ctx = {"mlasim": mlasim, "bin": os.path.dirname(mlasim), "root": root,
               "timeout": 120, "keep": verbose}
        ctx["fixtures"] = Fixtures(mlasim, root).dir
        ctx["mount_ro"] = can_mount_ro(root)
        ctx["nobody_runs"] = nobody_runs(mlasim)
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            results = list(pool.map(lambda r: run_row(r, ctx), rows))
    finally:
        if not verbose:
            shutil.rmtree(root, ignore_errors=True)
    counts = {"pass": 0, "fail": 0, "skip": 0}
    commands = set()
    for row, (status, msg) in zip(rows, results):
        counts[status] += 1
        commands.add(next((a for a in row["argv"] if a in COMMANDS), "(top level)"))
        if status != "pass" or verbose:
            print(f"{status.upper()} {row['id']}: {msg}")
    print(f"bad inputs: {len(rows)} rows, {counts['pass']} passed, {counts['fail']} failed, "
          f"{counts['skip']} skipped; commands: {', '.join(sorted(commands))}")
    sys.exit(1 if counts["fail"] else 0)


COMMANDS = ("replay", "explain-fault", "fuzz", "mutants", "plan", "numerics", "check",
            "effectiveness", "triage")

if __name__ == "__main__":
    main()
