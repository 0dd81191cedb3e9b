"""A folder store (today's layout) copied into a Delta store, losing nothing, verified row for row.

Every run keeps its id and its whole metadata (name, source, sha256, counts, columns, aliases,
tags, notes, the verdict cache, a follow's state); its rows go to the rows table as they were
stored (the same columns, types and values, ``_line`` included), its rejected lines and values
set aside to the rejects table as the same JSON objects; the named layouts to the settings
table. Then each run is read back from both stores and compared: its table column by column
(bit for bit: NaN's and -0.0's bits included), its metadata, rejects and conflicts, and every
layout. A run already in the target (a migration run again after an interruption) is verified,
not copied twice.
"""
from __future__ import annotations

import os
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

from regime_dash.errors import StoreError
from regime_dash.store import layouts as folder_layouts
from regime_dash.store.delta import layouts as delta_layouts
from regime_dash.store.delta.store import DeltaRunStore
from regime_dash.store.delta.writing import import_rows
from regime_dash.store.run_store import RunStore

__all__ = ["migrate", "verify_run"]


def _bits(col: pa.ChunkedArray) -> pa.Array:
    """A column as comparable bits: floats as their integer bit patterns (NaN equal to itself)."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if pa.types.is_float64(arr.type):
        return arr.view(pa.int64())
    if pa.types.is_float32(arr.type):
        return arr.view(pa.int32())
    return arr


def _first_difference(a: pa.Table, b: pa.Table) -> str | None:
    if sorted(a.column_names) != sorted(b.column_names):  # the order of the columns is no data
        return f"columns differ: {sorted(set(a.column_names) ^ set(b.column_names))[:8]}"
    if a.num_rows != b.num_rows:
        return f"{a.num_rows} rows vs {b.num_rows}"
    for name in a.column_names:
        x, y = a.column(name), b.column(name)
        if x.type != y.type:
            return f"column {name!r}: type {x.type} vs {y.type}"
        if not _bits(x).equals(_bits(y)):
            return f"column {name!r}: values differ"
    return None


#: Metadata derived from a run's rows, which a reader of either store may add at any time: the runs
#: table's verdict cache (``regime_dash.runs.run_table.TABLE_KEY``). A second migration finds it on
#: runs the first copied and `runs --json` has judged since.
DERIVED_KEYS = ("table",)


def _kept_meta(meta: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in meta.items() if k not in DERIVED_KEYS}


def verify_run(old: RunStore, new: DeltaRunStore, run_id: str) -> None:
    """Raise :class:`StoreError` naming the first difference between the run in both stores."""
    checks = (("metadata", lambda s: _kept_meta(s.meta(run_id))), ("rejects", lambda s: s.rejects(run_id)),
              ("conflicts", lambda s: s.conflicts(run_id)))
    for what, read in checks:
        was, now = read(old), read(new)
        if was != now:
            keys = sorted(k for k in set(was) | set(now) if was.get(k) != now.get(k)) if what == "metadata" else []
            said = f" ({', '.join(keys[:8])})" if keys else ""
            raise StoreError(f"migration check failed: run {run_id!r}: its {what} differ{said}", run_id=run_id,
                             path=new.root.uri)
    diff = _first_difference(old.load_table(run_id), new.load_table(run_id))
    if diff is not None:
        raise StoreError(f"migration check failed: run {run_id!r}: {diff}", run_id=run_id, path=new.root.uri)


def _copy_run(old: RunStore, new: DeltaRunStore, run_id: str) -> None:
    tables = [pq.read_table(p).replace_schema_metadata(None) for p in old.parts(run_id)]
    with new.spool() as spool:
        import_rows(new, run_id, old.meta(run_id), tables, old.rejects(run_id), old.conflicts(run_id), spool)


def _copy_layouts(old: RunStore, new: DeltaRunStore) -> list[str]:
    names = folder_layouts.list_layouts(old)
    for name in names:
        delta_layouts.save(new, name, folder_layouts.load(old, name))
    for name in names:
        if delta_layouts.load(new, name) != folder_layouts.load(old, name):
            raise StoreError(f"migration check failed: layout {name!r} differs", path=new.root.uri)
    return names


def migrate(old_root: str | os.PathLike, new: str | os.PathLike | DeltaRunStore, *, storage_options=None,
            progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
    """Copy the folder store at ``old_root`` into the Delta store ``new`` (a path, a URI or a store) and
    verify it; returns ``{"runs", "rows", "copied", "verified", "layouts"}``.

    Raises
    ------
    StoreError
        ``old_root`` is not a folder store, or a run or layout differs after the copy (naming it).
    """
    if not os.path.isdir(old_root):
        raise StoreError(f"{os.fspath(old_root)!r} is not a store folder", path=os.fspath(old_root))
    old = RunStore(old_root)
    target = new if isinstance(new, DeltaRunStore) else DeltaRunStore(new, storage_options=storage_options)
    runs = old.list_runs()
    there = {r["run_id"] for r in target.list_runs()}
    copied, rows = [], 0
    for i, r in enumerate(runs):
        if r["run_id"] not in there:
            _copy_run(old, target, r["run_id"])
            copied.append(r["run_id"])
        verify_run(old, target, r["run_id"])
        rows += int(r["rows"] or 0)
        if progress is not None:
            progress(r["run_id"], i + 1, len(runs))
    return {"runs": len(runs), "rows": rows, "copied": copied, "verified": [r["run_id"] for r in runs],
            "layouts": _copy_layouts(old, target)}
