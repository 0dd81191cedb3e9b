"""Runs that grow: a followed file's lines committed to the store as they come.

A followed run is an ordinary run directory of :mod:`regime_dash.store.run_store` whose
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

Step 3 may come after work the batch waits for (the follower judges it once its
rows are visible), so the metadata's counts can trail the parts for a moment; a
reader that counts rows takes them from the parts.

A commit without good rows (only blank or rejected lines) has no part; step 3 is
its commit. So DuckDB, pyarrow and the app always read whole parts, a prefix of
the file. A follower killed anywhere resumes from the later of the metadata's
state and the last part's (:meth:`FollowedRun.open`); rejects past that state
(written by the commit that never happened) are dropped, leftover ``.tmp`` parts
removed, and the lines after the offset are read again: no row twice, none lost.

Compaction keeps the part count small (a part per commit would make 900 parts of a
half-hour follow at 2 s commits): after a commit, :func:`compact_parts` merges the
last :data:`COMPACT_FANOUT` parts when they are of one level (level 0 a commit's,
L + 1 a merge of level-L parts) and hold at most :data:`COMPACT_MAX_ROWS` rows, under
the lock, as often as that holds. The merged part is written complete under an
invisible name (``.merge``), then the parts it covers go from the last to the
second, then it replaces the first in one rename: a reader listing meanwhile sees a
shorter prefix of the rows, never a gap or a row twice (and :meth:`RunStore.load_table`
lists again when a part goes under it). A kill after the merged part is complete is
finished by the next :meth:`FollowedRun.open` (:func:`finish_compaction`); before it,
the parts are untouched. Readers that keep what they read ask for the rows past a line
(:func:`rows_after`), which reads only the parts holding them.

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
from typing import Any, Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from regime_dash.errors import StoreError
from regime_dash.ingest import LINE_COLUMN, Aside, Reject
from regime_dash.store import claims, common_schema, paths
from regime_dash.store.metadata import FORMAT_VERSION, fsync_dir, now, replace_json
from regime_dash.store.parts import write_part, write_tables
from regime_dash.store.paths import (
    CONFLICTS,
    INGEST_PREFIX,
    META,
    PART_TMP,
    REJECTS,
    pid_alive,
    run_id_of,
    sanitize_name,
    work_dir_name,
)
from regime_dash.store.writer import reject_record

__all__ = ["FOLLOW_KEY", "FollowState", "FollowedRun", "compact_parts", "finish_compaction",
           "follow_identity", "follow_run_id", "follow_status", "merge_held", "rows_after"]

#: The ``_meta.json`` key of a followed run's state.
FOLLOW_KEY = "follow"
#: The Parquet key-value metadata key a followed run's part keeps its state under.
PART_KEY = b"regime_dash.follow.follower"
_PART_DIGITS = 8  # ~1 part per commit: 2 s commits for years before the names stop sorting
#: The key of a part's compaction level: 0 for a commit's part, L + 1 for a merge of level-L parts.
LEVEL_KEY = b"regime_dash.level"
#: The key of a merged part's span: the names of the first and last parts it replaces.
COVERS_KEY = b"regime_dash.covers"
#: Parts of one level merged at once, and the most rows a merged part holds (a merge's cost, under the lock).
COMPACT_FANOUT = 16
COMPACT_MAX_ROWS = 262_144
_MERGE = ".merge"  # a merged part, complete, not yet in place (no reader's *.parquet glob matches it)


def _part_name(index: int) -> str:
    return f"part-{index:0{_PART_DIGITS}d}.parquet"


def _tier(path: Path) -> tuple[str, int, int]:
    """``(name, level, rows)`` of a part, from its footer."""
    md = pq.read_metadata(path)
    kv = md.metadata or {}
    return path.name, int(kv.get(LEVEL_KEY, b"0")), md.num_rows


def finish_compaction(run_dir: Path) -> None:
    """Complete a merge a kill interrupted (call under the store's lock): a complete merged part
    (``.merge``) replaces the parts it covers; an incomplete one (``.merge.tmp``) is dropped, its
    parts untouched. Idempotent."""
    for tmp in run_dir.glob(f"part-*.parquet{_MERGE}{PART_TMP}"):
        tmp.unlink()
    for merged in sorted(run_dir.glob(f"part-*.parquet{_MERGE}")):
        first, last = json.loads(pq.read_schema(merged).metadata[COVERS_KEY])
        _swap_in(run_dir, merged, first, last)


def _swap_in(run_dir: Path, merged: Path, first: str, last: str) -> None:
    """The merged part of parts ``first..last`` put in their place. The covered parts go from the last
    to the second (so a reader listing meanwhile sees a shorter prefix, never a gap or a row twice),
    then the merged part replaces the first in one rename."""
    for part in sorted(run_dir.glob("part-*.parquet"), reverse=True):
        if first < part.name <= last:
            part.unlink()
    os.replace(merged, run_dir / first)
    fsync_dir(run_dir)


def compact_parts(run_dir: Path, tiers: list[tuple[str, int, int]], fanout: int = COMPACT_FANOUT,
                  max_rows: int = COMPACT_MAX_ROWS) -> list[tuple[str, int, int]]:
    """Merge trailing parts of one level while there are ``fanout`` of them holding at most ``max_rows``
    rows in all (call under the store's lock); returns the run's ``(name, level, rows)`` after.

    ``tiers`` lists every part in name order. A merged part keeps the first part's name (names still
    sort in write order), the last part's follow state (a resume reads it) and its level plus one; the
    parts count grows with the log of the commits, not with them. Kill-safe: the merged part is
    complete on disk before a covered part goes, and :func:`finish_compaction` completes the rest.
    """
    from regime_dash.ingest import conform_table, unified_types

    tiers = list(tiers)
    while len(tiers) >= fanout:
        group = tiers[-fanout:]
        level = group[0][1]
        rows = sum(n for *_x, n in group)
        if any(lv != level for _n, lv, _r in group) or rows > max_rows:
            break
        schemas = [pq.read_schema(run_dir / name) for name, *_x in group]
        names, types = unified_types(schemas)  # the columns unify_tables gives the parts
        kv = dict(schemas[-1].metadata or {})
        schema = pa.schema([pa.field(n, types[n]) for n in names], metadata={
            PART_KEY: kv[PART_KEY], LEVEL_KEY: str(level + 1).encode(),
            COVERS_KEY: json.dumps([group[0][0], group[-1][0]]).encode()})
        # read and written a part at a time: a merge of up to max_rows rows holds one part's, not all
        parts = (conform_table(pq.read_table(run_dir / name), names, types) for name, *_x in group)
        path = run_dir / (group[0][0] + _MERGE)
        write_tables(path.with_name(path.name + PART_TMP), schema, parts)
        os.replace(path.with_name(path.name + PART_TMP), path)  # complete: from here a kill is finished
        _swap_in(run_dir, path, group[0][0], group[-1][0])
        tiers[-fanout:] = [(group[0][0], level + 1, rows)]
    return tiers


@dataclass
class FollowState:
    """Where a follow stands: what is committed, counted over the whole run.

    ``offset`` is a line start of the file with ``inode``; ``lines`` counts every
    line of the run so far (line numbers continue across segments); ``segments``
    lists where each segment starts (``first_line``) and why (``start``,
    ``truncated``, ``rewritten``, ``replaced``).
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
    #: What identifies the file at ``offset`` beyond its inode (its size, hashes of its first bytes and of
    #: the bytes before the offset: :meth:`regime_dash.follow.tail.Tail.identity`).
    file: dict[str, Any] | None = None

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


def follow_identity(runs: Sequence[dict[str, Any]], source: str | os.PathLike, name: str,
                    where: str) -> tuple[str, str, str]:
    """The absolute ``source``, the sanitized ``name`` and the run id of following ``source`` under ``name``
    into the store ``where`` holding ``runs`` (its ``list_runs``).

    Raises
    ------
    StoreError
        Another run has the name: naming it, and how to free the name.
    """
    source = os.path.abspath(os.fspath(source))
    name = sanitize_name(name)
    run_id = follow_run_id(name, source)
    taken = [r["run_id"] for r in runs if r["name"] == name and r["run_id"] != run_id]
    if taken:
        raise StoreError(f"run name {name!r} is taken by run {taken[0]!r}: follow under another --name "
                         f"(or remove that run with `rm {taken[0]}`)", run_id=taken[0], path=where)
    return source, name, run_id


def merge_held(held: tuple[list, list], rejects: Sequence[Reject], aside: Sequence[Aside], *,
               keep: bool) -> tuple[list, list] | None:
    """A followed run's rejects and set-aside values to commit now, with those ``held`` back before.

    ``keep`` (the run has no row yet, nor has this batch): they join ``held`` and ``None`` is returned,
    as a run is created with its first row. Else the held ones then these, in line order; ``held`` is
    emptied.
    """
    if keep:
        held[0].extend(rejects)
        held[1].extend(aside)
        return None
    out = [*held[0], *rejects], [*held[1], *aside]
    held[0].clear()
    held[1].clear()
    return out


class FollowedRun(claims.ClaimedRun):
    """One followed run of a store: open (created or resumed) with :meth:`open`, grown with :meth:`commit`."""

    def __init__(self, store, run_id: str, name: str, state: FollowState,
                 types: dict[str, pa.DataType]):
        self.store, self.run_id, self.name = store, run_id, name
        self.state = state
        self.types = types  # the run's column types: later commits are read as these
        self.dir = paths.run_dir(store.root, run_id)
        self._held: tuple[list, list] = ([], [])  # rejects and asides before the run exists
        self._tiers: list[tuple[str, int, int]] = []  # (name, level, rows) of every part, for compaction
        self.claim: claims.Claim | None = None  # the run name's claim, taken by open

    @property
    def exists(self) -> bool:
        return (self.dir / META).is_file()

    @classmethod
    def open(cls, store, source: str | os.PathLike, name: str) -> "FollowedRun":
        """The followed run of ``source`` under ``name``: resumed when it is in the store, else new
        (created at its first commit with a row).

        Raises
        ------
        StoreError
            Another run has that name, or the id names a run that is not followed.
        """
        with store.lock():  # the claim and the name's check are one step: no other follower comes between
            claim = claims.take(store.root, name, follow_run_id(name, source), os.path.abspath(source))
            try:
                source, name, run_id = follow_identity(store.list_runs(), source, name, str(store.root))
                run = cls(store, run_id, name, FollowState(source), {})
                run.claim = claim
                if run.exists:
                    run._resume()
            except BaseException:
                claim.release(holding_lock=True)
                raise
        return run

    def _resume(self) -> None:
        """Reconcile the run after a stop (clean or killed): see the module doc."""
        meta = json.loads((self.dir / META).read_text(encoding="utf-8"))
        if FOLLOW_KEY not in meta:
            raise StoreError(f"run {self.run_id!r} was ingested whole, not followed: it cannot grow",
                             run_id=self.run_id)
        for tmp in self.dir.glob(f"part-*.parquet{PART_TMP}"):
            tmp.unlink()
        finish_compaction(self.dir)
        state = FollowState.from_dict(meta[FOLLOW_KEY])
        parts = sorted(self.dir.glob("part-*.parquet"))
        if parts:
            kv = pq.read_schema(parts[-1]).metadata or {}
            if PART_KEY in kv:
                last = FollowState.from_dict(json.loads(kv[PART_KEY]))
                if last.lines > state.lines:  # killed between the part's rename and the metadata
                    state = last
        # the next part's number: one past the last name (merges leave gaps in the numbers)
        state.parts = int(parts[-1].name[len("part-"):-len(".parquet")]) + 1 if parts else 0
        self._tiers = [_tier(p) for p in parts]
        for f in (REJECTS, CONFLICTS):
            _keep_lines_upto(self.dir / f, state.lines)
        for part in parts:
            for fld in pq.read_schema(part):
                if fld.name != LINE_COLUMN and not pa.types.is_null(fld.type):
                    self.types.setdefault(fld.name, fld.type)
        self.state = state
        replace_json(self.dir / META, self._meta(meta, active=True))

    def _meta(self, old: dict[str, Any] | None, active: bool) -> dict[str, Any]:
        s = self.state
        meta = dict(old or {})
        meta.update({
            # the labels (name, tags, notes, aliases) belong to the store: a rename made while the run
            # is followed stays; the follow's name only names a new run
            "format_version": FORMAT_VERSION, "run_id": self.run_id, "name": meta.get("name") or self.name,
            "source": os.path.basename(s.source), "sha256": None, "gzip": False,
            "lines": s.lines, "rows": s.rows, "blank_lines": s.blank_lines,
            "rejected_count": s.rejected_count, "aside_count": s.aside_count,
            "columns": dict(s.columns), "first_step": s.first_step, "last_step": s.last_step,
        })
        meta.setdefault("ingested_at", now())
        follow = asdict(s)
        follow.update(active=active, host=socket.gethostname(), pid=os.getpid(), committed_at=now())
        meta[FOLLOW_KEY] = follow
        return meta

    def read_meta(self) -> dict[str, Any]:
        return json.loads((self.dir / META).read_text(encoding="utf-8"))

    def commit(self, table: pa.Table | None, rejects: Sequence[Reject], aside: Sequence[Aside],
               state: FollowState, extra: dict[str, Any] | Callable[[], dict[str, Any]] | None = None) -> None:
        """Make one batch of the follow durable and visible (see the module doc for the order).

        ``state`` is the follow state once this batch is in (counts included); ``extra`` keys are
        merged into ``_meta.json`` (the incremental verdict, alerts). A callable ``extra`` is called
        once the batch's part is visible (outside the lock), so its work does not delay the rows; for
        the run's first part it is called before (the run appears with its metadata).

        Raises
        ------
        StoreError
            The run was deleted while it was followed, or the store cannot be written.
        """
        has_rows = table is not None and table.num_rows > 0
        batch = merge_held(self._held, rejects, aside, keep=not self.exists and not has_rows)
        if batch is None:
            self.state = state  # nothing to show yet: the run is created with its first row
            return
        rejects, aside = batch
        later = extra if callable(extra) else (lambda: extra or {})
        try:
            if not self.exists:
                with self.store.lock():
                    self._create_locked(table, rejects, aside, state, later())
                return
            with self.store.lock():
                self._add_part_locked(self.dir, table if has_rows else None, rejects, aside, state)
            more = later()
            with self.store.lock():
                self._write_meta_locked(state, more)
                if has_rows:
                    self._compact_locked()
        except OSError as e:
            raise StoreError(f"cannot commit to run {self.run_id!r} in {str(self.store.root)!r}: "
                             f"{e.strerror or e}", run_id=self.run_id, path=str(self.store.root)) from None

    def _create_locked(self, table, rejects, aside, state: FollowState, extra: dict[str, Any]) -> None:
        """The run's first part: written with its metadata in staging, the folder renamed in (the commit)."""
        if self.state.parts:
            raise StoreError(f"run {self.run_id!r} was removed from the store while it was followed",
                             run_id=self.run_id, path=str(self.store.root))
        target = self.store.staging_dir() / work_dir_name(INGEST_PREFIX, self.run_id)
        target.mkdir(exist_ok=True)
        self._add_part_locked(target, table, rejects, aside, state)
        self.state = state
        meta = self._meta(None, active=True)
        meta.update(extra)
        replace_json(target / META, meta)
        os.replace(target, self.dir)
        fsync_dir(self.store.root)

    def _add_part_locked(self, target: Path, table, rejects, aside, state: FollowState) -> None:
        """Steps 1 and 2 of a commit: the rejects appended, the part written and renamed in."""
        if target == self.dir and not self.exists:
            raise StoreError(f"run {self.run_id!r} was removed from the store while it was followed",
                             run_id=self.run_id, path=str(self.store.root))
        _append_lines(target / REJECTS, [reject_record(r) for r in rejects])
        _append_lines(target / CONFLICTS, [a.to_dict() for a in aside])
        if table is None:
            return
        state.parts = self.state.parts + 1
        name = _part_name(state.parts - 1)
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), PART_KEY: state.to_json(),
                                               LEVEL_KEY: b"0"})
        write_part(target / (name + PART_TMP), table)
        common_schema.widen(self.store.root, [target / (name + PART_TMP)])  # a later part's new column
        os.replace(target / (name + PART_TMP), target / name)
        self._tiers.append((name, 0, table.num_rows))
        for f in table.schema:
            if f.name != LINE_COLUMN and not pa.types.is_null(f.type):
                self.types.setdefault(f.name, f.type)

    def _write_meta_locked(self, state: FollowState, extra: dict[str, Any]) -> None:
        """Step 3: ``_meta.json`` replaced with the state (and ``extra``)."""
        if not self.exists:
            raise StoreError(f"run {self.run_id!r} was removed from the store while it was followed",
                             run_id=self.run_id, path=str(self.store.root))
        old = self.read_meta()
        self.state = state
        meta = self._meta(old, active=True)
        meta.update(extra)
        replace_json(self.dir / META, meta)

    def _compact_locked(self) -> None:
        """Merge the run's trailing small parts (:func:`compact_parts`), so the part count stays small."""
        self._tiers = compact_parts(self.dir, self._tiers, COMPACT_FANOUT, COMPACT_MAX_ROWS)

    def finish(self, extra: dict[str, Any] | None = None) -> None:
        """Mark the follow ended (the run stays, and a later follow of the same file resumes it)."""
        if not self.exists:
            return
        with self.store.lock():
            meta = self._meta(self.read_meta(), active=False)
            meta.update(extra or {})
            replace_json(self.dir / META, meta)


