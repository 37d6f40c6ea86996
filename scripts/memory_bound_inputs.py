#!/usr/bin/env python3
"""Adversarial inputs of at most 64 MiB for scripts/memory-bound.sh (docs/limits.md, "The memory
bound"): for every input format and command, huge arrays, many rows, shapes just under every
limit, deep nesting and long strings.

Usage: memory_bound_inputs.py DIR MLASIM
Writes the inputs into DIR and DIR/cases.tsv: one line per case, NAME<TAB>BYTES<TAB>COMMAND,
where COMMAND runs in DIR and starts with the word mlasim. BYTES is the size of the largest input
the case reads. MLASIM (the binary) is run here only to make plan buffers for the case
directories (`mlasim plan --npy`) and a layout (`mlasim replay --layout-out`).
"""
import json
import os
import struct
import subprocess
import sys

MIB = 1 << 20
LIMIT = 64 * MIB  # input_bytes: the largest file mlasim reads by default
REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
cases = []


def case(name, command, *inputs):
    sizes = [os.path.getsize(p) if os.path.isfile(p) else dir_size(p) for p in inputs]
    cases.append((name, max(sizes) if sizes else 0, command))


def dir_size(d):
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))


def write(path, text):
    mode = "wb" if isinstance(text, bytes) else "w"
    with open(path, mode) as f:
        f.write(text)
    return path


def fill_array(item, budget=LIMIT):
    """'[item,item,...]' of at most `budget` bytes."""
    n = (budget - 2 + 1) // (len(item) + 1)
    return "[" + ",".join([item] * n) + "]"


def request(n, ctx, heads=16, cu=80, qlen=1, page=1, topk=-1, split=-1, gran=16):
    return {"target": "gfx942", "cu_count": cu, "heads_per_head_k": heads, "num_heads_k": 1,
            "q_dtype": "bf16", "kv_dtype": "bf16", "page_size": page, "kv_granularity": gran,
            "qlen": qlen, "max_seqlen_qo": qlen, "uni_seqlen_qo": qlen, "is_causal": True,
            "topk": topk, "max_split_per_batch": split,
            "qo_indptr": [i * qlen for i in range(n + 1)],
            "kv_indptr": [i * ctx for i in range(n + 1)], "kv_last_page_lens": [1] * n}


def compact(doc):
    return json.dumps(doc, separators=(",", ":"))


def npy(path, descr, shape, data=b""):
    """A version-1.0 .npy file; `data` is the raw bytes (zeros when shorter)."""
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join("%d," % s for s in shape) if len(shape) == 1 else ", ".join(map(str, shape)))
    pad = 64 - (10 + len(header) + 1) % 64
    header += " " * pad + "\n"
    itemsize = {"<i4": 4, "<u8": 8, "<i8": 8, "<f4": 4, "<u2": 2}[descr]
    count = 1
    for s in shape:
        count *= s
    body = data + b"\0" * (count * itemsize - len(data))
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + body)


def npy_header(path):
    with open(path, "rb") as f:
        head = f.read(10)
        n = struct.unpack("<H", head[8:10])[0]
        d = f.read(n).decode()
    descr = d.split("'descr': '")[1].split("'")[0]
    shape = tuple(int(x) for x in d.split("'shape': (")[1].split(")")[0].split(",") if x.strip())
    return descr, shape


DTYPES = {"<i4": ("int32", 4), "<u8": ("uint64", 8), "<i8": ("int64", 8), "<f4": ("float32", 4),
          "<u2": ("bfloat16", 2)}


def manifest(dir, planner, tensors):
    """manifest.json over the .npy files `tensors` (name -> file) of `dir`."""
    entries = {}
    for i, (name, file) in enumerate(sorted(tensors.items())):
        descr, shape = npy_header(os.path.join(dir, file))
        dtype, size = DTYPES[descr]
        strides, s = [], 1
        for d in reversed(shape):
            strides.insert(0, s)
            s *= d
        count = 1
        for d in shape:
            count *= d
        entries[name] = {"data_ptr": hex(0x7f0000000000 + (i << 32)), "descr": descr,
                         "device": "cuda:0", "dtype": dtype, "file": file,
                         "nbytes": count * size, "shape": list(shape), "strides": strides}
    doc = {"call": "mla_decode_fwd", "config": {"planner": planner}, "format": "mlasim-case",
           "schema_version": 1, "tensors": entries, "versions": {"mlasim": "0.1.0"}}
    write(os.path.join(dir, "manifest.json"), json.dumps(doc))


