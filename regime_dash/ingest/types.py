"""The type lattice: the canonical type of every diag field, the join of two Arrow
types (int64 + float64 -> float64, null -> anything, list items alike) and the kind of
a value or a column's first values.
"""
from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa


#: The largest finite double: a JSON number past it overflows to infinity.
FLOAT_MAX = 1.7976931348623157e308


def _canonical_types() -> dict[str, pa.DataType]:
    from regime_dash.diag.catalogue import B_SIZE, DIAG_FIELDS, FLAT_COUNT

    types: dict[str, pa.DataType] = {"step": pa.int64(), "fold": pa.int64(), "phase": pa.string(),
                                     "wall_time": pa.float64()}
    types.update({col: pa.float64() for col, _src in DIAG_FIELDS})  # float32 ISV slots
    types.update({FLAT_COUNT: pa.int64(), B_SIZE: pa.int64()})
    return types


#: The one storage type of every field of the diag contract (docs/CONTRACTS.md "Diag line"), in
#: every run: a value of another type is coerced when that is lossless, else set aside.
CANONICAL_TYPES: dict[str, pa.DataType] = _canonical_types()


#: The range of an int64 column.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

#: Integers of smaller magnitude are exact as float64.
EXACT_INT = 2**53


def _is_num(t: pa.DataType) -> bool:
    return pa.types.is_int64(t) or pa.types.is_float64(t)


def join_types(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """Strict join on the type lattice; None where only ``string`` would hold both."""
    if a == b:
        return a
    if pa.types.is_null(a):
        return b
    if pa.types.is_null(b):
        return a
    if _is_num(a) and _is_num(b):
        return pa.float64()
    if pa.types.is_list(a) and pa.types.is_list(b):
        inner = join_types(a.value_type, b.value_type)
        return None if inner is None else pa.list_(inner)
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        fields: dict[str, pa.DataType] = {}
        for f in list(a) + list(b):
            if f.name in fields:
                j = join_types(fields[f.name], f.type)
                if j is None:
                    return None
                fields[f.name] = j
            else:
                fields[f.name] = f.type
        return pa.struct(list(fields.items()))
    return None


def unify_types(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """The least type holding values of both ``a`` and ``b`` (see the module docstring).

    Parameters
    ----------
    a, b
        Arrow types of one column in two tables.

    Returns
    -------
    pyarrow.DataType
        ``a`` when equal; the non-null one when one is null; float64 for int64/float64;
        merged lists/structs where their items join; ``string`` otherwise.
    """
    j = join_types(a, b)
    return pa.string() if j is None else j


def type_kind(t: pa.DataType | None) -> str:
    """The kind of a type: a value may change type within a kind without a note."""
    if t is None:
        return "mixed"
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_boolean(t):
        return "bool"
    if _is_num(t):
        return "number"
    if pa.types.is_string(t):
        return "string"
    if pa.types.is_list(t):
        return "list"
    return "other"


def first_type(seen: Sequence[tuple[pa.DataType | None, int]]) -> pa.DataType:
    """The type of a column new to the run: the kind of its first value, joined over
    the values of that kind (int64 then float64 -> float64; list items likewise).

    ``seen`` holds (type, non-null values) pairs in line order; a ``None`` type (a
    list mixing kinds) counts as ``string``, its JSON text. Deciding by the first value
    (not, say, the majority) keeps the result independent of where chunks end.
    """
    kind = next((type_kind(t if t is not None else pa.string()) for t, n in seen
                 if n and type_kind(t if t is not None else pa.string()) != "null"), None)
    if kind is None:
        return pa.null()
    out: pa.DataType | None = None
    for t, n in seen:
        t = t if t is not None else pa.string()
        if not n or type_kind(t) != kind:
            continue
        j = t if out is None else join_types(out, t)
        out = out if j is None else j
    return out if out is not None else pa.string()


def type_of_value(v: Any) -> pa.DataType | None:
    """Arrow type of one parsed value on the strict lattice; None if it needs text."""
    if v is None:
        return pa.null()
    if v is True or v is False:
        return pa.bool_()
    if isinstance(v, int):
        return pa.int64() if INT64_MIN <= v <= INT64_MAX else pa.float64()
    if isinstance(v, float):
        return pa.float64()
    if isinstance(v, str):
        return pa.string()
    if isinstance(v, list):
        inner: pa.DataType | None = pa.null()
        for x in v:
            t = type_of_value(x)
            inner = None if t is None else join_types(inner, t)
            if inner is None:
                return None
        return pa.list_(inner)
    if isinstance(v, dict):
        fields = []
        for k, x in v.items():
            t = type_of_value(x)
            if t is None:
                return None
            fields.append((k, t))
        return pa.struct(fields)
    return None
