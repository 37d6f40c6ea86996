"""mlasim.check_call and mlasim.PlanViolation (see docs/python.md, "Checking a call")."""

import numpy as np

from . import _core
from ._convert import host_array

# Plan buffers and planner arrays whose values the contract reads (aiter's names accepted).
_ARRAY_NAMES = ("work_indptr", "work_info", "reduce_indptr", "reduce_final_map",
                "reduce_partial_map", "qo_indptr", "kv_indptr", "kv_last_page_lens")
_ALIASES = {"work_info_set": "work_info", "seqlens_qo_indptr": "qo_indptr",
            "seqlens_kv_indptr": "kv_indptr"}
# Tensors whose extents (shape and element size only) the contract checks.
_TENSOR_NAMES = ("q", "o", "logits", "attn_lse", "lse", "kv_indices")
# Arguments an engine passes that the contract does not check (accepted and ignored).
_IGNORED = ("work_metadata_ptrs", "work_meta_data", "kv_cache", "kv_buffer")

_contracts = {}


class PlanViolation(Exception):
    """A call whose plan makes its kernel touch rows outside a tensor it is given.

    Attributes: ``call`` (the call's name), ``contract`` (the contract's name), ``buffer`` (the
    tensor: "q", "o", "logits", ...), ``access`` ("read" / "write"), ``rows`` (rows the tensor
    holds, in the kernel's view), ``first_row`` / ``last_row`` (the rows touched outside it),
    ``rows_past_end``, ``rows_before_start``, ``work_items`` (the work items -- reduce: tiles --
    that make the access) and ``violations`` (every finding of the call, as dicts; the
    attributes describe the first)."""

    def __init__(self, call, contract, violations):
        self.call = call
        self.contract = contract
        self.violations = violations
        first = violations[0]
        for key, value in first.items():
            setattr(self, key, value)
        lines = [v["text"] for v in violations]
        super().__init__(lines[0] if len(lines) == 1 else
                         f"{len(lines)} accesses outside a tensor:\n  " + "\n  ".join(lines))


def _contract(call, kind, contract):
    key = (call if kind is None else None, kind, contract)
    handle = _contracts.get(key)
    if handle is None:
        if contract is not None and not isinstance(contract, str):
            contract = str(contract) if hasattr(contract, "__fspath__") else contract
        if contract is not None and not isinstance(contract, str):
            raise TypeError(f"contract: expected a variant name or a file path, got "
                            f"{type(contract).__name__}")
        if kind is not None and not isinstance(kind, str):
            raise TypeError(f"kind: expected 'decode' or 'reduce', got {type(kind).__name__}")
        handle = _core.load_contract(call, kind or "", contract or "")
        _contracts[key] = handle
    return handle


def _shape(name, x):
    shape = getattr(x, "shape", None)
    if shape is None:
        raise TypeError(f"{name}: expected a tensor or an array, got {type(x).__name__}")
    itemsize = x.element_size() if hasattr(x, "element_size") else getattr(x, "itemsize", None)
    if itemsize is None:
        raise TypeError(f"{name}: {type(x).__name__} has no element size")
    return (name, tuple(int(d) for d in shape), int(itemsize))


def _kv_inputs(tensors):
    """(kv_cache's (shape, itemsize), kv_indices' values flat as int32) for check_kv=True."""
    kv = tensors.get("kv_cache")
    if kv is None:
        kv = tensors.get("kv_buffer")
    idx = tensors.get("kv_indices")
    if kv is None or idx is None:
        raise ValueError("check_kv: needs kv_cache (or kv_buffer) and kv_indices")
    _, shape, itemsize = _shape("kv_cache", kv)
    if len(shape) < 2:
        raise ValueError(f"kv_cache: has {len(shape)} dimensions; check_kv needs [..., D] "
                         f"(rows are every dimension but the last)")
    values = host_array("kv_indices", idx)[0]
    if values.dtype != np.int32:
        raise TypeError(f"kv_indices: dtype is {values.dtype}, expected int32 (check_kv reads its "
                        f"values)")
    return (shape, itemsize), np.ascontiguousarray(values.reshape(-1))


