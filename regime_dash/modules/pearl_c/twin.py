"""Twins of Pearl C: the per-block engagement count kernel and the host-side rate-deficit check.

:func:`engagement_count` is ``kernels/pearl_c_engagement_count.cu``: element j
of a step belongs to thread ``j mod (blocks × block)`` (the grid-stride loop),
so to block ``(j mod (blocks × block)) // block``; integer counts are exact, so
the tree order does not matter. :func:`rate_deficit_check` is the host code of
``pearl_c_post_adam_engagement_check`` (A15): sum the per-block counts,
rate = total / n, rate_deficit = rate − 0.01, then Pearls A+D
(:func:`regime_dash.modules.f32.pearls_ad_update`, a model of the trainer's
three Wiener floats per group) smooth it.
"""
from __future__ import annotations

import numpy as np

from regime_dash.modules.f32 import F32, pearls_ad_update

#: engage_buf_offset that skips the writeback (SP4_ENGAGE_OFFSET_DISABLED).
OFFSET_DISABLED = -1
#: Target engagement rate: rate_deficit = rate − 0.01.
TARGET_RATE = F32(0.01)


def engagement_count(updates: np.ndarray, clamp, blocks: int, block: int, per_block_buf: np.ndarray,
                     engage_buf_offset: int) -> None:
    """Write each step's per-block counts into ``per_block_buf`` (int32, in place), as the kernel.

    ``updates`` is float32 [steps, n]; step s, block b lands at
    ``engage_buf_offset + s × blocks + b``; nothing is written when the offset is −1.
    """
    updates = np.atleast_2d(np.asarray(updates, dtype=np.float32))
    if engage_buf_offset == OFFSET_DISABLED:
        return
    n = updates.shape[1]
    owner = (np.arange(n) % (blocks * block)) // block
    engaged = np.abs(updates) > F32(clamp)
    for s in range(updates.shape[0]):
        counts = np.bincount(owner[engaged[s]], minlength=blocks).astype(np.int32)
        per_block_buf[engage_buf_offset + s * blocks: engage_buf_offset + (s + 1) * blocks] = counts


def engaged_total(per_block_counts: np.ndarray) -> int:
    """The step's engaged updates: the sum of its per-block counts."""
    return int(np.sum(per_block_counts, dtype=np.int64))


def engagement_rate(total, n_params: int) -> np.float32:
    """engagement_rate = Σ per-block counts / parameters."""
    return F32(total) / F32(n_params)


def rate_deficit(rate) -> np.float32:
    """rate_deficit = engagement_rate − 0.01."""
    return rate - TARGET_RATE


def busiest_block(per_block_counts: np.ndarray) -> np.ndarray:
    """The largest per-block count of each step (a diag of the replay)."""
    return np.asarray(per_block_counts).max(axis=-1).astype(np.int32)


def force_bump(ema) -> bool:
    """Layer A's force-bump branch: Layer B would bump when the deficit EMA is above 0."""
    return ema > 0


def rate_deficit_check(per_block_counts: np.ndarray, n_params: int, state: np.ndarray, alpha_min,
                       alpha_max) -> tuple[int, np.float32, np.float32]:
    """One step of the host check: (total, rate, rate_deficit); ``state`` (Pearls A+D, float32[8]) updated."""
    total = engaged_total(per_block_counts)
    rate = engagement_rate(total, n_params)
    deficit = rate_deficit(rate)
    pearls_ad_update(state, deficit, alpha_min, alpha_max)
    return total, rate, deficit
