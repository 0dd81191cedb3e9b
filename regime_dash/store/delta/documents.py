"""Small Delta tables of JSON documents keyed by name, changed by compare-and-swap.

The store's catalogue (``runs``: one document a run) and its ``settings`` (chart layouts, the
maintenance record) are such tables. A table holds one row a document: ``key``, ``state``
(for a run: ``pending``, ``live``, ``removing``, ``removed``, ``restoring``), ``name`` and
``doc`` (the JSON text), so DuckDB or polars can list runs without parsing anything.

A change reads the table at version ``v``, edits the documents and replaces the table's
contents in one commit that must be version ``v + 1`` (``max_commit_retries=0``); when another
writer committed first, the change is done again on a fresh read. So two changes never lose
each other (the flock of the folder store, without a lock), on a local disk and on object
storage alike. The table is a few hundred kilobytes for a thousand runs: replacing it whole
costs milliseconds, and a checkpoint every few versions keeps opening it to a few reads.
"""
from __future__ import annotations

from typing import Any, Callable, TypeVar

import orjson
import pyarrow as pa
from deltalake import CommitProperties, write_deltalake

from regime_dash.errors import StoreError
from regime_dash.store.delta.tables import Tables, retry

__all__ = ["SCHEMA", "Documents"]

T = TypeVar("T")

SCHEMA = pa.schema([("key", pa.string()), ("state", pa.string()), ("name", pa.string()), ("doc", pa.string())])
#: Checkpoints often: an open reads the last checkpoint and the commits after it.
_CONFIG = {"delta.checkpointInterval": "10", "delta.logRetentionDuration": "interval 30 days"}


def _dumps(doc: dict[str, Any]) -> str:
    try:
        return orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError as e:
        raise StoreError(f"a store document cannot be kept as JSON: {e}") from None


class Documents:
    """One document table of a store: ``read`` all, ``change`` under compare-and-swap."""

    def __init__(self, tables: Tables, name: str):
        self.tables, self.name = tables, name

    def _table(self, version: int | None = None):
        return self.tables.open(self.name, version)

    def read(self) -> dict[str, dict[str, Any]]:
        """Every document, ``{key: doc}`` (none when the table was never written)."""
        return self._read(self._table())

    def _read(self, dt) -> dict[str, dict[str, Any]]:
        if dt is None:
            return {}
        t = self.tables.dataset(dt).to_table(columns=["key", "doc"])
        return {k: orjson.loads(d) for k, d in zip(t.column("key").to_pylist(), t.column("doc").to_pylist())}

    def change(self, edit: Callable[[dict[str, dict[str, Any]]], T], what: str) -> T:
        """Apply ``edit(docs)`` (it changes the dict in place and returns a value) and commit the result
        as the next version; done again on a fresh read while another writer commits first. An ``edit``
        that raises changes nothing. Returns what ``edit`` returned."""
        self.tables.ensure(self.name, SCHEMA, configuration=_CONFIG)

        def once() -> T:
            dt = self._table()
            docs = self._read(dt)
            before = {k: _dumps(v) for k, v in docs.items()}
            out = edit(docs)
            after = {k: _dumps(v) for k, v in docs.items()}
            if after != before:
                keys = sorted(after)
                table = pa.table([keys, [str(docs[k].get("state", "")) for k in keys],
                                  [docs[k].get("name") for k in keys], [after[k] for k in keys]], schema=SCHEMA)
                write_deltalake(dt, table, mode="overwrite",
                                commit_properties=CommitProperties(max_commit_retries=0))
            return out

        return retry(once, what, self.tables.location)
