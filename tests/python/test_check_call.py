"""mlasim.check_call: a small ATOM-like MTP step loop in Python (padded graph batches, mlasim.plan
as its planner, real tensors) reproduces the founding overrun -- q/o sized for the real tokens,
the plan covering the padded batch, the asm kernel reading q and writing o for the zero-KV
padding items -- through check_call and through capture -> `mlasim check`; the fix (q/o sized
for the padded batch) passes. Bad arguments raise TypeError / ValueError naming them."""

import json
import time

import numpy as np
import pytest
import torch

import mlasim
from conftest import run_check

HEADS, Q_COLS, O_COLS = 16, 576, 512
GRAPH_RUNGS = (1, 2, 4, 8, 16, 32, 64)
MTP_K = 3  # draft tokens per request: each verify step runs K + 1 tokens per request


def rung(batch):
    return next(r for r in GRAPH_RUNGS if r >= batch)


class MtpEngine:
    """A decode step as ATOM runs it under CUDA graphs: the batch is padded to the next graph
    rung with zero-KV requests for the planner; q and o are allocated for the scheduled tokens
    (the bug) or for the padded batch (the fix, #2715)."""

    def __init__(self, fixed):
        self.fixed = fixed

    def step(self, kv_lens):
        real = len(kv_lens)
        padded = rung(real)
        qlen = MTP_K + 1
        plan = mlasim.plan(kv_lens=list(kv_lens) + [0] * (padded - real), qlen=qlen,
                           max_seqlen_qo=qlen, num_heads_per_head_k=HEADS, cu_count=80)
        rows = (padded if self.fixed else real) * qlen
        q = torch.zeros(rows, HEADS, Q_COLS, dtype=torch.bfloat16)
        o = torch.empty(rows, HEADS, O_COLS, dtype=torch.bfloat16)
        return plan, q, o


def batches():
    # 61 requests padded to 64 (the fault report's batch), then 5 -> 8, then an exact rung.
    return [[200 + 13 * i for i in range(61)], [90, 4000, 17, 600, 33], [128] * 16]


def capture_step(path, plan, q, o):
    """Captures one asm decode call of an MtpEngine step: plan buffers, planner arrays, q, o."""
    req = plan.request
    return mlasim.capture(path, "mla_decode_fwd",
                          config={"planner": plan.planner_config, "kernel": "asm"},
                          **plan.buffers(), q=q, o=o,
                          qo_indptr=np.asarray(req.qo_indptr, np.int32),
                          kv_indptr=np.asarray(req.kv_indptr, np.int32),
                          kv_last_page_lens=np.asarray(req.kv_last_page_lens, np.int32))


def test_the_padded_mtp_step_overruns_q_and_o_and_check_call_names_it():
    engine = MtpEngine(fixed=False)
    raised = []
    for kv_lens in batches():
        plan, q, o = engine.step(kv_lens)
        if len(kv_lens) == rung(len(kv_lens)):
            mlasim.check_call("mla_decode_fwd", "asm", plan=plan, q=q, o=o)  # no padding: clean
            continue
        with pytest.raises(mlasim.PlanViolation) as e:
            mlasim.check_call("mla_decode_fwd", "asm", plan=plan, q=q, o=o)
        raised.append(e.value)
    first = raised[0]
    assert first.call == "mla_decode_fwd" and first.contract == "aiter-asm-decode"
    # 61 real requests x 4 tokens = 244 rows; the plan covers 64 x 4 = 256.
    assert [(v["buffer"], v["access"], v["rows"], v["first_row"], v["last_row"],
             v["rows_past_end"]) for v in first.violations] == [
        ("o", "write", 244, 244, 255, 12), ("q", "read", 244, 244, 255, 12)]
    assert (first.buffer, first.rows_past_end) == ("o", 12)
    # The zero-KV padding items: one per padding request (batch_idx >= 61).
    plan, _, _ = engine.step(batches()[0])
    expected = [w for w in range(plan.num_works) if plan.work_info[w][0] >= 61]
    assert first.work_items == expected and len(expected) == 3
    assert str(first).splitlines()[1] == (
        f"  mla_decode_fwd (aiter-asm-decode) writes o rows 244..255 of 244: 12 rows past its "
        f"end (3 work items: {expected[0]}, {expected[1]}, {expected[2]})")
    second = raised[1]  # 5 -> 8: three padding requests, 12 rows
    assert (second.buffer, second.rows, second.first_row, second.rows_past_end) == \
        ("o", 20, 20, 12)


