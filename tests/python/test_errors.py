"""Bad inputs through Python raise TypeError or ValueError naming the argument; nothing crashes.
One row per error path of mlasim.plan, check_plan, planner_config and capture."""

import numpy as np
import pytest
import torch

import mlasim
from conftest import WORKED, WORKED_ARRAYS, worked_plan

I32 = np.int32


def plan_with(**kw):
    return lambda: mlasim.plan(**{**WORKED, **kw})


def indptr_plan(**kw):
    args = dict(max_seqlen_qo=1, cu_count=8, **WORKED_ARRAYS)
    args.update(kw)
    return lambda: mlasim.plan(**args)


def good_buffers():
    p = worked_plan()
    return p, {n: getattr(p, n).copy() for n in mlasim.BUFFER_NAMES}


def check_with(name, value):
    p, bufs = good_buffers()
    bufs[name] = value
    return lambda: mlasim.check_plan(bufs, request=p.request)


def self_holding():
    """A config mapping that holds itself (capture raised RecursionError, naming nothing)."""
    d = {"engine": {"tp": 8}}
    d["engine"]["parent"] = d
    return d


def nested(depth):
    """A list nested `depth` levels deep (capture raised RecursionError from about 490)."""
    x = []
    for _ in range(depth):
        x = [x]
    return x


def out_with(name, value):
    _, bufs = good_buffers()
    bufs[name] = value
    return lambda: mlasim.plan(out=bufs, **WORKED)