def planner_config(r):
    return {k: r[k] for k in ("cu_count", "heads_per_head_k", "is_causal", "kv_dtype",
                              "kv_granularity", "max_seqlen_qo", "max_split_per_batch",
                              "num_heads_k", "page_size", "q_dtype", "qlen", "topk",
                              "uni_seqlen_qo")} | {"is_cp_round_robin": False,
                                                   "revision": "2026-08", "target": "gfx942"}


def int32s(values):
    return struct.pack("<%di" % len(values), *values)


def case_dir(mlasim, dir, r, extra=None):
    """A case directory: the request's tensors, its plan buffers from `mlasim plan --npy`."""
    os.makedirs(dir, exist_ok=True)
    write(dir + ".request.json", compact(r))
    subprocess.run([mlasim, "plan", "--request", dir + ".request.json", "--npy", dir],
                   check=True, stdout=subprocess.DEVNULL)
    os.remove(os.path.join(dir, "work_metadata_ptrs.npy"))
    n = len(r["kv_last_page_lens"])
    for name in ("qo_indptr", "kv_indptr", "kv_last_page_lens"):
        npy(os.path.join(dir, name + ".npy"), "<i4", (len(r[name]),), int32s(r[name]))
    tensors = {f[:-4]: f for f in os.listdir(dir) if f.endswith(".npy")}
    for name, (descr, shape) in (extra or {}).items():
        npy(os.path.join(dir, name + ".npy"), descr, shape)
        tensors[name] = name + ".npy"
    manifest(dir, planner_config(r), tensors)
    return n


