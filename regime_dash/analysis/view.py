"""FrameView: one diag frame prepared for analysis.

Every episode finder and invariant reads the frame through a :class:`FrameView`:
rows sorted by step, numeric columns as float32 arrays (the ISV is float32, so
that is the precision every formula is recomputed in), and, per row, whether it
follows the previous row by exactly one step and whether it is a boundary
(``reset_session_state`` ran before it).

Boundaries are detected, not given: a diag file has no boundary marker. A row is
a boundary when any of these holds (each is one ``reason``):

``phase``               ``phase`` differs from the previous row's;
``fold``                ``fold`` differs from the previous row's;
``recency_sentinel``    tail recency is the sentinel ``1e6`` or ``1e6 + 1``
                        (re-bootstrapped, then the observer's ``+1``) and is not
                        the previous value ``+ 1``;
``transition_restart``  the v9 remaining is ``steps_config − 1`` or
                        ``steps_config`` and is not the previous value's
                        countdown successor (the reset aligns it to
                        ``steps_config`` and ``eval_warmup_decay`` counts one
                        down in the same step; a trainer that snapshots before
                        the decay shows ``steps_config``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Iterable

import numpy as np
import pandas as pd

from regime_dash.diag import catalogue as diag
# The columns the analysis reads: the catalogue of regime_dash.diag.catalogue (the finders and checks import them here).
from regime_dash.diag.catalogue import (  # noqa: F401
    B_SIZE, BOOST_FACTOR, BOOST_WINDOW, COUNT, DECAY_ALPHA, DURATION, ENVELOPE, EPS_MAX, EPS_MIN, FACTOR, FLAG,
    KELLY, KELLY_ANALYTIC, LIVE, MAX_DURATION, N_RECOVERY, POPART_VAR, RECENCY, REMAINING, SIGMA, SIGMA_THR,
    STEPS_CONFIG, TAU_ACTION, TAU_MIN, TAU_MIN_EFF, TIMEOUT, VARIANCE, WORST)
from regime_dash.core.slots import DEFAULT_LAYOUT

P, R = diag.P, diag.R

FLAT = diag.FLAT_COUNT

#: The tail-recency sentinel ("no tail seen"), from the slot registry.
RECENCY_SENTINEL = np.float32(DEFAULT_LAYOUT["RL_REGIME_TAIL_EVENT_RECENCY_INDEX"].bootstrap)

F32 = np.float32
ONE = F32(1.0)
#: ``frame.attrs`` key of ``{column: row positions}`` where the file held no value (see :meth:`FrameView.null`).
NULL_ROWS_ATTR = "null_rows"


def null_rows(table) -> dict[str, np.ndarray]:
    """``{column: row positions}`` of the nulls of every numeric column of a pyarrow ``table``.

    Pandas turns a null and a NaN into the same NaN; a reader keeps this beside the frame
    (``frame.attrs[NULL_ROWS_ATTR]``) so the checks can tell "no value" from "NaN".
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    out = {}
    for name, col in zip(table.column_names, table.columns):
        if col.null_count and (pa.types.is_floating(col.type) or pa.types.is_integer(col.type)):
            out[name] = np.flatnonzero(pc.is_null(col).to_numpy(zero_copy_only=False))
    return out


def countdown_next(prev: np.ndarray, k: np.ndarray | int = 1) -> np.ndarray:
    """The v9 remaining ``k`` steps after ``prev`` with no boundary in between: ``N → 0 → −1``."""
    prev = np.asarray(prev, dtype=np.float64)
    after = prev - np.asarray(k, dtype=np.float64)
    return np.where(prev > 0, np.where(after >= 0, after, -1.0), -1.0)


