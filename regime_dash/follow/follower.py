"""Following a diag.jsonl a trainer is still writing: its lines into the store as they come.

:class:`Follower` tails one file (:class:`regime_dash.follow.tail.Tail`), parses what
arrived with the ingest pipeline (the same rules as a whole-file ingest: line
numbers, rejected lines, one type per column), commits it every ``commit_every``
seconds (the store's followed run, :meth:`RunStore.followed_run`), and updates the run's
verdict incrementally (:class:`regime_dash.analysis.incremental.IncrementalVerdict`).
Each (run, check) that starts failing raises one :class:`Alert` until it passes
again; the open alerts live in the run's metadata, so a restarted follower does not
alert twice for the same failure.

:class:`FollowSet` follows several files: the paths given and, for a folder, every
file matching a glob (new files are picked up as they appear), one run each.
:func:`follow` drives either until idle or interrupted.
"""
from __future__ import annotations

import fnmatch
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from regime_dash.analysis.incremental import IncrementalVerdict
from regime_dash.analysis.invariants import CheckOptions
from regime_dash.core.view_urls import DEFAULT_DASHBOARD, explore_url
from regime_dash.errors import ValidationError
from regime_dash.ingest import (LINE_COLUMN, IngestReport, Reject, Aside, free_name, iter_batches, not_diag_reason,
                                require_diag)
from regime_dash.ingest.reference import too_long_reason
from regime_dash.ingest.sources import TooLong
from regime_dash.store.metadata import now
from regime_dash.store.paths import PARTITION, pid_alive
from regime_dash.store.run_store import RunStore
from regime_dash.store.append import FollowState
from regime_dash.follow.tail import REWRITE_EVENTS, Tail, refuse_gzip, refuse_symlink, symlink_text

__all__ = ["Alert", "Commit", "END_KEY", "Follower", "FollowSet", "follow", "TRUNCATE_POLICIES"]

#: What a truncated file does to its run: a new segment of the same run, or the follow stops.
TRUNCATE_POLICIES = ("segment", "stop")
#: Bytes read before a commit at most: a backlog is committed a piece at a time, so a follower's memory
#: is bounded by this, not by the file.
COMMIT_BYTES = 8 << 20
#: Lines, or bytes, read without a diag row after which a file is refused as not a diag (the rejected
#: lines wait in memory until the run's first row creates it: this bounds them).
NOT_DIAG_LINES = 1000
NOT_DIAG_BYTES = 16 << 20
#: The run metadata's record of how its follow ended (written with the end, so it is read only
#: while the follow's ``active`` flag is off: a follower killed before its end leaves the flag on).
END_KEY = "follow_end"
#: The smallest read: what a read adds to a commit's ``COMMIT_BYTES``, at most.
MIN_READ = 64 << 10

@dataclass
class Alert:
    """A check or fail-level finding that started failing on a followed run (the JSON a hook is sent)."""

    run: str
    check: str
    kind: str  # "check" or "finding"
    first_step: int | None
    message: str
    url: str

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, "check": self.check, "kind": self.kind, "first_step": self.first_step,
                "message": self.message, "url": self.url}


@dataclass
class Commit:
    """What one commit of a follower did (the CLI prints one status line per commit)."""

    run_id: str
    rows: int  # rows this commit added
    total_rows: int
    rejected: int  # lines this commit rejected
    last_step: Any
    status: str  # the run's verdict after it
    failing: list[str]
    alerts: list[Alert] = field(default_factory=list)
    event: str | None = None  # "truncated" / "replaced" when a segment started before it
    seconds: float = 0.0  # the commit's own time (parse, write, verdict)


def _failing(verdict) -> dict[str, tuple[str, int | None, str]]:
    """``{id: (kind, first step, message)}`` of what fails in ``verdict``."""
    out = {c.id: ("check", c.first_step, c.detail) for c in verdict.checks if c.status == "fail"}
    for f in verdict.findings:
        if f.severity == "fail" and f.id not in out:
            out[f.id] = ("finding", f.steps[0] if f.steps else None, f.message)
    return out


