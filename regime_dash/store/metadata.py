"""A stored run's ``_meta.json``: written, read, listed, changed, and the names it gives the run.

``_meta.json`` holds what an ingest learned (source, sha256, counts, columns, step range,
ingest time) and what a person adds (``tags``, ``notes``, a new ``name``; ``aliases``, the
other names the same bytes were ingested under). A run exists for readers exactly when its
folder has a readable ``_meta.json``. Every change replaces the file in one rename, so a
reader never sees half of it; changes made after the run's commit hold the store's lock
(:class:`~regime_dash.store.lock.StoreLock`).
"""
from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from regime_dash.errors import StoreError
from regime_dash.ingest.diag_rows import meta_reason
from regime_dash.store.failures import os_error_text, reading
from regime_dash.store.lock import StoreLock
from regime_dash.store.paths import META, run_dir, run_dirs, run_id_of

if TYPE_CHECKING:
    from regime_dash.ingest import IngestReport

__all__ = ["DASHBOARD_FILE", "FORMAT_VERSION", "add_alias", "content_version", "dashboard_url", "existing_dir",
           "find_sha", "fsync_dir", "holder_of", "ingest_meta", "list_runs", "now", "read_meta", "record_dashboard_url",
           "replace_json", "resolve_among", "resolve_ref", "run_entry", "run_meta", "update_meta", "write_json"]

#: The version of the run folder's format, recorded in every ``_meta.json``.
FORMAT_VERSION = 1
#: The file at the store's root where a dashboard serving the store records its URL
#: (``{"url": ...}``): a follower of the same store links its alerts there.
DASHBOARD_FILE = "_dashboard.json"


def now() -> str:
    """The time now, UTC, as ISO 8601 with milliseconds (the metadata's timestamps)."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def write_json(path: Path, obj: Any) -> None:
    """``obj`` written to ``path`` as JSON and made durable (``fsync``)."""
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=1, allow_nan=False, default=str)
        fh.flush()
        os.fsync(fh.fileno())


def replace_json(path: Path, obj: Any) -> None:
    """A JSON file (``_meta.json``) replaced in one rename, so a reader never sees half of it."""
    tmp = path.with_name(path.name + ".tmp")
    write_json(tmp, obj)
    os.replace(tmp, path)


def fsync_dir(path: Path) -> None:
    """A folder's entries made durable (a rename into it survives a power cut); best effort."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def read_meta(folder: Path) -> dict[str, Any] | None:
    """A run directory's ``_meta.json``, or None when it is missing or unreadable."""
    return read_meta_file(folder / META)


def read_meta_file(path: Path) -> dict[str, Any] | None:
    """A JSON object file of the store, or None when it is missing, unreadable or not an object."""
    try:
        m = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return m if isinstance(m, dict) else None


def run_entry(m: dict[str, Any]) -> dict[str, Any]:
    """A run's row of ``runs`` from its metadata (the keys of :meth:`RunStore.list_runs`), in either store."""
    return {
        "run_id": m.get("run_id"),
        "name": m.get("name"),
        "rows": m.get("rows"),
        "rejected": m.get("rejected_count"),
        "first_step": m.get("first_step"),
        "last_step": m.get("last_step"),
        "ingested_at": m.get("ingested_at"),
        "source": m.get("source"),
        "sha256": m.get("sha256"),
        "not_diag": meta_reason(m),
        "aliases": list(m.get("aliases") or []),
        "tags": list(m.get("tags") or []),
        "notes": m.get("notes") or "",
    }


def list_runs(root: Path) -> list[dict[str, Any]]:
    """Every run of the store at ``root``, oldest ingest first (see :meth:`RunStore.list_runs`)."""
    out = [{**run_entry(m), "run_id": m.get("run_id") or run_id_of(d)}
           for d in run_dirs(root) if (m := read_meta(d)) is not None]
    out.sort(key=lambda r: (r["ingested_at"] or "", r["run_id"]))
    return out


def find_sha(root: Path, sha: str) -> str | None:
    """The run holding content with sha256 ``sha``, else None."""
    for d in run_dirs(root):
        m = read_meta(d)
        if m is not None and m.get("sha256") == sha:
            return m.get("run_id") or run_id_of(d)
    return None


def existing_dir(root: Path, run_id: str) -> Path:
    """The folder of a stored run.

    Raises
    ------
    StoreError
        An invalid id, or no run has it (the message lists some that exist).
    """
    d = run_dir(root, run_id)
    if not (d / META).is_file():
        known = ", ".join(r["run_id"] for r in list_runs(root)[:10]) or "none"
        raise StoreError(f"no run {run_id!r} in {root} (runs: {known})", run_id=run_id, path=str(root))
    return d


def run_meta(root: Path, run_id: str) -> dict[str, Any]:
    """The run's ``_meta.json`` as a dict; a missing run or a damaged file raises :class:`StoreError`."""
    d = existing_dir(root, run_id)
    with reading(root, run_id) as part:
        part[0] = d / META
        return json.loads((d / META).read_text(encoding="utf-8"))


