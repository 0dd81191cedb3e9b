"""Runs that grow in a Delta store: a followed file's commits as Delta appends.

:class:`DeltaFollowedRun` has :class:`regime_dash.store.append.FollowedRun`'s interface
(``open``, ``exists``, ``state``, ``types``, ``read_meta``, ``commit``, ``finish``). Each commit:

1. its rejected lines and set-aside values are appended to the rejects table;
2. its rows are appended to the rows table in one commit, which also records the follow
   state as of itself (the commit's metadata) and the commit's number (a Delta transaction
   id ``follow:<run id>``, in the same commit): that append is the commit;
3. the run's metadata (the catalogue document) gets the state and the caller's extras (the
   incremental verdict, alerts).

A commit without rows has no step 2; step 3 is its commit. The run's first commit with rows
claims the run (pending) first and marks it live after, as an ingest does. A follower
killed anywhere resumes (:meth:`DeltaFollowedRun.open`) from the later of the metadata's
state and the last rows commit's (found by its transaction number); rejects past that state
are deleted, and the lines after its offset read again: no row twice, none lost.

Every :data:`~.maintenance.COMPACT_FILES` commits the run's files are compacted (Delta's
optimize on its partition). A followed run has no content hash (``sha256`` null).
"""
from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict
from typing import Any, Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from regime_dash.errors import StoreError
from regime_dash.ingest import LINE_COLUMN, Aside, Reject
from regime_dash.store.append import FOLLOW_KEY, FollowState, follow_identity, follow_run_id, merge_held
from regime_dash.store.claims import ClaimedRun, Holder, refusal
from regime_dash.store.delta import catalogue as cat
from regime_dash.store.delta.maintenance import COMPACT_FILES, compact_run
from regime_dash.store.delta.parts import settle, write_table
from regime_dash.store.delta.records import reject_record
from regime_dash.store.delta.tables import PARTITION, retry
from regime_dash.store.paths import sanitize_name


__all__ = ["DeltaFollowedRun", "follow_status", "rows_after"]

#: The rows commit's metadata key holding the follow state as of that commit.
STATE_KEY = "regime_dash.follow"
#: Commits of the rows table searched back for a resumed run's last state.
_HISTORY = 2000


def _app_id(run_id: str) -> str:
    return f"follow:{run_id}"


class DeltaClaim:
    """A followed run's name claimed in a Delta store: a ``claim:<name>`` document of its ``settings``
    table, taken and released by compare-and-swap (:mod:`regime_dash.store.claims` says why). A holder
    whose process is gone (this host), or silent for a day (another host), is taken over."""

    _PREFIX = "claim:"

    def __init__(self, store, key: str, holder: Holder, took_over: Holder | None):
        self.store, self.key, self.holder, self.took_over = store, key, holder, took_over
        self.active = True

    @classmethod
    def take(cls, store, name: str, run_id: str, source: str) -> "DeltaClaim":
        """Claim ``name`` for the follow of ``source``; raises :class:`StoreError` naming a live holder."""
        me = Holder(name, run_id, os.fspath(source), os.getpid(), socket.gethostname(), cat.now())
        key = cls._PREFIX + name

        def claim(docs) -> Holder | None:
            d = docs.get(key)
            other = Holder(**{k: d[k] for k in Holder.__dataclass_fields__}) if d else None
            if other is not None and not cat.writer_gone({"host": other.host, "pid": other.pid,
                                                          "at": d.get("at", other.started)}):
                raise StoreError(refusal(name, run_id, other), run_id=other.run_id, path=store.root.uri)
            docs[key] = {**asdict(me), "at": me.started}
            return other

        return cls(store, key, me, store.settings.change(claim, f"cannot claim run name {name!r}"))

    def release(self) -> None:
        """Remove the claim when it is still this one's. Idempotent."""
        if not self.active:
            return
        mine = asdict(self.holder)

        def drop(docs) -> None:
            d = docs.get(self.key)
            if d is not None and all(d.get(k) == v for k, v in mine.items()):
                del docs[self.key]

        self.store.settings.change(drop, f"cannot release the claim on run name {self.holder.name!r}")
        self.active = False


