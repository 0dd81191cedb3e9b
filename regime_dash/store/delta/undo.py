"""Removing a run, bringing it back (time travel), and finishing what a killed writer left.

A removal commits the run's state ``removing`` with the versions of the rows and rejects
tables that hold it, then removes its files from both tables (Delta remove actions: the files
stay on disk until a vacuum past the retention window), then commits ``removed``. A restore
reads those versions back (``DeltaTable(version=...)``), adds the very files again, and
commits ``live``: nothing is rewritten, and the run comes back bit for bit.
"""
from __future__ import annotations

import datetime as _dt
from typing import Any

from deltalake.exceptions import CommitFailedError

from regime_dash.errors import StoreError
from regime_dash.store.delta import catalogue as cat
from regime_dash.store.delta.tables import (
    PARTITION,
    partition_files,
    readd_actions,
    remove_actions,
    retry,
)
from regime_dash.store.metadata import run_entry


__all__ = ["recover", "remove_run", "removed_runs", "restore_run"]

_TABLES = ("rows", "rejects")


def _version(store, name: str) -> int | None:
    dt = store.tables.open(name)
    return None if dt is None else dt.version()


def _drop_files(store, name: str, run_id: str) -> None:
    """Remove partition ``run_id``'s files from table ``name`` (one commit; none when it has none)."""

    def once() -> None:
        dt = store.tables.open(name)
        files = [] if dt is None else partition_files(dt, run_id)
        if files:
            dt.create_write_transaction(remove_actions(files, run_id), "append", dt.schema(),
                                        partition_by=[PARTITION])

    retry(once, f"cannot remove run {run_id!r} from {name}", store.root)


def _set_state(store, run_id: str, expect: tuple[str, ...], state: str, **extra: Any) -> bool:
    """Move the run's document from one of ``expect`` to ``state`` (``None`` extras dropped); returns
    whether it was in one of them."""

    def edit(docs) -> bool:
        d = docs.get(run_id)
        if d is None or d.get("state") not in expect:
            return False
        d["state"] = state
        for k, v in extra.items():
            if v is None:
                d.pop(k, None)
            else:
                d[k] = v
        return True

    return store.catalogue.change(edit, f"cannot change run {run_id!r}")


def remove_run(store, run_id: str) -> None:
    """:meth:`DeltaRunStore.delete`."""
    removed = {"at": cat.now(), "versions": {n: _version(store, n) for n in _TABLES}}
    if not _set_state(store, run_id, cat.LISTED, cat.REMOVING, writer=cat.writer(), removed=removed):
        raise StoreError(f"no run {run_id!r} in {store.root.describe()} (deleted meanwhile?)", run_id=run_id,
                         path=store.root.uri)
    _finish_removal(store, run_id)


def _finish_removal(store, run_id: str) -> None:
    for name in _TABLES:
        _drop_files(store, name, run_id)
    _set_state(store, run_id, (cat.REMOVING,), cat.REMOVED, writer=None)


def _removed_at(d: dict[str, Any]) -> _dt.datetime | None:
    try:
        return _dt.datetime.fromisoformat(str((d.get("removed") or {}).get("at")))
    except ValueError:
        return None


def removed_runs(store) -> list[dict[str, Any]]:
    """:meth:`DeltaRunStore.removed_runs`."""
    now = _dt.datetime.now(_dt.timezone.utc)
    window = _dt.timedelta(hours=store.retention_hours)
    out = []
    for d in store.catalogue.read().values():
        at = _removed_at(d)
        if d.get("state") not in (cat.REMOVED, cat.REMOVING) or at is None or now - at > window:
            continue
        out.append({**run_entry(d["meta"]), "removed_at": at.isoformat(timespec="milliseconds"),
                    "restorable_until": (at + window).isoformat(timespec="milliseconds")})
    out.sort(key=lambda r: r["removed_at"], reverse=True)
    return out


def _pick_removed(store, ref: str) -> str:
    runs = removed_runs(store)
    for key in ("run_id", "name", "aliases"):
        hits = [r["run_id"] for r in runs if (ref in r[key] if key == "aliases" else r[key] == ref)]
        if hits:
            return hits[0]  # the newest removal of that name
    known = ", ".join(f"{r['name']} ({r['run_id']})" for r in runs[:10]) or "none"
    raise StoreError(f"no removed run named {ref!r} within the last {store.retention_hours:g} h in "
                     f"{store.root.describe()} (removed runs: {known})", run_id=str(ref), path=store.root.uri)


