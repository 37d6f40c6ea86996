"""`mlasim check CASE --scenario-out FILE`: the founding overrun captured from the Python MTP step
loop (61 requests padded to 64, K = 3, q and o of the scheduled tokens) becomes a scenario whose
replay shows the same violations -- the same tensors, accesses, rows and work items -- as the
case's contract check; the fixed step's scenario replays clean; bad uses exit 2."""

import json
import subprocess

import numpy as np
import torch

import mlasim
from conftest import run_check
from test_check_call import MtpEngine, batches


def capture_step(path, fixed, extra_config=None):
    plan, q, o = MtpEngine(fixed=fixed).step(batches()[0])
    req = plan.request
    config = {"planner": plan.planner_config, "kernel": "asm"}
    config.update(extra_config or {})
    return mlasim.capture(path, "mla_decode_fwd", config=config, **plan.buffers(), q=q, o=o,
                          qo_indptr=np.asarray(req.qo_indptr, np.int32),
                          kv_indptr=np.asarray(req.kv_indptr, np.int32),
                          kv_last_page_lens=np.asarray(req.kv_last_page_lens, np.int32))


def replay(mlasim_bin, path, *args):
    return subprocess.run([mlasim_bin, "replay", str(path), *args], capture_output=True,
                          text=True, timeout=120)


def test_the_founding_case_replays_with_the_same_violations(tmp_path, mlasim_bin):
    case = capture_step(tmp_path / "case", fixed=False)
    out = tmp_path / "step.json"
    r = run_check(mlasim_bin, case, "--scenario-out", out, "--json")
    assert r.returncode == 1, r.stderr
    report = json.loads(r.stdout)
    assert report["scenario_out"] == {
        "file": str(out), "call": "draft_step_0.dense_decode", "overridden": False,
        "requests": 61, "padded_requests": 64, "mtp_k": 3, "engine": "atom-2026-08"}
    checked = [(f["tensor"], f["access"], f["first_row"], f["end_row"] - 1, f["rows_past_end"],
                f["work_items"]) for f in report["contracts"]["findings"]]
    assert [c[:5] for c in checked] == [("o", "write", 244, 255, 12), ("q", "read", 244, 255, 12)]
    scenario = json.loads(out.read_text())
    assert scenario["batch"]["contexts"] == [200 + 13 * i for i in range(61)]
    assert scenario["graph"]["capture_sizes"] == [64] and scenario["mtp"] == {"k": 3}
    assert scenario["model"]["heads"] == 16 and scenario["kernel"] == "asm"
    rp = replay(mlasim_bin, out, "--json")
    assert rp.returncode == 1, rp.stderr
    v = [x for x in json.loads(rp.stdout)["violations"]
         if (x["step"], x["call"]) == ("draft_step_0", "dense_decode")]
    replayed = [(x["buffer"], x["access"], x["first_row"], x["last_row"], x["rows_past_end"],
                 x["work_items"][:8]) for x in v]
    assert sorted(replayed) == sorted(checked)
    # The signatures: class A overruns of q and o at draft step 0, the known dense family.
    assert sorted(f"{x['step']}|{x['call']}|{x['buffer']}|{x['access']}|{x['class']}"
                  for x in v) == ["draft_step_0|dense_decode|o|write|A",
                                  "draft_step_0|dense_decode|q|read|A"]
    text = run_check(mlasim_bin, case, "--scenario-out", out).stdout
    assert (f"scenario: wrote {out}: 61 requests padded to 64, MTP K 3, kernel asm, engine "
            f"atom-2026-08; the captured call is draft_step_0.dense_decode of the engine's step "
            f"(mlasim replay {out})\n") in text


