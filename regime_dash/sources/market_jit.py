"""The market model's random numbers, and a scripted run stepped in numba with them.

:func:`regime_dash.sources.simulator.market_step` is the model, one step of NumPy calls; its draws
(:class:`regime_dash.sources.simulator.Draws`) are made here. The generator is counter-based, so
any draw can be made alone: account ``i``'s draws at step ``t`` are the stream of NumPy's
``Philox`` (Philox4x64-10) keyed by the seed with the counter at ``[0, t, i + 1, 0]``, that
is ``Generator(Philox(key=seed, counter=[0, t, i + 1, 0]))``'s ``random()`` three times
(close, win, open) and then ``standard_normal()`` (size); the step's τ is the first
``random()`` of the counter ``[0, t, 0, 0]``. The counter is bumped before each block of four
words, as NumPy's ``Philox`` does; ``random()`` is ``(word >> 11) · 2⁻⁵³`` and
``standard_normal()`` NumPy's ziggurat on NumPy's tables (``ziggurat_normal.npz``: ``ki``,
``wi``, ``fi`` of its 256 layers, ``r`` and ``1/r``), word for word. One block holds an
account's three uniforms and the normal's first word, so a step's draws of an account are
one Philox block (the ziggurat rejects about 1 % of first words and reads on).

A scripted run (the open-loop presets of :mod:`regime_dash.sources.scenarios`) decides its sizing
from the market alone, so the whole run is one compiled loop, and it makes an account's
block only in a step that reads it (the account holds a position or may open one): a run
whose accounts sit flat with opening stopped, Run #8's trap, draws nothing but τ. The trades
follow ``market_step`` statement by statement; only the win-rate and win/loss-size EMAs are
updated close by close, in account order (the recurrence ``ema_over`` states, which it
evaluates in closed form through a dot product).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from regime_dash.sources.market import BlockSink, Market

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
#: 1 as a uint64 (Philox's counters and lanes are uint64: no mixed-type arithmetic in the kernels).
ONE_U64 = np.uint64(1)
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


@njit(cache=True)
def _mulhilo(a, b):
    return _mulhi(a, b), a * b


@njit(cache=True)
def philox(n, t, lane, k0, k1):
    """Philox4x64-10 of the counter ``[n, t, lane, 0]`` under the key ``[k0, k1]``: four words."""
    c0, c1, c2, c3 = n, t, lane, np.uint64(0)
    for r in range(10):
        if r:
            k0 += _W0
            k1 += _W1
        hi0, lo0 = _mulhilo(_M0, c0)
        hi1, lo1 = _mulhilo(_M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return c0, c1, c2, c3


@njit(cache=True)
def _word(n, pos, w0, w1, w2, w3, t, lane, k0, k1):
    """The next word of the stream ``(t, lane)``; the stream's state is ``n`` (blocks made so far),
    ``pos`` (words of the last block used) and that block ``w0..w3``, returned updated."""
    if pos == 4:
        n += ONE_U64
        w0, w1, w2, w3 = philox(n, t, lane, k0, k1)
        pos = 0
    w = w0 if pos == 0 else w1 if pos == 1 else w2 if pos == 2 else w3
    return w, n, pos + 1, w0, w1, w2, w3


@njit(cache=True)
def unit_interval(w):
    """The word ``w`` as a double in [0, 1): its top 53 bits over 2**53 (NumPy's ``next_double``)."""
    return np.float64(w >> np.uint64(11)) * _TO_UNIT


@njit(cache=True)
def ziggurat_normal(w0, w1, w2, w3, t, lane, k0, k1, ki, wi, fi, nor_r, nor_inv_r):
    """NumPy's ziggurat (``random_standard_normal``), word for word, on the stream ``(t, lane)``
    whose first block is ``w0..w3`` and whose first three words are spent: it starts at ``w3``."""
    n, pos = ONE_U64, 3
    while True:
        r, n, pos, w0, w1, w2, w3 = _word(n, pos, w0, w1, w2, w3, t, lane, k0, k1)
        idx = np.int64(r & np.uint64(0xFF))
        r >>= np.uint64(8)
        rabs = (r >> ONE_U64) & np.uint64(0x000FFFFFFFFFFFFF)
        x = np.float64(rabs) * wi[idx]
        if r & ONE_U64:
            x = -x
        if rabs < ki[idx]:
            return x
        if idx == 0:
            while True:
                u, n, pos, w0, w1, w2, w3 = _word(n, pos, w0, w1, w2, w3, t, lane, k0, k1)
                xx = -nor_inv_r * np.log1p(-unit_interval(u))
                u, n, pos, w0, w1, w2, w3 = _word(n, pos, w0, w1, w2, w3, t, lane, k0, k1)
                yy = -np.log1p(-unit_interval(u))
                if yy + yy > xx * xx:
                    return -(nor_r + xx) if (rabs >> np.uint64(8)) & ONE_U64 else nor_r + xx
        u, n, pos, w0, w1, w2, w3 = _word(n, pos, w0, w1, w2, w3, t, lane, k0, k1)
        if (fi[idx - 1] - fi[idx]) * unit_interval(u) + fi[idx] < np.exp(-0.5 * x * x):
            return x


@njit(cache=True)
def tau_unit(t, k0, k1):
    """Step ``t``'s τ draw: the first word of the stream ``(t, 0)``."""
    return unit_interval(philox(ONE_U64, t, np.uint64(0), k0, k1)[0])


@njit(cache=True)
def _draws(key0, key1, t, b, close, win, opn, size, ki, wi, fi, nor_r, nor_inv_r):
    """Step ``t``'s draws of every account into the four [b] arrays; returns the tau draw."""
    t = np.uint64(t)
    for i in range(b):
        lane = np.uint64(i) + ONE_U64
        w0, w1, w2, w3 = philox(ONE_U64, t, lane, key0, key1)
        close[i], win[i], opn[i] = unit_interval(w0), unit_interval(w1), unit_interval(w2)
        size[i] = ziggurat_normal(w0, w1, w2, w3, t, lane, key0, key1, ki, wi, fi, nor_r, nor_inv_r)
    return tau_unit(t, key0, key1)


def draws(seed: int, t: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """Step ``t``'s ``close, win, open, size, tau`` of ``b`` accounts (``simulator.Draws.of``'s numbers)."""
    out = [np.empty(b) for _ in range(4)]
    tau = _draws(np.uint64(seed & (2 ** 64 - 1)), np.uint64(0), t, b, *out, KI, WI, FI, NOR_R, NOR_INV_R)
    return (*out, float(tau))


@njit(cache=True, nogil=True)  # a command generates on a thread while it loads the engine
def _scripted(key0, key1, p_true, boundary, force_flat, latch_from, prm, ki, wi, fi, nor_r, nor_inv_r,
              rewards, lots_out, edge_out, cooldown_out, worst_out, tau_out,
              state, lots, session, session_worst, tripped, t_lo, t_hi):
    """Steps ``t_lo .. t_hi`` of a scripted run (see :func:`scripted`), its draws made as they are read.

    ``prm`` holds :data:`PARAMS` in order, then the scripted Kelly; the outputs are the run's
    whole stream arrays. The market carries ``state`` (p, W and L EMAs, edge, cooldown, dead)
    and the per-account ``lots``, ``session``, ``session_worst``, ``tripped`` from one call to
    the next, so a run made a block of steps at a time is the run made at once, bit for bit.
    An account's draws of a step are one Philox block (and, for a normal the ziggurat
    rejects, the blocks after it), made only when the step reads them: when the account
    holds a position or may open one. What is not read is never made, and since every draw
    is a function of its counter alone, the numbers read are the ones :func:`draws` gives.
    """
    hazard, pi_open, w, l, jitter, reward_scale, alpha = prm[0], prm[1], prm[2], prm[3], prm[4], prm[5], prm[6]
    base_lots, dd_limit, cd_steps, tau_lo, tau_hi, scripted_kelly = prm[8], prm[9], prm[10], prm[11], prm[12], \
        prm[13]
    b = rewards.shape[1]
    keep, half_j2 = 1.0 - alpha, 0.5 * jitter ** 2
    p_ema, w_ema, l_ema, edge = state[0], state[1], state[2], state[3]
    cooldown, dead = np.int64(state[4]), state[5] != 0.0
    for t in range(t_lo, t_hi):
        tt = np.uint64(t)
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
            if not held and not may_open:  # nothing read, nothing moves: the row's zeros stay as they are
                continue
            lane = np.uint64(i) + ONE_U64
            w0, w1, w2, w3 = philox(ONE_U64, tt, lane, key0, key1)
            closing = held if force_flat[t] else (held and unit_interval(w0) < hazard)
            pnl = 0.0
            if closing:
                won = unit_interval(w1) < p_true[t]
                size = ziggurat_normal(w0, w1, w2, w3, tt, lane, key0, key1, ki, wi, fi, nor_r, nor_inv_r)
                per_lot = (w if won else -l) * math.exp(jitter * size - half_j2)
                pnl = per_lot * np.float64(lots[i])
                lots[i] = 0
                p_ema = keep * p_ema + alpha * (1.0 if won else 0.0)
                if won:
                    w_ema = keep * w_ema + alpha * abs(per_lot)
                else:
                    l_ema = keep * l_ema + alpha * abs(per_lot)
            if may_open and not held and unit_interval(w2) < pi_open:
                lots[i] = new_size
            rewards[t, i] = np.float32(pnl * reward_scale)  # the arrays start at zero: -0.0 is written too
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
        tau_out[t] = np.float32(tau_lo + (tau_hi - tau_lo) * tau_unit(tt, key0, key1))
    state[0], state[1], state[2], state[3] = p_ema, w_ema, l_ema, edge
    state[4], state[5] = np.float64(cooldown), 1.0 if dead else 0.0


#: The market's fields in the order :func:`_scripted` reads them (then the scripted sizing fraction).
PARAMS = ("hazard", "pi_open", "win", "loss", "jitter", "reward_scale", "ema_alpha", "p_ema0", "base_lots",
          "drawdown_limit", "cooldown_steps", "tau_lo", "tau_hi")


#: Steps a scripted run makes between two calls of its ``on_block``.
BLOCK_STEPS = 1 << 16


def scripted(seed: int, accounts: int, market, p_true: np.ndarray, *, kelly: float,
             boundary: np.ndarray | None = None, force_flat: np.ndarray | None = None,
             latch_from: int | None = None, on_block: BlockSink | None = None) -> dict[str, np.ndarray]:
    """A scripted run's stream arrays: ``market_step`` each step with kelly_f = ``kelly`` while the
    previous step's edge is positive, else 0.

    ``p_true[t]`` is step t's win probability; ``boundary[t]`` runs reset_session_state before
    step t; ``force_flat[t]`` closes every position at step t; from step ``latch_from`` on, the
    first step whose previous edge is ≤ 0 stops every open for good (Run #8's trap).
    ``on_block(lo, hi, rewards, lots)``, where given, is called as each :data:`BLOCK_STEPS` steps
    are made, with the whole [T, b] arrays, whose rows ``lo .. hi`` are then final.
    """
    n = len(p_true)
    boundary = np.zeros(n, bool) if boundary is None else np.asarray(boundary, bool)
    force_flat = np.zeros(n, bool) if force_flat is None else np.asarray(force_flat, bool)
    prm = np.array([float(getattr(market, f)) for f in PARAMS] + [float(kelly)])
    # zeros, not empty: a flat account's step writes nothing, and pages never written cost no memory
    out = {"rewards": np.zeros((n, accounts), np.float32), "lots": np.zeros((n, accounts), np.int32),
           "kelly_analytic": np.empty(n, np.float32), "cooldown": np.empty(n, np.float32),
           "session_pnl_worst": np.empty(n, np.float32), "tau_action": np.empty(n, np.float32)}
    latch = n if latch_from is None else int(latch_from)
    # before step 0: the EMAs at p_ema0, W and L, their edge (IEEE doubles, as in the loop), no cooldown, not dead
    p0, w, l = prm[7], prm[2], prm[3]
    state = np.array([p0, w, l, p0 - (1.0 - p0) * l / w, 0.0, 0.0])
    carried = (np.zeros(accounts, np.int32), np.zeros(accounts), np.zeros(accounts), np.zeros(accounts, np.bool_))
    p_true = np.asarray(p_true, np.float64)
    step = max(n, 1) if on_block is None else BLOCK_STEPS
    for lo in range(0, max(n, 1), step):  # one call at least: a run of no steps loads the loop too
        hi = min(lo + step, n)
        _scripted(np.uint64(seed), np.uint64(0), p_true, boundary, force_flat, latch, prm,
                  KI, WI, FI, NOR_R, NOR_INV_R, *out.values(), state, *carried, lo, hi)
        if on_block is not None and hi > lo:
            on_block(lo, hi, out["rewards"], out["lots"])
    out["boundary"] = boundary
    out["step"] = np.arange(n, dtype=np.int64)
    return out


def load() -> None:
    """Load :func:`scripted`'s compiled loop (from numba's cache, or compiled on first use) without
    running a step: the run after it holds no lock a thread loading modules needs."""
    scripted(0, 1, Market(), np.zeros(0), kelly=0.5)