def check_call(call, contract=None, *, kind=None, plan=None, fold_ratio=None, max_seqlen_q=None,
               page_size=None, launch_grid=None, check_kv=False, masked_index=None, **tensors):
    """Checks one decode or reduce call before it is launched: the kernel's access contract
    (docs/contracts.md) over the plan buffers and tensor shapes the engine is about to pass.
    Raises :class:`PlanViolation` naming the call, the tensor, the rows past its end and the work
    items when any access falls outside a tensor; returns None when the call is clean.

    ``call``: the call's name ("mla_decode_fwd", "mla_reduce_v1"); its kind (decode / reduce)
    follows from the name unless ``kind`` gives it. ``contract``: a built-in variant ("asm"
    (default for decode), "hk", "opus"; "mla_reduce_v1" for reduce) or a contract file path.
    Keyword tensors: q, o, logits, attn_lse, lse, kv_indices (only their shapes and element sizes
    are used: device tensors are not copied) and the plan buffers work_indptr, work_info (or
    work_info_set), reduce_indptr, reduce_final_map, reduce_partial_map with qo_indptr,
    kv_indptr, kv_last_page_lens (int32, read; device tensors copied to the host).
    ``check_kv=True`` also checks the KV rows the kernel gathers: ``kv_indices``' values are read
    (copied to the host: off by default, a pre-launch check stays shape-only) and ``kv_cache`` (or
    ``kv_buffer``: rows are every dimension but the last, pages x page_size tokens) gives the
    cache's extent; a page id outside the cache is what the contract's ``invalid_index`` says
    (aiter's asm decode: a read of kv_cache outside it). ``masked_index``: a kv_indices value
    that holds no entry (aiter's sparse index matrix: -1, the default when ``plan`` is a sparse
    (topk) plan).
    ``plan``: an :class:`mlasim.Plan` supplying the buffers and arrays not given, its fold ratio
    and max_seqlen_qo. q and o are [tokens, heads, D]: with fold ratio R the kernel views them as
    [tokens x R, heads / R, D]. Bad arguments raise TypeError / ValueError naming them.
    """
    if not isinstance(call, str):
        raise TypeError(f"call: expected the call's name (str), got {type(call).__name__}")
    handle = _contract(call, kind, contract)
    if not isinstance(check_kv, bool):
        raise TypeError(f"check_kv: expected True or False, got {type(check_kv).__name__}")
    kv_cache, kv_values = None, None
    if check_kv:
        kv_cache, kv_values = _kv_inputs(tensors)
    arrays, shapes = {}, []
    for key, value in tensors.items():
        name = _ALIASES.get(key, key)
        if value is None or name in _IGNORED:
            continue
        if name in _ARRAY_NAMES:
            if name in arrays:
                raise TypeError(f"{key}: given twice (under aiter's and mlasim's name)")
            arrays[name] = host_array(key, value)[0]
        elif name in _TENSOR_NAMES:
            shapes.append(_shape(key, value))
        else:
            raise TypeError(f"{key}: not an argument of check_call (tensors: "
                            f"{', '.join(_TENSOR_NAMES)}; buffers: {', '.join(_ARRAY_NAMES)})")
    if plan is not None:
        from ._planner import Plan
        if not isinstance(plan, Plan):
            raise TypeError(f"plan: expected mlasim.Plan, got {type(plan).__name__}")
        for name in _ARRAY_NAMES[:5]:
            if name not in arrays:
                arrays[name] = host_array(name, getattr(plan, name))[0]
        for name in _ARRAY_NAMES[5:]:
            if name not in arrays:
                arrays[name] = np.asarray(getattr(plan.request, name), dtype=np.int32)
        if fold_ratio is None:
            fold_ratio = plan.derived["fold_ratio"]
        if max_seqlen_q is None:
            max_seqlen_q = plan.request.max_seqlen_qo
        if page_size is None:
            page_size = plan.request.page_size
        if masked_index is None and check_kv and plan.request.topk >= 0:
            masked_index = -1
    found = _core.check_call(handle, call, arrays, shapes,
                             1 if fold_ratio is None else fold_ratio,
                             1 if max_seqlen_q is None else max_seqlen_q,
                             1 if page_size is None else page_size,
                             -1 if launch_grid is None else launch_grid,
                             kv_cache, kv_values, masked_index)
    if found:
        keys = ("buffer", "access", "rows", "first_row", "last_row", "rows_past_end",
                "rows_before_start", "work_items", "text")
        raise PlanViolation(call, handle.name, [dict(zip(keys, f)) for f in found])
