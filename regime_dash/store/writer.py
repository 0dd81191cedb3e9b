"""Writing runs into the store: an ingest staged and committed, a run deleted.

An ingest parses its source without the lock, into a work folder in staging (parts as
``*.parquet.tmp``, ``_rejects.jsonl``, ``_conflicts.jsonl``). Its commit runs under the
store's lock: orphan copies of the same bytes moved aside, the duplicate check (the same
sha256 stored before gives that run, the new name an alias of it), every column given the
store's type, the run id chosen, the parts renamed to ``*.parquet``, ``_meta.json`` written,
and the folder renamed into the store as ``run=<id>``: that rename is the commit. An I/O
failure anywhere leaves the store as it was and says how much space the run needed.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

from regime_dash.errors import IngestError, StoreError
from regime_dash.ingest import (
    LINE_COLUMN,
    Aside,
    IngestReport,
    conform_column,
    free_name,
    iter_batches,
    report_reason,
    require_diag,
)
from regime_dash.store import common_schema
from regime_dash.store.failures import os_error_text
from regime_dash.store.ingest_result import IngestResult, ingest_result
from regime_dash.store.lock import StoreLock
from regime_dash.store.metadata import add_alias, existing_dir, find_sha, fsync_dir, ingest_meta, write_json
from regime_dash.store.parts import PartWriter, write_part
from regime_dash.store.paths import (
    CONFLICTS,
    DELETE_PREFIX,
    INGEST_PREFIX,
    META,
    PARTITION,
    PART_TMP,
    REJECTS,
    name_from_source,
    run_dir,
    sanitize_name,
    staging_debris,
    staging_dir,
    work_dir_name,
)
from regime_dash.store.quarantine import move_orphan_copies
from regime_dash.store.reader import PartSchemas

__all__ = ["MAX_COLUMNS", "clean_stale", "cast_to_types", "delete_run", "ingest", "reject_record"]

#: The most columns one run may have. The diag contract has about a hundred fields; a file
#: with tens of thousands of keys is refused (its parse cost grows with the key count, and
#: every reader of the run pays for each column again).
MAX_COLUMNS = 4096


@dataclass
class _Progress:
    """How far an ingest got: source bytes read (of ``total``), content bytes parsed and written."""

    done: int = 0
    total: int | None = None
    content: int = 0
    written: int = 0


def reject_record(r) -> dict[str, Any]:
    """A rejected line as ``_rejects.jsonl`` keeps it: its line, reason and raw text (with the exact
    bytes as base64 where they are not UTF-8)."""
    rec: dict[str, Any] = {"line": r.line, "reason": r.reason}
    try:
        rec["raw"] = r.raw.decode("utf-8")
    except UnicodeDecodeError:
        import base64

        # keep the exact bytes too: "nothing lost"
        rec["raw"] = r.raw.decode("utf-8", errors="backslashreplace")
        rec["raw_base64"] = base64.b64encode(r.raw).decode("ascii")
    return rec


def clean_stale(root: Path) -> list[str]:
    """Remove the work directories :func:`regime_dash.store.paths.staging_debris` lists; their names."""
    removed = []
    for p in staging_debris(root):
        shutil.rmtree(p, ignore_errors=True)
        removed.append(p.name)
    return removed


def ingest(root: Path, source: Any, *, name: str | None, source_name: str | None, schemas: PartSchemas,
           chunk_bytes: int | None, max_line_bytes: int,
           progress: Callable[[int, int | None], None] | None = None) -> IngestResult:
    """Parse a diag.jsonl source and store it as a new run of the store at ``root`` (or find it
    stored): see :meth:`RunStore.ingest`. ``schemas`` is the store's cache of part schemas."""
    if source_name is None and isinstance(source, (str, os.PathLike)):
        source_name = os.path.basename(os.fspath(source))
    run_name = sanitize_name(name if name else name_from_source(source_name))
    state = _Progress()
    tmp: Path | None = None
    try:
        try:
            staging = staging_dir(root)
        except OSError as e:
            raise StoreError(f"cannot create store {str(root)!r}: {e.strerror or e}", path=str(root)) from None
        clean_stale(root)
        tmp = staging / work_dir_name(INGEST_PREFIX)
        tmp.mkdir()

        def tick(done: int, total: int | None) -> None:
            state.done, state.total = done, total
            if progress is not None:
                progress(done, total)

        report = _write_run(source, tmp, source_name, tick, state, chunk_bytes=chunk_bytes,
                            max_line_bytes=max_line_bytes, types=schemas.column_types(root))
        require_diag(source_name, report_reason(report))  # nothing is stored: tmp goes below
        with StoreLock(root):
            return _commit(root, tmp, run_name, source_name, report, schemas)
    except OSError as e:
        raise _io_error(root, e, tmp, state) from None
    finally:
        if tmp is not None and tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _commit(root: Path, tmp: Path, run_name: str, source_name: str | None, report: IngestReport,
            schemas: PartSchemas) -> IngestResult:
    """The staged run ``tmp`` committed (the caller holds the lock), or the run holding its bytes."""
    move_orphan_copies(root, report.sha256 or "")
    dup = find_sha(root, report.sha256 or "")
    if dup is not None:
        shutil.rmtree(tmp, ignore_errors=True)
        meta, added, taken = add_alias(root, dup, run_name)
        res = ingest_result(meta, duplicate_of=dup, report=report)
        res.alias_added, res.alias_taken_by, res.given_name = added, taken, run_name
        return res
    columns = _settle_types(root, tmp, report, schemas)
    run_id = _free_id(root, run_name, report.sha256 or "")
    meta = ingest_meta(run_id, run_name, source_name, report, columns)
    parts = sorted(tmp.glob(f"part-*.parquet{PART_TMP}"))
    common_schema.widen(root, parts)  # before the run is in view: readers handed it miss no column
    for part in parts:
        os.replace(part, part.with_name(part.name[: -len(PART_TMP)]))
    write_json(tmp / META, meta)
    os.replace(tmp, run_dir(root, run_id))
    fsync_dir(root)
    return ingest_result(meta, duplicate_of=None, report=report)


