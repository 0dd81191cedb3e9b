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


def duty_columns(x: np.ndarray, values: np.ndarray, columns: int) -> DutyColumns:
    """``values`` over non-decreasing ``x`` cut into ``columns`` equal stretches of ``x``.

    Columns no step falls in are left out; steps whose x or value is not finite do not count.
    """
    if columns < 1:
        raise ValidationError(f"columns={columns!r} must be at least 1", field="columns", value=columns)
    xs = np.asarray(x, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if xs.shape != v.shape:
        raise ValidationError(f"x has {xs.size} values and the signal {v.size}", field="values", value=v.size)
    keep = np.isfinite(xs) & np.isfinite(v)
    if not keep.all():
        xs, v = xs[keep], v[keep]
    if xs.size == 0:
        empty = np.empty(0)
        return DutyColumns(empty, empty, np.empty(0, dtype=np.int64), empty, empty, empty)
    if np.any(np.diff(xs) < 0):
        raise ValidationError("x must be non-decreasing to cut it into columns", field="x", value=None)
    width = (xs[-1] - xs[0]) / columns
    col = (np.zeros(xs.size, dtype=np.int64) if width <= 0
           else np.minimum(((xs - xs[0]) / width).astype(np.int64), columns - 1))
    counts = np.bincount(col, minlength=columns)
    counts = counts[counts > 0]
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    nonzero = np.add.reduceat((v != 0.0).astype(np.int64), starts)
    return DutyColumns(x0=xs[starts], x1=xs[starts + counts - 1], steps=counts, on=nonzero / counts,
                       lo=np.minimum.reduceat(v, starts), hi=np.maximum.reduceat(v, starts))


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


__all__ = ["DutyColumns", "on_off_flips", "flips_fast", "duty_columns", "right_edges", "hover_texts",
           "hover_data", "HOVER_STEPS", "HOVER_ROWS", "band_xy", "envelope_xy"]
