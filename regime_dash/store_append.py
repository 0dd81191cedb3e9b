"""Runs that grow: a followed file's lines committed to the store as they come.

A followed run is an ordinary run directory of :mod:`regime_dash.store` whose
``_meta.json`` has a ``follow`` object (the source, its inode, the byte offset
read up to, the run's line count, its segments). Each commit adds one part file
and rewrites the metadata, under the store's lock:

1. the commit's rejected lines and set-aside values are appended to
   ``_rejects.jsonl`` and ``_conflicts.jsonl``;
2. its rows are written as ``part-NNNNNNNN.parquet.tmp`` in the run directory
   (no reader's ``*.parquet`` glob matches it) and renamed to ``.parquet``: that
   rename is the commit. The part carries the follow state as of itself in its
   Parquet key-value metadata;
3. ``_meta.json`` is replaced atomically (written beside, then renamed).

A commit without good rows (only blank or rejected lines) has no part; step 3 is
its commit. So DuckDB, pyarrow and the app always read whole parts, a prefix of
the file. A follower killed anywhere resumes from the later of the metadata's
state and the last part's (:meth:`FollowedRun.open`); rejects past that state
(written by the commit that never happened) are dropped, leftover ``.tmp`` parts
removed, and the lines after the offset are read again: no row twice, none lost.

A followed run has no content hash (its content is still growing): its
``sha256`` is ``null``, so a later ``ingest`` of the finished file stores it as a
run of its own.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from regime_dash.errors import StoreError
from regime_dash.ingest import LINE_COLUMN, Aside, Reject
from regime_dash.store import (
    _CONFLICTS,
    _FORMAT_VERSION,
    _META,
    _PART_TMP,
    _REJECTS,
    RunStore,
    _fsync_dir,
    _now,
    _open_writer,
    _reject_record,
    sanitize_name,
)

__all__ = ["FOLLOW_KEY", "FollowState", "FollowedRun", "follow_run_id", "follow_status"]

#: The ``_meta.json`` key of a followed run's state.
FOLLOW_KEY = "follow"
#: The Parquet key-value metadata key a followed run's part keeps its state under.
PART_KEY = b"regime_dash.follow"
_PART_DIGITS = 8  # ~1 part per commit: 2 s commits for years before the names stop sorting


@dataclass
class FollowState:
    """Where a follow stands: what is committed, counted over the whole run.

    ``offset`` is a line start of the file with ``inode``; ``lines`` counts every
    line of the run so far (line numbers continue across segments); ``segments``
    lists where each segment starts (``first_line``) and why (``start``,
    ``truncated``, ``replaced``).
    """

    source: str
    inode: int | None = None
    offset: int = 0
    lines: int = 0
    rows: int = 0
    blank_lines: int = 0
    rejected_count: int = 0
    aside_count: int = 0
    first_step: int | float | None = None
    last_step: int | float | None = None
    parts: int = 0
    columns: dict[str, str] = field(default_factory=dict)
    segments: list[dict[str, Any]] = field(default_factory=list)
    last_line_at: str | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), allow_nan=False, default=str)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "FollowState":
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)


def follow_run_id(name: str, source: str | os.PathLike) -> str:
    """The run id of ``source`` followed under ``name``: the same on every restart."""
    path = os.path.abspath(os.fspath(source))
    return f"{sanitize_name(name)}-{hashlib.sha256(path.encode()).hexdigest()[:12]}"


def _write_meta(path: Path, meta: dict[str, Any]) -> None:
    """``_meta.json`` replaced in one rename, so a reader never sees half of it."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(meta, fh, indent=1, allow_nan=False, default=str)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _append_lines(path: Path, records: Sequence[dict[str, Any]]) -> None:
    if not records:
        return
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
        fh.flush()
        os.fsync(fh.fileno())


