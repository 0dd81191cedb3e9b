"""One type per column: values coerced into a column's type when that is lossless, set
aside as JSON text otherwise; tables of several chunks unified; a chunk's column types
settled in source order.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa

from regime_dash.ingest.arrays import first_valid, from_numpy, to_numpy
from regime_dash.ingest.types import (
    CANONICAL_TYPES,
    EXACT_INT,
    INT64_MAX,
    INT64_MIN,
    first_type,
    join_types,
    type_kind,
    type_of_value,
    unify_types,
)
from regime_dash.ingest.report import Aside, LINE_COLUMN, merge_counts


def _float_text(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if v.is_integer() and abs(v) < EXACT_INT:
        return str(int(v))
    return repr(v)


def json_text(v: Any) -> str:
    """Compact JSON text of a parsed value, as a string-widened column stores it.

    Integral floats below 2**53 print without a fraction so that ``1`` and ``1.0`` give
    the same text; NaN and infinities print as Python's json tokens.

    Parameters
    ----------
    v
        A value as :func:`json.loads` returns it.

    Returns
    -------
    str
    """
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        # ints outside int64 are float64 values everywhere else, so print them as such
        return str(v) if INT64_MIN <= v <= INT64_MAX else _float_text(float(v))
    if isinstance(v, float):
        return _float_text(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(json_text(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(str(k), ensure_ascii=False) + ":" + json_text(x)
                              for k, x in v.items()) + "}"
    return json.dumps(str(v), ensure_ascii=False)


def _scalar_text(v: Any) -> str | None:
    """Text of one value in a string-widened column (strings stay as they are)."""
    if v is None:
        return None
    if isinstance(v, str):
        return v
    return json_text(v)


def _to_string_array(arr: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Cast a column to the string form of the type rule (vectorized where it can)."""
    t = arr.type
    if pa.types.is_string(t):
        return arr
    if pa.types.is_null(t):
        return arr.cast(pa.string())
    if pa.types.is_boolean(t) or pa.types.is_integer(t):
        return arr.cast(pa.string())  # "true"/"false" and decimal integers: JSON text
    if pa.types.is_floating(t):
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        vals = arr.to_numpy(zero_copy_only=False)
        valid = ~np.asarray(arr.is_null().to_numpy(zero_copy_only=False))
        fin = np.isfinite(vals) & valid
        integral = fin & (np.abs(vals) < EXACT_INT)
        integral[integral] = vals[integral] == np.trunc(vals[integral])
        out = np.empty(len(vals), dtype=object)
        out[integral] = pa.array(vals[integral].astype(np.int64)).cast(pa.string()).to_numpy(
            zero_copy_only=False)
        rest = np.flatnonzero(valid & ~integral)
        for i in rest:
            out[i] = _float_text(float(vals[i]))
        out[~valid] = None
        return pa.array(out, type=pa.string())
    return pa.array([_scalar_text(v) for v in arr.to_pylist()], type=pa.string())


def _cast_to(arr: pa.Array | pa.ChunkedArray, target: pa.DataType):
    if arr.type == target:
        return arr
    if pa.types.is_string(target):
        return _to_string_array(arr)
    if pa.types.is_null(arr.type):
        return pa.nulls(len(arr), target)
    try:
        return arr.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        # nested casts Arrow cannot do (struct field merge): rebuild from Python values
        return pa.array(arr.to_pylist(), type=target)


def unify_tables(tables: Sequence[pa.Table], columns: Sequence[str] | None = None) -> pa.Table:
    """Concatenate tables whose columns differ in presence or type, by name.

    Columns missing from a table are null there; a column's type is the
    :func:`unify_types` join over all tables. Column order is first appearance.

    Parameters
    ----------
    tables
        Tables to concatenate, in order.
    columns
        If given, only these columns, in this order (missing ones come out all-null).

    Returns
    -------
    pyarrow.Table
    """
    tables = [t for t in tables if t is not None]
    if not tables:
        return pa.table({c: pa.array([], pa.null()) for c in (columns or [])})
    names, types = unified_types([t.schema for t in tables], columns)
    if len(tables) == 1 and tables[0].column_names == names and all(
            f.type == types[f.name] for f in tables[0].schema):
        return tables[0]
    return pa.concat_tables([conform_table(t, names, types) for t in tables])


def unified_types(schemas: Sequence[pa.Schema],
                  columns: Sequence[str] | None = None) -> tuple[list[str], dict[str, pa.DataType]]:
    """The column names (``columns``, else first appearance) and the :func:`unify_types` join of each
    over ``schemas`` (null for a name none has): the types :func:`unify_tables` gives."""
    types: dict[str, pa.DataType] = {}
    for schema in schemas:
        for f in schema:
            types[f.name] = f.type if f.name not in types else unify_types(types[f.name], f.type)
    names = list(columns) if columns is not None else list(types)
    for n in names:
        types.setdefault(n, pa.null())
    return names, types


