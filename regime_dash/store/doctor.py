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
fewer rows than its ``_meta.json`` says.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

from regime_dash.errors import StoreError
from regime_dash.store.paths import CONFLICTS, LOCK_FILE, META, PARTITION, QUARANTINE, REJECTS
from regime_dash.store.run_store import RunStore
from regime_dash.store.common_schema import FILE as SCHEMA_FILE
from regime_dash.store.layouts import FILE as LAYOUTS_FILE
from regime_dash.store.metadata import DASHBOARD_FILE

__all__ = ["KINDS", "Problem", "repair", "survey"]

#: The kinds of problem, in the order :func:`survey` lists them, with what each means.
KINDS: dict[str, str] = {
    "damaged": "a run whose part files cannot be read, or hold other rows than its _meta.json says",
    "orphan": "a run folder with no readable _meta.json: no listing shows it, globs still read it",
    "symlink": "a run folder that is a symlink (a reader may follow it out of the store)",
    "stray": "a file or folder the store did not write",
    "staging": "the work folder of an ingest or delete whose process is gone",
}

_RUN_FILES = (META, REJECTS, CONFLICTS)
_ROOT_NAMES = (LOCK_FILE, ".staging", QUARANTINE, LAYOUTS_FILE, DASHBOARD_FILE, SCHEMA_FILE)


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


def _run_problems(store: RunStore, d: Path) -> list[Problem]:
    """A listed run's damage (one problem for the run) and its stray files."""
    out: list[Problem] = []
    bad, rows = [], 0
    for part in sorted(d.glob("part-*.parquet")):
        why, n = _part_problem(part)
        rows += n
        if why is not None:
            bad.append(f"{part.name}: {why}")
    rid = d.name.split("=", 1)[1]
    if not bad:
        try:
            said = int(store.meta(rid).get("rows") or 0)
        except (StoreError, ValueError, TypeError) as e:
            said, bad = rows, [f"_meta.json: {e}"]
        if said != rows and not bad:
            bad.append(f"its parts hold {rows:,} rows, _meta.json says {said:,}")
    if bad:
        out.append(Problem("damaged", d, "; ".join(bad)))
    for f in sorted(d.iterdir()):
        if not ((f.name.startswith("part-") and f.name.endswith(".parquet")) or f.name in _RUN_FILES):
            out.append(Problem("stray", f, f"not a file of run {rid}"))
    return out


def survey(store: RunStore, progress: Callable[[int, int], None] | None = None) -> list[Problem]:
    """Every problem of ``store``, by :data:`KINDS` order then path.

    Parameters
    ----------
    store
        The store.
    progress
        ``progress(done, total)`` after each entry of the store folder.
    """
    found: list[Problem] = []
    root = store.root
    entries = sorted(root.iterdir()) if root.is_dir() else []
    orphans = set(store.orphan_dirs())
    for k, p in enumerate(entries):
        if p.name.startswith(f"{PARTITION}=") and p.is_symlink():
            found.append(Problem("symlink", p, f"a symlink to {p.resolve()}"))
        elif p in orphans:
            parts = len(list(p.glob("*.parquet")))
            found.append(Problem("orphan", p, f"no readable _meta.json; {parts} part file(s)"))
        elif p.name.startswith(f"{PARTITION}=") and p.is_dir():
            found.extend(_run_problems(store, p))
        elif p.name not in _ROOT_NAMES and not p.name.startswith((".ingest-", ".deleting-")):
            found.append(Problem("stray", p, "not a run folder of the store"))
        if progress is not None:
            progress(k + 1, len(entries))
    found.extend(Problem("staging", p, "its process is gone") for p in store.staging_debris())
    order = list(KINDS)
    return sorted(found, key=lambda q: (order.index(q.kind), str(q.path)))


def repair(store: RunStore, problems: list[Problem]) -> list[tuple[Problem, Path]]:
    """Move each problem's path to ``<store>/_quarantine/``; returns where each went.

    Several problems of one folder (a damaged run with a stray file in it) move once.
    """
    moved: list[tuple[Problem, Path]] = []
    done: list[Path] = []
    for q in problems:
        if any(q.path == d or d in q.path.parents for d in done):
            continue
        moved.append((q, store.quarantine(q.path, f"{q.kind}: {q.detail}")))
        done.append(q.path)
    return moved
