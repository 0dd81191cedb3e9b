"""A run's rows read back from the rows table: its partition only, in its own columns and types.

The rows table's schema is the union of every run's columns; a run is read with the columns
its metadata lists (``_line`` first), each in the type it was stored with: a column that was
only null in the run (left out of its files) comes back as nulls of that type, a nested
null kept as string is cast back. Rows come in file-line order (Delta does not promise file
order; ``_line`` does).
"""
from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from regime_dash.errors import StoreError
from regime_dash.ingest import LINE_COLUMN
from regime_dash.store.delta.tables import PARTITION
from regime_dash.store.reader import as_float32, in_order, sorted_frame


__all__ = ["in_order", "narrowed", "read_run", "sorted_frame"]


def _type_of(text: str) -> pa.DataType | None:
    """An Arrow type from its string form as the metadata keeps it (simple types only)."""
    simple = {"null": pa.null(), "bool": pa.bool_(), "int64": pa.int64(), "double": pa.float64(),
              "string": pa.string(), "float": pa.float32()}
    return simple.get(text)


def narrowed(table: pa.Table) -> pa.Table:
    """Each float64 column whose every value (nulls aside, NaN kept) is a float32, as float32."""
    for i, f in enumerate(table.schema):
        if not pa.types.is_float64(f.type):
            continue
        fits, small = as_float32(table.column(i))
        if fits:
            table = table.set_column(i, pa.field(f.name, pa.float32()), small)
    return table


def _restore_column(table: pa.Table, name: str, stored: str | None, n: int) -> pa.ChunkedArray | pa.Array:
    """Column ``name`` in the type the run stored it with (nulls where its files lack it)."""
    want = _type_of(stored) if stored is not None else None
    if name not in table.column_names:
        return pa.nulls(n, want if want is not None else pa.null())
    col = table.column(name)
    if stored is not None and str(col.type) != stored:
        try:
            target = want or pa.type_for_alias(stored)
        except (ValueError, KeyError, pa.ArrowInvalid):
            target = None
        if target is not None:
            try:
                return pc.cast(col, target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return col
    return col


def read_run(store, run_id: str, meta: dict[str, Any], columns: Sequence[str] | None,
             narrow: bool, row_filter: pc.Expression | None = None) -> pa.Table:
    """:meth:`DeltaRunStore.load_table`'s read (only the rows ``row_filter`` keeps, where given)."""
    types: dict[str, str] = dict(meta.get("columns") or {})
    known = set(types) | {LINE_COLUMN}
    if columns is not None:
        missing = [c for c in columns if c not in known]
        if missing:
            raise StoreError(f"run {run_id!r} has no column {missing[0]!r}", run_id=run_id)
    want = [LINE_COLUMN, *types] if columns is None else list(columns)
    read = list(dict.fromkeys([*want, LINE_COLUMN]))
    dataset = store.open_dataset()
    present = [c for c in read if c in dataset.schema.names]
    try:
        where = pc.field(PARTITION) == run_id
        table = dataset.to_table(columns=present, filter=where if row_filter is None else where & row_filter)
    except (OSError, pa.ArrowException) as e:
        raise StoreError(f"run {run_id!r} cannot be read: {' '.join(str(e).split())[:200]}", run_id=run_id,
                         path=store.root.uri) from None
    if LINE_COLUMN in table.column_names and not in_order(table, [LINE_COLUMN]):
        table = table.sort_by([(LINE_COLUMN, "ascending")])
    n = table.num_rows
    cols = [_restore_column(table, c, types.get(c) if c != LINE_COLUMN else None, n) for c in want]
    out = pa.table(cols, names=want)
    return narrowed(out) if narrow else out
