#!/usr/bin/env python3
"""Writes tests/cases/NAME.expect.json from `mlasim replay NAME.json --json`: the verdict, the
step's token counts and every violation's identifying fields (the keys
tests/sim/cases_test.cpp compares). Usage: scripts/write-expect.py build/bin/mlasim CASE.json...
Review the diff before committing: an expect file states what the case must show."""
import json
import subprocess
import sys

KEYS = ["kind", "class", "step", "call", "buffer", "access", "first_row", "last_row",
        "rows_past_end", "bytes_past_end", "rows_before_start", "bytes_before_start",
        "consequence"]

mlasim = sys.argv[1]
for case in sys.argv[2:]:
    run = subprocess.run([mlasim, "replay", case, "--json"], capture_output=True, text=True)
    if run.returncode not in (0, 1):
        sys.exit(f"{case}: mlasim replay exited {run.returncode}: {run.stderr}")
    report = json.loads(run.stdout)
    expect = {k: report[k] for k in ("verdict", "scheduled_tokens", "running_tokens")}
    expect["violations"] = [{k: v[k] for k in KEYS if k in v} for v in report["violations"]]
    with open(case[:-len(".json")] + ".expect.json", "w") as f:
        json.dump(expect, f, indent=1, ensure_ascii=False)
        f.write("\n")