def json_inputs():
    """The strict JSON reader under every shape of tree (read here by plan --request)."""
    shapes = {
        "empty-objects": fill_array("{}"), "empty-arrays": fill_array("[]"),
        "zeros": fill_array("0"), "empty-strings": fill_array('""'),
        "one-member-objects": fill_array('{"":0}'),
        "long-string": '"' + "a" * (LIMIT - 2) + '"',
        "deep-arrays": "[" * (LIMIT // 2) + "]" * (LIMIT // 2),
        "deep-unterminated": "[" * LIMIT,
    }
    keys, size, i = [], 2, 0
    while True:
        k = '"%x":0' % i
        if size + len(k) + 1 > LIMIT:
            break
        keys.append(k)
        size += len(k) + 1
        i += 1
    shapes["distinct-keys"] = "{" + ",".join(keys) + "}"
    for name, text in shapes.items():
        case("json " + name, "mlasim plan --request json-%s.json" % name,
             write("json-%s.json" % name, text))
    write("json-over-limit.json", " " * (LIMIT + 1))
    case("json 64 MiB + 1 byte", "mlasim plan --request json-over-limit.json",
         "json-over-limit.json")


def plan_inputs():
    """Plan requests just under the limits (requests, q rows, heads, sparse) and every output."""
    shapes = {
        "2^20 requests": request(1 << 20, 16),
        "512 requests x qlen 4096": request(512, 4096, qlen=4096),
        "8192 requests x qlen 1024": request(8192, 1024, qlen=1024),
        "65536 requests x 128 heads": request(65536, 1024, heads=128, cu=1024),
        "sparse 65536 requests topk 2048": request(65536, 4096, topk=2048, page=1),
    }
    for i, (name, r) in enumerate(shapes.items()):
        path = write("request-%d.json" % i, compact(r))
        case("request " + name, "mlasim plan --request %s" % path, path)
    case("request 2^20 requests --json", "mlasim plan --request request-0.json --json",
         "request-0.json")
    case("request 2^20 requests --svg --npy",
         "mlasim plan --request request-0.json --svg plan.svg --npy plan-npy", "request-0.json")


def golden_inputs():
    """plan --check-golden: 64 MiB of records, and one line of a 2^20-request record."""
    for name in ("v12-dense-1", "decode-update-0"):
        line = open(os.path.join(REPO, "tests/fuzz/corpus/golden_record/%s.jsonl" % name)).read()
        line = line.strip() + "\n"
        write("golden-%s.jsonl" % name, line * (LIMIT // len(line)))
        case("golden 64 MiB of %s records" % name, "mlasim plan --check-golden golden-%s.jsonl"
             % name, "golden-%s.jsonl" % name)
    # A real record (its sizes, derived values and buffers) around a 2^20-request input: planned
    # in full, then a mismatch.
    rec = json.loads(open(os.path.join(REPO, "tests/fuzz/corpus/golden_record/v12-dense-0.jsonl"))
                     .read())
    rec["input"] = request(1 << 20, 16)
    write("golden-big-line.jsonl", compact(rec) + "\n")
    case("golden one 2^20-request record", "mlasim plan --check-golden golden-big-line.jsonl",
         "golden-big-line.jsonl")


def scenario_inputs():
    """replay and numerics: the largest KV, batch and numerics tensors a scenario may ask for."""
    seed = json.load(open(os.path.join(REPO, "tests/fuzz/corpus/scenario_json/seed-b35.json")))

    def scenario(name, n, ctx, sparse=False, heads=64, tp=4, description=None):
        d = json.loads(json.dumps(seed))
        d["batch"] = {"contexts": [ctx] * n, "rejected": [0] * n, "rejected_prev": [0] * n}
        d["graph"].update(eager=True, max_model_len=1 << 24, max_num_seqs=65536,
                          max_num_batched_tokens=1 << 22)
        d["model"].update(sparse=sparse, heads=heads)
        d["parallelism"]["tp"] = tp
        d["mtp"] = {"k": 0}
        d.pop("allocator", None)
        if description:
            d["description"] = description
        return write("scenario-%s.json" % name, json.dumps(d))

    p = scenario("16x16M-sparse", 16, 1 << 24, sparse=True)
    case("scenario 16 requests x 2^24 KV, sparse", "mlasim replay " + p, p)
    p = scenario("65536x16384", 65536, 16384)
    case("scenario 65536 requests x 16384 KV (2^30 KV tokens)", "mlasim replay " + p, p)
    case("scenario 65536 requests --html", "mlasim replay %s --html replay.html" % p, p)
    p = scenario("long-description", 35, 4096, description="d" * (LIMIT - 8192))
    case("scenario with a 64 MiB description", "mlasim replay " + p, p)
    # Numerics at full dims: q and KV just under tensor_values (2^25) each; KV alone.
    p = scenario("numerics-q-kv", 1800, 32, heads=128, tp=4)
    case("numerics q + KV at tensor_values", "mlasim numerics %s --max-context 1048576 "
         "--full-dims" % p, p)
    case("numerics q + KV at tensor_values, fp64", "mlasim numerics %s --max-context 1048576 "
         "--full-dims --accumulate fp64" % p, p)
    p = scenario("numerics-kv", 8, 7250, heads=64, tp=4)
    case("numerics KV at tensor_values", "mlasim numerics %s --max-context 1048576 --full-dims"
         % p, p)


def contract_inputs():
    """--contract: 64 MiB of statements, and loops at loop_trips (time, not memory)."""
    base = json.load(open(os.path.join(REPO, "tests/cases/contracts/tile64-decode.json")))
    read = {"read": "q", "rows": ["q0", "q1"]}
    # Three levels of loops (256 x 256 x 32 reads, cut to 64 MiB): the compiler's whole tree.
    inner = {"loop": "j", "from": 0, "to": 2, "body": [read] * 32}
    middle = {"loop": "i", "from": 0, "to": 2, "body": [inner] * 256}
    per_middle = len(compact(middle)) + 1
    doc = json.loads(json.dumps(base))
    lets = doc["program"][0]["body"][0]["body"][:5]  # partial, q0, q1, k0, k1
    room = LIMIT // 4  # a quarter: 64 MiB of statements holds more values than json_values allows
    doc["program"][0]["body"][0]["body"] = lets + [middle] * min(251, room // per_middle)
    text = compact(doc)
    p = write("contract-many-statements.json", text)
    case("contract 16 MiB of nested statements", "mlasim replay --builtin seed --contract " + p,
         p)
    # Just under contract_statements (4096): 5 lets and 15 loops of 255 reads.
    doc = json.loads(json.dumps(base))
    loop = {"loop": "i", "from": 0, "to": 2, "body": [read] * 255}
    doc["program"][0]["body"][0]["body"] = lets + [loop] * 15
    p = write("contract-statements-limit.json", compact(doc))
    case("contract of 3845 statements", "mlasim replay --builtin seed --contract " + p, p)
    doc = json.loads(json.dumps(base))
    doc["program"] = [{"loop": "c", "from": 0, "to": 1 << 26, "attribute": "workgroup",
                       "body": [{"write": "o", "rows": ["c", "c + 1"]}]}]
    p = write("contract-loop-trips.json", json.dumps(doc))
    case("contract loop at loop_trips writing o", "mlasim replay --builtin seed --contract " + p,
         p)


def case_inputs(mlasim):
    """check CASE_DIR: numerics over 64 MiB of captured tensors; 2^20 requests with their plan."""
    r = request(455, 96)
    n = case_dir(mlasim, "case-numerics", r, {
        "q": ("<u2", (455, 16, 576)), "kv_buffer": ("<u2", (455 * 96, 1, 576)),
        "kv_indices": ("<i4", (455 * 96,)), "o": ("<u2", (455, 16, 512)),
        "lse": ("<f4", (455, 16))})
    idx = os.path.join("case-numerics", "kv_indices.npy")
    npy(idx, "<i4", (455 * 96,), int32s(list(range(455 * 96))))
    case("check: q, KV, o of 64 MiB", "mlasim check case-numerics", "case-numerics")
    case_dir(mlasim, "case-planner", request((1 << 20) - 1, 16))
    case("check: 2^20 requests and their plan", "mlasim check case-planner", "case-planner")


def fault_inputs(mlasim):
    """explain-fault: a 64 MiB log line, a 64 MiB log of lines, a layout of 64 MiB."""
    subprocess.run([mlasim, "replay", "--builtin", "seed", "--layout-out", "layout.json"],
                   stdout=subprocess.DEVNULL)  # exit 1: the seed's violations
    layout = json.load(open("layout.json"))
    fault = "Memory access fault by GPU node-2 (Agent handle: 0x1) on address 0x7f1000200000. " \
            "Reason: Page not present or supervisor privilege.\n"
    write("fault-one-line.log", "x" * (LIMIT - len(fault)) + fault)
    case("explain-fault: one 64 MiB log line", "mlasim explain-fault --layout layout.json --log "
         "fault-one-line.log", "fault-one-line.log")
    write("fault-many-lines.log", fault * (LIMIT // len(fault)))
    case("explain-fault: 64 MiB of fault lines", "mlasim explain-fault --layout layout.json --log "
         "fault-many-lines.log", "fault-many-lines.log")
    allocs = layout["allocations"]
    one = compact(allocs[0])
    big = dict(layout)
    # Copies of the seed's allocations, each a distinct name at its own addresses past the one
    # before: a layout's names are distinct and its allocations disjoint (explain-fault refuses
    # repeats at the first one, before any attribution). Copy 0 is the seed's own.
    ends = [int(a.get("mapped_end", hex(int(a["base"], 16) + a["bytes"])), 16) for a in allocs]
    low = min(int(a["base"], 16) for a in allocs)
    span = (max(ends) - low + (4 << 20)) & ~((2 << 20) - 1)

    def copy(k):
        out = []
        for a in allocs:
            b = dict(a)
            if k:
                b["name"] = f"{a['name']}#{k}"
                for key in ("base", "mapped_begin", "mapped_end"):
                    if key in b:
                        b[key] = hex(int(b[key], 16) + k * span)
            out.append(b)
        return out

    copies = max(1, (LIMIT - 4096) // (len(one) + 8) // len(allocs))
    big["allocations"] = [b for k in range(copies) for b in copy(k)]
    text = compact(big)
    while len(text) > LIMIT:
        big["allocations"] = big["allocations"][: len(big["allocations"]) * 9 // 10]
        text = compact(big)
    write("layout-big.json", text)
    case("explain-fault: a 64 MiB layout", "mlasim explain-fault --layout layout-big.json "
         "--address 0x7f1000200000", "layout-big.json")


def campaign_inputs(mlasim):
    """fuzz --resume: a 64 MiB progress file, a 64 MiB finding file."""
    os.makedirs("campaign", exist_ok=True)
    subprocess.run([mlasim, "fuzz", "--seed", "7", "--cases", "4", "--out", "campaign"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    prog = json.load(open("campaign/.progress-0-of-1"))
    sig = "verify|dense_decode|o|write|A"
    n = (LIMIT - 4096) // (len(sig) + 12)
    prog["signatures"] = ["%s#%08d" % (sig, i) for i in range(n)]
    write("campaign/.progress-0-of-1", compact(prog))
    finding = [f for f in os.listdir("campaign") if f.endswith(".json")]
    if finding:
        doc = json.load(open(os.path.join("campaign", finding[0])))
        doc["finding"]["violation"]["detail"] = "d" * (LIMIT - 16384)
        write(os.path.join("campaign", finding[0]), compact(doc))
    case("fuzz --resume: 64 MiB progress and finding files",
         "mlasim fuzz --seed 7 --cases 5 --out campaign --resume", "campaign")


def main():
    dir, mlasim = sys.argv[1], os.path.abspath(sys.argv[2])
    os.makedirs(dir, exist_ok=True)
    os.chdir(dir)
    for make in (json_inputs, plan_inputs, golden_inputs, scenario_inputs, contract_inputs):
        make()
    for make in (case_inputs, fault_inputs, campaign_inputs):
        make(mlasim)
    with open("cases.tsv", "w") as f:
        for name, size, command in cases:
            f.write("%s\t%d\t%s\n" % (name, size, command))


if __name__ == "__main__":
    main()
