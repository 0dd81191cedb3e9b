"""The fast path: a chunk's lines classified by vectorized scans, stretches of candidate
lines read by Arrow's C++ JSON reader, and its result checked against the reference's
rules; whatever it cannot vouch for goes to :mod:`regime_dash.ingest.reference`.
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.json as pj

from regime_dash.ingest.arrays import from_numpy, to_numpy
from regime_dash.ingest.types import CANONICAL_TYPES
from regime_dash.ingest.report import Aside, LINE_COLUMN, Reject, merge_counts
from regime_dash.ingest.columns import assemble_pieces, drop_empty_structs
from regime_dash.ingest.sources import DEFAULT_MAX_LINE_BYTES, EXCERPT_BYTES, TooLong
from regime_dash.ingest import shapes
from regime_dash.ingest.reference import (
    OVERFLOW_RE,
    free_name,
    blank_line,
    read_reference,
    too_long_reason,
)


_TWO_OBJECTS = re.compile(rb"\}[ \t]*\{")


#: Pieces of a failed chunk with at most this many lines are read line by line.
_SLOW_LINES = 64


class Hints:
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


def lines_of(data: bytes, nl: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def _union(*parts) -> np.ndarray:
    """The sorted distinct values of ``parts`` (``np.unique``'s, without the import of
    ``numpy.ma`` its first call makes: some 12 ms of a fresh ``ingest``)."""
    a = np.sort(np.concatenate(parts))
    return a[np.concatenate(([True], a[1:] != a[:-1]))] if len(a) else a


def _solid_lines(data: bytes, nl: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                     np.ndarray, int]:
    """(bytes, starts, ends, 1-based numbers) of the lines worth a look, and the line count
    (``nl``: the offsets of the line breaks, when known).

    Where lines are long (real data), that is every line. Where they are short on
    average (a flood of blank lines), only the lines holding a byte other than a blank
    or a line break are listed, found from those bytes: a flood of blank lines then
    costs a few NumPy passes over its bytes, and no per-line arrays.
    """
    buf = np.frombuffer(data, dtype=np.uint8)
    if nl is None:
        nl = np.flatnonzero(buf == 10)
    n_lines = len(nl) + (0 if data.endswith(b"\n") or not data else 1)
    if n_lines <= len(data) // 32 or not len(nl):
        buf, starts, ends = lines_of(data, nl)
        return buf, starts, ends, np.arange(1, n_lines + 1, dtype=np.int64), n_lines
    solid = np.flatnonzero((buf != 10) & (buf != 32) & (buf != 9) & (buf != 13))
    idx = _union(np.searchsorted(nl, solid))  # the line holding each such byte
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
    if pa.types.is_float64(t) and arr.null_count == 0:  # the common case, in NumPy
        v = to_numpy(arr)
        if np.isfinite(v).all():
            return False, False
        return bool(np.isnan(v).any()), bool(np.isinf(v).any())
    if pa.types.is_floating(t):
        import pyarrow.compute as pc  # only here: its import costs a fresh ingest ~0.13 s

        if pc.all(pc.is_finite(arr)).as_py() is not False:
            return False, False
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


#: ``N`` bytes looked at one by one before a plain search for ``-NaN`` takes over.
_NAN_PROBES = 256


def _has_minus_nan(data: bytes) -> bool:
    """Whether ``data`` holds ``-NaN``. A search for the byte ``N`` (memchr: rare in
    numbers, so a few probes) is some 30 times faster than one for ``-NaN`` where
    minus signs abound; past ``_NAN_PROBES`` of them the plain search takes the rest."""
    p = data.find(b"N")
    for _ in range(_NAN_PROBES):
        if p < 0:
            return False
        if p and data[p - 1] == 0x2D and data.startswith(b"NaN", p):
            return True
        p = data.find(b"N", p + 1)
    return p >= 0 and data.find(b"-NaN", p - 1) >= 0


def _arrow_only_tokens(data: bytes, nan: bool, inf: bool) -> bool:
    """Whether ``data`` may hold ``-NaN`` (when ``nan``) or an ``Inf`` that is not
    ``Infinity`` (when ``inf``): tokens Arrow reads as floats and Python's json rejects.
    Byte searches in C (no per-byte arrays); a false positive (such text inside a
    string) only costs speed."""
    if nan and _has_minus_nan(data):
        return True
    if inf:
        p = data.find(b"Inf")
        while p >= 0:
            if data[p:p + 8] != b"Infinity":
                return True
            p = data.find(b"Inf", p + 8)
    return False


def _fast(data: bytes, n_rows: int, rel_starts: np.ndarray, hints: Hints) -> pa.Table:
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
        m = OVERFLOW_RE.search(data)
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
        table = table.rename_columns([free_name(LINE_COLUMN, names) if n == LINE_COLUMN else n
                                      for n in names])
    return table


#: After this many fast-path failures in one chunk, the rest is tried in blocks of
#: ``_BLOCK_LINES`` (each block: one Arrow try, else the reference), so a chunk of many
#: bad lines costs linear time rather than one re-parse per bad line.
_MAX_FAILS = 8


_BLOCK_LINES = 256


#: Up to this many lines the fast path must skip, it reads the stretches between them
#: in place; beyond, it reads one compacted copy of the other lines.
_MAX_SEGMENTS = 32


#: Up to this many candidate lines are copied out one by one (a mask costs passes over
#: the whole chunk: a shaped chunk with one odd line would pay them for that line).
_JOIN_LINES = 1024


@dataclass
class Chunk:
    """One chunk parsed: its good rows (chunk-relative ``_line``), rejects, blank lines, line count,
    the values set aside and coerced, and the values of other kinds left for the run's type."""

    table: pa.Table
    rejects: list[Reject]
    blanks: int
    n_lines: int
    aside: list[Aside] = field(default_factory=list)
    coerced: dict[str, dict[str, int]] = field(default_factory=dict)
    pending: list = field(default_factory=list)  # (line, column, value) for _Renumber