def _load_scanner() -> None:
    """Load the ingest shape scanner where it costs nothing to speak of: the C one built in, or numba's
    where numba is loaded already (a source of unknown size, to ingest's :func:`~regime_dash.ingest.shapes.
    worth_loading`); a commit's lines parse without it, to the same values. The re-derivation's compiled
    loop is not loaded either: numba and its code would cost a follower ~110 MB, more than all the rest of
    it (:class:`IncrementalVerdict`'s ``compile_loop``)."""
    from regime_dash.ingest import shapes

    if shapes.worth_loading(None):
        shapes.start_loading()


class Follower:
    """One followed file: read, parse, commit, judge. Call :meth:`poll` often; it commits when due."""

    def __init__(self, store: RunStore, path: str | os.PathLike, name: str, *, commit_every: float = 2.0,
                 on_truncate: str = "segment", options: CheckOptions | None = None,
                 dashboard: str | None = None, clock: Callable[[], float] = time.monotonic,
                 follow_symlinks: bool = False):
        if on_truncate not in TRUNCATE_POLICIES:
            raise ValidationError(f"on_truncate must be one of {', '.join(TRUNCATE_POLICIES)}, got {on_truncate!r}",
                                  field="on_truncate", value=on_truncate)
        if not (isinstance(commit_every, (int, float)) and commit_every >= 0):
            raise ValidationError(f"commit_every must be seconds >= 0, got {commit_every!r}",
                                  field="commit_every", value=commit_every)
        refuse_gzip(path)
        if not follow_symlinks:
            refuse_symlink(path)
        self.store, self.path, self.clock = store, Path(path), clock
        self.commit_every, self.on_truncate, self.dashboard = float(commit_every), on_truncate, dashboard
        _load_scanner()
        self.run = store.followed_run(path, name)
        st = self.run.state
        self._judged_lines = st.lines  # the lines the verdict has folded in (its reload reads up to them)
        self.tail = Tail(path, st.offset, st.inode, st.file, max_line=store.max_line_bytes,
                         follow_symlinks=follow_symlinks)
        self.verdict = IncrementalVerdict(options, reload=self._committed_frame, compile_loop=False)
        meta = self.run.read_meta() if self.run.exists else {}
        self.open_alerts: dict[str, dict] = dict(meta.get("alerts", {}).get("open", {}))
        if self.run.exists:
            self.verdict.update(self._committed_frame())  # the prefix stored before this start, once
        self._pending: list[bytes | TooLong] = []  # whole lines read, not yet committed
        self._pending_bytes = 0
        self._pending_end = (st.offset, st.inode, st.file)
        self._event: str | None = None
        self._before_diag = _BeforeDiag()  # what was read while the run has no row yet
        self._last_commit = clock()
        self.last_line_at = clock()  # for --until-idle: "no new line" since
        self.stopped: str | None = None  # why the follow of this file ended, if it did

    def dashboard_url(self) -> str:
        """The dashboard an alert links to: the one named at the start, else the one serving the store
        recorded (read at each alert: a dashboard started after the follow counts), else streamlit's default."""
        return self.dashboard or self.store.dashboard_url() or DEFAULT_DASHBOARD

    @property
    def run_id(self) -> str:
        return self.run.run_id

    def _committed_frame(self):
        from regime_dash.diag.aliases import canonical_frame

        if not self.run.exists:
            import pandas as pd
            return pd.DataFrame()
        table = self.store.load_table(self.run_id)
        if LINE_COLUMN in table.column_names:  # a part already visible but not yet judged is not "before"
            table = table.filter(pc.less_equal(table.column(LINE_COLUMN), self._judged_lines))
        frame = table.to_pandas()
        return canonical_frame(frame.drop(columns=[c for c in (LINE_COLUMN, PARTITION) if c in frame.columns]))

    def poll(self, force: bool = False) -> list[Commit]:
        """Read what was written; commit when ``commit_every`` has passed (or ``force``), when
        ``COMMIT_BYTES`` are read (a backlog is committed a piece at a time), or before a truncation,
        rewrite or replacement starts a new segment.

        Raises
        ------
        NotDiagError
            The file's first lines are not a diag (nothing of it is stored).
        """
        out: list[Commit] = []
        while self.stopped is None:
            piece = self.tail.read(max(COMMIT_BYTES - self._pending_bytes, MIN_READ))
            self._pending.extend(piece.items)
            self._pending_bytes += sum(i.size if isinstance(i, TooLong) else len(i) for i in piece.items)
            if piece.read or piece.items:
                self.last_line_at = self.clock()  # bytes came: a long line being skipped is not idle
            self._pending_end = (piece.offset, self.tail.inode, self.tail.identity())
            if piece.event is not None:
                out.extend(self._on_event(piece.event))
                continue
            if self._pending_bytes >= COMMIT_BYTES:
                out.extend(self._flush())
            if not piece.read or self.clock() - self._last_commit >= self.commit_every:
                break  # a writer that never pauses still gets its commits on time
        due = self.clock() - self._last_commit >= self.commit_every
        if (force or due) and self.stopped is None:
            out.extend(self._flush())
        return out

    def _on_event(self, event: str) -> list[Commit]:
        """What was read before ``event`` committed; the follow stops, or a new segment starts."""
        if event == "symlink":
            out = self._flush()
            self.stopped = (f"{symlink_text(self.path) or repr(str(self.path))}: not followed, nothing of it "
                            f"stored (--follow-symlinks follows it)")
            return out
        if event in REWRITE_EVENTS and self.on_truncate == "stop":
            out = self._flush()
            self.stopped = f"{self.path} was {event} (--on-truncate stop)"
            return out
        self._event = event  # the commit starts the new segment
        return self._flush()

    def _flush(self) -> list[Commit]:
        self._last_commit = self.clock()
        items = self._pending
        if not items and self._event is None:
            return []
        self._pending, self._pending_bytes = [], 0
        t0 = time.perf_counter()
        st = self.run.state
        new = FollowState(**{**st.__dict__, "segments": list(st.segments), "columns": dict(st.columns)})
        new.offset, new.inode, new.file = self._pending_end
        if not new.segments:
            new.segments = [{"segment": 0, "first_line": 1, "reason": "start", "at": now()}]
        table, rejects, aside = self._parse(items, new) if items else (None, [], [])
        if not self.run.exists:
            self._before_diag.check(self.path, new, rejects, self.stopped is not None)
        if self._event is not None:
            new.segments.append({"segment": len(new.segments), "first_line": new.lines + 1,
                                 "reason": self._event, "at": now()})
        frame_rows = 0 if table is None else table.num_rows
        alerts: list[Alert] = []

        def judged() -> dict:
            """The verdict with this batch folded in, as metadata: run once its part is visible, so the
            judging never delays the rows reaching the store."""
            if not frame_rows:
                return {}
            verdict = self.verdict.update(self._frame(table))
            self._judged_lines = new.lines
            fresh, extra = self._alerts(verdict)
            alerts.extend(fresh)
            return extra

        if frame_rows:
            new.last_line_at = now()
        self.run.commit(table, rejects, aside, new, judged)
        self._judged_lines = new.lines
        v = self.verdict.current
        commit = Commit(self.run_id, frame_rows, new.rows, len(rejects), new.last_step,
                        v.status if v is not None else "pass", sorted(_failing(v)) if v is not None else [],
                        alerts, self._event, time.perf_counter() - t0)
        self._event = None
        return [commit]

    def _parse(self, items: list, new: FollowState) -> tuple[pa.Table | None, list[Reject], list[Aside]]:
        """The rows of ``items`` (bytes of whole lines, and :class:`TooLong` lines) numbered on from the
        run's lines, their rejects and asides; counts into ``new``. As whole-file ingest reads them: the same
        line limit, the lines without a diag field quarantined, a long line kept as its first bytes."""
        if not self.run.types and not self.run.exists:
            self.run.types.update(self.store.column_types())  # a new run: the store's types, as an ingest
        tables, rejects, aside = [], [], []
        run: list[bytes] = []
        for item in [*items, None]:
            if isinstance(item, bytes):
                run.append(item)
                continue
            if run:
                self._parse_bytes(b"".join(run), new, tables, rejects, aside)
                run = []
            if isinstance(item, TooLong):
                new.lines += 1
                new.rejected_count += 1
                rejects.append(Reject(new.lines, too_long_reason(item.size, self.store.max_line_bytes), item.head))
        if not tables:
            return None, rejects, aside
        from regime_dash.ingest import unify_tables
        return unify_tables(tables) if len(tables) > 1 else tables[0], rejects, aside

    def _parse_bytes(self, data: bytes, new: FollowState, tables: list, rejects: list, aside: list) -> None:
        """Whole lines ``data`` parsed into ``tables``, ``rejects`` and ``aside``; counts into ``new``."""
        report = IngestReport()
        off = new.lines
        for b in iter_batches(data, path=str(self.path), report=report, types=self.run.types, workers=1,
                              max_line_bytes=self.store.max_line_bytes, diag_only=True):
            t = b.table
            if t.num_rows:
                i = t.column_names.index(LINE_COLUMN)
                t = t.set_column(i, LINE_COLUMN, pc.add(t.column(i), off))
                if PARTITION in t.column_names:
                    t = t.rename_columns([free_name(PARTITION, t.column_names) if n == PARTITION else n
                                          for n in t.column_names])
                tables.append(t)
            rejects.extend(Reject(r.line + off, r.reason, r.raw) for r in b.rejects)
            aside.extend(Aside(a.line + off, a.field, a.value, a.type) for a in b.aside)
        new.lines += report.lines
        new.rows += report.rows
        new.blank_lines += report.blank_lines
        new.rejected_count += report.rejected_count
        new.aside_count += report.aside_count
        self._before_diag.not_diag_lines += report.not_diag_lines
        for k, t in report.columns.items():
            new.columns.setdefault(k, t)
        for attr, pick in (("first_step", min), ("last_step", max)):
            got, had = getattr(report, attr), getattr(new, attr)
            setattr(new, attr, got if had is None else had if got is None else pick(had, got))

    def _frame(self, table: pa.Table):
        from regime_dash.diag.aliases import canonical_frame

        frame = table.to_pandas()
        return canonical_frame(frame.drop(columns=[LINE_COLUMN]))

    def _alerts(self, verdict) -> tuple[list[Alert], dict]:
        """New alerts (a failure not alerted since it last passed) and the metadata that records them."""
        failing = _failing(verdict)
        fresh = []
        for cid, (kind, step, msg) in failing.items():
            if cid not in self.open_alerts:
                a = Alert(self.run_id, cid, kind, step, msg, explore_url(self.dashboard_url(), self.run_id, step))
                fresh.append(a)
                self.open_alerts[cid] = {**a.to_dict(), "at": now()}
        for cid in [c for c in self.open_alerts if c not in failing]:
            del self.open_alerts[cid]  # it passes again: a new failure alerts again
        summary = {"status": verdict.status, "counts": verdict.counts, "failing": sorted(failing),
                   "rows": self.verdict.rows}
        return fresh, {"alerts": {"open": dict(self.open_alerts)}, "verdict": summary}

    def close(self, clean: bool = True, why: str = "closed", idle: bool = False) -> list[Commit]:
        """Commit what was read (to the file's end) and mark the follow ended, recording ``why`` (``idle``: its
        ``--until-idle`` end) and whether every whole line of the file was read. A partial last line is left
        for a resume.

        Raises
        ------
        NotDiagError
            Nothing the file holds is a diag (as whole-file ingest refuses it; nothing stored).
        """
        try:
            out: list[Commit] = []
            self._before_diag.ending = True
            while self.stopped is None:
                got = self.poll(force=True)
                out += got
                if not got and not self._pending:
                    break
            if not self.run.exists and self.stopped is None:
                self._before_diag.check(self.path, self.run.state, [], False)
            self.tail.close()
            if clean:
                at_end, size = _read_to_end(self.path, self.run.state.inode, self.run.state.offset)
                end = {"why": why, "idle": idle, "at_end": at_end, "offset": self.run.state.offset, "size": size,
                       "at": now()}
                self.run.finish({"alerts": {"open": dict(self.open_alerts)}, END_KEY: end})
        finally:
            self.run.release()  # the run is free for the next follower
        return out


