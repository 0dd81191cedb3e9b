"""An ingest into a Delta store: parse into spooled files, claim the run, commit rejects then rows.

The order (see :mod:`.catalogue` for the states):

1. the source is parsed in chunks; rows go to Parquet files (:class:`.parts.PartWriter`),
   rejected lines to a rejects file, in a local spool (nothing is visible);
2. the run's columns get the store's types (:func:`.parts.settle`);
3. the catalogue is changed in one commit: the same bytes stored before make this an alias of
   that run (and nothing more is written); else the run is claimed as ``pending`` under a free id;
4. its rejects are committed to the rejects table, then its rows to the rows table in one commit:
   from here the run is whole and listed;
5. the catalogue marks it ``live``.

A kill before 4's rows commit leaves no row and a pending claim the next writer drops; after it,
a pending run the next writer marks live. No reader ever sees part of a run.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Sequence

import pyarrow as pa

from regime_dash.errors import IngestError
from regime_dash.ingest import LINE_COLUMN, IngestReport, iter_batches
from regime_dash.store.delta import catalogue as cat
from regime_dash.store.delta.parts import Part, PartWriter, final_types, settle
from regime_dash.store.delta.records import free_col, reject_record, rejects_table
from regime_dash.store.delta.tables import PARTITION, TypeClash
from regime_dash.store.run_store import MAX_COLUMNS, IngestResult


__all__ = ["commit_ingest", "parse_into"]

#: How long an ingest waits for another writer's pending run of the same bytes to land.
_WAIT_SECONDS = 600.0


def _rename_partition_column(table: pa.Table) -> pa.Table:
    if PARTITION not in table.column_names:
        return table
    return table.rename_columns([free_col(PARTITION, table.column_names) if n == PARTITION else n
                                 for n in table.column_names])


def parse_into(store, source: Any, spool: str, source_name: str | None,
               progress: Callable[[int, int | None], None] | None) -> tuple[IngestReport, list[Part], list[Part]]:
    """Parse ``source`` into row files and reject files in ``spool``; returns the report and both."""
    import os

    report = IngestReport()
    rows = PartWriter(os.path.join(spool, "rows"))
    rejects = PartWriter(os.path.join(spool, "rejects"))
    try:
        for batch in iter_batches(source, chunk_bytes=store.chunk_bytes, path=source_name, report=report,
                                  types=store.column_types(), max_line_bytes=store.max_line_bytes, diag_only=True):
            if len(report.columns) > MAX_COLUMNS:
                raise IngestError(f"{source_name or 'input'}: more than {MAX_COLUMNS:,} columns; a run holds at most "
                                  f"{MAX_COLUMNS:,}. Nothing was stored", path=source_name)
            rows.write(_rename_partition_column(batch.table))
            if batch.rejects:
                rejects.write(rejects_table("reject", [reject_record(r.line, r.reason, r.raw) for r in batch.rejects]))
            if batch.aside:
                rejects.write(rejects_table("aside", [a.to_dict() for a in batch.aside]))
            if progress is not None:
                progress(batch.bytes_done, report.source_bytes)
    finally:
        row_parts, reject_parts = rows.close(), rejects.close()
    if PARTITION in report.columns:
        free = _free_col_of(report.columns)
        report.columns = {(free if k == PARTITION else k): v for k, v in report.columns.items()}
        report.arrow_types = {(free if k == PARTITION else k): v for k, v in report.arrow_types.items()}
    return report, row_parts, reject_parts


def _free_col_of(taken) -> str:
    return free_col(PARTITION, taken)


def _meta(run_id: str, run_name: str, source_name: str | None, report: IngestReport,
          columns: dict[str, str]) -> dict[str, Any]:
    return {
        "format_version": 1, "run_id": run_id, "name": run_name, "source": source_name,
        "sha256": report.sha256 or "", "source_bytes": report.source_bytes, "content_bytes": report.content_bytes,
        "gzip": report.gzip, "truncated_gzip": report.truncated_gzip, "lines": report.lines, "rows": report.rows,
        "blank_lines": report.blank_lines, "rejected_count": report.rejected_count,
        "aside_count": report.aside_count, "coerced": report.coerced, "columns": columns,
        "first_step": report.first_step, "last_step": report.last_step, "ingested_at": cat.now(),
    }


def result_of(meta: dict[str, Any], report: IngestReport, duplicate_of: str | None) -> IngestResult:
    """What an ingest did, as :class:`IngestResult` (the CLI's and the Runs page's)."""
    return IngestResult(
        run_id=meta["run_id"], rows=int(meta.get("rows") or 0),
        rejected=[r.to_dict() for r in report.rejected], columns=list(meta.get("columns", {})),
        first_step=meta.get("first_step"), last_step=meta.get("last_step"), duplicate_of=duplicate_of,
        sha256=meta.get("sha256"), meta=meta, rejected_count=report.rejected_count,
        aside=[a.to_dict() for a in report.aside], aside_count=report.aside_count,
        coerced={k: dict(v) for k, v in report.coerced.items()})


def _settled(store, report: IngestReport, parts: list[Part], spool: str,
             store_types: dict[str, pa.DataType]) -> tuple[list[Part], list[Part], dict[str, str]]:
    """The row files in the store's types, the files of the values that set aside, and the columns."""
    final = final_types(report.arrow_types, store_types)
    parts, aside, coerced = settle(parts, final)
    report.note(aside, coerced)
    extra = store.rejects_parts(spool, "aside", [a.to_dict() for a in aside])
    return parts, extra, {k: str(t) for k, t in final.items()}


