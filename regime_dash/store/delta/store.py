"""``DeltaRunStore``: the run store on Delta Lake tables, on a local disk or on object storage.

The same public methods, results and exceptions as :class:`regime_dash.store.run_store.RunStore`
(ingest, list_runs, resolve, meta, update_meta, rejects, conflicts, load_table, load, schema,
column_types, open_dataset, delete), plus ``restore`` and ``removed_runs`` (undo within the
retention window) and ``maintain`` (compaction and vacuum on the user's schedule). The tables
and the protocol are described in :mod:`regime_dash.store.delta`.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import tempfile
import uuid
from typing import Any, Callable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from regime_dash.errors import StoreError
from regime_dash.ingest import CANONICAL_TYPES, DEFAULT_MAX_LINE_BYTES, LINE_COLUMN, report_reason, require_diag
from regime_dash.store.delta import catalogue as cat
from regime_dash.store.delta.documents import Documents
from regime_dash.store.delta.parts import Part, write_table
from regime_dash.store.delta.records import REJECTS_SCHEMA, rejects_table
from regime_dash.store.delta.tables import PARTITION, Tables, commit_files, partition_files, table_schema
from regime_dash.store.location import StoreLocation, parse_location
from regime_dash.store.metadata import resolve_among, run_entry
from regime_dash.store.run_store import IngestResult, sanitize_name

__all__ = ["DEFAULT_RETENTION_HOURS", "DEFAULT_VACUUM_EVERY_HOURS", "DeltaRunStore"]

ROWS, REJECTS, RUNS, SETTINGS = "rows", "rejects", "runs", "settings"
#: The settings document that holds the URL of the dashboard serving the store.
_DASHBOARD_KEY = "dashboard"
#: How long a removed run can be restored, and old versions read (Delta's default, 7 days).
DEFAULT_RETENTION_HOURS = 168.0
#: How often a writer vacuums the tables (files no version within the retention window reads).
DEFAULT_VACUUM_EVERY_HOURS = 24.0
_ROWS_BASE = pa.schema([(LINE_COLUMN, pa.int64()), (PARTITION, pa.string())])
_ROWS_CONFIG = {"delta.checkpointInterval": "20"}
_FORMAT_VERSION = 1
_NAME_MAX_ID = 160


def _name_from_source(source_name: str | None) -> str:
    base = os.path.basename(str(source_name or "").replace("\\", "/"))
    for ext in (".gz", ".jsonl", ".ndjson", ".json", ".txt"):
        if base.lower().endswith(ext):
            base = base[: -len(ext)]
    return base or "run"


def _check_id(run_id: Any) -> str:
    ok = (isinstance(run_id, str) and 0 < len(run_id) <= _NAME_MAX_ID and ".." not in run_id
          and run_id[0] not in ".-" and all(c.isascii() and (c.isalnum() or c in "._-") for c in run_id))
    if not ok:
        raise StoreError(f"invalid run id {run_id!r}: ids are [A-Za-z0-9._-], no '..', no leading dot or dash",
                         run_id=str(run_id))
    return run_id


class DeltaRunStore:
    """Runs in Delta Lake tables at a local path or an object store URI.

    Parameters
    ----------
    where
        A local path, a URI (``s3://``, ``gs://``, ``az://``, ``file://``) or a
        :class:`~regime_dash.store.location.StoreLocation`; default ``$REGIME_DASH_STORE``.
    storage_options
        ``KEY=VALUE`` texts or a mapping for delta-rs's object store (beyond the environment).
    chunk_bytes, max_line_bytes
        As :class:`~regime_dash.store.run_store.RunStore`'s.
    retention_hours
        How long a removed run stays restorable (and an old version readable); vacuum keeps every
        file a version this recent reads.
    vacuum_every_hours
        How often writers vacuum (``maintain`` runs it when due; ``None``: only when asked).
    """

    #: The store's format (``"delta"``; a folder store's is ``"folder"``).
    format = "delta"
    #: Whether a deleted run can be restored: within ``retention_hours`` (:meth:`restore`).
    keeps_removed_runs = True

    def __init__(self, where: str | os.PathLike | StoreLocation | None = None, *, storage_options=None,
                 chunk_bytes: int | None = None, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
                 retention_hours: float = DEFAULT_RETENTION_HOURS,
                 vacuum_every_hours: float | None = DEFAULT_VACUUM_EVERY_HOURS):
        self.root = parse_location(where, storage_options)
        self.chunk_bytes, self.max_line_bytes = chunk_bytes, max_line_bytes
        if not (isinstance(retention_hours, (int, float)) and retention_hours >= 0):
            raise StoreError(f"retention_hours must be hours >= 0, got {retention_hours!r}")
        self.retention_hours = float(retention_hours)
        self.vacuum_every_hours = vacuum_every_hours
        self.tables = Tables(self.root)
        self.catalogue = Documents(self.tables, RUNS)
        self.settings = Documents(self.tables, SETTINGS)

    def __repr__(self) -> str:
        return f"DeltaRunStore({self.root.describe()!r})"

    # ------------------------------------------------------------------ catalogue reads

    def runs_with_rows(self) -> set[str]:
        """The runs the rows table holds files of (from its log: no file is read)."""
        dt = self.tables.open(ROWS)
        if dt is None:
            return set()
        actions = pa.table(dt.get_add_actions(flatten=True))
        if not actions.num_rows:
            return set()
        return set(pc.unique(actions.column(f"partition.{PARTITION}")).to_pylist())

    def visible_docs(self) -> dict[str, dict[str, Any]]:
        """The catalogue documents of the runs a reader sees, by run id."""
        docs = self.catalogue.read()
        rows = self.runs_with_rows() if cat.needs_rows_check(docs) else None
        return {d["meta"]["run_id"]: d for d in cat.visible(docs, rows)}

    def list_runs(self) -> list[dict[str, Any]]:
        """Every run a reader sees, oldest ingest first (the keys of :meth:`RunStore.list_runs`)."""
        out = [run_entry(d["meta"]) for d in self.visible_docs().values()]
        out.sort(key=lambda r: (r["ingested_at"] or "", r["run_id"]))
        return out

    def _unknown(self, run_id: str) -> StoreError:
        known = ", ".join(r["run_id"] for r in self.list_runs()[:10]) or "none"
        return StoreError(f"no run {run_id!r} in {self.root.describe()} (runs: {known})", run_id=run_id,
                          path=self.root.uri)

    def meta(self, run_id: str) -> dict[str, Any]:
        """The run's metadata (the folder store's ``_meta.json``)."""
        _check_id(run_id)
        d = self.visible_docs().get(run_id)
        if d is None:
            raise self._unknown(run_id)
        return d["meta"]

    def resolve(self, ref: str) -> str:
        """The run id ``ref`` names: an id, a name or an alias one run has."""
        return self.resolve_ref(ref)[0]

    def resolve_ref(self, ref: str) -> tuple[str, str]:
        """:meth:`resolve`, and how ``ref`` named the run: ``"id"``, ``"name"`` or ``"alias"``."""
        return resolve_among(self.list_runs(), ref, self.root.uri)

    def holder_of(self, name: str, *, besides: str | None = None) -> str | None:
        """The run (other than ``besides``) whose id, name or alias is ``name``, else None."""
        for r in self.list_runs():
            if r["run_id"] != besides and name in (r["run_id"], r["name"], *r["aliases"]):
                return r["run_id"]
        return None

    def update_meta(self, run_id: str, change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
        """Change a run's metadata: ``change(meta)`` edits it in place, committed as one catalogue
        version (done again on a fresh read when another writer committed first). Returns it."""
        _check_id(run_id)
        visible = self.visible_docs()
        if run_id not in visible:
            raise self._unknown(run_id)

        def edit(docs: dict[str, dict[str, Any]]) -> dict[str, Any]:
            d = docs.get(run_id)
            if d is None or d.get("state") not in cat.LISTED:
                raise StoreError(f"run {run_id!r} was removed meanwhile", run_id=run_id, path=self.root.uri)
            change(d["meta"])
            d["name"] = d["meta"].get("name")
            return d["meta"]

        return self.catalogue.change(edit, f"cannot update run {run_id!r}")

    # ------------------------------------------------------------------------ rows

    def column_types(self) -> dict[str, pa.DataType]:
        """The storage type of every column the store holds (the rows table's), the diag contract's
        canonical types over them."""
        dt = self.tables.open(ROWS)
        types = {} if dt is None else {f.name: f.type for f in table_schema(dt)
                                       if f.name not in (PARTITION, LINE_COLUMN)}
        types.update(CANONICAL_TYPES)
        return types

    def schema(self) -> pa.Schema:
        """The rows table's schema, the ``run`` partition column last."""
        dt = self.tables.open(ROWS)
        fields = [] if dt is None else [f for f in table_schema(dt) if f.name != PARTITION]
        return pa.schema([*fields, pa.field(PARTITION, pa.string())])

    def open_dataset(self):
        """The whole store's rows as one ``pyarrow.dataset.Dataset`` (through the Delta log: only
        committed files), with the ``run`` column."""
        import pyarrow.dataset as ds

        dt = self.tables.open(ROWS)
        if dt is None:
            return ds.dataset(pa.table({PARTITION: pa.array([], pa.string())}))
        return self.tables.dataset(dt)

    def files(self, run_id: str) -> list[str]:
        """The run's Parquet files, as paths relative to the rows table."""
        self.meta(run_id)
        dt = self.tables.open(ROWS)
        return sorted(f["path"] for f in partition_files(dt, run_id)) if dt is not None else []

    def load_table(self, run_id: str, columns: Sequence[str] | None = None, *, narrow: bool = False) -> pa.Table:
        """The run as one Arrow table in file-line order (``_line`` first, then the run's columns).

        Raises
        ------
        StoreError
            Unknown run, or a requested column the run does not have.
        """
        from regime_dash.store.delta.reading import read_run

        meta = self.meta(run_id)
        return read_run(self, run_id, meta, columns, narrow)

    def load(self, run_id: str, columns: Sequence[str] | None = None, *, narrow: bool = False):
        """The run as a pandas DataFrame sorted by ``step`` (then line), with a fresh index."""
        from regime_dash.store.delta.reading import sorted_frame

        want = None if columns is None else list(columns)
        read = want
        if want is not None:
            have = set(self.meta(run_id).get("columns", {})) | {LINE_COLUMN}
            read = want + [c for c in ("step", LINE_COLUMN) if c not in want and c in have]
        return sorted_frame(self.load_table(run_id, read, narrow=narrow), want)

    def rejects(self, run_id: str) -> list[dict[str, Any]]:
        """The run's rejected lines: ``[{"line", "reason", "raw"[, "raw_base64"]}, ...]``."""
        return self._records(run_id, "reject")

    def conflicts(self, run_id: str) -> list[dict[str, Any]]:
        """The run's values set aside: ``[{"line", "field", "value", "type"}, ...]``."""
        return self._records(run_id, "aside")

    def _records(self, run_id: str, kind: str) -> list[dict[str, Any]]:
        self.meta(run_id)
        dt = self.tables.open(REJECTS)
        if dt is None:
            return []
        t = self.tables.dataset(dt).to_table(columns=["line", "record"],
                                             filter=(pc.field(PARTITION) == run_id) & (pc.field("kind") == kind))
        t = t.sort_by([("line", "ascending")])
        return [json.loads(r) for r in t.column("record").to_pylist()]

    # ------------------------------------------------------------------------ ingest

    @contextlib.contextmanager
    def spool(self) -> Iterator[str]:
        """A local folder for a write's files before their commit: under ``_staging`` of a local store
        (the same file system: committing moves them), else a temporary folder."""
        if self.root.is_local:
            base = os.path.join(str(self.root.path), "_staging")
            os.makedirs(base, exist_ok=True)
            host = sanitize_name(socket.gethostname())
            path = os.path.join(base, f"ingest-{host}~{os.getpid()}~{uuid.uuid4().hex}")
            os.makedirs(path)
        else:
            path = tempfile.mkdtemp(prefix="regime-dash-spool-")
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)

    def ingest(self, path_or_bytes: Any, *, name: str | None = None, source_name: str | None = None,
               progress: Callable[[int, int | None], None] | None = None) -> IngestResult:
        """Parse a diag.jsonl source and store it as a new run (or find it stored), as
        :meth:`RunStore.ingest` does; the run appears in one commit of the rows table."""
        from regime_dash.store.delta.writing import commit_ingest, parse_into

        if source_name is None and isinstance(path_or_bytes, (str, os.PathLike)):
            source_name = os.path.basename(os.fspath(path_or_bytes))
        run_name = sanitize_name(name if name else _name_from_source(source_name))
        self.recover()
        with self.spool() as spool:
            try:
                report, parts, rejects = parse_into(self, path_or_bytes, spool, source_name, progress)
            except OSError as e:
                raise StoreError(f"cannot store the run in {self.root.describe()}: {e.strerror or e}. "
                                 "The store is unchanged.", path=self.root.uri) from None
            require_diag(source_name, report_reason(report))
            result = commit_ingest(self, report, parts, rejects, run_name, source_name, spool)
        self.maintain()
        return result

    # ------------------------------------------------------------------ remove, restore

    def delete(self, run_id: str) -> None:
        """Remove a run: it leaves ``runs`` in one catalogue commit, then its files leave the tables
        (restorable by :meth:`restore` within the retention window)."""
        from regime_dash.store.delta.undo import remove_run

        _check_id(run_id)
        if run_id not in self.visible_docs():
            raise self._unknown(run_id)
        remove_run(self, run_id)

    def removed_runs(self) -> list[dict[str, Any]]:
        """Runs removed within the retention window, newest removal first: their ``runs`` row with
        ``removed_at`` and ``restorable_until``."""
        from regime_dash.store.delta.undo import removed_runs

        return removed_runs(self)

    def restore(self, ref: str) -> str:
        """Bring back a removed run (by id, name or alias) from the version before its removal; returns
        its id. Raises :class:`StoreError` past the retention window, or when the name is taken."""
        from regime_dash.store.delta.undo import restore_run

        return restore_run(self, ref)

    def recover(self) -> list[str]:
        """Finish or undo what killed writers left (see :mod:`.catalogue`); returns the runs touched."""
        from regime_dash.store.delta.undo import recover

        return recover(self)

    def maintain(self, *, force: bool = False) -> dict[str, Any]:
        """Compact runs made of many small files and vacuum, when ``vacuum_every_hours`` has passed
        since the last vacuum (or ``force``). Returns what was done."""
        from regime_dash.store.delta.maintenance import maintain

        return maintain(self, force=force)

    def vacuum(self) -> dict[str, int]:
        """Vacuum every table now (files no version within ``retention_hours`` reads); returns the
        number of files removed by table."""
        from regime_dash.store.delta.maintenance import vacuum

        return vacuum(self)

    def orphan_dirs(self) -> list:
        """None: a Delta store's readers go through its log, so no folder is read unlisted."""
        return []

    # ------------------------------------------------------------ followed runs, layouts

    def followed_run(self, source: str | os.PathLike, name: str):
        """The followed run of ``source`` under ``name`` (created or resumed):
        :class:`~regime_dash.store.delta.follow.DeltaFollowedRun`."""
        from regime_dash.store.delta.follow import DeltaFollowedRun

        return DeltaFollowedRun.open(self, source, name)

    def rows_after(self, run_id: str, line: int) -> tuple[pa.Table | None, int]:
        """A growing run's rows past file line ``line``, and the line they reach."""
        from regime_dash.store.delta.follow import rows_after

        return rows_after(self, run_id, line)

    def follow_status(self) -> dict[str, dict[str, Any]]:
        """The followed runs' states by run id."""
        from regime_dash.store.delta.follow import follow_status

        return follow_status(self)

    def content_version(self, run_id: str) -> str:
        """A token that changes exactly when the run's rows change (as the folder store's, from its catalogue
        document: a follow's commit grows its rows and last step); a cache of the run's rows keys on it."""
        from regime_dash.store.metadata import content_version

        return content_version(self.meta(run_id))

    def record_dashboard_url(self, url: str) -> None:
        """Record ``url`` as the dashboard serving this store (a settings document): followers link alerts there."""
        from regime_dash.errors import StoreError

        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise StoreError(f"a dashboard URL must start with http:// or https://, got {url!r}", path=str(self.root))
        self.settings.change(lambda docs: docs.update({_DASHBOARD_KEY: {"url": url.rstrip("/")}}),
                             "cannot record the dashboard URL")

    def dashboard_url(self) -> str | None:
        """The URL the store's dashboard recorded (:meth:`record_dashboard_url`), None when none did."""
        url = self.settings.read().get(_DASHBOARD_KEY, {}).get("url")
        return url if isinstance(url, str) and url.startswith(("http://", "https://")) else None

    @property
    def layouts(self):
        """The store's named chart layouts (:class:`regime_dash.store.layouts.Layouts`)."""
        from regime_dash.store.delta import layouts
        from regime_dash.store.layouts import Layouts

        return Layouts(self, layouts)

    # ------------------------------------------------------------------ for the helpers

    def commit_rows(self, run_id: str, parts: Sequence[Part], *, metadata: dict[str, Any] | None = None,
                    txn: tuple[str, int] | None = None) -> int:
        """Commit a run's row files to the rows table (its schema widened first); returns the version."""
        self.tables.ensure(ROWS, _ROWS_BASE, [PARTITION], _ROWS_CONFIG)
        if not parts:
            return self.tables.open(ROWS).version()
        schema = _union_schema(parts)
        return commit_files(self.tables, ROWS, run_id, parts, schema, metadata=metadata, txn=txn)

    def commit_rejects(self, run_id: str, parts: Sequence[Part]) -> None:
        if parts:
            self.tables.ensure(REJECTS, pa.schema([*REJECTS_SCHEMA, pa.field(PARTITION, pa.string())]),
                               [PARTITION])
            commit_files(self.tables, REJECTS, run_id, parts, REJECTS_SCHEMA)

    def rejects_parts(self, spool: str, kind: str, records: Sequence[dict[str, Any]]) -> list[Part]:
        return write_table(os.path.join(spool, "rejects"), rejects_table(kind, records)) if records else []


def _union_schema(parts: Sequence[Part]) -> pa.Schema:
    import pyarrow.parquet as pq

    fields: dict[str, pa.Field] = {}
    for p in parts:
        for f in pq.read_schema(p.local):
            fields.setdefault(f.name, pa.field(f.name, f.type))
    return pa.schema(list(fields.values()))
