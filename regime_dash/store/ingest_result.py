"""What an ingest did with one source (:class:`IngestResult`): the CLI's JSON object and the
Runs page's sentence about bytes stored before."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from regime_dash.ingest import IngestReport

__all__ = ["IngestResult", "ingest_result"]


@dataclass
class IngestResult:
    """What :meth:`RunStore.ingest` did with one source.

    Attributes
    ----------
    run_id
        The run holding the data (the existing one for a duplicate).
    rows
        Good rows stored.
    rejected
        ``[{"line": int, "reason": str}, ...]`` for the first 1,000 rejected lines (all
        of them are in the run's ``_rejects.jsonl``).
    rejected_count
        Rejected lines.
    aside
        ``[{"line", "field", "value", "type"}, ...]``: the first 1,000 values set aside
        (all in ``_conflicts.jsonl``); ``aside_count`` counts them.
    coerced
        ``{column: {source type: count}}`` of lossless coercions across kinds.
    columns
        Column names (dotted paths), without the ``_line`` bookkeeping column.
    first_step, last_step
        Step range of the run (``None`` without a numeric ``step`` column).
    duplicate_of
        The existing run's id when these bytes were stored before, else ``None``.
    alias_added
        For a duplicate: the name it came under, now an alias of the existing run (``None``
        when it was that run's name or alias already, or another run holds it).
    alias_taken_by
        For a duplicate whose name another run holds: that run's id (no alias was added).
    given_name
        For a duplicate: the name it came under (sanitized).
    sha256
        Content hash.
    """

    run_id: str
    rows: int
    rejected: list[dict[str, Any]]
    columns: list[str]
    first_step: int | float | None
    last_step: int | float | None
    duplicate_of: str | None = None
    sha256: str | None = None
    meta: dict[str, Any] = field(default_factory=dict, repr=False)
    rejected_count: int = 0
    aside: list[dict[str, Any]] = field(default_factory=list)
    aside_count: int = 0
    coerced: dict[str, dict[str, int]] = field(default_factory=dict)
    alias_added: str | None = None
    alias_taken_by: str | None = None
    given_name: str | None = None

    def duplicate_text(self) -> str:
        """What an ingest of bytes stored before did, in one sentence (the CLI's and the Runs page's)."""
        name = self.meta.get("name") or self.run_id
        head = f"same content as run {name} ({self.run_id})"
        if self.alias_added:
            return f"{head}; added the name {self.alias_added}"
        if self.alias_taken_by:
            return f"{head}; the name was not added: run {self.alias_taken_by} already has it"
        return f"{head}; {self.given_name or 'that name'} is already one of its names, no new run was made"

    def to_dict(self) -> dict[str, Any]:
        """The CLI's JSON object for this file."""
        return {
            "run_id": self.run_id,
            "rows": self.rows,
            "rejected": list(self.rejected),
            "rejected_count": self.rejected_count,
            "aside": list(self.aside),
            "aside_count": self.aside_count,
            "coerced": dict(self.coerced),
            "columns": list(self.columns),
            "first_step": self.first_step,
            "last_step": self.last_step,
            "duplicate_of": self.duplicate_of,
            "alias_added": self.alias_added,
            "alias_taken_by": self.alias_taken_by,
        }


def ingest_result(meta: dict[str, Any], *, duplicate_of: str | None, report: IngestReport) -> IngestResult:
    """What an ingest that made (or found) the run of ``meta`` from ``report`` did."""
    return IngestResult(
        run_id=meta["run_id"],
        rows=int(meta.get("rows") or 0),
        rejected=[r.to_dict() for r in report.rejected],
        columns=list(meta.get("columns", {})),
        first_step=meta.get("first_step"),
        last_step=meta.get("last_step"),
        duplicate_of=duplicate_of,
        sha256=meta.get("sha256"),
        meta=meta,
        rejected_count=report.rejected_count,
        aside=[a.to_dict() for a in report.aside],
        aside_count=report.aside_count,
        coerced={k: dict(v) for k, v in report.coerced.items()},
    )
