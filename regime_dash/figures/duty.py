"""Flags and counters that flip faster than the chart has pixel columns, drawn as a duty cycle.

A 0/1 flag that flips every step fills its panel as one solid block whether it is on 1 % of
the steps or 99 %: merged spans cover everything, and a line picked point by point jumps
between 0 and 1 in every pixel. Cut into one column a pixel instead, each column's fraction
of steps on reads at a glance. Every step counts (nothing is sampled), in one pass of
``bincount`` / ``reduceat``: O(n). A counter is "on" where it is nonzero; its per-column
minimum and maximum keep the extremes visible. Pure NumPy; the traces are plain dicts.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from regime_dash.errors import ValidationError


@dataclass(frozen=True)
class DutyColumns:
    """Per pixel column: its first and last x, its steps, the fraction of them nonzero, min and max."""

    x0: np.ndarray
    x1: np.ndarray
    steps: np.ndarray
    on: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


def on_off_flips(values: np.ndarray) -> int:
    """How often ``values`` go from zero to nonzero or back (steps without a finite value skipped)."""
    v = np.asarray(values, dtype=np.float64)
    on = v[np.isfinite(v)] != 0.0
    return int(np.count_nonzero(on[1:] != on[:-1]))


def flips_fast(values: np.ndarray, columns: int) -> bool:
    """Whether ``values`` flip on and off more than once a column on average: spans or markers
    one pixel apart or closer would merge into a solid block."""
    return on_off_flips(values) > columns


def _finite(v: np.ndarray) -> bool:
    """Whether every value is finite, read with a min and a max (a NaN or ±Inf carries into them)."""
    return v.size == 0 or v.dtype.kind in "biu" or bool(np.isfinite(v.min()) and np.isfinite(v.max()))


def _differs(v: np.ndarray, off: float) -> np.ndarray:
    """``v != off`` as the float64 comparison makes it, with no [T] float64 copy where ``off`` is a
    value of ``v``'s own dtype (0 and 1 always are): the comparison there is the same."""
    if v.dtype.kind in "biu" and off in (0.0, 1.0):
        return v != int(off)
    if v.dtype.kind == "f" and float(v.dtype.type(off)) == off:
        return v != v.dtype.type(off)
    return np.asarray(v, dtype=np.float64) != off


@dataclass(frozen=True)
class DutyBins:
    """A finite, non-decreasing x cut into ``columns`` equal stretches once, for every signal drawn
    against it (a chart's flags and counters of one run share their steps): each non-empty
    column's first row, its steps, its first and last x."""

    columns: int
    rows: int
    starts: np.ndarray
    counts: np.ndarray
    x0: np.ndarray
    x1: np.ndarray


def _check_columns(columns: int) -> None:
    if columns < 1:
        raise ValidationError(f"columns={columns!r} must be at least 1", field="columns", value=columns)


def _cut(xs: np.ndarray, columns: int) -> tuple[np.ndarray, np.ndarray]:
    """(first row, steps) of each non-empty column of a finite, non-decreasing, non-empty ``xs``."""
    if np.any(xs[1:] < xs[:-1]):
        raise ValidationError("x must be non-decreasing to cut it into columns", field="x", value=None)
    width = (xs[-1] - xs[0]) / columns
    col = (np.zeros(xs.size, dtype=np.int64) if width <= 0
           else np.minimum(((xs - xs[0]) / width).astype(np.int64), columns - 1))
    counts = np.bincount(col, minlength=columns)
    counts = counts[counts > 0]
    return np.concatenate(([0], np.cumsum(counts)[:-1])), counts


def duty_bins(x: np.ndarray, columns: int) -> DutyBins | None:
    """``x`` cut into ``columns`` as :func:`duty_columns` cuts it; None where ``x`` is empty or has a
    non-finite value (each signal then cuts the rows it keeps itself).

    The column of a step, ``min(int((x - x[0]) / width), columns - 1)``, never falls as x grows, so
    each column's first row is found by bisection on that same expression: a few thousand rows
    evaluated, not every row, and the same rows as :func:`duty_columns`' pass over all of them."""
    _check_columns(columns)
    xs = np.asarray(x, dtype=np.float64)
    if xs.size == 0 or not _finite(xs):
        return None
    if np.any(xs[1:] < xs[:-1]):
        raise ValidationError("x must be non-decreasing to cut it into columns", field="x", value=None)
    width = (xs[-1] - xs[0]) / columns
    if width <= 0:
        starts, counts = np.zeros(1, dtype=np.int64), np.array([xs.size], dtype=np.int64)
    else:
        bounds = _first_rows(xs, width, columns)  # the first row of each column 0 .. columns, and the end
        counts = np.diff(bounds)
        starts = bounds[:-1][counts > 0]
        counts = counts[counts > 0]
    return DutyBins(columns, xs.size, starts, counts, xs[starts], xs[starts + counts - 1])