def _read_to_end(path: Path, inode: int | None, offset: int) -> tuple[bool, int | None]:
    """Whether no whole line of ``path`` lies past ``offset`` (of the file ``inode``: a path that names
    another file now was not read to its end; a file shorter than ``offset`` was truncated, its lines
    are read from its start), and the file's size."""
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            if inode is not None and st.st_ino != inode:
                return False, st.st_size
            fh.seek(offset if offset <= st.st_size else 0)
            while chunk := fh.read(1 << 20):
                if b"\n" in chunk:
                    return False, st.st_size
            return True, st.st_size
    except OSError:
        return False, None


class _BeforeDiag:
    """What a follower read while its run has no row yet: enough to refuse a file that is not a diag as
    whole-file ingest does (:func:`~regime_dash.ingest.require_diag`), without holding all its lines."""

    def __init__(self):
        self.not_diag_lines = 0
        self.first_reject: str | None = None
        self.ending = False

    def check(self, path: Path, new: FollowState, rejects: list[Reject], stopped: bool) -> None:
        """Raise :class:`~regime_dash.errors.NotDiagError` when the lines read so far say the file is not a
        diag: at once where its first rows lack a ``step``; when no row came, once ``NOT_DIAG_LINES``
        lines or ``NOT_DIAG_BYTES`` bytes were read, or the follow ends."""
        if self.first_reject is None and rejects:
            self.first_reject = f"line {rejects[0].line}: {rejects[0].reason}"
        reason = not_diag_reason([c for c, t in new.columns.items() if t != "null"], new.rows,
                                 lines=new.lines, rejected=new.rejected_count,
                                 not_diag_lines=self.not_diag_lines, first_reject=self.first_reject)
        if reason is None or (new.rows == 0 and new.lines == 0):
            return
        if new.rows or self.ending or stopped or new.lines >= NOT_DIAG_LINES or new.offset >= NOT_DIAG_BYTES:
            require_diag(path.name, reason)


