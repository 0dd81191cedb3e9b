"""What is wrong with a run store, and moving it aside: ``python -m regime_dash doctor``.

A store is damaged by hand or by the disk, never by our writes (those are atomic):
a part file truncated, emptied or replaced by something that is not Parquet; a run
folder whose ``_meta.json`` went (no listing shows it, every glob still reads it);
files that are not ours; a run folder that is a symlink (a reader may follow it out
of the store); work folders of ingests and deletes whose process is gone.
:func:`survey` lists each as a :class:`Problem`; :func:`repair` moves each to
``<store>/_quarantine/`` (:meth:`RunStore.quarantine`): nothing is ever deleted, and
afterwards every reader (DuckDB, pyarrow, ``runs``) counts the same rows.

A damaged part is repaired by moving its whole run: a run missing a part would give
fewer rows than its ``_meta.json`` says. What is moved stays readable where ``doctor`` says it
went (a Parquet file as ``*.parquet.quarantined``, read with ``pyarrow.parquet.read_table``).

The doctor holds the store's lock (the one commits take) while it surveys and moves, so it never
looks at a run mid-commit. A followed run is not damaged by its follower's stop: one killed
between writing a part and writing the metadata (or mid-merge) has whole parts that its restart
reconciles (:meth:`regime_dash.store.append.FollowedRun.open`). Such a run is ``recoverable`` and
never moved; a run whose follower is alive (its claim is held, :mod:`regime_dash.store.claims`)
is left alone.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

from regime_dash.errors import StoreError
from regime_dash.store import claims
from regime_dash.store.append import FOLLOW_KEY, PART_KEY
from regime_dash.store.paths import CLAIMS, CONFLICTS, LOCK_FILE, META, PARTITION, QUARANTINE, REJECTS, pid_alive
from regime_dash.store.quarantine import quarantine
from regime_dash.store.run_store import RunStore
from regime_dash.store.common_schema import FILE as SCHEMA_FILE
from regime_dash.store.layouts import FILE as LAYOUTS_FILE
from regime_dash.store.metadata import DASHBOARD_FILE

__all__ = ["KINDS", "LEFT_IN_PLACE", "Problem", "examine", "repair", "survey"]

#: The kinds of problem, in the order :func:`survey` lists them, with what each means.
KINDS: dict[str, str] = {
    "damaged": "a run whose part files cannot be read, or hold other rows than its _meta.json says",
    "recoverable": "a followed run whose follower stopped mid-commit: its parts are whole; restarting the "
                   "follower finishes the commit (never moved)",
    "orphan": "a run folder with no readable _meta.json: no listing shows it, globs still read it",
    "symlink": "a run folder that is a symlink (a reader may follow it out of the store)",
    "stray": "a file or folder the store did not write",
    "staging": "the work folder of an ingest or delete whose process is gone",
}

_RUN_FILES = (META, REJECTS, CONFLICTS)
_ROOT_NAMES = (LOCK_FILE, ".staging", QUARANTINE, LAYOUTS_FILE, DASHBOARD_FILE, SCHEMA_FILE, CLAIMS)
#: The kinds :func:`repair` leaves where they are.
LEFT_IN_PLACE = ("recoverable",)
#: A followed run's files of a commit or merge in flight (a restart of its follower finishes or drops them).
_IN_FLIGHT = (".parquet.tmp", ".parquet.merge", ".parquet.merge.tmp", f"{META}.tmp", f"{REJECTS}.tmp",
              f"{CONFLICTS}.tmp")


@dataclass(frozen=True)
class Problem:
    """One thing wrong in the store.

    Attributes
    ----------
    kind
        One of :data:`KINDS`.
    path
        What :func:`repair` moves (a run folder for ``damaged``, ``orphan`` and ``symlink``).
    detail
        What is wrong with it, in words.
    """

    kind: str
    path: Path
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": str(self.path), "detail": self.detail}


def _part_problem(part: Path) -> tuple[str | None, int]:
    """Why a part file cannot be read (None when it can), and its row count."""
    try:
        meta = pq.ParquetFile(part).metadata
    except (OSError, pa.ArrowException) as e:
        return " ".join(str(e).split())[:160] or type(e).__name__, 0
    return None, meta.num_rows


def _live(d: Path, meta: dict[str, Any], held: dict[str, Any]) -> bool:
    """A follower is writing the run now: it holds the run's claim, or (a follower of an earlier version)
    its metadata says so and its process runs here."""
    import socket

    f = meta.get(FOLLOW_KEY) or {}
    if d.name.split("=", 1)[1] in held:
        return True
    return bool(f.get("active")) and f.get("host") == socket.gethostname() and bool(f.get("pid")) \
        and pid_alive(int(f["pid"]))


def _restart_hint(rid: str, meta: dict[str, Any]) -> str:
    source = str((meta.get(FOLLOW_KEY) or {}).get("source") or meta.get("source") or "FILE")
    cmd = f"restart the follower (`ingest {source} --follow --name {rid.rsplit('-', 1)[0]}`)"
    if not Path(source).exists():
        cmd += f"; its source {source} is gone, and the run's rows stay readable where they are"
    return cmd


def _recovery(d: Path, meta: dict[str, Any], rows: int, said: int, left: list[str]) -> str | None:
    """Why a stopped follower's run is whole and its restart would reconcile it; None when it is not so."""
    parts = sorted(d.glob("part-*.parquet"))
    if any(n.endswith(".parquet.merge") for n in left):
        why = "a merge of its parts was interrupted"
    else:
        kv = (pq.read_schema(parts[-1]).metadata or {}) if parts else {}
        last = json.loads(kv[PART_KEY]) if PART_KEY in kv else {}
        ahead = last.get("lines", 0) > (meta.get(FOLLOW_KEY) or {}).get("lines", 0)  # what a restart takes up
        if said != rows and not (ahead and last.get("rows") == rows and said < rows):
            return None  # parts missing or extra: not what a stop leaves
        why = (f"its parts hold {rows:,} rows, _meta.json says {said:,} (stopped between a part and its "
               "metadata)") if said != rows else f"a commit was left unfinished ({', '.join(left)})"
    return f"{why}: {_restart_hint(d.name.split('=', 1)[1], meta)}"


