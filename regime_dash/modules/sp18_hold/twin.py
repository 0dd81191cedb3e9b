"""NumPy float32 twins of the four SP18 kernels, statement by statement.

=====================================  ==========================================
kernel (``kernels/``)                   twin
=====================================  ==========================================
sp18_hold_opportunity_cost.cu           :func:`compute_sp18_hold_opportunity_cost`,
                                        :func:`hold_opportunity_cost_batch`
sp18_hold_reward_cap_update.cu          :func:`hold_reward_cap_update`
sp18_ddqn_branch_bootstrap.cu           :func:`ddqn_branch_bootstrap`
sp18_td_lambda.cu                       :func:`td_lambda`
=====================================  ==========================================

Elementwise float32 NumPy operations round exactly like the kernels' scalar
operations (compiled with ``--fmad=false``), so the batch twins agree bit for bit.

Models (the design gives the shape, not these details): compute_asymmetric_capped_pnl
is a clamp to [neg_cap, pos_cap]; the vol normalisation divides by
max(vol_proxy, vol_floor); the cap producer's p99 is the nearest-rank 99th
percentile (the ceil(0.99·n)-th smallest |step_ret|, an exact selection, no
interpolation); the TD(λ) return is the truncated forward view below.
"""
from __future__ import annotations

import numpy as np

from regime_dash.modules.f32 import F32, clampf, pearls_ad_update
from regime_dash.modules.sp18_hold import slots as S

ONE = F32(1.0)
ZERO = F32(0.0)
MINUS_TWO = F32(-2.0)


def capped_pnl(x, neg_cap, pos_cap):
    """Model of compute_asymmetric_capped_pnl: clamp to [neg_cap, pos_cap]."""
    return clampf(F32(x), F32(neg_cap), F32(pos_cap))


def effective_caps(isv: np.ndarray) -> tuple[np.float32, np.float32]:
    """(pos, neg) caps the Hold sites use: the ISV's, or the sentinels while a slot is unset."""
    pos, neg = isv[S.POS], isv[S.NEG]
    return (pos if pos > ZERO else F32(S.POS_FALLBACK)), (neg if neg < ZERO else F32(S.NEG_FALLBACK))


def compute_sp18_hold_opportunity_cost(dir_idx: int, next_log_return, vol_proxy, hold_segment_bars: int,
                                       isv_pos_cap, isv_neg_cap, shaping_scale, vol_floor=F32(1e-8)):
    """The D-leg Hold reward of one bar (T1).

    0.0 exactly unless ``dir_idx`` is Hold; else
    ``capped_pnl(−2 × next_log_return / vol_proxy, neg_cap, pos_cap) × shaping_scale``.
    ``hold_segment_bars`` is an input of the design's signature that its output formula does not use.
    """
    if dir_idx != S.DIR_HOLD:
        return ZERO
    vol_norm = F32(next_log_return) / max(F32(vol_proxy), F32(vol_floor))
    return capped_pnl(MINUS_TWO * vol_norm, isv_neg_cap, isv_pos_cap) * F32(shaping_scale)


def hold_opportunity_cost_batch(dir_idx: np.ndarray, next_log_return: np.ndarray, vol_proxy: np.ndarray,
                                hold_segment_bars: np.ndarray, isv: np.ndarray, shaping_scale,
                                vol_floor=F32(1e-8)) -> np.ndarray:
    """:func:`compute_sp18_hold_opportunity_cost` over a batch, caps read from ``isv`` (the kernel)."""
    pos, neg = effective_caps(isv)
    return hold_cost_values(dir_idx, next_log_return, vol_proxy, pos, neg, shaping_scale, vol_floor)


def hold_cost_values(dir_idx: np.ndarray, next_log_return: np.ndarray, vol_proxy: np.ndarray, pos, neg,
                     shaping_scale, vol_floor=F32(1e-8)) -> np.ndarray:
    """The batch kernel's per-bar value under the caps ``pos``, ``neg`` (scalars, or one pair per bar)."""
    vol_norm = next_log_return.astype(np.float32) / np.maximum(vol_proxy.astype(np.float32), F32(vol_floor))
    val = np.minimum(np.maximum(MINUS_TWO * vol_norm, neg), pos) * F32(shaping_scale)
    return np.where(dir_idx == S.DIR_HOLD, val, ZERO).astype(np.float32)


def p99_nearest_rank(values: np.ndarray) -> np.float32:
    """The ceil(0.99·n)-th smallest of ``values`` (n >= 1)."""
    n = len(values)
    k = (99 * n + 99) // 100 - 1
    return F32(np.sort(values.astype(np.float32))[k])