class DeltaFollowedRun(ClaimedRun):
    """One followed run of a Delta store: :meth:`open` (created or resumed), grown by :meth:`commit`."""

    def __init__(self, store, run_id: str, name: str, state: FollowState,
                 types: dict[str, pa.DataType]):
        self.store, self.run_id, self.name = store, run_id, name
        self.state, self.types = state, types
        self._exists = False
        self._held: tuple[list, list] = ([], [])
        self.claim: DeltaClaim | None = None  # the run name's claim, taken by open

    @property
    def exists(self) -> bool:
        return self._exists

    @classmethod
    def open(cls, store, source: str | os.PathLike, name: str) -> "DeltaFollowedRun":
        """The followed run of ``source`` under ``name``: resumed when it is in the store, else new.

        Raises
        ------
        StoreError
            Another run has that name, or the id names a run that was ingested whole.
        """
        store.recover()
        claim = DeltaClaim.take(store, sanitize_name(name), follow_run_id(name, source), os.path.abspath(source))
        try:
            source, name, run_id = follow_identity(store.list_runs(), source, name, store.root.uri)
            run = cls(store, run_id, name, FollowState(source), {})
            run.claim = claim
            if any(r["run_id"] == run_id for r in store.list_runs()):
                run._resume()
        except BaseException:
            claim.release()
            raise
        return run

    def _resume(self) -> None:
        meta = self.store.meta(self.run_id)
        if FOLLOW_KEY not in meta:
            raise StoreError(f"run {self.run_id!r} was ingested whole, not followed: it cannot grow", run_id=self.run_id)
        state = FollowState.from_dict(meta[FOLLOW_KEY])
        rows = self.store.tables.open("rows")
        seq = rows.transaction_version(_app_id(self.run_id)) if rows is not None else None
        if seq is not None and seq > state.parts:  # killed between the rows commit and the metadata
            state = self._state_of_commit(rows, seq) or state
        self._trim_rejects(state.lines)
        have = {f.name: f.type for f in pa.schema(rows.schema().to_arrow())} if rows is not None else {}
        self.types = {k: have[k] for k in meta.get("columns", {}) if k in have}
        self.state, self._exists = state, True
        self._write_meta(state, {})

    def _state_of_commit(self, rows, seq: int) -> FollowState | None:
        for entry in rows.history(_HISTORY):
            text = entry.get(STATE_KEY)
            if text:
                got = json.loads(text)
                if got.get("run_id") == self.run_id and got.get("seq") == seq:
                    return FollowState.from_dict(got["state"])
        return None

    def _trim_rejects(self, lines: int) -> None:
        """Drop rejects past ``lines`` (written by a commit that never happened)."""
        dt = self.store.tables.open("rejects")
        if dt is None:
            return

        def once() -> None:
            fresh = self.store.tables.open("rejects")
            fresh.delete(f"{PARTITION} = '{self.run_id}' AND line > {int(lines)}")

        retry(once, f"cannot trim the rejects of run {self.run_id!r}", self.store.root)

    def _meta(self, old: dict[str, Any] | None, active: bool) -> dict[str, Any]:
        s = self.state
        meta = dict(old or {})
        meta.update({  # the labels belong to the store: a rename made meanwhile stays
            "format_version": 1, "run_id": self.run_id, "name": meta.get("name") or self.name,
            "source": os.path.basename(s.source), "sha256": None, "gzip": False,
            "lines": s.lines, "rows": s.rows, "blank_lines": s.blank_lines,
            "rejected_count": s.rejected_count, "aside_count": s.aside_count,
            "columns": dict(s.columns), "first_step": s.first_step, "last_step": s.last_step,
        })
        meta.setdefault("ingested_at", cat.now())
        follow = asdict(s)
        follow.update(active=active, host=socket.gethostname(), pid=os.getpid(), committed_at=cat.now())
        meta[FOLLOW_KEY] = follow
        return meta

    def read_meta(self) -> dict[str, Any]:
        return self.store.meta(self.run_id)

    def commit(self, table: pa.Table | None, rejects: Sequence[Reject], aside: Sequence[Aside],
               state: FollowState, extra: dict[str, Any] | Callable[[], dict[str, Any]] | None = None) -> None:
        """Make one batch of the follow durable and visible (see the module doc for the order)."""
        has_rows = table is not None and table.num_rows > 0
        batch = merge_held(self._held, rejects, aside, keep=not self._exists and not has_rows)
        if batch is None:
            self.state = state
            return
        rejects, aside = batch
        later = extra if callable(extra) else (lambda: extra or {})
        if not self._exists:
            self._create(table, rejects, aside, state, later())
            return
        self._append(table if has_rows else None, rejects, aside, state)
        self._write_meta(state, later())
        if has_rows and state.parts % COMPACT_FILES == 0:
            compact_run(self.store, self.run_id)

    def _create(self, table, rejects, aside, state: FollowState, extra: dict[str, Any]) -> None:
        if self.state.parts:
            raise StoreError(f"run {self.run_id!r} was removed from the store while it was followed",
                             run_id=self.run_id, path=self.store.root.uri)
        self.state = state
        meta = self._meta(None, active=True)
        meta.update(extra)

        def claim(docs) -> None:
            d = docs.get(self.run_id)
            if d is not None and d.get("state") in cat.LISTED:
                raise StoreError(f"run {self.run_id!r} is followed by another writer", run_id=self.run_id)
            docs[self.run_id] = cat.doc(cat.PENDING, meta, writer=cat.writer())

        self.store.catalogue.change(claim, f"cannot add run {self.run_id!r}")
        self._append(table, rejects, aside, state)
        self.store.catalogue.change(lambda docs: docs.update({self.run_id: cat.doc(cat.LIVE, meta)}),
                                    f"cannot mark run {self.run_id!r} stored")
        self._exists = True

    def _append(self, table, rejects, aside, state: FollowState) -> None:
        """Steps 1 and 2: the rejects appended, then the rows in one commit that records the state."""
        with self.store.spool() as spool:
            self.store.commit_rejects(self.run_id, [
                *self.store.rejects_parts(spool, "reject", [reject_record(r.line, r.reason, r.raw) for r in rejects]),
                *self.store.rejects_parts(spool, "aside", [a.to_dict() for a in aside])])
            if table is None:
                return
            state.parts = self.state.parts + 1
            parts, _aside, _c = settle(write_table(os.path.join(spool, "rows"), table), {})
            record = {"run_id": self.run_id, "seq": state.parts, "state": asdict(state)}
            self.store.commit_rows(self.run_id, parts, txn=(_app_id(self.run_id), state.parts),
                                   metadata={STATE_KEY: json.dumps(record, allow_nan=False, default=str)})
        for f in table.schema:
            if f.name != LINE_COLUMN and not pa.types.is_null(f.type):
                self.types.setdefault(f.name, f.type)

    def _write_meta(self, state: FollowState, extra: dict[str, Any], active: bool = True) -> None:
        """Step 3: the metadata replaced with the state (and ``extra``)."""
        self.state = state

        def edit(docs) -> None:
            d = docs.get(self.run_id)
            if d is None or d.get("state") not in cat.LISTED:
                raise StoreError(f"run {self.run_id!r} was removed from the store while it was followed",
                                 run_id=self.run_id, path=self.store.root.uri)
            meta = self._meta(d["meta"], active=active)
            meta.update(extra)
            d["meta"], d["name"] = meta, meta.get("name")

        self.store.catalogue.change(edit, f"cannot commit to run {self.run_id!r}")

    def finish(self, extra: dict[str, Any] | None = None) -> None:
        """Mark the follow ended (the run stays; a later follow of the same file resumes it); its files
        are compacted."""
        if not self._exists:
            return
        self._write_meta(self.state, extra or {}, active=False)
        compact_run(self.store, self.run_id, min_files=1)