def _check_width(report: IngestReport, source_name: str | None) -> None:
    if len(report.columns) > MAX_COLUMNS:
        extra = list(report.columns)[MAX_COLUMNS]
        raise IngestError(f"{source_name or 'input'}: more than {MAX_COLUMNS:,} columns (the "
                          f"{MAX_COLUMNS + 1:,}th is {extra[:60]!r}); a run holds at most {MAX_COLUMNS:,}. "
                          "Nothing was stored", path=source_name)


def _write_run(source: Any, tmp: Path, source_name: str | None, progress: Callable[[int, int | None], None],
               state: _Progress, *, chunk_bytes: int | None, max_line_bytes: int,
               types: dict[str, pa.DataType]) -> IngestReport:
    """The source parsed into ``tmp``: its parts, rejects and set-aside values; returns its report."""
    report = IngestReport()
    parts = PartWriter(tmp)
    with open(tmp / REJECTS, "w", encoding="utf-8") as rej, \
            open(tmp / CONFLICTS, "w", encoding="utf-8") as conf:
        try:
            for batch in iter_batches(source, chunk_bytes=chunk_bytes, path=source_name, report=report,
                                      types=types, max_line_bytes=max_line_bytes, diag_only=True):
                table = batch.table
                _check_width(report, source_name)
                if PARTITION in table.column_names:
                    # the hive key names the run; a source field of that name moves over
                    table = table.rename_columns(
                        [free_name(PARTITION, table.column_names) if n == PARTITION else n
                         for n in table.column_names])
                state.content = report.content_bytes
                parts.write(table)
                state.written += batch.content_bytes
                if batch.rejects:
                    rej.write("".join(json.dumps(reject_record(r), ensure_ascii=False) + "\n"
                                      for r in batch.rejects))
                if batch.aside:
                    conf.write("".join(json.dumps(a.to_dict(), ensure_ascii=False) + "\n" for a in batch.aside))
                progress(batch.bytes_done, report.source_bytes)
        finally:
            parts.close()
        for fh in (rej, conf):
            fh.flush()
            if fh.tell():  # an empty file has nothing to make durable
                os.fsync(fh.fileno())
    if PARTITION in report.columns:
        report.rename_column(PARTITION, free_name(PARTITION, report.columns))
    return report


