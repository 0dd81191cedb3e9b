"""diag.jsonl bytes -> flattened Arrow tables plus the lines that were rejected.

This module is the pure core of ingestion: it reads a source (bytes, a path, or a
binary stream; plain or gzip) and yields values. It writes nothing; the run store
(:mod:`regime_dash.store`) decides where the tables go.

How a file is read
------------------
The source is read in newline-aligned chunks of ``chunk_bytes`` (a few MB), so memory
is bounded by a handful of chunks whatever the file size. Each chunk first goes
through Arrow's C++ JSON reader (the fast path). Arrow is stricter and looser than
Python's ``json`` in a few places, so a chunk is only accepted from the fast path when
it provably means the same as the line-by-line reference reading:

* every non-blank line opens an object and holds no lone ``\\r`` (Arrow reads a bare
  ``null`` line as a row of nulls, and pyarrow 26 crashes on a block that starts with
  one; it treats a lone ``\\r`` as a line break): checked *before* Arrow sees the bytes;
* the row count equals the number of non-blank lines (Arrow reads ``{..} {..}`` on one
  line, or a value broken over two lines, without complaint; Python rejects both);
* every string value and key is valid UTF-8 (Arrow does not check);
* no Arrow-only tokens (``-NaN``, ``Inf``) where the table holds NaN or infinities;
* no two flattened columns share a name, no string was turned into a timestamp
  (Arrow infers timestamps from strings; such paths are re-read as strings).

When Arrow fails and names the row ("... in row N"), the lines before it take the fast
path, that line is read by the reference, and parsing resumes after it; without a row,
the piece is halved. Pieces of at most ``_SLOW_LINES`` lines are read line by line with
:func:`json.loads` (the reference reading), which is where bad lines are found and
quarantined. Either way every line gets the reference's verdict.

Semantics (the contract the tests check)
----------------------------------------
Lines
    Lines end at ``\\n``; a trailing ``\\r`` is dropped (CRLF files). Line numbers are
    1-based and count every line, blank or not. A UTF-8 byte order mark at the very
    start of the file is skipped.
Blank lines
    Lines holding nothing but spaces, tabs or ``\\r`` are skipped; they are not errors.
Rejected lines
    A line is rejected, with its line number and a reason, when it is not valid UTF-8,
    not JSON (as Python's ``json.loads`` reads it: strict, but accepting the ``NaN``,
    ``Infinity`` and ``-Infinity`` tokens Python writes), or a JSON value that is not an
    object. A last line without a newline that does not parse is rejected as a truncated
    last line (the trainer crashed mid-write); one that parses is kept. Every other
    line is kept.
Values
    ``NaN``/``Infinity``/``-Infinity`` become float NaN/+inf/-inf. Integers are int64;
    integers outside the int64 range become float64 (as Arrow reads them). Lists stay
    lists (``list<...>`` columns, objects inside lists stay structs).
Flattening
    Nested objects become dotted columns: ``{"a": {"b": 1}}`` -> column ``a.b``. An empty
    object contributes no column. If a key containing a literal dot collides with a
    flattened path (``{"a.b": 1, "a": {"b": 2}}``), the value that comes later in the
    line wins.
Duplicate keys
    As in Python's ``json``: the last occurrence of a key in an object wins (and an
    earlier nested object under that key is dropped as a whole). The line is kept and
    is not reported. (Arrow refuses such lines; they go through the reference.)
Late keys
    There is no schema sampling: a key that first appears on the last line is a column.
Type conflicts
    A row is never dropped for its types. Each column takes the least type that holds
    all of its values, on the lattice ``null < bool``, ``null < int64 < float64``,
    ``null < list<T>``, and anything that does not fit becomes ``string``:

    * int64 and float64 -> float64 (exact up to 2**53; an int64 beyond 2**53 that
      shares a column with a float loses precision, and if that column also holds a
      string, its text may then depend on the chunking);
    * list<int64> and list<float64> -> list<float64>; structs in lists merge fields;
    * any other mix (number and string, bool and number, list and scalar) -> string.
      Strings are kept as they are; other values are written as compact JSON text,
      with integral floats below 2**53 written without a fraction (``1.0`` -> ``"1"``,
      so the text does not depend on which rows shared a chunk), ``NaN``,
      ``Infinity``, ``-Infinity`` for the special floats, ``true``/``false`` for bools.

    The same rule merges chunks, parts and runs later (:func:`unify_tables`), so the
    result does not depend on where chunk boundaries fall.
Reserved columns
    Every table carries ``_line`` (int64): the 1-based source line of the row. A source
    field that is itself called ``_line`` is renamed ``_line_`` (more underscores until
    the name is free).
``step``
    A float ``step`` column whose values are all integral is stored as int64.
"""
from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import threading
import zlib
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from regime_dash.errors import IngestError

__all__ = [
    "DEFAULT_CHUNK_BYTES",
    "LINE_COLUMN",
    "Batch",
    "IngestReport",
    "Reject",
    "iter_batches",
    "parse",
    "parse_lines_reference",
    "unify_tables",
    "unify_types",
    "json_text",
]

#: Bytes per chunk handed to the parser. A few MB keeps Arrow's per-call overhead small
#: while memory stays a small multiple of it (see ``docs/BENCHMARKS.md``).
DEFAULT_CHUNK_BYTES = 4 << 20

#: The reserved column holding each row's 1-based source line number.
LINE_COLUMN = "_line"

#: Pieces of a failed chunk with at most this many lines are read line by line.
_SLOW_LINES = 64

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_EXACT_INT = 2**53