def _old_files(store, name: str, run_id: str, version: int | None) -> list[dict[str, Any]]:
    """The run's files in table ``name`` at ``version`` (time travel), each checked to be still there."""
    if version is None:
        return []
    old = store.tables.open(name, version)
    if old is None:
        return []
    files = partition_files(old, run_id)
    if files:
        import pyarrow.compute as pc

        try:  # reads every file's footer: a file a vacuum took fails here, before anything is committed
            dataset = store.tables.dataset(old)
            for frag in dataset.get_fragments(filter=pc.field(PARTITION) == run_id):
                frag.physical_schema
        except OSError as e:
            raise StoreError(f"run {run_id!r} cannot be restored: its files are gone (vacuumed?): "
                             f"{' '.join(str(e).split())[:200]}", run_id=run_id, path=store.root.uri) from None
    return files


def restore_run(store, ref: str) -> str:
    """:meth:`DeltaRunStore.restore`."""
    run_id = _pick_removed(store, str(ref))
    doc = store.catalogue.read()[run_id]
    meta = doc["meta"]
    holder = store.holder_of(run_id) or store.holder_of(meta.get("name") or run_id)
    if holder is not None:
        raise StoreError(f"cannot restore {run_id}: run {holder} has its id or name now (rename or remove it first)",
                         run_id=run_id, path=store.root.uri)
    versions = (doc.get("removed") or {}).get("versions") or {}
    found = {n: _old_files(store, n, run_id, versions.get(n)) for n in _TABLES}
    if not _set_state(store, run_id, (cat.REMOVED,), cat.RESTORING, writer=cat.writer()):
        raise StoreError(f"run {run_id!r} is being restored or removed by another writer", run_id=run_id,
                         path=store.root.uri)
    for name, files in found.items():
        _readd(store, name, run_id, files)
    _set_state(store, run_id, (cat.RESTORING,), cat.LIVE, writer=None, removed=None)
    return run_id


def _readd(store, name: str, run_id: str, files: list[dict[str, Any]]) -> None:
    if not files:
        return

    def once() -> None:
        dt = store.tables.open(name)
        have = {f["path"] for f in partition_files(dt, run_id)}
        missing = [f for f in files if f["path"] not in have]  # a retry after a commit that landed adds none twice
        if missing:
            dt.create_write_transaction(readd_actions(missing, run_id), "append", dt.schema(),
                                        partition_by=[PARTITION])

    retry(once, f"cannot restore run {run_id!r} to {name}", store.root)


def recover(store) -> list[str]:
    """:meth:`DeltaRunStore.recover`: each run a gone writer left between two states is moved on."""
    docs = store.catalogue.read()
    stuck = {k: d for k, d in docs.items() if d.get("state") in (cat.PENDING, cat.REMOVING, cat.RESTORING)
             and cat.writer_gone(d.get("writer"))}
    if not stuck:
        return []
    with_rows = store.runs_with_rows()
    for run_id, d in stuck.items():
        try:
            _recover_one(store, run_id, d, run_id in with_rows)
        except CommitFailedError:  # another writer recovers it at the same time
            continue
    return sorted(stuck)


def _recover_one(store, run_id: str, d: dict[str, Any], has_rows: bool) -> None:
    state = d["state"]
    if state == cat.REMOVING:
        _finish_removal(store, run_id)
    elif has_rows:  # pending or restoring, its rows committed: the run is whole
        _set_state(store, run_id, (state,), cat.LIVE, writer=None, removed=None)
    elif state == cat.RESTORING:
        _set_state(store, run_id, (state,), cat.REMOVED, writer=None)
    else:  # a claim whose rows never came: its rejects go, then the claim
        _drop_files(store, "rejects", run_id)

        def edit(docs) -> None:
            if docs.get(run_id, {}).get("state") == cat.PENDING:
                del docs[run_id]

        store.catalogue.change(edit, f"cannot drop the unfinished run {run_id!r}")
