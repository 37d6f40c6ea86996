"""mlasim.plan and mlasim.check_plan on numpy arrays and torch tensors: golden values (the §6.1
worked example, `mlasim plan --npy`, the aiter golden corpus), zero-copy paths, in-place planning,
and the plan checker's diagnostics."""

import json
import lzma
import subprocess

import numpy as np
import pytest
import torch

import mlasim
from mlasim import _convert, _planner
from conftest import GOLDEN_DIR, WORKED, WORKED_ARRAYS, WORKED_WORK_INFO, worked_plan

POISON = -1515870811  # 0xA5A5A5A5


def test_worked_example_golden_values():
    p = worked_plan()
    assert p.num_clusters == 8 and p.num_works == 6
    assert p.derived["parallel_planner_used"] is True
    assert p.derived["payload"] == 31
    assert p.work_indptr.tolist() == [0, 1, 2, 3, 4, 5, 6, 6, 6]
    assert p.work_info.shape == (10, 8)
    assert p.work_info[:6].tolist() == WORKED_WORK_INFO
    assert (p.work_info[6:] == POISON).all()          # rows past num_works: never written
    assert p.reduce_indptr.tolist() == [0, 2, 2, 5]
    assert p.reduce_partial_map.tolist() == [0, 1, 2, 3, 4] + [POISON] * 5
    assert p.reduce_final_map.tolist() == [[0, 1], [POISON, POISON], [2, 3]]
    assert p.cells["reduce_final_map"].tolist() == [[1, 1], [0, 0], [1, 1]]
    assert p.sizes == {"work_metadata_ptrs": 2, "work_indptr": 9, "work_info_rows": 10,
                       "reduce_indptr": 4, "reduce_final_map_rows": 3, "reduce_partial_map": 10,
                       "max_splits": 8, "tile_cnt": 3}
    # aiter's work_metadata_ptrs: the addresses of work_indptr and work_info.
    assert p.work_metadata_ptrs.dtype == np.uint64
    assert int(p.work_metadata_ptrs[0]) == p.work_indptr.ctypes.data
    assert int(p.work_metadata_ptrs[1]) == p.work_info.ctypes.data


def test_plan_equals_the_cli_npy_output(tmp_path, mlasim_bin):
    subprocess.run([mlasim_bin, "plan", "--kv-lens", "300,40,700", "--qlen", "1", "--heads", "16",
                    "--clusters", "8", "--npy", str(tmp_path)], check=True, capture_output=True)
    p = worked_plan()
    for name in mlasim.BUFFER_NAMES:
        cli = np.load(tmp_path / f"{name}.npy")
        ours = getattr(p, name)
        assert cli.dtype == ours.dtype and cli.shape == ours.shape, name
        assert np.array_equal(cli, ours), name


def test_indptrs_give_the_same_plan_as_kv_lens_and_torch_the_same_as_numpy():
    a = worked_plan()
    b = mlasim.plan(max_seqlen_qo=1, num_heads_per_head_k=16, cu_count=8, **WORKED_ARRAYS)
    c = mlasim.plan(max_seqlen_qo=1, num_heads_per_head_k=16, cu_count=8,
                    **{k: torch.from_numpy(v) for k, v in WORKED_ARRAYS.items()})
    d = mlasim.plan(max_seqlen_qo=1, num_heads_per_head_k=16, cu_count=8,
                    seqlens_kv_indptr=[0, 300, 340, 1040], seqlens_qo_indptr=[0, 1, 2, 3],
                    q_dtype=torch.bfloat16, kv_dtype=torch.bfloat16)
    for name in mlasim.BUFFER_NAMES:
        for other in (b, c, d):
            assert np.array_equal(getattr(a, name), getattr(other, name)), name
    assert a.planner_config == b.planner_config == c.planner_config == d.planner_config


def golden_records(limit):
    path = GOLDEN_DIR / "aiter-v12-dev.jsonl.xz"  # the repository's corpus (docs/golden.md)
    out = []
    with lzma.open(path, "rt") as f:
        for line in f:
            rec = json.loads(line)
            if "error" in rec or "anomalies" in rec["derived"]:
                continue
            out.append(rec)
            if len(out) == limit:
                break
    return out


