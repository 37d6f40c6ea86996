"""mlasim.capture -> `mlasim check` round trips: the manifest and .npy files written, the exact
report of a clean case, a corrupted plan, a fault address, a truncated file."""

import json
import os

import numpy as np
import torch

import mlasim
from conftest import WORKED_ARRAYS, run_check, worked_plan


def capture_worked(path, plan=None, **extra):
    p = plan or worked_plan()
    return mlasim.capture(path, "mla_decode_fwd",
                          config={"planner": p.planner_config, "engine": {"tp": 8, "mtp_k": 0}},
                          **p.buffers(), **WORKED_ARRAYS, **extra)


def versions_line():
    return f"numpy {np.__version__}, python {__import__('platform').python_version()}, " \
           f"torch {torch.__version__}"


def test_capture_writes_the_manifest_and_one_npy_per_tensor(tmp_path):
    q = torch.arange(3 * 16 * 4, dtype=torch.float32).reshape(3, 16, 4).to(torch.bfloat16)
    kv = torch.zeros(8, 4, dtype=torch.float16).t()  # non-contiguous: strides (1, 4)
    case = tmp_path / "case"
    mlasim.capture(case, "mla_decode_fwd", config={"dtype": torch.bfloat16, "layers": np.int64(61)},
                   q=q, kv=kv, kv_indptr=WORKED_ARRAYS["kv_indptr"], skipped=None)
    assert sorted(os.listdir(case)) == ["kv.npy", "kv_indptr.npy", "manifest.json", "q.npy"]
    m = json.loads((case / "manifest.json").read_text())
    assert m["format"] == "mlasim-case" and m["schema_version"] == 1
    assert m["call"] == "mla_decode_fwd"
    assert m["config"] == {"dtype": "bfloat16", "layers": 61}
    assert m["versions"]["mlasim"] == mlasim.__version__
    assert m["versions"]["torch"] == str(torch.__version__)
    assert m["tensors"]["q"] == {"file": "q.npy", "dtype": "bfloat16", "descr": "<u2",
                                 "shape": [3, 16, 4], "strides": [64, 4, 1], "nbytes": 384,
                                 "data_ptr": hex(q.data_ptr()), "device": "cpu"}
    assert m["tensors"]["kv"]["strides"] == [1, 4] and m["tensors"]["kv"]["shape"] == [4, 8]
    assert m["tensors"]["kv_indptr"]["data_ptr"] == \
        hex(WORKED_ARRAYS["kv_indptr"].__array_interface__["data"][0])
    # bfloat16 as its raw bits, C order.
    bits = np.load(case / "q.npy")
    assert bits.dtype == np.uint16 and bits.shape == (3, 16, 4)
    assert np.array_equal(bits, q.view(torch.int16).numpy().view(np.uint16))
    assert np.load(case / "kv.npy").flags.c_contiguous


def test_round_trip_of_a_clean_case_prints_the_exact_report(tmp_path, mlasim_bin):
    case = capture_worked(tmp_path / "case")
    r = run_check(mlasim_bin, case)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert r.stdout == (
        f"case {case}: call mla_decode_fwd, captured by mlasim {mlasim.__version__} "
        f"({versions_line()})\n"
        "tensors: 9 (kv_indptr int32 (4,), kv_last_page_lens int32 (3,), qo_indptr int32 (4,), "
        "reduce_final_map int32 (3, 2), reduce_indptr int32 (4,), reduce_partial_map int32 (10,), "
        "work_indptr int32 (9,), work_info int32 (10, 8), work_metadata_ptrs uint64 (2,))\n"
        "\n"
        "plan: re-planned from config.planner and the captured arrays\n"
        "  request    3 requests, 16 q heads x 1 KV heads, max_seqlen_qo 1, page 1, granularity "
        "16, bf16/bf16, gfx942 2026-08, cu_count 8\n"
        "  decisions  num_clusters 8  fold_ratio 1  pack 128  qo_split no  planner parallel  "
        "num_splits 8  works 6  payload 31\n"
        "  sizes      work_indptr 9/9  work_info 10/10 rows  reduce_indptr 4/4  reduce_final_map "
        "3/3 rows  reduce_partial_map 10/10  (captured/info_v1)\n"
        "  diff       identical: the 70 cells the planner writes agree\n"
        "  check      ok (0 errors, 0 warnings)\n"
        "\n"
        "contracts: not checked: the case captures none of the call's tensors (q, o, logits, "
        "attn_lse, lse, kv_indices) and names no kernel (config.kernel) or contract "
        "(--contract)\n"
        "\n"
        "numerics: not run: the case has no q, kv_buffer (or kv_cache, kv), kv_indices, o\n"
        "\n"
        "verdict: ok\n")


