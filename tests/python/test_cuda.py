"""The Python package with CUDA tensors (docs/python.md, "CUDA tensors"): plan(out=...) into device
buffers, check_plan / check_call on device tensors, capture of device tensors (their device
addresses in the manifest, a fault address inside a device allocation attributed by `mlasim
check`) and the numerics of a decode computed on the GPU by torch. Skipped where torch sees no
CUDA device (CI); run on the H200 by tools/gpu/python.sh, results in docs/gpu-results.md.
MLASIM_TEST_DEVICE=cpu runs them on CPU tensors instead: a dry run of the tests' own logic on a
machine without a GPU (every device-only assertion then holds trivially for "cpu")."""

import json
import os
import time

import numpy as np
import pytest
import torch

import mlasim
from conftest import WORKED, WORKED_WORK_INFO, run_check
from test_check_call import HEADS, MtpEngine, O_COLS, Q_COLS, batches, rung
from test_check_numerics import D, DV, attention

CUDA = torch.device(os.environ.get("MLASIM_TEST_DEVICE", "cuda"))
pytestmark = pytest.mark.skipif(CUDA.type == "cuda" and not torch.cuda.is_available(),
                                reason="torch sees no CUDA device")


def device_plan(plan):
    """The plan buffers as CUDA tensors, as an engine holds them."""
    return {n: torch.from_numpy(np.ascontiguousarray(getattr(plan, n))).to(CUDA)
            for n in mlasim.BUFFER_NAMES}


def request_arrays(plan, device):
    req = plan.request
    return {n: torch.tensor(list(getattr(req, n)), dtype=torch.int32, device=device)
            for n in ("qo_indptr", "kv_indptr", "kv_last_page_lens")}


def test_plan_into_cuda_tensors_writes_the_plan_on_the_device_at_its_addresses():
    shapes = {"work_indptr": (9,), "work_info": (10, 8), "reduce_indptr": (4,),
              "reduce_final_map": (3, 2), "reduce_partial_map": (10,)}
    out = {n: torch.full(s, -7, dtype=torch.int32, device=CUDA) for n, s in shapes.items()}
    out["work_metadata_ptrs"] = torch.zeros(2, dtype=torch.int64, device=CUDA)
    ptrs = {n: t.data_ptr() for n, t in out.items()}
    p = mlasim.plan(out=out, **WORKED)
    for n, t in out.items():
        assert t.device.type == CUDA.type and t.data_ptr() == ptrs[n], n  # the engine's own tensors
    assert out["work_indptr"].tolist() == [0, 1, 2, 3, 4, 5, 6, 6, 6]
    assert out["work_info"][:6].tolist() == WORKED_WORK_INFO
    assert (out["work_info"][6:] == -7).all().item()          # not written: kept on the device
    assert out["reduce_partial_map"].tolist() == [0, 1, 2, 3, 4] + [-7] * 5
    # aiter's work_meta_data holds device addresses, as the kernels dereference them.
    assert out["work_metadata_ptrs"].tolist() == [ptrs["work_indptr"], ptrs["work_info"]]
    assert p.stores_past_end["work_info"] == 0


def test_check_plan_on_cuda_buffers_gives_the_host_verdict():
    plan = mlasim.plan(**WORKED)
    bufs = device_plan(plan)
    assert mlasim.check_plan(bufs, **WORKED).ok
    bufs["work_info"][3, 5] += 1  # kv_end of work 3: one token past its split
    host = {n: np.ascontiguousarray(getattr(plan, n)).copy() for n in mlasim.BUFFER_NAMES}
    host["work_info"][3, 5] += 1
    on_device = mlasim.check_plan(bufs, **WORKED)
    on_host = mlasim.check_plan(host, **WORKED)
    assert not on_device.ok
    assert [d.code for d in on_device.diagnostics] == [d.code for d in on_host.diagnostics] == [
        "kv_offset_mismatch", "tile_kv_not_covered"]


@pytest.mark.parametrize("fixed", [False, True])
def test_check_call_on_cuda_tensors_names_the_same_overrun_as_on_the_host(fixed):
    engine = MtpEngine(fixed=fixed)
    for kv_lens in batches():
        plan, q, o = engine.step(kv_lens)
        dq, do = q.to(CUDA), o.to(CUDA)
        args = dict(plan=plan, q=q, o=o)
        dargs = dict(**device_plan(plan), **request_arrays(plan, CUDA), q=dq, o=do)
        if fixed or len(kv_lens) == rung(len(kv_lens)):
            assert mlasim.check_call("mla_decode_fwd", "asm", **dargs) is None
            continue
        with pytest.raises(mlasim.PlanViolation) as host:
            mlasim.check_call("mla_decode_fwd", "asm", **args)
        with pytest.raises(mlasim.PlanViolation) as device:
            mlasim.check_call("mla_decode_fwd", "asm", **dargs)
        assert device.value.violations == host.value.violations
        assert str(device.value) == str(host.value)
    if not fixed:
        assert (device.value.buffer, device.value.rows_past_end) == ("o", 12)


