"""The store's Delta tables: where each lies, opened or created, and commits retried.

Every write of the store is one Delta commit (a log entry put only if its version is new:
a rename-if-absent on a local disk, a conditional put on object storage), so a reader
never sees half of one. Two kinds of commit are made here:

- *file commits* (:func:`commit_files`): Parquet files the store wrote itself are added
  (or removed) in one commit. On a local store the files are written straight under the
  table's folder and committed where they lie (no second write); on object storage the
  spooled local files are handed to delta-rs's writer, which uploads them.
- *replace commits* of the small document tables (:mod:`.documents`): read at version
  ``v``, commit at ``v + 1`` or fail (``max_commit_retries=0``), retried from a fresh
  read: a compare-and-swap on the whole table.
"""
from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence, TypeVar

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Field, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError
from deltalake.transaction import AddAction, RemoveAction, Transaction

from regime_dash.errors import StoreError
from regime_dash.store.location import StoreLocation

__all__ = ["ATTEMPTS", "PARTITION", "Part", "Tables", "TypeClash", "commit_files", "partition_files", "readd_actions",
           "remove_actions", "retry", "storage_type"]

#: The partition column of the rows and rejects tables.
PARTITION = "run"
#: Commits tried before a write gives up (each waits a little longer, with jitter).
ATTEMPTS = 400

T = TypeVar("T")


@dataclass(frozen=True)
class Part:
    """A Parquet file written for a table: its file name (committed as ``run=<id>/<name>``), the
    local file holding it, its rows, size and ``_line`` range (stats for file skipping)."""

    name: str
    local: str
    rows: int
    size: int
    min_line: int | None = None
    max_line: int | None = None


class Tables:
    """The Delta tables of one store location, by name (``rows``, ``rejects``, ``runs``, ``settings``)."""

    def __init__(self, location: StoreLocation):
        self.location = location

    def uri(self, name: str) -> str:
        return self.location.join(name)

    def local_dir(self, name: str) -> str:
        """The table's folder on a local store."""
        return os.path.join(str(self.location.path), name)

    def open(self, name: str, version: int | None = None) -> DeltaTable | None:
        """The table at its latest (or the given) version, ``None`` when it was never created."""
        try:
            return DeltaTable(self.uri(name), version=version, storage_options=self.location.options())
        except TableNotFoundError:
            return None
        except (DeltaError, OSError) as e:
            raise _store_error(self.location, f"cannot read table {name!r}", e) from None

    def dataset(self, dt: DeltaTable):
        """The table's files at ``dt``'s version as a ``pyarrow.dataset.Dataset``. On a local store the
        files are read by Arrow's own local file system: delta-rs's default hands Arrow's I/O threads a
        file system written in Python, and a process that ends while one of them waits for the
        interpreter is aborted ("terminate called without an active exception")."""
        if not self.location.is_local:
            return dt.to_pyarrow_dataset()
        from pyarrow import fs

        root = os.path.join(str(self.location.path), os.path.basename(dt.table_uri.rstrip("/")))
        return dt.to_pyarrow_dataset(filesystem=fs.SubTreeFileSystem(root, fs.LocalFileSystem()))

    def ensure(self, name: str, schema: pa.Schema, partition_by: Sequence[str] | None = None,
               configuration: dict[str, str] | None = None) -> DeltaTable:
        """The table, created first when missing (two creators at once: one wins, both go on)."""
        dt = self.open(name)
        if dt is not None:
            return dt
        try:
            DeltaTable.create(self.uri(name), schema, mode="ignore", partition_by=list(partition_by or []) or None,
                              configuration=configuration, storage_options=self.location.options())
        except CommitFailedError:
            pass  # another process created it meanwhile
        except (DeltaError, OSError) as e:
            raise _store_error(self.location, f"cannot create table {name!r}", e) from None
        dt = self.open(name)
        if dt is None:  # pragma: no cover - created above
            raise StoreError(f"table {name!r} of store {self.location.describe()} was not created",
                             path=self.location.uri)
        return dt


