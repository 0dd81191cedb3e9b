"""``envelope_decay_horizon`` judged batch by batch, its state bounded rather than its columns kept per row.

The finding reads the whole run (:func:`regime_dash.analysis.findings._envelope_decay_horizon`): the
median ``decay_alpha``, the envelope's first largest value (the peak), its resting level (the median
of the finite values before the peak when there are 10 or more, else the lowest value from the peak
on), the first row from the peak at or below 7/8 of the way down (the end), and the first divergent
row of ``(peak, end]``. :class:`EnvelopeCarry` keeps what those need and no row:

* ``decay_alpha``'s distinct values and their counts (a configured rate: a handful of values);
* the peak, and with a resting level fixed by the rows before it, whether the end was seen and the
  divergent rows up to it;
* with a resting level that is the lowest value after the peak (a peak in the first rows), the
  running lowest value and the record lows since the end (the end only moves later as the lowest
  value falls), each with the divergent rows counted up to it, up to the first record at or below
  1/8 of the peak (an end no lower level can move).

A new peak with 10 or more finite values before it re-reads the envelope of the rows before the
batch (``history``), once for that peak: the median of the values before it is not kept per row.
A divergent row reads only itself and the row before it (lookback 1).
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from regime_dash.diag import catalogue as diag
from regime_dash.analysis import findings as fd
from regime_dash.analysis import view as v
from regime_dash.analysis.invariants import CheckOptions
from regime_dash.analysis.view import FrameView

__all__ = ["EnvelopeCarry", "RESTING_ROWS"]

#: Finite envelope values before the peak from which their median is the resting level (as the finder).
RESTING_ROWS = 10


class EnvelopeCarry:
    """The carried state of ``envelope_decay_horizon`` (the module doc says what and why).

    ``history()`` gives the envelope (float64) of every row folded in before the batch at hand."""

    lookback = 1

    def __init__(self, opt: CheckOptions, history: Callable[[], np.ndarray]):
        self.opt, self.history = opt, history
        self.alphas: dict[float, int] = {}
        self.rows, self.finite = 0, 0
        self.last_step = 0
        self.applies = False
        self.has_batch_max = False
        self.peak: tuple[float, int, int] | None = None  # (value, row, step)

    def _new_peak(self, value: float, row: int, step: int, before: np.ndarray | None) -> None:
        """Start over from a new peak; ``before``: the finite values before it (``None``: fewer than 10)."""
        self.peak = (value, row, step)
        self.first_bad: tuple[int, dict] | None = None  # (row, evidence) of the first divergent row after it
        self.bad = 0  # divergent rows after the peak so far
        if before is not None:  # the resting level is fixed: one target
            self.base = float(np.median(before))
            self.lowest = None
            self.end: tuple[int, int, int] | None = None  # (row, step, divergent rows up to it)
            if value <= self.base + (value - self.base) / 8.0:  # an infinite peak is its own end
                self.end = (row, step, 0)
        else:  # the resting level is the lowest value from the peak on
            self.base = None
            self.lowest = value
            self.records: list[tuple[float, int, int, int]] = []  # (value, row, step, divergent rows up to it)
            self.capped = False  # a record at or below peak/8 ends the records: no lower level moves the end

    def update(self, vw: FrameView, ctx: int) -> None:
        self.applies = vw.has(v.DECAY_ALPHA, v.ENVELOPE)
        self.has_batch_max = vw.has(diag.INPUT_COLUMNS["batch_max_abs"])
        first_row = self.rows - ctx  # the run's row number of the window's row 0
        if vw.n:
            self.last_step = int(vw.step[-1])
        if not self.applies:
            self.rows += vw.n - ctx
            return
        alpha = vw.f32(v.DECAY_ALPHA)[ctx:]
        values, counts = np.unique(alpha[np.isfinite(alpha)], return_counts=True)
        for a, k in zip(values.tolist(), counts.tolist()):
            self.alphas[a] = self.alphas.get(a, 0) + k
        env = vw.f32(v.ENVELOPE).astype(np.float64)
        new = env[ctx:]
        finite = np.isfinite(new)
        start = ctx
        if finite.any():
            j = int(np.nanargmax(new))
            if self.peak is None or new[j] > self.peak[0]:
                n_before = self.finite + int(finite[:j].sum())
                before = None
                if n_before >= RESTING_ROWS:
                    older = self.history() if self.finite else np.empty(0)
                    before = np.concatenate([older[np.isfinite(older)], new[:j][finite[:j]]])
                self._new_peak(float(new[j]), first_row + ctx + j, int(vw.step[ctx + j]), before)
                start = ctx + j + 1
        self.finite += int(finite.sum())
        self.rows += vw.n - ctx
        if self.peak is not None and start < vw.n:
            self._after(vw, env, start, first_row)

    def _after(self, vw: FrameView, env: np.ndarray, start: int, first_row: int) -> None:
        """Fold window rows ``start:`` (all after the peak) into the end and the divergent rows."""
        rows = np.zeros(vw.n, dtype=bool)
        if self.base is not None and self.end is not None:
            return  # the end was seen: nothing after it changes the finding until a new peak
        if self.base is not None:
            target = self.base + (self.peak[0] - self.base) / 8.0
            below = np.flatnonzero(env[start:] <= target)
            stop = start + int(below[0]) if len(below) else vw.n - 1
        else:
            stop = vw.n - 1
        rows[start:stop + 1] = True
        too_fast, off, floor, expect = fd.decay_divergence_rows(vw, self.opt, rows)
        bad = too_fast | off
        if self.first_bad is None and bad.any():
            i = int(np.flatnonzero(bad)[0])
            self.first_bad = (first_row + i, fd.decay_divergence_at(vw, i, too_fast, floor, expect, 0))
        running = self.bad + np.cumsum(bad[start:stop + 1])
        self.bad = int(running[-1])
        if self.base is not None:
            if len(below):
                self.end = (first_row + stop, int(vw.step[stop]), self.bad)
            return
        self._records(vw, env, start, first_row, running)

    def _records(self, vw: FrameView, env: np.ndarray, start: int, first_row: int, running: np.ndarray) -> None:
        """The record lows among window rows ``start:`` (a resting level that is the lowest value)."""
        seg = np.where(np.isnan(env[start:]), np.inf, env[start:])
        lowest = np.minimum.accumulate(np.concatenate([[self.lowest], seg]))
        fresh = np.flatnonzero(seg < lowest[:-1])  # a new lowest value: the first row at or below it
        self.lowest = float(lowest[-1])
        if not self.capped:
            for i in fresh.tolist():
                value = float(seg[i])
                self.records.append((value, first_row + start + i, int(vw.step[start + i]), int(running[i])))
                if value <= self.peak[0] / 8.0:
                    self.capped = True
                    break
        end = self._record_end()
        if end is not None and end[1] != self.peak[1]:
            # the end only moves later: the records before it go. The peak as its own end (an infinite
            # peak, or a lowest value equal to the peak: an envelope that stays constant) is no record,
            # and it is no final end either (a later lower value moves it to a record): nothing goes.
            self.records = self.records[self.records.index(end):]

    def _record_end(self) -> tuple[float, int, int, int] | None:
        if self.lowest is None or not self.lowest > 0:
            return None
        target = self.lowest + (self.peak[0] - self.lowest) / 8.0
        if self.peak[0] <= target:  # an infinite peak is its own end
            return (self.peak[0], self.peak[1], self.peak[2], 0)
        return next((r for r in self.records if r[0] <= target), None)

    def _alpha(self) -> float:
        total = sum(self.alphas.values())
        if not total:
            return math.nan
        keys, seen, middle = sorted(self.alphas), 0, []
        wanted = {(total - 1) // 2, total // 2}  # the middle one or two of the sorted values
        for a in keys:
            if any(seen <= w < seen + self.alphas[a] for w in wanted):
                middle += [a] * sum(seen <= w < seen + self.alphas[a] for w in wanted)
            seen += self.alphas[a]
        return float(np.median(np.asarray(middle, dtype=np.float32)))  # the float32 mean, as nanmedian

    def result(self):
        if not self.applies or self.rows < 2 or self.peak is None:
            return []
        alpha = self._alpha()
        if not 0 < alpha < 1:
            return []
        peak, peak_row, peak_step = self.peak
        if self.base is not None:
            base, end = self.base, self.end
        else:
            base, end = self.lowest, self._record_end()
            end = None if end is None else end[1:]
        if not peak > base > 0 or peak < 2 * base:  # no shock worth the name
            return []
        end_row, end_step, bad = end if end is not None else (self.rows - 1, self.last_step, self.bad)
        evidence = None
        if self.first_bad is not None and self.first_bad[0] <= end_row and bad:
            evidence = {**self.first_bad[1], "divergent_steps": bad}
        return fd.decay_finding(self.opt, alpha, peak_step, peak, base, end_step, end is not None, evidence,
                                self.has_batch_max)
