"""A synthetic SP18 bar stream (a model): regimes of positive, zero and negative edge, a policy drifting to Hold."""
from __future__ import annotations

import numpy as np

from regime_dash.modules.base import steps_arg
from regime_dash.modules.sp18_hold import slots as S
from regime_dash.modules.sp18_hold.stream import Sp18Stream


def bar_stream(seed: int, steps: int, *, dist: str = "normal", mean: float = 0.001, scale: float = 0.002,
               hold_share: float = 0.5, vol_proxy: float | None = None) -> Sp18Stream:
    """Bars with i.i.d. next-bar log returns (``normal``: N(mean, scale); ``uniform``: U[−scale, scale])
    and directions drawn with P(Hold) = hold_share, the rest split Long/Short (T3, T4 inputs)."""
    rng = np.random.default_rng(seed)
    if dist == "uniform":
        ret = rng.uniform(-scale, scale, steps)
        vol = scale / np.sqrt(3.0) if vol_proxy is None else vol_proxy
    else:
        ret = rng.normal(mean, scale, steps)
        vol = scale if vol_proxy is None else vol_proxy
    u = rng.random(steps)
    action = np.where(u < hold_share, S.DIR_HOLD,
                      np.where(u < hold_share + (1 - hold_share) / 2, S.DIR_LONG, S.DIR_SHORT))
    return Sp18Stream.make(next_log_return=ret.astype(np.float32), vol_proxy=np.full(steps, vol, np.float32),
                           action_dir=action.astype(np.int32))


def demo_stream(seed: int = 0, steps: int | None = None) -> Sp18Stream:
    """Three regimes (edge +, 0, −) with a GARCH-like vol, an EWMA vol proxy, a policy whose Hold share
    climbs from 15% to 45% (the attractor forming) and momentum-following Long/Short picks; a fold
    boundary half-way."""
    t_steps = steps_arg(steps, 3000)
    rng = np.random.default_rng(seed)
    x = np.arange(t_steps) / max(t_steps - 1, 1)
    edge = np.where(x < 1 / 3, 0.0008, np.where(x < 2 / 3, 0.0, -0.0006))
    sigma = np.empty(t_steps)
    s = 0.002
    for t in range(t_steps):
        s = np.sqrt(0.000002 ** 2 + 0.9 * s * s + 0.08 * (rng.normal(0, s) ** 2))
        sigma[t] = min(max(s, 0.0008), 0.006)
    ret = edge + sigma * rng.standard_normal(t_steps)
    vol = np.empty(t_steps)
    v = 0.002
    for t in range(t_steps):
        vol[t] = v
        v = 0.97 * v + 0.03 * abs(ret[t]) * np.sqrt(np.pi / 2)
    hold_p = 0.15 + 0.30 * x
    momentum = np.concatenate([[0.0], np.cumsum(ret)[:-1]])
    lag = min(20, t_steps)
    momentum = momentum - np.concatenate([np.zeros(lag), momentum[:t_steps - lag]])
    u = rng.random(t_steps)
    long_ = np.where(rng.random(t_steps) < 0.6, momentum >= 0, momentum < 0)
    action = np.where(u < hold_p, S.DIR_HOLD, np.where(u > 0.97, S.DIR_FLAT,
                                                         np.where(long_, S.DIR_LONG, S.DIR_SHORT)))
    boundary = np.zeros(t_steps, dtype=bool)
    if t_steps >= 2:
        boundary[t_steps // 2] = True
    return Sp18Stream.make(next_log_return=ret.astype(np.float32), vol_proxy=vol.astype(np.float32),
                           action_dir=action.astype(np.int32), boundary=boundary)
