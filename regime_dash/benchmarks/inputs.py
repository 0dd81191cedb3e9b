"""The engine benchmarks' synthetic input: :func:`bench_stream`.

Shared by the replay and sweep rows (:mod:`regime_dash.benchmarks.engines`) and the live
stepper rows (:mod:`regime_dash.benchmarks.live_step`), which ``engines`` runs; here, so
the live rows need not import ``engines`` back.
"""
from __future__ import annotations

import numpy as np

from regime_dash.core.streams import Stream


def bench_stream(steps: int, accounts: int, seed: int = 0) -> Stream:
    """The benchmark's synthetic stream: generated with NumPy in one go, deterministic in ``seed``.

    Rewards are N(0, 0.3²) with rare ×40 spikes; every third 200-step stretch
    is all flat with a negative edge (dead zones), the worst-pnl walk has tail
    shocks, and a boundary sits at T/2, so every branch of the pipeline runs.
    No ``v_pred``.
    """
    rng = np.random.default_rng(seed)
    rewards = rng.standard_normal((steps, accounts), dtype=np.float32) * np.float32(0.3)
    rewards[rng.random((steps, accounts)) < 0.001] *= np.float32(40.0)
    lots = (rng.random((steps, accounts)) < 0.4).astype(np.int32)
    flat = (np.arange(steps) // 200) % 3 == 2
    lots[flat] = 0
    edge = rng.normal(0.05, 0.1, steps).astype(np.float32)
    edge[flat] = -0.2
    worst = np.cumsum(rng.standard_normal(steps) * 0.1).astype(np.float32)
    worst[rng.random(steps) < 0.002] -= np.float32(25.0)
    boundary = np.zeros(steps, dtype=bool)
    boundary[steps // 2] = True
    return Stream.make(rewards=rewards, lots=lots, kelly_analytic=edge, session_pnl_worst=worst,
                       tau_action=rng.random(steps).astype(np.float32), boundary=boundary)