def follow_status(store) -> dict[str, dict[str, Any]]:
    """``{run_id: {"live", "last_step", "last_line_at", "alerts", "version"}}`` of every followed run.

    ``live``: a follower is writing it (its metadata says so and, on this host, its process
    runs); ``alerts``: the checks failing since they were alerted; ``version`` changes with
    every commit (a cache key for the run's rows).
    """
    out: dict[str, dict[str, Any]] = {}
    host = socket.gethostname()
    for d in paths.run_dirs(store.root):
        try:
            meta = json.loads((d / META).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        f = meta.get(FOLLOW_KEY)
        if not f:
            continue
        live = bool(f.get("active")) and (f.get("host") != host or not f.get("pid") or pid_alive(int(f["pid"])))
        out[meta.get("run_id") or run_id_of(d)] = {
            "live": live, "last_step": meta.get("last_step"), "last_line_at": f.get("last_line_at"),
            "alerts": sorted(meta.get("alerts", {}).get("open", {})),
            "alert_details": list(meta.get("alerts", {}).get("open", {}).values()),
            "version": f"{f.get('parts')}:{f.get('lines')}:{f.get('committed_at')}"}
    return out


def _end_line(path: Path) -> int | None:
    """The run's line count once the part ``path`` is in (its follow state), ``None`` for a part not
    written by a follow."""
    kv = pq.read_schema(path).metadata or {}
    return json.loads(kv[PART_KEY])["lines"] if PART_KEY in kv else None


def rows_after(store, run_id: str, line: int, attempts: int = 5) -> tuple[pa.Table | None, int]:
    """The rows of a followed run past file line ``line`` and the line count they reach: only the
    parts that hold such rows are read (from the newest back), so a reader that keeps what it has
    pays for the new rows, not the run.

    Returns ``(None, line)`` when nothing is new. A part merged meanwhile (compaction) is read again
    from a fresh listing. A run ingested whole (its parts carry no follow state) is read whole at
    ``line`` 0, and has nothing new after.

    Raises
    ------
    StoreError
        Unknown or damaged run.
    """
    from regime_dash.ingest import unify_tables

    for attempt in range(attempts):
        try:
            picked, reach = [], line
            for part in reversed(store.parts(run_id)):
                end = _end_line(part)
                if end is None:  # a run ingested whole: read once, it never grows
                    return _whole_once(store, run_id, line)
                if end <= line:
                    break
                picked.append(part)
                reach = max(reach, end)
            if not picked:
                return None, line
            table = unify_tables([pq.read_table(p) for p in reversed(picked)])
        except FileNotFoundError:
            if attempt == attempts - 1:
                raise StoreError(f"run {run_id!r} kept changing while it was read; try again",
                                 run_id=run_id, path=str(store.root)) from None
            continue
        except (OSError, pa.ArrowException) as e:
            raise StoreError(f"run {run_id!r} is damaged: {' '.join(str(e).split())[:200]}", run_id=run_id,
                             path=str(store.root)) from None
        return table.filter(pc.greater(table.column(LINE_COLUMN), line)), reach
    return None, line  # pragma: no cover - the loop returns or raises


def _whole_once(store, run_id: str, line: int) -> tuple[pa.Table | None, int]:
    if line > 0:
        return None, line
    table = store.load_table(run_id)
    if not table.num_rows:
        return None, line
    return table, int(pc.max(table.column(LINE_COLUMN)).as_py())