def test_rows_the_engine_would_not_allocate_become_an_override(tmp_path, mlasim_bin):
    # q and o of the scheduled tokens but the TP-8 engine config: the same step, heads x 8.
    case = capture_step(tmp_path / "case", fixed=False, extra_config={"engine": {"tp": 8}})
    out = tmp_path / "step.json"
    assert run_check(mlasim_bin, case, "--scenario-out", out).returncode == 1
    scenario = json.loads(out.read_text())
    assert scenario["model"]["heads"] == 128 and scenario["parallelism"]["tp"] == 8
    # The fixed step (q/o of the padded batch): the engine's verify call itself, replayed clean
    # at verify; draft step 0 of the engine still overruns (an open family), so select verify.
    fixed = capture_step(tmp_path / "fixed", fixed=True)
    r = run_check(mlasim_bin, fixed, "--scenario-out", out, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["scenario_out"]["call"] == "verify.dense_decode"
    rp = json.loads(replay(mlasim_bin, out, "--json").stdout)
    assert [x for x in rp["violations"] if x["step"] == "verify"] == []


def test_a_reduce_case_replays_as_the_reduce_after_its_decode(tmp_path, mlasim_bin):
    # The captured reduce of draft step 0 (its o of the 20 scheduled tokens, no partial rows):
    # the scenario's call is that step's reduce, which the replay finds clean (the step's decode
    # overruns, the known dense family: not the reduce's doing); the case alone cannot be
    # contract-checked without its logits, and says so.
    plan, q, o = MtpEngine(fixed=False).step(batches()[1])
    req = plan.request
    case = mlasim.capture(tmp_path / "reduce", "mla_reduce_v1",
                          config={"planner": plan.planner_config}, **plan.buffers(), o=o,
                          kv_indptr=np.asarray(req.kv_indptr, np.int32),
                          qo_indptr=np.asarray(req.qo_indptr, np.int32),
                          kv_last_page_lens=np.asarray(req.kv_last_page_lens, np.int32))
    out = tmp_path / "step.json"
    r = run_check(mlasim_bin, case, "--scenario-out", out, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert report["scenario_out"] == {
        "file": str(out), "call": "draft_step_0.dense_reduce", "overridden": False,
        "requests": 5, "padded_requests": 8, "mtp_k": 3, "engine": "atom-2026-08"}
    assert not report["contracts"]["checked"] and report["contracts"]["findings"] == []
    assert report["contracts"]["reason"].startswith("the case lacks tensors.logits")
    rp = replay(mlasim_bin, out, "--json")
    v = json.loads(rp.stdout)["violations"]
    assert [x for x in v if (x["step"], x["call"]) == ("draft_step_0", "dense_reduce")] == []
    assert sorted(f"{x['step']}|{x['call']}|{x['buffer']}|{x['access']}" for x in v
                  if x["step"] == "draft_step_0") == ["draft_step_0|dense_decode|o|write",
                                                      "draft_step_0|dense_decode|q|read"]


def test_scenario_out_needs_a_kernel_call_and_a_writable_file(tmp_path, mlasim_bin):
    case = capture_step(tmp_path / "case", fixed=False)
    r = run_check(mlasim_bin, case, "--scenario-out", tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == f"mlasim check: error: --scenario-out: {tmp_path} is a directory, not a file\n"
    plan, q, o = MtpEngine(fixed=False).step(batches()[1])
    update_case = mlasim.capture(tmp_path / "update", "decode_update_mla_metadata_v1",
                                 config={"planner": plan.planner_config}, **plan.buffers(),
                                 kv_indptr=np.asarray(plan.request.kv_indptr, np.int32),
                                 qo_indptr=np.asarray(plan.request.qo_indptr, np.int32),
                                 kv_last_page_lens=np.asarray(plan.request.kv_last_page_lens,
                                                              np.int32))
    r = run_check(mlasim_bin, update_case, "--scenario-out", tmp_path / "s.json")
    assert r.returncode == 2
    assert r.stderr == (f"mlasim check: error: {update_case}/manifest.json:call: --scenario-out "
                        f"reproduces decode and reduce calls; 'decode_update_mla_metadata_v1' is "
                        f"a plan_update\n")
    bad = capture_step(tmp_path / "bad", fixed=False, extra_config={"engine": {"tp": 0}})
    r = run_check(mlasim_bin, bad, "--scenario-out", tmp_path / "s.json")
    assert r.returncode == 2
    assert r.stderr == (f"mlasim check: error: {bad}/manifest.json:config.engine.tp: must be an "
                        f"integer 1..64\n")


def test_a_request_shorter_than_its_verify_tokens_is_no_scenario(tmp_path, mlasim_bin):
    # KV 2 < Q = 4: the engine never plans such a verify step; the scenario's own rule says so.
    plan = mlasim.plan(kv_lens=[2, 300, 0], qlen=4, max_seqlen_qo=4, num_heads_per_head_k=16,
                       cu_count=80)
    req = plan.request
    case = mlasim.capture(tmp_path / "case", "mla_decode_fwd",
                          config={"planner": plan.planner_config, "kernel": "asm"},
                          **plan.buffers(), q=torch.zeros(8, 16, 576, dtype=torch.bfloat16),
                          o=torch.zeros(8, 16, 512, dtype=torch.bfloat16),
                          qo_indptr=np.asarray(req.qo_indptr, np.int32),
                          kv_indptr=np.asarray(req.kv_indptr, np.int32),
                          kv_last_page_lens=np.asarray(req.kv_last_page_lens, np.int32))
    r = run_check(mlasim_bin, case, "--scenario-out", tmp_path / "s.json")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == (f"mlasim check: error: {case}/manifest.json: the case does not make a "
                        f"valid scenario: $.batch.contexts[0]: context minus rejected_prev must "
                        f"hold this step's 4 verify tokens (got 2)\n")
    assert not (tmp_path / "s.json").exists() or (tmp_path / "s.json").read_text() == ""
