"""A synthetic SP14 driver stream for the app's first run (a model of a training run's signals)."""
from __future__ import annotations

import numpy as np

from regime_dash.modules.base import steps_arg
from regime_dash.modules.sp14_alpha_grad_gate.stream import Sp14Stream


#: What the demo fails on purpose: it replays the trainer as the commit note leaves it.
DEMO_FAILURES = {
    "sp14.var_aux_producer": "on purpose: the demo replays the trainer as the commit note leaves it, with no "
                             "producer of slot 388 (its KNOWN LIMITATION), so var_aux stays 0 and k_aux is pinned "
                             "at K_BASE_AUX. Turn on var_aux_producer to replay the missing producer.",
}


def demo_stream(seed: int = 0, steps: int | None = None) -> Sp14Stream:
    """aux_dir_acc climbs from chance through the hysteresis band with noise and a mid-run dip;
    Q disagreement falls from 0.5 as the Q head learns; var_q is its EMA variance (B.3's producer);
    a fold boundary two thirds in."""
    t_steps = steps_arg(steps, 1500)
    rng = np.random.default_rng(seed)
    x = np.linspace(0.0, 1.0, t_steps)
    aux = 0.48 + 0.14 * x - 0.06 * np.exp(-((x - 0.45) / 0.05) ** 2) + rng.normal(0, 0.012, t_steps)
    aux = aux + 0.01 * np.sin(np.arange(t_steps) / 9.0)
    q_dis = 0.5 - 0.3 * x + rng.normal(0, 0.03, t_steps)
    aux = np.clip(aux, 0.0, 1.0).astype(np.float32)
    q_dis = np.clip(q_dis, 0.0, 1.0).astype(np.float32)
    var_q = np.zeros(t_steps, dtype=np.float32)
    mean, var, a = float(q_dis[0]), 0.0, 0.05
    for t in range(t_steps):
        d = float(q_dis[t]) - mean
        mean += a * d
        var = (1 - a) * var + a * d * d
        var_q[t] = var
    boundary = np.zeros(t_steps, dtype=bool)
    if t_steps >= 3:
        boundary[(2 * t_steps) // 3] = True
    return Sp14Stream.make(aux_dir_acc=aux, q_disagreement=q_dis, var_q=var_q, boundary=boundary,
                           step=np.arange(t_steps, dtype=np.int64) * 10)
