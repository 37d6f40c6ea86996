"""mlasim.capture: write one engine call's tensors as a case directory for ``mlasim check``.

A case directory holds ``manifest.json`` and one ``NAME.npy`` per tensor; the format is in
docs/python.md ("Case directories") and is read by tools/io/case_dir.h.
"""

import json
import math
import os
import platform
import re
import sys
from collections.abc import Mapping

import numpy as np

from . import _core
from ._convert import host_array, int_array, is_torch_tensor

# dtype name -> (.npy type string, item size): the table the C++ reader checks against.
DTYPES = {name: (descr, size) for name, descr, size in _core.dtype_table()}
# Dtypes numpy lacks: their bits are stored as an unsigned integer of the same size.
_BITS = {2: ("int16", np.uint16), 1: ("uint8", np.uint8)}

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_NAME = 128


def _versions():
    v = {"mlasim": _core.__version__, "python": platform.python_version(),
         "numpy": np.__version__}
    torch = sys.modules.get("torch")
    if torch is not None:
        v["torch"] = str(torch.__version__)
    return v


def _jsonable(path, x, within=()):
    """The engine config as JSON values; numpy scalars and torch dtypes / devices become plain
    values. Anything else raises TypeError naming its path (``config.model.layers``); a list or
    mapping that holds itself ValueError (``within``: the ids of the containers around x)."""
    if isinstance(x, (Mapping, list, tuple)):
        if id(x) in within:
            raise ValueError(f"{path}: holds itself (a cycle): JSON data has none")
        within = within + (id(x),)
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        if not math.isfinite(float(x)):
            raise ValueError(f"{path}: {x} is not a finite number (JSON has no NaN or inf)")
        return float(x)
    if isinstance(x, Mapping):
        out = {}
        for k, v in x.items():
            if not isinstance(k, str):
                raise TypeError(f"{path}: key {k!r} is not a string")
            out[k] = _jsonable(f"{path}.{k}", v, within)
        return out
    if isinstance(x, (list, tuple)):
        return [_jsonable(f"{path}[{i}]", v, within) for i, v in enumerate(x)]
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, (torch.dtype, torch.device)):
        return str(x).replace("torch.", "")
    raise TypeError(f"{path}: {type(x).__name__} is not JSON data (str, int, float, bool, None, "
                    f"list, dict, torch dtype or device)")


def _torch_entry(name, t):
    dtype = str(t.dtype).replace("torch.", "")
    if dtype not in DTYPES:
        raise TypeError(f"{name}: torch dtype {t.dtype} is not one a case can hold "
                        f"({', '.join(DTYPES)})")
    descr, size = DTYPES[dtype]
    host = t.detach()
    if host.device.type != "cpu":
        host = host.cpu()  # device -> host copy
    host = host.contiguous()
    try:
        arr = host.numpy()
    except (TypeError, RuntimeError):  # bfloat16, fp8, unsigned types torch cannot export
        view_as, bits = _BITS.get(size, ("int64", np.uint64))
        arr = host.view(getattr(sys.modules["torch"], view_as)).numpy().view(bits)
    if arr.dtype.str != descr:
        arr = arr.view(np.dtype(descr))
    entry = {"dtype": dtype, "descr": descr, "shape": list(t.shape), "strides": list(t.stride()),
             "nbytes": int(t.numel()) * size, "data_ptr": hex(int(t.data_ptr())),
             "device": str(t.device)}
    return arr, entry