def _settle_types(root: Path, tmp: Path, report: IngestReport, schemas: PartSchemas) -> dict[str, str]:
    """Give every column of the new run the store's type (under the lock, so two
    ingests racing on a new column agree), and every part the run's final types.

    A column another run gave a type first is cast to it (values that do not fit
    are set aside); a column whose type widened during this ingest (int64 then
    float64) is widened in the earlier parts. Returns column -> type string.
    """
    schemas.clear()  # other processes may have committed runs meanwhile
    store = schemas.column_types(root)
    final = {k: store.get(k, t) for k, t in report.arrow_types.items()}
    for k, t in final.items():
        if pa.types.is_null(t) and k in store:
            final[k] = store[k]
    for part in sorted(tmp.glob(f"part-*.parquet{PART_TMP}")):
        schema = pq.read_schema(part)
        if all(final.get(f.name, f.type) == f.type for f in schema):
            continue
        aside = _cast_part(part, final, report)
        if aside:
            with open(tmp / CONFLICTS, "a", encoding="utf-8") as conf:
                conf.write("".join(json.dumps(a.to_dict(), ensure_ascii=False) + "\n"
                                   for a in sorted(aside, key=lambda a: a.line)))
    return {k: str(t) for k, t in final.items()}


def cast_to_types(table: pa.Table, final: dict[str, pa.DataType]) -> tuple[pa.Table, list[Aside], dict]:
    """``table`` with each column ``final`` types otherwise cast to that type; returns it, the values
    set aside (those the type cannot hold) and the coercions counted by column and kind."""
    lines = table.column(LINE_COLUMN).to_numpy() if LINE_COLUMN in table.column_names else None
    aside: list[Aside] = []
    coerced: dict[str, dict[str, int]] = {}
    for i, f in enumerate(table.schema):
        want = final.get(f.name, f.type)
        if want == f.type:
            continue
        col, a, c = conform_column(table.column(i), want, lines, f.name)
        table = table.set_column(i, f.name, col)
        aside.extend(a)
        for k, by in c.items():
            for kind, n in by.items():
                coerced.setdefault(k, {})[kind] = coerced.get(k, {}).get(kind, 0) + n
    return table, aside, coerced


def _cast_part(part: Path, final: dict[str, pa.DataType], report: IngestReport) -> list[Aside]:
    """The part rewritten with the columns of ``final`` cast to it; returns the values set aside (and
    counts them and the coercions in ``report``)."""
    table, aside, coerced = cast_to_types(pq.read_table(part), final)
    fresh = part.with_name(part.name + ".new")
    write_part(fresh, table, durable=False)
    os.replace(fresh, part)
    report.note(aside, coerced)
    return aside


def _free_id(root: Path, name: str, sha: str) -> str:
    for n in (12, 16, 24, 64):
        rid = f"{name}-{sha[:n]}"
        if not run_dir(root, rid).exists():
            return rid
    raise StoreError(f"run id {name}-{sha} is taken", run_id=name)  # pragma: no cover


def _io_error(root: Path, e: OSError, tmp: Path | None, state: _Progress) -> StoreError:
    """One line a person can act on: what failed, where, how much space was needed."""
    written = 0
    if tmp is not None and tmp.is_dir():
        written = sum(f.stat().st_size for f in tmp.iterdir() if f.is_file())
    msg = f"cannot store the run in {str(root)!r}: {os_error_text(e)}"
    mb = written / 1e6
    # bytes written per content byte of the rows written, times the whole content
    # (for gzip, the compressed size times the expansion seen so far)
    content_total = state.total * state.content / state.done if state.total and state.done else None
    if content_total and state.written and written:
        need = written / state.written * content_total
        msg += f"; the run needs about {need / 1e6:.1f} MB ({mb:.1f} MB written before the failure)"
    elif written:
        msg += f"; the run needs more than the {mb:.1f} MB written before the failure"
    with contextlib.suppress(OSError):
        free = shutil.disk_usage(tmp.parent if tmp is not None else root).free
        msg += f", {free / 1e6:.1f} MB free there"
    return StoreError(msg + ". The store is unchanged.", path=str(root))


def delete_run(root: Path, run_id: str) -> None:
    """Remove a run: its folder renamed out of the store first (so no reader sees part of a run),
    then removed (see :meth:`RunStore.delete`)."""
    d = existing_dir(root, run_id)
    try:
        trash = staging_dir(root) / work_dir_name(DELETE_PREFIX)
        with StoreLock(root):
            os.replace(d, trash)
    except FileNotFoundError:
        raise StoreError(f"no run {run_id!r} in {root} (deleted meanwhile?)", run_id=run_id) from None
    except OSError as e:  # a read-only store, a permission: one line, the run left as it was
        raise StoreError(f"cannot delete run {run_id!r} from {str(root)!r}: {os_error_text(e)}; the run is "
                         "unchanged", run_id=run_id, path=str(root)) from None
    shutil.rmtree(trash, ignore_errors=True)
