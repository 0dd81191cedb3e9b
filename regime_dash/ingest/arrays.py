"""NumPy <-> Arrow for the columns ingest builds, without pyarrow's pandas shim.

``pa.array``, ``pa.scalar``, ``Array.to_numpy`` and a compute call given a Python
value all ask pyarrow's pandas shim whether the value is a pandas object, and the first
such question imports pandas: about half a second of a fresh ``ingest`` process, for a
library ingest never uses. The clean path builds and reads its fixed-width columns here,
from and into their buffers; anything else (lists, strings, columns with nulls where
a reader needs them) goes through pyarrow as usual.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

_NUMPY_OF = {pa.int64(): np.int64, pa.float64(): np.float64, pa.int32(): np.int32,
             pa.int8(): np.int8}
_ARROW_OF = {np.dtype(np.int64): pa.int64(), np.dtype(np.float64): pa.float64(),
             np.dtype(np.int32): pa.int32(), np.dtype(np.int8): pa.int8()}


def _validity(mask: np.ndarray | None) -> tuple[pa.Buffer | None, int]:
    """An Arrow validity bitmap (1 = valid) from ``mask`` (True = null), and the null count."""
    if mask is None:
        return None, 0
    mask = np.asarray(mask, dtype=bool)
    nulls = int(np.count_nonzero(mask))
    if not nulls:
        return None, 0
    return pa.py_buffer(np.packbits(~mask, bitorder="little")), nulls


def from_numpy(values: np.ndarray, mask: np.ndarray | None = None) -> pa.Array:
    """An int64, int32, int8, float64 or bool Arrow array of ``values`` (null where
    ``mask`` is True), as ``pa.array(values, mask=mask)`` gives it."""
    values = np.ascontiguousarray(values)
    n = len(values)
    validity, nulls = _validity(mask)
    if values.dtype == np.bool_:
        data = pa.py_buffer(np.packbits(values, bitorder="little"))
        return pa.Array.from_buffers(pa.bool_(), n, [validity, data], null_count=nulls)
    typ = _ARROW_OF.get(values.dtype)
    if typ is None:
        raise TypeError(f"from_numpy: no Arrow type for {values.dtype}")
    return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(values)], null_count=nulls)


def to_numpy(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The values of a fixed-width numeric or bool column without nulls as a NumPy array
    (read-only where it shares Arrow's memory); other columns as ``to_numpy`` gives them."""
    if isinstance(arr, pa.ChunkedArray):
        if arr.num_chunks == 1:
            return to_numpy(arr.chunk(0))
        if arr.null_count == 0 and (arr.type in _NUMPY_OF or pa.types.is_boolean(arr.type)):
            parts = [to_numpy(c) for c in arr.chunks]
            return np.concatenate(parts) if parts else np.empty(0, _NUMPY_OF.get(arr.type, np.bool_))
        return arr.to_numpy()
    if arr.null_count:
        return arr.to_numpy(zero_copy_only=False)
    n = len(arr)
    if not n and (arr.type in _NUMPY_OF or pa.types.is_boolean(arr.type)):
        return np.empty(0, _NUMPY_OF.get(arr.type, np.bool_))
    if pa.types.is_boolean(arr.type):
        bits = np.frombuffer(arr.buffers()[1], dtype=np.uint8)
        return np.unpackbits(bits, bitorder="little", count=arr.offset + n)[arr.offset:].astype(bool)
    dtype = _NUMPY_OF.get(arr.type)
    if dtype is None:
        return arr.to_numpy(zero_copy_only=False)
    return np.frombuffer(arr.buffers()[1], dtype=dtype, count=n, offset=arr.offset * np.dtype(dtype).itemsize)


def first_valid(arr: pa.Array | pa.ChunkedArray) -> int:
    """The row of the first non-null value (the column must hold one)."""
    if arr.null_count == 0:
        return 0
    return int(np.argmax(to_numpy(arr.is_valid())))