def hold_reward_cap_update(isv: np.ndarray, step_ret: np.ndarray, is_ls_close: np.ndarray, safety_factor,
                           neg_ratio, pos_min, pos_max, alpha_min, alpha_max) -> bool:
    """The cap producer on ``isv`` (in place): POS from p99|step_ret| of the Long/Short closes (T5).

    No close in the batch: nothing changes (returns False). Else the
    observation p99 × safety_factor goes through Pearls A+D (first-observation
    bootstrap, Wiener-α EMA), POS = clamp(EMA, pos_min, pos_max) and
    NEG = −neg_ratio × POS.
    """
    obs = cap_observation(step_ret, is_ls_close, safety_factor)
    if obs is None:
        return False
    state = isv[list(S.PEARLS_AD)].astype(np.float32)
    pearls_ad_update(state, obs, alpha_min, alpha_max)
    isv[list(S.PEARLS_AD)] = state
    pos = cap_pos(state[0], pos_min, pos_max)
    isv[S.POS] = pos
    isv[S.NEG] = cap_neg(pos, neg_ratio)
    return True


def cap_observation(step_ret: np.ndarray, is_ls_close: np.ndarray, safety_factor) -> np.float32 | None:
    """The cap producer's observation p99|step_ret| of the Long/Short closes × safety_factor (None: no close)."""
    closes = np.abs(step_ret.astype(np.float32)[np.asarray(is_ls_close) != 0])
    if len(closes) == 0:
        return None
    return p99_nearest_rank(closes) * F32(safety_factor)


def cap_pos(ema, pos_min, pos_max) -> np.float32:
    """POS = the observation EMA clamped to [pos_min, pos_max]."""
    return clampf(ema, F32(pos_min), F32(pos_max))


def cap_neg(pos, neg_ratio) -> np.float32:
    """NEG = −neg_ratio × POS."""
    return -F32(neg_ratio) * pos


def ddqn_branch_bootstrap(q_online: np.ndarray, q_target: np.ndarray) -> np.ndarray:
    """q_next[b] = Σ over the 4 branches of Q_target[b, argmax_{a in branch} Q_online[b, a]] (T8).

    Ties go to the lowest index (a strict ``>`` scan, as the kernel).
    """
    q_online = np.asarray(q_online, dtype=np.float32)
    q_target = np.asarray(q_target, dtype=np.float32)
    rows = np.arange(q_online.shape[0])
    total = np.zeros(q_online.shape[0], dtype=np.float32)
    for start, end in S.BRANCHES:
        best = np.full(q_online.shape[0], start)
        for a in range(start + 1, end):
            better = q_online[:, a] > q_online[rows, best]
            best = np.where(better, a, best)
        total = total + q_target[rows, best]
    return total


def branch_argmax(q: np.ndarray) -> np.ndarray:
    """int [B, 4]: each branch's argmax (lowest index on ties)."""
    q = np.asarray(q, dtype=np.float32)
    rows = np.arange(q.shape[0])
    out = np.empty((q.shape[0], len(S.BRANCHES)), dtype=np.int64)
    for j, (start, end) in enumerate(S.BRANCHES):
        best = np.full(q.shape[0], start)
        for a in range(start + 1, end):
            best = np.where(q[:, a] > q[rows, best], a, best)
        out[:, j] = best
    return out


def td_lambda(rewards: np.ndarray, dones: np.ndarray, q_next: np.ndarray, n_envs: int, t_len: int, gamma,
              lam, max_trace: int) -> tuple[np.ndarray, np.ndarray]:
    """Truncated λ-returns of env-major ``[n_envs, t_len]`` samples (the TD(λ) kernel, a model).

    For sample t the trace ends at the first done in ``[t, t + max_trace)`` or
    at the rollout's end; ``G = r_end + γ(1 − d_end)·q_next_end``, then back to t:
    ``G = r_k + γ(1 − d_k)·((1 − λ)·q_next_k + λ·G)``. ``q_next_k`` is the
    bootstrap value of the state after step k: ``rewards`` itself in the
    defect (q_next = rewards), the DDQN target bootstrap in the fix.
    Returns (λ-returns, done flag at each trace's end).
    """
    r = np.asarray(rewards, dtype=np.float32).reshape(n_envs, t_len)
    d = np.asarray(dones, dtype=np.float32).reshape(n_envs, t_len)
    q = np.asarray(q_next, dtype=np.float32).reshape(n_envs, t_len)
    gamma, lam = F32(gamma), F32(lam)
    t = np.arange(t_len)
    g_out = np.empty((n_envs, t_len), dtype=np.float32)
    d_out = np.empty((n_envs, t_len), dtype=np.float32)
    for e in range(n_envs):
        # the kernel's per-thread scan, for every t at once: end = first done in [t, t + max_trace) or the last step
        done_at = np.where(d[e] > F32(0.5), t, t_len)
        next_done = np.minimum.accumulate(done_at[::-1])[::-1]
        end = np.minimum(np.minimum(t + max_trace, t_len) - 1, next_done)
        g = r[e, end] + gamma * (ONE - d[e, end]) * q[e, end]
        # then k = end - 1 down to t; offset j = k - t runs down, each t stepping only while k < end
        for j in range(max_trace - 2, -1, -1):
            k = t + j
            live = k < end
            kk = k[live]
            g[live] = r[e, kk] + gamma * (ONE - d[e, kk]) * ((ONE - lam) * q[e, kk] + lam * g[live])
        g_out[e] = g
        d_out[e] = d[e, end]
    return g_out.reshape(-1), d_out.reshape(-1)