def _store_error(location: StoreLocation, what: str, e: BaseException) -> StoreError:
    reason = " ".join(str(e).split())[:300]
    return StoreError(f"{what} in store {location.describe()}: {reason}", path=location.uri)


def retry(fn: Callable[[], T], what: str, location: StoreLocation, attempts: int = ATTEMPTS) -> T:
    """``fn()`` again after a lost commit race (another writer committed first), with a growing,
    jittered wait; any other failure raises one :class:`StoreError` saying what failed."""
    for attempt in range(attempts):
        try:
            return fn()
        except CommitFailedError as e:
            if attempt == attempts - 1:
                raise _store_error(location, f"{what}: {attempts} commits lost to other writers", e) from None
            time.sleep(random.uniform(0.002, 0.01) * min(1 + attempt, 20))
        except (DeltaError, OSError) as e:
            raise _store_error(location, what, e) from None
    raise AssertionError("unreachable")  # pragma: no cover


def storage_type(t: pa.DataType) -> pa.DataType:
    """The type a column is kept as in a Delta table: a null nested in a list or struct becomes string
    (Delta has no column type for it; only nulls ever fill it, so the values are the same)."""
    if pa.types.is_null(t):
        return pa.string()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(storage_type(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, storage_type(f.type)) for f in t])
    return t


class TypeClash(StoreError):
    """A column the files hold with another type than the table's (a concurrent writer gave it its type
    first): the caller casts its files to the table's types and commits again."""

    table_schema: pa.Schema | None = None


def table_schema(dt: DeltaTable) -> pa.Schema:
    return pa.schema(dt.schema().to_arrow())


def _missing_fields(dt: DeltaTable, schema: pa.Schema) -> list[pa.Field]:
    have = table_schema(dt)
    clash = [f.name for f in schema if f.name in have.names and have.field(f.name).type != f.type]
    if clash:
        raise TypeClash(f"column {clash[0]!r} has type {have.field(clash[0]).type} in the store",
                        table_schema=have)
    return [f for f in schema if f.name not in have.names]


def add_columns(dt: DeltaTable, schema: pa.Schema) -> bool:
    """Add ``schema``'s columns the table lacks (one commit); returns whether any were added.
    A concurrent writer's commit makes this raise :class:`CommitFailedError` (the caller retries)."""
    new = _missing_fields(dt, schema)
    if new:
        dt.alter.add_columns([Field.from_arrow(pa.field(f.name, f.type)) for f in new],
                             commit_properties=CommitProperties(max_commit_retries=0))
    return bool(new)


def add_action(part: Part, run: str) -> AddAction:
    """The add action committing ``part`` as a file of partition ``run`` (its row count and ``_line`` range as stats)."""
    stats: dict[str, Any] = {"numRecords": part.rows}
    if part.min_line is not None:
        stats.update(minValues={"_line": part.min_line}, maxValues={"_line": part.max_line}, nullCount={"_line": 0})
    return AddAction(f"{PARTITION}={run}/{part.name}", part.size, {PARTITION: run}, int(time.time() * 1000), True, json.dumps(stats))


def commit_files(tables: Tables, name: str, run: str, parts: Sequence[Part], schema: pa.Schema, *,
                 metadata: dict[str, Any] | None = None, txn: tuple[str, int] | None = None,
                 removes: Iterable[RemoveAction] = ()) -> int:
    """Add ``parts`` of partition ``run`` to table ``name`` (and drop ``removes``) in one commit; returns
    the table's version after it.

    The table gains the columns of ``schema`` it lacks first (a commit of its own: a column no run
    fills yet reads as null). ``txn`` records ``(app id, version)`` with the files, atomically (a
    follower's commit number). On object storage the parts are uploaded by delta-rs's writer instead.
    """
    props = CommitProperties(custom_metadata=metadata or None,
                             app_transactions=[Transaction(*txn)] if txn else None, max_commit_retries=50)
    removes = list(removes)
    if not tables.location.is_local:
        return _upload(tables, name, run, parts, schema, props, removes)

    home = os.path.join(tables.local_dir(name), f"{PARTITION}={run}")
    for p in parts:  # into the partition's folder: no reader sees a file the log does not list
        if os.path.dirname(os.path.abspath(p.local)) != home:
            os.makedirs(home, exist_ok=True)
            os.replace(p.local, os.path.join(home, p.name))

    def once() -> int:
        dt = tables.open(name)
        if dt is None:  # pragma: no cover - callers ensure the table
            raise StoreError(f"table {name!r} is missing", path=tables.location.uri)
        if add_columns(dt, schema):
            dt = tables.open(name)
        dt.create_write_transaction([*(add_action(p, run) for p in parts), *removes], "append",
                                    dt.schema(), partition_by=[PARTITION], commit_properties=props)
        return dt.version() + 1

    return retry(once, f"cannot commit {len(parts)} file(s) of run {run!r} to {name}", tables.location)