def request_args(inp):
    return dict(kv_indptr=inp["kv_indptr"], qo_indptr=inp["qo_indptr"],
                kv_last_page_lens=inp["kv_last_page_lens"], target=inp["target"],
                cu_count=inp["cu_count"], num_heads_per_head_k=inp["heads_per_head_k"],
                num_heads_k=inp["num_heads_k"], q_dtype=inp["q_dtype"], kv_dtype=inp["kv_dtype"],
                page_size=inp["page_size"], kv_granularity=inp["kv_granularity"],
                max_seqlen_qo=inp["max_seqlen_qo"], uni_seqlen_qo=inp["uni_seqlen_qo"],
                qlen=inp["qlen"], is_causal=inp["is_causal"], topk=inp["topk"],
                max_split_per_batch=inp["max_split_per_batch"])


def test_golden_corpus_records_plan_and_check_exactly():
    for rec in golden_records(40):
        args = request_args(rec["input"])
        p = mlasim.plan(**args)
        out, d = rec["output"], rec["derived"]
        rid = rec["id"]
        assert p.num_works == d["num_works"], rid
        assert p.derived["fold_ratio"] == d["fold_ratio"], rid
        assert p.work_indptr.tolist() == out["work_indptr"], rid
        assert p.work_info[:d["num_works"]].tolist() == out["work_info"], rid
        assert p.reduce_indptr.tolist() == out["reduce_indptr"], rid
        n = len(out["reduce_partial_map"])
        assert p.reduce_partial_map[:n].tolist() == out["reduce_partial_map"], rid
        for tile, pair in out["reduce_final_map"].items():
            assert p.reduce_final_map[int(tile)].tolist() == pair, rid
        # aiter's own buffers, as an engine holds them (poison where aiter wrote nothing), pass.
        s = rec["sizes"]
        bufs = {"work_indptr": np.array(out["work_indptr"], np.int32),
                "work_info": np.full((s["work_info_rows"], 8), POISON, np.int32),
                "reduce_indptr": np.array(out["reduce_indptr"], np.int32),
                "reduce_final_map": np.full((s["reduce_final_map_rows"], 2), POISON, np.int32),
                "reduce_partial_map": np.full(s["reduce_partial_map"], POISON, np.int32)}
        bufs["work_info"][:d["num_works"]] = out["work_info"]
        bufs["reduce_partial_map"][:n] = out["reduce_partial_map"]
        for tile, pair in out["reduce_final_map"].items():
            bufs["reduce_final_map"][int(tile)] = pair
        report = mlasim.check_plan(bufs, **args)
        assert report.ok, (rid, str(report))


def test_plan_into_caller_tensors_writes_only_planner_cells_in_place():
    shapes = {"work_indptr": (9,), "work_info": (10, 8), "reduce_indptr": (4,),
              "reduce_final_map": (3, 2), "reduce_partial_map": (10,)}
    out = {n: torch.full(s, -7, dtype=torch.int32) for n, s in shapes.items()}
    out["work_metadata_ptrs"] = torch.zeros(2, dtype=torch.int64)  # torch 1.13: no uint64
    ptrs = {n: t.data_ptr() for n, t in out.items()}
    p = mlasim.plan(out=out, **WORKED)
    for n, t in out.items():
        assert getattr(p, n) is t and t.data_ptr() == ptrs[n], n  # the caller's own tensors
    assert out["work_indptr"].tolist() == [0, 1, 2, 3, 4, 5, 6, 6, 6]
    assert out["work_info"][:6].tolist() == WORKED_WORK_INFO
    assert (out["work_info"][6:] == -7).all()                 # not written: kept
    assert out["reduce_final_map"][1].tolist() == [-7, -7]
    assert out["reduce_partial_map"].tolist() == [0, 1, 2, 3, 4] + [-7] * 5
    assert out["work_metadata_ptrs"].tolist() == [ptrs["work_indptr"], ptrs["work_info"]]
    assert p.cells is None and p.stores_past_end["work_info"] == 0


def test_plan_into_buffers_that_are_too_small_records_the_stores_it_could_not_make():
    out = {"work_indptr": np.zeros(5, np.int32), "work_info_set": np.zeros((3, 8), np.int32),
           "reduce_indptr": np.zeros(4, np.int32), "reduce_final_map": np.zeros((3, 2), np.int32),
           "reduce_partial_map": np.zeros(10, np.int32)}
    p = mlasim.plan(out=out, **WORKED)
    assert p.stores_past_end["work_indptr"] == 5
    assert p.stores_past_end["work_info"] == 3 * 8  # works 3..5 do not fit
    assert out["work_info_set"].tolist() == WORKED_WORK_INFO[:3]