def test_python_lists_are_captured_as_int32_index_arrays(tmp_path, mlasim_bin):
    # numpy would make a list int64, which `check` refuses for an index array.
    lists = {k: v.tolist() for k, v in WORKED_ARRAYS.items()}
    case = tmp_path / "case"
    mlasim.capture(case, "mla_decode_fwd", config={"planner": worked_plan().planner_config},
                   **worked_plan().buffers(), **lists, nested=((1, 2), (3, 4)))
    m = json.loads((case / "manifest.json").read_text())
    assert m["tensors"]["kv_indptr"]["dtype"] == "int32"
    assert m["tensors"]["nested"]["shape"] == [2, 2] and m["tensors"]["nested"]["descr"] == "<i4"
    assert np.load(case / "kv_indptr.npy").dtype == np.int32
    r = run_check(mlasim_bin, case)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "kv_indptr int32 (4,)" in r.stdout and "verdict: ok" in r.stdout
    # Floats, bools and values past int32 are not index arrays: kept as numpy makes them, or refused.
    other = mlasim.capture(tmp_path / "other", "x", scale=[0.5, 1.5], flags=[True, False])
    m = json.loads((tmp_path / "other" / "manifest.json").read_text())
    assert (m["tensors"]["scale"]["dtype"], m["tensors"]["flags"]["dtype"]) == ("float64", "bool")
    try:
        mlasim.capture(tmp_path / "big", "x", kv_indptr=[0, 2**31])
        raise AssertionError("a value past int32 was accepted")
    except ValueError as e:
        assert str(e) == "kv_indptr: a value is outside int32"


def test_round_trip_of_a_corrupted_plan_names_the_first_difference(tmp_path, mlasim_bin):
    p = worked_plan()
    p.work_info[3, 5] += 20  # in place: work_metadata_ptrs still points at it
    case = capture_worked(tmp_path / "case", plan=p)
    r = run_check(mlasim_bin, case)
    assert r.returncode == 1, r.stderr
    assert ("  diff       1 of 70 cells differ; first: work_info[3].kv_end (element 29): captured "
            "600, re-planned 580\n") in r.stdout
    assert "pointers" not in r.stdout
    assert "\nverdict: FAILED (3 findings)\n" in r.stdout
    report = json.loads(run_check(mlasim_bin, case, "--json").stdout)
    assert report["plan"]["diff"]["first"]["buffer"] == "work_info"
    assert report["plan"]["diff"]["first"]["row"] == 3 and report["plan"]["diff"]["first"]["field"] == 5
    assert [d["code"] for d in report["plan"]["check"]["diagnostics"]] == [
        "kv_offset_mismatch", "tile_kv_not_covered"]


def test_round_trip_of_torch_tensors_and_a_fault_past_o(tmp_path, mlasim_bin):
    p = worked_plan()
    tensors = {n: torch.from_numpy(v) for n, v in p.buffers().items() if n != "work_metadata_ptrs"}
    o = torch.zeros(3, 16, 512, dtype=torch.bfloat16)
    case = mlasim.capture(tmp_path / "case", "mla_decode_fwd",
                          config={"planner": p.planner_config}, **tensors,
                          **{k: torch.from_numpy(v) for k, v in WORKED_ARRAYS.items()}, o=o)
    address = o.data_ptr() + o.numel() * 2 + 2 * 1024 + 6  # row 3, head 2, column 3
    log = tmp_path / "rocm.log"
    log.write_text(f"Memory access fault by GPU node-2 (Agent handle: 0x1) on address "
                   f"{address:#x}. Reason: Page not present or supervisor privilege.\n")
    r = run_check(mlasim_bin, case, "--fault-log", log)
    assert r.returncode == 1, r.stderr
    assert (f"fault: {address:#x} (rocm, reason: Page not present or supervisor privilege)\n"
            f"  {address:#x} is 2054 bytes past the end of o (3 rows) = row 3, head 2, "
            f"column 3") in r.stdout


def test_a_truncated_capture_exits_2_naming_file_and_field(tmp_path, mlasim_bin):
    case = capture_worked(tmp_path / "case")
    path = os.path.join(case, "work_info.npy")
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 4)
    r = run_check(mlasim_bin, case)
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr == (f"mlasim check: error: {path}:data: truncated: the header declares 320 "
                        f"data bytes (<i4 (10, 8)) but the file holds 316\n")
    os.remove(os.path.join(case, "manifest.json"))
    r = run_check(mlasim_bin, case)
    assert r.returncode == 2
    assert r.stderr == f"mlasim check: error: {os.path.join(case, 'manifest.json')}: no such file\n"


def test_what_check_would_refuse_is_refused_before_any_file_is_written(tmp_path):
    cases = [
        (dict(q=np.zeros([1] * 9, np.float32)), "tensors.q.shape: has 9 entries"),
        (dict(work_info=np.zeros((2, 8), np.int32), work_info_set=np.zeros((2, 8), np.int32)),
         "tensors.work_info_set: names the same buffer as tensors.work_info; capture one"),
    ]
    for tensors, fragment in cases:
        case = tmp_path / "case"
        try:
            mlasim.capture(case, "mla_decode_fwd", **tensors)
            raise AssertionError(f"accepted {list(tensors)}")
        except ValueError as e:
            assert str(e).startswith("mlasim check would refuse this case: manifest.json:"), str(e)
            assert fragment in str(e), str(e)
        assert not case.exists()


def test_a_second_capture_into_the_same_directory_is_refused(tmp_path):
    case = capture_worked(tmp_path / "case")
    try:
        capture_worked(case)
    except FileExistsError as e:
        assert "already holds a case" in str(e)
    else:
        raise AssertionError("no FileExistsError")
