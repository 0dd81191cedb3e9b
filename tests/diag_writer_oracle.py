"""The row-by-row diag.jsonl writer that defined the format: the oracle of the column writer.

One nested dict per row (``diag.unflatten`` of the dotted names), each value made a
Python scalar, ``json.dumps(..., separators=(",", ":"))``; a ``None``, and a NaN in a meta
column, leaves the key out of the row. Kept here verbatim so the fast writer
(:mod:`regime_dash.diag.jsonl`) is checked against it byte for byte.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from regime_dash.diag.catalogue import META_COLUMNS, unflatten

import numpy as np


def _plain(value: Any) -> Any:
    if isinstance(value, (np.floating, float)):
        return float(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def iter_records(frame: pd.DataFrame) -> Iterable[dict[str, Any]]:
    cols = list(frame.columns)
    arrays = [frame[c].to_numpy() for c in cols]
    for i in range(len(frame)):
        flat = {}
        for c, a in zip(cols, arrays):
            v = _plain(a[i])
            if v is None or (isinstance(v, float) and math.isnan(v) and c in META_COLUMNS):
                continue
            flat[c] = v
        yield unflatten(flat)


def jsonl_bytes(frame: pd.DataFrame) -> bytes:
    """The file the row writer wrote for ``frame``."""
    return "".join(json.dumps(rec, separators=(",", ":")) + "\n" for rec in iter_records(frame)).encode()


def write_jsonl(frame: pd.DataFrame, path: str | Path) -> Path:
    path = Path(path)
    path.write_bytes(jsonl_bytes(frame))
    return path
