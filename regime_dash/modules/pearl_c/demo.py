"""A synthetic Pearl C stream (a model): update magnitudes whose clamp-engagement rate wanders around 1%."""
from __future__ import annotations

import numpy as np

from regime_dash.modules.base import steps_arg
from regime_dash.modules.pearl_c.stream import PearlCStream


def demo_stream(seed: int = 0, steps: int | None = None, n_params: int = 4096) -> PearlCStream:
    """Updates N(0, σ_t): calm (rate ≈ 0.1%), a spike (≈ 5%), the 1%-target regime, a fold boundary."""
    t_steps = steps_arg(steps, 600)
    rng = np.random.default_rng(seed)
    x = np.arange(t_steps) / max(t_steps - 1, 1)
    sigma = np.where(x < 0.25, 0.30, np.where(x < 0.4, 0.50, 0.388)) * (1 + 0.05 * np.sin(np.arange(t_steps) / 7))
    updates = (rng.standard_normal((t_steps, n_params)) * sigma[:, None]).astype(np.float32)
    boundary = np.zeros(t_steps, dtype=bool)
    if t_steps >= 4:
        boundary[(3 * t_steps) // 4] = True
    return PearlCStream.make(updates=updates, boundary=boundary)
