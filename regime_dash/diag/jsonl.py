"""A frame written as diag.jsonl column by column: the bytes of the row-by-row writer, fast.

The diag file's format is fixed by what :func:`regime_dash.diag.catalogue.write_jsonl` has always
written: one nested object per row built from the dotted column names (the key order of
the first occurrence, as ``diag.unflatten`` builds it), Python's ``json.dumps`` of each
value with ``separators=(",", ":")``: a float is the shortest repr of its float64 value
(so a float32 slot is its exact float64 value), ``NaN`` / ``Infinity`` / ``-Infinity``,
integers as integers, ``true`` / ``false``; a ``None``, and a NaN in one of the columns
the caller names (diag's meta columns), leaves the key out of that row. This module
imports nothing of ours, so :mod:`regime_dash.diag.catalogue` can call it.

Here every column becomes one Arrow array of JSON tokens for a chunk of rows (orjson
formats a float column in one call, its exponents are rewritten the way Python writes
them), and Arrow joins the tokens with the fixed key text between them into the lines.
A chunk's rows that leave keys out are joined with a template of their own. Memory is
one chunk's tokens and lines, whatever the length of the frame.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Collection, Iterator, Sequence

import numpy as np
import pandas as pd

#: Rows encoded and written at a time (a chunk's lines are about 70 MB of a replay frame).
CHUNK_ROWS = 1 << 16

# Python writes a float in exponent form outside [1e-4, 1e16); orjson moves to it at other
# magnitudes and writes exponents without sign or padding. These rewrite orjson's tokens of
# that range to Python's; a token neither form matches is formatted by Python itself.
_SCI_REWRITES = (
    (r"^(-?)0\.0000([1-9])$", r"\1\2e-05"),
    (r"^(-?)0\.0000([1-9])([0-9]*[1-9])$", r"\1\2.\3e-05"),
    (r"e([0-9])$", r"e+0\1"),
    (r"e([0-9][0-9]+)$", r"e+\1"),
    (r"e-([0-9])$", r"e-0\1"),
)
_PY_SCI = r"^-?[1-9](\.[0-9]*[1-9])?e[+-][0-9][0-9]+$"
_PY_FIXED = r"^-?(0|[1-9][0-9]*)\.([0-9]*[1-9]|0)$"
_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def _pa():
    import pyarrow as pa
    import pyarrow.compute as pc

    return pa, pc


def _strings(tokens: Sequence[str]):
    pa, _ = _pa()
    return pa.array(list(tokens), pa.string())


def _py_float(x: np.ndarray) -> list[str]:
    """Python's json tokens of float64 values, one call each (the slow, exact way)."""
    return [_NON_FINITE.get(r, r) for r in map(float.__repr__, x.tolist())]


def _orjson_tokens(x: np.ndarray):
    """orjson's tokens of a float64 array, as an Arrow string array (``null`` for non-finite)."""
    import orjson

    pa, _ = _pa()
    raw = np.frombuffer(orjson.dumps(x, option=orjson.OPT_SERIALIZE_NUMPY), np.uint8)[1:-1]
    commas = np.flatnonzero(raw == ord(","))
    keep = np.ones(len(raw), bool)
    keep[commas] = False
    data = raw[keep]
    offsets = np.empty(len(x) + 1, np.int32)
    offsets[0], offsets[-1] = 0, len(data)
    offsets[1:-1] = commas - np.arange(len(commas))
    return pa.StringArray.from_buffers(len(x), pa.py_buffer(offsets), pa.py_buffer(data))


def _matches(tokens, pattern: str) -> np.ndarray:
    _, pc = _pa()
    return pc.match_substring_regex(tokens, pattern).to_numpy(zero_copy_only=False)


def float_tokens(x: np.ndarray):
    """The JSON tokens Python's ``json.dumps`` writes for float64 values ``x``, as an Arrow array."""
    pa, pc = _pa()
    with np.errstate(invalid="ignore"):  # a float32 signalling NaN widens to a NaN, quietly
        x = np.ascontiguousarray(x, dtype=np.float64)
    if len(x) == 0:
        return pa.array([], pa.string())
    tokens = _orjson_tokens(x)
    mag = np.abs(x)
    sci = ((mag < 1e-4) & (mag > 0)) | ((mag >= 1e16) & (mag < np.inf))
    if sci.any():
        where = pa.array(sci)
        sub = tokens.filter(where)
        for find, repl in _SCI_REWRITES:
            sub = pc.replace_substring_regex(sub, find, repl)
        tokens = pc.replace_with_mask(tokens, where, sub)
        good = np.where(sci, _matches(tokens, _PY_SCI), _matches(tokens, _PY_FIXED))
    else:
        good = _matches(tokens, _PY_FIXED)
    if not good.all():  # non-finite values (orjson's null), and any token of a form not foreseen
        tokens = pc.replace_with_mask(tokens, pa.array(~good), _strings(_py_float(x[~good])))
    return tokens


