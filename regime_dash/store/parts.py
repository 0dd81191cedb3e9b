"""A run's Parquet part files written: the writer settings, tables as one part, and the part
writer of an ingest (a new part only where a batch's schema cannot join the open one's)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from regime_dash.store.paths import PART_TMP

__all__ = ["PartWriter", "open_writer", "write_part", "write_tables"]

# Parquet settings: snappy without dictionaries is ~3x faster to write than Arrow's
# default on diag data (mostly unique floats) and no larger; strings get dictionaries.
_PARQUET_KW: dict[str, Any] = {"compression": "snappy"}

#: Rows and bytes of batches a part writer gathers into one row group: a row group per ~4 MB
#: chunk (a few thousand rows) costs its columns' page and statistics overhead each time,
#: about half the Parquet write of a diag; past these the gain is gone and memory grows.
_GROUP_ROWS = 1 << 14
_GROUP_BYTES = 16 << 20


def open_writer(path: Path | str, schema: pa.Schema) -> pq.ParquetWriter:
    """A Parquet writer of a part at ``path`` with the store's settings (dictionaries for strings only)."""
    strings = [f.name for f in schema if pa.types.is_string(f.type)]
    return pq.ParquetWriter(path, schema, use_dictionary=strings or False, **_PARQUET_KW)


def write_part(path: Path | str, table: pa.Table, *, durable: bool = True) -> None:
    """``table`` written whole as the part ``path``; with ``durable``, on disk (``fsync``) before this returns."""
    write_tables(path, table.schema, [table], durable=durable)


def write_tables(path: Path, schema: pa.Schema, tables: Iterable[pa.Table], *, durable: bool = True) -> None:
    """``tables`` (of ``schema``, its metadata aside), in order, written as the one part ``path``, gathered
    into row groups of about :data:`_GROUP_ROWS` rows: a group's tables are all that is held at a time,
    so ``tables`` may be a generator reading them one by one. With ``durable``, on disk before this returns."""
    w = open_writer(path, schema)
    held: list[pa.Table] = []
    try:
        for t in tables:
            held.append(t)
            if sum(h.num_rows for h in held) >= _GROUP_ROWS or sum(h.nbytes for h in held) >= _GROUP_BYTES:
                w.write_table(held[0] if len(held) == 1 else pa.concat_tables(held))
                held = []
        if held:
            w.write_table(held[0] if len(held) == 1 else pa.concat_tables(held))
    finally:
        w.close()
    if durable:
        with open(path, "rb") as fh:
            os.fsync(fh.fileno())


def fit_table(table: pa.Table, schema: pa.Schema) -> pa.Table | None:
    """``table`` in ``schema`` (missing columns null, null columns typed), or ``None`` when it holds a
    column ``schema`` lacks or a value type it cannot hold (a new part then keeps both types exact)."""
    if table.schema.equals(schema):
        return table
    names = set(table.column_names)
    if not names <= set(schema.names):
        return None
    cols = []
    for f in schema:
        if f.name not in names:
            cols.append(pa.nulls(table.num_rows, f.type))
            continue
        col = table.column(f.name)
        if col.type == f.type:
            cols.append(col)
        elif pa.types.is_null(col.type):
            cols.append(pa.nulls(table.num_rows, f.type))
        else:
            return None
    return pa.table(cols, schema=schema)


class PartWriter:
    """Writes batches into ``part-NNNNN.parquet.tmp`` files, starting a new part only when
    a batch cannot be cast losslessly to the open part's schema (new column or a type
    the part cannot hold). Batches that fit are gathered into row groups of about
    :data:`_GROUP_ROWS` rows. The ingest renames them to ``*.parquet`` at commit.

    A store that names its files otherwise (the Delta store) overrides :meth:`_part_path`.
    """

    def __init__(self, directory: Path):
        self.dir = directory
        self.writer: pq.ParquetWriter | None = None
        self.schema: pa.Schema | None = None
        self.opened = 0  # parts opened so far
        self.held: list[pa.Table] = []  # fitted batches not yet written
        self.held_rows = 0
        self.held_bytes = 0

    def _part_path(self, k: int) -> Path | str:
        """Where the ``k``-th part (from 0) is written."""
        return self.dir / f"part-{k:05d}.parquet{PART_TMP}"

    def write(self, table: pa.Table) -> None:
        """Add ``table``'s rows: to the open part where they fit its schema, else to a new part."""
        if table.num_rows == 0:
            return
        fitted = self._fit(table) if self.writer is not None else None
        if fitted is None:
            self.close()
            self.schema = table.schema
            path = self._part_path(self.opened)
            self.opened += 1
            self.writer = open_writer(path, table.schema)
            fitted = table
        self.held.append(fitted)
        self.held_rows += fitted.num_rows
        self.held_bytes += fitted.nbytes
        if self.held_rows >= _GROUP_ROWS or self.held_bytes >= _GROUP_BYTES:
            self._flush()

    def _flush(self) -> None:
        if self.held and self.writer is not None:
            held, self.held, self.held_rows, self.held_bytes = self.held, [], 0, 0
            self.writer.write_table(held[0] if len(held) == 1 else pa.concat_tables(held))

    def _fit(self, table: pa.Table) -> pa.Table | None:
        return None if self.schema is None else fit_table(table, self.schema)

    def close(self) -> None:
        """Write what is held and close the open part."""
        if self.writer is not None:
            try:
                self._flush()
            finally:
                writer, self.writer = self.writer, None
                self.held, self.held_rows, self.held_bytes = [], 0, 0
                writer.close()
