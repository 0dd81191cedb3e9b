"""The closed loop compiled: the market step and the risk-stack step of many steps in one numba loop.

:class:`regime_dash.sources.simulator.Simulator` on the ``fast`` stepper runs a plain stretch of steps
(no injection pending) here, a block of steps at a time:

1. every account's draws of the block (the numbers ``Draws.of`` gives, a close size only where the
   account's close draw lets it close) and the close sizes' lognormal factors, by the very NumPy expression
   :func:`~regime_dash.sources.simulator.market_step` evaluates (``np.exp`` is NumPy's SIMD exp,
   which numba's ``exp`` does not match bit for bit);
2. one compiled loop over the block's steps: :func:`market_step` statement by statement,
   then the engine's step (:func:`regime_dash.engine.fast.stats_row`, phase 1 of one row,
   and :func:`regime_dash.engine.reference.scalar_step`, the oracle's own source compiled),
   whose kelly_f sizes the next step's opens.

What NumPy computes and numba would compute otherwise is taken from NumPy: ``ema_over``'s
powers (NumPy's vector ``power``) are tables made by its own expressions, ``pnl.sum()`` is
NumPy's pairwise summation, and its dot product ``weights @ xs`` is BLAS's ``ddot``, which
adds in order only up to a length that depends on the BLAS (:func:`sequential_dot_max`
measures it here). A step with that many closes or more runs on the Python path, as do the
steps with an injection: each is bit for bit the step the Python path would run.

The compile (seconds; loaded from numba's disk cache after) is never a silent wait: a short
stretch runs on the Python path while :func:`start_compile` builds the loop in the background,
and a long one that must wait prints a line first (:func:`announced`).
"""
from __future__ import annotations

import contextlib
import hashlib
import inspect
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any, Callable, Iterator

import math

import numpy as np

from regime_dash.engine import fast, reference
from regime_dash.engine.jit import jitable

#: Steps a block of the compiled loop draws ahead (4 float64 [BLOCK, b] draw arrays).
BLOCK = 2048
#: A stretch shorter than this runs on the Python path while the loop is not compiled yet.
PYTHON_WHILE_COMPILING = 2000
#: The most closes of one step whose EMA dot products are checked to add in order.
DOT_PROBE_MAX = 16

#: The market's fields in the order the loop reads them from ``prm``.
PARAMS = ("hazard", "pi_open", "win", "loss", "reward_scale", "base_lots", "drawdown_limit",
          "cooldown_steps", "tau_lo", "tau_hi", "shock_pnl")

_LOCK = threading.Lock()
_BUILT: dict[str, Any] = {}
_STATE: dict[str, Any] = {"state": "cold", "error": None}