def _claim(store, run_name: str, sha: str, meta_of: Callable[[str], dict[str, Any]]):
    """One catalogue commit: ``("dup", id, added, taken)`` for bytes stored before, ``("wait", id)`` while
    another writer's claim of them is pending, else ``("new", id)`` with the run claimed as pending."""

    def edit(docs: dict[str, dict[str, Any]]):
        for rid, d in docs.items():
            m = d["meta"]
            if m.get("sha256") != sha or d.get("state") not in cat.LISTED:
                continue
            if d["state"] != cat.LIVE:
                return ("wait", rid)
            added = taken = None
            if run_name != m.get("name") and run_name not in m.get("aliases", []):
                taken = next((k for k, o in docs.items() if k != rid and o.get("state") in cat.LISTED
                              and run_name in (k, o["meta"].get("name"), *o["meta"].get("aliases", []))), None)
                if taken is None:
                    m["aliases"] = sorted({*m.get("aliases", []), run_name})
                    added = run_name
            return ("dup", rid, added, taken)
        for n in (12, 16, 24, 64):
            rid = f"{run_name}-{sha[:n]}"
            if rid not in docs or docs[rid].get("state") == cat.REMOVED:
                docs[rid] = cat.doc(cat.PENDING, meta_of(rid), writer=cat.writer())
                return ("new", rid)
        raise IngestError(f"run id {run_name}-{sha} is taken")  # pragma: no cover

    return store.catalogue.change(edit, f"cannot add run {run_name!r}")


def _claim_waiting(store, run_name: str, sha: str, meta_of):
    deadline = time.monotonic() + _WAIT_SECONDS
    while True:
        got = _claim(store, run_name, sha, meta_of)
        if got[0] != "wait" or time.monotonic() > deadline:
            return got
        time.sleep(0.1)
        store.recover()  # a claim whose writer died is dropped (or, with its rows in, made live)


def _commit_rows(store, run_id: str, parts: list[Part], spool: str, report: IngestReport,
                 meta: dict[str, Any]) -> None:
    """The rows commit; a column a concurrent writer typed first meanwhile is cast and the commit retried."""
    for _attempt in range(5):
        try:
            store.commit_rows(run_id, parts, metadata={"regime_dash.run": run_id})
            return
        except TypeClash as clash:
            types = {f.name: f.type for f in clash.table_schema if f.name not in (PARTITION, LINE_COLUMN)}
            parts, extra, columns = _settled(store, report, parts, spool, types)
            store.commit_rejects(run_id, extra)
            meta.update(columns=columns, aside_count=report.aside_count, coerced=report.coerced)
    raise IngestError(f"run {run_id!r}: the store's column types kept changing under the ingest; try again")


def _mark_live(store, run_id: str, meta: dict[str, Any]) -> None:
    def edit(docs):
        docs[run_id] = cat.doc(cat.LIVE, meta)

    store.catalogue.change(edit, f"cannot mark run {run_id!r} stored")


def commit_ingest(store, report: IngestReport, parts: list[Part], rejects: list[Part],
                  run_name: str, source_name: str | None, spool: str) -> IngestResult:
    """Steps 2 to 5 of the module doc."""
    parts, extra, columns = _settled(store, report, parts, spool, store.column_types())
    sha = report.sha256 or ""
    got = _claim_waiting(store, run_name, sha, lambda rid: _meta(rid, run_name, source_name, report, columns))
    if got[0] in ("dup", "wait"):
        res = result_of(store.meta(got[1]), report, got[1])
        if got[0] == "dup":
            res.alias_added, res.alias_taken_by = got[2], got[3]
        res.given_name = run_name
        return res
    run_id = got[1]
    meta = _meta(run_id, run_name, source_name, report, columns)
    store.commit_rejects(run_id, [*rejects, *extra])
    _commit_rows(store, run_id, parts, spool, report, meta)
    _mark_live(store, run_id, meta)
    return result_of(meta, report, None)


def import_rows(store, run_id: str, meta: dict[str, Any], tables: Sequence[pa.Table],
                rejects: Sequence[dict[str, Any]], conflicts: Sequence[dict[str, Any]], spool: str) -> None:
    """A run kept elsewhere (a folder store's) added whole, its id and metadata as they are: claimed,
    rejects and rows committed, marked live (:mod:`.migrate`)."""
    import os

    rows = PartWriter(os.path.join(spool, "rows"))
    for t in tables:
        rows.write(t)
    parts = rows.close()

    def edit(docs):
        if run_id in docs and docs[run_id].get("state") in cat.LISTED:
            raise IngestError(f"run {run_id!r} is in the target store already")
        docs[run_id] = cat.doc(cat.PENDING, meta, writer=cat.writer())

    store.catalogue.change(edit, f"cannot add run {run_id!r}")
    store.commit_rejects(run_id, [*store.rejects_parts(spool, "reject", rejects),
                                  *store.rejects_parts(spool, "aside", conflicts)])
    store.commit_rows(run_id, settle(parts, {})[0], metadata={"regime_dash.run": run_id})
    _mark_live(store, run_id, meta)