class FollowSet:
    """Several followed files: ``paths`` (files, or folders whose files match ``pattern``), one run each.

    A file's run is named after the file (its name without ``.jsonl``), prefixed by ``name`` and a dash
    when there are several files, or named ``name`` when one file is followed. A folder's symbolic links
    are passed over unless ``follow_symlinks`` is given.
    """

    def __init__(self, store: RunStore, paths: Iterable[str | os.PathLike], name: str | None = None,
                 pattern: str = "*.jsonl", **kw):
        self.store, self.name, self.pattern, self.kw = store, name, pattern, kw
        self.files = [Path(p) for p in paths if not Path(p).is_dir()]
        self.dirs = [Path(p) for p in paths if Path(p).is_dir()]
        for f in self.files:
            refuse_gzip(f)
        self.followers: dict[Path, Follower] = {}
        try:
            self._scan()
        except BaseException:  # a file refused: the runs claimed before it are freed
            for f in self.followers.values():
                f.run.release()
            raise

    def _run_name(self, path: Path) -> str:
        stem = path.name
        for ext in (".jsonl", ".ndjson", ".json"):
            if stem.lower().endswith(ext):
                stem = stem[: -len(ext)]
                break
        if self.name and len(self.files) == 1 and not self.dirs:
            return self.name
        return f"{self.name}-{stem}" if self.name else stem

    def _scan(self) -> None:
        found = list(self.files)
        for d in self.dirs:
            found += sorted(p for p in d.iterdir() if p.is_file() and fnmatch.fnmatch(p.name, self.pattern)
                            and not p.name.lower().endswith(".gz")
                            and (self.kw.get("follow_symlinks") or not p.is_symlink()))
        for p in found:
            if p not in self.followers:
                self.followers[p] = Follower(self.store, p, self._run_name(p), **self.kw)

    def poll(self, force: bool = False) -> list[Commit]:
        if self.dirs:
            self._scan()
        return [c for f in self.followers.values() for c in f.poll(force)]

    @property
    def last_line_at(self) -> float:
        return max((f.last_line_at for f in self.followers.values()), default=time.monotonic())

    @property
    def stopped(self) -> list[str]:
        return [f.stopped for f in self.followers.values() if f.stopped]

    def close(self, clean: bool = True, why: str = "closed", idle: bool = False) -> list[Commit]:
        return [c for f in self.followers.values() for c in f.close(clean, why, idle)]