@dataclass
class FrameView:
    """A diag frame sorted by step, with boundary and step-continuity masks.

    Build it with :func:`view`. ``frame`` keeps every column of the input;
    :meth:`f32` reads one as float32 (non-numeric values become NaN).
    """

    frame: pd.DataFrame
    step: np.ndarray
    step_given: bool
    rows_without_step: int = 0
    _cache: dict = field(default_factory=dict, repr=False)
    #: Position of each row in the frame handed to :func:`view` (before sorting and dropping); None
    #: where every row kept its own (nothing sorted or dropped).
    source_rows: np.ndarray | None = None
    #: Rows whose logged state does not continue the row before them although their step follows it (the
    #: first row of a resume whose slots were not restored, :mod:`regime_dash.analysis.structure`): step-to-step
    #: rules treat them as a restart. None: no such row.
    breaks: np.ndarray | None = None
    #: Rows that start from the bootstrap state, besides a first row at step 0 (a resume that came back at
    #: the bootstrap values): the re-derivation derives them from the bootstrap. None: no such row.
    starts: np.ndarray | None = None

    @property
    def n(self) -> int:
        return len(self.frame)

    def has(self, *cols: str) -> bool:
        return all(c in self.frame.columns for c in cols)

    def missing(self, cols: Iterable[str]) -> list[str]:
        return [c for c in cols if c not in self.frame.columns]

    def f32(self, col: str) -> np.ndarray:
        """Column ``col`` as float32 (NaN where missing or not a number)."""
        if col not in self._cache:
            series = self.frame[col]
            if series.dtype == np.float32:  # a replay's or a Parquet run's slot: already the ISV's type
                arr = series.to_numpy().view()
                arr.flags.writeable = False  # shared with the frame: nobody writes through it
                self._cache[col] = arr
            else:
                raw = series if series.dtype.kind in "fiu" else pd.to_numeric(pd.Series(series), errors="coerce")
                self._cache[col] = raw.to_numpy(dtype=np.float64, na_value=np.nan).astype(np.float32)
        return self._cache[col]

    def memo(self, key: tuple, make: Callable[[], Any]) -> Any:
        """``make()``, computed once per view under ``key`` (a tuple, so no column's name): a result
        several checks and finders ask of the same frame."""
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def null(self, col: str) -> np.ndarray | None:
        """Rows where the file held no value for ``col`` (JSON ``null`` or the key absent), as opposed
        to a ``NaN`` it wrote; ``None`` when the frame does not say (a frame read into pandas alone
        turns both into NaN). The reader records them in ``attrs[NULL_ROWS_ATTR]``."""
        known = self.frame.attrs.get(NULL_ROWS_ATTR)
        if known is None:
            return None
        raw = {canon: old for old, canon in self.frame.attrs.get("aliases_applied", {}).items()}.get(col, col)
        rows = known.get(raw, known.get(col))
        out = np.zeros(self.n, dtype=bool)
        if rows is None or not len(rows):
            return out
        src = self.source_rows if self.source_rows is not None else np.arange(self.n)
        return np.isin(src, np.asarray(rows, dtype=np.int64))

    def switch(self, name: str) -> np.ndarray | None:
        """Rows where the file says config switch ``name`` was on (its ``risk_stack.config.*`` column is 1).

        ``None`` when the file does not carry the switch: a model switch then counts as off (the spec's
        code), and a feature switch is inferred from the rows by the check that needs it."""
        col = diag.SWITCH_COLUMNS[name]
        return self.f32(col) == 1 if self.has(col) else None

    def prev(self, col: str) -> np.ndarray:
        """``col`` of the previous row (NaN at row 0)."""
        a = self.f32(col)
        out = np.empty_like(a)
        out[:1] = np.nan
        out[1:] = a[:-1]
        return out

    @cached_property
    def gap(self) -> np.ndarray:
        """Steps from the previous row to this one (0 at row 0)."""
        g = np.zeros(self.n, dtype=np.int64)
        g[1:] = np.diff(self.step)
        return g

    @cached_property
    def restart(self) -> np.ndarray:
        """Row 0, rows whose step does not increase (steps logged again that the structure analysis
        did not resolve), and the rows of ``breaks``: nothing before them is known, so only per-row
        rules apply."""
        r = self.gap <= 0
        r[:1] = True
        if self.breaks is not None:
            r |= self.breaks
        return r

    @cached_property
    def contiguous(self) -> np.ndarray:
        """Row follows the previous row by exactly one step."""
        c = self.gap == 1
        c[:1] = False
        if self.breaks is not None:
            c &= ~self.breaks
        return c

    @cached_property
    def boundary_reasons(self) -> dict[str, np.ndarray]:
        """``{reason: bool[T]}`` for each boundary signature (see the module doc)."""
        out: dict[str, np.ndarray] = {}
        for col in ("phase", "fold"):
            if col in self.frame.columns:
                # equal values get equal codes and a missing one -1: no [T] array of Python objects
                codes = pd.factorize(self.frame[col], use_na_sentinel=True)[0]
                known = codes >= 0
                change = np.zeros(self.n, dtype=bool)
                change[1:] = known[1:] & known[:-1] & (codes[1:] != codes[:-1])
                out[col] = change
        if self.has(RECENCY):
            rec, prev = self.f32(RECENCY), self.prev(RECENCY)
            sentinel = (rec == RECENCY_SENTINEL) | (rec == RECENCY_SENTINEL + ONE)
            out["recency_sentinel"] = sentinel & ~(rec == prev + ONE) & (np.arange(self.n) > 0) & ~self._broken
        if self.has(REMAINING, STEPS_CONFIG):
            rem, prev = self.f32(REMAINING), self.prev(REMAINING)
            n_cfg = self.f32(STEPS_CONFIG)
            restart = (n_cfg > 0) & ((rem == n_cfg - ONE) | (rem == n_cfg))
            out["transition_restart"] = (restart & ~(rem == countdown_next(prev, self.gap))
                                         & (np.arange(self.n) > 0) & ~self._broken)
        return out

    @property
    def _broken(self) -> np.ndarray | np.bool_:
        # a resumed row that came back at the bootstrap looks like a reset: the resume, not a boundary
        return np.False_ if self.breaks is None else self.breaks

    @cached_property
    def boundary(self) -> np.ndarray:
        """Row is a boundary: ``reset_session_state`` ran before it."""
        b = np.zeros(self.n, dtype=bool)
        for mask in self.boundary_reasons.values():
            b |= mask
        return b

    @cached_property
    def checked(self) -> np.ndarray:
        """Rows where a step-to-step recurrence applies: contiguous and not a boundary."""
        return self.contiguous & ~self.boundary

    def steps_at(self, mask: np.ndarray) -> np.ndarray:
        return self.step[np.asarray(mask, dtype=bool)]

    def subset(self, rows: np.ndarray, breaks: np.ndarray | None = None,
               starts: np.ndarray | None = None) -> "FrameView":
        """The view of rows ``rows`` of this one (positions, in step order), with ``breaks`` and ``starts``
        over them; the rows keep their place in the frame first handed to :func:`view` (``source_rows``)."""
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) == self.n and (rows == np.arange(self.n)).all():
            return FrameView(self.frame, self.step, self.step_given, self.rows_without_step, self._cache,
                             self.source_rows, breaks, starts)
        source = rows if self.source_rows is None else self.source_rows[rows]
        return FrameView(self.frame.iloc[rows].reset_index(drop=True), self.step[rows], self.step_given,
                         self.rows_without_step, source_rows=source, breaks=breaks, starts=starts)


