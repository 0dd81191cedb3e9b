"""Launch ``kernels/sp14_alpha_grad_gate.cu`` through the engine's loader (CuPy imported lazily)."""
from __future__ import annotations

import numpy as np

from regime_dash.modules.base import load_kernels
from regime_dash.modules.sp14_alpha_grad_gate import slots as S
from regime_dash.modules.sp14_alpha_grad_gate.twin import SNAPSHOT

FILES = ("sp14_alpha_grad_gate.cu",)


def module():
    return load_kernels(FILES, S.defines())


def replay_kernel(isv: np.ndarray, aux, q_dis, var_q, var_aux, warmup, boundary, reset_idx, reset_val,
                  params) -> tuple[np.ndarray, np.ndarray]:
    """Run ``sp14_alpha_grad_gate_replay`` once; return (snapshot [T, 14], final ISV)."""
    from regime_dash.engine.loader import cupy_module

    cp = cupy_module()
    mod = module()
    t_steps = len(aux)
    d_isv = cp.asarray(isv, dtype=cp.float32)
    f = lambda a: cp.asarray(np.ascontiguousarray(a, dtype=np.float32))  # noqa: E731
    has = var_aux is not None
    d_var_aux = f(var_aux) if has else cp.zeros(1, dtype=cp.float32)
    snap = cp.zeros((t_steps, len(SNAPSHOT)), dtype=cp.float32)
    mod["sp14_alpha_grad_gate_replay"](
        (1,), (1,),
        (d_isv, f(aux), f(q_dis), f(var_q), d_var_aux, np.int32(has), f(warmup),
         cp.asarray(np.asarray(boundary, dtype=np.int32)), cp.asarray(np.asarray(reset_idx, dtype=np.int32)),
         f(reset_val), np.int32(len(reset_idx)), np.int32(t_steps), *params, snap))
    return cp.asnumpy(snap), cp.asnumpy(d_isv)


def step_kernel(isv: np.ndarray, warmup_gate, params) -> np.ndarray:
    """Run the per-step kernel ``sp14_alpha_grad_gate`` once on a copy of ``isv``; return the new ISV."""
    from regime_dash.engine.loader import cupy_module

    cp = cupy_module()
    d_isv = cp.asarray(isv, dtype=cp.float32)
    module()["sp14_alpha_grad_gate"]((1,), (1,), (d_isv, np.float32(warmup_gate), *params))
    return cp.asnumpy(d_isv)
