"""Turning the caller's tensors into numpy arrays for mlasim._core, without copying where possible.

Which paths copy (docs/python.md, "Copies"):

* numpy arrays: never copied; the C++ side reads them in place (buffer protocol).
* torch CPU tensors: never copied; ``tensor.detach().numpy()`` shares the tensor's memory
  (the same pointer as ``tensor.data_ptr()``).
* torch CUDA (or other device) tensors: copied to the host (``tensor.cpu()``); ``plan(out=...)``
  copies the planned buffers back with ``tensor.copy_``.
* other objects with ``__dlpack__`` (CPU): shared through ``numpy.from_dlpack`` (read-only).
* other objects with the buffer protocol (``memoryview``, ``array.array``, ``bytes``): shared.
* Python lists and tuples: copied into a new numpy array.

torch is never imported here: a tensor is recognised only if the caller already imported torch.
"""

import sys

import numpy as np


def _torch():
    return sys.modules.get("torch")


def is_torch_tensor(x):
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def host_array(name, x, *, writable=False):
    """Returns ``(array, copied)``: a numpy view of ``x`` (or a host copy for device tensors and
    Python sequences). Raises TypeError naming ``name`` for anything else."""
    if isinstance(x, np.ndarray):
        return x, False
    if is_torch_tensor(x):
        t = x.detach()
        copied = t.device.type != "cpu"
        if copied:
            t = t.cpu()
        try:
            return t.numpy(), copied
        except (TypeError, RuntimeError) as e:  # dtypes numpy lacks (bfloat16, fp8)
            raise TypeError(f"{name}: torch dtype {t.dtype} has no numpy equivalent ({e})") from None
    if isinstance(x, (bool, int, float, str)) or x is None:
        raise TypeError(f"{name}: expected a numpy array or a torch tensor, got {type(x).__name__}")
    if hasattr(x, "__dlpack__") and not writable:
        try:
            return np.from_dlpack(x), False
        except (TypeError, RuntimeError, BufferError) as e:
            raise TypeError(f"{name}: cannot share it through DLPack ({e}); pass a CPU tensor") from None
    try:
        view = memoryview(x)
    except TypeError:
        view = None
    if view is not None:
        return np.asarray(view), False
    if isinstance(x, (list, tuple)):
        try:
            return np.asarray(x), True
        except (ValueError, TypeError) as e:
            raise TypeError(f"{name}: cannot make an array of it ({e})") from None
    raise TypeError(f"{name}: expected a numpy array or a torch tensor, got {type(x).__name__}")


def int_array(name, x):
    """An index array argument (indptrs, last-page lengths): a zero-copy view where possible; a
    Python list becomes int32. The dtype is checked (strictly) by mlasim._core."""
    if isinstance(x, (list, tuple)):
        try:
            arr = np.asarray(x)
        except (ValueError, TypeError, OverflowError) as e:
            raise TypeError(f"{name}: expected integers ({e})") from None
        if arr.size and arr.dtype.kind not in "iu":
            raise TypeError(f"{name}: expected integers, got {arr.dtype}")
        if arr.size and (int(arr.min()) < -2**31 or int(arr.max()) >= 2**31):
            raise ValueError(f"{name}: a value is outside int32")
        return arr.astype(np.int32)
    return host_array(name, x)[0]


def lens_array(name, x):
    """kv_lens: any integer sequence or array, as int64 (copied: it is small)."""
    arr = host_array(name, x)[0] if not isinstance(x, (list, tuple)) else None
    if arr is None:
        try:
            arr = np.asarray(x)
        except (ValueError, TypeError) as e:
            raise TypeError(f"{name}: expected integers ({e})") from None
    if arr.size and arr.dtype.kind not in "iu":
        raise TypeError(f"{name}: expected integers, got dtype {arr.dtype}")
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
        raise ValueError(f"{name}: a length is above 2^63")
    return np.ascontiguousarray(arr, dtype=np.int64)


def dtype_name(name, x):
    """A dtype argument as mlasim._core reads it: 'bf16', 'fp8', ... or torch's / numpy's name."""
    if isinstance(x, str):
        return x
    torch = _torch()
    if torch is not None and isinstance(x, torch.dtype):
        return str(x).replace("torch.", "")
    try:
        return np.dtype(x).name
    except TypeError:
        raise TypeError(f"{name}: expected a dtype or a dtype name, got {type(x).__name__}") from None


def address(x, arr):
    """The address of element 0 of ``x`` in its own memory space (a device address for a CUDA
    tensor), as aiter's work_metadata_ptrs would hold it."""
    if is_torch_tensor(x):
        return int(x.data_ptr())
    return int(arr.__array_interface__["data"][0])
