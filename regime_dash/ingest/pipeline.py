"""The chunk pipeline: chunks parsed in worker threads with bounded read-ahead, renumbered
to file lines in source order, and the run's column types settled.
"""
from __future__ import annotations

import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator, Mapping

import numpy as np
import pyarrow as pa

from regime_dash.errors import IngestError
from regime_dash.ingest.arrays import from_numpy, to_numpy
from regime_dash.ingest.types import CANONICAL_TYPES
from regime_dash.ingest.report import (
    Aside,
    Batch,
    IngestReport,
    LINE_COLUMN,
    Reject,
    merge_counts,
)
from regime_dash.ingest.columns import settle_pending, unify_tables
from regime_dash.ingest.sources import (
    DEFAULT_MAX_LINE_BYTES,
    MAX_CHUNK_LINES,
    Blocks,
    open_source,
    read_chunks,
    chunk_bytes_for,
    split_lines,
)
from regime_dash.ingest.arrow import Chunk, Hints, parse_chunk
from regime_dash.ingest.diag_rows import quarantine_non_diag, quarantine_unsafe_steps
from regime_dash.ingest import shapes


#: Bytes of chunks parsed or queued at once, beyond which the reader waits (long lines
#: make chunks big; this keeps their number down).
_INFLIGHT_BYTES = 256 << 20


def _default_workers() -> int:
    try:
        n = len(os.sched_getaffinity(0))  # the CPUs this process may use, not the host's
    except AttributeError:
        n = os.cpu_count() or 1
    # beyond ~8 the one reading/writing thread is the bottleneck and memory still grows
    return max(1, min(8, n))


def _line_breaks(data: bytes) -> np.ndarray:
    """The offsets of the line breaks of ``data``: by the compiled scanner's word reads when
    its kernels are loaded and the lines are not short, else by NumPy (the same offsets)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    k = shapes.kernels()
    if k is not None:
        nl = k.line_breaks(buf, k.windows(buf))
        if not len(nl) or nl[0] >= 0:
            return nl
    return np.flatnonzero(buf == 10)


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

    def __call__(self, result: Chunk, pos: int, size: int = 0) -> Batch:
        table, rejects, aside, coerced = result.table, result.rejects, result.aside, result.coerced
        pending = result.pending
        off = self.offset
        if off:
            i = table.column_names.index(LINE_COLUMN)
            table = table.set_column(i, LINE_COLUMN, from_numpy(to_numpy(table.column(i)) + off))
            rejects = [Reject(r.line + off, r.reason, r.raw) for r in rejects]
            aside = [Aside(a.line + off, a.field, a.value, a.type) for a in aside]
            pending = [(line + off, k, v) for line, k, v in pending]
        table, more, c = settle_pending(table, pending, self.types, self.fixed)
        if more or c:
            aside = sorted(list(aside) + more, key=lambda a: a.line)
            coerced = {k: dict(v) for k, v in coerced.items()}
            merge_counts(coerced, c)
        self.offset += result.n_lines
        self.report.blank_lines += result.blanks
        batch = Batch(table, rejects, off + 1, result.n_lines, pos, aside, coerced, size)
        self.report.add(batch)
        return batch


class _Split:
    """A chunk of more than ``MAX_CHUNK_LINES`` lines, cut (:func:`split_lines`) for its
    pieces to be parsed one by one: the per-line objects of a flood of short lines stay
    a chunk's worth."""

    def __init__(self, pieces: list[bytes], final: bool):
        self.cut = pieces
        self.final = final

    def pieces(self) -> Iterator[tuple[bytes, bool]]:
        last = len(self.cut) - 1
        for i, piece in enumerate(self.cut):
            yield piece, self.final and i == last


def _in_order(pool: ThreadPoolExecutor, work, chunks, workers: int, renumber, position) -> Iterator[Batch]:
    """The chunks parsed by ``pool``, renumbered in source order, with bounded read-ahead:
    one chunk queued beyond the busy workers, and no more bytes than the in-flight budget.
    A chunk the worker hands back cut (:class:`_Split`) has its pieces parsed in its place,
    read ahead the same way, before the chunks after it are taken."""
    pending: deque = deque()
    queued = 0

    def settle(fut, pos: int, size: int) -> Iterator[Batch]:
        result = fut.result()
        if not isinstance(result, _Split):
            yield renumber(result, pos, size)
            return
        cut: deque = deque()
        try:
            for piece, final in result.pieces():
                cut.append((pool.submit(work, piece, final, False), len(piece)))
                while len(cut) > workers:
                    f, n = cut.popleft()
                    yield renumber(f.result(), pos, n)
            while cut:
                f, n = cut.popleft()
                yield renumber(f.result(), pos, n)
        finally:
            for f, _n in cut:
                f.cancel()

    try:
        for data, final in chunks:
            size = len(data) if isinstance(data, bytes) else data.size
            pending.append((pool.submit(work, data, final), position(), size))
            queued += size if isinstance(data, bytes) else 0
            del data
            while len(pending) > workers + 1 or (len(pending) > 1 and queued > _INFLIGHT_BYTES):
                fut, pos, size = pending.popleft()
                queued = max(0, queued - size)
                yield from settle(fut, pos, size)
        while pending:
            yield from settle(*pending.popleft())
    finally:
        for fut, _p, _s in pending:
            fut.cancel()


