"""One way to open a store: a folder store (:class:`~regime_dash.store.run_store.RunStore`) or a
Delta Lake store (:class:`~regime_dash.store.delta.DeltaRunStore`), by its location.

- Any URI (``s3://``, ``gs://``, ``az://``, ``file://``) is a Delta store: object storage has no
  rename and no flock, which the folder store rests on.
- A local path that holds a Delta store (its ``runs`` or ``rows`` table) is one.
- A local path that holds a folder store (its ``run=*`` folders, lock or layouts) stays one,
  whatever the format asked (``store migrate`` converts it).
- A new local store gets :data:`DEFAULT_FORMAT` unless the user asks for the other
  (``--store-format delta|folder`` or ``REGIME_DASH_STORE_FORMAT``). The default stays ``folder``
  while the dashboard's first chart of a run on a Delta store is slower than on a folder store
  (the first use of the Delta tables in the server, 0.1–0.3 s; docs/BENCHMARKS.md); every shell
  opens its store here, so flipping the constant flips them all.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from regime_dash.errors import StoreError, ValidationError
from regime_dash.store.location import ENV_VAR, StoreLocation, is_uri, parse_location

__all__ = ["DEFAULT_FORMAT", "FORMAT_ENV_VAR", "FORMATS", "is_delta_folder", "open_delta_store", "open_store",
           "store_format"]

#: The environment variable choosing the format of a new local store.
FORMAT_ENV_VAR = "REGIME_DASH_STORE_FORMAT"
#: The formats a store can have.
FORMATS = ("folder", "delta")
#: The format of a new local store when none is asked.
DEFAULT_FORMAT = "folder"
#: The keywords only a Delta store takes.
_DELTA_ONLY = ("retention_hours", "vacuum_every_hours")


def store_format(asked: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """The format a new local store gets: ``asked``, else ``$REGIME_DASH_STORE_FORMAT``, else :data:`DEFAULT_FORMAT`.

    Raises
    ------
    ValidationError
        A format other than ``folder`` or ``delta``, named.
    """
    env = os.environ if env is None else env
    fmt = (asked or env.get(FORMAT_ENV_VAR) or DEFAULT_FORMAT).strip().lower()
    if fmt not in FORMATS:
        raise ValidationError(f"store format {fmt!r} is not one of {', '.join(FORMATS)}", field="store_format",
                              value=fmt)
    return fmt


def is_delta_folder(path: str | os.PathLike) -> bool:
    """Whether the local folder ``path`` holds a Delta store (the log of its catalogue or rows table)."""
    root = Path(path)
    return any((root / table / "_delta_log").is_dir() for table in ("runs", "rows"))


def _holds_folder_store(path: Path) -> bool:
    if not path.is_dir():
        return False
    return any(p.name.startswith("run=") or p.name in (".lock", "_layouts.json") for p in path.iterdir())


def open_store(location: str | os.PathLike | StoreLocation | None = None,
               storage_options: Iterable[str] | Mapping[str, str] | None = None, *,
               store_format_asked: str | None = None, **kw: Any):
    """The store at ``location`` (default ``$REGIME_DASH_STORE``, else ``data/store``).

    Parameters
    ----------
    location
        A local path, a URI or a :class:`~regime_dash.store.location.StoreLocation` (a store
        already open is returned as it is).
    storage_options
        ``KEY=VALUE`` texts or a mapping, for a store on object storage.
    store_format_asked
        ``"folder"`` or ``"delta"``: the format of a new local store (see :func:`store_format`).
    kw
        The store's own keywords (``chunk_bytes``, ``max_line_bytes``; a Delta store's
        ``retention_hours`` and ``vacuum_every_hours``, which a folder store has no use for).

    Raises
    ------
    StoreError
        An unknown URI scheme (named), or storage options given for a local folder.
    ValidationError
        A bad ``KEY=VALUE`` option or store format, named.
    """
    if hasattr(location, "list_runs") and hasattr(location, "ingest"):
        return location  # a store already open
    fmt = store_format(store_format_asked)
    where = parse_location(location, storage_options)
    uri = not where.is_local or is_uri(os.environ.get(ENV_VAR) if location is None else location)
    if uri or (where.is_local and _delta_wanted(where.path, fmt)):
        from regime_dash.store.delta import DeltaRunStore

        return DeltaRunStore(where, **kw)
    from regime_dash.store.run_store import RunStore

    return RunStore(where.path, **{k: v for k, v in kw.items() if k not in _DELTA_ONLY})


def open_delta_store(location: str | os.PathLike | StoreLocation,
                     storage_options: Iterable[str] | Mapping[str, str] | None = None, **kw: Any):
    """The Delta store at ``location`` (made on first write), for ``store migrate``'s target.

    Raises
    ------
    StoreError
        ``location`` is a local folder that holds a folder store.
    """
    from regime_dash.store.delta import DeltaRunStore

    where = parse_location(location, storage_options)
    if where.is_local and not is_delta_folder(where.path) and _holds_folder_store(where.path):
        raise StoreError(f"{where.uri!r} holds a folder store: a Delta store goes to a new path or a URI",
                         path=where.uri)
    return DeltaRunStore(where, **kw)


def _delta_wanted(path: Path, fmt: str) -> bool:
    if is_delta_folder(path):
        return True
    return fmt == "delta" and not _holds_folder_store(path)