def record_dashboard_url(root: Path, url: str) -> None:
    """Record ``url`` as the dashboard serving the store at ``root`` (replacing any recorded before)."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise StoreError(f"a dashboard URL must start with http:// or https://, got {url!r}", path=str(root))
    try:
        root.mkdir(parents=True, exist_ok=True)
        replace_json(root / DASHBOARD_FILE, {"url": url.rstrip("/")})
    except OSError as e:
        raise StoreError(f"cannot record the dashboard URL in {str(root)!r}: {os_error_text(e)}",
                         path=str(root)) from None


def dashboard_url(root: Path) -> str | None:
    """The URL the store's dashboard recorded (:func:`record_dashboard_url`), or None when none did."""
    m = read_meta_file(root / DASHBOARD_FILE)
    url = m.get("url") if m else None
    return url if isinstance(url, str) and url.startswith(("http://", "https://")) else None


#: The ``_meta.json`` keys whose values change exactly when the run's rows do (a follow's commit
#: grows ``rows``, ``lines`` and ``last_step``; a run deleted and ingested again has a new time).
_CONTENT_KEYS = ("ingested_at", "sha256", "rows", "lines", "first_step", "last_step")


def content_version(meta: dict[str, Any]) -> str:
    """A short token of a run's rows as its metadata ``meta`` describes them: equal tokens, equal rows
    (labels, notes and alerts do not change it). ``_meta.json`` is written after the rows a commit adds,
    so rows read after the token hold at least the ``rows`` it names."""
    return json.dumps([meta.get(k) for k in _CONTENT_KEYS], separators=(",", ":"), default=str)


def update_meta(root: Path, run_id: str, change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    """Change a run's ``_meta.json`` under the store's lock (see :meth:`RunStore.update_meta`)."""
    d = existing_dir(root, run_id)
    try:
        with StoreLock(root):
            meta = run_meta(root, run_id)
            change(meta)
            replace_json(d / META, meta)
    except OSError as e:
        raise StoreError(f"cannot update run {run_id!r} in {str(root)!r}: {os_error_text(e)}; the run is "
                         "unchanged", run_id=run_id, path=str(root)) from None
    return meta


def resolve_ref(root: Path, ref: str) -> tuple[str, str]:
    """The run id ``ref`` names and how: ``"id"``, ``"name"`` or ``"alias"`` (see :meth:`RunStore.resolve`)."""
    return resolve_among(list_runs(root), ref, str(root))


def resolve_among(runs: list[dict[str, Any]], ref: str, where: str) -> tuple[str, str]:
    """The run of ``runs`` (``list_runs`` entries of store ``where``) that ``ref`` names, and how:
    its id, else the one name or alias that is ``ref``.

    Raises
    ------
    StoreError
        No run, or several, go by ``ref``.
    """
    ref = str(ref)
    if any(r["run_id"] == ref for r in runs):
        return ref, "id"
    for how, holders in (("name", [r["run_id"] for r in runs if r["name"] == ref]),
                         ("alias", [r["run_id"] for r in runs if ref in r["aliases"]])):
        if len(holders) == 1:
            return holders[0], how
        if holders:
            raise StoreError(f"run {how} {ref!r} is ambiguous: {len(holders)} runs have it "
                             f"({', '.join(holders)}); give the full id", run_id=ref, path=where)
    known = ", ".join(f"{r['name']} ({r['run_id']})" for r in runs[:10]) or "none"
    raise StoreError(f"no run named {ref!r} in store {where!r} (runs: {known})", run_id=ref, path=where)


def holder_of(root: Path, name: str, *, besides: str | None = None) -> str | None:
    """The run (other than ``besides``) whose id, name or alias is ``name``, else None."""
    for r in list_runs(root):
        if r["run_id"] != besides and name in (r["run_id"], r["name"], *r["aliases"]):
            return r["run_id"]
    return None


def add_alias(root: Path, run_id: str, name: str) -> tuple[dict[str, Any], str | None, str | None]:
    """``name`` made an alias of run ``run_id`` (bytes ingested again under it), unless it is the run's
    own name or alias already, or another run holds it (the caller holds the lock).

    Returns ``(the run's metadata, the alias added or None, the run holding the name or None)``.
    """
    meta = run_meta(root, run_id)
    added = taken = None
    if name != meta.get("name") and name not in meta.get("aliases", []):
        taken = holder_of(root, name, besides=run_id)
        if taken is None:
            meta["aliases"] = sorted({*meta.get("aliases", []), name})
            replace_json(run_dir(root, run_id) / META, meta)
            added = name
    return meta, added, taken


def ingest_meta(run_id: str, run_name: str, source_name: str | None, report: IngestReport,
                columns: dict[str, str]) -> dict[str, Any]:
    """The ``_meta.json`` of a run an ingest made from ``report``, with its settled ``columns``."""
    return {
        "format_version": FORMAT_VERSION,
        "run_id": run_id,
        "name": run_name,
        "source": source_name,
        "sha256": report.sha256 or "",
        "source_bytes": report.source_bytes,
        "content_bytes": report.content_bytes,
        "gzip": report.gzip,
        "truncated_gzip": report.truncated_gzip,
        "lines": report.lines,
        "rows": report.rows,
        "blank_lines": report.blank_lines,
        "rejected_count": report.rejected_count,
        "aside_count": report.aside_count,
        "coerced": report.coerced,
        "columns": columns,
        "first_step": report.first_step,
        "last_step": report.last_step,
        "ingested_at": now(),
    }