def conform_table(table: pa.Table, names: Sequence[str], types: dict[str, pa.DataType]) -> pa.Table:
    """``table`` as the columns ``names`` of ``types`` (:func:`unified_types`): cast, or null where it lacks one."""
    cols = []
    for n in names:
        if n in table.column_names:
            cols.append(_cast_to(table.column(n), types[n]))
        else:
            cols.append(pa.nulls(table.num_rows, types[n]))
    return pa.table(cols, names=list(names)) if names else pa.table({})


def _coerce_py(v: Any, t: pa.DataType, fixed: bool = True) -> tuple[bool, Any]:
    """(fits, value as ``t`` holds it) for one parsed JSON value; lossless or not at all.

    ``"1"`` fits int64 as 1 (its text round-trips), ``"01"`` does not; 1.0 fits int64,
    1.5 does not; 0/1 and ``"true"``/``"false"`` fit bool; every value fits string as its
    JSON text. Integers go into float64 as Arrow's reader puts them (rounded beyond 2**53).
    In a column without a fixed type (``fixed=False``), whose int64 may still widen to
    float64 later in the file, a string fits a number column only as an integer's
    text, so the verdict does not depend on which of the two the column is yet.
    """
    if v is None:
        return True, None
    if pa.types.is_float64(t):
        if isinstance(v, (bool, int, float)):
            return True, float(v)
        if isinstance(v, str) and not fixed:
            if not _INT_TEXT.fullmatch(v):
                return False, None
            return True, float(int(v))
        if isinstance(v, str):
            try:
                x = float(v)
            except ValueError:
                return False, None
            return (_float_text(x) == v or repr(x) == v), x
        return False, None
    if pa.types.is_int64(t):
        if isinstance(v, bool) or (isinstance(v, int) and INT64_MIN <= v <= INT64_MAX):
            return True, int(v)
        if isinstance(v, float) and math.isfinite(v) and v.is_integer() and abs(v) < 2**63:
            return True, int(v)
        if isinstance(v, str) and _INT_TEXT.fullmatch(v):
            x = int(v)
            return INT64_MIN <= x <= INT64_MAX, x
        return False, None
    if pa.types.is_boolean(t):
        if isinstance(v, bool):
            return True, v
        if isinstance(v, (int, float)) and v in (0, 1):
            return True, bool(v)
        if v in ("true", "false"):
            return True, v == "true"
        return False, None
    if pa.types.is_string(t):
        return True, v if isinstance(v, str) else json_text(v)
    vt = type_of_value(v)
    if vt is not None and join_types(vt, t) == t:
        return True, coerce_to(v, t)
    return False, None


_INT_TEXT = re.compile(r"-?(?:0|[1-9][0-9]{0,18})")


#: First characters of a JSON value as Python's json reads one (NaN and Infinity too).
JSON_STARTS = frozenset('{["-0123456789tfnNI')


def _fits(v: Any, t: pa.DataType) -> bool:
    """Whether ``t`` holds ``v`` as it is (same kind, and its type joins into ``t``)."""
    vt = type_of_value(v)
    return vt is not None and type_kind(vt) == type_kind(t) and join_types(vt, t) == t


def values_into(values: Sequence[Any], lines: Sequence[int], name: str, target: pa.DataType,
                 fixed: bool = True, pending: list | None = None,
                 ) -> tuple[pa.Array, list[Aside], dict[str, dict[str, int]]]:
    """Store Python values in ``target``: coerced where lossless, else set aside.

    With ``pending`` (a column whose run type is not settled yet), a value ``target``
    does not hold as it is goes there as ``(line, name, value)`` instead, for
    :class:`_Renumber` to settle in source order.
    """
    out: list[Any] = []
    aside: list[Aside] = []
    changed: dict[str, int] = {}
    tk = type_kind(target)
    for v, line in zip(values, lines):
        if v is None:
            out.append(None)
            continue
        if pending is not None:
            if _fits(v, target):
                out.append(coerce_to(v, target))
            else:
                out.append(None)
                pending.append((int(line), name, v))
            continue
        ok, x = _coerce_py(v, target, fixed)
        if ok:
            out.append(x)
            vt = type_of_value(v)
            if type_kind(vt) != tk:
                key = "mixed list" if vt is None else str(vt)
                changed[key] = changed.get(key, 0) + 1
        else:
            out.append(None)
            aside.append(Aside(int(line), name, json_text(v), str(target)))
    return pa.array(out, type=target), aside, ({name: changed} if changed else {})