def parse_chunk(data: bytes | TooLong, final_unterminated: bool, hints: Hints,
                 fixed: Mapping[str, pa.DataType] = CANONICAL_TYPES,
                 max_line: int = DEFAULT_MAX_LINE_BYTES, nl: np.ndarray | None = None) -> Chunk:
    """Parse one chunk with line numbers relative to the chunk (first line = 1); ``nl``:
    the offsets of its line breaks, when the caller has them.

    Never raises for its content: a failure this module did not foresee sends the
    chunk to the reference, and a line even that cannot read is rejected with the error.
    """
    if isinstance(data, TooLong):
        return Chunk(pa.table({LINE_COLUMN: pa.array([], pa.int64())}),
                      [Reject(1, too_long_reason(data.size, max_line), data.head)], 0, 1)
    # CR and CRLF arrive as LF: read_chunks turned them into it
    try:
        return _parse_lines(data, final_unterminated, hints, fixed, max_line, nl)
    except Exception as e:  # noqa: BLE001 - the last line of defence: nothing escapes ingest
        return _parse_chunk_reference(data, final_unterminated, fixed, max_line, e)


def _parse_chunk_reference(data: bytes, final_unterminated: bool, fixed, max_line: int,
                           cause: Exception) -> Chunk:
    buf, starts, ends = lines_of(data)
    n = len(starts)
    last = n if final_unterminated and not data.endswith(b"\n") else -1
    lines, rejects, blanks = [], [], 0
    for i in range(n):
        raw = data[starts[i]:ends[i]]
        if blank_line(raw):
            blanks += 1
        elif len(raw) > max_line:
            rejects.append(Reject(i + 1, too_long_reason(len(raw), max_line), raw[:EXCERPT_BYTES]))
        else:
            lines.append((i + 1, raw))
    pending: list = []
    try:
        table, more, aside, coerced = read_reference(lines, last, fixed, pending)
    except Exception as e:  # noqa: BLE001
        reason = f"could not be read: {type(e).__name__}: {str(e)[:200]} (after {type(cause).__name__})"
        return Chunk(pa.table({LINE_COLUMN: pa.array([], pa.int64())}),
                      sorted(rejects + [Reject(k, reason, raw) for k, raw in lines], key=lambda r: r.line),
                      blanks, n)
    table, a2, c2 = assemble_pieces([table], fixed, pending)
    merge_counts(coerced, c2)
    return Chunk(table, sorted(rejects + more, key=lambda r: r.line), blanks, n, aside + a2, coerced,
                  pending)