def _first_rows(xs: np.ndarray, width: float, columns: int) -> np.ndarray:
    """int64 [columns + 1]: for each column k, the first row whose column is k or more (``len(xs)``
    where none is), then ``len(xs)``."""
    n = xs.size
    want = np.arange(columns + 1, dtype=np.int64)
    lo = np.zeros(columns + 1, dtype=np.int64)  # the answer lies in [lo, hi]
    hi = np.full(columns + 1, n, dtype=np.int64)
    while np.any(lo < hi):
        mid = (lo + hi) // 2
        col = np.minimum(((xs[np.minimum(mid, n - 1)] - xs[0]) / width).astype(np.int64), columns - 1)
        below = (col < want) & (mid < n)
        lo = np.where(below & (lo < hi), mid + 1, lo)
        hi = np.where(~below & (lo < hi), mid, hi)
    lo[-1] = n  # no row has column `columns`: the end
    return lo


def duty_columns(x: np.ndarray, values: np.ndarray, columns: int, *, off: float = 0.0,
                 bins: DutyBins | None = None) -> DutyColumns:
    """``values`` over non-decreasing ``x`` cut into ``columns`` equal stretches of ``x``.

    Columns no step falls in are left out; steps whose x or value is not finite do not count.
    ``off`` is the value that counts as off: the columns are those of ``values - off``. ``bins``
    is :func:`duty_bins` of the same ``x`` and ``columns``, for a caller that draws several signals
    against one x: where every value is finite, the columns are read from it with no [T] copy
    (each column's min and max minus ``off`` is the min and max of the differences, since rounding
    keeps the order).
    """
    _check_columns(columns)
    v = np.asarray(values)
    if _fits(bins, columns, v) and _finite(v):
        return _binned(v, _differs(v, off), off, bins)
    xs = np.asarray(x, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64) - off
    if xs.shape != v.shape:
        raise ValidationError(f"x has {xs.size} values and the signal {v.size}", field="values", value=v.size)
    keep = np.isfinite(xs) & np.isfinite(v)
    if not keep.all():
        xs, v = xs[keep], v[keep]
    if xs.size == 0:
        empty = np.empty(0)
        return DutyColumns(empty, empty, np.empty(0, dtype=np.int64), empty, empty, empty)
    starts, counts = _cut(xs, columns)
    nonzero = np.add.reduceat((v != 0.0).astype(np.int64), starts)
    return DutyColumns(x0=xs[starts], x1=xs[starts + counts - 1], steps=counts, on=nonzero / counts,
                       lo=np.minimum.reduceat(v, starts), hi=np.maximum.reduceat(v, starts))


def _fits(bins: DutyBins | None, columns: int, v: np.ndarray) -> bool:
    return bins is not None and bins.columns == columns and bins.rows == v.size and v.dtype.kind in "biuf"


def _binned(v: np.ndarray, on: np.ndarray, off: float, bins: DutyBins) -> DutyColumns:
    """The columns of a finite ``v`` (``on``: where it is not ``off``) read through ``bins``."""
    steps_on = np.add.reduceat(on, bins.starts, dtype=np.int64)
    lo = np.minimum.reduceat(v, bins.starts).astype(np.float64) - off
    hi = np.maximum.reduceat(v, bins.starts).astype(np.float64) - off
    return DutyColumns(x0=bins.x0, x1=bins.x1, steps=bins.counts, on=steps_on / bins.counts, lo=lo, hi=hi)


