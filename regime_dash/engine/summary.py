"""Per-replay summary metrics, accumulated step by step from the diag snapshot.

A sweep over thousands of configs cannot keep every trajectory, so each
scenario folds its snapshot rows into a few float64 accumulators as it goes.
:func:`fold` is that fold; the CPU sweep compiles it with numba, the GPU
scan has its twin in ``kernels/replay_sweep.cu`` (``SummaryAcc``), and
:func:`summarize_snapshot` applies it to a single replay's snapshot, so a sweep
row and the matching single replay are equal by construction and by test.

Accumulators are float64 and updated in step order, so the result is the same
on every engine.
"""
from __future__ import annotations

import numpy as np

from regime_dash.diag import catalogue as diag
from regime_dash.engine.jit import jitable

#: Summary metric names, in accumulator order.
METRICS: tuple[str, ...] = (
    "dead_zone_steps",      # steps with the dead-zone flag set
    "longest_dead_zone",    # max dead-zone duration
    "timeouts",             # 0→1 edges of the timeout flag
    "timeout_steps",        # steps with the timeout flag set
    "tail_events",          # steps where tail recency was reset to 0
    "floor_active_steps",   # steps where σ = envelope > EMA σ (F4 floor binding)
    "tau_boost_steps",      # steps where τ_min_eff > τ_min
    "kelly_min",            # min kelly fraction
    "kelly_mean",           # mean kelly fraction
    "kelly_zero_steps",     # steps with kelly fraction == 0
    "sigma_max",            # max PopArt σ (σ_eff)
    "eps_live_min",         # min ε_recovery
)
N_METRICS = len(METRICS)


def _pos(column: str) -> int:
    return diag.SNAPSHOT_COLUMNS.index(column)


# Positions of the summarized fields in a snapshot row (diag.SNAPSHOT_COLUMNS order).
POS_FLAG = _pos(diag.FLAG)
POS_DURATION = _pos(diag.DURATION)
POS_TIMEOUT = _pos(diag.TIMEOUT)
POS_RECENCY = _pos(diag.RECENCY)
POS_SIGMA = _pos(diag.SIGMA)
POS_VAR = _pos(diag.POPART_VAR)
POS_ENVELOPE = _pos(diag.ENVELOPE)
POS_TAU_MIN = _pos(diag.TAU_MIN)
POS_TAU_MIN_EFF = _pos(diag.TAU_MIN_EFF)
POS_KELLY = _pos(diag.KELLY)
POS_EPS_LIVE = _pos(diag.LIVE)

#: -D defines giving the GPU twin the same positions.
DEFINES = [f"-DSNAP_{n}={v}" for n, v in (
    ("FLAG", POS_FLAG), ("DURATION", POS_DURATION), ("TIMEOUT", POS_TIMEOUT),
    ("RECENCY", POS_RECENCY), ("SIGMA", POS_SIGMA), ("VAR", POS_VAR), ("ENVELOPE", POS_ENVELOPE),
    ("TAU_MIN", POS_TAU_MIN), ("TAU_MIN_EFF", POS_TAU_MIN_EFF), ("KELLY", POS_KELLY),
    ("EPS_LIVE", POS_EPS_LIVE))] + [f"-DN_SUMMARY={N_METRICS}"]


#: A fresh accumulator row: counts 0, minima +inf, maxima -inf, no previous timeout.
INIT: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, np.inf, 0.0, 0.0, -np.inf, np.inf, 0.0)


def init(acc: np.ndarray) -> None:
    """Reset one accumulator row (float64 [N_METRICS + 1]; the last cell holds the previous timeout flag)."""
    acc[:] = INIT


@jitable
def fold(acc, flag, duration, timeout, recency, sigma, var, envelope, tau_min, tau_min_eff, kelly, eps_live):
    """One step folded into the accumulator tuple ``acc`` (13 float64, :data:`INIT` order); returns the new tuple.

    The float32 arguments are the step's snapshot values of the summarized
    slots. A tuple in and out lets a compiled scan keep the accumulators in
    registers and write them once.
    """
    (dz_steps, longest, timeouts, timeout_steps, tails, floor_steps, boost_steps, kelly_min, kelly_sum,
     kelly_zero, sigma_max, eps_min, prev_timeout) = acc
    kelly = np.float64(kelly)
    if flag != 0.0:
        dz_steps += 1.0
    duration = np.float64(duration)
    if duration > longest:
        longest = duration
    if timeout != 0.0:
        timeout_steps += 1.0
        if prev_timeout == 0.0:
            timeouts += 1.0
    prev_timeout = 1.0 if timeout != 0.0 else 0.0
    if recency == 0.0:
        tails += 1.0
    if sigma == envelope and envelope > np.sqrt(var):
        floor_steps += 1.0
    if tau_min_eff > tau_min:
        boost_steps += 1.0
    if kelly < kelly_min:
        kelly_min = kelly
    kelly_sum += kelly
    if kelly == 0.0:
        kelly_zero += 1.0
    if np.float64(sigma) > sigma_max:
        sigma_max = np.float64(sigma)
    eps = np.float64(eps_live)
    if eps < eps_min:
        eps_min = eps
    return (dz_steps, longest, timeouts, timeout_steps, tails, floor_steps, boost_steps, kelly_min, kelly_sum,
            kelly_zero, sigma_max, eps_min, prev_timeout)


