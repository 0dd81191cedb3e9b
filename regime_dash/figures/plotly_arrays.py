"""plotly.js's typed-array JSON, ``{"dtype": "f4", "bdata": <base64 of the bytes>}``, both ways.

A figure sent as a dict carries its numeric arrays this way (as a plotly ``Figure``
sends them, from plotly 6 on), and a figure restored from JSON or a cache holds
them so. No plotly import: the format is plain JSON.
"""
from __future__ import annotations

import base64
from typing import Any, Mapping

import numpy as np

#: NumPy dtypes plotly.js reads as typed arrays, and their codes in its ``{"dtype", "bdata"}`` JSON.
TYPED_ARRAY_CODES = {np.dtype(t): code for t, code in (
    ("<f8", "f8"), ("<f4", "f4"), ("<i4", "i4"), ("<u4", "u4"), ("<i2", "i2"), ("<u2", "u2"),
    ("i1", "i1"), ("u1", "u1"))}


def encode(value: Any) -> Any:
    """A 1-D or 2-D numpy array of a :data:`TYPED_ARRAY_CODES` dtype as a typed array (a 2-D one, such as
    a trace's ``customdata`` of several values a point, with its ``shape``, ``"rows,columns"``); anything
    else as it is (datetime64, int64, bool and object arrays are left to plotly's own JSON encoder)."""
    if not isinstance(value, np.ndarray) or value.ndim not in (1, 2):
        return value
    code = TYPED_ARRAY_CODES.get(value.dtype)
    if code is None:
        return value
    out = {"dtype": code, "bdata": base64.b64encode(np.ascontiguousarray(value).tobytes()).decode("ascii")}
    if value.ndim == 2:
        out["shape"] = f"{value.shape[0]},{value.shape[1]}"
    return out


def is_typed(values: Any) -> bool:
    """Whether ``values`` is a typed array's JSON (a mapping), not a sequence of values."""
    return isinstance(values, Mapping) or hasattr(values, "keys")


def decode(values: Mapping[str, Any]) -> np.ndarray:
    """The array a typed array's JSON holds, in its own dtype (and its ``shape``, where it has one)."""
    flat = np.frombuffer(base64.b64decode(values["bdata"]), dtype=np.dtype(values["dtype"]))
    shape = values.get("shape")
    return flat if shape is None else flat.reshape([int(n) for n in str(shape).split(",")])


__all__ = ["TYPED_ARRAY_CODES", "encode", "decode", "is_typed"]