def _check_sizes(chunk_bytes: int | None, max_line_bytes: int, path: str | None) -> None:
    """Refuse a chunk size or a line limit that is not a positive int, naming it."""
    if chunk_bytes is not None and (not isinstance(chunk_bytes, int) or chunk_bytes < 1):
        raise IngestError(f"chunk_bytes must be a positive int, got {chunk_bytes!r}", path=path)
    if not isinstance(max_line_bytes, int) or max_line_bytes < 1:
        raise IngestError(f"max_line_bytes must be a positive int, got {max_line_bytes!r}", path=path)


def _close_all(files: list) -> None:
    """Close what opening the source opened, the last opened first; a failing close is passed over."""
    for f in reversed(files):
        try:
            f.close()
        except OSError:
            pass


def _chunk_work(hints: Hints, fixed: Mapping[str, pa.DataType], max_line_bytes: int, diag_only: bool,
                aliases: Mapping[str, Any] | None):
    """The work of one chunk, ``work(data, final, whole=True)``: parsed (with ``diag_only``, its lines
    without a diag field and its unsafe steps quarantined), or, for a ``whole`` chunk of a flood of short
    lines, cut into pieces (:class:`_Split`) parsed one by one."""

    def work(data, final, whole=True):
        nl = None
        if whole and isinstance(data, bytes) and len(data) > MAX_CHUNK_LINES:
            nl = _line_breaks(data)
            if len(nl) > MAX_CHUNK_LINES:  # a flood of short lines: cut, then parse the pieces
                return _Split(split_lines(data, nl), final)
        chunk = parse_chunk(data, final, hints, fixed, max_line_bytes, nl)
        if not diag_only:
            return chunk
        return quarantine_unsafe_steps(quarantine_non_diag(chunk, data, aliases), data)

    return work


def _one_by_one(work, chunks, renumber: _Renumber, position) -> Iterator[Batch]:
    """The chunks parsed in this thread, in source order (one worker)."""
    for data, final in chunks:
        result = work(data, final)
        if isinstance(result, _Split):
            for piece, piece_final in result.pieces():
                yield renumber(work(piece, piece_final, False), position(), len(piece))
        else:
            yield renumber(result, position(), len(data) if isinstance(data, bytes) else data.size)


def iter_batches(source: Any, *, chunk_bytes: int | None = None, path: str | None = None,
                 report: IngestReport | None = None, workers: int | None = None,
                 types: Mapping[str, pa.DataType] | None = None,
                 max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, diag_only: bool = False,
                 aliases: Mapping[str, Any] | None = None) -> Iterator[Batch]:
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
        ``None``: by the source's size (:func:`~regime_dash.ingest.sources.chunk_bytes_for`).
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
    diag_only
        Quarantine the JSON object lines that carry no diag field, as bad lines are
        (:mod:`regime_dash.ingest.diag_rows`; the store and ``check`` read so).
    aliases
        With ``diag_only``: a user's alias table, whose alternatives of diag fields count.

    Yields
    ------
    Batch
        In source order.

    Raises
    ------
    IngestError
        The source cannot be opened or read (missing file, corrupt gzip).
    """
    _check_sizes(chunk_bytes, max_line_bytes, path)
    if path is None and isinstance(source, (str, os.PathLike)):
        path = str(source)
    if report is None:
        report = IngestReport()
    report.path = path
    fixed = {**(types or {}), **CANONICAL_TYPES}
    raw, total, to_close = open_source(source, path)
    report.source_bytes = total
    chunk_bytes = chunk_bytes or chunk_bytes_for(total)
    if shapes.worth_loading(total):
        shapes.start_loading()  # the C scanner at once, or numba's on a thread (later chunks then)
    hints = Hints()
    workers = workers or _default_workers()
    renumber = _Renumber(report, fixed)
    blocks = Blocks(raw, path)
    position = lambda: blocks.done  # noqa: E731
    work = _chunk_work(hints, fixed, max_line_bytes, diag_only, aliases)
    try:
        chunks = read_chunks(blocks, chunk_bytes, report, max_line_bytes)
        if workers == 1:
            yield from _one_by_one(work, chunks, renumber, position)
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ingest") as pool:
                yield from _in_order(pool, work, chunks, workers, renumber, position)
        report.complete = True
    finally:
        report.gzip = blocks.gzip
        report.truncated_gzip = blocks.truncated
        _close_all(to_close)


def parse(source: Any, *, chunk_bytes: int | None = None, path: str | None = None,
          workers: int | None = None, types: Mapping[str, pa.DataType] | None = None,
          max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, diag_only: bool = False,
          aliases: Mapping[str, Any] | None = None) -> tuple[pa.Table, IngestReport]:
    """Parse a whole (small) source into one table. Convenience for tests and the UI.

    Parameters
    ----------
    source, chunk_bytes, path, workers, types, max_line_bytes, diag_only, aliases
        As for :func:`iter_batches`.

    Returns
    -------
    table, report
        All good rows unified into one table (see :func:`unify_tables`), and the report.
    """
    report = IngestReport()
    tables = [b.table for b in iter_batches(source, chunk_bytes=chunk_bytes, path=path,
                                            report=report, workers=workers, types=types,
                                            max_line_bytes=max_line_bytes, diag_only=diag_only,
                                            aliases=aliases)]
    if not tables:
        return pa.table({LINE_COLUMN: pa.array([], pa.int64())}), report
    return unify_tables(tables), report