def test_check_plan_finds_a_corrupted_cell():
    p = worked_plan()
    assert mlasim.check_plan(p).ok
    p.work_info[3, 5] += 20
    report = mlasim.check_plan(p)
    assert not report.ok
    assert [(d.code, d.buffer, d.work) for d in report.errors] == [
        ("kv_offset_mismatch", "work_info", 3), ("tile_kv_not_covered", "work_info", 4)]
    assert report.errors[0].message == (
        "tile 2 (batch 2, q [2,3)): work 3 has kv_offset 460, expected 440")
    assert str(report).startswith("error kv_offset_mismatch: tile 2")


def test_check_plan_unwritten_value_marks_cells_never_written():
    p = worked_plan()
    bufs = {n: getattr(p, n).copy() for n in mlasim.BUFFER_NAMES}
    bufs["work_info"][2] = POISON  # a row below num_works the planner "never wrote"
    report = mlasim.check_plan(bufs, request=p.request)
    assert [d.code for d in report.errors] == ["work_row_unwritten", "tile_kv_not_covered"]
    # With no unwritten value, the poison is an ordinary (wrong) value.
    report = mlasim.check_plan(bufs, request=p.request, unwritten=None)
    assert report.errors[0].code == "work_outside_request"


def test_numpy_and_torch_cpu_inputs_are_not_copied(monkeypatch):
    p = worked_plan()
    tensors = {n: torch.from_numpy(getattr(p, n).copy()) for n in mlasim.BUFFER_NAMES}
    seen = []
    real = _planner._core.check_plan

    def spy(request, planner, *arrays_and_unwritten):
        seen.extend(arrays_and_unwritten[:5])
        return real(request, planner, *arrays_and_unwritten)

    monkeypatch.setattr(_planner._core, "check_plan", spy)
    assert mlasim.check_plan(tensors, request=p.request).ok
    for name, arr in zip(mlasim.BUFFER_NAMES, seen):
        assert arr.ctypes.data == tensors[name].data_ptr(), name  # the tensor's own memory
    seen.clear()
    arrays = {n: getattr(p, n) for n in mlasim.BUFFER_NAMES}
    assert mlasim.check_plan(arrays, request=p.request).ok
    for name, arr in zip(mlasim.BUFFER_NAMES, seen):
        assert arr is arrays[name] and np.shares_memory(arr, arrays[name]), name


def test_conversion_paths_say_when_they_copy():
    a = np.arange(4, dtype=np.int32)
    assert _convert.host_array("x", a) == (a, False)
    t = torch.arange(4, dtype=torch.int32)
    arr, copied = _convert.host_array("x", t)
    assert not copied and arr.ctypes.data == t.data_ptr()
    view, copied = _convert.host_array("x", memoryview(a))       # buffer protocol: shared
    assert not copied and np.shares_memory(view, a)
    dl, copied = _convert.host_array("x", _DLPackOnly(t))  # DLPack: shared
    assert not copied and dl.ctypes.data == t.data_ptr()
    lst, copied = _convert.host_array("x", [1, 2])                # a list: copied
    assert copied
    # The returned plan buffers own the planner's memory (moved from C++, not copied).
    p = worked_plan()
    assert p.work_info.base is not None and p.work_info.flags.owndata is False


class _DLPackOnly:
    """An object that offers only DLPack (like a CuPy or JAX array on the CPU)."""

    def __init__(self, t):
        self._t = t

    def __dlpack__(self, stream=None):
        return self._t.__dlpack__()

    def __dlpack_device__(self):
        return self._t.__dlpack_device__()


def test_check_plan_microseconds_per_call_at_b256(capsys):
    """A timing, printed, never asserted (docs/performance.md records the figure)."""
    import time
    rng = np.random.default_rng(7)
    kv_lens = rng.integers(1500, 2600, 256)
    p = mlasim.plan(kv_lens=kv_lens, qlen=4, num_heads_per_head_k=16, target="gfx950",
                    q_dtype="fp8", kv_dtype="fp8", max_split_per_batch=16)
    tensors = {n: torch.from_numpy(getattr(p, n)) for n in mlasim.BUFFER_NAMES}
    assert mlasim.check_plan(tensors, request=p.request).ok
    for label, bufs in (("numpy", p), ("torch", tensors)):
        wall, cpu = [], []
        for _ in range(5):
            w0, c0 = time.perf_counter(), time.process_time()
            for _ in range(200):
                mlasim.check_plan(bufs, request=p.request)
            wall.append((time.perf_counter() - w0) / 200 * 1e6)
            cpu.append((time.process_time() - c0) / 200 * 1e6)
        with capsys.disabled():
            print(f"\ncheck_plan B=256 qlen 4 ({label}, request reused): "
                  f"{sorted(wall)[2]:.1f} us wall, {sorted(cpu)[2]:.1f} us CPU per call "
                  f"(medians of 5 x 200)")