def follow(fset: FollowSet, *, until_idle: float | None = None, poll_every: float = 0.2,
           on_commit: Callable[[Commit], None] = lambda c: None,
           should_stop: Callable[[], bool] = lambda: False) -> str:
    """Drive ``fset`` until ``until_idle`` seconds pass without a new line, a file stops it
    (``--on-truncate stop``), ``should_stop()`` says so, or Ctrl-C; returns why it ended.

    What was read is committed before it returns, on Ctrl-C too.
    """
    if until_idle is not None and not until_idle > 0:
        raise ValidationError(f"until_idle must be seconds > 0, got {until_idle!r}", field="until_idle",
                              value=until_idle)
    why, idle = "interrupted", False
    try:
        while True:
            for c in fset.poll():
                on_commit(c)
            if fset.stopped:
                why = fset.stopped[0]
                break
            if until_idle is not None and time.monotonic() - fset.last_line_at >= until_idle:
                why, idle = f"no new line for {until_idle:g} s", True
                break
            if should_stop():
                why = "stopped"
                break
            time.sleep(poll_every)
    except KeyboardInterrupt:
        why = "interrupted (Ctrl-C)"
    for c in fset.close(why=why, idle=idle):
        on_commit(c)
    return why


class RunWatch:
    """A run of the store read as it grows (``check NAME --follow``): each new part is judged once.

    Parameters
    ----------
    store, run_id
        The run.
    options
        The check options.
    """

    def __init__(self, store: RunStore, run_id: str, options: CheckOptions | None = None):
        self.store, self.run_id = store, run_id
        self.lines = 0  # the file lines judged (a part merged by compaction keeps its lines)
        self.verdict = IncrementalVerdict(options, reload=self._read_all)

    def _read_all(self):
        table = self.store.load_table(self.run_id)
        return self._frame(table.filter(pc.less_equal(table.column(LINE_COLUMN), self.lines)))

    @staticmethod
    def _frame(table: pa.Table):
        import pandas as pd

        from regime_dash.diag.aliases import canonical_frame

        if not table.num_rows:
            return pd.DataFrame()
        frame = table.to_pandas()
        return canonical_frame(frame.drop(columns=[c for c in (LINE_COLUMN, PARTITION) if c in frame.columns]))

    def poll(self):
        """The verdict after the rows committed since the last call, or ``None`` when there are none."""

        table, reach = self.store.rows_after(self.run_id, self.lines)
        if table is None or not table.num_rows:
            self.lines = reach
            return None
        verdict = self.verdict.update(self._frame(table))  # reload gives the rows before these
        self.lines = reach
        return verdict

    def following(self) -> bool:
        """A follower is still writing the run (its metadata says so, and its process is alive here)."""
        import socket

        from regime_dash.store.append import FOLLOW_KEY

        f = self.store.meta(self.run_id).get(FOLLOW_KEY)
        if not f or not f.get("active"):
            return False
        if f.get("host") == socket.gethostname() and f.get("pid"):
            return pid_alive(int(f["pid"]))
        return True