def test_the_fix_sizes_q_and_o_for_the_padded_batch_and_passes():
    engine = MtpEngine(fixed=True)
    for kv_lens in batches():
        plan, q, o = engine.step(kv_lens)
        assert mlasim.check_call("mla_decode_fwd", "asm", plan=plan, q=q, o=o) is None


def test_hk_reads_q_but_writes_no_o_for_padding_and_a_skipping_contract_is_clean(tmp_path):
    plan, q, o = MtpEngine(fixed=False).step(batches()[1])
    with pytest.raises(mlasim.PlanViolation) as e:
        mlasim.check_call("mla_decode_fwd", "hk", plan=plan, q=q, o=o)
    assert [v["buffer"] for v in e.value.violations] == ["q"]
    skips = tmp_path / "skips.json"
    skips.write_text(json.dumps({"extends": "asm", "name": "skips-zero-kv",
                                 "semantics": {"zero_kv": "skips"}}))
    assert mlasim.check_call("mla_decode_fwd", str(skips), plan=plan, q=q, o=o) is None


def test_capture_then_mlasim_check_reports_the_same_finding(tmp_path, mlasim_bin):
    plan, q, o = MtpEngine(fixed=False).step(batches()[1])
    with pytest.raises(mlasim.PlanViolation) as e:
        mlasim.check_call("mla_decode_fwd", "asm", plan=plan, q=q, o=o)
    req = plan.request
    case = capture_step(tmp_path / "case", plan, q, o)
    r = run_check(mlasim_bin, case)
    assert r.returncode == 1, r.stderr
    lines = r.stdout.splitlines()
    at = lines.index("contracts: checked, 1 call (mla_decode_fwd under aiter-asm-decode "
                     "(builtin:aiter-decode-asm.json)), 2 findings")
    assert lines[at + 1:at + 3] == ["  " + v["text"] for v in e.value.violations]
    j = json.loads(run_check(mlasim_bin, case, "--json").stdout)
    assert [(f["tensor"], f["rows_past_end"], f["work_items"])
            for f in j["contracts"]["findings"]] == \
        [(v["buffer"], v["rows_past_end"], v["work_items"]) for v in e.value.violations]
    # The fixed step's capture is clean.
    plan, q, o = MtpEngine(fixed=True).step(batches()[1])
    fixed = mlasim.capture(tmp_path / "fixed", "mla_decode_fwd",
                           config={"planner": plan.planner_config}, **plan.buffers(), q=q, o=o,
                           qo_indptr=np.asarray(req.qo_indptr, np.int32),
                           kv_indptr=np.asarray(req.kv_indptr, np.int32),
                           kv_last_page_lens=np.asarray(req.kv_last_page_lens, np.int32))
    r = run_check(mlasim_bin, fixed)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ("contracts: checked, 1 call (mla_decode_fwd under aiter-asm-decode "
            "(builtin:aiter-decode-asm.json)), no finding") in r.stdout


def test_a_work_indptr_walk_past_loop_trips_raises_instead_of_passing():
    """A workgroup told to walk 2^31 - 1 work items: the executor walks none of them (more than
    loop_trips) and reports a hang. check_call returned None for it (only out-of-bounds
    findings were kept), where a walk of 1000 items named the work_info rows past its end."""
    plan, q, o = MtpEngine(fixed=True).step(batches()[1])
    work_indptr = plan.work_indptr.copy()
    work_indptr[1:] = 1000
    with pytest.raises(mlasim.PlanViolation) as small:
        mlasim.check_call("mla_decode_fwd", "asm", plan=plan, q=q, o=o, work_indptr=work_indptr)
    assert small.value.buffer == "work_info"
    work_indptr[1:] = 2**31 - 1
    with pytest.raises(mlasim.PlanViolation) as huge:
        mlasim.check_call("mla_decode_fwd", "asm", plan=plan, q=q, o=o, work_indptr=work_indptr)
    assert str(huge.value) == (
        "mla_decode_fwd (aiter-asm-decode) does not finish: work -1 would walk 2147483647 "
        "iterations (bound 67108864): above loop_trips, the longest loop mlasim walks; reported "
        "as a hang")


