"""What makes a diag: the one definition ingest, the run store, ``check`` and the Runs page share.

Diag field
    ``step`` or a ``risk_stack.*`` field (the diag contract's prefix), under its own name or
    an alternative the alias table (:mod:`regime_dash.diag.aliases`) gives ``step`` or a
    ``risk_stack.*`` column (``global_step``, ``kelly_f``, ``RL_REGIME_DEAD_ZONE_FLAG_INDEX``);
    with a user's aliases, their alternatives of such columns too.
Diag line
    A JSON object line with a value in at least one diag field (null is no value; a value
    set aside because it does not fit the field's type still counts: the field is there).
Diag
    A source (a file, an upload) or a stored run with at least one diag line and a ``step``
    field. In a diag, the other JSON object lines (``{"a": 1}``) are quarantined as bad lines
    are, with their line numbers and the reason :data:`NOT_DIAG_LINE`; the columns only they
    carried are not the run's.

Anything else is *not a diag file*, and :func:`not_diag_reason` says why in one line: the
source has no lines, no JSON object line, no line with a diag field, or no ``step``.
:func:`require_diag` raises :class:`~regime_dash.errors.NotDiagError` with it, naming the
source. Ingest (:func:`regime_dash.ingest.iter_batches` with ``diag_only``), the store's
ingest (so the Runs page's upload), ``check FILE``/``RUN``, ``check --all`` and the Runs
page's table of runs all ask these functions.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Iterable, Mapping

import numpy as np
import pyarrow as pa

from regime_dash.errors import NotDiagError
from regime_dash.ingest.arrays import from_numpy, to_numpy
from regime_dash.ingest.report import LINE_COLUMN, NOT_DIAG_LINE, Reject

_PREFIX = "risk_stack."


def _diag_canonical(name: str) -> bool:
    return name == "step" or name.startswith(_PREFIX)


@functools.lru_cache(maxsize=8)
def _alternatives(user: tuple | None) -> tuple[frozenset[str], frozenset[str]]:
    """(every alternative name of a diag field, the alternatives of ``step``)."""
    from regime_dash.diag.aliases import merged_table

    table = merged_table(dict(user) if user else None)
    diag = frozenset(a for c, alts in table.items() if _diag_canonical(c) for a in alts)
    return diag, frozenset(table.get("step", ()))


def _key(aliases: Mapping[str, Any] | None) -> tuple | None:
    if not aliases:
        return None
    return tuple(sorted((k, v if isinstance(v, str) else tuple(v)) for k, v in aliases.items()))


def is_diag_field(name: str, aliases: Mapping[str, Any] | None = None) -> bool:
    """Whether column ``name`` is a diag field (see the module docstring)."""
    return _diag_canonical(name) or name in _alternatives(_key(aliases))[0]


def is_step_field(name: str, aliases: Mapping[str, Any] | None = None) -> bool:
    """Whether column ``name`` is ``step`` or one of its aliases."""
    return name == "step" or name in _alternatives(_key(aliases))[1]


def not_diag_reason(columns: Iterable[str], rows: int, *, lines: int = 0, rejected: int = 0,
                    not_diag_lines: int = 0, first_reject: str | None = None,
                    aliases: Mapping[str, Any] | None = None) -> str | None:
    """Why a source or a run is not a diag, in one line; ``None`` when it is one.

    Parameters
    ----------
    columns
        The columns that hold a value in at least one row (a column of nulls only is none).
    rows
        Rows kept (diag lines, where ingest quarantined the others).
    lines, rejected, not_diag_lines
        Lines of the source, lines rejected, and of those the JSON object lines
        quarantined as :data:`NOT_DIAG_LINE` (all three 0 for a stored run).
    first_reject
        ``line N: reason`` of the first rejected line, when there is one.
    aliases
        A user's alias table, on top of the built-in one.
    """
    columns = [c for c in columns if c != LINE_COLUMN]
    if rows == 0 and not_diag_lines:
        return (f"none of its {not_diag_lines} JSON object line(s) has a diag field "
                f"(step or risk_stack.*)")
    if rows == 0 and rejected:
        return f"no JSON object line ({rejected} of {lines} line(s) rejected; {first_reject})"
    if rows == 0:
        return "no lines" if lines == 0 else f"no JSON object line (its {lines} line(s) are blank)"
    shown = ", ".join(map(str, columns[:6])) + (", ..." if len(columns) > 6 else "")
    if not any(is_diag_field(c, aliases) for c in columns):
        return f"no diag field (step or risk_stack.*) in its {rows} row(s) (fields: {shown or 'none'})"
    if not any(is_step_field(c, aliases) for c in columns):
        return f"no 'step' field in its {rows} row(s) (fields: {shown})"
    return None


def require_diag(name: str | None, reason: str | None) -> None:
    """Raise :class:`~regime_dash.errors.NotDiagError` naming ``name`` when ``reason`` is one
    (a :func:`not_diag_reason`)."""
    if reason is not None:
        raise NotDiagError(f"{name or 'input'!r} is not a diag file: {reason}", path=name, reason=reason)


def report_reason(report: Any, aliases: Mapping[str, Any] | None = None) -> str | None:
    """:func:`not_diag_reason` of an :class:`~regime_dash.ingest.IngestReport` (a parsed source)."""
    first = next(iter(report.rejected), None)
    return not_diag_reason([c for c, t in report.columns.items() if t != "null"], report.rows,
                           lines=report.lines, rejected=report.rejected_count,
                           not_diag_lines=report.not_diag_lines,
                           first_reject=None if first is None else f"line {first.line}: {first.reason}",
                           aliases=aliases)


def meta_reason(meta: Mapping[str, Any]) -> str | None:
    """:func:`not_diag_reason` of a stored run, from its ``_meta.json`` (its columns and rows)."""
    columns = [c for c, t in (meta.get("columns") or {}).items() if t != "null"]
    return not_diag_reason(columns, int(meta.get("rows") or 0))


def frame_reason(frame: Any, aliases: Mapping[str, Any] | None = None) -> str | None:
    """:func:`not_diag_reason` of a loaded frame (a stored run, a Parquet file): its columns
    with a value in some row, and its rows."""
    columns = [c for c in frame.columns if c != LINE_COLUMN and bool(frame[c].notna().any())]
    return not_diag_reason(columns, len(frame), aliases=aliases)


def diag_row_mask(table: pa.Table, lines_with_values: Iterable[int] = (),
                  aliases: Mapping[str, Any] | None = None) -> np.ndarray:
    """True for each row of ``table`` with a value in a diag field (``lines_with_values``:
    the ``_line`` numbers of rows whose diag value was set aside or is still pending)."""
    n = table.num_rows
    keep = np.zeros(n, dtype=bool)
    for name in table.column_names:
        if name == LINE_COLUMN or not is_diag_field(name, aliases):
            continue
        col = table.column(name)
        if col.null_count == 0:
            return np.ones(n, dtype=bool)
        if col.null_count < n:
            keep |= to_numpy(col.is_valid())
    extra = np.fromiter(lines_with_values, dtype=np.int64)
    if len(extra) and not keep.all():
        keep |= np.isin(to_numpy(table.column(LINE_COLUMN)), extra)
    return keep


def quarantine_non_diag(chunk: Any, data: bytes, aliases: Mapping[str, Any] | None = None) -> Any:
    """A parsed chunk (``arrow.Chunk``, chunk-relative lines) with its JSON object lines that
    carry no diag field moved to its rejects (reason :data:`NOT_DIAG_LINE`, their bytes kept),
    and the values, pending values and columns only those lines had dropped with them.

    Coercion counts of a column the kept rows also have still count those lines' values.
    """
    table = chunk.table
    if table.num_rows == 0:
        return chunk
    noted = [a.line for a in chunk.aside if is_diag_field(a.field, aliases)]
    noted += [line for line, k, _v in chunk.pending if is_diag_field(k, aliases)]
    keep = diag_row_mask(table, noted, aliases)
    if keep.all():
        return chunk
    return _reject_rows(chunk, data, keep, lambda line: NOT_DIAG_LINE)


def _reject_rows(chunk: Any, data: bytes, keep: np.ndarray, reason: Any) -> Any:
    """``chunk`` with the rows ``keep`` leaves out moved to its rejects (``reason(line)`` each, their
    bytes kept), and the values, pending values and columns only those rows had dropped with them."""
    from regime_dash.ingest.arrow import lines_of

    table = chunk.table
    lines = to_numpy(table.column(LINE_COLUMN))
    _buf, starts, ends = lines_of(data)
    out = [Reject(int(n), reason(int(n)), data[starts[n - 1]:ends[n - 1]]) for n in lines[~keep]]
    kept = table.filter(from_numpy(keep))
    kept_lines = set(lines[keep].tolist())
    pending = [p for p in chunk.pending if p[0] in kept_lines]
    had = {k for _line, k, _v in chunk.pending}
    has = {k for _line, k, _v in pending}
    gone = [c for c in kept.column_names
            if c != LINE_COLUMN and c not in has
            and (c in had or table.column(c).null_count < table.num_rows)
            and kept.column(c).null_count == kept.num_rows]
    kept = kept.drop_columns(gone)
    return dataclasses.replace(
        chunk, table=kept, rejects=sorted(chunk.rejects + out, key=lambda r: r.line),
        aside=[a for a in chunk.aside if a.line in kept_lines], pending=pending,
        coerced={c: v for c, v in chunk.coerced.items() if c not in gone})


#: The largest step stored: 2**53 - 1, the largest integer a browser (JavaScript's doubles), a
#: float column and a chart's axis all hold exactly. A step of 2**63 - 1 broke Explore (out of
#: JavaScript's number range) and came back from check as -2**63.
MAX_STEP = 2 ** 53 - 1


def _big_steps(table: pa.Table) -> np.ndarray:
    """Per row: whether its stored ``step`` lies beyond ±:data:`MAX_STEP`."""
    col = table.column("step")
    if col.null_count == 0 and col.type in (pa.int64(), pa.float64()):  # the usual case, in NumPy
        vals = to_numpy(col)
        if col.type == pa.int64():
            return (vals > MAX_STEP) | (vals < -MAX_STEP)
        return np.abs(vals) > float(MAX_STEP)
    import pyarrow.compute as pc  # only here: its import costs a fresh ingest ~0.13 s

    if pa.types.is_integer(col.type):
        big = pc.greater(col, pa.scalar(MAX_STEP, col.type))
        if pa.types.is_signed_integer(col.type):
            big = pc.or_(big, pc.less(col, pa.scalar(-MAX_STEP, col.type)))
    elif pa.types.is_floating(col.type):
        big = pc.greater(pc.abs(col), pa.scalar(float(MAX_STEP), col.type))
    else:
        return np.zeros(table.num_rows, dtype=bool)
    return pc.fill_null(big, False).to_numpy(zero_copy_only=False)


def _beyond(json_text: str) -> bool:
    """Whether a set-aside value (JSON text) is a number beyond ±:data:`MAX_STEP`."""
    try:
        return abs(float(json_text)) > MAX_STEP
    except ValueError:  # a string, a bool, an object: not a step number at all
        return False


def quarantine_unsafe_steps(chunk: Any, data: bytes) -> Any:
    """``chunk`` with the lines whose ``step`` lies beyond ±:data:`MAX_STEP` moved to its rejects,
    the step named in the reason: a stored one, or one set aside because its column could not
    hold it (2**63 - 1 reads as a double, 9.223372036854776e+18)."""
    table = chunk.table
    if table.num_rows == 0 or "step" not in table.column_names:
        return chunk
    lines = to_numpy(table.column(LINE_COLUMN))
    bad = _big_steps(table)
    steps = {} if not bad.any() else dict(zip(lines[bad].tolist(),
                                              table.column("step").filter(from_numpy(bad)).to_pylist()))
    for a in chunk.aside:
        if a.field == "step" and _beyond(a.value):
            steps[a.line] = a.value
    if not steps:
        return chunk
    keep = ~np.isin(lines, np.fromiter(steps, dtype=np.int64))
    return _reject_rows(chunk, data, keep, lambda line: (
        f"step {steps[line]} is beyond ±{MAX_STEP:,} (2^53 − 1), the largest step stored exactly"))


__all__ = ["NOT_DIAG_LINE", "diag_row_mask", "frame_reason", "is_diag_field", "is_step_field", "meta_reason",
           "not_diag_reason", "quarantine_non_diag", "quarantine_unsafe_steps", "MAX_STEP", "report_reason", "require_diag"]