def _run_problems(store: RunStore, d: Path, held: dict[str, Any]) -> list[Problem]:
    """A listed run's damage or recovery (one problem for the run) and its stray files."""
    out: list[Problem] = []
    bad, rows = [], 0
    for part in sorted(d.glob("part-*.parquet")):
        why, n = _part_problem(part)
        rows += n
        if why is not None:
            bad.append(f"{part.name}: {why}")
    rid = d.name.split("=", 1)[1]
    meta: dict[str, Any] = {}
    try:
        meta = store.meta(rid)
        said = int(meta.get("rows") or 0)
    except (StoreError, ValueError, TypeError) as e:
        said, bad = rows, bad or [f"_meta.json: {e}"]
    followed = FOLLOW_KEY in meta
    left = sorted(f.name for f in d.iterdir() if followed and f.name.endswith(_IN_FLIGHT))
    if followed and not bad and _live(d, meta, held):
        left = []  # a commit in progress: the follower finishes it
    elif followed and not bad and (left or said != rows) and (why := _recovery(d, meta, rows, said, left)):
        out.append(Problem("recoverable", d, why))
    elif said != rows and not bad:
        bad.append(f"its parts hold {rows:,} rows, _meta.json says {said:,}")
    if bad:
        out.append(Problem("damaged", d, "; ".join(bad)))
    for f in sorted(d.iterdir()):
        ours = (f.name.startswith("part-") and f.name.endswith(".parquet")) or f.name in _RUN_FILES
        if not ours and not (followed and f.name.endswith(_IN_FLIGHT)):
            out.append(Problem("stray", f, f"not a file of run {rid}"))
    return out


def survey(store: RunStore, progress: Callable[[int, int], None] | None = None) -> list[Problem]:
    """Every problem of ``store``, by :data:`KINDS` order then path, surveyed under the store's lock.

    Parameters
    ----------
    store
        The store.
    progress
        ``progress(done, total)`` after each entry of the store folder.
    """
    return examine(store, progress=progress)[0]


def examine(store: RunStore, *, repair: bool = False, progress: Callable[[int, int], None] | None = None
            ) -> tuple[list[Problem], list[tuple[Problem, Path]]]:
    """The store's problems and, with ``repair``, where each moved thing went: the survey and the moves
    under one hold of the store's lock, so no commit comes between them."""
    with store.lock():
        found = _survey_locked(store, progress)
        return found, (_repair_locked(store, found) if repair else [])


def _survey_locked(store: RunStore, progress: Callable[[int, int], None] | None) -> list[Problem]:
    found: list[Problem] = []
    root = store.root
    entries = sorted(root.iterdir()) if root.is_dir() else []
    orphans = set(store.orphan_dirs())
    held = claims.held(root)
    for k, p in enumerate(entries):
        if p.name.startswith(f"{PARTITION}=") and p.is_symlink():
            found.append(Problem("symlink", p, f"a symlink to {p.resolve()}"))
        elif p in orphans:
            parts = len(list(p.glob("*.parquet")))
            found.append(Problem("orphan", p, f"no readable _meta.json; {parts} part file(s)"))
        elif p.name.startswith(f"{PARTITION}=") and p.is_dir():
            found.extend(_run_problems(store, p, held))
        elif p.name not in _ROOT_NAMES and not p.name.startswith((".ingest-", ".deleting-")):
            found.append(Problem("stray", p, "not a run folder of the store"))
        if progress is not None:
            progress(k + 1, len(entries))
    found.extend(Problem("staging", p, "its process is gone") for p in store.staging_debris())
    order = list(KINDS)
    return sorted(found, key=lambda q: (order.index(q.kind), str(q.path)))


def repair(store: RunStore, problems: list[Problem]) -> list[tuple[Problem, Path]]:
    """Move each problem's path to ``<store>/_quarantine/`` under the store's lock; returns where each went.

    Several problems of one folder (a damaged run with a stray file in it) move once; a
    ``recoverable`` run (:data:`LEFT_IN_PLACE`) is never moved, nor anything in it.
    """
    with store.lock():
        return _repair_locked(store, problems)


def _repair_locked(store: RunStore, problems: list[Problem]) -> list[tuple[Problem, Path]]:
    moved: list[tuple[Problem, Path]] = []
    done: list[Path] = [q.path for q in problems if q.kind in LEFT_IN_PLACE]
    for q in problems:
        if any(q.path == d or d in q.path.parents for d in done):
            continue
        moved.append((q, quarantine(store.root, q.path, f"{q.kind}: {q.detail}", holding_lock=True)))
        done.append(q.path)
    return moved