_BOM = b"\xef\xbb\xbf"


# --------------------------------------------------------------------------- values


@dataclass(frozen=True)
class Reject:
    """One quarantined input line.

    Parameters
    ----------
    line
        1-based line number in the source.
    reason
        Why it was rejected, in words.
    raw
        The line's bytes as read (without the line break).
    """

    line: int
    reason: str
    raw: bytes = b""

    def to_dict(self, *, with_raw: bool = False) -> dict[str, Any]:
        """The reject as a JSON-ready dict (``raw`` decoded with backslash escapes)."""
        out: dict[str, Any] = {"line": self.line, "reason": self.reason}
        if with_raw:
            out["raw"] = self.raw.decode("utf-8", errors="backslashreplace")
        return out


@dataclass
class Batch:
    """The parse result of one chunk of the source.

    Attributes
    ----------
    table
        The good rows, flattened, in file order, with a ``_line`` column. May have zero
        rows (a chunk of only bad or blank lines).
    rejects
        The rejected lines of the chunk, in line order.
    first_line
        Line number of the chunk's first line.
    n_lines
        Number of lines the chunk spans (good, bad and blank).
    bytes_done
        Source bytes consumed once this batch is through (compressed bytes for gzip),
        for progress bars.
    """

    table: pa.Table
    rejects: list[Reject]
    first_line: int
    n_lines: int
    bytes_done: int = 0


@dataclass
class IngestReport:
    """What one pass over a source found. Filled in while :func:`iter_batches` runs.

    Attributes
    ----------
    path
        The source name, when known.
    rows
        Good rows.
    lines
        Lines in the file (good, rejected and blank).
    blank_lines
        Blank lines skipped.
    rejected
        Every rejected line as ``Reject`` (``raw`` is dropped here to keep memory down
        when a file is mostly garbage; the store keeps the raw lines on disk).
    columns
        Column name -> Arrow type string, in first-seen order, after unification.
    first_step, last_step
        Smallest and largest finite ``step`` value seen (``None`` when there is none).
    sha256
        Hex digest of the decompressed content; set when the source is exhausted.
    content_bytes
        Decompressed size in bytes.
    source_bytes
        Size of the source as stored (compressed size for gzip), when known.
    gzip
        Whether the source was gzip-compressed.
    truncated_gzip
        The gzip stream ended early (a crashed writer); what was readable was kept.
    complete
        The source was read to its end.
    """

    path: str | None = None
    rows: int = 0
    lines: int = 0
    blank_lines: int = 0
    rejected: list[Reject] = field(default_factory=list)
    columns: dict[str, str] = field(default_factory=dict)
    first_step: int | float | None = None
    last_step: int | float | None = None
    sha256: str | None = None
    content_bytes: int = 0
    source_bytes: int | None = None
    gzip: bool = False
    truncated_gzip: bool = False
    complete: bool = False
    _types: dict[str, pa.DataType] = field(default_factory=dict, repr=False)

    def add(self, batch: Batch) -> None:
        """Fold one batch into the report."""
        table = batch.table
        self.rows += table.num_rows
        self.lines = max(self.lines, batch.first_line + batch.n_lines - 1)
        self.rejected.extend(Reject(r.line, r.reason) for r in batch.rejects)
        for f in table.schema:
            if f.name == LINE_COLUMN:
                continue
            old = self._types.get(f.name)
            new = f.type if old is None else unify_types(old, f.type)
            self._types[f.name] = new
            self.columns[f.name] = str(new)
        if "step" in table.column_names and table.num_rows:
            lo, hi = _step_range(table.column("step"))
            if lo is not None:
                self.first_step = lo if self.first_step is None else min(self.first_step, lo)
                self.last_step = hi if self.last_step is None else max(self.last_step, hi)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (rejects as ``{line, reason}``)."""
        return {
            "path": self.path,
            "rows": self.rows,
            "lines": self.lines,
            "blank_lines": self.blank_lines,
            "rejected": [r.to_dict() for r in self.rejected],
            "columns": dict(self.columns),
            "first_step": self.first_step,
            "last_step": self.last_step,
            "sha256": self.sha256,
            "content_bytes": self.content_bytes,
            "source_bytes": self.source_bytes,
            "gzip": self.gzip,
            "truncated_gzip": self.truncated_gzip,
        }


def _step_range(col: pa.ChunkedArray) -> tuple[Any, Any]:
    t = col.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
        return None, None
    if pa.types.is_floating(t):
        col = pc.filter(col, pc.is_finite(col))
    mm = pc.min_max(col).as_py()
    lo, hi = mm["min"], mm["max"]
    return lo, hi


# ----------------------------------------------------------------- type unification


def _is_num(t: pa.DataType) -> bool:
    return pa.types.is_int64(t) or pa.types.is_float64(t)


def _join(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """Strict join on the type lattice; None where only ``string`` would hold both."""
    if a == b:
        return a
    if pa.types.is_null(a):
        return b
    if pa.types.is_null(b):
        return a
    if _is_num(a) and _is_num(b):
        return pa.float64()
    if pa.types.is_list(a) and pa.types.is_list(b):
        inner = _join(a.value_type, b.value_type)
        return None if inner is None else pa.list_(inner)
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        fields: dict[str, pa.DataType] = {}
        for f in list(a) + list(b):
            if f.name in fields:
                j = _join(fields[f.name], f.type)
                if j is None:
                    return None
                fields[f.name] = j
            else:
                fields[f.name] = f.type
        return pa.struct(list(fields.items()))
    return None


def unify_types(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """The least type holding values of both ``a`` and ``b`` (see the module docstring).

    Parameters
    ----------
    a, b
        Arrow types of one column in two tables.

    Returns
    -------
    pyarrow.DataType
        ``a`` when equal; the non-null one when one is null; float64 for int64/float64;
        merged lists/structs where their items join; ``string`` otherwise.
    """
    j = _join(a, b)
    return pa.string() if j is None else j


def _float_text(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if v.is_integer() and abs(v) < _EXACT_INT:
        return str(int(v))
    return repr(v)


def json_text(v: Any) -> str:
    """Compact JSON text of a parsed value, as a string-widened column stores it.

    Integral floats below 2**53 print without a fraction so that ``1`` and ``1.0`` give
    the same text; NaN and infinities print as Python's json tokens.

    Parameters
    ----------
    v
        A value as :func:`json.loads` returns it.

    Returns
    -------
    str
    """
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        # ints outside int64 are float64 values everywhere else, so print them as such
        return str(v) if _INT64_MIN <= v <= _INT64_MAX else _float_text(float(v))
    if isinstance(v, float):
        return _float_text(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(json_text(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(str(k), ensure_ascii=False) + ":" + json_text(x)
                              for k, x in v.items()) + "}"
    return json.dumps(str(v), ensure_ascii=False)


def _scalar_text(v: Any) -> str | None:
    """Text of one value in a string-widened column (strings stay as they are)."""
    if v is None:
        return None
    if isinstance(v, str):
        return v
    return json_text(v)


def _to_string_array(arr: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Cast a column to the string form of the type rule (vectorized where it can)."""
    t = arr.type
    if pa.types.is_string(t):
        return arr
    if pa.types.is_null(t):
        return arr.cast(pa.string())
    if pa.types.is_boolean(t) or pa.types.is_integer(t):
        return arr.cast(pa.string())  # "true"/"false" and decimal integers: JSON text
    if pa.types.is_floating(t):
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        vals = arr.to_numpy(zero_copy_only=False)
        valid = ~np.asarray(arr.is_null().to_numpy(zero_copy_only=False))
        fin = np.isfinite(vals) & valid
        integral = fin & (np.abs(vals) < _EXACT_INT)
        integral[integral] = vals[integral] == np.trunc(vals[integral])
        out = np.empty(len(vals), dtype=object)
        out[integral] = pa.array(vals[integral].astype(np.int64)).cast(pa.string()).to_numpy(
            zero_copy_only=False)
        rest = np.flatnonzero(valid & ~integral)
        for i in rest:
            out[i] = _float_text(float(vals[i]))
        out[~valid] = None
        return pa.array(out, type=pa.string())
    return pa.array([_scalar_text(v) for v in arr.to_pylist()], type=pa.string())