def _plain(value: Any) -> Any:
    if isinstance(value, (np.floating, float)):
        return float(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def _object_tokens(values: np.ndarray, meta: bool) -> tuple[list[str], np.ndarray | None]:
    """Tokens of an object column, value by value as json.dumps writes them; which rows skip it."""
    memo: dict = {}
    tokens, skip = [], np.zeros(len(values), bool)
    for i, raw in enumerate(values):
        v = _plain(raw)
        if v is None or (meta and isinstance(v, float) and v != v):
            skip[i] = True
            tokens.append("")
            continue
        key = (type(v), v) if isinstance(v, (str, int, bool)) else None
        tok = memo.get(key) if key is not None else None
        if tok is None:
            tok = json.dumps(v, separators=(",", ":"))
            if key is not None:
                memo[key] = tok
        tokens.append(tok)
    return tokens, (skip if skip.any() else None)


def _constant(values: np.ndarray) -> bool:
    """Every value has the same bits (so ``-0.0`` and ``0.0`` differ, and NaNs never count)."""
    bits = values.view(np.dtype(f"u{values.dtype.itemsize}"))
    return bool((bits == bits[0]).all()) and not (values.dtype.kind == "f" and np.isnan(values[0]))


def column_tokens(values: np.ndarray, meta: bool):
    """One column's tokens for a chunk (a ``str`` when it is one value throughout) and the rows
    that leave it out (``None`` when none does)."""
    pa, pc = _pa()
    kind = values.dtype.kind
    if kind in "fiub" and len(values) and _constant(values):
        return _object_tokens(values[:1], meta)[0][0], None
    if kind == "f":
        skip = np.isnan(values) if meta else None
        return float_tokens(values), (skip if skip is not None and skip.any() else None)
    if kind in "iu":
        return pc.cast(pa.array(values), pa.string()), None
    if kind == "b":
        return pc.if_else(pa.array(values), "true", "false"), None
    if pd.api.types.infer_dtype(values, skipna=False) == "string":  # str only: each distinct one once
        codes, uniques = pd.factorize(values)
        return _strings([json.dumps(u) for u in uniques]).take(pa.array(codes)), None
    tokens, skip = _object_tokens(values, meta)
    return _strings(tokens), skip


def _nest(columns: Sequence[str]) -> dict:
    """The nested layout of ``columns``, each leaf its column's position (``diag.unflatten``'s rules)."""
    out: dict = {}
    for j, name in enumerate(columns):
        node = out
        *parents, leaf = name.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = j
    return out


def template(columns: Sequence[str]) -> tuple[list[str], list[int]]:
    """A line's fixed text and where the values go: ``text[0] v0 text[1] v1 ... text[-1]``,
    the values being the columns at positions ``order``."""
    text, order, cur = [], [], ["{"]

    def walk(node: dict) -> None:
        for i, (key, value) in enumerate(node.items()):
            cur.append(("," if i else "") + json.dumps(key) + ":")
            if isinstance(value, dict):
                cur.append("{")
                walk(value)
                cur.append("}")
            else:
                text.append("".join(cur))
                cur.clear()
                order.append(value)

    walk(_nest(columns))
    cur.append("}\n")
    text.append("".join(cur))
    return text, order


def _join(tokens: list, names: Sequence[str], present: Sequence[int], rows: np.ndarray | None, n: int):
    """The lines of the rows ``rows`` (all when ``None``) that hold the columns ``present``."""
    pa, pc = _pa()
    text, order = template([names[j] for j in present])
    args: list = [text[0]]
    for k, pos in enumerate(order):
        tok = tokens[present[pos]]
        if isinstance(tok, str):
            args[-1] += tok + text[k + 1]
            continue
        args += [tok if rows is None else tok.take(pa.array(rows)), text[k + 1]]
    if len(args) == 1:  # every value is constant
        return pa.array([args[0]] * (n if rows is None else len(rows)), pa.string())
    return pc.binary_join_element_wise(*args, "")


def chunk_lines(frame: pd.DataFrame, names: Sequence[str], start: int, stop: int,
                skip_nan: Collection[str] = ()):
    """The lines of rows ``start:stop`` of ``frame``, in order, as one Arrow string array
    (a NaN in a column of ``skip_nan`` leaves its key out)."""
    pa, _ = _pa()
    n = stop - start
    tokens, skips = [], []
    for j, name in enumerate(names):
        tok, skip = column_tokens(frame.iloc[start:stop, j].to_numpy(), name in skip_nan)
        tokens.append(tok)
        skips.append(skip)
    if all(s is None for s in skips):
        return _join(tokens, names, range(len(names)), None, n)
    mask = np.stack([s if s is not None else np.zeros(n, bool) for s in skips], axis=1)
    patterns, which = np.unique(mask, axis=0, return_inverse=True)
    parts, order = [], []
    for p, pattern in enumerate(patterns):
        rows = np.flatnonzero(which.ravel() == p)
        parts.append(_join(tokens, names, [j for j in range(len(names)) if not pattern[j]], rows, n))
        order.append(rows)
    lines = pa.concat_arrays(parts)
    return lines.take(pa.array(np.argsort(np.concatenate(order), kind="stable")))


def _bytes_of(lines) -> memoryview:
    """The concatenated values of an Arrow string array (its data buffer between its offsets)."""
    offsets = np.frombuffer(lines.buffers()[1], np.int32)[lines.offset:lines.offset + len(lines) + 1]
    return memoryview(lines.buffers()[2])[offsets[0]:offsets[-1]]


def iter_chunks(frame: pd.DataFrame, skip_nan: Collection[str] = (),
                chunk_rows: int = CHUNK_ROWS) -> Iterator[memoryview]:
    """The file's bytes, a chunk of rows at a time."""
    names = list(frame.columns)
    for start in range(0, len(frame), chunk_rows):
        yield _bytes_of(chunk_lines(frame, names, start, min(start + chunk_rows, len(frame)), skip_nan))


def write(frame: pd.DataFrame, path: str | Path, *, skip_nan: Collection[str] = (),
          chunk_rows: int = CHUNK_ROWS, progress: Callable[[int, int], None] | None = None) -> Path:
    """Write ``frame`` to ``path`` as a diag.jsonl (through a temporary file renamed at the end);
    ``progress(rows_done, rows)`` is called after each chunk."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "wb") as fh:
            done = 0
            for chunk in iter_chunks(frame, skip_nan, chunk_rows):
                fh.write(chunk)
                done = min(done + chunk_rows, len(frame))
                if progress is not None:
                    progress(done, len(frame))
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path