def fast_duty(x: np.ndarray, values: np.ndarray, columns: int, *, off: float = 0.0,
              bins: DutyBins | None = None) -> DutyColumns | None:
    """:func:`duty_columns` of ``values`` where they flip on and off faster than ``columns``
    (:func:`flips_fast` of ``values - off``), else None; the on/off test made once for both."""
    v = np.asarray(values)
    if v.dtype.kind in "biuf" and _finite(v):  # no non-finite step to skip: no [T] copy
        on = _differs(v, off)
        if np.count_nonzero(on[1:] != on[:-1]) <= columns:
            return None
        return _binned(v, on, off, bins) if _fits(bins, columns, v) else duty_columns(x, v, columns, off=off)
    shifted = np.asarray(values, dtype=np.float64) - off
    return duty_columns(x, shifted, columns) if flips_fast(shifted, columns) else None


def right_edges(cols: DutyColumns) -> np.ndarray:
    """Where each column's band ends: where the next begins; the last at its own last x (at least a
    step's width on, so a last column of one step still shows)."""
    if cols.x0.size == 0:
        return cols.x1
    last = cols.x1[-1] if cols.x1[-1] > cols.x0[-1] else cols.x0[-1] + 1.0
    return np.append(cols.x0[1:], last)


def hover_texts(cols: DutyColumns, name: str, steps: bool = True) -> list[str]:
    """One hover line a column: ``"<name>: on 37.5% of steps 1200–1231"`` (of its rows off the step axis)."""
    out = []
    for a, b, f, n in zip(cols.x0.tolist(), cols.x1.tolist(), cols.on.tolist(), cols.steps.tolist()):
        where = f"of steps {a:.0f}–{b:.0f}" if steps else f"of its {n} rows"
        out.append(f"{name}: on {100.0 * f:.3g}% {where}")
    return out


#: The hover of a duty band's column after its name, worded as :func:`hover_texts` words it, from the
#: column's ``customdata`` row of :func:`hover_data` (percent on, then its steps or its rows).
HOVER_STEPS = ": on %{customdata[0]:.3~g}% of steps %{customdata[1]:.0f}–%{customdata[2]:.0f}<extra></extra>"
HOVER_ROWS = ": on %{customdata[0]:.3~g}% of its %{customdata[1]:.0f} rows<extra></extra>"


def hover_data(cols: DutyColumns, name: str, steps: bool = True) -> tuple[np.ndarray, str]:
    """The numbers of :func:`hover_texts`, a row a column (percent on, first and last step; or percent
    on and rows off the step axis), and the ``hovertemplate`` that words them (``name``, then
    :data:`HOVER_STEPS` or :data:`HOVER_ROWS`). A band sends these, not a sentence a column: with many
    runs overlaid the sentences were two thirds of the chart's bytes. Float32 where every number
    fits it exactly."""
    pct = 100.0 * cols.on
    rows = np.column_stack([pct, cols.x0, cols.x1] if steps else [pct, cols.steps]).astype(np.float64)
    whole = rows[:, 1:]
    exact = bool(np.all(np.abs(whole[np.isfinite(whole)]) < 2**24))
    return (rows.astype(np.float32) if exact else rows), name + (HOVER_STEPS if steps else HOVER_ROWS)


def band_xy(cols: DutyColumns, height: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The band's top as a line of ``line_shape="hv"``: each column's left edge at ``height``, then the
    last column's right edge (filled to zero, it is a bar a column, touching its neighbours)."""
    h = np.asarray(height, dtype=np.float64)
    if cols.x0.size == 0:
        return cols.x0, h
    return np.append(cols.x0, right_edges(cols)[-1]), np.append(h, h[-1])


def envelope_xy(cols: DutyColumns) -> tuple[np.ndarray, np.ndarray]:
    """A closed step-shaped polygon from each column's minimum up to its maximum (the maxima forward,
    the minima back), drawn with ``fill="toself"``."""
    left, right = cols.x0, right_edges(cols)
    xs = np.column_stack([left, right]).ravel()
    top, bottom = np.repeat(cols.hi, 2), np.repeat(cols.lo, 2)
    return np.concatenate([xs, xs[::-1]]), np.concatenate([top, bottom[::-1]])


__all__ = ["DutyColumns", "DutyBins", "on_off_flips", "flips_fast", "duty_bins", "duty_columns", "fast_duty", "right_edges", "hover_texts",
           "hover_data", "HOVER_STEPS", "HOVER_ROWS", "band_xy", "envelope_xy"]
