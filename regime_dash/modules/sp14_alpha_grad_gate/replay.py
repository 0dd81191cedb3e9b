"""Replay the α-grad gate over an :class:`Sp14Stream` on the twin or the kernel.

The host side (shared by both engines) builds what the trainer's host and
upstream producers supply: the warmup gate (model: ``min(1, (k + 1)/N)`` with k
the steps since the fold started) and, with ``var_aux_producer``, the missing
slot-388 producer's values (model: EMA variance of aux_dir_acc).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from regime_dash.modules.base import config_columns, frame_of
from regime_dash.modules.f32 import F32, ONE
from regime_dash.modules.sp14_alpha_grad_gate import slots as S
from regime_dash.modules.sp14_alpha_grad_gate.config import PARAM_NAMES, Sp14Config
from regime_dash.modules.sp14_alpha_grad_gate.stream import Sp14Stream
from regime_dash.modules.sp14_alpha_grad_gate.twin import SNAPSHOT, replay_twin
from regime_dash.core.slots import SlotLayout

PREFIX = "sp14."
#: Config constants written as ``sp14.config.<name>`` columns: every kernel argument (what the checks and
#: the re-derivation read) and the two host models' knobs.
CONFIG_COLUMNS = (*PARAM_NAMES, "warmup_steps", "var_aux_producer")
#: Diag column of each snapshot entry.
COLUMNS: dict[str, str] = {
    "aux_dir_acc": "sp14.inputs.aux_dir_acc",
    "q_disagreement": "sp14.inputs.q_disagreement",
    "var_aux": "sp14.inputs.var_aux",
    "var_q": "sp14.inputs.var_q",
    "warmup_gate": "sp14.inputs.warmup_gate",
    "k_aux": "sp14.k_aux",
    "k_q": "sp14.k_q",
    "beta": "sp14.beta",
    "var_alpha": "sp14.alpha_grad.var",
    "gate1_state": "sp14.gate1.state",
    "gate1": "sp14.gate1.value",
    "gate2": "sp14.gate2.value",
    "alpha_raw": "sp14.alpha_grad.raw",
    "alpha_smoothed": "sp14.alpha_grad.smoothed",
}


def warmup_gates(boundary: np.ndarray, warmup_steps: int) -> np.ndarray:
    """Model of the host warmup gate: ``min(1, (k + 1) / warmup_steps)``, k = steps since the fold began."""
    t_steps = len(boundary)
    if warmup_steps <= 0:
        return np.ones(t_steps, dtype=np.float32)
    k = np.empty(t_steps, dtype=np.int64)
    since = 0
    for t in range(t_steps):
        if boundary[t]:
            since = 0
        k[t] = since
        since += 1
    return np.minimum(F32(1.0), (k + 1).astype(np.float32) / np.float32(warmup_steps)).astype(np.float32)


def var_aux_what_if(aux: np.ndarray, boundary: np.ndarray, alpha: float) -> np.ndarray:
    """Model of the missing slot-388 producer: EMA mean and variance of aux_dir_acc (reset per fold)."""
    a = F32(alpha)
    out = np.empty(len(aux), dtype=np.float32)
    mean = var = F32(0.0)
    first = True
    for t in range(len(aux)):
        x = F32(aux[t])
        if boundary[t] or first:
            mean, var, first = x, F32(0.0), False
        else:
            d = x - mean
            mean = mean + a * d
            var = (ONE - a) * var + a * (d * d)
        out[t] = var
    return out


def host_inputs(stream: Sp14Stream, config: Sp14Config) -> tuple[np.ndarray, np.ndarray | None]:
    """(warmup gate [T], var_aux [T] or None) as the host hands them to either engine."""
    warm = stream.warmup_gate if stream.warmup_gate is not None else warmup_gates(stream.boundary,
                                                                                   config.warmup_steps)
    var_aux = stream.var_aux
    if var_aux is None and config.var_aux_producer:
        var_aux = var_aux_what_if(stream.aux_dir_acc, stream.boundary, config.var_ema_alpha)
    return np.ascontiguousarray(warm, dtype=np.float32), var_aux


def reset_plan() -> tuple[np.ndarray, np.ndarray]:
    """(index int32, value float32) of the slots a fold boundary re-bootstraps or clears."""
    layout = SlotLayout(S.SLOTS)
    idx, code, _src = layout.reset_plan()
    boot = layout.bootstrap_vector()
    return idx, boot[idx].astype(np.float32)


def initial_isv() -> np.ndarray:
    return SlotLayout(S.SLOTS).bootstrap_vector()


def run(stream: Sp14Stream, config: Sp14Config, engine: str) -> pd.DataFrame:
    """The replay behind :meth:`ControllerModule.replay` for SP14."""
    warm, var_aux = host_inputs(stream, config)
    reset_idx, reset_val = reset_plan()
    isv = initial_isv()
    if engine == "cuda":
        from regime_dash.modules.sp14_alpha_grad_gate.cuda import replay_kernel

        snap, _ = replay_kernel(isv, stream.aux_dir_acc, stream.q_disagreement, stream.var_q, var_aux, warm,
                                stream.boundary, reset_idx, reset_val, config.params())
    else:
        snap = replay_twin(isv, stream.aux_dir_acc, stream.q_disagreement, stream.var_q, var_aux, warm,
                           stream.boundary, reset_idx, reset_val, config.params())
    cols = {COLUMNS[name]: snap[:, j] for j, name in enumerate(SNAPSHOT)}
    cols.update(config_columns(config, CONFIG_COLUMNS, PREFIX, stream.steps))
    frame = frame_of(stream.step, stream.boundary, cols)
    frame.attrs["config"] = config.as_dict()
    return frame
