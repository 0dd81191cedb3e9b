"""Moving damaged or stray things of a store aside to ``<store>/_quarantine/``; nothing is deleted.

Each thing moved gets a box of its own (``<time>-<random>/``) with a ``_why.txt`` saying where
it came from and why. Its Parquet files are renamed ``*.parquet.quarantined`` first, so no
``*.parquet`` glob (DuckDB's ``<store>/**/*.parquet`` descends into every folder) reads them.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import uuid
from pathlib import Path

from regime_dash.errors import StoreError
from regime_dash.store.lock import StoreLock
from regime_dash.store.metadata import read_meta
from regime_dash.store.paths import PARTITION, QUARANTINE, QUARANTINED

__all__ = ["move_aside", "move_orphan_copies", "orphan_dirs", "quarantine"]


def orphan_dirs(root: Path) -> list[Path]:
    """Run directories no reader lists (no readable ``_meta.json``) whose parts a
    ``**/*.parquet`` or ``run=*/*.parquet`` glob still reads."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.name.startswith(f"{PARTITION}=")
                  and p.is_dir() and not p.is_symlink() and read_meta(p) is None)


def quarantine(root: Path, path: Path, why: str, *, holding_lock: bool = False) -> Path:
    """Move ``path`` aside under the store's lock (see :meth:`RunStore.quarantine`; ``holding_lock``: the
    caller holds it); returns where it lies now.

    Raises
    ------
    StoreError
        The move failed (the message says what and where).
    """
    path = Path(path)
    try:
        with contextlib.nullcontext() if holding_lock else StoreLock(root):
            return move_aside(root, path, why)
    except OSError as e:
        raise StoreError(f"cannot move {str(path)!r} to {str(root / QUARANTINE)!r}: "
                         f"{e.strerror or e}", path=str(path)) from None


def move_aside(root: Path, path: Path, why: str) -> Path:
    """:func:`quarantine`'s move, for a caller holding the lock. A symlink is moved as the link,
    its target untouched."""
    box = root / QUARANTINE / f"{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
    box.mkdir(parents=True)
    (box / "_why.txt").write_text(f"{path}\n{why}\n", encoding="utf-8")
    if not path.is_symlink():
        for f in ([path] if path.is_file() else sorted(path.rglob("*.parquet"))):
            if f.suffix == ".parquet":
                os.replace(f, f.with_name(f.name + QUARANTINED))
        if path.suffix == ".parquet" and not path.exists():
            path = path.with_name(path.name + QUARANTINED)
    dest = box / path.name
    os.replace(path, dest)
    return dest


def move_orphan_copies(root: Path, sha: str) -> list[Path]:
    """Orphan directories holding these same bytes (the run id ends in a prefix of their
    sha256): an earlier ingest whose ``_meta.json`` went. Moved aside (the caller holds
    the lock), so the new run is not read twice by DuckDB."""
    moved = []
    for d in orphan_dirs(root):
        m = re.search(r"-([0-9a-f]{12,64})$", d.name)
        if sha and m and sha.startswith(m.group(1)):
            moved.append(move_aside(root, d, "an orphan copy (no _meta.json) of bytes ingested again"))
    return moved
