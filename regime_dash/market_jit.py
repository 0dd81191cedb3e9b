"""The market model of a scripted run stepped in numba: every step's draws and trades in one call.

:func:`regime_dash.simulator.market_step` is the model, one step of NumPy calls. A
scripted run (the open-loop presets of :mod:`regime_dash.scenarios`) decides its sizing
from the market alone, so the whole run can be one compiled loop. It draws exactly what
:class:`regime_dash.simulator.Draws` draws, from the same counter-based Philox stream:
Philox4x64-10 keyed by the seed with the counter at ``[0, t, 0, 0]`` (the counter is
bumped before each block of four words, as NumPy's ``Philox`` does), ``random()`` as
``(word >> 11) · 2⁻⁵³``, and ``standard_normal()`` by NumPy's ziggurat on NumPy's tables
(``ziggurat_normal.npz``: ``ki``, ``wi``, ``fi`` of its 256 layers, ``r`` and ``1/r``).
The trades then follow ``market_step`` statement by statement; only the win-rate and
win/loss-size EMAs are updated close by close, in account order (the recurrence
``ema_over`` states, which it evaluates in closed form through a dot product).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

_TABLES = np.load(Path(__file__).with_name("ziggurat_normal.npz"))
KI = _TABLES["ki"].astype(np.uint64)
WI = _TABLES["wi"].astype(np.float64)
FI = _TABLES["fi"].astype(np.float64)
NOR_R = float(_TABLES["r"])
NOR_INV_R = float(_TABLES["inv_r"])

_M0 = np.uint64(0xD2E7470EE14C6C93)
_M1 = np.uint64(0xCA5A826395121157)
_W0 = np.uint64(0x9E3779B97F4A7C15)
_W1 = np.uint64(0xBB67AE8584CAA73B)
_ONE = np.uint64(1)
_TO_UNIT = 1.0 / 9007199254740992.0


@intrinsic
def _mulhi(typingctx, a, b):
    """The high word of the 128-bit product of two uint64 (one ``mul i128``, as Philox needs)."""
    sig = types.uint64(types.uint64, types.uint64)

    def codegen(context, builder, signature, args):
        wide = ir.IntType(128)
        prod = builder.mul(builder.zext(args[0], wide), builder.zext(args[1], wide))
        return builder.trunc(builder.lshr(prod, ir.Constant(wide, 64)), ir.IntType(64))

    return sig, codegen


@njit(cache=True, inline="always")
def _mulhilo(a, b):
    return _mulhi(a, b), a * b


@njit(cache=True, inline="always")
def _philox(n, t, k0, k1):
    """Philox4x64-10 of the counter ``[n, t, 0, 0]`` under the key ``[k0, k1]``: four words."""
    c0, c1, c2, c3 = n, t, np.uint64(0), np.uint64(0)
    for r in range(10):
        if r:
            k0 += _W0
            k1 += _W1
        hi0, lo0 = _mulhilo(_M0, c0)
        hi1, lo1 = _mulhilo(_M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return c0, c1, c2, c3


@njit(cache=True, inline="always")
def _word(n, pos, w0, w1, w2, w3, t, k0, k1):
    """The next word of step ``t``'s stream; the stream's state is ``n`` (blocks made so far),
    ``pos`` (words of the last block used) and that block ``w0..w3``, returned updated."""
    if pos == 4:
        n += _ONE
        w0, w1, w2, w3 = _philox(n, t, k0, k1)
        pos = 0
    w = w0 if pos == 0 else w1 if pos == 1 else w2 if pos == 2 else w3
    return w, n, pos + 1, w0, w1, w2, w3


@njit(cache=True, inline="always")
def _unit(w):
    return np.float64(w >> np.uint64(11)) * _TO_UNIT


@njit(cache=True)
def _draws(key0, key1, t, b, close, win, opn, size, ki, wi, fi, nor_r, nor_inv_r):
    """Step ``t``'s draws into the four [b] arrays (``Draws.of``'s order); returns the tau draw."""
    t = np.uint64(t)
    z = np.uint64(0)
    n, pos, w0, w1, w2, w3 = z, 4, z, z, z, z
    for out in (close, win, opn):
        for i in range(b):
            w, n, pos, w0, w1, w2, w3 = _word(n, pos, w0, w1, w2, w3, t, key0, key1)
            out[i] = _unit(w)
    for i in range(b):
        while True:  # NumPy's ziggurat (random_standard_normal), word for word
            r, n, pos, w0, w1, w2, w3 = _word(n, pos, w0, w1, w2, w3, t, key0, key1)
            idx = np.int64(r & np.uint64(0xFF))
            r >>= np.uint64(8)
            rabs = (r >> _ONE) & np.uint64(0x000FFFFFFFFFFFFF)
            x = np.float64(rabs) * wi[idx]
            if r & _ONE:
                x = -x
            if rabs < ki[idx]:
                break
            if idx == 0:
                while True:
                    u, n, pos, w0, w1, w2, w3 = _word(n, pos, w0, w1, w2, w3, t, key0, key1)
                    xx = -nor_inv_r * np.log1p(-_unit(u))
                    u, n, pos, w0, w1, w2, w3 = _word(n, pos, w0, w1, w2, w3, t, key0, key1)
                    yy = -np.log1p(-_unit(u))
                    if yy + yy > xx * xx:
                        x = -(nor_r + xx) if (rabs >> np.uint64(8)) & _ONE else nor_r + xx
                        break
                break
            u, n, pos, w0, w1, w2, w3 = _word(n, pos, w0, w1, w2, w3, t, key0, key1)
            if (fi[idx - 1] - fi[idx]) * _unit(u) + fi[idx] < np.exp(-0.5 * x * x):
                break
        size[i] = x
    w, n, pos, w0, w1, w2, w3 = _word(n, pos, w0, w1, w2, w3, t, key0, key1)
    return _unit(w)


#: Steps whose draws are made at once, over every core, before the market steps through them.
CHUNK_STEPS = 4096


@njit(cache=True, parallel=True)
def _chunk_draws(key0, key1, t0, close, win, opn, size, tau, ki, wi, fi, nor_r, nor_inv_r):
    """The draws of steps ``t0 .. t0 + len(tau)``, in parallel over the steps (each has its own counter)."""
    b = close.shape[1]
    for k in prange(len(tau)):
        tau[k] = _draws(key0, key1, t0 + k, b, close[k], win[k], opn[k], size[k], ki, wi, fi, nor_r, nor_inv_r)


def draws(seed: int, t: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """Step ``t``'s ``close, win, open, size, tau``, the same numbers as ``simulator.Draws.of``."""
    out = [np.empty(b) for _ in range(4)]
    tau = _draws(np.uint64(seed & (2 ** 64 - 1)), np.uint64(0), t, b, *out, KI, WI, FI, NOR_R, NOR_INV_R)
    return (*out, float(tau))