def _keep_lines_upto(path: Path, lines: int) -> None:
    """Drop the records of ``path`` whose ``line`` is past ``lines`` (a commit that did not happen)."""
    if not path.exists():
        return
    with open(path, encoding="utf-8") as fh:
        kept = [ln for ln in fh if ln.strip() and json.loads(ln).get("line", 0) <= lines]
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write("".join(kept))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class FollowedRun:
    """One followed run of a store: open (created or resumed) with :meth:`open`, grown with :meth:`commit`."""

    def __init__(self, store: RunStore, run_id: str, name: str, state: FollowState,
                 types: dict[str, pa.DataType]):
        self.store, self.run_id, self.name = store, run_id, name
        self.state = state
        self.types = types  # the run's column types: later commits are read as these
        self.dir = store._run_dir(run_id)
        self._held: tuple[list, list] = ([], [])  # rejects and asides before the run exists

    @property
    def exists(self) -> bool:
        return (self.dir / _META).is_file()

    @classmethod
    def open(cls, store: RunStore, source: str | os.PathLike, name: str) -> "FollowedRun":
        """The followed run of ``source`` under ``name``: resumed when it is in the store, else new
        (created at its first commit with a row).

        Raises
        ------
        StoreError
            Another run has that name, or the id names a run that is not followed.
        """
        source = os.path.abspath(os.fspath(source))
        name = sanitize_name(name)
        run_id = follow_run_id(name, source)
        taken = [r["run_id"] for r in store.list_runs() if r["name"] == name and r["run_id"] != run_id]
        if taken:
            raise StoreError(f"run name {name!r} is taken by run {taken[0]!r}: follow under another --name "
                             f"(or remove that run with `rm {taken[0]}`)", run_id=taken[0], path=str(store.root))
        run = cls(store, run_id, name, FollowState(source), {})
        if run.exists:
            with store._locked():
                run._resume()
        return run

    def _resume(self) -> None:
        """Reconcile the run after a stop (clean or killed): see the module doc."""
        meta = json.loads((self.dir / _META).read_text(encoding="utf-8"))
        if FOLLOW_KEY not in meta:
            raise StoreError(f"run {self.run_id!r} was ingested whole, not followed: it cannot grow",
                             run_id=self.run_id)
        for tmp in self.dir.glob(f"part-*.parquet{_PART_TMP}"):
            tmp.unlink()
        state = FollowState.from_dict(meta[FOLLOW_KEY])
        parts = sorted(self.dir.glob("part-*.parquet"))
        if parts:
            kv = pq.read_schema(parts[-1]).metadata or {}
            if PART_KEY in kv:
                last = FollowState.from_dict(json.loads(kv[PART_KEY]))
                if last.lines > state.lines:  # killed between the part's rename and the metadata
                    state = last
        state.parts = len(parts)
        for f in (_REJECTS, _CONFLICTS):
            _keep_lines_upto(self.dir / f, state.lines)
        for part in parts:
            for fld in pq.read_schema(part):
                if fld.name != LINE_COLUMN and not pa.types.is_null(fld.type):
                    self.types.setdefault(fld.name, fld.type)
        self.state = state
        _write_meta(self.dir / _META, self._meta(meta, active=True))

    def _meta(self, old: dict[str, Any] | None, active: bool) -> dict[str, Any]:
        s = self.state
        meta = dict(old or {})
        meta.update({
            "format_version": _FORMAT_VERSION, "run_id": self.run_id, "name": self.name,
            "source": os.path.basename(s.source), "sha256": None, "gzip": False,
            "lines": s.lines, "rows": s.rows, "blank_lines": s.blank_lines,
            "rejected_count": s.rejected_count, "aside_count": s.aside_count,
            "columns": dict(s.columns), "first_step": s.first_step, "last_step": s.last_step,
        })
        meta.setdefault("ingested_at", _now())
        follow = asdict(s)
        follow.update(active=active, host=socket.gethostname(), pid=os.getpid(), committed_at=_now())
        meta[FOLLOW_KEY] = follow
        return meta

    def read_meta(self) -> dict[str, Any]:
        return json.loads((self.dir / _META).read_text(encoding="utf-8"))

    def commit(self, table: pa.Table | None, rejects: Sequence[Reject], aside: Sequence[Aside],
               state: FollowState, extra: dict[str, Any] | None = None) -> None:
        """Make one batch of the follow durable and visible (see the module doc for the order).

        ``state`` is the follow state once this batch is in (counts included);
        ``extra`` keys are merged into ``_meta.json`` (the incremental verdict, alerts).

        Raises
        ------
        StoreError
            The run was deleted while it was followed, or the store cannot be written.
        """
        has_rows = table is not None and table.num_rows > 0
        if not self.exists and not has_rows:
            self.state = state  # nothing to show yet: the run is created with its first row
            self._held[0].extend(rejects)
            self._held[1].extend(aside)
            return
        if self._held[0] or self._held[1]:
            rejects, aside = [*self._held[0], *rejects], [*self._held[1], *aside]
            self._held = ([], [])
        try:
            with self.store._locked():
                self._commit_locked(table if has_rows else None, rejects, aside, state, extra)
        except OSError as e:
            raise StoreError(f"cannot commit to run {self.run_id!r} in {str(self.store.root)!r}: "
                             f"{e.strerror or e}", run_id=self.run_id, path=str(self.store.root)) from None

    def _commit_locked(self, table, rejects, aside, state: FollowState, extra) -> None:
        fresh = not self.exists
        if fresh and self.state.parts:
            raise StoreError(f"run {self.run_id!r} was removed from the store while it was followed",
                             run_id=self.run_id, path=str(self.store.root))
        target = self.dir
        if fresh:
            target = self.store.staging_dir() / f"ingest-{sanitize_name(socket.gethostname())}~{os.getpid()}~{self.run_id}"
            target.mkdir(exist_ok=True)
        _append_lines(target / _REJECTS, [_reject_record(r) for r in rejects])
        _append_lines(target / _CONFLICTS, [a.to_dict() for a in aside])
        if table is not None:
            state.parts = self.state.parts + 1
            name = f"part-{state.parts - 1:0{_PART_DIGITS}d}.parquet"
            tmp = target / (name + _PART_TMP)
            table = table.replace_schema_metadata({**(table.schema.metadata or {}), PART_KEY: state.to_json()})
            w = _open_writer(tmp, table.schema)
            try:
                w.write_table(table)
            finally:
                w.close()
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, target / name)
            for f in table.schema:
                if f.name != LINE_COLUMN and not pa.types.is_null(f.type):
                    self.types.setdefault(f.name, f.type)
        old = None if fresh else self.read_meta()
        self.state = state
        meta = self._meta(old, active=True)
        meta.update(extra or {})
        _write_meta(target / _META, meta)
        if fresh:
            os.replace(target, self.dir)
            _fsync_dir(self.store.root)

    def finish(self, extra: dict[str, Any] | None = None) -> None:
        """Mark the follow ended (the run stays, and a later follow of the same file resumes it)."""
        if not self.exists:
            return
        with self.store._locked():
            meta = self._meta(self.read_meta(), active=False)
            meta.update(extra or {})
            _write_meta(self.dir / _META, meta)


def follow_status(store: RunStore) -> dict[str, dict[str, Any]]:
    """``{run_id: {"live", "last_step", "last_line_at", "alerts", "version"}}`` of every followed run.

    ``live``: a follower is writing it (its metadata says so and, on this host, its process
    runs); ``alerts``: the checks failing since they were alerted; ``version`` changes with
    every commit (a cache key for the run's rows).
    """
    from regime_dash.store import _pid_alive

    out: dict[str, dict[str, Any]] = {}
    host = socket.gethostname()
    for d in store._run_dirs():
        try:
            meta = json.loads((d / _META).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        f = meta.get(FOLLOW_KEY)
        if not f:
            continue
        live = bool(f.get("active")) and (f.get("host") != host or not f.get("pid") or _pid_alive(int(f["pid"])))
        out[meta.get("run_id") or d.name.split("=", 1)[1]] = {
            "live": live, "last_step": meta.get("last_step"), "last_line_at": f.get("last_line_at"),
            "alerts": sorted(meta.get("alerts", {}).get("open", {})),
            "alert_details": list(meta.get("alerts", {}).get("open", {}).values()),
            "version": f"{f.get('parts')}:{f.get('lines')}:{f.get('committed_at')}"}
    return out