def as_view(frame: pd.DataFrame | FrameView) -> FrameView:
    """``frame`` prepared by :func:`view`, or ``frame`` itself when it is already a :class:`FrameView`."""
    return frame if isinstance(frame, FrameView) else view(frame)


#: Whole-number steps read as they are, where a float64 holds each exactly (as the general path reads them).
_EXACT_STEPS = 2**53


def _whole_steps(column: pd.Series) -> np.ndarray | None:
    """An integer ``step`` column as int64 (its own copy), with no float64 round trip and no NaN to
    look for; None for any other column (read through ``to_numeric``)."""
    if column.dtype.kind not in "iu" or not len(column):
        return None
    values = column.to_numpy()
    if int(values.min()) < -_EXACT_STEPS or int(values.max()) > _EXACT_STEPS:
        return None
    return values.astype(np.int64)


def view(frame: pd.DataFrame) -> FrameView:
    """Prepare ``frame`` (canonical column names) for analysis.

    Rows are sorted by ``step`` (stable, so repeated steps keep their file order).
    Rows without a numeric step cannot be placed and are left out
    (``rows_without_step`` counts them); a frame without a ``step`` column uses the
    row number as its step and says so through ``step_given = False``.
    """
    if "step" not in frame.columns:
        rows = np.arange(len(frame), dtype=np.int64)
        return FrameView(frame.reset_index(drop=True), rows, False, source_rows=rows)
    rows = None  # the rows' own positions until some are dropped or sorted: no [T] array of them
    step = _whole_steps(frame["step"])
    dropped = 0
    if step is None:
        step = pd.to_numeric(pd.Series(frame["step"]), errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        placed = np.isfinite(step)
        dropped = int((~placed).sum())
        if dropped:
            frame, step, rows = frame.loc[placed], step[placed], np.flatnonzero(placed)
        step = step.astype(np.int64)
    if len(step) > 1 and (step[1:] < step[:-1]).any():
        order = np.argsort(step, kind="stable")
        frame, step, rows = frame.iloc[order], step[order], (order if rows is None else rows[order])
    return FrameView(frame.reset_index(drop=True), step, True, dropped, source_rows=rows)
