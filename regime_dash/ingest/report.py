"""What ingestion reports: rejected lines, set-aside values, the batch of one chunk, and
the :class:`IngestReport` of one pass over a source.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import pyarrow as pa

from regime_dash.ingest.arrays import to_numpy
from regime_dash.ingest.types import unify_types


#: The reserved column holding each row's 1-based source line number.
LINE_COLUMN = "_line"


#: The reason a JSON object line of a diag without any diag field is quarantined with
#: (:mod:`regime_dash.ingest.diag_rows`).
NOT_DIAG_LINE = "not a diag line: no diag field (step or risk_stack.*)"


#: Rejected lines and set-aside values an :class:`IngestReport` keeps in memory (the
#: counts are exact; the store writes every one of them to disk).
REPORT_KEEP = 1000


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
    not_diag_lines
        Of those, the JSON object lines quarantined because they carry no diag field
        (:data:`NOT_DIAG_LINE`; only when ingest reads with ``diag_only``).
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
    arrow_types
        Column name -> Arrow type (the types ``columns`` spells), in the same order.
    """

    path: str | None = None
    rows: int = 0
    lines: int = 0
    blank_lines: int = 0
    rejected: list[Reject] = field(default_factory=list)
    rejected_count: int = 0
    not_diag_lines: int = 0
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
    arrow_types: dict[str, pa.DataType] = field(default_factory=dict, repr=False)
    _folded: pa.Schema | None = field(default=None, repr=False, compare=False)

    def add(self, batch: Batch) -> None:
        """Fold one batch into the report."""
        table = batch.table
        self.rows += table.num_rows
        self.lines = max(self.lines, batch.first_line + batch.n_lines - 1)
        room = REPORT_KEEP - len(self.rejected)
        if room > 0:
            self.rejected.extend(Reject(r.line, r.reason) for r in batch.rejects[:room])
        self.rejected_count += len(batch.rejects)
        self.not_diag_lines += sum(1 for r in batch.rejects if r.reason == NOT_DIAG_LINE)
        self.note(batch.aside, batch.coerced)
        # the schema folded in last, folded in again, changes nothing (the join is idempotent)
        if self._folded is None or not table.schema.equals(self._folded):
            for f in table.schema:
                if f.name == LINE_COLUMN:
                    continue
                old = self.arrow_types.get(f.name)
                new = f.type if old is None else unify_types(old, f.type)
                self.arrow_types[f.name] = new
                self.columns[f.name] = str(new)
            self._folded = table.schema
        if "step" in table.column_names and table.num_rows:
            lo, hi = _step_range(table.column("step"))
            if lo is not None:
                self.first_step = lo if self.first_step is None else min(self.first_step, lo)
                self.last_step = hi if self.last_step is None else max(self.last_step, hi)

    def rename_column(self, old: str, new: str) -> None:
        """Report the column ``old`` as ``new`` (in place, its order kept): a store stores it under another name."""
        self.columns = {(new if k == old else k): v for k, v in self.columns.items()}
        self.arrow_types = {(new if k == old else k): v for k, v in self.arrow_types.items()}

    def note(self, aside: Sequence[Aside], coerced: dict[str, dict[str, int]]) -> None:
        """Count set-aside values and coercions (also those a store finds at commit)."""
        room = REPORT_KEEP - len(self.aside)
        if room > 0:
            self.aside.extend(aside[:room])
        self.aside_count += len(aside)
        merge_counts(self.coerced, coerced)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (rejects as ``{line, reason}``)."""
        return {
            "path": self.path,
            "rows": self.rows,
            "lines": self.lines,
            "blank_lines": self.blank_lines,
            "rejected": [r.to_dict() for r in self.rejected],
            "rejected_count": self.rejected_count,
            "not_diag_lines": self.not_diag_lines,
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


def merge_counts(into: dict[str, dict[str, int]], more: dict[str, dict[str, int]]) -> None:
    """Add the counts ``{column: {kind: n}}`` of ``more`` into ``into`` (coercions counted per column and kind)."""
    for col, by in more.items():
        dst = into.setdefault(col, {})
        for kind, n in by.items():
            dst[kind] = dst.get(kind, 0) + n


def _step_range(col: pa.ChunkedArray) -> tuple[Any, Any]:
    t = col.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
        return None, None
    if t == pa.int64() and col.null_count == 0 and len(col):  # the canonical step, in NumPy
        v = to_numpy(col)
        return int(v.min()), int(v.max())
    import pyarrow.compute as pc  # only here: its import costs a fresh ingest ~0.13 s

    if pa.types.is_floating(t):
        col = pc.filter(col, pc.is_finite(col))
    mm = pc.min_max(col).as_py()
    lo, hi = mm["min"], mm["max"]
    return lo, hi