def _upload(tables: Tables, name: str, run: str, parts: Sequence[Part], schema: pa.Schema,
            props: CommitProperties, removes: list[RemoveAction]) -> int:
    """:func:`commit_files` on object storage: the spooled parts streamed to delta-rs's writer (one commit).
    A removal there is a commit of its own before (it needs no upload)."""
    import pyarrow.parquet as pq

    if removes:
        def drop() -> None:
            dt = tables.open(name)
            dt.create_write_transaction(removes, "append", dt.schema(), partition_by=[PARTITION],
                                        commit_properties=CommitProperties(max_commit_retries=50))
        retry(drop, f"cannot remove files of run {run!r} from {name}", tables.location)
    if not parts:
        return tables.open(name).version()
    full = pa.schema([*schema, pa.field(PARTITION, pa.string())])

    def batches():
        for p in parts:
            for b in pq.ParquetFile(p.local).iter_batches(batch_size=1 << 16):
                t = pa.Table.from_batches([b])
                cols = [t.column(f.name) if f.name in t.column_names else pa.nulls(t.num_rows, f.type)
                        for f in schema]
                cols.append(pa.array([run] * t.num_rows, pa.string()))
                yield from pa.table(cols, schema=full).to_batches()

    def once() -> int:
        write_deltalake(tables.uri(name), pa.RecordBatchReader.from_batches(full, batches()), mode="append",
                        partition_by=[PARTITION], schema_mode="merge", storage_options=tables.location.options(),
                        commit_properties=props)
        return tables.open(name).version()

    return retry(once, f"cannot upload run {run!r} to {name}", tables.location)


def partition_files(dt: DeltaTable, run: str) -> list[dict[str, Any]]:
    """The add actions (``path``, ``size_bytes``, ``num_records``, ``min._line``, ``max._line``, ...)
    of partition ``run`` at the table's version."""
    actions = pa.table(dt.get_add_actions(flatten=True))
    if not actions.num_rows:
        return []
    import pyarrow.compute as pc

    col = f"partition.{PARTITION}"
    return actions.filter(pc.equal(actions.column(col), run)).to_pylist()


def remove_actions(files: Sequence[dict[str, Any]], run: str) -> list[RemoveAction]:
    """Remove actions of ``files`` (add actions as :func:`partition_files` lists them)."""
    now = int(time.time() * 1000)
    return [RemoveAction(f["path"], True, now, f["size_bytes"], {PARTITION: run}) for f in files]


def readd_actions(files: Sequence[dict[str, Any]], run: str) -> list[AddAction]:
    """Add actions putting ``files`` (listed at an earlier version) back, as they were."""
    out = []
    for f in files:
        stats: dict[str, Any] = {"numRecords": f["num_records"]}
        lo, hi = f.get("min._line"), f.get("max._line")
        if lo is not None and hi is not None:
            stats.update(minValues={"_line": lo}, maxValues={"_line": hi}, nullCount={"_line": 0})
        out.append(AddAction(f["path"], f["size_bytes"], {PARTITION: run}, f["modification_time"], True,
                             json.dumps(stats)))
    return out
