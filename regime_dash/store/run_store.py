"""The Parquet run store: one immutable, hive-style directory per ingested run.

Layout (see docs/CONTRACTS.md, "Run store")::

    <store>/
      run=<run_id>/
        part-00000.parquet      good rows, flattened dotted columns, plus ``_line``
        part-00001.parquet      a new part starts where a chunk's schema differs
        _meta.json              source, sha256, counts, columns, step range, ingest time
        _rejects.jsonl          one {"line", "reason", "raw"} object per rejected line
        _conflicts.jsonl        one {"line", "field", "value", "type"} per value set aside
      .lock                     serializes the commit step of concurrent ingests
      _layouts.json             named chart layouts (regime_dash.store.layouts)
    .<store>.staging/           beside the store, on the same file system:
      ingest-<host>~<pid>~<uuid>/   work in progress (renamed into place when done)
      deleting-<host>~<pid>~<uuid>/ a run being deleted

Work in progress lives outside the store directory, where no reader's glob reaches
(DuckDB's ``<store>/**/*.parquet`` descends into dot directories). Where the store is
a mount point (its parent is another file system, so a rename could not cross), the
staging directory is ``<store>/.staging`` and parts are written as ``*.parquet.tmp``,
renamed just before the run directory is: no glob for ``*.parquet`` matches a file
still being written. Names starting with ``_`` or ``.`` are skipped by Arrow and Spark
dataset readers, so the store reads as one table (with a ``run`` partition column).

Guarantees
----------
Atomic
    An ingest writes everything into a ``.ingest-*`` directory and renames it to
    ``run=<id>`` as its last step. A killed ingest leaves only the dot directory, which
    readers skip and the next ingest removes (when its process is gone).
Idempotent
    Runs are keyed by the sha256 of the decompressed content: ingesting the same bytes
    again (under any name, plain or gzip) returns the existing run as ``duplicate_of``;
    a name it has not had becomes an alias of that run (``aliases`` in ``_meta.json``),
    which :meth:`RunStore.resolve` accepts as it does the run's name.
Concurrent
    Parsing runs without a lock; the duplicate check and the rename run under an
    exclusive ``flock`` on ``<store>/.lock`` (:class:`~regime_dash.store.lock.StoreLock`),
    so two ingests of the same bytes give one run and two ingests of different files both
    land; a process killed while it holds the lock releases it with its death.
Safe names
    Run ids are ``<name>-<sha256[:12]>`` where the name is reduced to
    ``[A-Za-z0-9._-]`` (no leading dot or dash, at most 64 characters), so no name can
    escape the store or hide from readers. Every id given to ``load``/``delete`` is
    checked the same way. :meth:`RunStore.resolve` also accepts the name given at
    ingest, or an alias, where it is unique. A rename changes the name, never the id.
One type per column
    Every field of the diag contract has one canonical type in every run
    (:data:`regime_dash.ingest.CANONICAL_TYPES`); any other column keeps the first type
    the store saw for it, and later runs are cast to it. A value that does not fit
    losslessly is set aside (null in the column, kept exactly in ``_conflicts.jsonl``
    and counted in the ingest report). So the whole store reads as one typed table in
    pyarrow (``unify_schemas`` with default promotion), DuckDB (``union_by_name``) and
    Spark (``mergeSchema``).
Failures
    An I/O failure (disk full, permission denied, read-only volume) leaves the store as
    it was and raises one :class:`~regime_dash.errors.StoreError` saying what failed,
    where, and how much space the run needed.

The package's modules
---------------------
:class:`RunStore` is the one door users and the shells use; the work is done by
:mod:`~regime_dash.store.paths` (ids, folders, staging), :mod:`~regime_dash.store.lock`,
:mod:`~regime_dash.store.writer` (an ingest staged and committed, a delete),
:mod:`~regime_dash.store.parts` (Parquet parts written), :mod:`~regime_dash.store.reader`
(tables, frames, rejects, the store's schema), :mod:`~regime_dash.store.metadata`
(``_meta.json``, listing and naming runs), :mod:`~regime_dash.store.quarantine` and
:mod:`~regime_dash.store.failures` (I/O failures said in one line).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import pyarrow as pa

from regime_dash.errors import IngestError, StoreError
from regime_dash.ingest import DEFAULT_MAX_LINE_BYTES
from regime_dash.store import metadata, quarantine, reader, writer
from regime_dash.store.ingest_result import IngestResult
from regime_dash.store.lock import StoreLock
from regime_dash.store.paths import (
    CONFLICTS,
    ENV_VAR,
    PARTITION,
    REJECTS,
    default_store,
    sanitize_name,
    staging_debris,
    staging_dir,
)
from regime_dash.store.writer import MAX_COLUMNS

if TYPE_CHECKING:  # pyarrow.dataset loads pandas: only readers of the whole store pay for it
    import pyarrow.dataset as ds

__all__ = ["ENV_VAR", "IngestResult", "MAX_COLUMNS", "PARTITION", "RunStore", "default_store", "resolve_target",
           "sanitize_name"]


def _needs_delta(root: Path, what: str) -> str:
    return (f"{what} needs a Delta store; {str(root)!r} is a folder store, whose deleted runs are gone. "
            f"`regime-dash store migrate {str(root)} NEW` copies it into a Delta store (a URI, or a new "
            "local path with --store-format delta)")


class RunStore:
    """A directory of ingested runs, readable as one hive-partitioned Parquet dataset.

    Parameters
    ----------
    root
        The store directory; created on first ingest. Defaults to :func:`default_store`.
    chunk_bytes
        Chunk size handed to :func:`regime_dash.ingest.iter_batches` (``None``: by the
        source's size).
    max_line_bytes
        Longest line an ingest reads; a longer one is rejected with its size, unread.
    """

    #: The store's format (``"folder"``; a Delta store's is ``"delta"``).
    format = "folder"
    #: Whether a deleted run can be restored (a Delta store's can; here a delete is final).
    keeps_removed_runs = False

    def __init__(self, root: str | os.PathLike | None = None, *,
                 chunk_bytes: int | None = None,
                 max_line_bytes: int = DEFAULT_MAX_LINE_BYTES):
        self.root = Path(root) if root is not None else default_store()
        self.chunk_bytes = chunk_bytes
        self.max_line_bytes = max_line_bytes
        self._schemas = reader.PartSchemas()  # each run's part schemas, read once (runs are immutable)

    def __repr__(self) -> str:
        return f"RunStore({str(self.root)!r})"

    # ------------------------------------------------------------------ paths, locks

    def lock(self) -> StoreLock:
        """The store's lock, to hold while committing a change (``with store.lock(): ...``).

        Not reentrant: code holding it calls no method that takes it again (``update_meta``,
        ``delete``, ``quarantine``, ``ingest``).
        """
        return StoreLock(self.root)

    def staging_dir(self) -> Path:
        """Where work in progress lives: beside the store on the same file system, else
        ``<store>/.staging`` (a store on a mount point of its own). Created if needed.

        Returns
        -------
        pathlib.Path
        """
        return staging_dir(self.root)

    def clean_stale(self) -> list[str]:
        """Remove work directories left by killed ingests (their process is gone).

        Only directories of this host whose process no longer runs are removed, so a
        concurrent ingest is never disturbed. Called by every ingest.

        Returns
        -------
        list of str
            Names of the removed directories.
        """
        return writer.clean_stale(self.root)

    def staging_debris(self) -> list[Path]:
        """Work directories of ingests and deletes whose process is gone (this host's), or
        another host's older than a day: what :meth:`clean_stale` removes."""
        return staging_debris(self.root)

    # ----------------------------------------------------------------- run addressing

    def resolve(self, ref: str) -> str:
        """The run id a reference names: a run id, the run's name, or one of its aliases
        (a name it was ingested under again), when one run has it.

        Parameters
        ----------
        ref
            A full run id (``fold1-3f2a9c0b1d2e``), a run name (``fold1``) or an alias.

        Returns
        -------
        str
            The run id.

        Raises
        ------
        StoreError
            No run has that id, name or alias, or several runs have that name (the
            message lists their ids).
        """
        return self.resolve_ref(ref)[0]

    def resolve_ref(self, ref: str) -> tuple[str, str]:
        """:meth:`resolve`, and how ``ref`` named the run: ``"id"``, ``"name"`` or ``"alias"``."""
        return metadata.resolve_ref(self.root, ref)

    def holder_of(self, name: str, *, besides: str | None = None) -> str | None:
        """The run (other than ``besides``) whose id, name or alias is ``name``, else None."""
        return metadata.holder_of(self.root, name, besides=besides)

    # ------------------------------------------------------------------- metadata

    def update_meta(self, run_id: str, change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
        """Change a run's ``_meta.json`` under the store's lock: read it, ``change(meta)`` edits
        the dict in place, and the file is replaced in one rename (a reader never sees half of
        it, and a follower committing meanwhile keeps the change: it too reads the metadata
        under the lock). Returns the new metadata.

        Raises
        ------
        StoreError
            Unknown run, or the store cannot be written (the run is left as it was).
        """
        return metadata.update_meta(self.root, run_id, change)

    def list_runs(self) -> list[dict[str, Any]]:
        """Every run, oldest ingest first.

        Returns
        -------
        list of dict
            ``name``, ``run_id``, ``rows``, ``rejected``, ``first_step``, ``last_step``,
            ``ingested_at``, ``source``, ``sha256``, ``not_diag``: why the run is not a
            diag (:func:`regime_dash.ingest.diag_rows.meta_reason`; a run an older version
            stored can be none), ``None`` for a diag; ``aliases`` (other names the same bytes
            were ingested under), ``tags`` and ``notes`` (:mod:`regime_dash.store.labels`).
        """
        return metadata.list_runs(self.root)

    def meta(self, run_id: str) -> dict[str, Any]:
        """The run's ``_meta.json`` as a dict.

        Raises
        ------
        StoreError
            Unknown or invalid run id.
        """
        return metadata.run_meta(self.root, run_id)

    def content_version(self, run_id: str) -> str:
        """A token that changes exactly when the run's rows change (a follow's commit, a delete and a
        new ingest): a cache of anything read from the run keys on it
        (:func:`regime_dash.store.metadata.content_version`). One small file read.

        Raises
        ------
        StoreError
            Unknown or invalid run id.
        """
        return metadata.content_version(self.meta(run_id))

    def record_dashboard_url(self, url: str) -> None:
        """Record ``url`` as the dashboard serving this store: a follower of the store links its alerts
        there (:meth:`dashboard_url`). A dashboard records itself when it starts.

        Raises
        ------
        StoreError
            ``url`` is not an http(s) URL, or the store cannot be written.
        """
        metadata.record_dashboard_url(self.root, url)

    def dashboard_url(self) -> str | None:
        """The URL the store's dashboard recorded (:meth:`record_dashboard_url`), None when none did."""
        return metadata.dashboard_url(self.root)

    # ------------------------------------------------------------------------ ingest

    def column_types(self) -> dict[str, pa.DataType]:
        """The storage type of every column the store holds: the canonical type of a diag
        contract field, else the type of the first run (oldest ingest) that has values
        for it.

        Returns
        -------
        dict
            Column name -> Arrow type (the ``run`` key and ``_line`` excluded).
        """
        return self._schemas.column_types(self.root)

    def ingest(self, path_or_bytes: Any, *, name: str | None = None,
               source_name: str | None = None,
               progress: Callable[[int, int | None], None] | None = None) -> IngestResult:
        """Parse a diag.jsonl source and store it as a new run (or find it stored).

        Parameters
        ----------
        path_or_bytes
            A path, bytes, or a binary stream; plain or gzip.
        name
            Run name (sanitized); defaults to the source file name without extensions.
        source_name
            What to record as the source (e.g. an upload's file name); defaults to the
            path's file name.
        progress
            Called as ``progress(done_bytes, total_bytes)`` after each chunk (total may
            be ``None`` for a stream of unknown size).

        Returns
        -------
        IngestResult

        Raises
        ------
        IngestError
            The source cannot be read; :class:`~regime_dash.errors.NotDiagError` when it is
            not a diag (:mod:`regime_dash.ingest.diag_rows`: no JSON object line, no line
            with a diag field, no ``step``). A diag's JSON object lines without a diag
            field are quarantined as rejected lines.
        StoreError
            The store cannot be written (its message says what failed, where, and how
            much space the run needed); the store is left as it was.
        """
        return writer.ingest(self.root, path_or_bytes, name=name, source_name=source_name, schemas=self._schemas,
                             chunk_bytes=self.chunk_bytes, max_line_bytes=self.max_line_bytes, progress=progress)

    # ------------------------------------------------------------------------- read

    def rejects(self, run_id: str) -> list[dict[str, Any]]:
        """The run's rejected lines: ``[{"line", "reason", "raw"[, "raw_base64"]}, ...]``."""
        return reader.read_jsonl(self.root, run_id, REJECTS)

    def conflicts(self, run_id: str) -> list[dict[str, Any]]:
        """The run's values set aside: ``[{"line", "field", "value", "type"}, ...]``."""
        return reader.read_jsonl(self.root, run_id, CONFLICTS)

    def parts(self, run_id: str) -> list[Path]:
        """The run's Parquet files, in write order."""
        return reader.run_parts(self.root, run_id)

    def load_table(self, run_id: str, columns: Sequence[str] | None = None, *, narrow: bool = False) -> pa.Table:
        """The run as one Arrow table, types unified across parts, in file order.

        Parameters
        ----------
        run_id
            The run.
        columns
            Columns to read (dotted names); all when ``None``.
        narrow
            Each float64 column whose every value is a float32 as float32 (:meth:`load`'s), read a few
            row groups at a time: the run's float64 copy is never held whole.

        Returns
        -------
        pyarrow.Table

        Raises
        ------
        StoreError
            Unknown run, or a requested column the run does not have.
        """
        return reader.load_table(self.root, run_id, columns, narrow=narrow)

    def load(self, run_id: str, columns: Sequence[str] | None = None, *, narrow: bool = False):
        """The run as a pandas DataFrame sorted by ``step`` (stable, so file order breaks
        ties), with a fresh index.

        Parameters
        ----------
        run_id
            The run.
        columns
            Columns to return (dotted names); all (including ``_line``) when ``None``.
        narrow
            Give a float64 column whose every value is a float32 (the diag's ISV slots, stored
            from JSON as doubles) as float32: the same values in half the memory, in the dtype a
            replay frame has. A column with any other value stays float64.

        Returns
        -------
        pandas.DataFrame
        """
        return reader.load_frame(self.root, run_id, columns, narrow=narrow)

    def schema(self) -> pa.Schema:
        """The unified schema of the whole store (every part footer, joined by name).

        Returns
        -------
        pyarrow.Schema
            With the ``run`` partition column last.
        """
        return reader.store_schema(self.root)

    def open_dataset(self) -> ds.Dataset:
        """The whole store as one ``pyarrow.dataset.Dataset``, unified by column name.

        Columns a run lacks read as null; a column whose type differs between runs is
        read as the :func:`regime_dash.ingest.unify_types` join (int64+float64 ->
        float64; other conflicts -> string, via Arrow's cast). The ``run`` column is the
        hive partition key.

        The same store from DuckDB and pandas (``'{store}/**/*.parquet'`` works as well:
        work in progress never lies under the store directory)::

            duckdb.sql(f"SELECT * FROM read_parquet('{store}/run=*/*.parquet', "
                       "hive_partitioning=true, union_by_name=true)")
            pandas.read_parquet(store, schema=RunStore(store).schema())

        Every column has one type in every run (see the module docstring), so
        ``pyarrow.unify_schemas`` with default promotion and Spark's
        ``mergeSchema=true`` read it too.

        Returns
        -------
        pyarrow.dataset.Dataset
        """
        return reader.open_dataset(self.root)

    # ----------------------------------------------------------------------- delete

    def delete(self, run_id: str) -> None:
        """Remove a run. The directory is renamed away first, so readers never see half
        a run.

        Raises
        ------
        StoreError
            Unknown or invalid run id.
        """
        writer.delete_run(self.root, run_id)

    # ------------------------------------------------- undo and maintenance (a Delta store's)

    def removed_runs(self) -> list[dict[str, Any]]:
        """Refused: a folder store keeps no removed run (a Delta store does)."""
        raise StoreError(_needs_delta(self.root, "listing removed runs"), path=str(self.root))

    def restore(self, ref: str) -> str:
        """Refused: a deleted run of a folder store is gone (a Delta store keeps it restorable)."""
        raise StoreError(_needs_delta(self.root, f"restoring run {str(ref)!r}"), run_id=str(ref), path=str(self.root))

    def maintain(self, *, force: bool = False) -> dict[str, Any]:
        """Refused: a folder store has no old versions to vacuum."""
        raise StoreError(_needs_delta(self.root, "vacuuming"), path=str(self.root))

    # ------------------------------------------------------------ followed runs, layouts

    def followed_run(self, source: str | os.PathLike, name: str):
        """The followed run of ``source`` under ``name`` in this store (created or resumed):
        :class:`~regime_dash.store.append.FollowedRun`."""
        from regime_dash.store.append import FollowedRun

        return FollowedRun.open(self, source, name)

    def rows_after(self, run_id: str, line: int) -> tuple[pa.Table | None, int]:
        """A growing run's rows past file line ``line``, and the line they reach
        (:func:`regime_dash.store.append.rows_after`)."""
        from regime_dash.store.append import rows_after

        return rows_after(self, run_id, line)

    def follow_status(self) -> dict[str, dict[str, Any]]:
        """The followed runs' states by run id (:func:`regime_dash.store.append.follow_status`)."""
        from regime_dash.store.append import follow_status

        return follow_status(self)

    @property
    def layouts(self):
        """The store's named chart layouts (:class:`regime_dash.store.layouts.Layouts`)."""
        from regime_dash.store import layouts

        return layouts.Layouts(self, layouts)

    # ------------------------------------------------------------------- quarantine

    def orphan_dirs(self) -> list[Path]:
        """Run directories no reader lists (no readable ``_meta.json``) whose parts a
        ``**/*.parquet`` or ``run=*/*.parquet`` glob still reads."""
        return quarantine.orphan_dirs(self.root)

    def quarantine(self, path: Path, why: str) -> Path:
        """Move ``path`` (in the store or its staging) to ``<store>/_quarantine/``; nothing
        is deleted. Its Parquet files are renamed ``*.parquet.quarantined`` first, so no
        ``*.parquet`` glob (DuckDB's ``<store>/**/*.parquet`` descends into every folder)
        reads them; a symlink is moved as the link, its target untouched. A ``_why.txt``
        beside it says where it came from and why.

        Returns
        -------
        pathlib.Path
            Where it lies now.
        """
        return quarantine.quarantine(self.root, path, why)


_PATH_SUFFIXES = (".jsonl", ".json", ".ndjson", ".gz", ".parquet", ".txt")


def resolve_target(target: str, store: str | os.PathLike | None = None) -> tuple[str, str]:
    """What a command-line target names: a file, or a run in the store.

    An existing file wins; otherwise the store is asked (a run id, or a unique run
    name). A target that names neither is a missing file when it looks like a path
    (it has a directory part or a data-file suffix), else a missing run.

    Parameters
    ----------
    target
        A path, a run id or a run name.
    store
        The store, open (a folder or a Delta store), or a folder store's directory (default:
        :func:`default_store`).

    Returns
    -------
    ("file", path) or ("run", run_id)

    Raises
    ------
    IngestError
        A path that does not exist (or is a directory).
    StoreError
        No run has that id or name, or the name is ambiguous.
    """
    target = str(target)
    p = Path(target)
    if p.is_file():
        return "file", target
    try:
        runs = store if hasattr(store, "resolve") else RunStore(store)
        return "run", runs.resolve(target)
    except StoreError as e:
        if p.is_dir():
            raise IngestError(f"{target!r} is a directory, not a diag file or a run", path=target) from None
        if "/" in target or os.sep in target or target.lower().endswith(_PATH_SUFFIXES):
            raise IngestError(f"no such file: {target!r} (nor a run of that name in the store)",
                              path=target) from None
        raise e from None
