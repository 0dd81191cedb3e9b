"""Float32 building blocks the module twins share, written as the kernels write them.

Every function takes and returns ``np.float32`` scalars and performs the same
rounded operations, in the same order, as its CUDA counterpart compiled with
``--fmad=false``, so a twin and its kernel agree bit for bit.

``exp_f32`` is a portable exponential (Cody-Waite range reduction and a
degree-6 Taylor polynomial): the kernels use it instead of ``__expf`` (whose
hardware approximation NumPy cannot reproduce). It is a model of ``__expf``
accurate to a few float32 ulps on [-30, 30], the only range the controllers
call it on.

``pearls_ad_update`` is the first-observation bootstrap (Pearl A) and the
Wiener-α EMA (Pearl D) that both the SP18 cap producer and the Pearl C
rate-deficit EMA use.
"""
from __future__ import annotations

import numpy as np

from regime_dash.engine.reference import fmaxf, fminf

F32 = np.float32
ZERO = F32(0.0)
ONE = F32(1.0)
LOG2E = F32(1.44269504)
#: Cody-Waite split of ln 2: LN2_HI has trailing zero bits so n * LN2_HI is exact for |n| < 256.
LN2_HI = np.array(0x3F317200, dtype=np.uint32).view(np.float32)[()]
LN2_LO = np.array(0x35BFBE8E, dtype=np.uint32).view(np.float32)[()]
#: Taylor coefficients 1/k!, k = 6 .. 2, then 1 and 1.
_C = tuple(F32(c) for c in (1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5))
SIGMOID_CLIP = F32(30.0)

__all__ = ["F32", "clampf", "exp_f32", "sigmoid_f32", "pearls_ad_update", "PEARLS_AD_STATE",
           "fmaxf", "fminf"]


def clampf(x, lo, hi):
    """``fminf(fmaxf(x, lo), hi)``."""
    return fminf(fmaxf(x, lo), hi)


def exp_f32(x):
    """e**x in float32 for |x| <= 30, as ``sp_exp_f32`` in the kernels."""
    x = F32(x)
    n = np.rint(x * LOG2E)
    r = x - n * LN2_HI
    r = r - n * LN2_LO
    p = _C[0]
    for c in _C[1:]:
        p = p * r + c
    p = p * r + ONE
    p = p * r + ONE
    return F32(p * F32(2.0 ** int(n)))


def sigmoid_f32(x):
    """1 / (1 + e**-x) with x clipped to [-30, 30] first (the note's fp32 overflow guard)."""
    x = clampf(F32(x), -SIGMOID_CLIP, SIGMOID_CLIP)
    return F32(ONE / (ONE + exp_f32(-x)))


#: Layout of the Pearls A+D state vector: the EMA, the α in use, then the Welford
#: accumulators of the observations and of their successive differences.
PEARLS_AD_STATE = ("ema", "alpha", "obs_mean", "obs_m2", "diff_mean", "diff_m2", "prev_obs", "count")


def pearls_ad_update(state: np.ndarray, obs, alpha_min, alpha_max) -> None:
    """One observation into the Pearls A+D state (float32[8], updated in place).

    Model (the sources name Pearls A and D but do not give their formulas):

    * Pearl A, first-observation bootstrap: while ``count`` is 0 (the fold-reset
      sentinel) the EMA takes the observation as it is.
    * Pearl D, Wiener-optimal α: Welford accumulators of the observations and of
      their successive differences give the noise variance r = var(diff) / 2
      (white noise doubles in a difference) and the signal variance
      s = max(var(obs) − r, 0); α = s / (s + r), clamped to
      ``[alpha_min, alpha_max]`` (``alpha_min`` when both are 0). Noise smooths
      hard, a moving level is tracked fast.
    """
    ema, alpha, mean, m2, dmean, dm2, prev, count = (F32(v) for v in state)
    obs = F32(obs)
    alpha_min = F32(alpha_min)
    alpha_max = F32(alpha_max)
    count = count + ONE
    if count == ONE:
        ema = obs
        alpha = ONE
        mean = obs
        m2 = ZERO
        dmean = ZERO
        dm2 = ZERO
    else:
        d = obs - mean
        mean = mean + d / count
        m2 = m2 + d * (obs - mean)
        diff = obs - prev
        nd = count - ONE
        dd = diff - dmean
        dmean = dmean + dd / nd
        dm2 = dm2 + dd * (diff - dmean)
        var_obs = m2 / (count - ONE)
        var_diff = dm2 / fmaxf(nd - ONE, ONE)
        noise = var_diff * F32(0.5)
        signal = fmaxf(var_obs - noise, ZERO)
        total = signal + noise
        alpha = alpha_min if total <= ZERO else signal / total
        alpha = clampf(alpha, alpha_min, alpha_max)
        ema = ema + alpha * (obs - ema)
    state[:] = (ema, alpha, mean, m2, dmean, dm2, obs, count)
