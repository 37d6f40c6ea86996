"""mlasim.plan, mlasim.check_plan and their result types (see docs/python.md)."""

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from . import _core
from ._convert import address, dtype_name, host_array, int_array, is_torch_tensor, lens_array

POISON = _core.POISON  # 0xA5A5A5A5 as int32: cells no planner wrote (mlasim's convention)

BUFFER_NAMES = ("work_indptr", "work_info", "reduce_indptr", "reduce_final_map",
                "reduce_partial_map")
# aiter's argument names for the same buffers and arrays (get_mla_metadata_v1).
ALIASES = {"work_info_set": "work_info", "work_meta_data": "work_metadata_ptrs",
           "seqlens_qo_indptr": "qo_indptr", "seqlens_kv_indptr": "kv_indptr"}

_ARRAY_ARGS = ("kv_indptr", "qo_indptr", "kv_last_page_lens")
_DTYPE_ARGS = ("q_dtype", "kv_dtype")


def make_request(**args):
    """Builds a validated planner request (mlasim._core.Request) from plan()'s arguments."""
    converted = {}
    for given, value in args.items():
        key = ALIASES.get(given, given)
        if value is None:
            continue
        if key in converted:  # aiter's and mlasim's name of one argument: never pick one silently
            raise TypeError(f"{given}: given twice (as {key} too)")
        if key in _ARRAY_ARGS:
            value = int_array(key, value)
        elif key == "kv_lens":
            value = lens_array(key, value)
        elif key in _DTYPE_ARGS:
            value = dtype_name(key, value)
        converted[key] = value
    return _core.make_request(**converted)


class Plan:
    """A plan as aiter's get_mla_metadata_v1 leaves its buffers.

    Attributes: ``work_metadata_ptrs`` (uint64 [2]: the addresses of work_indptr and work_info,
    as aiter stores them), ``work_indptr`` (int32 [max_splits + 1]), ``work_info`` (int32
    [max_work, 8]), ``reduce_indptr`` (int32 [tile_cnt + 1]), ``reduce_final_map`` (int32
    [tile_cnt, 2]), ``reduce_partial_map`` (int32 [max_split_tiles]) -- the caller's own arrays or
    tensors when planned with ``out=``; ``cells`` (uint8 arrays of the same shapes: 0 unwritten,
    1 written, 2 undefined; None with ``out=``); ``derived`` (host decisions), ``sizes``
    (get_mla_metadata_info_v1 element counts), ``input_violations``, ``stores_past_end`` (per
    buffer, stores the planner could not make because the buffer is too small) and ``request``.
    """

    def __init__(self, request, result, buffers):
        self.request = request
        self.derived = result["derived"]
        self.sizes = result["sizes"]
        self.input_violations = result["input_violations"]
        self.stores_past_end = result["stores_past_end"]
        self.cells = result.get("cells")
        for name, value in buffers.items():
            setattr(self, name, value)

    @property
    def num_works(self):
        return self.derived["num_works"]

    @property
    def num_clusters(self):
        return self.derived["num_clusters"]

    @property
    def planner_config(self):
        """get_mla_metadata_v1's scalar arguments, for ``capture(config={"planner": ...})``."""
        return self.request.planner_config()

    def buffers(self):
        """The six buffers by name (aiter's info_v1 order), e.g. for ``capture(**plan.buffers())``."""
        return {name: getattr(self, name) for name in ("work_metadata_ptrs",) + BUFFER_NAMES}

    def check(self, **kwargs):
        """check_plan on this plan's own buffers and request."""
        return check_plan(self, **kwargs)

    def __repr__(self):
        d = self.derived
        return (f"<mlasim.Plan {self.request.batch_size} requests, {d['num_clusters']} clusters, "
                f"{d['num_works']} works, fold {d['fold_ratio']}, "
                f"{'parallel' if d['parallel_planner_used'] else 'serial'} planner>")


