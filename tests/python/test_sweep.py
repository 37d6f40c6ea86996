"""tools/gpu/sweep.py (docs/kernel-under-test.md "Triage a finding"): a finding's scenario replayed
over a grid of variations, with the plain CPU replay: each variation's line, exit code and
verdict in grid order; a key the replay refuses is shown with the replay's error and makes the
sweep exit 1; bad arguments exit 2 naming the argument."""

import os
import subprocess
import sys

from conftest import SOURCE_DIR

SWEEP = SOURCE_DIR / "tools" / "gpu" / "sweep.py"
CASE = SOURCE_DIR / "tests" / "kut" / "cases" / "flashinfer-causal-kv-end-floor.json"


def sweep(tmp_path, *args, command=None):
    mlasim = os.environ["MLASIM_BIN"]
    cmd = [sys.executable, str(SWEEP), str(CASE), "--out", str(tmp_path / "out"), *args, "--"]
    cmd += command if command is not None else [mlasim, "replay"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_each_variation_prints_its_exit_code_and_verdict_in_grid_order(tmp_path, mlasim_bin):
    r = sweep(tmp_path, "--grid", "batch.contexts=[[64],[65]]", "--grid", "mtp.k=[0,2]",
              "--jobs", "2")
    assert r.returncode == 0, r.stderr
    heads = [l for l in r.stdout.splitlines() if l.startswith("[")]
    assert heads == ["[0] batch.contexts=[64] mtp.k=0 rc=0", "[1] batch.contexts=[64] mtp.k=2 rc=1",
                     "[2] batch.contexts=[65] mtp.k=0 rc=0", "[3] batch.contexts=[65] mtp.k=2 rc=1"]
    assert "    verdict: 5 violation(s)\n" in r.stdout
    assert sorted(os.listdir(tmp_path / "out")) == [
        f"sweep-{i}.{e}" for i in range(4) for e in ("json", "log")]


def test_a_refused_variation_shows_the_replays_error_and_exits_1(tmp_path, mlasim_bin):
    r = sweep(tmp_path, "--grid", "nosuch.key=[1]")
    assert r.returncode == 1
    assert r.stdout == ("[0] nosuch.key=1 rc=2\n"
                        f"    refused: mlasim replay: error: {tmp_path}/out/sweep-0.json: $.nosuch: "
                        "unknown key\n")
    assert r.stderr == "sweep.py: 1 of 1 variation(s) refused (exit >= 2)\n"


def test_bad_arguments_exit_2_naming_them(tmp_path, mlasim_bin):
    cases = [(["--grid", "mtp.k"], "--grid mtp.k: expected KEY=[v1, v2, ...] with a dotted KEY"),
             (["--grid", "mtp.k=[]"], "--grid mtp.k=[]: expected KEY=[v1, v2, ...]"),
             (["--grid", "mtp.k=[0"], "--grid mtp.k=[0: the values are not JSON"),
             (["--jobs", "0"], "--jobs and --timeout must be >= 1")]
    for args, message in cases:
        r = sweep(tmp_path, *args)
        assert r.returncode == 2, args
        assert message in r.stderr, (args, r.stderr)
    r = sweep(tmp_path, command=["no-such-mlasim", "replay"])
    assert r.returncode == 2
    assert "the replay command 'no-such-mlasim' is not an executable" in r.stderr
    r = sweep(tmp_path, command=[])
    assert r.returncode == 2 and "the replay command after -- is missing" in r.stderr