CASES = [
    # plan: aiter's and mlasim's name of one argument together
    ("alias_twice", indptr_plan(seqlens_kv_indptr=[0, 1, 2, 3]), TypeError,
     "seqlens_kv_indptr: given twice (as kv_indptr too)"),
    # plan: scalars
    ("heads_float", plan_with(num_heads_per_head_k=1.5), TypeError,
     "num_heads_per_head_k: expected an integer, got float"),
    ("heads_bool", plan_with(num_heads_per_head_k=True), TypeError,
     "num_heads_per_head_k: expected an integer, got bool"),
    ("heads_zero", plan_with(num_heads_per_head_k=0), ValueError,
     "num_heads_per_head_k: must be in 1..2147483647, got 0"),
    ("heads_huge", plan_with(num_heads_per_head_k=2**40), ValueError,
     "num_heads_per_head_k: must be in 1..2147483647"),
    ("heads_limit", plan_with(num_heads_per_head_k=8192), ValueError,
     "num_heads_per_head_k: head count is 8192, above mlasim's limit of 4096"),
    ("heads_unsupported", plan_with(num_heads_per_head_k=20), ValueError,
     "num_heads_per_head_k: aiter's planner supports only #heads in [16, 64, 128]"),
    ("cu_limit", plan_with(cu_count=70000), ValueError,
     "cu_count: CU count is 70000, above mlasim's limit of 65536"),
    ("cu_zero", plan_with(cu_count=0), ValueError, "cu_count: must be in 1.."),
    ("page_not_pow2", plan_with(page_size=3), ValueError, "page_size"),
    ("granularity_not_pow2", plan_with(kv_granularity=24), ValueError, "kv_granularity"),
    ("split_zero", plan_with(max_split_per_batch=0), ValueError,
     "max_split_per_batch: must be -1 (none) or >= 1"),
    ("topk_low", plan_with(topk=-2), ValueError, "topk: must be in -1.."),
    ("causal_int", plan_with(is_causal=1), TypeError, "is_causal: expected True or False"),
    ("dtype_unknown", plan_with(q_dtype="int4"), ValueError, "q_dtype: unknown dtype 'int4'"),
    ("dtype_type", plan_with(kv_dtype=3.0), TypeError, "kv_dtype: expected a dtype"),
    ("dtype_torch_int", plan_with(kv_dtype=torch.int32), ValueError,
     "kv_dtype: unknown dtype 'int32'"),
    ("target", plan_with(target="gfx90a"), ValueError, "target"),
    ("target_type", plan_with(target=942), TypeError, "target: expected a string, got int"),
    ("revision", plan_with(revision="2025-01"), ValueError, "revision"),
    ("planner", plan_with(planner="fast"), ValueError,
     "planner: unknown planner 'fast' (expected auto, serial or parallel)"),
    ("parallel_ineligible", plan_with(planner="parallel", qlen=4), ValueError,
     "planner: the parallel planner needs qlen 1"),
    ("unknown_arg", plan_with(num_heads=16), TypeError, "num_heads: unknown argument"),
    # plan: kv_lens
    ("kv_lens_empty", plan_with(kv_lens=[]), ValueError, "kv_lens: give at least one request"),
    ("kv_lens_negative", plan_with(kv_lens=[300, -1]), ValueError,
     "kv_lens[1]: must be in 0..2^30 tokens"),
    ("kv_lens_float", plan_with(kv_lens=np.array([1.5])), TypeError,
     "kv_lens: expected integers, got dtype float64"),
    ("kv_lens_str", plan_with(kv_lens="300"), TypeError, "kv_lens: expected a numpy array"),
    ("kv_lens_and_indptr", plan_with(kv_indptr=WORKED_ARRAYS["kv_indptr"]), TypeError,
     "kv_indptr: give either kv_lens or the indptr arrays, not both"),
    ("qlen_limit", plan_with(qlen=5000), ValueError,
     "qlen: q tokens per request is 5000, above mlasim's limit of 4096"),
    # plan: indptr arrays
    ("no_batch", lambda: mlasim.plan(max_seqlen_qo=1), TypeError,
     "kv_indptr: required (or give kv_lens)"),
    ("no_max_seqlen", lambda: mlasim.plan(**WORKED_ARRAYS), TypeError,
     "max_seqlen_qo: required with kv_indptr"),
    ("indptr_int64", indptr_plan(kv_indptr=np.array([0, 300, 340, 1040])), TypeError,
     "kv_indptr: dtype is int64, expected int32"),
    ("indptr_torch_int64", indptr_plan(kv_indptr=torch.tensor([0, 300, 340, 1040])), TypeError,
     "kv_indptr: dtype is int64, expected int32"),
    # a byte-swapped int32 has int32's name: it read "dtype is int32, expected int32"
    ("indptr_big_endian", indptr_plan(kv_indptr=np.array([0, 300, 340, 1040], ">i4")), TypeError,
     "kv_indptr: dtype is int32 stored as '>i4', expected int32 in native byte order ('<i4')"),
    ("indptr_2d", indptr_plan(kv_indptr=np.zeros((2, 2), I32)), ValueError,
     "kv_indptr: has 2 dimensions, expected 1"),
    ("indptr_strided", indptr_plan(kv_indptr=np.zeros(8, I32)[::2]), ValueError,
     "kv_indptr: is not C-contiguous"),
    ("indptr_decreasing", indptr_plan(kv_indptr=np.array([0, 300, 200, 1040], I32)), ValueError,
     "kv_indptr[2]: decreases (300 -> 200): an indptr is cumulative"),
    ("indptr_empty", indptr_plan(kv_indptr=np.zeros(0, I32)), ValueError,
     "kv_indptr: needs B+1 >= 1 entries"),
    ("indptr_list_overflow", indptr_plan(kv_indptr=[0, 2**40]), ValueError,
     "kv_indptr: a value is outside int32"),
    ("indptr_list_str", indptr_plan(kv_indptr=[0, "1"]), TypeError,
     "kv_indptr: expected integers, got <U21"),
    ("indptr_object", indptr_plan(kv_indptr=object()), TypeError,
     "kv_indptr: expected a numpy array or a torch tensor, got object"),
    ("qo_count", indptr_plan(qo_indptr=np.array([0, 1, 2], I32)), ValueError,
     "qo_indptr: has 3 entries, kv_indptr 4"),
    ("last_page_count", indptr_plan(kv_last_page_lens=np.array([1, 1], I32)), ValueError,
     "kv_last_page_lens: has 2 entries, expected 3 (one per request)"),
    ("last_page_required", indptr_plan(kv_last_page_lens=None, page_size=16), TypeError,
     "kv_last_page_lens: required when page_size > 1"),
    ("indptr_limit", indptr_plan(kv_indptr=np.array([0, 1, 2, 2**31 - 1], I32)), ValueError,
     "kv_indptr[3]: value is 2147483647, above mlasim's limit of 1073741824"),
    # plan(out=...)
    ("out_type", plan_with(out=[1, 2]), TypeError, "out: expected a mapping"),
    ("out_unknown", out_with("logits", np.zeros(4, I32)), TypeError, "out.logits: not a plan buffer"),
    ("out_missing", lambda: mlasim.plan(out={"work_indptr": np.zeros(9, I32)}, **WORKED),
     TypeError, "out.work_info: missing"),
    ("out_dtype", out_with("work_indptr", np.zeros(9, np.int64)), TypeError,
     "out.work_indptr: dtype is int64, expected int32"),
    ("out_readonly", out_with("work_indptr", np.zeros(9, I32).copy()), None, None),
    ("out_width", out_with("work_info", np.zeros((10, 7), I32)), ValueError,
     "out.work_info: rows must hold 8 int32"),
    ("out_twice", out_with("work_info_set", np.zeros((10, 8), I32)), TypeError,
     "out.work_info_set: given twice"),
    ("out_total", out_with("reduce_partial_map", np.zeros(2**24, I32)), ValueError,
     "out: the plan buffers' int32 element count is 16777315, above mlasim's limit of 16777216 "
     "(raise it with --limit plan_elements=N"),
    # check_plan
    ("check_total", check_with("reduce_partial_map", np.zeros(2**24, I32)), ValueError,
     "buffers: the plan buffers' int32 element count is 16777315, above mlasim's limit of "
     "16777216 (raise it with --limit plan_elements=N"),
    ("check_missing", lambda: mlasim.check_plan({"work_indptr": np.zeros(9, I32)},
                                                request=worked_plan().request),
     TypeError, "work_info: missing from the buffers"),
    ("check_no_request", lambda: mlasim.check_plan(good_buffers()[1]), TypeError,
     "request: give a request"),
    ("check_request_type", lambda: mlasim.check_plan(good_buffers()[1], request={"a": 1}),
     TypeError, "request: expected mlasim Request"),
    ("check_both", lambda: mlasim.check_plan(worked_plan(), request=worked_plan().request,
                                             cu_count=8), TypeError,
     "cu_count: give either request= or plan()'s arguments"),
    ("check_dtype", check_with("reduce_indptr", np.zeros(4, np.float32)), TypeError,
     "reduce_indptr: dtype is float32, expected int32"),
    ("check_width", check_with("work_info", np.zeros((10, 7), I32)), ValueError,
     "work_info: rows must hold 8 int32 (MlaWorkInfo)"),
    ("check_rank", check_with("work_info", np.zeros(80, I32)), ValueError,
     "work_info: has 1 dimensions, expected 2"),
    ("check_string", check_with("work_indptr", "0,1,2"), TypeError,
     "work_indptr: expected a numpy array or a torch tensor, got str"),
    ("check_unwritten", lambda: mlasim.check_plan(worked_plan(), unwritten=2**33), ValueError,
     "unwritten: must be in -2147483648..2147483647"),
    # planner_config
    ("config_array", lambda: mlasim.planner_config(kv_indptr=[0, 1]), TypeError,
     "kv_indptr: arrays are captured as tensors"),
    ("config_heads", lambda: mlasim.planner_config(num_heads_per_head_k="16"), TypeError,
     "num_heads_per_head_k: expected an integer, got str"),
    # capture
    ("capture_call", lambda: mlasim.capture("/nonexistent/x", ""), ValueError,
     "call_name: must be 1..128 printable characters"),
    ("capture_config", lambda: mlasim.capture("/nonexistent/x", "c", config={"f": object()}),
     TypeError, "config.f: object is not JSON data"),
    ("capture_config_nan", lambda: mlasim.capture("/nonexistent/x", "c", config={"a": [float("nan")]}),
     ValueError, "config.a[0]: nan is not a finite number"),
    ("capture_config_key", lambda: mlasim.capture("/nonexistent/x", "c", config={1: 2}),
     TypeError, "config: key 1 is not a string"),
    ("capture_config_cycle", lambda: mlasim.capture("/nonexistent/x", "c", config=self_holding()),
     ValueError, "config.engine.parent: holds itself (a cycle): JSON data has none"),
    ("capture_config_too_deep", lambda: mlasim.capture("/nonexistent/x", "c",
                                                       config={"a": nested(5000)}),
     ValueError, "config: nested deeper than Python's recursion limit"),
    ("capture_scalar", lambda: mlasim.capture("/nonexistent/x", "c", max_seqlen_qo=4), TypeError,
     "max_seqlen_qo: expected a numpy array or a torch tensor, got int"),
    ("capture_complex", lambda: mlasim.capture("/nonexistent/x", "c",
                                               z=np.zeros(2, np.complex64)), TypeError,
     "z: numpy dtype <c8 is not one a case can hold"),
    ("capture_big_endian", lambda: mlasim.capture("/nonexistent/x", "c",
                                                  z=np.zeros(2, ">i4")), TypeError,
     "z: numpy dtype >i4 is not one a case can hold"),
    ("capture_torch_complex", lambda: mlasim.capture("/nonexistent/x", "c",
                                                     z=torch.zeros(2, dtype=torch.complex64)),
     TypeError, "z: torch dtype torch.complex64 is not one a case can hold"),
    ("capture_strides", lambda: mlasim.capture(
        "/nonexistent/x", "c", z=np.lib.stride_tricks.as_strided(np.zeros(4, I32), (2,), (6,))),
     ValueError, "z: strides (6,) are not whole elements of 4 bytes"),
]