@njit(cache=True)
def _scripted(t0, p_true, boundary, force_flat, latch_from, prm, close, win, opn, size, taus,
              lots, session, session_worst, tripped, sc, rewards, lots_out, edge_out, cooldown_out, worst_out,
              tau_out):
    """Steps ``t0 .. t0 + len(taus)`` of a scripted run (see :func:`scripted`) on their draws.

    ``prm`` holds :data:`PARAMS` in order, then the scripted Kelly; the market's state is
    carried from chunk to chunk in ``lots``, ``session``, ``session_worst``, ``tripped`` and
    ``sc`` (``p_ema, w_ema, l_ema``, the previous step's edge, the cooldown, the trap latch);
    the outputs are the run's whole stream arrays.
    """
    hazard, pi_open, w, l, jitter, reward_scale, alpha = prm[0], prm[1], prm[2], prm[3], prm[4], prm[5], prm[6]
    base_lots, dd_limit, cd_steps, tau_lo, tau_hi, scripted_kelly = prm[8], prm[9], prm[10], prm[11], \
        prm[12], prm[13]
    b = lots.shape[0]
    keep, half_j2 = 1.0 - alpha, 0.5 * jitter ** 2
    p_ema, w_ema, l_ema, edge = sc[0], sc[1], sc[2], sc[3]
    cooldown, dead = np.int64(sc[4]), sc[5] != 0.0
    for k in range(len(taus)):
        t = t0 + k
        dead = dead or (t >= latch_from and edge <= 0.0)
        if boundary[t]:
            session[:] = 0.0
            session_worst[:] = 0.0
            tripped[:] = False
            cooldown = 0
        kelly_f = scripted_kelly if edge > 0 else 0.0
        cooldown = max(cooldown - 1, 0)
        may_open = (not dead) and kelly_f > 0.0 and cooldown == 0
        new_size = np.int32(math.ceil(base_lots * kelly_f))
        newly = False
        for i in range(b):
            held = lots[i] > 0
            closing = held if force_flat[t] else (held and close[k, i] < hazard)
            pnl = 0.0
            if closing:
                won = win[k, i] < p_true[t]
                per_lot = (w if won else -l) * math.exp(jitter * size[k, i] - half_j2)
                pnl = per_lot * np.float64(lots[i])
                lots[i] = 0
                p_ema = keep * p_ema + alpha * (1.0 if won else 0.0)
                if won:
                    w_ema = keep * w_ema + alpha * abs(per_lot)
                else:
                    l_ema = keep * l_ema + alpha * abs(per_lot)
            if may_open and not held and opn[k, i] < pi_open:
                lots[i] = new_size
            rewards[t, i] = np.float32(pnl * reward_scale)
            lots_out[t, i] = lots[i]
            session[i] += pnl
            session_worst[i] = min(session_worst[i], session[i])
            if dd_limit > 0 and session[i] < -dd_limit and not tripped[i]:
                tripped[i] = True
                newly = True
        if newly:
            cooldown = np.int64(cd_steps)
        edge_out[t] = np.float32(p_ema - (1.0 - p_ema) * l_ema / w_ema)
        edge = np.float64(edge_out[t])
        cooldown_out[t] = np.float32(cooldown)
        worst_out[t] = np.float32(session_worst.min())
        tau_out[t] = np.float32(tau_lo + (tau_hi - tau_lo) * taus[k])
    sc[0], sc[1], sc[2], sc[3], sc[4], sc[5] = p_ema, w_ema, l_ema, edge, cooldown, 1.0 if dead else 0.0