def test_bad_arguments_name_the_argument(tmp_path):
    plan, q, o = MtpEngine(fixed=True).step(batches()[1])
    cases = [
        (TypeError, "call:", dict(call=3)),
        (ValueError, "call:", dict(call="my_attention")),
        (ValueError, "contract:", dict(contract="triton")),
        (ValueError, "contract:", dict(contract=str(tmp_path / "missing.json"))),
        (ValueError, "kind:", dict(kind="prefill")),
        (ValueError, "o:", dict(o=None)),
        (TypeError, "qq:", dict(qq=q)),
        (TypeError, "q:", dict(q=[1, 2])),
        (ValueError, "q:", dict(q=torch.zeros(4, 20, 576), fold_ratio=8)),
        (ValueError, "fold_ratio:", dict(fold_ratio=0)),
        (TypeError, "page_size:", dict(page_size=1.5)),
        (TypeError, "work_info:", dict(work_info=plan.work_info.astype(np.int64))),
        (ValueError, "work_info:", dict(work_info=np.zeros((3, 7), np.int32))),
        (TypeError, "plan:", dict(plan="a plan")),
        # q and o are [tokens, heads, D]; only the tokens may be 0
        (ValueError, "q: must be [tokens, heads, D]: got 0", dict(q=np.zeros(()))),
        (ValueError, "q: must be [tokens, heads, D]: got 1", dict(q=np.zeros(5))),
        (ValueError, "o: dimension 1 is 0", dict(o=torch.zeros(3, 0, 512))),
    ]
    for exc, prefix, over in cases:
        args = dict(call="mla_decode_fwd", contract="asm", plan=plan, q=q, o=o)
        args.update(over)
        call = args.pop("call")
        with pytest.raises(exc) as e:
            mlasim.check_call(call, **args)
        assert str(e.value).startswith(prefix), (over, str(e.value))


def test_microseconds_per_call_at_b256():
    # Not an assertion on speed: the figure is printed for docs/performance.md (run with -s).
    kv_lens = [500 + (37 * i) % 3000 for i in range(256)]
    plan = mlasim.plan(kv_lens=kv_lens, qlen=1, num_heads_per_head_k=HEADS, cu_count=80)
    q = torch.zeros(256, HEADS, Q_COLS, dtype=torch.bfloat16)
    o = torch.empty(256, HEADS, O_COLS, dtype=torch.bfloat16)
    bufs = {name: getattr(plan, name) for name in mlasim.BUFFER_NAMES}
    arrays = {name: np.asarray(getattr(plan.request, name), np.int32)
              for name in ("qo_indptr", "kv_indptr", "kv_last_page_lens")}
    mlasim.check_call("mla_decode_fwd", "asm", q=q, o=o, **bufs, **arrays)
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(200):
            mlasim.check_call("mla_decode_fwd", "asm", q=q, o=o, **bufs, **arrays)
        times.append((time.perf_counter() - t0) / 200 * 1e6)
    print(f"\ncheck_call mla_decode_fwd asm, B=256, {plan.num_works} works: "
          f"median {sorted(times)[2]:.1f} us per call")


def test_a_fault_inside_the_tensor_after_o_is_attributed_to_the_overrun(tmp_path, mlasim_bin):
    # A caching allocator (torch's, on CUDA or ROCm) places q right after o in one segment: the
    # padding items' o rows 20..31 are q's bytes, and the fault address lies inside q. `check`
    # attributes it to the contract finding whose rows hold it (o row 20, head 1), not to q.
    plan, q, o = MtpEngine(fixed=False).step(batches()[1])
    case = capture_step(tmp_path / "case", plan, q, o)
    manifest_path = tmp_path / "case" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    o_ptr, o_bytes = 0x7f0000000000, 20 * HEADS * O_COLS * 2
    manifest["tensors"]["o"]["data_ptr"] = hex(o_ptr)
    manifest["tensors"]["q"]["data_ptr"] = hex(o_ptr + o_bytes)  # adjacent, as in one segment
    manifest_path.write_text(json.dumps(manifest))
    address = o_ptr + o_bytes + 1024 + 6
    log = tmp_path / "fault.log"
    log.write_text(f"Memory access fault by GPU node-2 (Agent handle: 0x1) on address "
                   f"{address:#x}. Reason: Page not present or supervisor privilege.\n")
    r = run_check(mlasim_bin, case, "--fault-log", log)
    assert r.returncode == 1, r.stderr
    overrun = (f"{address:#x} is row 20 (head 1, column 3) of o, one of the rows 20..31 past its "
               f"end that mla_decode_fwd writes: the contract finding above reaches the fault")
    assert (f"  {address:#x} is inside q at byte 1030 = row 0, head 0, column 515 (20 rows)\n"
            f"  {overrun}\n") in r.stdout
    assert r.stdout.endswith("verdict: FAILED (3 findings)\n")  # o, q and the fault
    report = json.loads(run_check(mlasim_bin, case, "--fault-log", log, "--json").stdout)
    assert report["findings"][-1] == f"fault: {overrun}"
    fault = report["fault"]
    assert (fault["tensor"], fault["inside"]) == ("q", True)
    assert fault["overrun"] == {"tensor": "o", "access": "write", "row": 20, "head": 1,
                                "column": 3, "text": overrun}
    # An address in no out-of-range row (inside q, past o's rows 20..31) is q's alone.
    far = o_ptr + 32 * HEADS * O_COLS * 2 + 8
    log.write_text(f"Memory access fault by GPU node-2 (Agent handle: 0x1) on address "
                   f"{far:#x}. Reason: Page not present or supervisor privilege.\n")
    r = run_check(mlasim_bin, case, "--fault-log", log, "--json")
    assert json.loads(r.stdout)["fault"]["overrun"] is None


