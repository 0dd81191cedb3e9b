"""Keeping a Delta store small: runs of many small files compacted, old files vacuumed, on a schedule.

A follower commits a file every few seconds; :func:`compact_run` merges a run's files into
few (Delta's optimize, one partition: a rewrite committed as one version, so a reader sees the
run whole before and after). :func:`maintain` runs after writes and does, when
``vacuum_every_hours`` have passed since the last time (kept in the ``settings`` table):

- Delta's vacuum of each table with the store's ``retention_hours``: files no version within
  the window reads go (a removed run's files once its window is past; files of writers killed
  before their commit);
- the catalogue forgets runs removed longer ago than the window (they can no longer be restored);
- a local store's ``_staging`` folders of writers that are gone are deleted.
"""
from __future__ import annotations

import datetime as _dt
import os
import shutil
from typing import Any

from deltalake.exceptions import CommitFailedError, DeltaError

from regime_dash.store.delta import catalogue as cat
from regime_dash.store.delta.tables import PARTITION, partition_files


__all__ = ["COMPACT_FILES", "compact_run", "maintain", "vacuum"]

#: A run with this many files is compacted.
COMPACT_FILES = 16
_KEY = "maintenance"


def compact_run(store, run_id: str, min_files: int = COMPACT_FILES) -> bool:
    """Merge the run's files in the rows table when it has ``min_files`` or more; returns whether it
    did. A lost race with another writer skips it (the next call tries again)."""
    dt = store.tables.open("rows")
    if dt is None or len(partition_files(dt, run_id)) < max(min_files, 2):
        return False
    try:
        dt.optimize.compact(partition_filters=[(PARTITION, "=", run_id)])
    except (CommitFailedError, DeltaError):
        return False
    return True


def _due(store, force: bool) -> bool:
    if force:
        return True
    if store.vacuum_every_hours is None:
        return False
    last = store.settings.read().get(_KEY, {}).get("vacuumed_at")
    if last is None:
        return True
    try:
        at = _dt.datetime.fromisoformat(last)
    except ValueError:
        return True
    return (_dt.datetime.now(_dt.timezone.utc) - at).total_seconds() >= store.vacuum_every_hours * 3600


def vacuum(store) -> dict[str, int]:
    """Vacuum every table with the store's retention (files removed or never committed, older than it)."""
    out = {}
    hours = store.retention_hours
    for name in ("rows", "rejects", "runs", "settings"):
        dt = store.tables.open(name)
        if dt is None:
            continue
        full = name in ("rows", "rejects")  # their folders also hold files of writers killed before a commit
        gone = dt.vacuum(retention_hours=int(hours), dry_run=False, enforce_retention_duration=False, full=full)
        out[name] = len(gone)
    return out


def _forget_expired(store) -> list[str]:
    window = _dt.timedelta(hours=store.retention_hours)
    now = _dt.datetime.now(_dt.timezone.utc)

    def edit(docs) -> list[str]:
        old = []
        for k, d in list(docs.items()):
            at = (d.get("removed") or {}).get("at")
            if d.get("state") == cat.REMOVED and at and now - _dt.datetime.fromisoformat(at) > window:
                old.append(k)
                del docs[k]
        return old

    return store.catalogue.change(edit, "cannot forget expired removals")


def _clean_staging(store) -> list[str]:
    """A local store's spool folders (``ingest-<host>~<pid>~<uuid>``) of writers that are gone: this
    host's whose process ended, another host's untouched for a day."""
    import socket
    import time

    from regime_dash.store.run_store import sanitize_name

    if not store.root.is_local:
        return []
    base = os.path.join(str(store.root.path), "_staging")
    here = sanitize_name(socket.gethostname())
    gone = []
    for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        host, _, rest = name.partition("-")[2].partition("~")
        pid = rest.split("~", 1)[0]
        path = os.path.join(base, name)
        if host == here and pid.isdigit():
            dead = cat.writer_gone({"host": socket.gethostname(), "pid": int(pid)})
        else:
            dead = time.time() - os.path.getmtime(path) >= cat.STALE_SECONDS
        if dead:
            shutil.rmtree(path, ignore_errors=True)
            gone.append(name)
    return gone


def maintain(store, *, force: bool = False) -> dict[str, Any]:
    """:meth:`DeltaRunStore.maintain`."""
    if store.tables.open("runs") is None or not _due(store, force):
        return {}
    done: dict[str, Any] = {"vacuumed": vacuum(store), "forgotten": _forget_expired(store),
                            "staging": _clean_staging(store)}

    def edit(docs) -> None:
        docs[_KEY] = {"vacuumed_at": cat.now(), "by": cat.writer(), "done": done}

    store.settings.change(edit, "cannot record the maintenance")
    return done