def _numpy_entry(name, a):
    dtype = a.dtype.name
    if dtype not in DTYPES or not a.dtype.isnative:
        raise TypeError(f"{name}: numpy dtype {a.dtype.str} is not one a case can hold "
                        f"({', '.join(DTYPES)}, native byte order)")
    descr, size = DTYPES[dtype]
    if any(s % size for s in a.strides):
        raise ValueError(f"{name}: strides {a.strides} are not whole elements of {size} bytes")
    entry = {"dtype": dtype, "descr": descr, "shape": list(a.shape),
             "strides": [s // size for s in a.strides], "nbytes": int(a.size) * size,
             "data_ptr": hex(int(a.__array_interface__["data"][0])), "device": "cpu"}
    return np.ascontiguousarray(a), entry


def _entry(name, value):
    if is_torch_tensor(value):
        return _torch_entry(name, value)
    if isinstance(value, (list, tuple)) and _all_ints(value):
        # A Python list of integers is an index array (indptrs, page tables, lengths, top-k
        # lists): int32, the dtype every modelled engine passes and `check` reads; numpy would
        # make it int64, which `check` refuses. A value outside int32 raises ValueError.
        return _numpy_entry(name, int_array(name, value))
    arr, _ = host_array(name, value)
    return _numpy_entry(name, arr)


def _all_ints(seq):
    """Whether a (nested) list or tuple holds integers only (bools are not integers here)."""
    return all(_all_ints(v) if isinstance(v, (list, tuple))
               else isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in seq)


def capture(dir, call_name, config=None, **tensors):
    """Writes one engine call as a case directory for ``mlasim check``.

    ``dir``: a new or empty directory (created with its parents); one that already holds a
    manifest.json is refused (FileExistsError). ``call_name``: the call captured
    ("mla_decode_fwd"). ``config``: the engine config, JSON data; its ``"planner"`` entry
    (:func:`mlasim.planner_config`) lets ``check`` re-plan. ``tensors``: torch tensors or numpy
    arrays by name (None values are skipped). Planner arrays and buffers use mlasim's or aiter's
    names (kv_indptr / seqlens_kv_indptr, work_info / work_info_set, ...).

    Each tensor is written as ``NAME.npy`` in C order (CUDA tensors are copied to the host;
    bfloat16 / fp8 as their raw bits), and described in manifest.json with its shape, dtype,
    strides (elements), data_ptr (its address in this process: a device address for CUDA),
    byte size and device. The manifest is written last, so an interrupted capture leaves no
    manifest. Returns the directory path.
    """
    if not isinstance(call_name, str) or not call_name or len(call_name) > MAX_NAME \
            or not call_name.isprintable():
        raise ValueError(f"call_name: must be 1..{MAX_NAME} printable characters")
    try:
        config = _jsonable("config", {} if config is None else config)
    except RecursionError:  # a RecursionError named nothing (mlasim check reads 512 levels)
        raise ValueError("config: nested deeper than Python's recursion limit; mlasim check "
                         "reads at most json_depth (512) levels of JSON") from None
    if not isinstance(config, dict):
        raise TypeError("config: expected a mapping (the engine config)")
    entries, arrays = {}, {}
    for name in sorted(tensors):
        value = tensors[name]
        if value is None:
            continue
        if not _NAME.match(name) or len(name) > MAX_NAME:
            raise ValueError(f"{name}: a tensor name must be an identifier of at most "
                             f"{MAX_NAME} characters")
        arrays[name], entries[name] = _entry(name, value)
        entries[name]["file"] = f"{name}.npy"
    manifest = {"format": _core.CASE_FORMAT, "schema_version": _core.CASE_SCHEMA_VERSION,
                "call": call_name, "versions": _versions(), "config": config,
                "tensors": entries}
    try:  # what `mlasim check` would refuse is refused here, before any file is written
        _core.check_manifest(json.dumps(manifest, sort_keys=True))
    except ValueError as e:
        raise ValueError(f"mlasim check would refuse this case: {e}") from None
    path = os.fspath(dir)
    os.makedirs(path, exist_ok=True)
    manifest_path = os.path.join(path, "manifest.json")
    if os.path.exists(manifest_path):
        raise FileExistsError(f"dir: {path} already holds a case (manifest.json); capture into "
                              f"a new directory")
    for name, arr in arrays.items():
        np.save(os.path.join(path, f"{name}.npy"), arr, allow_pickle=False)
    tmp = manifest_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, manifest_path)
    return path
