"""Per-replay summary metrics, accumulated step by step from the diag snapshot.

A sweep over thousands of configs cannot keep every trajectory, so each
scenario folds its snapshot rows into a few float64 accumulators as it goes.
:func:`accumulate` is that fold; the CPU scan compiles it with numba, the GPU
scan has its twin in ``kernels/replay_sweep.cu`` (``SummaryAcc``), and
:func:`summarize_snapshot` applies it to a single replay's snapshot, so a sweep
row and the matching single replay are equal by construction and by test.

Accumulators are float64 and updated in step order, so the result is the same
on every engine.
"""
from __future__ import annotations

import numpy as np

from regime_dash import diag
from regime_dash.engine._jit import jitable

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
POS_FLAG = _pos("risk_stack.regime.dead_zone.flag")
POS_DURATION = _pos("risk_stack.regime.dead_zone.duration")
POS_TIMEOUT = _pos("risk_stack.regime.dead_zone.timeout_flag")
POS_RECENCY = _pos("risk_stack.regime.tail.recency")
POS_SIGMA = _pos("risk_stack.popart.sigma")
POS_VAR = _pos("risk_stack.popart.var")
POS_ENVELOPE = _pos("risk_stack.regime.popart_envelope.max_abs_reward_ema")
POS_TAU_MIN = _pos("risk_stack.iqn.tau_min")
POS_TAU_MIN_EFF = _pos("risk_stack.iqn.tau_min_effective")
POS_KELLY = _pos("risk_stack.kelly.fraction")
POS_EPS_LIVE = _pos("risk_stack.regime.kelly_eps_recovery.live")

#: -D defines giving the GPU twin the same positions.
DEFINES = [f"-DSNAP_{n}={v}" for n, v in (
    ("FLAG", POS_FLAG), ("DURATION", POS_DURATION), ("TIMEOUT", POS_TIMEOUT),
    ("RECENCY", POS_RECENCY), ("SIGMA", POS_SIGMA), ("VAR", POS_VAR), ("ENVELOPE", POS_ENVELOPE),
    ("TAU_MIN", POS_TAU_MIN), ("TAU_MIN_EFF", POS_TAU_MIN_EFF), ("KELLY", POS_KELLY),
    ("EPS_LIVE", POS_EPS_LIVE))] + [f"-DN_SUMMARY={N_METRICS}"]


def init(acc: np.ndarray) -> None:
    """Reset one accumulator row (float64 [N_METRICS + 1]; the last cell holds the previous timeout flag)."""
    acc[:] = 0.0
    acc[7] = np.inf   # kelly_min
    acc[10] = -np.inf  # sigma_max
    acc[11] = np.inf  # eps_live_min


@jitable
def accumulate(acc, row):
    """Fold one snapshot row into ``acc`` (float64 [N_METRICS + 1])."""
    flag = row[POS_FLAG]
    timeout = row[POS_TIMEOUT]
    kelly = np.float64(row[POS_KELLY])
    sigma = row[POS_SIGMA]
    envelope = row[POS_ENVELOPE]
    if flag != 0.0:
        acc[0] += 1.0
    duration = np.float64(row[POS_DURATION])
    if duration > acc[1]:
        acc[1] = duration
    if timeout != 0.0:
        acc[3] += 1.0
        if acc[N_METRICS] == 0.0:
            acc[2] += 1.0
    acc[N_METRICS] = 1.0 if timeout != 0.0 else 0.0
    if row[POS_RECENCY] == 0.0:
        acc[4] += 1.0
    if sigma == envelope and envelope > np.sqrt(row[POS_VAR]):
        acc[5] += 1.0
    if row[POS_TAU_MIN_EFF] > row[POS_TAU_MIN]:
        acc[6] += 1.0
    if kelly < acc[7]:
        acc[7] = kelly
    acc[8] += kelly
    if kelly == 0.0:
        acc[9] += 1.0
    if np.float64(sigma) > acc[10]:
        acc[10] = np.float64(sigma)
    eps = np.float64(row[POS_EPS_LIVE])
    if eps < acc[11]:
        acc[11] = eps


def finalize(acc: np.ndarray, steps: int) -> dict[str, float]:
    """Metric dict of one accumulator row after ``steps`` steps (kelly_mean = sum / steps)."""
    out = {name: float(acc[i]) for i, name in enumerate(METRICS)}
    out["kelly_mean"] = float(acc[8] / steps) if steps else float("nan")
    return out


def summarize_snapshot(snap: np.ndarray) -> dict[str, float]:
    """Summary of one replay's snapshot (float32 [T, len(SNAPSHOT_SLOTS)])."""
    acc = np.empty(N_METRICS + 1, dtype=np.float64)
    init(acc)
    for row in snap:
        accumulate(acc, row)
    return finalize(acc, len(snap))


def summarize_frame(frame) -> dict[str, float]:
    """Summary of a replay frame (the snapshot columns of :mod:`regime_dash.diag`)."""
    snap = np.column_stack([frame[c].to_numpy(dtype=np.float32) for c in diag.SNAPSHOT_COLUMNS])
    return summarize_snapshot(snap)
