#!/usr/bin/env python3
"""ctest junit_well_formed: the JUnit files of `mlasim replay --junit` and `mlasim fuzz --junit`
(and `fuzz merge --junit`) parse with Python's XML parser, and what they say agrees with the
command's own JSON / summary: one <testcase> per call of the replay, a failure exactly for the
calls with violations, one per finding of a campaign, and totals that match the test cases.

Usage: junit_well_formed.py PATH/TO/mlasim
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET


def run(args, codes):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode not in codes:
        sys.exit(f"{' '.join(args)}: exit {p.returncode}, expected {codes}\n{p.stderr}")
    return p.stdout


def parse(path):
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(b'<?xml version="1.0" encoding="UTF-8"?>\n'):
        sys.exit(f"{path}: no XML declaration")
    root = ET.fromstring(data)  # raises on anything that is not well-formed
    if root.tag != "testsuites":
        sys.exit(f"{path}: root is <{root.tag}>, not <testsuites>")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in root.findall("testsuite"):
        cases = suite.findall("testcase")
        count = {
            "tests": len(cases),
            "failures": sum(c.find("failure") is not None for c in cases),
            "errors": sum(c.find("error") is not None for c in cases),
            "skipped": sum(c.find("skipped") is not None for c in cases),
        }
        for k, v in count.items():
            if suite.get(k) != str(v):
                sys.exit(f"{path}: suite {suite.get('name')} says {k}={suite.get(k)}, has {v}")
            totals[k] += v
        for c in cases:
            for a in ("classname", "name", "time"):
                if c.get(a) is None:
                    sys.exit(f"{path}: a testcase without {a}")
    for k, v in totals.items():
        if root.get(k) != str(v):
            sys.exit(f"{path}: <testsuites> says {k}={root.get(k)}, has {v}")
    return root


def check_replay(mlasim, tmp):
    for case in ("seed", "seed-b35", "dense-mtp"):
        path = os.path.join(tmp, f"replay-{case}.xml")
        run([mlasim, "replay", "--builtin", case, "--junit", path], (0, 1))
        report = json.loads(run([mlasim, "replay", "--builtin", case, "--json"], (0, 1)))
        cases = parse(path).find("testsuite").findall("testcase")
        if len(cases) != report["calls"]:
            sys.exit(f"{case}: {len(cases)} test cases for {report['calls']} calls")
        bad = {v["call_index"] for v in report["violations"]}
        for i, c in enumerate(cases):
            failed = c.find("failure") is not None
            if failed != (i in bad):
                sys.exit(f"{case}: call {i} failed={failed}, violations={i in bad}")
            if c.get("classname") != "replay." + report["call_list"][i]["step"]:
                sys.exit(f"{case}: call {i} has classname {c.get('classname')}")
        print(f"replay {case}: {len(cases)} test cases, {len(bad)} failing: ok")


def check_fuzz(mlasim, tmp):
    out = os.path.join(tmp, "findings")
    path = os.path.join(tmp, "fuzz.xml")
    summary = run([mlasim, "fuzz", "--cases", "20", "--seed", "7", "--small", "--shrink-steps",
                   "1", "--out", out, "--junit", path], (1,))
    findings = int(re.search(r"\nfindings (\d+): (\d+) new", summary).group(1))
    suite = parse(path).find("testsuite")
    cases = suite.findall("testcase")
    if len(cases) != findings + 1 or suite.get("failures") != str(findings):
        sys.exit(f"fuzz: {len(cases)} test cases, {suite.get('failures')} failures for "
                 f"{findings} findings")
    merged = os.path.join(tmp, "merge.xml")
    run([mlasim, "fuzz", "merge", out, "--junit", merged], (0,))
    if parse(merged).find("testsuite").get("failures") != str(findings):
        sys.exit("fuzz merge: the failures are not the findings")
    print(f"fuzz: {findings} findings as failures, merge agrees: ok")


def main():
    mlasim = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="mlasim-junit-") as tmp:
        check_replay(mlasim, tmp)
        check_fuzz(mlasim, tmp)


if __name__ == "__main__":
    main()
