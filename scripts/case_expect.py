#!/usr/bin/env python3
"""Writes tests/cases/NAME.expect.json from a replay of tests/cases/NAME.json (docs/cases.md).

usage: scripts/case_expect.py [--mlasim build/bin/mlasim] tests/cases/NAME.json [...]

The expectation keeps the replay report's verdict, token counts and, per violation, the fields
that identify it (tests/sim/cases_test.cpp compares exactly these). Review the written file: it
records what mlasim does today, and a case is only worth keeping when that is what should happen.
"""
import argparse
import json
import pathlib
import subprocess
import sys

TOP_KEYS = ["verdict", "scheduled_tokens", "running_tokens"]
VIOLATION_KEYS = ["kind", "class", "step", "call", "buffer", "access", "first_row", "last_row",
                  "rows_past_end", "bytes_past_end", "consequence"]


def expectation(mlasim, case):
    run = subprocess.run([mlasim, "replay", str(case), "--json"], capture_output=True, text=True)
    if run.returncode not in (0, 1):  # 0 clean, 1 violations, 2 bad input
        sys.exit(f"case_expect: {case}: mlasim replay exited {run.returncode}: {run.stderr.strip()}")
    report = json.loads(run.stdout)
    out = {k: report[k] for k in TOP_KEYS}
    out["violations"] = [{k: v[k] for k in VIOLATION_KEYS} for v in report["violations"]]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mlasim", default="build/bin/mlasim")
    ap.add_argument("cases", nargs="+", type=pathlib.Path)
    args = ap.parse_args()
    for case in args.cases:
        if case.name.endswith(".expect.json") or case.suffix != ".json":
            sys.exit(f"case_expect: {case}: give the scenario file, NAME.json")
        target = case.with_name(case.stem + ".expect.json")
        exp = expectation(args.mlasim, case)
        target.write_text(json.dumps(exp, indent=1) + "\n")
        print(f"{target}: {exp['verdict']}, {len(exp['violations'])} violation(s)")


if __name__ == "__main__":
    main()