def plan(*, planner="auto", out=None, **request_args):
    """Plans one batch as aiter's get_mla_metadata_v1 (fast mode, v1.2) does.

    The batch is given either as ``kv_lens`` (KV tokens per request) with ``qlen``, exactly as
    ``mlasim plan --kv-lens``, or as aiter's arrays ``kv_indptr`` (pages, cumulative),
    ``qo_indptr`` and ``kv_last_page_lens`` with ``max_seqlen_qo``. Scalars: num_heads_per_head_k
    (16), num_heads_k (1), is_causal (True), page_size (1), kv_granularity (16), max_seqlen_qo,
    uni_seqlen_qo (= max_seqlen_qo), qlen (sizing), topk (-1), max_split_per_batch (-1),
    is_cp_round_robin (False), q_dtype / kv_dtype ("bf16"; torch dtypes accepted), target
    ("gfx942"), cu_count (the target's), revision ("2026-08"). ``planner``: "auto" (aiter's
    dispatch), "serial" or "parallel".

    Returns a :class:`Plan`. With ``out`` (a mapping of the six buffer names -- aiter's
    ``work_info_set`` / ``work_meta_data`` accepted -- to int32 arrays or tensors, work_metadata_ptrs
    uint64 or int64), plans into the caller's buffers at their sizes, writing only the cells the
    planner writes (others keep their contents, as on a GPU); device tensors are planned through
    a host copy and copied back. Raises TypeError / ValueError naming the argument.
    """
    request = make_request(**request_args)
    if out is None:
        result = _core.plan(request, planner, None, None)
        bufs = {name: result[name] for name in BUFFER_NAMES}
        ptrs = np.array([address(None, bufs["work_indptr"]), address(None, bufs["work_info"])],
                        dtype=np.uint64)
        bufs["work_metadata_ptrs"] = ptrs
        return Plan(request, result, bufs)
    return _plan_into(request, planner, out)


def _named(out):
    if not isinstance(out, Mapping):
        raise TypeError(f"out: expected a mapping of buffer names to arrays, got "
                        f"{type(out).__name__}")
    named = {}
    for key, value in out.items():
        canonical = ALIASES.get(key, key)
        if canonical not in BUFFER_NAMES + ("work_metadata_ptrs",):
            raise TypeError(f"out.{key}: not a plan buffer (expected {', '.join(BUFFER_NAMES)}, "
                            f"work_metadata_ptrs)")
        if canonical in named:
            raise TypeError(f"out.{key}: given twice (under aiter's and mlasim's name)")
        named[canonical] = value
    return named


def _plan_into(request, planner, out):
    named = _named(out)
    host, copied = {}, {}
    for name, value in named.items():
        arr, was_copied = host_array(f"out.{name}", value, writable=True)
        if name == "work_metadata_ptrs" and arr.dtype == np.int64:
            arr = arr.view(np.uint64)  # torch before 2.3 has no uint64
        host[name], copied[name] = arr, was_copied
    for name in BUFFER_NAMES:
        if name not in host:
            raise TypeError(f"out.{name}: missing")
    pointers = None
    if "work_metadata_ptrs" in host:
        pointers = (address(named["work_indptr"], host["work_indptr"]),
                    address(named["work_info"], host["work_info"]))
    result = _core.plan(request, planner, host, pointers)
    for name, value in named.items():
        if copied[name] and is_torch_tensor(value):
            import torch  # noqa: F401  (already imported by the caller)
            value.copy_(torch.from_numpy(host[name].view(np.int64))
                        if host[name].dtype == np.uint64 else torch.from_numpy(host[name]))
    return Plan(request, result, dict(named))


class Diagnostic(NamedTuple):
    """One broken invariant of a plan (ref/plan_check.h)."""
    code: str        # "kv_offset_mismatch", ...
    severity: str    # "error" or "warning"
    buffer: str      # the buffer concerned
    index: int       # element or row, -1 when not applicable
    tile: int        # q tile in planning order, -1
    work: int        # work item, -1
    message: str     # full sentence with the values


