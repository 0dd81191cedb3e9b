"""Downloads of a view: several runs' frames as one table, written as Parquet or CSV bytes.

Runs ingested from different loggers may hold the same column with different
types (a flag written as ``true`` in one file and ``1.0`` in another, a field
that is a number in one run and text in another). Stacked, such a column holds
mixed Python objects, which Parquet cannot store. :func:`settle` settles
each mixed column on one type, the way a reader would expect (numbers and
booleans as float64; anything with text as text) and says which columns it
changed; :func:`to_bytes` writes the table and raises :class:`ExportError`
naming the column when a writer still refuses it. Values in, bytes out: no I/O.
"""
from __future__ import annotations

import io
from numbers import Number
import numpy as np
import pandas as pd

from regime_dash.errors import ExportError

#: Formats :func:`to_bytes` writes, with their file suffix and MIME type.
FORMATS: dict[str, tuple[str, str]] = {
    "parquet": (".parquet", "application/vnd.apache.parquet"),
    "csv": (".csv", "text/csv"),
}


def _settle(column: pd.Series) -> tuple[pd.Series, str | None]:
    """``column`` with one type for all its values, and a note when it had to change."""
    if column.dtype != object:
        return column, None
    kinds = {type(v) for v in column.dropna()}
    booleans = {k for k in kinds if issubclass(k, (bool, np.bool_))}
    numbers = {k for k in kinds if issubclass(k, Number) and k not in booleans}
    if not kinds or kinds == booleans or all(issubclass(k, str) for k in kinds) \
            or any(issubclass(k, (list, dict, tuple)) for k in kinds):
        return column, None  # one type (with gaps), or nested values the Parquet writer stores as they are
    if kinds == booleans | numbers:
        note = f"{column.name}: numbers and booleans mixed across runs; written as numbers (true = 1)"
        return column.astype("float64"), note if booleans else None
    names = ", ".join(sorted(k.__name__ for k in kinds))
    return (column.map(lambda v: v if v is None or (isinstance(v, float) and np.isnan(v)) else str(v)),
            f"{column.name}: mixes {names} across runs; written as text")


def settle(table: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """``table`` with every mixed-type column settled on one type, and the notes saying which."""
    notes: list[str] = []
    out = {}
    for name in table.columns:
        out[name], note = _settle(table[name])
        if note:
            notes.append(note)
    # attrs are the run's metadata, not data; Parquet would try to write them as JSON
    return pd.DataFrame(out, index=table.index), notes


def to_bytes(table: pd.DataFrame, fmt: str) -> bytes:
    """``table`` written as ``fmt`` (``parquet`` or ``csv``).

    Raises
    ------
    ExportError
        An unknown format, or a column the writer cannot store (named, with the
        writer's reason).
    """
    if fmt not in FORMATS:
        raise ExportError(f"unknown export format {fmt!r}; use one of {sorted(FORMATS)}", format=fmt)
    if fmt == "csv":
        return table.to_csv(index=False).encode()
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = {}
    for name in table.columns:
        try:
            columns[str(name)] = pa.array(table[name], from_pandas=True)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            kinds = sorted({type(v).__name__ for v in table[name].dropna()})
            raise ExportError(f"column {name!r} ({table[name].dtype}, values of type {', '.join(kinds)}) "
                              f"cannot be written as Parquet: {exc}", column=str(name), format=fmt) from None
    buf = io.BytesIO()
    try:
        pq.write_table(pa.table(columns), buf)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ExportError(f"the table cannot be written as Parquet: {exc}", format=fmt) from None
    return buf.getvalue()