def _cast_to(arr: pa.Array | pa.ChunkedArray, target: pa.DataType):
    if arr.type == target:
        return arr
    if pa.types.is_string(target):
        return _to_string_array(arr)
    if pa.types.is_null(arr.type):
        return pa.nulls(len(arr), target)
    try:
        return arr.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        # nested casts Arrow cannot do (struct field merge): rebuild from Python values
        return pa.array(arr.to_pylist(), type=target)


def unify_tables(tables: Sequence[pa.Table], columns: Sequence[str] | None = None) -> pa.Table:
    """Concatenate tables whose columns differ in presence or type, by name.

    Columns missing from a table are null there; a column's type is the
    :func:`unify_types` join over all tables. Column order is first appearance.

    Parameters
    ----------
    tables
        Tables to concatenate, in order.
    columns
        If given, only these columns, in this order (missing ones come out all-null).

    Returns
    -------
    pyarrow.Table
    """
    tables = [t for t in tables if t is not None]
    if not tables:
        return pa.table({c: pa.array([], pa.null()) for c in (columns or [])})
    types: dict[str, pa.DataType] = {}
    for t in tables:
        for f in t.schema:
            types[f.name] = f.type if f.name not in types else unify_types(types[f.name], f.type)
    names = list(columns) if columns is not None else list(types)
    for n in names:
        types.setdefault(n, pa.null())
    if len(tables) == 1 and tables[0].column_names == names and all(
            f.type == types[f.name] for f in tables[0].schema):
        return tables[0]
    pieces = []
    for t in tables:
        cols = []
        for n in names:
            if n in t.column_names:
                cols.append(_cast_to(t.column(n), types[n]))
            else:
                cols.append(pa.nulls(t.num_rows, types[n]))
        pieces.append(pa.table(cols, names=names) if names else pa.table({}))
    return pa.concat_tables(pieces)


# --------------------------------------------------------------- the slow reference


def _flatten_into(prefix: str, obj: dict, out: dict) -> None:
    for k, v in obj.items():
        name = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            # a later value under the same dotted name replaces an earlier one
            _flatten_into(name, v, out)
        else:
            out.pop(name, None)  # keep "later wins" also for column order
            out[name] = v


def _column_from_values(values: list) -> pa.Array:
    """Build one column from Python values by the module's type rule."""
    kinds = set()
    for v in values:
        if v is None:
            continue
        if v is True or v is False:
            kinds.add("bool")
        elif isinstance(v, int):
            kinds.add("int" if _INT64_MIN <= v <= _INT64_MAX else "float")
        elif isinstance(v, float):
            kinds.add("float")
        elif isinstance(v, str):
            kinds.add("str")
        else:
            kinds.add("list")
    if not kinds:
        return pa.nulls(len(values))
    if kinds == {"bool"}:
        return pa.array(values, type=pa.bool_())
    if kinds == {"int"}:
        return pa.array(values, type=pa.int64())
    if kinds <= {"int", "float"}:
        return pa.array([None if v is None else float(v) for v in values], type=pa.float64())
    if kinds == {"str"}:
        return pa.array(values, type=pa.string())
    if kinds == {"list"}:
        arr = _list_array(values)
        if arr is not None:
            return arr
    return pa.array([_scalar_text(v) for v in values], type=pa.string())