class CheckReport:
    """The plan checker's findings: ``diagnostics`` (list of Diagnostic), ``ok`` (no errors)."""

    def __init__(self, diagnostics):
        self.diagnostics = [Diagnostic(*d) for d in diagnostics]

    @property
    def errors(self):
        return [d for d in self.diagnostics if d.severity == "error"]

    @property
    def warnings(self):
        return [d for d in self.diagnostics if d.severity == "warning"]

    @property
    def ok(self):
        return not self.errors

    def __str__(self):
        lines = [f"{d.severity} {d.code}: {d.message}" for d in self.diagnostics]
        return "\n".join(lines) if lines else "ok"

    def __repr__(self):
        return f"<mlasim.CheckReport {len(self.errors)} errors, {len(self.warnings)} warnings>"


def _buffer(source, name):
    if isinstance(source, Mapping):
        for key in (name,) + tuple(k for k, v in ALIASES.items() if v == name):
            if key in source:
                return source[key]
        raise TypeError(f"{name}: missing from the buffers")
    if not hasattr(source, name):
        raise TypeError(f"{name}: missing from the buffers ({type(source).__name__} has no "
                        f"attribute {name})")
    return getattr(source, name)


def check_plan(buffers, request=None, *, planner="auto", unwritten=POISON, **request_args):
    """Checks five plan buffers against the request they must serve (ref/plan_check.h): every
    invariant of aiter-mla-metadata.md §5, one Diagnostic per broken one.

    ``buffers``: a :class:`Plan`, or a mapping / object holding work_indptr, work_info (or
    work_info_set), reduce_indptr, reduce_final_map, reduce_partial_map as int32 numpy arrays or
    torch tensors (CPU tensors are read in place; device tensors are copied to the host).
    ``request``: a Plan's ``request`` or None to build one from ``request_args`` (plan()'s
    arguments); a Plan's own request is used when neither is given. Cells equal to ``unwritten``
    (default POISON; None: none) count as never written.
    """
    if request is None:
        if request_args:
            request = make_request(**request_args)
        elif isinstance(buffers, Plan):
            request = buffers.request
        else:
            raise TypeError("request: give a request (plan.request) or plan()'s arguments")
    elif request_args:
        raise TypeError(f"{next(iter(request_args))}: give either request= or plan()'s "
                        f"arguments, not both")
    if not isinstance(request, _core.Request):
        raise TypeError(f"request: expected mlasim Request (a Plan's .request), got "
                        f"{type(request).__name__}")
    arrays = [host_array(name, _buffer(buffers, name))[0] for name in BUFFER_NAMES]
    return CheckReport(_core.check_plan(request, planner, *arrays, unwritten))


def planner_config(**args):
    """get_mla_metadata_v1's scalar arguments in the case-manifest form, validated: pass it as
    ``capture(..., config={"planner": planner_config(...)})``. Takes plan()'s scalar arguments
    (num_heads_per_head_k, num_heads_k, q_dtype, kv_dtype, target, cu_count, page_size,
    kv_granularity, max_seqlen_qo, uni_seqlen_qo, qlen, is_causal, topk, max_split_per_batch,
    is_cp_round_robin, revision); max_seqlen_qo defaults to 1."""
    for key in ("kv_indptr", "qo_indptr", "kv_last_page_lens", "kv_lens"):
        if key in args or any(ALIASES.get(a) == key for a in args):
            raise TypeError(f"{key}: arrays are captured as tensors, not in the planner config")
    args.setdefault("max_seqlen_qo", 1)
    placeholder = np.zeros(2, dtype=np.int32)  # one empty request: validates the scalars only
    lens = np.ones(1, dtype=np.int32)
    request = make_request(kv_indptr=placeholder, kv_last_page_lens=lens, **args)
    return request.planner_config()