def _as_float64(arr: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """An int64 or bool column as float64, unchecked: an integer past 2**53 becomes the
    nearest float64, as Python's ``float()`` rounds it (a checked cast refuses it). NumPy's
    conversion rounds to nearest as Arrow's does; a column with nulls takes Arrow's cast."""
    if arr.null_count == 0:
        return from_numpy(to_numpy(arr).astype(np.float64))
    import pyarrow.compute as pc  # only here: its import costs a fresh ingest ~0.13 s

    return pc.cast(arr, pa.float64(), safe=False)


def conform_column(arr: pa.Array | pa.ChunkedArray, target: pa.DataType, lines: Sequence[int],
                   name: str, fixed: bool = True,
                   ) -> tuple[pa.Array | pa.ChunkedArray, list[Aside], dict[str, dict[str, int]]]:
    """Store a column in ``target``: lossless coercions, the rest set aside.

    Parameters
    ----------
    arr
        The column as parsed.
    target
        Its storage type (canonical, the store's, or the run's).
    lines
        The source line of each row (for set-aside values).
    name
        The column name.
    fixed
        ``target`` is the column's final type (canonical or the store's), not a run
        type that may still widen (see :func:`_coerce_py`).

    Returns
    -------
    column, aside, coerced
        The column in ``target`` (null where a value was set aside), the set-aside
        values, and ``{name: {source type: count}}`` of coercions across kinds.
    """
    src = arr.type
    if src == target:
        return arr, [], {}
    n = len(arr)
    if pa.types.is_null(src):
        return pa.nulls(n, target), [], {}
    if pa.types.is_null(target):
        return arr, [], {}  # nothing typed yet
    nn = n - arr.null_count
    if pa.types.is_string(target) and not (pa.types.is_list(src) or pa.types.is_struct(src)):
        return _to_string_array(arr), [], ({name: {str(src): nn}} if nn else {})
    if pa.types.is_float64(target) and (pa.types.is_int64(src) or pa.types.is_boolean(src)):
        note = {name: {str(src): nn}} if nn and pa.types.is_boolean(src) else {}
        return _as_float64(arr), [], note
    if pa.types.is_int64(target) and pa.types.is_boolean(src):
        return arr.cast(target), [], ({name: {str(src): nn}} if nn else {})
    if pa.types.is_int64(target) and pa.types.is_float64(src):
        vals = to_numpy(arr) if arr.null_count == 0 else None
        if vals is not None and np.isfinite(vals).all() and (vals == np.trunc(vals)).all() \
                and (np.abs(vals) < 2**63).all():
            return arr.cast(target), [], {}
    if pa.types.is_list(target) and pa.types.is_list(src) and join_types(src, target) == target:
        return _cast_to(arr, target), [], {}
    return values_into(arr.to_pylist(), lines, name, target, fixed)


def assemble_pieces(pieces: list[pa.Table], fixed: Mapping[str, pa.DataType], pending: list,
              ) -> tuple[pa.Table, list[Aside], dict[str, dict[str, int]]]:
    """One table from a chunk's pieces, in line order, each column in one type.

    A column with a fixed type (canonical or the store's) is conformed to it here
    (:func:`conform_column`). Another takes the kind of its first value in the chunk;
    values of other kinds go to ``pending`` for :class:`_Renumber`, which knows the
    run's type.
    """
    pieces = [t for t in pieces if t.num_rows]
    if not pieces:
        return pa.table({LINE_COLUMN: pa.array([], pa.int64())}), [], {}
    pieces.sort(key=lambda t: t.column(LINE_COLUMN)[0].as_py())
    seen: dict[str, set] = {}
    for t in pieces:
        for f in t.schema:
            if f.name != LINE_COLUMN:
                seen.setdefault(f.name, set()).add(f.type)
    targets: dict[str, pa.DataType] = {}
    for k, types in seen.items():
        if k in fixed:
            targets[k] = fixed[k]
        elif len(types) == 1:
            targets[k] = next(iter(types))
        else:  # in line order of each piece's first value
            order = []
            for t in pieces:
                if k in t.column_names:
                    c = t.column(k)
                    if len(c) > c.null_count:
                        row = first_valid(c)
                        order.append((t.column(LINE_COLUMN)[row].as_py(), c.type, len(c) - c.null_count))
            order.sort(key=lambda x: x[0])
            targets[k] = first_type([(t, n) for _l, t, n in order])
    aside: list[Aside] = []
    coerced: dict[str, dict[str, int]] = {}
    out = []
    for t in pieces:
        lines = None
        for i, f in enumerate(t.schema):
            target = targets.get(f.name)
            if target is None or f.type == target:
                continue
            if lines is None:
                lines = to_numpy(t.column(LINE_COLUMN))
            if f.name in fixed:
                col, a, c = conform_column(t.column(i), target, lines, f.name)
                aside.extend(a)
                merge_counts(coerced, c)
            elif pa.types.is_null(f.type) or (type_kind(f.type) == type_kind(target)
                                               and join_types(f.type, target) == target):
                col = _cast_to(t.column(i), target)
            else:
                col, _a, _c = values_into(t.column(i).to_pylist(), lines, f.name, target,
                                           False, pending)
            t = t.set_column(i, f.name, col)
        out.append(t)
    table = out[0] if len(out) == 1 else unify_tables(out)
    if len(out) > 1:
        bounds = [(t.column(LINE_COLUMN)[0].as_py(), t.column(LINE_COLUMN)[-1].as_py()) for t in out]
        if any(b[1] > c[0] for b, c in zip(bounds, bounds[1:])):
            table = table.sort_by(LINE_COLUMN)  # the reference read lines from all over
    aside.sort(key=lambda a: a.line)
    return table, aside, coerced


def coerce_to(v: Any, t: pa.DataType) -> Any:
    """The JSON value ``v`` as a value of type ``t`` takes it: numbers as floats for float64, the
    same inside lists and structs; ``None`` stays."""
    if v is None:
        return None
    if pa.types.is_float64(t):
        return float(v)
    if pa.types.is_list(t):
        return [coerce_to(x, t.value_type) for x in v]
    if pa.types.is_struct(t):
        return {f.name: coerce_to(v.get(f.name), f.type) for f in t}
    return v


def drop_empty_structs(table: pa.Table) -> pa.Table:
    """Drop ``struct<>`` columns (an empty object contributes no column)."""
    keep = [i for i, f in enumerate(table.schema)
            if not (pa.types.is_struct(f.type) and f.type.num_fields == 0)]
    if len(keep) != table.num_columns:
        table = table.select(keep)
    return table


def settle_pending(table: pa.Table, pending: list, types: dict[str, pa.DataType],
                    fixed: Mapping[str, pa.DataType] = CANONICAL_TYPES):
    """Settle the run type of each column without a fixed type, in source order, and
    store the chunk's values of other kinds in it (coerced, or set aside).

    ``types`` (the run's types so far) is updated in place: a column takes the type of
    its first value, widened only within that kind (int64 -> float64, list items).
    """
    aside: list[Aside] = []
    coerced: dict[str, dict[str, int]] = {}
    by_col: dict[str, list] = {}
    for line, k, v in pending:
        by_col.setdefault(k, []).append((line, v))
    for i, f in enumerate(table.schema):
        if f.name == LINE_COLUMN or f.name in fixed:
            continue
        extra = by_col.get(f.name, ())
        run = types.get(f.name)
        if not extra and run is not None and run == f.type and not pa.types.is_null(run):
            continue  # the run's type already: it stays, and the column as it is
        col = original = table.column(i)
        firsts = [(line, type_of_value(v)) for line, v in extra]
        if len(col) > col.null_count:
            row = first_valid(col)
            firsts.append((table.column(LINE_COLUMN)[row].as_py(), f.type))
        firsts.sort(key=lambda x: x[0])
        seen = [(t, 1) for _l, t in firsts]
        if run is None or pa.types.is_null(run):
            target = first_type(seen)  # the kind of the column's first value in the file
        else:
            target = run
            for t, _n in seen:  # widened within its kind only
                if t is not None and type_kind(t) == type_kind(target):
                    target = join_types(target, t) or target
        if not pa.types.is_null(target):
            types[f.name] = target
        if f.type != target and not pa.types.is_null(target):
            col, a, c = conform_column(col, target, to_numpy(table.column(LINE_COLUMN)), f.name, False)
            aside.extend(a)
            merge_counts(coerced, c)
        if extra:
            vals = col.to_pylist()
            where = to_numpy(table.column(LINE_COLUMN))
            for line, v in extra:
                row = int(np.searchsorted(where, line))
                ok, x = _coerce_py(v, target, False)
                if ok:
                    vals[row] = x
                    vt = type_of_value(v)
                    if type_kind(vt) != type_kind(target):
                        key = "mixed list" if vt is None else str(vt)
                        coerced.setdefault(f.name, {})[key] = coerced.get(f.name, {}).get(key, 0) + 1
                else:
                    aside.append(Aside(line, f.name, json_text(v), str(target)))
            col = pa.array(vals, type=target)
        if col is not original:  # (table.column(i) is a new object each call: compare with the one read)
            table = table.set_column(i, f.name, col)  # copies the schema: only where a column changed
    return table, aside, coerced