def _list_array(values: list) -> pa.Array | None:
    """A list column typed the way Arrow's JSON reader types it; None if it must be text."""
    typ: pa.DataType | None = pa.null()
    for v in values:
        if v is None:
            continue
        t = _value_type(v)
        typ = None if t is None else _join(typ, t)
        if typ is None:
            return None
    try:
        return pa.array([_coerce(v, typ) for v in values], type=typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return None


def _value_type(v: Any) -> pa.DataType | None:
    """Arrow type of one parsed value on the strict lattice; None if it needs text."""
    if v is None:
        return pa.null()
    if v is True or v is False:
        return pa.bool_()
    if isinstance(v, int):
        return pa.int64() if _INT64_MIN <= v <= _INT64_MAX else pa.float64()
    if isinstance(v, float):
        return pa.float64()
    if isinstance(v, str):
        return pa.string()
    if isinstance(v, list):
        inner: pa.DataType | None = pa.null()
        for x in v:
            t = _value_type(x)
            inner = None if t is None else _join(inner, t)
            if inner is None:
                return None
        return pa.list_(inner)
    if isinstance(v, dict):
        fields = []
        for k, x in v.items():
            t = _value_type(x)
            if t is None:
                return None
            fields.append((k, t))
        return pa.struct(fields)
    return None


def _coerce(v: Any, t: pa.DataType) -> Any:
    if v is None:
        return None
    if pa.types.is_float64(t):
        return float(v)
    if pa.types.is_list(t):
        return [_coerce(x, t.value_type) for x in v]
    if pa.types.is_struct(t):
        return {f.name: _coerce(v.get(f.name), f.type) for f in t}
    return v


def _reject_reason_json(err: json.JSONDecodeError, truncated: bool) -> str:
    msg = f"not JSON: {err.msg} at column {err.colno}"
    if truncated:
        return f"truncated last line (no newline at end of file): {msg}"
    return msg


def _parse_one(raw: bytes, line: int, truncated_candidate: bool) -> tuple[dict | None, Reject | None]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        reason = f"invalid UTF-8: byte 0x{raw[e.start]:02x} at offset {e.start}"
        if truncated_candidate:
            reason = f"truncated last line (no newline at end of file): {reason}"
        return None, Reject(line, reason, raw)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        return None, Reject(line, _reject_reason_json(e, truncated_candidate), raw)
    except RecursionError:
        return None, Reject(line, "not JSON: nested too deeply", raw)
    if not isinstance(obj, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null",
                int: "a number", float: "a number"}.get(type(obj), type(obj).__name__)
        return None, Reject(line, f"JSON value is {kind}, not an object", raw)
    flat: dict[str, Any] = {}
    _flatten_into("", obj, flat)
    if LINE_COLUMN in flat:
        flat[_free_name(LINE_COLUMN, flat)] = flat.pop(LINE_COLUMN)
    # lone surrogates can only come from \\u escapes; Arrow cannot store them
    if "\\u" in text and _has_surrogate(obj):
        return None, Reject(line, "invalid unicode escape: lone surrogate", raw)
    return flat, None


def _has_surrogate(v: Any) -> bool:
    if isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(v, list):
        return any(_has_surrogate(x) for x in v)
    if isinstance(v, dict):
        return any(_has_surrogate(k) or _has_surrogate(x) for k, x in v.items())
    return False


def _free_name(base: str, taken) -> str:
    name = base + "_"
    while name in taken:
        name += "_"
    return name


def _is_blank(raw: bytes) -> bool:
    return not raw.strip(b" \t\r")


def parse_lines_reference(data: bytes, first_line: int = 1, *,
                          final_unterminated: bool = False) -> tuple[pa.Table, list[Reject], int]:
    """Parse complete lines one by one with :func:`json.loads` (the reference reading).

    Parameters
    ----------
    data
        Whole lines; every line ends with ``\\n`` except possibly the last.
    first_line
        Line number of the first line.
    final_unterminated
        The last line of ``data`` is the file's last line and has no newline, so a
        parse failure there is reported as a truncated last line.

    Returns
    -------
    table, rejects, blank_lines
        The good rows (flattened, with ``_line``), the rejected lines, the count of
        blank lines.
    """
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines.pop()
    rows: list[dict] = []
    line_nos: list[int] = []
    rejects: list[Reject] = []
    blanks = 0
    last = len(lines) - 1
    for i, raw in enumerate(lines):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        if _is_blank(raw):
            blanks += 1
            continue
        n = first_line + i
        row, rej = _parse_one(raw, n, final_unterminated and i == last)
        if rej is not None:
            rejects.append(rej)
        else:
            rows.append(row)
            line_nos.append(n)
    return _rows_to_table(rows, line_nos), rejects, blanks


def _rows_to_table(rows: list[dict], line_nos: list[int]) -> pa.Table:
    names: dict[str, None] = {}
    for r in rows:
        for k in r:
            names.setdefault(k, None)
    cols = {LINE_COLUMN: pa.array(line_nos, type=pa.int64())}
    for n in names:
        cols[n] = _column_from_values([r.get(n) for r in rows])
    return _finish(pa.table(cols))


# ------------------------------------------------------------------- the fast path


class _Hints:
    """Paths Arrow must read as strings (it infers timestamps from date-like strings).

    Shared by the worker threads of one :func:`iter_batches` call; only ever grows.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._paths: set[tuple[str, ...]] = set()
        self.schema: pa.Schema | None = None

    def add(self, paths: Iterable[tuple[str, ...]]) -> None:
        """Read these paths as strings from now on."""
        with self._lock:
            self._paths.update(paths)
            self.schema = _schema_from_paths(self._paths)


def _schema_from_paths(paths: set[tuple[str, ...]]) -> pa.Schema:
    tree: dict = {}
    for p in paths:
        node = tree
        for k in p[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                break
        else:
            node[p[-1]] = None

    def build(node: dict) -> list[pa.Field]:
        return [pa.field(k, pa.string() if v is None else pa.struct(build(v))) for k, v in node.items()]

    return pa.schema(build(tree))


def _timestamp_paths(t: pa.DataType, prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
    if pa.types.is_timestamp(t):
        return [prefix]
    if pa.types.is_struct(t):
        return [p for f in t for p in _timestamp_paths(f.type, prefix + (f.name,))]
    if pa.types.is_list(t):
        inner = _timestamp_paths(t.value_type, prefix)
        return [] if not inner else [("\0list",)]  # cannot hint inside lists: go slow
    return []


class _Slow(Exception):
    """The fast path cannot vouch for this piece; read it another way.

    ``row`` is the 0-based row Arrow's error names ("... in row N"), a hint of where
    the trouble starts; ``None`` when there is none.
    """

    def __init__(self, row: int | None = None, at: tuple[int, int] | None = None):
        super().__init__(row)
        self.row = row
        self.at = at  # (byte offset, line number) of a line known to need the reference


_ROW_RE = re.compile(r"in row (\d+)")


def _flatten_table(table: pa.Table) -> pa.Table:
    while any(pa.types.is_struct(f.type) for f in table.schema):
        n = table.num_rows
        table = table.flatten()
        if table.num_rows != n:  # flatten of a table left with no columns loses the count
            raise _Slow
    return table


@dataclass
class _Layout:
    """Where the lines of a piece are: offsets and numbers of its non-blank lines."""

    starts: np.ndarray   # byte offset of each non-blank line
    numbers: np.ndarray  # its line number (int64)
    n_lines: int         # all lines, blank or not
    blanks: int


def _line_layout(data: bytes, first_line: int) -> _Layout:
    """The line layout of ``data`` (whole lines, the last one possibly unterminated).

    Raises :class:`_Slow` when a line starts with a byte order mark or holds a lone
    ``\\r`` (Arrow would read either differently from Python). The byte scans run in
    NumPy, which releases the GIL, so parallel workers do not queue on them.
    """
    buf = np.frombuffer(data, dtype=np.uint8)
    nl = np.flatnonzero(buf == 10)
    n_lines = len(nl) + (0 if data.endswith(b"\n") or not data else 1)
    starts = np.empty(n_lines, dtype=np.int64)
    if n_lines:
        starts[0] = 0
        starts[1:] = nl[: n_lines - 1] + 1
    if b"\r" in data:  # memchr: cheap; the scan below only runs for CRLF files
        cr = np.flatnonzero(buf == 13)
        nxt = cr + 1
        if nxt[-1] >= len(buf) or not (buf[nxt] == 10).all():
            raise _Slow  # a bare \r: Arrow breaks the line there, Python does not
    first = buf[starts] if n_lines else np.empty(0, np.uint8)
    ws_first = (first == 32) | (first == 9) | (first == 13) | (first == 10)
    # Every non-blank line must open an object: Arrow reads a bare "null" line as a
    # row of nulls (Python rejects it), and a BOM at a line start is not JSON either.
    odd = np.flatnonzero(~ws_first & (first != 123))  # 123 == "{"
    if len(odd):
        i = int(odd[0])
        raise _Slow(at=(int(starts[i]), first_line + i))
    ws = np.flatnonzero(ws_first)
    numbers = np.arange(first_line, first_line + n_lines, dtype=np.int64)
    if not len(ws):
        return _Layout(starts, numbers, n_lines, 0)
    ends = np.empty(n_lines, dtype=np.int64)
    ends[: len(nl)] = nl
    if n_lines > len(nl):
        ends[-1] = len(data)
    keep = np.ones(n_lines, dtype=bool)
    for i in ws:  # only lines that start with whitespace can be blank
        stripped = data[starts[i]:ends[i]].strip(b" \t\r")
        keep[i] = bool(stripped)
        if stripped and stripped[:1] != b"{":
            raise _Slow
    return _Layout(starts[keep], numbers[keep], n_lines, int(n_lines - keep.sum()))


def _special_floats(arr: pa.Array | pa.ChunkedArray) -> tuple[bool, bool]:
    """(holds NaN, holds an infinity) for a column, also inside lists/structs."""
    t = arr.type
    if pa.types.is_floating(t):
        if pc.all(pc.is_finite(arr)).as_py() is not False:
            return False, False  # the common case: one compute call per column
        return (bool(pc.any(pc.is_nan(arr)).as_py()), bool(pc.any(pc.is_inf(arr)).as_py()))
    nan = inf = False
    if pa.types.is_list(t) or pa.types.is_struct(t):
        chunks = arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]
        for c in chunks:
            kids = [c.flatten()] if pa.types.is_list(t) else [c.field(i) for i in range(t.num_fields)]
            for k in kids:
                a, b = _special_floats(k)
                nan, inf = nan or a, inf or b
    return nan, inf


def _arrow_only_tokens(data: bytes, nan: bool, inf: bool) -> bool:
    """Whether ``data`` may hold ``-NaN`` (when ``nan``) or an ``Inf`` that is not
    ``Infinity`` (when ``inf``): tokens Arrow reads as floats and Python's json rejects.
    Vectorized (outside the GIL); a false positive (such text inside a string) only
    costs speed."""
    buf = np.frombuffer(data, dtype=np.uint8)
    n = len(buf)
    if nan:
        big_n = np.flatnonzero(buf == 78)  # 'N'
        big_n = big_n[(big_n >= 1) & (big_n + 2 < n)]
        if len(big_n) and ((buf[big_n - 1] == 45) & (buf[big_n + 1] == 97)
                           & (buf[big_n + 2] == 78)).any():
            return True  # "-NaN"
    if inf:
        big_i = np.flatnonzero(buf == 73)  # 'I'
        big_i = big_i[big_i + 2 < n]
        inf_at = big_i[(buf[big_i + 1] == 110) & (buf[big_i + 2] == 102)]  # "Inf"
        for p in inf_at:
            if data[p:p + 8] != b"Infinity":
                return True
    return False


def _fast(data: bytes, lay: _Layout, hints: _Hints) -> pa.Table:
    """Parse ``data`` with Arrow or raise :class:`_Slow`."""
    opts = pj.ReadOptions(use_threads=False, block_size=max(len(data) + 1, 1 << 16))

    def attempt(schema: pa.Schema | None):
        popts = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="infer") \
            if schema is not None else pj.ParseOptions()
        try:
            return pj.read_json(pa.BufferReader(data), read_options=opts, parse_options=popts), None
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            m = _ROW_RE.search(str(e))
            return None, _Slow(int(m.group(1)) if m else None)

    hinted = hints.schema
    table, err = attempt(hinted)
    if err is not None and hinted is not None:
        # a column hinted as string elsewhere may hold numbers here: read without hints
        table, err = attempt(None)
    if err is not None:
        raise err
    stamps = [p for f in table.schema for p in _timestamp_paths(f.type, (f.name,))]
    if stamps:
        # Arrow turned date-like strings into timestamps: read those paths as strings
        # (and remember them, so later chunks are read right the first time)
        if ("\0list",) in stamps:
            raise _Slow
        hints.add(stamps)
        table, err = attempt(hints.schema)
        if err is not None:
            table, err = attempt(_schema_from_paths(set(stamps)))
        if err is not None or any(_timestamp_paths(f.type, (f.name,)) for f in table.schema):
            raise _Slow
    if table.num_rows != len(lay.numbers):
        raise _Slow  # "{..} {..}" on one line, or a value broken over lines
    nan = inf = False
    for c in table.columns:
        a, b = _special_floats(c)
        nan, inf = nan or a, inf or b
    # Arrow also reads "-NaN" and "Inf", which Python's json rejects: look for them only
    # where the table holds such values at all
    if (nan or inf) and _arrow_only_tokens(data, nan, inf):
        raise _Slow
    try:
        table.validate(full=True)  # UTF-8 of string values (Arrow's reader does not check)
        table = _flatten_table(table)
        names = table.column_names  # decoding raises on invalid UTF-8 in keys
    except (pa.ArrowInvalid, UnicodeDecodeError) as e:
        raise _Slow from e
    if len(set(names)) != len(names):
        raise _Slow  # "a.b" and {"a": {"b"}} in one chunk: resolve line by line
    if LINE_COLUMN in names:
        table = table.rename_columns([_free_name(LINE_COLUMN, names) if n == LINE_COLUMN else n
                                      for n in names])
    table = table.add_column(0, LINE_COLUMN, pa.array(lay.numbers, type=pa.int64()))
    return _finish(table)


def _finish(table: pa.Table) -> pa.Table:
    """Shared post-processing of both paths: integral float ``step`` -> int64, no struct<>."""
    keep = [i for i, f in enumerate(table.schema)
            if not (pa.types.is_struct(f.type) and f.type.num_fields == 0)]
    if len(keep) != table.num_columns:
        table = table.select(keep)
    if "step" in table.column_names:
        col = table.column("step")
        if pa.types.is_floating(col.type) and len(col) > col.null_count:
            vals = col.drop_null().to_numpy()
            if np.isfinite(vals).all() and (vals == np.trunc(vals)).all() \
                    and np.abs(vals).max() < _EXACT_INT:
                i = table.column_names.index("step")
                table = table.set_column(i, "step", col.cast(pa.int64()))
    return table


def _split_half(data: bytes) -> tuple[bytes, bytes]:
    mid = len(data) // 2
    cut = data.find(b"\n", mid)
    if cut < 0 or cut + 1 >= len(data):
        cut = data.rfind(b"\n", 0, mid)
        if cut < 0:
            return data, b""
    return data[:cut + 1], data[cut + 1:]


def _parse_region(data: bytes, first_line: int, final_unterminated: bool, hints: _Hints,
                  tables: list, rejects: list, counted: list | None = None) -> int:
    """Parse whole lines: the fast path where it vouches, the reference elsewhere.

    When Arrow names the row it failed on, the lines before it take the fast path, that
    one line is read by the reference, and the loop goes on after it; without a row, the
    piece is halved. Returns the number of blank lines.
    """
    blanks = 0
    while data:
        lay = None
        at = None  # (byte offset, line number) of a line to read by itself
        try:
            lay = _line_layout(data, first_line)
        except _Slow as e:
            at = e.at
        n_lines = lay.n_lines if lay is not None else _count_lines(data)
        if n_lines <= _SLOW_LINES:
            break  # small: the reference below
        if lay is not None:
            try:
                tables.append(_fast(data, lay, hints))
                if counted is not None and first_line == 1:
                    counted.append(lay.n_lines)  # the whole chunk in one go: its line count
                return blanks + lay.blanks
            except _Slow as e:
                if e.row is not None and e.row < len(lay.numbers):
                    at = (int(lay.starts[e.row]), int(lay.numbers[e.row]))
        if at is None:
            a, b = _split_half(data)
            if not b:
                break
            blanks += _parse_region(a, first_line, False, hints, tables, rejects)
            first_line += a.count(b"\n")
            data = b
            continue
        start, line_no = at
        if start:
            # the lines before the row Arrow choked on: (normally) one fast parse
            blanks += _parse_region(data[:start], first_line, False, hints, tables, rejects)
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end + 1
        t, r, bl = parse_lines_reference(data[start:end], line_no,
                                         final_unterminated=final_unterminated and end == len(data))
        tables.append(t)
        rejects.extend(r)
        blanks += bl
        data = data[end:]
        first_line = line_no + 1
    if data:
        t, r, bl = parse_lines_reference(data, first_line, final_unterminated=final_unterminated)
        tables.append(t)
        rejects.extend(r)
        blanks += bl
    return blanks


def _count_lines(data: bytes) -> int:
    # NumPy, not bytes.count: the count then runs outside the GIL
    n = int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8) == 10))
    return n + (0 if data.endswith(b"\n") or not data else 1)


def _parse_chunk(data: bytes, final_unterminated: bool,
                 hints: _Hints) -> tuple[pa.Table, list[Reject], int, int]:
    """Parse one chunk with line numbers relative to the chunk (first line = 1)."""
    tables: list[pa.Table] = []
    rejects: list[Reject] = []
    counted: list[int] = []
    blanks = _parse_region(data, 1, final_unterminated, hints, tables, rejects, counted)
    n_lines = counted[0] if counted else _count_lines(data)
    tables = [t for t in tables if t.num_rows] or tables[:1]
    table = tables[0] if len(tables) == 1 else unify_tables(tables)
    return table, rejects, blanks, n_lines


# ----------------------------------------------------------------------- the source


def _open(source: Any, path: str | None) -> tuple[BinaryIO, int | None, list]:
    """Open a source. Returns (binary stream, total bytes if known, things to close)."""
    to_close: list = []
    if isinstance(source, (bytes, bytearray, memoryview)):
        raw: BinaryIO = io.BytesIO(source)
        total: int | None = memoryview(source).nbytes
    elif isinstance(source, (str, os.PathLike)):
        try:
            raw = open(source, "rb", buffering=0)  # noqa: SIM115 - closed by the caller
        except OSError as e:
            raise IngestError(f"cannot read {str(source)!r}: {e.strerror or e}",
                              path=str(source)) from e
        to_close.append(raw)
        try:
            total = os.fstat(raw.fileno()).st_size
        except OSError:
            total = None
    elif hasattr(source, "read"):
        raw = source
        total = None
        try:
            if hasattr(source, "seek") and source.seekable():
                here = source.tell()
                total = source.seek(0, io.SEEK_END) - here
                source.seek(here)
        except (OSError, ValueError):
            total = None
    else:
        raise IngestError(f"cannot ingest a {type(source).__name__}: give bytes, a path or a "
                          "binary stream", path=path)
    return raw, total, to_close


class _Blocks:
    """Content blocks of a source (decompressed when it is gzip), and the progress.

    Gzip is inflated here with :mod:`zlib` rather than :class:`gzip.GzipFile`, whose
    ``read`` drops the data of its last call when a crashed writer cut the stream
    short; here everything inflated before the cut is kept and ``truncated`` is set.
    """

    def __init__(self, raw: BinaryIO, path: str | None):
        self.raw = raw
        self.path = path
        self.done = 0  # source bytes consumed
        self.gzip = False
        self.truncated = False

    def _read(self, n: int) -> bytes:
        try:
            b = self.raw.read(n)
        except OSError as e:
            raise IngestError(f"cannot read {self.path or 'input'}: {e}", path=self.path) from e
        b = b or b""
        self.done += len(b)
        return bytes(b) if not isinstance(b, bytes) else b

    def __call__(self, size: int) -> Iterator[bytes]:
        first = self._read(size)
        if first[:2] != b"\x1f\x8b":
            while first:
                yield first
                first = self._read(size)
            return
        self.gzip = True
        d = zlib.decompressobj(wbits=31)
        buf = first
        while True:
            if not buf:
                buf = self._read(size)
                if not buf:
                    if not d.eof:
                        self.truncated = True  # the writer died mid-stream
                    return
            try:
                out = d.decompress(buf, size)
            except zlib.error as e:
                raise IngestError(f"cannot read {self.path or 'input'}: corrupt gzip data "
                                  f"near byte {self.done} ({e})", path=self.path) from e
            buf = d.unconsumed_tail
            if out:
                yield out
            if d.eof:
                rest = d.unused_data + buf
                rest = rest + self._read(2) if len(rest) < 2 else rest
                if rest[:2] == b"\x1f\x8b":
                    d = zlib.decompressobj(wbits=31)  # the next member
                    buf = rest
                    continue
                if rest.strip(b"\0") or self._read(size).strip(b"\0"):
                    raise IngestError(f"cannot read {self.path or 'input'}: data after the "
                                      "end of the gzip stream", path=self.path)
                return


def _read_chunks(blocks: Iterator[bytes], report: IngestReport) -> Iterator[tuple[bytes, bool]]:
    """Yield (whole lines, final_unterminated); hash as we go.

    Line numbers are not counted here (a GIL-holding scan on the one reading thread);
    workers number lines within their chunk and :class:`_Renumber` shifts them.
    """
    h = hashlib.sha256()
    carry = b""
    first = True
    for block in blocks:
        h.update(block)  # releases the GIL for large buffers
        report.content_bytes += len(block)
        if first:
            first = False
            if block.startswith(_BOM):
                block = block[len(_BOM):]
        cut = block.rfind(b"\n") + 1
        if cut == 0:
            carry += block  # a line longer than a chunk: keep reading
            continue
        if not carry and cut == len(block):
            piece = block
        else:  # one copy: the carried partial line + the whole lines of this block
            piece = b"".join((carry, memoryview(block)[:cut]))
        carry = block[cut:]
        yield piece, False
    if carry:
        yield carry, True
    report.sha256 = h.hexdigest()


def _default_workers() -> int:
    try:
        n = len(os.sched_getaffinity(0))  # the CPUs this process may use, not the host's
    except AttributeError:
        n = os.cpu_count() or 1
    # beyond ~8 the one reading/writing thread is the bottleneck and memory still grows
    return max(1, min(8, n))


class _Renumber:
    """Turns chunk-relative line numbers into file line numbers, in source order."""

    def __init__(self, report: IngestReport):
        self.report = report
        self.offset = 0  # lines before the current chunk

    def __call__(self, result, pos: int) -> Batch:
        table, rejects, blanks, n = result
        off = self.offset
        if off:
            i = table.column_names.index(LINE_COLUMN)
            table = table.set_column(i, LINE_COLUMN, pc.add(table.column(i), off))
            rejects = [Reject(r.line + off, r.reason, r.raw) for r in rejects]
        self.offset += n
        self.report.blank_lines += blanks
        batch = Batch(table, rejects, off + 1, n, pos)
        self.report.add(batch)
        return batch


def iter_batches(source: Any, *, chunk_bytes: int = DEFAULT_CHUNK_BYTES, path: str | None = None,
                 report: IngestReport | None = None, workers: int | None = None) -> Iterator[Batch]:
    """Stream a diag.jsonl source as batches of flattened good rows plus rejects.

    Memory is bounded by the ``workers + 2`` chunks in flight (each a few times
    ``chunk_bytes`` while Arrow parses it), whatever the size of the source.

    Parameters
    ----------
    source
        ``bytes``/``bytearray``/``memoryview``, a path (``str`` or ``os.PathLike``), or a
        binary file object. Gzip is detected from the magic bytes, not the name.
    chunk_bytes
        Target bytes per chunk (chunks end at a line break; a longer line is one chunk).
    path
        Name used in error messages and the report (defaults to ``source`` if a path).
    report
        An :class:`IngestReport` to fill in while iterating; it is complete (with its
        ``sha256``) once the iterator is exhausted.
    workers
        Chunks parsed in parallel threads (Arrow and NumPy release the GIL). Defaults
        to the CPUs this process may use, at most 8.

    Yields
    ------
    Batch
        In source order.

    Raises
    ------
    IngestError
        The source cannot be opened or read (missing file, corrupt gzip).
    """
    if not isinstance(chunk_bytes, int) or chunk_bytes < 1:
        raise IngestError(f"chunk_bytes must be a positive int, got {chunk_bytes!r}", path=path)
    if path is None and isinstance(source, (str, os.PathLike)):
        path = str(source)
    if report is None:
        report = IngestReport()
    report.path = path
    raw, total, to_close = _open(source, path)
    report.source_bytes = total
    hints = _Hints()
    workers = workers or _default_workers()
    renumber = _Renumber(report)
    blocks = _Blocks(raw, path)
    position = lambda: blocks.done  # noqa: E731
    try:
        chunks = _read_chunks(blocks(chunk_bytes), report)
        if workers == 1:
            for data, final in chunks:
                yield renumber(_parse_chunk(data, final, hints), position())
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ingest") as pool:
                pending: deque = deque()
                try:
                    for data, final in chunks:
                        pending.append((pool.submit(_parse_chunk, data, final, hints), position()))
                        del data
                        # bounded read-ahead: one chunk queued beyond the busy workers
                        while len(pending) > workers + 1:
                            fut, pos = pending.popleft()
                            yield renumber(fut.result(), pos)
                    while pending:
                        fut, pos = pending.popleft()
                        yield renumber(fut.result(), pos)
                finally:
                    for fut, _p in pending:
                        fut.cancel()
        report.complete = True
    finally:
        report.gzip = blocks.gzip
        report.truncated_gzip = blocks.truncated
        for f in reversed(to_close):
            try:
                f.close()
            except OSError:
                pass


def parse(source: Any, *, chunk_bytes: int = DEFAULT_CHUNK_BYTES, path: str | None = None,
          workers: int | None = None) -> tuple[pa.Table, IngestReport]:
    """Parse a whole (small) source into one table. Convenience for tests and the UI.

    Parameters
    ----------
    source, chunk_bytes, path, workers
        As for :func:`iter_batches`.

    Returns
    -------
    table, report
        All good rows unified into one table (see :func:`unify_tables`), and the report.
    """
    report = IngestReport()
    tables = [b.table for b in iter_batches(source, chunk_bytes=chunk_bytes, path=path,
                                            report=report, workers=workers)]
    if not tables:
        return pa.table({LINE_COLUMN: pa.array([], pa.int64())}), report
    return unify_tables(tables), report