#: The market's fields in the order :func:`_scripted` reads them (then the scripted sizing fraction).
PARAMS = ("hazard", "pi_open", "win", "loss", "jitter", "reward_scale", "ema_alpha", "p_ema0", "base_lots",
          "drawdown_limit", "cooldown_steps", "tau_lo", "tau_hi")


def kelly_edge(p: float, w: float, l: float) -> float:
    """``simulator.kelly_edge``: p − (1−p)·L/W (the market model's one formula, restated: this
    module sits below the simulator)."""
    return p - (1.0 - p) * l / w


def scripted(seed: int, accounts: int, market, p_true: np.ndarray, *, kelly: float,
             boundary: np.ndarray | None = None, force_flat: np.ndarray | None = None,
             latch_from: int | None = None) -> dict[str, np.ndarray]:
    """A scripted run's stream arrays: ``market_step`` each step with kelly_f = ``kelly`` while the
    previous step's edge is positive, else 0.

    ``p_true[t]`` is step t's win probability; ``boundary[t]`` runs reset_session_state before
    step t; ``force_flat[t]`` closes every position at step t; from step ``latch_from`` on, the
    first step whose previous edge is ≤ 0 stops every open for good (Run #8's trap).
    """
    n = len(p_true)
    boundary = np.zeros(n, bool) if boundary is None else np.asarray(boundary, bool)
    force_flat = np.zeros(n, bool) if force_flat is None else np.asarray(force_flat, bool)
    prm = np.array([float(getattr(market, f)) for f in PARAMS] + [float(kelly)])
    out = {"rewards": np.empty((n, accounts), np.float32), "lots": np.empty((n, accounts), np.int32),
           "kelly_analytic": np.empty(n, np.float32), "cooldown": np.empty(n, np.float32),
           "session_pnl_worst": np.empty(n, np.float32), "tau_action": np.empty(n, np.float32)}
    state = (np.zeros(accounts, np.int32), np.zeros(accounts), np.zeros(accounts), np.zeros(accounts, bool),
             np.array([market.p_ema0, market.win, market.loss,
                       kelly_edge(market.p_ema0, market.win, market.loss), 0.0, 0.0]))
    chunk = min(n, CHUNK_STEPS)
    drawn = [np.empty((chunk, accounts)) for _ in range(4)] + [np.empty(chunk)]
    key = np.uint64(seed)
    latch = n if latch_from is None else int(latch_from)
    p_true = np.asarray(p_true, np.float64)
    for t0 in range(0, n, chunk):
        part = [a[:min(chunk, n - t0)] for a in drawn]
        _chunk_draws(key, np.uint64(0), t0, *part, KI, WI, FI, NOR_R, NOR_INV_R)  # every core
        _scripted(t0, p_true, boundary, force_flat, latch, prm, *part, *state, *out.values())
    out["boundary"] = boundary
    out["step"] = np.arange(n, dtype=np.int64)
    return out
