"""A run's rows written as Parquet files for a Delta table, and cast to the store's types.

:class:`PartWriter` writes the batches of an ingest (or a follower's commit) into
``part-<uuid>-NNNNN.parquet`` files: batches of one schema are gathered into row groups, and
a new file starts only where a batch cannot be held losslessly in the open file's schema
(a new column, a type change). Files are plain Parquet (snappy; dictionaries for strings
only, as the folder store writes them) without the ``run`` column: a Delta table takes a
partition's value from its log, as a hive reader takes it from the folder's name.

:func:`settle` gives every file the run's final types: the store's type for a column the
store holds already (the Delta table's schema, or the diag contract's canonical type), the
run's own joined type otherwise. A value that does not fit is set aside (null in the
column, kept exactly with the rejects), as the folder store does.
"""
from __future__ import annotations

import os
import uuid
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from regime_dash.ingest import CANONICAL_TYPES, LINE_COLUMN, Aside
from regime_dash.store import parts as folder_parts
from regime_dash.store.writer import cast_to_types
from regime_dash.store.delta.tables import Part, storage_type

__all__ = ["PartWriter", "final_types", "settle", "storage_schema", "write_table"]

def _line_range(table: pa.Table) -> tuple[int | None, int | None]:
    if LINE_COLUMN not in table.column_names or not table.num_rows:
        return None, None
    mm = pc.min_max(table.column(LINE_COLUMN)).as_py()
    return mm["min"], mm["max"]


class PartWriter(folder_parts.PartWriter):
    """Writes tables into Parquet files ``part-<uuid>-NNNNN.parquet`` in ``directory``: the folder
    store's writer (its row groups, its new file per schema change), each file recorded as a
    :class:`Part` with its rows, size and ``_line`` range."""

    def __init__(self, directory: str):
        super().__init__(directory)
        self.tag = uuid.uuid4().hex[:16]
        self.parts: list[Part] = []
        self._lines: list[tuple[int | None, int | None]] = []  # of the open file's tables

    def _part_path(self, k: int) -> str:
        name = f"part-{self.tag}-{k:05d}.parquet"
        local = os.path.join(self.dir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.parts.append(Part(name, local, 0, 0))
        return local

    def write(self, table: pa.Table) -> None:
        super().write(table)  # closes the open file first where table starts a new one
        if table.num_rows:
            self._lines.append(_line_range(table))

    def close(self) -> list[Part]:
        """Finish the open file; returns every file written, with its rows, size and ``_line`` range."""
        was_open = self.writer is not None
        super().close()
        if was_open:
            last = self.parts[-1]
            lows = [lo for lo, _ in self._lines if lo is not None]
            highs = [hi for _, hi in self._lines if hi is not None]
            self.parts[-1] = Part(last.name, last.local, pq.read_metadata(last.local).num_rows,
                                  os.path.getsize(last.local), min(lows) if lows else None,
                                  max(highs) if highs else None)
            self._lines = []
        return list(self.parts)


def write_table(directory: str, table: pa.Table) -> list[Part]:
    """``table`` as one file (a follower's commit, an imported run's part)."""
    w = PartWriter(directory)
    w.write(table)
    return w.close()


def final_types(run_types: dict[str, pa.DataType], store_types: dict[str, pa.DataType]) -> dict[str, pa.DataType]:
    """Each column's type in the run: the store's where it has one (its table, or the canonical type
    of a diag field), else the run's own; a column only null in the run takes the store's type."""
    known = {**store_types, **{k: v for k, v in CANONICAL_TYPES.items() if k not in store_types}}
    return {k: known.get(k, t) for k, t in run_types.items()}


def storage_schema(table_schema: pa.Schema) -> pa.Schema:
    """The file schema a Delta table keeps: top-level null columns left out (they read as null, and
    give the column no type), nested nulls as string."""
    return pa.schema([pa.field(f.name, storage_type(f.type)) for f in table_schema if not pa.types.is_null(f.type)])


def settle(parts: Sequence[Part], final: dict[str, pa.DataType]) -> tuple[list[Part], list[Aside], dict]:
    """Rewrite each file whose types differ from ``final`` (or that a Delta table cannot hold as they
    are); returns the files, the values set aside and the coercions, the asides in line order."""
    out, aside, coerced = [], [], {}
    for p in parts:
        schema = pq.read_schema(p.local)
        want = storage_schema(pa.schema([pa.field(f.name, final.get(f.name, f.type)) for f in schema]))
        if schema.equals(want):
            out.append(p)
            continue
        table = pq.read_table(p.local)
        table, a, c = cast_to_types(table, final)
        table = table.select(want.names).cast(want)
        aside.extend(a)
        for k, by in c.items():
            for kind, n in by.items():
                coerced.setdefault(k, {})[kind] = coerced.get(k, {}).get(kind, 0) + n
        tmp = p.local + ".new"
        folder_parts.write_part(tmp, table, durable=False)
        os.replace(tmp, p.local)
        out.append(Part(p.name, p.local, p.rows, os.path.getsize(p.local), p.min_line, p.max_line))
    return out, sorted(aside, key=lambda a: a.line), coerced
