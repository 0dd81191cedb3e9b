"""The run store's layout on disk: run ids, run folders, staging and work folders.

Every name the store writes is here, so the writer, the readers, the followed runs
(:mod:`regime_dash.store.append`) and the doctor agree on them (the layout is drawn in
:mod:`regime_dash.store.run_store`'s docstring). Functions of a store's root path; the
only I/O is listing folders and creating the staging folder.
"""
from __future__ import annotations

import contextlib
import os
import re
import socket
import time
import uuid
from pathlib import Path

from regime_dash.errors import StoreError

__all__ = ["CLAIMS", "CONFLICTS", "DELETE_PREFIX", "ENV_VAR", "INGEST_PREFIX", "LOCK_FILE", "META", "PARTITION", "PART_GLOB",
           "PART_TMP", "QUARANTINE", "QUARANTINED", "REJECTS", "default_store", "host_name", "is_stale_work_dir",
           "name_from_source", "part_files", "pid_alive", "run_dir", "run_dirs", "run_id_of", "sanitize_name",
           "staging_candidates", "staging_debris", "staging_dir", "work_dir_name"]

#: Environment variable naming the default store directory.
ENV_VAR = "REGIME_DASH_STORE"
#: The hive partition key of the store: run folders are ``run=<run_id>``.
PARTITION = "run"
#: A run's metadata file (source, sha256, counts, columns, step range, labels).
META = "_meta.json"
#: A run's rejected lines, one ``{"line", "reason", "raw"}`` object a line.
REJECTS = "_rejects.jsonl"
#: A run's values set aside, one ``{"line", "field", "value", "type"}`` object a line.
CONFLICTS = "_conflicts.jsonl"
#: The glob of a run's visible Parquet parts.
PART_GLOB = "part-*.parquet"
#: The suffix of a part while it is written: no reader's ``*.parquet`` glob matches it.
PART_TMP = ".tmp"
#: The store's lock file, in its root.
LOCK_FILE = ".lock"
#: Where followers' claims on run names lie, in the store's root (:mod:`regime_dash.store.claims`).
CLAIMS = ".claims"
#: Prefix of an ingest's work folder in staging.
INGEST_PREFIX = "ingest-"
#: Prefix of a run being deleted, in staging.
DELETE_PREFIX = "deleting-"
#: Where damaged or stray things are moved aside, never deleted.
QUARANTINE = "_quarantine"
#: Suffix of a Parquet file moved to quarantine: no ``*.parquet`` glob reads it.
QUARANTINED = ".quarantined"

_ID_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,159}$")
_NAME_MAX = 64
_STALE_SECONDS = 24 * 3600  # another host's work folder is left alone for a day


def default_store() -> Path:
    """The store directory: ``$REGIME_DASH_STORE``, else ``data/store`` under the cwd.

    Returns
    -------
    pathlib.Path
    """
    env = os.environ.get(ENV_VAR)
    return Path(env) if env else Path.cwd() / "data" / "store"


def sanitize_name(name: str) -> str:
    """Reduce a run name to a safe directory component.

    Anything outside ``[A-Za-z0-9._-]`` becomes ``-``; leading dots and dashes go (no
    hidden, relative or option-like names); the result has at most 64 characters and
    is ``run`` when nothing is left.

    Parameters
    ----------
    name
        A user-chosen name or a file name.

    Returns
    -------
    str
    """
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", str(name))
    s = re.sub(r"\.{2,}", ".", s)  # no ".." anywhere, even though "/" is gone already
    s = s.lstrip(".-")[:_NAME_MAX].rstrip(".-")
    return s or "run"


def name_from_source(source_name: str | None) -> str:
    """A run's default name: the source's file name without its data suffixes (``run`` when none)."""
    if not source_name:
        return "run"
    base = os.path.basename(str(source_name).replace("\\", "/"))
    for ext in (".gz", ".jsonl", ".ndjson", ".json", ".txt"):
        if base.lower().endswith(ext):
            base = base[: -len(ext)]
    return base or "run"


def run_dir(root: Path, run_id: str) -> Path:
    """The folder of run ``run_id`` (which need not exist).

    Raises
    ------
    StoreError
        ``run_id`` is not a safe id (``[A-Za-z0-9._-]``, no ``..``, no leading dot or dash).
    """
    if not isinstance(run_id, str) or not _ID_RE.match(run_id) or ".." in run_id:
        raise StoreError(f"invalid run id {run_id!r}: ids are [A-Za-z0-9._-], no '..', "
                         "no leading dot or dash", run_id=str(run_id))
    return root / f"{PARTITION}={run_id}"


def run_id_of(folder: Path) -> str:
    """The run id a run folder's name (``run=<id>``) carries."""
    return folder.name.split("=", 1)[1]


def run_dirs(root: Path) -> list[Path]:
    """The store's run folders that have a ``_meta.json`` (the runs a listing shows), by name."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir()
                  if p.is_dir() and p.name.startswith(f"{PARTITION}=") and (p / META).is_file())


def part_files(folder: Path) -> list[Path]:
    """A run folder's visible Parquet parts, in write order (their names sort so)."""
    return sorted(folder.glob(PART_GLOB))


def staging_candidates(root: Path) -> list[Path]:
    """Where staging may be: beside the store (``.<store>.staging``), else inside it (``.staging``)."""
    root = root.absolute()
    return [root.parent / f".{root.name}.staging", root / ".staging"]


def staging_dir(root: Path) -> Path:
    """Where work in progress lives: beside the store on the same file system, else
    ``<store>/.staging`` (a store on a mount point of its own). Created if needed.

    Returns
    -------
    pathlib.Path
    """
    root.mkdir(parents=True, exist_ok=True)
    beside, inside = staging_candidates(root)
    with contextlib.suppress(OSError):
        if os.stat(beside.parent).st_dev == os.stat(root).st_dev:
            beside.mkdir(exist_ok=True)
            return beside
    inside.mkdir(exist_ok=True)
    return inside


def host_name() -> str:
    """This host's name as it appears in work folders' names."""
    return sanitize_name(socket.gethostname())


def work_dir_name(prefix: str, tag: str | None = None) -> str:
    """A work folder's name, ``<prefix><host>~<pid>~<tag>``: who made it, so a later process can
    tell when its maker is gone. ``tag`` defaults to a fresh uuid."""
    return f"{prefix}{host_name()}~{os.getpid()}~{tag if tag is not None else uuid.uuid4().hex}"


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host runs (one of another user counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_stale_work_dir(p: Path, host: str) -> bool:
    """A ``ingest-*`` / ``deleting-*`` work directory whose process is gone (this host's,
    ``<prefix><host>~<pid>~<uuid>``), or another host's (or unknown) older than a day."""
    name = p.name.lstrip(".")
    if not (name.startswith(INGEST_PREFIX) or name.startswith(DELETE_PREFIX)):
        return False
    parts = name.split("~")
    if len(parts) == 3 and parts[0].endswith(host) and parts[1].isdigit():
        return not pid_alive(int(parts[1]))
    try:
        return time.time() - p.stat().st_mtime >= _STALE_SECONDS
    except OSError:
        return True


def staging_debris(root: Path) -> list[Path]:
    """Work directories of ingests and deletes whose process is gone (this host's), or
    another host's older than a day."""
    host = host_name()
    # the store root too: earlier versions staged in ".ingest-*" directories there
    places = [d for d in (*staging_candidates(root), root) if d.is_dir()]
    return [p for place in places for p in sorted(place.iterdir()) if is_stale_work_dir(p, host)]
