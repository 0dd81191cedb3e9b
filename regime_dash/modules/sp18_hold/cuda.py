"""Launch the four SP18 kernels through the engine's loader (CuPy imported lazily)."""
from __future__ import annotations

import numpy as np

from regime_dash.modules.base import load_kernels
from regime_dash.modules.sp18_hold import slots as S

FILES = ("sp18_hold_opportunity_cost.cu", "sp18_hold_reward_cap_update.cu", "sp18_ddqn_branch_bootstrap.cu",
         "sp18_td_lambda.cu")
BLOCK = 256


def _cp():
    from regime_dash.engine.loader import cupy_module

    return cupy_module()


def module():
    return load_kernels(FILES, S.defines())


def _grid(n: int) -> tuple[int]:
    return ((n + BLOCK - 1) // BLOCK,)


def hold_opportunity_cost(dir_idx, next_log_return, vol_proxy, hold_segment_bars, isv, shaping_scale,
                          vol_floor) -> np.ndarray:
    cp = _cp()
    n = len(dir_idx)
    out = cp.zeros(n, dtype=cp.float32)
    module()["sp18_hold_opportunity_cost"](
        _grid(n), (BLOCK,),
        (cp.asarray(np.asarray(dir_idx, dtype=np.int32)), cp.asarray(np.asarray(next_log_return, np.float32)),
         cp.asarray(np.asarray(vol_proxy, np.float32)), cp.asarray(np.asarray(hold_segment_bars, np.int32)),
         cp.asarray(np.asarray(isv, np.float32)), np.float32(shaping_scale), np.float32(vol_floor),
         np.int32(n), out))
    return cp.asnumpy(out)


def hold_reward_cap_update(isv: np.ndarray, step_ret, is_ls_close, cap_params) -> np.ndarray:
    """Run the cap producer on a copy of ``isv``; return the new ISV."""
    cp = _cp()
    d_isv = cp.asarray(np.asarray(isv, np.float32))
    n = len(step_ret)
    module()["sp18_hold_reward_cap_update"](
        (1,), (BLOCK,),
        (d_isv, cp.asarray(np.asarray(step_ret, np.float32)), cp.asarray(np.asarray(is_ls_close, np.int32)),
         np.int32(n), *cap_params), shared_mem=BLOCK * 4)
    return cp.asnumpy(d_isv)


def ddqn_branch_bootstrap(q_online, q_target) -> np.ndarray:
    cp = _cp()
    q_online = np.ascontiguousarray(q_online, dtype=np.float32)
    batch = q_online.shape[0]
    out = cp.zeros(batch, dtype=cp.float32)
    module()["sp18_ddqn_branch_bootstrap"](
        _grid(batch), (BLOCK,),
        (cp.asarray(q_online), cp.asarray(np.ascontiguousarray(q_target, dtype=np.float32)), np.int32(batch), out))
    return cp.asnumpy(out)


def td_lambda(rewards, dones, q_next, n_envs, t_len, gamma, lam, max_trace) -> tuple[np.ndarray, np.ndarray]:
    cp = _cp()
    n = n_envs * t_len
    out_r = cp.zeros(n, dtype=cp.float32)
    out_d = cp.zeros(n, dtype=cp.float32)
    f = lambda a: cp.asarray(np.ascontiguousarray(a, dtype=np.float32).reshape(-1))  # noqa: E731
    module()["sp18_td_lambda"](
        _grid(n), (BLOCK,),
        (f(rewards), f(dones), f(q_next), np.int32(n_envs), np.int32(t_len), np.float32(gamma), np.float32(lam),
         np.int32(max_trace), out_r, out_d))
    return cp.asnumpy(out_r), cp.asnumpy(out_d)