def kv_step(table_value=None, at=305, **kw):
    """A padded-batch step sized for the padded rows (clean for q / o), with a page table of one
    token per page over a 1,300-token cache; `table_value` replaces entry `at`."""
    plan = mlasim.plan(kv_lens=[300, 40, 700, 120, 90, 50, 0, 0], qlen=4, max_seqlen_qo=4,
                       num_heads_per_head_k=HEADS, cu_count=8)
    q = torch.zeros(32, HEADS, Q_COLS, dtype=torch.bfloat16)
    o = torch.empty(32, HEADS, O_COLS, dtype=torch.bfloat16)
    table = torch.arange(1299, -1, -1, dtype=torch.int32)
    if table_value is not None:
        table[at] = table_value
    kv = torch.zeros(1300, 1, Q_COLS, dtype=torch.bfloat16)
    return mlasim.check_call("mla_decode_fwd", plan=plan, q=q, o=o, kv_indices=table,
                             kv_cache=kv, **kw)


def test_check_kv_reads_the_page_tables_values_and_names_an_index_outside_the_cache():
    assert kv_step(check_kv=True) is None
    assert kv_step(1300) is None  # shape-only by default: the values are not read
    with pytest.raises(mlasim.PlanViolation) as e:
        kv_step(1300, check_kv=True)
    (v,) = e.value.violations
    assert (v["buffer"], v["access"], v["first_row"], v["rows"], v["rows_past_end"]) == (
        "kv_cache", "read", 1300, 1300, 1)
    assert v["text"].startswith("mla_decode_fwd (aiter-asm-decode) reads kv_cache rows 1300..1300 "
                                "of 1300: 1 row past its end (1 work item: ")
    with pytest.raises(mlasim.PlanViolation) as e:
        kv_step(-1, check_kv=True)
    assert e.value.violations[0]["rows_before_start"] == 1
    assert kv_step(-1, check_kv=True, masked_index=-1) is None
    assert kv_step(1299, check_kv=True) is None  # the last row: the boundary


def test_check_kv_needs_the_cache_and_an_int32_table():
    plan = mlasim.plan(kv_lens=[10], num_heads_per_head_k=HEADS, cu_count=8)
    q = torch.zeros(1, HEADS, Q_COLS, dtype=torch.bfloat16)
    o = torch.empty(1, HEADS, O_COLS, dtype=torch.bfloat16)
    table = torch.arange(10, dtype=torch.int32)
    with pytest.raises(ValueError, match=r"^check_kv: needs kv_cache \(or kv_buffer\) and kv_indices$"):
        mlasim.check_call("mla_decode_fwd", plan=plan, q=q, o=o, kv_indices=table, check_kv=True)
    with pytest.raises(TypeError, match=r"^kv_indices: dtype is int64, expected int32"):
        mlasim.check_call("mla_decode_fwd", plan=plan, q=q, o=o, kv_indices=table.long(),
                          kv_buffer=torch.zeros(10, 1, Q_COLS), check_kv=True)
    with pytest.raises(ValueError, match=r"^kv_cache: has 1 dimensions"):
        mlasim.check_call("mla_decode_fwd", plan=plan, q=q, o=o, kv_indices=table,
                          kv_cache=torch.zeros(10), check_kv=True)
    with pytest.raises(TypeError, match=r"^check_kv: expected True or False, got int$"):
        mlasim.check_call("mla_decode_fwd", plan=plan, q=q, o=o, check_kv=1)
    # kv_buffer is kv_cache's other name; 10 rows of the 12-row cache: clean.
    assert mlasim.check_call("mla_decode_fwd", plan=plan, q=q, o=o, kv_indices=table,
                             kv_buffer=torch.zeros(12, 1, Q_COLS), check_kv=True) is None