def rows_after(store, run_id: str, line: int) -> tuple[pa.Table | None, int]:
    """The run's rows past file line ``line`` and the last line they reach (``(None, line)`` when nothing
    is new): only the files whose ``_line`` range reaches past it are read (Delta's file statistics)."""
    from regime_dash.store.delta.reading import read_run

    meta = store.meta(run_id)
    table = read_run(store, run_id, meta, None, False, row_filter=pc.field(LINE_COLUMN) > int(line))
    if not table.num_rows:
        return None, line
    return table, int(pc.max(table.column(LINE_COLUMN)).as_py())


def follow_status(store) -> dict[str, dict[str, Any]]:
    """``{run_id: {"live", "last_step", "last_line_at", "alerts", "alert_details", "version"}}`` of every
    followed run, as :func:`regime_dash.store.append.follow_status` gives it."""
    out: dict[str, dict[str, Any]] = {}
    for run_id, d in store.visible_docs().items():
        meta = d["meta"]
        f = meta.get(FOLLOW_KEY)
        if not f:
            continue
        w = {"host": f.get("host"), "pid": f.get("pid"), "at": f.get("committed_at")}
        live = bool(f.get("active")) and (w["host"] != socket.gethostname() or not w["pid"]
                                          or not cat.writer_gone(w))
        out[run_id] = {
            "live": live, "last_step": meta.get("last_step"), "last_line_at": f.get("last_line_at"),
            "alerts": sorted(meta.get("alerts", {}).get("open", {})),
            "alert_details": list(meta.get("alerts", {}).get("open", {}).values()),
            "version": f"{f.get('parts')}:{f.get('lines')}:{f.get('committed_at')}"}
    return out