def test_capture_of_cuda_tensors_keeps_device_addresses_and_check_places_a_fault(tmp_path,
                                                                                  mlasim_bin):
    plan, q, o = MtpEngine(fixed=False).step(batches()[1])  # 5 requests padded to 8
    dq, do = q.to(CUDA), o.to(CUDA)
    case = mlasim.capture(tmp_path / "case", "mla_decode_fwd",
                          config={"planner": plan.planner_config, "kernel": "asm"},
                          **device_plan(plan), **request_arrays(plan, CUDA), q=dq, o=do)
    manifest = json.loads((tmp_path / "case" / "manifest.json").read_text())
    entry = manifest["tensors"]["o"]
    assert entry["device"] == str(do.device)  # "cuda:0"
    assert int(entry["data_ptr"], 16) == do.data_ptr()
    assert entry["shape"] == [20, HEADS, O_COLS] and entry["nbytes"] == 20 * HEADS * O_COLS * 2
    wi = np.load(tmp_path / "case" / "work_info.npy")
    assert np.array_equal(wi, plan.work_info)
    # The padding items write o rows 20..31: a fault 1 KiB past the end of o's device allocation.
    address = do.data_ptr() + do.numel() * 2 + 1024
    log = tmp_path / "fault.log"
    log.write_text(f"Memory access fault by GPU node-2 (Agent handle: 0x1) on address "
                   f"{address:#x}. Reason: Page not present or supervisor privilege.\n")
    r = run_check(mlasim_bin, case, "--fault-log", log)
    assert r.returncode == 1, r.stderr
    # Whatever the allocator put after o (CUDA's caching allocator: often another of these
    # tensors), the address is in the rows the padding items write past o's end.
    assert (f"  {address:#x} is row 20 (head 1, column 0) of o, one of the rows 20..31 past its "
            f"end that mla_decode_fwd writes: the contract finding above reaches the fault\n"
            ) in r.stdout
    print("\n" + next(line for line in r.stdout.splitlines() if line.startswith(f"  {address:#x}")))
    assert "mla_decode_fwd (aiter-asm-decode) writes o rows 20..31 of 20" in r.stdout


def test_a_decode_computed_on_the_gpu_passes_the_numerics(tmp_path, mlasim_bin):
    plan = mlasim.plan(**WORKED)
    req = plan.request
    kv_indptr = np.asarray(req.kv_indptr, np.int32)
    tokens = int(kv_indptr[-1])
    g = torch.Generator(device=CUDA).manual_seed(7)
    q = (torch.rand(3, HEADS, D, generator=g, device=CUDA) * 2 - 1).to(torch.bfloat16)
    kv = (torch.rand(tokens + 5, 1, D, generator=g, device=CUDA) * 2 - 1).to(torch.bfloat16)
    kv_indices = torch.randperm(tokens + 5, generator=g, device=CUDA)[:tokens].to(torch.int32)
    o, lse = attention(q, kv, kv_indptr, kv_indices.long())  # on the GPU, fp32
    o = o.to(torch.bfloat16)
    assert o.device == q.device and o.shape == (3, HEADS, DV)
    case = mlasim.capture(tmp_path / "case", "mla_decode_fwd",
                          config={"planner": plan.planner_config}, **device_plan(plan),
                          **request_arrays(plan, CUDA), q=q, kv_buffer=kv,
                          kv_indices=kv_indices, o=o, lse=lse)
    r = run_check(mlasim_bin, case, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    n = json.loads(r.stdout)["numerics"]
    assert n["ran"] and n["passed"] and n["o"]["rows_compared"] == 3
    assert 0 < n["o"]["max_abs"] <= n["o"]["atol"] + n["o"]["rtol"]
    o[1, 5, 100] += 0.25  # one corrupted element of a real row
    bad = mlasim.capture(tmp_path / "bad", "mla_decode_fwd",
                         config={"planner": plan.planner_config}, **device_plan(plan),
                         **request_arrays(plan, CUDA), q=q, kv_buffer=kv,
                         kv_indices=kv_indices, o=o, lse=lse)
    r = run_check(mlasim_bin, bad, "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    assert json.loads(r.stdout)["numerics"]["o"]["rows_differing"] == [1]


def test_microseconds_per_check_call_with_cuda_tensors_at_b256():
    # Not an assertion on speed: the figures are printed for docs/performance.md (run with -s).
    kv_lens = [500 + (37 * i) % 3000 for i in range(256)]
    plan = mlasim.plan(kv_lens=kv_lens, qlen=1, num_heads_per_head_k=HEADS, cu_count=80)
    q = torch.zeros(256, HEADS, Q_COLS, dtype=torch.bfloat16, device=CUDA)
    o = torch.empty(256, HEADS, O_COLS, dtype=torch.bfloat16, device=CUDA)
    host = dict({n: getattr(plan, n) for n in mlasim.BUFFER_NAMES},
                **{n: np.asarray(getattr(plan.request, n), np.int32)
                   for n in ("qo_indptr", "kv_indptr", "kv_last_page_lens")})
    device = dict(device_plan(plan), **request_arrays(plan, CUDA))
    for label, bufs in (("host plan buffers", host), ("device plan buffers", device)):
        mlasim.check_call("mla_decode_fwd", "asm", q=q, o=o, **bufs)
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(100):
                mlasim.check_call("mla_decode_fwd", "asm", q=q, o=o, **bufs)
            times.append((time.perf_counter() - t0) / 100 * 1e6)
        print(f"\ncheck_call mla_decode_fwd asm, B=256, CUDA q/o, {label}: "
              f"median {sorted(times)[2]:.1f} us per call")