def accumulate(acc, row):
    """Fold one snapshot row into ``acc`` (float64 [N_METRICS + 1]) with :func:`fold`."""
    acc[:] = fold(tuple(acc), row[POS_FLAG], row[POS_DURATION], row[POS_TIMEOUT], row[POS_RECENCY],
                  row[POS_SIGMA], row[POS_VAR], row[POS_ENVELOPE], row[POS_TAU_MIN], row[POS_TAU_MIN_EFF],
                  row[POS_KELLY], row[POS_EPS_LIVE])


def finalize(acc: np.ndarray, steps: int) -> dict[str, float]:
    """Metric dict of one accumulator row after ``steps`` steps (kelly_mean = sum / steps)."""
    out = {name: float(acc[i]) for i, name in enumerate(METRICS)}
    out["kelly_mean"] = float(acc[8] / steps) if steps else float("nan")
    return out


def summarize_snapshot(snap: np.ndarray) -> dict[str, float]:
    """Summary of one replay's snapshot (float32 [T, len(SNAPSHOT_SLOTS)]).

    :func:`fold` over the rows, in whole-column NumPy: every count, minimum and maximum is
    order-free, and the one sum (``kelly_mean``'s) is ``np.add.accumulate``, which adds in step
    order as the fold does, so the result equals the step-by-step fold bit for bit (tested).
    A NaN is skipped by a minimum or maximum and counted where ``!= 0`` counts it, as in the fold.
    """
    steps = len(snap)
    if steps == 0:
        return finalize(np.array(INIT, np.float64), 0)
    col = snap.T
    timeout = col[POS_TIMEOUT] != 0.0
    with np.errstate(invalid="ignore"):
        floor = (col[POS_SIGMA] == col[POS_ENVELOPE]) & (col[POS_ENVELOPE] > np.sqrt(col[POS_VAR]))
    kelly = col[POS_KELLY].astype(np.float64)
    acc = (float(np.count_nonzero(col[POS_FLAG] != 0.0)),
           _extreme(np.maximum, col[POS_DURATION], 0.0),
           float(np.count_nonzero(timeout & ~np.concatenate(([False], timeout[:-1])))),
           float(np.count_nonzero(timeout)),
           float(np.count_nonzero(col[POS_RECENCY] == 0.0)),
           float(np.count_nonzero(floor)),
           float(np.count_nonzero(col[POS_TAU_MIN_EFF] > col[POS_TAU_MIN])),
           _extreme(np.minimum, kelly, np.inf),
           float(np.add.accumulate(kelly)[-1]),
           float(np.count_nonzero(kelly == 0.0)),
           _extreme(np.maximum, col[POS_SIGMA], -np.inf),
           _extreme(np.minimum, col[POS_EPS_LIVE], np.inf),
           1.0 if timeout[-1] else 0.0)
    return finalize(np.array(acc, np.float64), steps)


def _extreme(ufunc, values: np.ndarray, start: float) -> float:
    """``ufunc`` (np.minimum or np.maximum) over ``values`` as float64 from ``start``, NaNs skipped: the
    fold's ``if x < best`` (or ``>``), which a NaN never passes."""
    v = values.astype(np.float64)
    return float(ufunc.reduce(v[~np.isnan(v)], initial=start))


def summarize_snapshot_by_fold(snap: np.ndarray) -> dict[str, float]:
    """:func:`summarize_snapshot` the slow way, :func:`fold` row by row: the definition it is tested against."""
    acc = np.empty(N_METRICS + 1, dtype=np.float64)
    init(acc)
    for row in snap:
        accumulate(acc, row)
    return finalize(acc, len(snap))


def summarize_frame(frame) -> dict[str, float]:
    """Summary of a replay frame (the snapshot columns of :mod:`regime_dash.diag.catalogue`)."""
    snap = np.column_stack([frame[c].to_numpy(dtype=np.float32) for c in diag.SNAPSHOT_COLUMNS])
    return summarize_snapshot(snap)