# ---- what NumPy computes, taken from NumPy ------------------------------------------
def ema_tables(alpha: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(keep_pow [n], weights [n, n])``: ``keep ** k`` and, in row k, the first k entries of
    ``alpha * keep ** np.arange(k - 1, -1, -1)``, each by ``simulator.ema_over``'s own expression."""
    keep = 1.0 - alpha
    keep_pow = np.array([keep ** k for k in range(n)], dtype=np.float64)
    weights = np.zeros((n, n), dtype=np.float64)
    for k in range(1, n):
        weights[k, :k] = alpha * keep ** np.arange(k - 1, -1, -1, dtype=np.float64)
    return keep_pow, weights


def sequential_dot_max() -> int:
    """The shortest length (≤ :data:`DOT_PROBE_MAX`) at which NumPy's ``w @ x`` is not the in-order
    sum of ``w[i] * x[i]`` here, probed on random vectors once per process; DOT_PROBE_MAX + 1 if none."""
    if "dot_max" not in _BUILT:
        seq = _kernels()["dot"]
        rng = np.random.default_rng(7)
        limit = DOT_PROBE_MAX + 1
        for n in range(1, DOT_PROBE_MAX + 1):
            if any(float(w @ x) != seq(w, x) for w, x in
                   ((rng.random(n), rng.random(n) * 2000.0) for _ in range(64))):
                limit = n
                break
        _BUILT["dot_max"] = limit
    return _BUILT["dot_max"]


# ---- the loop's parts ----------------------------------------------------------------
@jitable
def _block_sum(a, lo, n):
    """NumPy's pairwise sum of ``n`` ≤ 128 floats: in order below 8, else 8 accumulators, then the rest."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r0, r1, r2, r3, r4, r5, r6, r7 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3], a[lo + 4], a[lo + 5], a[lo + 6], \
        a[lo + 7]
    i = lo + 8
    while i < lo + n - (n % 8):
        r0, r1, r2, r3 = r0 + a[i], r1 + a[i + 1], r2 + a[i + 2], r3 + a[i + 3]
        r4, r5, r6, r7 = r4 + a[i + 4], r5 + a[i + 5], r6 + a[i + 6], r7 + a[i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < lo + n:
        res += a[i]
        i += 1
    return res


@jitable
def pairwise_sum(a, lo, n):
    """``a[lo:lo + n].sum()`` as NumPy adds a float64 array: above 128 halves (cut at a multiple of 8)
    summed and added, left then right. The recursion runs on explicit stacks: a cached numba function
    that calls itself does not load back from numba's cache."""
    if n <= 128:
        return _block_sum(a, lo, n)
    los, ns, stage = np.empty(64, np.int64), np.empty(64, np.int64), np.zeros(64, np.int64)
    left, right = np.empty(64), np.empty(64)
    top, los[0], ns[0] = 0, lo, n
    while True:
        at, m = los[top], ns[top]
        half = m // 2 - (m // 2) % 8
        if m <= 128:
            v = _block_sum(a, at, m)
        elif stage[top] < 2:  # push the left half, then the right one
            stage[top] += 1
            top += 1
            los[top], ns[top], stage[top] = (at, half, 0) if stage[top - 1] == 1 else (at + half, m - half, 0)
            continue
        else:
            v = left[top] + right[top]
        top -= 1
        if top < 0:
            return v
        if stage[top] == 1:
            left[top] = v
        else:
            right[top] = v


def sequential_dot(w, x):
    """``Σ w[i]·x[i]`` added in order from 0.0 (BLAS's ``ddot`` below its blocked length)."""
    res = 0.0
    for i in range(w.shape[0]):
        res += w[i] * x[i]
    return res


@jitable
def _closes(lots, close, win, r, hazard, p):
    """(closes, wins) of step row ``r``: held accounts whose close draw is under the hazard."""
    k = kw = 0
    for i in range(lots.shape[0]):
        if lots[i] > 0 and close[r, i] < hazard:
            k += 1
            if win[r, i] < p:
                kw += 1
    return k, kw


@jitable
def _trade(lots, close, win, opn, factor, r, prm, p, kelly_f, cooldown, pnl, tabs, sc):
    """``market_step``'s trades of step row ``r``: closes, their pnl into ``pnl``, opens; the EMAs
    ``sc[0:3]`` moved as ``ema_over`` moves them (in-order dots, ``tabs``' powers)."""
    hazard, pi_open, w, loss, base_lots = prm[0], prm[1], prm[2], prm[3], prm[5]
    keep_pow, weights = tabs[0], tabs[1:]
    k, kw = _closes(lots, close, win, r, hazard, p)
    kl = k - kw
    may_open = kelly_f > 0.0 and cooldown == 0
    size = np.int32(math.ceil(base_lots * kelly_f)) if may_open else np.int32(0)
    dot_p = dot_w = dot_l = 0.0
    jp = jw = jl = 0
    for i in range(lots.shape[0]):
        held = lots[i] > 0
        value = 0.0
        if held and close[r, i] < hazard:
            won = win[r, i] < p
            per_lot = (w if won else -loss) * factor[r, i]
            value = per_lot * np.float64(lots[i])
            lots[i] = 0
            dot_p += weights[k, jp] * (1.0 if won else 0.0)
            jp += 1
            if won:
                dot_w += weights[kw, jw] * abs(per_lot)
                jw += 1
            else:
                dot_l += weights[kl, jl] * abs(per_lot)
                jl += 1
        if may_open and not held and opn[r, i] < pi_open:
            lots[i] = size
        pnl[i] = value
    if k:
        sc[0] = keep_pow[k] * sc[0] + dot_p
    if kw:
        sc[1] = keep_pow[kw] * sc[1] + dot_w
    if kl:
        sc[2] = keep_pow[kl] * sc[2] + dot_l
    return k, kw


@jitable
def _settle(lots, session, session_worst, tripped, pnl, reward_row, lots_row, prm):
    """After the trades: session pnl, its worst, the drawdown trips, the step's reward and lots rows.
    Returns (newly tripped, open accounts, worst session pnl)."""
    reward_scale, dd_limit = prm[4], prm[6]
    newly, n_open, worst = False, 0, np.inf
    for i in range(lots.shape[0]):
        session[i] += pnl[i]
        session_worst[i] = min(session_worst[i], session[i])
        worst = min(worst, session_worst[i])
        if dd_limit > 0 and session[i] < -dd_limit and not tripped[i]:
            tripped[i] = True
            newly = True
        reward_row[i] = np.float32(pnl[i] * reward_scale)
        lots_row[i] = lots[i]
        n_open += lots[i] != 0
    return newly, n_open, worst


# ---- the kernels -----------------------------------------------------------------------
def make_block_draws(fingerprint: str):
    """The kernel of step rows' draws: ``market_jit._draws``' numbers of each step ``t0 + r``, except that an
    account's close size (the ziggurat normal, the costly draw) is made only where its close draw is under
    ``hazard``: elsewhere the account cannot close that step, and the size is never read (0 is written)."""
    from regime_dash.sources.market_jit import ONE_U64, philox, tau_unit, unit_interval, ziggurat_normal

    def block_draws(key0, key1, t0, hazard, close, win, opn, size, tau, ki, wi, fi, nor_r, nor_inv_r):
        fingerprint  # noqa: B018 - keeps the dependency hash in the cache key
        for r in range(close.shape[0]):
            t = np.uint64(t0 + r)
            for i in range(close.shape[1]):
                lane = np.uint64(i) + ONE_U64
                w0, w1, w2, w3 = philox(ONE_U64, t, lane, key0, key1)
                close[r, i], win[r, i], opn[r, i] = unit_interval(w0), unit_interval(w1), unit_interval(w2)
                size[r, i] = ziggurat_normal(w0, w1, w2, w3, t, lane, key0, key1, ki, wi, fi, nor_r, nor_inv_r) \
                    if close[r, i] < hazard else 0.0
            tau[r] = tau_unit(t, key0, key1)

    return block_draws


def make_loop(fingerprint: str, kelly_col: int):
    """The closed loop's kernel: steps ``0 .. n`` of a block, stopping before a step of ``dot_max`` closes
    or more (it returns the steps it ran). ``sc`` carries p_ema, w_ema, l_ema, cooldown, cum_pnl, kelly_f."""
    step, stats_row = reference.scalar_step, fast.stats_row

    def loop(n, close, win, opn, factor, tau_draw, p_true, boundary, shock, prm, tabs, dot_max, lots, session,
             session_worst, tripped, sc, isv, ix, boot, r_idx, r_code, r_src, snap_idx, snap, flat, keep, rewards,
             lots_rows, sums, flat_s, local, inputs, counts, money, pnl):
        fingerprint  # noqa: B018
        b = lots.shape[0]
        cooldown, kelly_f = np.int64(sc[3]), sc[5]
        for r in range(n):
            p = p_true[r]
            if _closes(lots, close, win, r, prm[0], p)[0] >= dot_max:
                sc[3], sc[5] = cooldown, kelly_f
                return r
            shock_at = np.argmax(lots) if shock[r] else -1
            if boundary[r]:  # the market side of reset_session_state
                session[:] = 0.0
                session_worst[:] = 0.0
                tripped[:] = False
                cooldown = 0
            cooldown = max(cooldown - 1, 0)
            k, kw = _trade(lots, close, win, opn, factor, r, prm, p, kelly_f, cooldown, pnl, tabs, sc)
            if shock_at >= 0:
                pnl[shock_at] -= prm[10]
            q = r if keep else 0
            newly, n_open, worst = _settle(lots, session, session_worst, tripped, pnl, rewards[q], lots_rows[q], prm)
            if newly:
                cooldown = np.int64(prm[7])
            step_pnl = pairwise_sum(pnl, 0, b)
            sc[4] += step_pnl
            inputs[r, 0] = np.float32(sc[0] - (1.0 - sc[0]) * sc[2] / sc[1])  # kelly_edge
            inputs[r, 1] = np.float32(cooldown)
            inputs[r, 2] = np.float32(worst)
            inputs[r, 3] = np.float32(prm[8] + (prm[9] - prm[8]) * tau_draw[r])
            counts[r, 0], counts[r, 1], counts[r, 2] = k, kw, n_open
            money[r, 0], money[r, 1] = step_pnl, sc[4]
            stats_row(rewards, lots_rows, q, sums, flat_s, local)
            flat[r] = flat_s[q]
            step(isv, ix, boot, r_idx, r_code, r_src, snap_idx, snap[r], boundary[r], inputs[r, 1], inputs[r, 2],
                 inputs[r, 0], inputs[r, 3], sums[q, 0], sums[q, 1], sums[q, 2], flat_s[q], b)
            kelly_f = np.float64(snap[r, kelly_col])
        sc[3], sc[5] = cooldown, kelly_f
        return n

    return loop


def _fingerprint() -> str:
    # numba's cache key covers this file only; the functions the loop inlines or calls live in
    # fast.py, reference.py and market_jit.py, whose sources ride in the closure (as fast.py does)
    from regime_dash.sources import market_jit
    from regime_dash.engine import fast

    h = hashlib.sha256(fast.dependency_fingerprint().encode())
    for module in (fast, market_jit):
        h.update(inspect.getsource(module).encode())
    return h.hexdigest()


def _build() -> dict[str, Any]:
    from numba import njit

    from regime_dash.sources import market_jit
    from regime_dash.engine.steppers import KELLY_COL

    fingerprint = _fingerprint()
    opts = {"nogil": True, "error_model": "numpy"}  # numpy: a division by zero gives inf, as the oracle

    def jit(fn):
        try:
            return njit(cache=True, **opts)(fn)
        except RuntimeError:  # no writable cache location (a read-only install): compile per process
            return njit(cache=False, **opts)(fn)

    return {"draws": jit(make_block_draws(fingerprint)),
            "loop": jit(make_loop(fingerprint, KELLY_COL)), "dot": jit(sequential_dot)}


def _kernels() -> dict[str, Any]:
    with _LOCK:
        if "kernels" not in _BUILT:
            _BUILT["kernels"] = _build()
        return _BUILT["kernels"]


def is_compiled() -> bool:
    """Whether this process has run the compiled loop (nothing left to compile or load)."""
    return _STATE["state"] == "ready"


def _background(warm: Callable[[], None]) -> None:
    try:
        warm()
    except Exception as exc:  # noqa: BLE001 - the Python path goes on; the reason is kept for the caller
        with _LOCK:
            _STATE.update(state="failed", error=f"{type(exc).__name__}: {exc}")


def start_compile(warm: Callable[[], None]) -> None:
    """Run ``warm`` (a first run of the loop: ``simulator.compile_loop``) in a background thread,
    which compiles the loop or loads it from numba's cache; a no-op once started."""
    with _LOCK:
        if _STATE["state"] != "cold":
            return
        _STATE["state"] = "compiling"
    threading.Thread(target=_background, args=(warm,), name="regime-dash-simulator-compile", daemon=True).start()


def compile_state() -> dict[str, Any]:
    """``state`` (``cold``, ``compiling``, ``ready``, ``failed``) and ``error`` (why it failed)."""
    with _LOCK:
        return dict(_STATE)


# ---- the run --------------------------------------------------------------------------
class _Plan:
    """What every segment of one run shares: the kernels, the market's parameters and tables, the slot plan."""

    def __init__(self, sim):
        from regime_dash.engine import snapshot_indices

        self.kernels, self.dot_max = _kernels(), sequential_dot_max()
        self.prm = np.array([float(getattr(sim.market, f)) for f in PARAMS])
        keep_pow, weights = ema_tables(sim.market.ema_alpha, self.dot_max)
        self.tabs = np.ascontiguousarray(np.vstack([keep_pow[None, :], weights]))
        r_idx, r_code, r_src = sim.layout.reset_plan()
        i32 = lambda a: np.ascontiguousarray(a, dtype=np.int32)  # noqa: E731
        self.slots = (i32(reference.index_table(sim.layout)), np.ascontiguousarray(sim.engine.boot, np.float32),
                      i32(r_idx), i32(r_code), i32(r_src), i32(snapshot_indices(sim.layout)))
        self.local = np.empty((3, reference.BLOCK_DIM + reference.WARP), np.float32)


def _segment(sim, plan: _Plan, rows: tuple[np.ndarray, ...], sched: tuple[np.ndarray, ...]) -> int:
    """The loop from ``sim.t`` over the step rows given (draws ``rows``, schedule ``sched``) until a step it
    leaves to the Python path; its records handed to ``sim``. Returns the steps it ran."""
    st, b, m = sim.state, sim.accounts, len(sched[0])
    st.lots = st.lots.copy()  # the loop moves it in place; a Python step's kept row may be this very array
    sc = np.array([st.p_ema, st.w_ema, st.l_ema, st.cooldown, st.cum_pnl, sim.kelly_f], dtype=np.float64)
    kept = m if sim.keep_stream else 1
    snap = np.empty((m, len(plan.slots[5])), np.float32)
    flat, inputs = np.empty(m, np.int32), np.empty((m, 4), np.float32)
    counts, money = np.empty((m, 3), np.int64), np.empty((m, 2), np.float64)
    rewards, lots_rows = np.zeros((kept, b), np.float32), np.zeros((kept, b), np.int32)
    isv = np.ascontiguousarray(sim.engine.isv, dtype=np.float32)
    done = plan.kernels["loop"](m, *rows, *sched, plan.prm, plan.tabs, plan.dot_max, st.lots, st.session,
                                st.session_worst, st.tripped, sc, isv, *plan.slots, snap, flat, sim.keep_stream,
                                rewards, lots_rows, np.empty((kept, 3), np.float32), np.empty(kept, np.int32),
                                plan.local, inputs, counts, money, np.empty(b))
    sim.engine.record(snap[:done], flat[:done], isv)
    st.p_ema, st.w_ema, st.l_ema, st.cum_pnl, sim.kelly_f = (float(sc[i]) for i in (0, 1, 2, 4, 5))
    st.cooldown = int(sc[3])
    steps = np.arange(sim.t, sim.t + done, dtype=np.int64)
    sim.record_block(steps, sched[0][:done], sched[1][:done], sched[2][:done], counts[:done], money[:done],
                     (rewards[:done], lots_rows[:done], inputs[:done]) if sim.keep_stream else None)
    return done


def _start_draws(pool: ThreadPoolExecutor, workers: int, plan: _Plan, sim, t0: int, m: int):
    """Steps ``t0 .. t0 + m``'s draws of every account, made on the pool's threads (the kernel releases
    the GIL), each a contiguous part of the rows; returns the arrays and the futures filling them."""
    from regime_dash.sources import market_jit

    arrays = [np.empty((m, sim.accounts)) for _ in range(4)] + [np.empty(m)]
    part = -(-m // workers)
    futures = [pool.submit(plan.kernels["draws"], np.uint64(sim.seed), np.uint64(0), t0 + lo, plan.prm[0],
                           *(a[lo:lo + part] for a in arrays), market_jit.KI, market_jit.WI, market_jit.FI,
                           market_jit.NOR_R, market_jit.NOR_INV_R) for lo in range(0, m, part)]
    return arrays, futures


def run(sim, n: int) -> None:
    """Advance ``sim`` (no injection pending, a host-state ``fast`` stepper) by ``n`` steps on the loop.

    A block's draws are made on worker threads while the loop runs the block before it."""
    plan, market = _Plan(sim), sim.market
    blocks = [(t, min(BLOCK, sim.t + int(n) - t)) for t in range(sim.t, sim.t + int(n), BLOCK)]
    from numba import config as numba_config

    workers = max(1, int(numba_config.NUMBA_NUM_THREADS))  # a thread per core numba uses, as the fast engine's blocks
    with ThreadPoolExecutor(workers) as pool:
        pending = _start_draws(pool, workers, plan, sim, *blocks[0])
        for i, (t0, m) in enumerate(blocks):
            (close, win, opn, size, tau), futures = pending
            for done in futures:
                done.result()
            if i + 1 < len(blocks):
                pending = _start_draws(pool, workers, plan, sim, *blocks[i + 1])
            # market_step's own expression over the block: NumPy's exp, element for element
            factor = np.exp(market.jitter * size - 0.5 * market.jitter ** 2)
            sched = sim.schedule.arrays(t0, t0 + m)
            r = 0
            while r < m:
                r += _segment(sim, plan, (close[r:], win[r:], opn[r:], factor[r:], tau[r:]),
                              tuple(a[r:] for a in sched))
                if r < m:  # a step whose EMA dots BLAS does not add in order: the Python path's step
                    sim.step(1, compiled=False)
                    r += 1
    with _LOCK:
        _STATE.update(state="ready", error=None)


@contextlib.contextmanager
def announced(out: IO[str] | None = None, after_s: float = 1.0, every_s: float = 15.0) -> Iterator[None]:
    """Around the first run of the loop: a line on ``out`` (stderr) once it has taken ``after_s``
    (a compile, not a load from numba's cache), then one every ``every_s`` until it is done."""
    if is_compiled():
        yield
        return
    from regime_dash.engine.warm import still_compiling

    with still_compiling(sys.stderr if out is None else out, every_s, after_s=after_s,
                         first="preparing the simulator's compiled loop (numba: compiled once, then loaded "
                               "from its cache)…"):
        yield


__all__ = ["BLOCK", "PARAMS", "announced", "run", "compile_state", "ema_tables", "is_compiled",
           "sequential_dot_max", "start_compile"]