def _shaped(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, numbers: np.ndarray,
            cand: np.ndarray) -> tuple[list[pa.Table], np.ndarray]:
    """Tables of the candidate lines the shape path reads (:mod:`regime_dash.ingest.shapes`),
    and the candidates left for Arrow. A second shape is tried when a quarter of the
    lines are not the first one's."""
    if shapes.kernels() is None or len(cand) < shapes.MIN_LINES:
        return [], cand
    tables: list[pa.Table] = []
    rest = cand
    for _ in range(2):
        first = int(rest[0])
        tpl = shapes.template_of(buf[starts[first]:ends[first]].tobytes())
        if tpl is None:
            break
        matched = shapes.match(tpl, buf, starts[rest], ends[rest])
        ok = matched[0]
        if not ok.any() or (not tables and 2 * int(ok.sum()) < len(rest)):
            break  # the shape path is for a file of one shape: lines of many shapes (a wide file) go to Arrow whole
        try:
            tables.append(shapes.table_of(tpl, buf, matched, numbers[rest[ok]]))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            break  # a value the shape path cannot vouch for (bad UTF-8, a float cast): Arrow's
        rest = rest[~ok]
        if len(rest) < max(shapes.MIN_LINES, len(cand) // 4):
            break
    return tables, rest


def _compacted(data: bytes, buf: np.ndarray, starts: np.ndarray,
               ends: np.ndarray) -> tuple[bytes, np.ndarray, np.ndarray]:
    """The lines ``data[starts:ends]``, each with its line break, in one buffer; and their
    starts and ends there."""
    lens = np.minimum(ends + 1, len(buf)) - starts
    if len(starts) <= _JOIN_LINES:  # a few left (the shape path read the rest): join them
        src = b"".join([data[a:a + n] for a, n in zip(starts.tolist(), lens.tolist())])
    else:  # a mask of the chunk's bytes
        delta = np.zeros(len(buf) + 2, dtype=np.int32)
        delta[starts] = 1
        delta[ends + 1] -= 1
        src = buf[np.cumsum(delta[: len(buf)]) > 0].tobytes()
    src_ends = np.cumsum(lens)
    return src, src_ends - lens, src_ends


def _parse_lines(data: bytes, final_unterminated: bool, hints: Hints,
                 fixed: Mapping[str, pa.DataType], max_line: int, nl: np.ndarray | None = None) -> Chunk:
    buf, starts, ends, numbers, n_lines = _solid_lines(data, nl)
    plan = _plan(buf, starts, ends, max_line)
    last = n_lines if final_unterminated and not data.endswith(b"\n") else -1
    pieces: list[pa.Table] = []
    rejects: list[Reject] = []
    aside: list[Aside] = []
    coerced: dict[str, dict[str, int]] = {}
    pending: list = []

    def reference(idx) -> None:
        t, r, a, c = read_reference([(int(numbers[i]), data[starts[i]:ends[i]]) for i in idx], last, fixed,
                                pending)
        pieces.append(t)
        rejects.extend(r)
        aside.extend(a)
        merge_counts(coerced, c)

    for i in plan.long:
        rejects.append(Reject(int(numbers[i]), too_long_reason(int(ends[i] - starts[i]), max_line),
                              data[starts[i]:starts[i] + EXCERPT_BYTES]))
    if len(plan.odd):
        reference(plan.odd)
    shaped, cand = _shaped(buf, starts, ends, numbers, plan.cand)
    pieces.extend(shaped)
    m = len(cand)
    if m:
        other = _union(plan.odd, plan.long)  # non-blank lines the fast path must not see
        if shaped:  # nor those the shape path read
            other = _union(other, plan.cand[~np.isin(plan.cand, cand, assume_unique=True)])
        if len(other) <= _MAX_SEGMENTS:
            # the candidates between two such lines are one stretch of the chunk (blank
            # lines included: Arrow skips them): no copy
            src = data
            src_starts = starts[cand]
            src_ends = np.minimum(ends[cand] + 1, len(data))
            cuts = np.searchsorted(cand, other)
            bounds = _union([0], cuts, [m])
            stack = [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a][::-1]
        else:  # many: only the candidate lines, each with its line break, in one buffer
            src, src_starts, src_ends = _compacted(data, buf, starts[cand], ends[cand])
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
            pieces.append(t.add_column(0, LINE_COLUMN, from_numpy(numbers[cand[lo:hi]].astype(np.int64, copy=False))))
    table, a2, c2 = assemble_pieces([drop_empty_structs(t) for t in pieces], fixed, pending)
    aside.extend(a2)
    merge_counts(coerced, c2)
    rejects.sort(key=lambda r: r.line)
    aside.sort(key=lambda a: a.line)
    blanks = plan.blanks + n_lines - len(numbers)  # lines _solid_lines left out are blank
    return Chunk(table, rejects, blanks, n_lines, aside, coerced, pending)