@pytest.mark.parametrize("name,call,exc,fragment", CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_naming_the_argument(name, call, exc, fragment):
    if name == "out_readonly":
        _, bufs = good_buffers()
        bufs["work_indptr"].setflags(write=False)
        with pytest.raises(ValueError) as e:
            mlasim.plan(out=bufs, **WORKED)
        assert "out.work_indptr: is read-only; plan() writes into it" in str(e.value)
        return
    with pytest.raises(exc) as e:
        call()
    assert fragment in str(e.value), str(e.value)


def test_garbage_never_crashes():
    """Every argument given every kind of wrong value: only TypeError / ValueError come out."""
    garbage = [None, -1, 0, 2**31, 2**64, -(2**63) - 1, 1.5, float("nan"), "x", "", b"\x00",
               [], [[]], [1, "a"], {}, object(), np.zeros(0), np.zeros((2, 2), I32),
               np.array([3, 2, 1], I32), np.array([0, 2**31 - 1], I32),
               torch.zeros(3, dtype=torch.bfloat16), torch.arange(4)]
    keys = ["kv_lens", "qlen", "num_heads_per_head_k", "num_heads_k", "page_size",
            "kv_granularity", "topk", "max_split_per_batch", "cu_count", "q_dtype", "target",
            "is_causal", "max_seqlen_qo", "uni_seqlen_qo", "planner"]
    for key in keys:
        for value in garbage:
            try:
                mlasim.plan(**{**WORKED, key: value})
            except (TypeError, ValueError):
                pass
    for key in ("kv_indptr", "qo_indptr", "kv_last_page_lens"):
        for value in garbage:
            try:
                mlasim.plan(**{**WORKED_ARRAYS, "max_seqlen_qo": 1, key: value})
            except (TypeError, ValueError):
                pass
    p, bufs = good_buffers()
    for name in mlasim.BUFFER_NAMES:
        for value in garbage:
            try:
                mlasim.check_plan({**bufs, name: value}, request=p.request)
            except (TypeError, ValueError):
                pass
