"""The runs catalogue's documents: a run's states, who is writing it, what readers see.

A run's document is ``{"state", "name", "meta", "writer", "removed"}``: ``meta`` is what the
folder store keeps in ``_meta.json`` (source, sha256, counts, columns, steps, aliases, tags,
notes, the verdict cache, a follow's state), ``writer`` the process at work on it
(``host``, ``pid``, ``at``), ``removed`` when and at which versions of the rows and rejects
tables it was removed (its files are read again from there by a restore).

States, and how a run moves between them (each arrow one catalogue commit; a file commit of
the rows table between two of them is what makes the change real):

- ``pending`` → rows committed → ``live``: an ingest or a follow's first commit claims the
  run (the duplicate check and the id are settled there), commits its rejects and rows, then
  marks it live. A pending run whose rows are in the rows table is whole: it is listed, and
  the next writer marks it live. One without rows whose writer is gone is dropped.
- ``live`` → ``removing`` → files removed → ``removed``: a removal. A removing run is not
  listed; the next writer finishes its removal.
- ``removed`` → ``restoring`` → files added back → ``live``: a restore (time travel: the files
  listed at the version before the removal). A restoring run whose rows are back is live.

These functions read and edit the documents only (no I/O): :mod:`.store` commits them.
"""
from __future__ import annotations

import datetime as _dt
import os
import socket
from typing import Any, Iterable

from regime_dash.store.paths import pid_alive

__all__ = ["LISTED", "LIVE", "PENDING", "REMOVED", "REMOVING", "RESTORING", "STALE_SECONDS", "doc",
           "needs_rows_check", "now", "visible", "writer", "writer_gone"]

PENDING, LIVE, REMOVING, REMOVED, RESTORING = "pending", "live", "removing", "removed", "restoring"
#: States whose run is listed when its rows are in the rows table.
LISTED = (PENDING, LIVE, RESTORING)
#: A writer of another host is taken for gone when it has said nothing for this long.
STALE_SECONDS = 24 * 3600


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


def writer() -> dict[str, Any]:
    """This process, as a run's writer."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "at": now()}


def writer_gone(w: dict[str, Any] | None) -> bool:
    """Whether the writer ``w`` stopped: its process is gone (this host), or it has been silent for a day."""
    if not w:
        return True
    if w.get("host") == socket.gethostname() and isinstance(w.get("pid"), int):
        return w["pid"] != os.getpid() and not pid_alive(w["pid"])
    try:
        at = _dt.datetime.fromisoformat(str(w.get("at")))
    except ValueError:
        return True
    return (_dt.datetime.now(_dt.timezone.utc) - at).total_seconds() >= STALE_SECONDS


def doc(state: str, meta: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A run's document."""
    return {"state": state, "name": meta.get("name"), "meta": meta, **extra}


def visible(docs: dict[str, dict[str, Any]], with_rows: Iterable[str] | None) -> list[dict[str, Any]]:
    """The documents of the runs a reader sees: live ones, and pending or restoring ones whose rows
    are in the rows table (``with_rows``: the run ids it holds; ``None`` when none are needed)."""
    have = set(with_rows or ())
    return [d for k, d in docs.items()
            if d.get("state") == LIVE or (d.get("state") in (PENDING, RESTORING) and k in have)]


def needs_rows_check(docs: dict[str, dict[str, Any]]) -> bool:
    return any(d.get("state") in (PENDING, RESTORING) for d in docs.values())
