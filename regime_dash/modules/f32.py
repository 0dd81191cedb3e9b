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
           "fmaxf", "fminf", "welford_mean", "welford_m2", "ad_count", "ad_mean", "ad_m2", "ad_diff_mean",
           "ad_diff_m2", "ad_alpha", "ad_ema", "ad_prev"]


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


def welford_mean(mean, x, count):
    """Welford: the running mean once ``x`` is the ``count``-th observation."""
    d = x - mean
    return mean + d / count


def welford_m2(m2, mean_before, mean, x):
    """Welford: the running sum of squared deviations once ``x`` moved the mean from ``mean_before`` to ``mean``."""
    d = x - mean_before
    return m2 + d * (x - mean)


def ad_count(count):
    """Pearls A+D: the observations so far (0 is Pearl A's first-observation sentinel)."""
    return count + ONE


def ad_mean(mean, obs, count):
    """Pearls A+D: the Welford mean of the observations (the observation itself when it is the first)."""
    if count == ONE:
        return obs
    return welford_mean(mean, obs, count)


def ad_m2(m2, mean_before, mean, obs, count):
    """Pearls A+D: the Welford M2 of the observations (0 at the first)."""
    if count == ONE:
        return ZERO
    return welford_m2(m2, mean_before, mean, obs)


def ad_diff_mean(dmean, obs, prev, count):
    """Pearls A+D: the Welford mean of successive differences (0 at the first observation)."""
    if count == ONE:
        return ZERO
    diff = obs - prev
    nd = count - ONE
    return welford_mean(dmean, diff, nd)


def ad_diff_m2(dm2, dmean_before, dmean, obs, prev, count):
    """Pearls A+D: the Welford M2 of successive differences (0 at the first observation)."""
    if count == ONE:
        return ZERO
    diff = obs - prev
    return welford_m2(dm2, dmean_before, dmean, diff)


def ad_alpha(m2, dm2, count, alpha_min, alpha_max):
    """Pearl D: the Wiener-optimal α = s / (s + r) in ``[alpha_min, alpha_max]`` (1 at the first observation)."""
    if count == ONE:
        return ONE
    nd = count - ONE
    var_obs = m2 / (count - ONE)
    var_diff = dm2 / fmaxf(nd - ONE, ONE)
    noise = var_diff * F32(0.5)
    signal = fmaxf(var_obs - noise, ZERO)
    total = signal + noise
    alpha = alpha_min if total <= ZERO else signal / total
    return clampf(alpha, alpha_min, alpha_max)


def ad_ema(ema, alpha, obs, count):
    """Pearls A+D: the EMA (Pearl A: the first observation as it is)."""
    if count == ONE:
        return obs
    return ema + alpha * (obs - ema)


def ad_prev(obs):
    """Pearls A+D: the observation kept for the next difference."""
    return F32(obs)


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

    Written as one function per state entry (:func:`ad_count` to :func:`ad_prev`), so a
    re-derivation runs each from logged values.
    """
    ema, alpha, mean, m2, dmean, dm2, prev, count = (F32(v) for v in state)
    obs = F32(obs)
    alpha_min = F32(alpha_min)
    alpha_max = F32(alpha_max)
    count = ad_count(count)
    mean_before, dmean_before = mean, dmean
    mean = ad_mean(mean, obs, count)
    m2 = ad_m2(m2, mean_before, mean, obs, count)
    dmean = ad_diff_mean(dmean, obs, prev, count)
    dm2 = ad_diff_m2(dm2, dmean_before, dmean, obs, prev, count)
    alpha = ad_alpha(m2, dm2, count, alpha_min, alpha_max)
    ema = ad_ema(ema, alpha, obs, count)
    state[:] = (ema, alpha, mean, m2, dmean, dm2, ad_prev(obs), count)
