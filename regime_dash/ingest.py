"""diag.jsonl bytes -> flattened Arrow tables plus the lines that were rejected.

This module is the pure core of ingestion: it reads a source (bytes, a path, or a
binary stream; plain or gzip) and yields values. It writes nothing; the run store
(:mod:`regime_dash.store`) decides where the tables go.

How a file is read
------------------
The source is read in newline-aligned chunks of ``chunk_bytes`` (a few MB), so memory
is bounded by a handful of chunks whatever the file size; gzip is inflated at most a
block at a time, and a line longer than ``max_line_bytes`` (64 MB) is never held: its
bytes are dropped as they arrive and the line is rejected with its size. So a gzip bomb
(4 MB inflating to 4 GiB of zeros without a line break) costs what a 64 MB line costs.

Within a chunk, every line is classified by vectorized scans (a flood of blank lines
costs NumPy passes, not Python per line): blank, too long, a candidate (opens with
``{`` and ends with ``}``), or other (the reference reads it; it is almost always
rejected). The stretches of candidates go through Arrow's C++ JSON reader (the fast
path). Arrow is stricter and looser than Python's ``json`` in a few places, so its
result is only accepted when it provably means the same as the line-by-line reference
reading:

* the row count equals the number of candidate lines (Arrow reads ``{..} {..}`` on one
  line without complaint; Python rejects it): such a line is found and read alone;
* every string value and key is valid UTF-8 (Arrow does not check);
* no Arrow-only tokens (``-NaN``, ``Inf``) where the table holds NaN or infinities, and
  no number literal outside float64 (Arrow reads ``1e400`` as infinity);
* no two flattened columns share a name, no string was turned into a timestamp
  (Arrow infers timestamps from strings; such paths are re-read as strings).

When Arrow fails and names the row ("... in row N"), the lines before it take the fast
path, that line is read by the reference, and parsing resumes after it; without a row,
the piece is halved; after a few failures in one chunk the rest goes in blocks (linear
time on a chunk full of bad lines). Pieces of at most ``_SLOW_LINES`` lines are read
line by line with :func:`json.loads` (the reference reading), which is where bad lines
are found and quarantined. Either way every line gets the reference's verdict, and no
exception escapes: a value Arrow cannot hold, or any failure this module did not
foresee, becomes a rejected line with its reason.

Semantics (the contract the tests check)
----------------------------------------
Lines
    ``\n``, ``\r\n`` and a lone ``\r`` each end a line (a lone CR never merges two
    records). Line numbers are 1-based and count every line, blank or not. A UTF-8 byte
    order mark at the very start of the file is skipped.
Blank lines
    Lines holding nothing but spaces and tabs are skipped; they are not errors.
Rejected lines
    A line is rejected, with its line number and a reason, when it is longer than
    ``max_line_bytes`` (reason ``line too long: N bytes``; only its first 256 bytes are
    kept), not valid UTF-8, not JSON (as Python's ``json.loads`` reads it: strict, but
    accepting the ``NaN``, ``Infinity`` and ``-Infinity`` tokens Python writes), a JSON
    value that is not an object, or holds a number outside float64 (see Values). A last
    line without a newline that does not parse is rejected as a truncated last line (the
    trainer crashed mid-write); one that parses is kept. Every other line is kept.
Values
    ``NaN``/``Infinity``/``-Infinity`` become float NaN/+inf/-inf. A number literal
    outside float64 (``1e400``, a 400-digit integer) rejects its line with the reason
    ``number out of float64 range``: never a silent infinity, never a traceback.
    Integers are int64; integers outside the int64 range become float64 (as Arrow reads
    them, rounded). Lists stay lists (``list<...>`` columns, objects inside lists stay
    structs).
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
One type per column
    A row is never dropped for its types, and one odd value never retypes its column:

    * every field of the diag contract has its canonical type (:data:`CANONICAL_TYPES`:
      ``step``, ``fold``, flat count and batch size int64, ``phase`` string, the other
      ``risk_stack.*`` fields float64);
    * another column takes the kind of its first value in the file (bool, number,
      string, list; the store passes the type an earlier run gave it, which wins),
      widened only within that kind: int64 then float64 -> float64, list items alike;
    * a value of another kind is coerced when that is lossless (``"1"`` -> 1, ``1.0``
      -> 1, ``true`` -> 1.0, 0/1 -> bool, any value -> its JSON text in a string
      column) and counted in the report's ``coerced``; otherwise the row keeps a null
      there and the value is set aside exactly, as JSON text with its line
      (:class:`Aside`, the run's ``_conflicts.jsonl``). In a column whose type is not
      fixed, a string goes into a number column only as an integer's text, so the
      verdict does not depend on whether the column is int64 or float64 yet.

    Decided by first values and source order, the result does not depend on where
    chunk boundaries fall.
Reserved columns
    Every table carries ``_line`` (int64): the 1-based source line of the row. A source
    field that is itself called ``_line`` is renamed ``_line_`` (more underscores until
    the name is free).
``step``
    int64, as every contract field has its canonical type: ``1.0`` is stored as 1, a
    fractional step is set aside.
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
from typing import Any, BinaryIO, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from regime_dash.errors import IngestError

__all__ = [
    "CANONICAL_TYPES",
    "DEFAULT_CHUNK_BYTES",
    "DEFAULT_MAX_LINE_BYTES",
    "LINE_COLUMN",
    "Aside",
    "Batch",
    "IngestReport",
    "Reject",
    "conform_column",
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

#: Longest line read (bytes, without the line break). A longer line is rejected with its
#: size and is never held whole: the reader skips to its end. Bounds memory on any input.
DEFAULT_MAX_LINE_BYTES = 64 << 20

#: The reserved column holding each row's 1-based source line number.
LINE_COLUMN = "_line"

#: Rejected lines and set-aside values an :class:`IngestReport` keeps in memory (the
#: counts are exact; the store writes every one of them to disk).
REPORT_KEEP = 1000

#: Bytes of chunks parsed or queued at once, beyond which the reader waits (long lines
#: make chunks big; this keeps their number down).
_INFLIGHT_BYTES = 256 << 20

# A number literal that may lie outside float64: an exponent of 3+ digits or a run of
# 300+ digits. Only consulted where a parse produced an infinity (or on the reference
# path, to decide whether the number hooks are needed), so false positives cost nothing.
_OVERFLOW_RE = re.compile(rb"[0-9.][eE][+-]?[0-9]{3,}|[0-9]{300,}")
_OVERFLOW_TEXT_RE = re.compile(r"[0-9.][eE][+-]?[0-9]{3,}|[0-9]{300,}")


def _lf(data: bytes) -> bytes:
    """CR, LF and CRLF all as LF (two memchr-speed passes; no regex)."""
    return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n") if b"\r" in data else data


_TWO_OBJECTS = re.compile(rb"\}[ \t]*\{")
_FLOAT_MAX = 1.7976931348623157e308


def _canonical_types() -> dict[str, pa.DataType]:
    from regime_dash.diag import B_SIZE, DIAG_FIELDS, FLAT_COUNT

    types: dict[str, pa.DataType] = {"step": pa.int64(), "fold": pa.int64(), "phase": pa.string(),
                                     "wall_time": pa.float64()}
    types.update({col: pa.float64() for col, _src in DIAG_FIELDS})  # float32 ISV slots
    types.update({FLAT_COUNT: pa.int64(), B_SIZE: pa.int64()})
    return types


#: The one storage type of every field of the diag contract (DESIGN.md "Diag fields"), in
#: every run: a value of another type is coerced when that is lossless, else set aside.
CANONICAL_TYPES: dict[str, pa.DataType] = _canonical_types()

#: Pieces of a failed chunk with at most this many lines are read line by line.
_SLOW_LINES = 64

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_EXACT_INT = 2**53

_BOM = b"\xef\xbb\xbf"


# --------------------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class Aside:
    """One value that could not be stored in its column's type without loss.

    The row is kept; the column holds null there and the value is kept here (and in
    the run's ``_conflicts.jsonl``) exactly, as JSON text.

    Parameters
    ----------
    line
        1-based source line of the row.
    field
        The (dotted) column name.
    value
        The value as compact JSON text.
    type
        The column's storage type, as Arrow names it.
    """

    line: int
    field: str
    value: str
    type: str

    def to_dict(self) -> dict[str, Any]:
        """The set-aside value as a JSON-ready dict."""
        return {"line": self.line, "field": self.field, "value": self.value, "type": self.type}


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
    aside
        Values of the chunk's rows set aside (see :class:`Aside`).
    coerced
        ``{column: {source type: count}}`` of values stored in their column's type by a
        lossless coercion that changed their kind (``"1"`` stored as the integer 1).
    """

    table: pa.Table
    rejects: list[Reject]
    first_line: int
    n_lines: int
    bytes_done: int = 0
    aside: list[Aside] = field(default_factory=list)
    coerced: dict[str, dict[str, int]] = field(default_factory=dict)
    content_bytes: int = 0  # decompressed bytes of the chunk


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
        The first :data:`REPORT_KEEP` rejected lines as ``Reject`` (``raw`` dropped, to
        keep memory bounded when a file is mostly garbage; the store keeps every raw
        line on disk). ``rejected_count`` counts them all.
    rejected_count
        Rejected lines.
    aside
        The first :data:`REPORT_KEEP` values set aside (:class:`Aside`);
        ``aside_count`` counts them all.
    aside_count
        Values set aside.
    coerced
        ``{column: {source type: count}}``: values coerced losslessly to their column's
        type across a change of kind.
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
    rejected_count: int = 0
    aside: list[Aside] = field(default_factory=list)
    aside_count: int = 0
    coerced: dict[str, dict[str, int]] = field(default_factory=dict)
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
        room = REPORT_KEEP - len(self.rejected)
        if room > 0:
            self.rejected.extend(Reject(r.line, r.reason) for r in batch.rejects[:room])
        self.rejected_count += len(batch.rejects)
        self.note(batch.aside, batch.coerced)
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

    def note(self, aside: Sequence[Aside], coerced: dict[str, dict[str, int]]) -> None:
        """Count set-aside values and coercions (also those a store finds at commit)."""
        room = REPORT_KEEP - len(self.aside)
        if room > 0:
            self.aside.extend(aside[:room])
        self.aside_count += len(aside)
        _merge_counts(self.coerced, coerced)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (rejects as ``{line, reason}``)."""
        return {
            "path": self.path,
            "rows": self.rows,
            "lines": self.lines,
            "blank_lines": self.blank_lines,
            "rejected": [r.to_dict() for r in self.rejected],
            "rejected_count": self.rejected_count,
            "aside": [a.to_dict() for a in self.aside],
            "aside_count": self.aside_count,
            "coerced": {k: dict(v) for k, v in self.coerced.items()},
            "columns": dict(self.columns),
            "first_step": self.first_step,
            "last_step": self.last_step,
            "sha256": self.sha256,
            "content_bytes": self.content_bytes,
            "source_bytes": self.source_bytes,
            "gzip": self.gzip,
            "truncated_gzip": self.truncated_gzip,
        }


def _merge_counts(into: dict[str, dict[str, int]], more: dict[str, dict[str, int]]) -> None:
    for col, by in more.items():
        dst = into.setdefault(col, {})
        for kind, n in by.items():
            dst[kind] = dst.get(kind, 0) + n


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


# ----------------------------------------------------------- one type per column


def _type_kind(t: pa.DataType | None) -> str:
    """The kind of a type: a value may change type within a kind without a note."""
    if t is None:
        return "mixed"
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_boolean(t):
        return "bool"
    if _is_num(t):
        return "number"
    if pa.types.is_string(t):
        return "string"
    if pa.types.is_list(t):
        return "list"
    return "other"


def _first_type(seen: Sequence[tuple[pa.DataType | None, int]]) -> pa.DataType:
    """The type of a column new to the run: the kind of its first value, joined over
    the values of that kind (int64 then float64 -> float64; list items likewise).

    ``seen`` holds (type, non-null values) pairs in line order; a ``None`` type (a
    list mixing kinds) counts as ``string``, its JSON text. Deciding by the first value
    (not, say, the majority) keeps the result independent of where chunks end.
    """
    kind = next((_type_kind(t if t is not None else pa.string()) for t, n in seen
                 if n and _type_kind(t if t is not None else pa.string()) != "null"), None)
    if kind is None:
        return pa.null()
    out: pa.DataType | None = None
    for t, n in seen:
        t = t if t is not None else pa.string()
        if not n or _type_kind(t) != kind:
            continue
        j = t if out is None else _join(out, t)
        out = out if j is None else j
    return out if out is not None else pa.string()


def _coerce_py(v: Any, t: pa.DataType, fixed: bool = True) -> tuple[bool, Any]:
    """(fits, value as ``t`` holds it) for one parsed JSON value; lossless or not at all.

    ``"1"`` fits int64 as 1 (its text round-trips), ``"01"`` does not; 1.0 fits int64,
    1.5 does not; 0/1 and ``"true"``/``"false"`` fit bool; every value fits string as its
    JSON text. Integers go into float64 as Arrow's reader puts them (rounded beyond 2**53).
    In a column without a fixed type (``fixed=False``), whose int64 may still widen to
    float64 later in the file, a string fits a number column only as an integer's
    text, so the verdict does not depend on which of the two the column is yet.
    """
    if v is None:
        return True, None
    if pa.types.is_float64(t):
        if isinstance(v, (bool, int, float)):
            return True, float(v)
        if isinstance(v, str) and not fixed:
            if not _INT_TEXT.fullmatch(v):
                return False, None
            return True, float(int(v))
        if isinstance(v, str):
            try:
                x = float(v)
            except ValueError:
                return False, None
            return (_float_text(x) == v or repr(x) == v), x
        return False, None
    if pa.types.is_int64(t):
        if isinstance(v, bool) or (isinstance(v, int) and _INT64_MIN <= v <= _INT64_MAX):
            return True, int(v)
        if isinstance(v, float) and math.isfinite(v) and v.is_integer() and abs(v) < 2**63:
            return True, int(v)
        if isinstance(v, str) and _INT_TEXT.fullmatch(v):
            x = int(v)
            return _INT64_MIN <= x <= _INT64_MAX, x
        return False, None
    if pa.types.is_boolean(t):
        if isinstance(v, bool):
            return True, v
        if isinstance(v, (int, float)) and v in (0, 1):
            return True, bool(v)
        if v in ("true", "false"):
            return True, v == "true"
        return False, None
    if pa.types.is_string(t):
        return True, v if isinstance(v, str) else json_text(v)
    vt = _value_type(v)
    if vt is not None and _join(vt, t) == t:
        return True, _coerce(v, t)
    return False, None


_INT_TEXT = re.compile(r"-?(?:0|[1-9][0-9]{0,18})")
#: First characters of a JSON value as Python's json reads one (NaN and Infinity too).
_JSON_STARTS = frozenset('{["-0123456789tfnNI')


def _fits(v: Any, t: pa.DataType) -> bool:
    """Whether ``t`` holds ``v`` as it is (same kind, and its type joins into ``t``)."""
    vt = _value_type(v)
    return vt is not None and _type_kind(vt) == _type_kind(t) and _join(vt, t) == t


def _values_into(values: Sequence[Any], lines: Sequence[int], name: str, target: pa.DataType,
                 fixed: bool = True, pending: list | None = None,
                 ) -> tuple[pa.Array, list[Aside], dict[str, dict[str, int]]]:
    """Store Python values in ``target``: coerced where lossless, else set aside.

    With ``pending`` (a column whose run type is not settled yet), a value ``target``
    does not hold as it is goes there as ``(line, name, value)`` instead, for
    :class:`_Renumber` to settle in source order.
    """
    out: list[Any] = []
    aside: list[Aside] = []
    changed: dict[str, int] = {}
    tk = _type_kind(target)
    for v, line in zip(values, lines):
        if v is None:
            out.append(None)
            continue
        if pending is not None:
            if _fits(v, target):
                out.append(_coerce(v, target))
            else:
                out.append(None)
                pending.append((int(line), name, v))
            continue
        ok, x = _coerce_py(v, target, fixed)
        if ok:
            out.append(x)
            vt = _value_type(v)
            if _type_kind(vt) != tk:
                key = "mixed list" if vt is None else str(vt)
                changed[key] = changed.get(key, 0) + 1
        else:
            out.append(None)
            aside.append(Aside(int(line), name, json_text(v), str(target)))
    return pa.array(out, type=target), aside, ({name: changed} if changed else {})


def conform_column(arr: pa.Array | pa.ChunkedArray, target: pa.DataType, lines: Sequence[int],
                   name: str, fixed: bool = True,
                   ) -> tuple[pa.Array | pa.ChunkedArray, list[Aside], dict[str, dict[str, int]]]:
    """Store a column in ``target``: lossless coercions, the rest set aside.

    Parameters
    ----------
    arr
        The column as parsed.
    target
        Its storage type (canonical, the store's, or the run's).
    lines
        The source line of each row (for set-aside values).
    name
        The column name.
    fixed
        ``target`` is the column's final type (canonical or the store's), not a run
        type that may still widen (see :func:`_coerce_py`).

    Returns
    -------
    column, aside, coerced
        The column in ``target`` (null where a value was set aside), the set-aside
        values, and ``{name: {source type: count}}`` of coercions across kinds.
    """
    src = arr.type
    if src == target:
        return arr, [], {}
    n = len(arr)
    if pa.types.is_null(src):
        return pa.nulls(n, target), [], {}
    if pa.types.is_null(target):
        return arr, [], {}  # nothing typed yet
    nn = n - arr.null_count
    if pa.types.is_string(target) and not (pa.types.is_list(src) or pa.types.is_struct(src)):
        return _to_string_array(arr), [], ({name: {str(src): nn}} if nn else {})
    if pa.types.is_float64(target) and (pa.types.is_int64(src) or pa.types.is_boolean(src)):
        note = {name: {str(src): nn}} if nn and pa.types.is_boolean(src) else {}
        return arr.cast(target), [], note
    if pa.types.is_int64(target) and pa.types.is_boolean(src):
        return arr.cast(target), [], ({name: {str(src): nn}} if nn else {})
    if pa.types.is_int64(target) and pa.types.is_float64(src):
        vals = arr.to_numpy(zero_copy_only=False) if arr.null_count == 0 else None
        if vals is not None and np.isfinite(vals).all() and (vals == np.trunc(vals)).all() \
                and (np.abs(vals) < 2**63).all():
            return arr.cast(target), [], {}
    if pa.types.is_list(target) and pa.types.is_list(src) and _join(src, target) == target:
        return _cast_to(arr, target), [], {}
    return _values_into(arr.to_pylist(), lines, name, target, fixed)


def _assemble(pieces: list[pa.Table], fixed: Mapping[str, pa.DataType], pending: list,
              ) -> tuple[pa.Table, list[Aside], dict[str, dict[str, int]]]:
    """One table from a chunk's pieces, in line order, each column in one type.

    A column with a fixed type (canonical or the store's) is conformed to it here
    (:func:`conform_column`). Another takes the kind of its first value in the chunk;
    values of other kinds go to ``pending`` for :class:`_Renumber`, which knows the
    run's type.
    """
    pieces = [t for t in pieces if t.num_rows]
    if not pieces:
        return pa.table({LINE_COLUMN: pa.array([], pa.int64())}), [], {}
    pieces.sort(key=lambda t: t.column(LINE_COLUMN)[0].as_py())
    seen: dict[str, set] = {}
    for t in pieces:
        for f in t.schema:
            if f.name != LINE_COLUMN:
                seen.setdefault(f.name, set()).add(f.type)
    targets: dict[str, pa.DataType] = {}
    for k, types in seen.items():
        if k in fixed:
            targets[k] = fixed[k]
        elif len(types) == 1:
            targets[k] = next(iter(types))
        else:  # in line order of each piece's first value
            order = []
            for t in pieces:
                if k in t.column_names:
                    c = t.column(k)
                    if len(c) > c.null_count:
                        row = pc.index(c.is_valid(), True).as_py()
                        order.append((t.column(LINE_COLUMN)[row].as_py(), c.type, len(c) - c.null_count))
            order.sort(key=lambda x: x[0])
            targets[k] = _first_type([(t, n) for _l, t, n in order])
    aside: list[Aside] = []
    coerced: dict[str, dict[str, int]] = {}
    out = []
    for t in pieces:
        lines = None
        for i, f in enumerate(t.schema):
            target = targets.get(f.name)
            if target is None or f.type == target:
                continue
            if lines is None:
                lines = t.column(LINE_COLUMN).to_numpy()
            if f.name in fixed:
                col, a, c = conform_column(t.column(i), target, lines, f.name)
                aside.extend(a)
                _merge_counts(coerced, c)
            elif pa.types.is_null(f.type) or (_type_kind(f.type) == _type_kind(target)
                                               and _join(f.type, target) == target):
                col = _cast_to(t.column(i), target)
            else:
                col, _a, _c = _values_into(t.column(i).to_pylist(), lines, f.name, target,
                                           False, pending)
            t = t.set_column(i, f.name, col)
        out.append(t)
    table = out[0] if len(out) == 1 else unify_tables(out)
    if len(out) > 1:
        bounds = [(t.column(LINE_COLUMN)[0].as_py(), t.column(LINE_COLUMN)[-1].as_py()) for t in out]
        if any(b[1] > c[0] for b, c in zip(bounds, bounds[1:])):
            table = table.sort_by(LINE_COLUMN)  # the reference read lines from all over
    aside.sort(key=lambda a: a.line)
    return table, aside, coerced


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


def _column_from_values(values: list, lines: Sequence[int], name: str,
                        target: pa.DataType | None = None, pending: list | None = None,
                        ) -> tuple[pa.Array, list[Aside], dict[str, dict[str, int]]]:
    """Build one column from Python values: its fixed type, else the kind of its first
    value (values of other kinds go to ``pending``)."""
    seen: dict[Any, list] = {}
    for v in values:
        if v is None:
            continue
        t = _value_type(v)
        key = t if t is not None else "mixed"
        if key in seen:
            seen[key][1] += 1
        else:
            seen[key] = [t, 1]
    if not seen:
        return pa.nulls(len(values), target or pa.null()), [], {}
    fixed = target is not None
    if target is None:
        target = _first_type([(t, k) for t, k in seen.values()])
    if len(seen) == 1:
        only = next(iter(seen.values()))[0]
        if only is not None and (only == target or _join(only, target) == target) \
                and _type_kind(only) == _type_kind(target):
            try:
                return pa.array([_coerce(v, target) for v in values], type=target), [], {}
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                pass
    return _values_into(values, lines, name, target, fixed, None if fixed else pending)


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


class _OutOfRange(ValueError):
    """A number literal outside float64 (raised by the json number hooks)."""

    def __init__(self, token: str):
        super().__init__(token)
        self.token = token


def _checked_float(s: str) -> float:
    x = float(s)
    if math.isinf(x):
        raise _OutOfRange(s)
    return x


def _checked_int(s: str) -> int:
    digits = len(s.lstrip("-"))
    if digits > 308 and (digits > 309 or abs(int(s)) > _FLOAT_MAX):
        raise _OutOfRange(s)
    return int(s)


def _out_of_range_reason(token: str) -> str:
    shown = token if len(token) <= 24 else f"{token[:12]}…{token[-6:]} ({len(token)} characters)"
    return f"number out of float64 range: {shown} (it would be stored as infinity)"


def too_long_reason(size: int, limit: int) -> str:
    """The reject reason of a line over the length limit."""
    return f"line too long: {size:,} bytes, over the {limit:,}-byte limit (not read)"


def _parse_one(raw: bytes, line: int, truncated_candidate: bool) -> tuple[dict | None, Reject | None]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        reason = f"invalid UTF-8: byte 0x{raw[e.start]:02x} at offset {e.start}"
        if truncated_candidate:
            reason = f"truncated last line (no newline at end of file): {reason}"
        return None, Reject(line, reason, raw)
    body = text.lstrip(" \t\n\r")
    first = body[:1]
    if first and first < "\x80" and first not in _JSON_STARTS and not truncated_candidate:
        # what json.loads says, without raising (a flood of junk lines costs less)
        return None, Reject(line, f"not JSON: Expecting value at column {len(text) - len(body) + 1}", raw)
    try:
        if _OVERFLOW_TEXT_RE.search(text):
            obj = json.loads(text, parse_float=_checked_float, parse_int=_checked_int)
        else:
            obj = json.loads(text)
    except json.JSONDecodeError as e:
        return None, Reject(line, _reject_reason_json(e, truncated_candidate), raw)
    except _OutOfRange as e:
        return None, Reject(line, _out_of_range_reason(e.token), raw)
    except RecursionError:
        return None, Reject(line, "not JSON: nested too deeply", raw)
    except ValueError as e:  # e.g. an integer literal past Python's digit limit
        return None, Reject(line, f"not JSON: {e}", raw)
    if not isinstance(obj, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null",
                int: "a number", float: "a number"}.get(type(obj), type(obj).__name__)
        return None, Reject(line, f"JSON value is {kind}, not an object", raw)
    flat: dict[str, Any] = {}
    try:
        _flatten_into("", obj, flat)
    except RecursionError:
        return None, Reject(line, "not JSON: nested too deeply", raw)
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
                          final_unterminated: bool = False,
                          types: Mapping[str, pa.DataType] | None = None,
                          ) -> tuple[pa.Table, list[Reject], int]:
    """Parse complete lines one by one with :func:`json.loads` (the reference reading).

    Parameters
    ----------
    data
        Whole lines; every line ends with ``\\n`` (or a lone ``\\r``) except possibly
        the last.
    first_line
        Line number of the first line.
    final_unterminated
        The last line of ``data`` is the file's last line and has no newline, so a
        parse failure there is reported as a truncated last line.
    types
        Fixed column types (default: :data:`CANONICAL_TYPES`).

    Returns
    -------
    table, rejects, blank_lines
        The good rows (flattened, with ``_line``), the rejected lines, the count of
        blank lines.
    """
    data = _lf(data)
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines.pop()
    blanks = sum(1 for raw in lines if _is_blank(raw))
    last = first_line + len(lines) - 1 if final_unterminated else -1
    keep = [(first_line + i, raw) for i, raw in enumerate(lines) if not _is_blank(raw)]
    fixed = CANONICAL_TYPES if types is None else types
    pending: list = []
    table, rejects, _aside, _coerced = _reference(keep, last, fixed, pending)
    if pending:  # settle the values of other kinds as a one-chunk run would
        table, _a, _c = _settle_pending(table, pending, {})
    return table, rejects, blanks


def _reference(lines: Sequence[tuple[int, bytes]], truncated_line: int,
               fixed: Mapping[str, pa.DataType], pending: list):
    """Read (line number, bytes) pairs with the reference; returns the good rows as a
    table, the rejects, and the set-aside values and coercions of its columns."""
    rows: list[dict] = []
    line_nos: list[int] = []
    rejects: list[Reject] = []
    for n, raw in lines:
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        row, rej = _parse_one(raw, n, n == truncated_line)
        if rej is not None:
            rejects.append(rej)
        else:
            rows.append(row)
            line_nos.append(n)
    try:
        mark = len(pending)
        table, aside, coerced = _rows_to_table(rows, line_nos, fixed, pending)
    except Exception:  # noqa: BLE001 - find the rows that cannot be stored, keep the rest
        del pending[mark:]
        table, aside, coerced, more = _rows_one_by_one(rows, line_nos, fixed, pending)
        rejects = sorted(rejects + more, key=lambda r: r.line)
    return table, rejects, aside, coerced


def _rows_one_by_one(rows: list[dict], line_nos: list[int], fixed: Mapping[str, pa.DataType],
                     pending: list):
    good, nos, bad = [], [], []
    for row, n in zip(rows, line_nos):
        try:
            _rows_to_table([row], [n], fixed, [])
        except Exception as e:  # noqa: BLE001 - a value Arrow cannot hold: reject the line
            bad.append(Reject(n, f"cannot be stored: {type(e).__name__}: {str(e)[:200]}",
                              json.dumps(row, default=str).encode()))
            continue
        good.append(row)
        nos.append(n)
    table, aside, coerced = _rows_to_table(good, nos, fixed, pending)
    return table, aside, coerced, bad


def _rows_to_table(rows: list[dict], line_nos: list[int], fixed: Mapping[str, pa.DataType],
                   pending: list):
    names: dict[str, None] = {}
    for r in rows:
        for k in r:
            names.setdefault(k, None)
    cols = {LINE_COLUMN: pa.array(line_nos, type=pa.int64())}
    aside: list[Aside] = []
    coerced: dict[str, dict[str, int]] = {}
    for n in names:
        col, a, c = _column_from_values([r.get(n) for r in rows], line_nos, n, fixed.get(n), pending)
        cols[n] = col
        aside.extend(a)
        _merge_counts(coerced, c)
    return _finish(pa.table(cols)), aside, coerced


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


def _lines_of(data: bytes, nl: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The bytes as uint8, and the start and end (exclusive, before ``\\n``) of each line
    (``nl``: the offsets of the line breaks, when known)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    if nl is None:
        nl = np.flatnonzero(buf == 10)
    n_lines = len(nl) + (0 if data.endswith(b"\n") or not data else 1)
    starts = np.empty(n_lines, dtype=np.int64)
    ends = np.empty(n_lines, dtype=np.int64)
    if n_lines:
        starts[0] = 0
        starts[1:] = nl[: n_lines - 1] + 1
        ends[: len(nl)] = nl
        if n_lines > len(nl):
            ends[-1] = len(data)
    return buf, starts, ends


def _solid_lines(data: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """(bytes, starts, ends, 1-based numbers) of the lines worth a look, and the line count.

    Where lines are long (real data), that is every line. Where they are short on
    average (a flood of blank lines), only the lines holding a byte other than a blank
    or a line break are listed, found from those bytes: a flood of blank lines then
    costs a few NumPy passes over its bytes, and no per-line arrays.
    """
    buf = np.frombuffer(data, dtype=np.uint8)
    nl = np.flatnonzero(buf == 10)
    n_lines = len(nl) + (0 if data.endswith(b"\n") or not data else 1)
    if n_lines <= len(data) // 32 or not len(nl):
        buf, starts, ends = _lines_of(data, nl)
        return buf, starts, ends, np.arange(1, n_lines + 1, dtype=np.int64), n_lines
    solid = np.flatnonzero((buf != 10) & (buf != 32) & (buf != 9) & (buf != 13))
    idx = np.unique(np.searchsorted(nl, solid))  # the line holding each such byte
    starts = np.where(idx > 0, nl[np.maximum(idx - 1, 0)] + 1, 0)
    ends = np.where(idx < len(nl), nl[np.minimum(idx, len(nl) - 1)], len(data))
    return buf, starts, ends, idx + 1, n_lines


@dataclass
class _Plan:
    """Which lines of a chunk go where (0-based line indices within the chunk)."""

    cand: np.ndarray  # lines that open an object: the fast path, the reference where it fails
    odd: np.ndarray   # other non-blank lines: the reference (which rejects them)
    long: np.ndarray  # lines over the length limit: rejected unread
    blanks: int


def _plan(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, max_line: int) -> _Plan:
    """Classify every line by its first non-blank byte, vectorized (a flood of blank or
    padded lines costs NumPy passes, not a Python loop per line)."""
    n = len(starts)
    if not n:
        e = np.empty(0, dtype=np.int64)
        return _Plan(e, e, e, 0)
    first = buf[np.minimum(starts, len(buf) - 1)]
    first = np.where(starts < ends, first, 10)  # an empty line
    lead = first.copy()
    ws = np.flatnonzero((first == 32) | (first == 9) | (first == 13) | (first == 10))
    blank = np.zeros(n, dtype=bool)
    if len(ws):
        # the first byte of each such line that is not a space, tab or CR (a "\n" there
        # means the line is blank)
        s, e = starts[ws], ends[ws]
        if len(ws) <= 64:
            pos = np.array([s[k] + (e[k] - s[k]) - len(buf[s[k]:e[k]].tobytes().lstrip(b" \t\r"))
                            for k in range(len(ws))], dtype=np.int64)
        else:
            solid = np.flatnonzero((buf != 32) & (buf != 9) & (buf != 13))  # "\n" included
            j = np.searchsorted(solid, s)
            pos = e.copy()
            ok = j < len(solid)
            pos[ok] = np.minimum(solid[j[ok]], e[ok])
        is_blank = pos >= e
        blank[ws] = is_blank
        lead[ws] = np.where(is_blank, 0, buf[np.minimum(pos, len(buf) - 1)])
    length = ends - starts
    long = ~blank & (length > max_line)
    # a line that does not end in "}" (a CRLF's CR aside) is cut short or broken over
    # lines: the reference reads it, so Arrow is not sent a block it will fail on (each
    # such failure costs a re-parse of the block); trailing blanks leave it to Arrow
    last = np.maximum(ends - 1, starts)
    last = np.where((buf[np.minimum(last, len(buf) - 1)] == 13) & (last > starts), last - 1, last)
    tail = buf[np.minimum(last, len(buf) - 1)]
    closed = (tail == 125) | (tail == 32) | (tail == 9) | (tail == 13)
    cand = ~blank & ~long & (lead == 123) & closed  # "{" ... "}"
    odd = ~blank & ~long & ~cand
    return _Plan(np.flatnonzero(cand), np.flatnonzero(odd), np.flatnonzero(long), int(blank.sum()))


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


def _fast(data: bytes, n_rows: int, rel_starts: np.ndarray, hints: _Hints) -> pa.Table:
    """Parse ``data`` (``n_rows`` lines, each opening an object) with Arrow, or raise
    :class:`_Slow`. ``rel_starts`` are the byte offsets of the lines in ``data``."""
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
    if table.num_rows != n_rows:
        # "{..} {..}" on one line: find such a line, so only it goes to the reference
        m = _TWO_OBJECTS.search(data)
        raise _Slow(None if m is None else int(np.searchsorted(rel_starts, m.start(), side="right")) - 1)
    nan = inf = False
    for c in table.columns:
        a, b = _special_floats(c)
        nan, inf = nan or a, inf or b
    if inf:
        # Arrow reads 1e400 (or a 400-digit integer) as infinity: such a line is the
        # reference's to reject
        m = _OVERFLOW_RE.search(data)
        if m is not None:
            raise _Slow(int(np.searchsorted(rel_starts, m.start(), side="right")) - 1)
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
    return table


def _finish(table: pa.Table) -> pa.Table:
    """Drop ``struct<>`` columns (an empty object contributes no column)."""
    keep = [i for i, f in enumerate(table.schema)
            if not (pa.types.is_struct(f.type) and f.type.num_fields == 0)]
    if len(keep) != table.num_columns:
        table = table.select(keep)
    return table


#: After this many fast-path failures in one chunk, the rest is tried in blocks of
#: ``_BLOCK_LINES`` (each block: one Arrow try, else the reference), so a chunk of many
#: bad lines costs linear time rather than one re-parse per bad line.
_MAX_FAILS = 8
_BLOCK_LINES = 256
#: Up to this many lines the fast path must skip, it reads the stretches between them
#: in place; beyond, it reads one compacted copy of the other lines.
_MAX_SEGMENTS = 32


@dataclass
class _TooLong:
    """A line the reader skipped because it is longer than the limit."""

    size: int


@dataclass
class _Chunk:
    table: pa.Table
    rejects: list[Reject]
    blanks: int
    n_lines: int
    aside: list[Aside] = field(default_factory=list)
    coerced: dict[str, dict[str, int]] = field(default_factory=dict)
    pending: list = field(default_factory=list)  # (line, column, value) for _Renumber


def _parse_chunk(data: bytes | _TooLong, final_unterminated: bool, hints: _Hints,
                 fixed: Mapping[str, pa.DataType] = CANONICAL_TYPES,
                 max_line: int = DEFAULT_MAX_LINE_BYTES) -> _Chunk:
    """Parse one chunk with line numbers relative to the chunk (first line = 1).

    Never raises for its content: a failure this module did not foresee sends the
    chunk to the reference, and a line even that cannot read is rejected with the error.
    """
    if isinstance(data, _TooLong):
        return _Chunk(pa.table({LINE_COLUMN: pa.array([], pa.int64())}),
                      [Reject(1, too_long_reason(data.size, max_line))], 0, 1)
    # CR and CRLF arrive as LF: _read_chunks turned them into it
    try:
        return _parse_lines(data, final_unterminated, hints, fixed, max_line)
    except Exception as e:  # noqa: BLE001 - the last line of defence: nothing escapes ingest
        return _parse_chunk_reference(data, final_unterminated, fixed, max_line, e)


def _parse_chunk_reference(data: bytes, final_unterminated: bool, fixed, max_line: int,
                           cause: Exception) -> _Chunk:
    buf, starts, ends = _lines_of(data)
    n = len(starts)
    last = n if final_unterminated and not data.endswith(b"\n") else -1
    lines, rejects, blanks = [], [], 0
    for i in range(n):
        raw = data[starts[i]:ends[i]]
        if _is_blank(raw):
            blanks += 1
        elif len(raw) > max_line:
            rejects.append(Reject(i + 1, too_long_reason(len(raw), max_line), raw[:256]))
        else:
            lines.append((i + 1, raw))
    pending: list = []
    try:
        table, more, aside, coerced = _reference(lines, last, fixed, pending)
    except Exception as e:  # noqa: BLE001
        reason = f"could not be read: {type(e).__name__}: {str(e)[:200]} (after {type(cause).__name__})"
        return _Chunk(pa.table({LINE_COLUMN: pa.array([], pa.int64())}),
                      sorted(rejects + [Reject(k, reason, raw) for k, raw in lines], key=lambda r: r.line),
                      blanks, n)
    table, a2, c2 = _assemble([table], fixed, pending)
    _merge_counts(coerced, c2)
    return _Chunk(table, sorted(rejects + more, key=lambda r: r.line), blanks, n, aside + a2, coerced,
                  pending)


def _parse_lines(data: bytes, final_unterminated: bool, hints: _Hints,
                 fixed: Mapping[str, pa.DataType], max_line: int) -> _Chunk:
    buf, starts, ends, numbers, n_lines = _solid_lines(data)
    plan = _plan(buf, starts, ends, max_line)
    last = n_lines if final_unterminated and not data.endswith(b"\n") else -1
    pieces: list[pa.Table] = []
    rejects: list[Reject] = []
    aside: list[Aside] = []
    coerced: dict[str, dict[str, int]] = {}
    pending: list = []

    def reference(idx) -> None:
        t, r, a, c = _reference([(int(numbers[i]), data[starts[i]:ends[i]]) for i in idx], last, fixed,
                                pending)
        pieces.append(t)
        rejects.extend(r)
        aside.extend(a)
        _merge_counts(coerced, c)

    for i in plan.long:
        rejects.append(Reject(int(numbers[i]), too_long_reason(int(ends[i] - starts[i]), max_line),
                              data[starts[i]:starts[i] + 256]))
    if len(plan.odd):
        reference(plan.odd)
    cand = plan.cand
    m = len(cand)
    if m:
        other = np.union1d(plan.odd, plan.long)  # non-blank lines the fast path must not see
        if len(other) <= _MAX_SEGMENTS:
            # the candidates between two such lines are one stretch of the chunk (blank
            # lines included: Arrow skips them): no copy
            src = data
            src_starts = starts[cand]
            src_ends = np.minimum(ends[cand] + 1, len(data))
            cuts = np.searchsorted(cand, other)
            bounds = np.unique(np.concatenate(([0], cuts, [m])))
            stack = [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a][::-1]
        else:  # many: only the candidate lines, each with its line break, in one buffer
            delta = np.zeros(len(buf) + 2, dtype=np.int32)
            delta[starts[cand]] = 1
            delta[ends[cand] + 1] -= 1
            src = buf[np.cumsum(delta[: len(buf)]) > 0].tobytes()
            lens = np.minimum(ends[cand] + 1, len(buf)) - starts[cand]
            src_ends = np.cumsum(lens)
            src_starts = src_ends - lens
            stack = [(0, m)]
        fails = 0
        while stack:
            lo, hi = stack.pop()
            if lo >= hi:
                continue
            if hi - lo <= _SLOW_LINES or (fails >= _MAX_FAILS and hi - lo <= _BLOCK_LINES):
                reference(cand[lo:hi])
                continue
            if fails >= _MAX_FAILS:
                stack.extend((a, min(a + _BLOCK_LINES, hi)) for a in range(lo, hi, _BLOCK_LINES))
                continue
            first = int(src_starts[lo])
            try:
                t = _fast(src[first:int(src_ends[hi - 1])], hi - lo, src_starts[lo:hi] - first, hints)
            except _Slow as e:
                fails += 1
                r = e.row
                if r is not None and 0 <= r < hi - lo:
                    reference(cand[lo + r:lo + r + 1])
                    stack.append((lo + r + 1, hi))
                    stack.append((lo, lo + r))
                else:
                    mid = (lo + hi) // 2
                    stack.append((mid, hi))
                    stack.append((lo, mid))
                continue
            pieces.append(t.add_column(0, LINE_COLUMN, pa.array(numbers[cand[lo:hi]], type=pa.int64())))
    table, a2, c2 = _assemble([_finish(t) for t in pieces], fixed, pending)
    aside.extend(a2)
    _merge_counts(coerced, c2)
    rejects.sort(key=lambda r: r.line)
    aside.sort(key=lambda a: a.line)
    blanks = plan.blanks + n_lines - len(numbers)  # lines _solid_lines left out are blank
    return _Chunk(table, rejects, blanks, n_lines, aside, coerced, pending)


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


#: Most lines in one chunk: a chunk of one-byte junk lines holds millions, and the
#: per-line objects of their rejects would otherwise cost hundreds of MB per chunk.
_MAX_CHUNK_LINES = 1 << 16


def _capped(piece: bytes) -> Iterator[tuple[bytes, bool]]:
    """``piece`` (whole lines) as chunks of at most ``_MAX_CHUNK_LINES`` lines."""
    if len(piece) <= _MAX_CHUNK_LINES:
        yield piece, False  # too short to hold that many lines
        return
    buf = np.frombuffer(piece, dtype=np.uint8)
    nl = buf == 10
    if int(np.count_nonzero(nl)) <= _MAX_CHUNK_LINES:  # real data: one NumPy pass
        yield piece, False
        return
    cuts = np.flatnonzero(nl)[_MAX_CHUNK_LINES - 1::_MAX_CHUNK_LINES] + 1
    start = 0
    for cut in cuts.tolist():
        yield piece[start:cut], False
        start = cut
    if start < len(piece):
        yield piece[start:], False


def _hashed(blocks: Iterable[bytes], h, report: IngestReport) -> Iterator[bytes]:
    for block in blocks:
        h.update(block)  # releases the GIL for large buffers
        report.content_bytes += len(block)
        yield block


def _without_bom(blocks: Iterable[bytes]) -> Iterator[bytes]:
    """The blocks without a UTF-8 byte order mark at the very start (which may arrive
    split over blocks: gzip hands out what it has inflated)."""
    head = b""
    it = iter(blocks)
    for block in it:
        head += block
        if len(head) >= len(_BOM):
            break
    else:
        if head and head != _BOM:
            yield head
        return
    yield head[len(_BOM):] if head.startswith(_BOM) else head
    yield from it


def _read_chunks(blocks: Iterator[bytes], report: IngestReport,
                 max_line: int = DEFAULT_MAX_LINE_BYTES) -> Iterator[tuple[bytes | _TooLong, bool]]:
    """Yield (whole lines, final_unterminated); hash as we go.

    A line is never held whole beyond ``max_line`` bytes: once the bytes of a line
    without a break pass the limit, they are dropped as they arrive (hashed and
    counted, not kept) and a :class:`_TooLong` marker stands for the line. Memory thus
    stays at a few chunks plus one line of at most ``max_line`` bytes, for any input,
    decompressed gzip bombs included.

    Line numbers are not counted here (a GIL-holding scan on the one reading thread);
    workers number lines within their chunk and :class:`_Renumber` shifts them.
    """
    h = hashlib.sha256()
    carry: list[bytes] = []
    carry_len = 0
    skipped = 0  # bytes of an over-long line dropped so far
    cr = b""  # a CR that ended the previous block: a line break unless LF follows
    for block in _without_bom(_hashed(blocks, h, report)):
        if cr or b"\r" in block:
            # CR, LF and CRLF all end a line: a lone CR becomes LF here, so line lengths
            # (and the long-line limit) count the same whatever the line breaks
            block = cr + block
            cr = b"\r" if block.endswith(b"\r") else b""
            if cr:
                block = block[:-1]
            block = _lf(block)
        if skipped:
            nl = block.find(b"\n")
            if nl < 0:
                skipped += len(block)
                continue
            yield _TooLong(skipped + nl), False
            skipped = 0
            block = block[nl + 1:]
            if not block:
                continue
        cut = block.rfind(b"\n") + 1
        if cut == 0:
            if carry_len + len(block) > max_line:
                skipped = carry_len + len(block)  # too long: stop holding it
                carry, carry_len = [], 0
            else:
                carry.append(block)  # a line longer than a chunk: keep reading
                carry_len += len(block)
            continue
        if carry:
            nl = block.find(b"\n")
            if carry_len + nl > max_line:
                yield _TooLong(carry_len + nl), False
                carry, carry_len = [], 0
                block = block[nl + 1:]
                cut -= nl + 1
        if not carry and cut == len(block):
            piece = block
        else:  # one copy: the carried partial line + the whole lines of this block
            piece = b"".join((*carry, memoryview(block)[:cut]))
        carry = [block[cut:]] if cut < len(block) else []
        carry_len = len(block) - cut
        if piece:
            yield from _capped(piece)
    if cr:  # the file ended with a lone CR: it ended the last line
        if skipped:
            yield _TooLong(skipped), False
            skipped = 0
        else:
            yield b"".join(carry) + b"\n", False
            carry, carry_len = [], 0
    if skipped:
        yield _TooLong(skipped), True
    elif carry:
        yield b"".join(carry), True
    report.sha256 = h.hexdigest()


def _default_workers() -> int:
    try:
        n = len(os.sched_getaffinity(0))  # the CPUs this process may use, not the host's
    except AttributeError:
        n = os.cpu_count() or 1
    # beyond ~8 the one reading/writing thread is the bottleneck and memory still grows
    return max(1, min(8, n))


class _Renumber:
    """Turns chunk-relative line numbers into file line numbers, in source order, and
    settles the run's type of every column without a fixed type: the first type seen,
    widened only along the lattice (int64 -> float64, null -> anything, list items);
    a value of another kind is coerced or set aside (:func:`conform_column`)."""

    def __init__(self, report: IngestReport, fixed: Mapping[str, pa.DataType]):
        self.report = report
        self.fixed = fixed
        self.types: dict[str, pa.DataType] = {}
        self.offset = 0  # lines before the current chunk

    def __call__(self, result: _Chunk, pos: int, size: int = 0) -> Batch:
        table, rejects, aside, coerced = result.table, result.rejects, result.aside, result.coerced
        pending = result.pending
        off = self.offset
        if off:
            i = table.column_names.index(LINE_COLUMN)
            table = table.set_column(i, LINE_COLUMN, pc.add(table.column(i), off))
            rejects = [Reject(r.line + off, r.reason, r.raw) for r in rejects]
            aside = [Aside(a.line + off, a.field, a.value, a.type) for a in aside]
            pending = [(line + off, k, v) for line, k, v in pending]
        table, more, c = _settle_pending(table, pending, self.types, self.fixed)
        if more or c:
            aside = sorted(list(aside) + more, key=lambda a: a.line)
            coerced = {k: dict(v) for k, v in coerced.items()}
            _merge_counts(coerced, c)
        self.offset += result.n_lines
        self.report.blank_lines += result.blanks
        batch = Batch(table, rejects, off + 1, result.n_lines, pos, aside, coerced, size)
        self.report.add(batch)
        return batch


def _settle_pending(table: pa.Table, pending: list, types: dict[str, pa.DataType],
                    fixed: Mapping[str, pa.DataType] = CANONICAL_TYPES):
    """Settle the run type of each column without a fixed type, in source order, and
    store the chunk's values of other kinds in it (coerced, or set aside).

    ``types`` (the run's types so far) is updated in place: a column takes the type of
    its first value, widened only within that kind (int64 -> float64, list items).
    """
    aside: list[Aside] = []
    coerced: dict[str, dict[str, int]] = {}
    by_col: dict[str, list] = {}
    for line, k, v in pending:
        by_col.setdefault(k, []).append((line, v))
    for i, f in enumerate(table.schema):
        if f.name == LINE_COLUMN or f.name in fixed:
            continue
        extra = by_col.get(f.name, ())
        run = types.get(f.name)
        col = table.column(i)
        firsts = [(line, _value_type(v)) for line, v in extra]
        if len(col) > col.null_count:
            row = pc.index(col.is_valid(), True).as_py()
            firsts.append((table.column(LINE_COLUMN)[row].as_py(), f.type))
        firsts.sort(key=lambda x: x[0])
        seen = [(t, 1) for _l, t in firsts]
        if run is None or pa.types.is_null(run):
            target = _first_type(seen)  # the kind of the column's first value in the file
        else:
            target = run
            for t, _n in seen:  # widened within its kind only
                if t is not None and _type_kind(t) == _type_kind(target):
                    target = _join(target, t) or target
        if not pa.types.is_null(target):
            types[f.name] = target
        if f.type != target and not pa.types.is_null(target):
            col, a, c = conform_column(col, target, table.column(LINE_COLUMN).to_numpy(), f.name, False)
            aside.extend(a)
            _merge_counts(coerced, c)
        if extra:
            vals = col.to_pylist()
            where = table.column(LINE_COLUMN).to_numpy()
            for line, v in extra:
                row = int(np.searchsorted(where, line))
                ok, x = _coerce_py(v, target, False)
                if ok:
                    vals[row] = x
                    vt = _value_type(v)
                    if _type_kind(vt) != _type_kind(target):
                        key = "mixed list" if vt is None else str(vt)
                        coerced.setdefault(f.name, {})[key] = coerced.get(f.name, {}).get(key, 0) + 1
                else:
                    aside.append(Aside(line, f.name, json_text(v), str(target)))
            col = pa.array(vals, type=target)
        if col is not table.column(i):
            table = table.set_column(i, f.name, col)
    return table, aside, coerced


def iter_batches(source: Any, *, chunk_bytes: int = DEFAULT_CHUNK_BYTES, path: str | None = None,
                 report: IngestReport | None = None, workers: int | None = None,
                 types: Mapping[str, pa.DataType] | None = None,
                 max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> Iterator[Batch]:
    """Stream a diag.jsonl source as batches of flattened good rows plus rejects.

    Memory is bounded by the chunks in flight (at most ``workers + 2``, and at most
    256 MB of them when long lines make chunks big), each a few times its size while
    Arrow parses it, plus one line of at most ``max_line_bytes``, whatever the source.

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
    types
        Fixed storage types by column (the store's); :data:`CANONICAL_TYPES` always
        apply on top. Other columns take the first type the source gives them.
    max_line_bytes
        Longest line read; a longer one is rejected with its size, unread.

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
    if not isinstance(max_line_bytes, int) or max_line_bytes < 1:
        raise IngestError(f"max_line_bytes must be a positive int, got {max_line_bytes!r}", path=path)
    if path is None and isinstance(source, (str, os.PathLike)):
        path = str(source)
    if report is None:
        report = IngestReport()
    report.path = path
    fixed = {**(types or {}), **CANONICAL_TYPES}
    raw, total, to_close = _open(source, path)
    report.source_bytes = total
    hints = _Hints()
    workers = workers or _default_workers()
    renumber = _Renumber(report, fixed)
    blocks = _Blocks(raw, path)
    position = lambda: blocks.done  # noqa: E731

    def work(data, final):
        return _parse_chunk(data, final, hints, fixed, max_line_bytes)

    try:
        chunks = _read_chunks(blocks(chunk_bytes), report, max_line_bytes)
        if workers == 1:
            for data, final in chunks:
                size = len(data) if isinstance(data, bytes) else data.size
                yield renumber(work(data, final), position(), size)
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ingest") as pool:
                pending: deque = deque()
                queued = 0
                try:
                    for data, final in chunks:
                        size = len(data) if isinstance(data, bytes) else data.size
                        pending.append((pool.submit(work, data, final), position(), size))
                        queued += size if isinstance(data, bytes) else 0
                        del data
                        # bounded read-ahead: one chunk queued beyond the busy workers, and
                        # no more bytes than the in-flight budget
                        while len(pending) > workers + 1 or (len(pending) > 1 and queued > _INFLIGHT_BYTES):
                            fut, pos, size = pending.popleft()
                            queued = max(0, queued - size)
                            yield renumber(fut.result(), pos, size)
                    while pending:
                        fut, pos, size = pending.popleft()
                        yield renumber(fut.result(), pos, size)
                finally:
                    for fut, _p, _s in pending:
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
          workers: int | None = None, types: Mapping[str, pa.DataType] | None = None,
          max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> tuple[pa.Table, IngestReport]:
    """Parse a whole (small) source into one table. Convenience for tests and the UI.

    Parameters
    ----------
    source, chunk_bytes, path, workers, types, max_line_bytes
        As for :func:`iter_batches`.

    Returns
    -------
    table, report
        All good rows unified into one table (see :func:`unify_tables`), and the report.
    """
    report = IngestReport()
    tables = [b.table for b in iter_batches(source, chunk_bytes=chunk_bytes, path=path,
                                            report=report, workers=workers, types=types,
                                            max_line_bytes=max_line_bytes)]
    if not tables:
        return pa.table({LINE_COLUMN: pa.array([], pa.int64())}), report
    return unify_tables(tables), report
