#!/usr/bin/env python3
"""tools/gpu/sweep.py - triage a finding by replaying its scenario over a grid of variations.

    sweep.py BASE.json --grid 'batch.contexts=[[64],[65]]' --grid 'mtp.k=[0,2]' \
        --jobs 8 -- mlasim replay --gpu sentinel --kernel-under-test LIB.so --head-dims 576,512

BASE.json is a scenario or a finding file (docs/scenario.md); each --grid KEY=JSON_LIST sets the
dotted KEY to each value of the list (the product of all grids is run). Keys under "batch" whose
list must match the batch size (rejected, rejected_prev) are resized with zeros when
batch.contexts changes. After `--` comes the replay command; the scenario file is appended. Prints
one line per variation: the settings, the exit code and the lines of the replay that carry a
verdict or a numerics comparison (filter: --match REGEX; numerics lines come only from a --gpu
replay), and for a variation the command refused (exit >= 2) its last error line. Deterministic
order; files and logs in --out (default ./sweep-out). Exit 0 when every variation ran (each
replay's own exit 0 or 1), 1 when some were refused (exit >= 2: a bad key or value), 2 for bad
arguments."""
import argparse
import concurrent.futures
import copy
import itertools
import json
import os
import re
import shutil
import subprocess
import sys

DEFAULT_MATCH = r"numerics vs|gpu verdict|^verdict|device error|skipped:|unsupported:"


def set_path(doc, key, value):
    node = doc
    parts = key.split(".")
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value
    if key == "batch.contexts" and isinstance(value, list):
        for k in ("rejected", "rejected_prev"):
            if k in doc.get("batch", {}):
                doc["batch"][k] = (doc["batch"][k] + [0] * len(value))[:len(value)]


def main():
    ap = argparse.ArgumentParser(
        usage="%(prog)s BASE.json [--grid KEY=JSON_LIST ...] [options] -- REPLAY COMMAND ...",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base", help="a scenario or a finding file")
    ap.add_argument("--grid", action="append", default=[], metavar="KEY=JSON_LIST",
                    help="a dotted scenario key and the JSON list of its values")
    ap.add_argument("--jobs", type=int, default=4, help="variations run at once (>= 1)")
    ap.add_argument("--out", default="sweep-out", help="folder for the scenarios and logs")
    ap.add_argument("--match", default=DEFAULT_MATCH, help="regex of the report lines printed")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per variation")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    a = ap.parse_args(argv[:cut])
    cmd = argv[cut + 1:]
    if not cmd:
        ap.error("the replay command after -- is missing")
    if a.jobs < 1 or a.timeout < 1:
        ap.error("--jobs and --timeout must be >= 1")
    if shutil.which(cmd[0]) is None:
        ap.error(f"the replay command '{cmd[0]}' is not an executable (give its path)")
    try:
        re.compile(a.match)
    except re.error as e:
        ap.error(f"--match: {e}")
    try:
        base = json.load(open(a.base))
    except (OSError, ValueError) as e:
        print(f"sweep.py: {a.base}: {e}", file=sys.stderr)
        return 2
    base.pop("finding", None)
    axes = []
    for g in a.grid:
        key, sep, values = g.partition("=")
        if not sep or not key or any(not part for part in key.split(".")):
            ap.error(f"--grid {g}: expected KEY=[v1, v2, ...] with a dotted KEY")
        try:
            values = json.loads(values)
        except ValueError as e:
            ap.error(f"--grid {g}: the values are not JSON ({e})")
        if not isinstance(values, list) or not values:
            ap.error(f"--grid {g}: expected KEY=[v1, v2, ...]")
        axes.append([(key, v) for v in values])
    try:
        os.makedirs(a.out, exist_ok=True)
    except OSError as e:
        print(f"sweep.py: --out {a.out}: {e.strerror}", file=sys.stderr)
        return 2
    match = re.compile(a.match)

    def run(i, combo):
        doc = copy.deepcopy(base)
        for key, v in combo:
            set_path(doc, key, v)
        doc["name"] = f"sweep-{i}"
        path = os.path.join(a.out, f"sweep-{i}.json")
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
        try:
            r = subprocess.run(cmd + [path], capture_output=True, text=True, timeout=a.timeout)
            text, rc = r.stdout + r.stderr, r.returncode
        except subprocess.TimeoutExpired:
            text, rc = "timed out", 124
        with open(path[:-5] + ".log", "w") as f:
            f.write(text)
        lines = [l.strip() for l in text.splitlines() if match.search(l)]
        if rc >= 2 and text.strip():
            lines.append("refused: " + text.strip().splitlines()[-1].strip())
        label = " ".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in combo)
        return rc, f"[{i}] {label} rc={rc}\n" + "".join(f"    {l}\n" for l in lines)

    combos = list(itertools.product(*axes)) if axes else [()]
    refused = 0
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        for rc, line in ex.map(lambda ic: run(*ic), enumerate(combos)):
            print(line, end="", flush=True)
            refused += rc >= 2
    if refused:
        print(f"sweep.py: {refused} of {len(combos)} variation(s) refused (exit >= 2)",
              file=sys.stderr)
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
