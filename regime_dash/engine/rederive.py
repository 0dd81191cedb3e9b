"""The reference step functions run row by row from a diag's logged state: each logged output re-derived.

A diag row logs each kernel's inputs beside its outputs. :func:`run` takes the
logged values of rows ``t−1`` and ``t`` and, for every formula unit of the
spec's launch order, runs the reference engine's own step function for it
(:mod:`regime_dash.engine.reference`; one copy of the maths), then records the
value it writes. The units are the functions the reference kernels are made of,
one per logged output.

Isolation. Before a unit runs, every slot it reads holds the value the run
itself logged at that point of step ``t``: a slot an earlier unit of step ``t``
wrote holds its logged row-``t`` value, any other slot its logged row-``t−1``
value (after ``reset_session_state`` at a boundary). So one wrong formula shows
in its own output only, at the steps it is wrong: nothing downstream inherits
the difference, in the same row or the next.

Carried state. Three slots the observer keeps are not logged: the Welford mean
and M2 (``RL_REGIME_SESSION_PNL_VAR_MEAN/M2``) and PopArt's σ/μ before the update
(only ``rl_popart_v_correct`` reads those). The Welford pair is carried from the
run's first step by the same functions; ``chain_ok`` says on which rows it is
known (from a bootstrap start with no gap since). The previous session-pnl-worst
is the previous row's logged worst (the observer copies it every step).

Inputs a diag does not log (the batch sums behind PopArt, the analytic-Kelly
edge, IQN's τ before its clamp) come in ``extra``; a NaN there leaves that
unit's output NaN, and the caller reports it as not checkable.

The loop runs compiled by numba (:func:`run` compiles it on first use, cached on
disk) or, for small frames and where numba is absent, as the Python it is
written in: the same functions either way.
"""
from __future__ import annotations

import hashlib
import inspect
import threading

import numpy as np

from regime_dash.engine import reference as R
from regime_dash.engine.jit import HAVE_NUMBA, jitable
from regime_dash.core.slots import DEFAULT_LAYOUT

#: The compact ISV the loop runs on: slot ``k`` is ``reference.SLOT_ORDER[k]``.
COMPACT = DEFAULT_LAYOUT.with_indices({name: k for k, name in enumerate(R.SLOT_ORDER)})
_IX = np.arange(len(R.SLOT_ORDER), dtype=np.int32)

#: Re-derived outputs, in launch order: (name, slot the unit writes).
OUTPUTS: tuple[tuple[str, str], ...] = (
    ("popart_mean", "POPART_MEAN_INDEX"),
    ("popart_var", "POPART_VAR_INDEX"),
    ("envelope", "RL_POPART_MAX_ABS_REWARD_EMA_INDEX"),
    ("sigma", "POPART_SIGMA_INDEX"),
    ("flag", "RL_REGIME_DEAD_ZONE_FLAG_INDEX"),
    ("duration", "RL_REGIME_DEAD_ZONE_DURATION_INDEX"),
    ("timeout", "RL_REGIME_DEAD_ZONE_TIMEOUT_FLAG_INDEX"),
    ("welford_count", "RL_REGIME_SESSION_PNL_VAR_COUNT_INDEX"),
    ("variance", "RL_REGIME_SESSION_PNL_VARIANCE_EMA_INDEX"),
    ("recency", "RL_REGIME_TAIL_EVENT_RECENCY_INDEX"),
    ("factor", "RL_REGIME_RECOVERY_FACTOR_INDEX"),
    ("live", "RL_KELLY_EPS_RECOVERY_LIVE_INDEX"),
    ("tau_min_effective", "RL_IQN_TAU_MIN_EFFECTIVE_INDEX"),
    ("tau_action", "RL_IQN_TAU_ACTION_INDEX"),
    ("analytic", "RL_KELLY_ANALYTIC_INDEX"),
    ("kelly", "RL_KELLY_FRACTION_INDEX"),
    ("remaining", "RL_REGIME_TRANSITION_REMAINING_INDEX"),
    ("safety_frac", "RL_KELLY_SAFETY_FRAC_INDEX"),
)
OUTPUT_NAMES = tuple(n for n, _ in OUTPUTS)
#: Columns of ``extra``: inputs a diag may log beside the slots.
EXTRA = ("kelly_edge", "tau_action_input", "batch_sum", "batch_sumsq", "batch_max_abs")

_POS = {name: k for k, name in enumerate(R.SLOT_ORDER)}
_O = [_POS[s] for _, s in OUTPUTS]
(_O_MEAN, _O_VAR, _O_ENV, _O_SIGMA, _O_FLAG, _O_DUR, _O_TIMEOUT, _O_COUNT, _O_VARIANCE, _O_RECENCY,
 _O_FACTOR, _O_LIVE, _O_TAU_EFF, _O_TAU, _O_ANALYTIC, _O_KELLY, _O_REM, _O_SAFETY) = _O
_P_WORST = _POS["RL_SESSION_PNL_WORST_INDEX"]
_P_COOLDOWN = _POS["RL_COOLDOWN_REMAINING_STEPS_INDEX"]
_P_PREV_WORST = _POS["RL_REGIME_PREV_WORST_PNL_INDEX"]
_NAN = np.float32(np.nan)
_BIG = np.float32(2.0 ** 24)


@jitable
def _whole(x):
    """``x`` is finite and small enough that ``int(x)`` is what a kernel's cast gives."""
    return -_BIG < x < _BIG

#: Below this many rows the loop runs as Python (no compile to wait for).
PYTHON_ROWS = 4000


@jitable
def _put(isv, logged, col_of, t, k):
    """Slot ``k`` takes its logged value of row ``t``, where the diag logs it."""
    j = col_of[k]
    if j >= 0:
        isv[k] = logged[t, j]


@jitable
def _keep(isv, logged, col_of, t, k, resync):
    """After a unit wrote slot ``k``: re-synced, the logged value replaces the unit's; free-running, the
    unit's value stays, unless it could not be computed (an input the diag does not log), where the
    logged one stands in."""
    if resync or isv[k] != isv[k]:
        _put(isv, logged, col_of, t, k)


@jitable
def _record(isv, logged, col_of, exp, t, j, k, resync):
    """Output ``j`` of row ``t`` is what the unit wrote to slot ``k``; then the slot is kept (:func:`_keep`)."""
    exp[t, j] = isv[k]
    _keep(isv, logged, col_of, t, k, resync)


@jitable
def _popart_normalize(isv, ix, logged, col_of, exp, t, extra, b, resync):
    """rl_popart_normalize's units: outputs 0..3 (mean, var, envelope, sigma)."""
    R.popart_moments(isv, ix, extra[t, 2], extra[t, 3], b)
    _record(isv, logged, col_of, exp, t, 0, _O_MEAN, resync)
    _record(isv, logged, col_of, exp, t, 1, _O_VAR, resync)
    R.popart_envelope(isv, ix, extra[t, 4])
    _record(isv, logged, col_of, exp, t, 2, _O_ENV, resync)
    R.popart_sigma(isv, ix, isv[_O_VAR])
    _record(isv, logged, col_of, exp, t, 3, _O_SIGMA, resync)


@jitable
def _regime_observer(isv, ix, logged, col_of, exp, t, f, b, prev_flag, prev_timeout, resync):
    """rl_regime_observer's units: outputs 4..11 (dead zone, Welford, tail, recovery); ``prev_flag``
    and ``prev_timeout`` are the slots' values before the step."""
    R.observer_dead_zone_flag(isv, ix, f, b)
    _record(isv, logged, col_of, exp, t, 4, _O_FLAG, resync)
    R.observer_duration(isv, ix, 1 if isv[_O_FLAG] != 0 else 0, prev_flag, prev_timeout, f, b)
    _record(isv, logged, col_of, exp, t, 5, _O_DUR, resync)
    R.observer_timeout(isv, ix, isv[_O_DUR])
    _record(isv, logged, col_of, exp, t, 6, _O_TIMEOUT, resync)
    dx, mean, count = R.observer_welford(isv, ix)
    _record(isv, logged, col_of, exp, t, 7, _O_COUNT, resync)
    _record(isv, logged, col_of, exp, t, 8, _O_VARIANCE, resync)
    R.observer_tail(isv, ix, dx, mean, isv[_O_COUNT])
    _record(isv, logged, col_of, exp, t, 9, _O_RECENCY, resync)
    R.observer_recovery_factor(isv, ix, isv[_O_RECENCY])
    _record(isv, logged, col_of, exp, t, 10, _O_FACTOR, resync)
    R.observer_eps_live(isv, ix, isv[_O_FACTOR])
    _record(isv, logged, col_of, exp, t, 11, _O_LIVE, resync)


@jitable
def _iqn_and_kelly(isv, ix, logged, col_of, exp, t, resync):
    """rl_iqn_action_tau_controller's units (outputs 12, 13), then rl_kelly_fraction_controller's
    (14, 15): the override reads the fraction the analytic part wrote."""
    R.iqn_tau_min_effective(isv, ix)
    _record(isv, logged, col_of, exp, t, 12, _O_TAU_EFF, resync)
    R.iqn_tau_clamp(isv, ix, isv[_O_TAU_EFF])
    _record(isv, logged, col_of, exp, t, 13, _O_TAU, resync)
    R.kelly_analytic(isv, ix)
    _record(isv, logged, col_of, exp, t, 14, _O_ANALYTIC, resync)
    isv[_O_KELLY] = isv[_O_ANALYTIC]
    if _whole(isv[_O_FLAG]) and _whole(isv[_O_TIMEOUT]):  # the override reads them with int()
        R.kelly_resurrection(isv, ix)
        exp[t, 15] = isv[_O_KELLY]
    else:
        exp[t, 15] = _NAN
    _keep(isv, logged, col_of, t, _O_KELLY, resync)


@jitable
def _eval_warmup_decay(isv, ix, logged, col_of, exp, t, r_before, resync):
    """eval_warmup_decay's units: outputs 16, 17; ``r_before`` is the countdown before the step."""
    R.v9_countdown(isv, ix, r_before)
    _record(isv, logged, col_of, exp, t, 16, _O_REM, resync)
    R.v9_safety_frac(isv, ix, r_before, isv[_O_REM])
    _record(isv, logged, col_of, exp, t, 17, _O_SAFETY, resync)


def _make_loop(fingerprint: str):
    inputs, reset = R.write_step_inputs, R.reset_session_state
    ix = _IX
    put = _put
    popart, observer, iqn_and_kelly, warmup = _popart_normalize, _regime_observer, _iqn_and_kelly, _eval_warmup_decay

    def loop(logged, col_of, cfg_pos, flat, bsz, extra, start, skip, boundary, boot, r_idx, r_code, r_src,
             first, isv, chain_io, exp, chain_ok, resync):
        fingerprint  # noqa: B018 - keeps the dependency hash in numba's cache key
        n_out = exp.shape[1]
        chain = chain_io[0]
        j_worst, j_cooldown = col_of[_P_WORST], col_of[_P_COOLDOWN]
        for t in range(first, logged.shape[0]):
            if skip[t]:
                chain = False
                for j in range(n_out):
                    exp[t, j] = _NAN
                chain_ok[t] = False
                continue
            if start[t]:
                for k in range(isv.shape[0]):
                    isv[k] = boot[k]
                chain = True
            elif resync or t == first:
                for k in range(isv.shape[0]):
                    put(isv, logged, col_of, t - 1, k)
                isv[_P_PREV_WORST] = logged[t - 1, j_worst]
            for c in cfg_pos:
                put(isv, logged, col_of, t, c)
            inputs(isv, ix, logged[t, j_cooldown], logged[t, j_worst], extra[t, 0], extra[t, 1])
            if boundary[t]:
                reset(isv, boot, r_idx, r_code, r_src)
            b = bsz[t]
            r_before = isv[R.RL_REGIME_TRANSITION_REMAINING_INDEX]
            prev_flag = isv[_O_FLAG]
            prev_timeout = isv[_O_TIMEOUT]
            popart(isv, ix, logged, col_of, exp, t, extra, b, resync)
            observer(isv, ix, logged, col_of, exp, t, flat[t], b, prev_flag, prev_timeout, resync)
            iqn_and_kelly(isv, ix, logged, col_of, exp, t, resync)
            warmup(isv, ix, logged, col_of, exp, t, r_before, resync)
            chain_ok[t] = chain
        chain_io[0] = chain

    return loop


def _fingerprint() -> str:
    # numba's cache key covers this file; the step functions it inlines live in reference.py
    h = hashlib.sha256()
    for module in (R,):
        h.update(inspect.getsource(module).encode())
    h.update(repr((R.SLOT_ORDER, OUTPUTS)).encode())
    return h.hexdigest()


_COMPILED: dict[str, object] = {}
_LOCK = threading.Lock()
_WARMING: list[threading.Thread] = []  # the one background warm-up of this process, once started


def compiled():
    """The numba-compiled loop (compiled, or loaded from numba's disk cache, on first call)."""
    loop = _COMPILED.get("loop")
    if loop is None:
        from regime_dash.engine.numba_adapter import njit_kernel

        with _LOCK:
            loop = _COMPILED.get("loop")
            if loop is None:
                raw = _make_loop(_fingerprint())
                loop = njit_kernel(raw, cache=True, nogil=True, error_model="numpy")
                _COMPILED["loop"] = loop
    return loop


def warm() -> None:
    """Compile the loop (or load it from numba's disk cache) by running it once on two empty rows."""
    n = len(R.SLOT_ORDER)
    boot = COMPACT.bootstrap_vector()[:n].copy()
    run(np.full((2, 1), np.nan, np.float32), np.full(n, -1, np.int32), np.zeros(0, np.int32),
        np.zeros(2, np.int64), np.ones(2, np.int64), np.full((2, len(EXTRA)), np.nan, np.float32),
        np.array([True, False]), np.zeros(2, bool), np.zeros(2, bool), boot, COMPACT.reset_plan(),
        compiled_loop=True)


def is_compiled() -> bool:
    """Whether this process already holds the compiled loop's machine code (not merely its dispatcher,
    whose first call would still compile: a caller that picks the loop by this never waits on numba)."""
    loop = _COMPILED.get("loop")
    return loop is not None and bool(loop.signatures)


def warm_in_background() -> threading.Thread | None:
    """:func:`warm` on a daemon thread, so a long-lived process (a follower) switches to the compiled
    loop once it is loaded and never waits for it; ``None`` where numba is absent or it is loaded."""
    with _LOCK:
        if not HAVE_NUMBA or is_compiled() or _WARMING:
            return None

        def load() -> None:
            try:
                warm()
            except Exception:  # noqa: BLE001 - the loop stays the Python one: slower, the same values
                pass

        t = threading.Thread(target=load, name="regime-dash-rederive-warm", daemon=True)
        _WARMING.append(t)
    t.start()
    return t


_PYTHON_LOOP = _make_loop("python")


def fresh_state(boot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(isv, chain)`` before a run's first row: the bootstrap buffer, carried state unknown."""
    return boot.astype(np.float32, copy=True), np.zeros(1, dtype=np.bool_)


def run(logged, col_of, cfg_pos, flat, bsz, extra, start, skip, boundary, boot, plan, first=0, state=None,
        compiled_loop=None, resync=True):
    """Expected value of every output in :data:`OUTPUTS` for rows ``first`` on, and whether the carried
    Welford state is known there.

    Parameters
    ----------
    logged
        float32 [T, n]: the diag's logged slot values, one column per logged slot.
    col_of
        int32 [len(SLOT_ORDER)]: the column of ``logged`` holding each compact slot, −1 where not logged.
    cfg_pos
        int32: compact positions of the config slots (read from row ``t`` itself).
    flat, bsz
        int64 [T]: flat count and batch size per row.
    extra
        float32 [T, len(EXTRA)]: inputs a diag may log (NaN where it does not).
    start, skip, boundary
        bool [T]: the row starts from the bootstrap; the row cannot be derived (the row before is not
        its step); reset_session_state ran before it.
    boot, plan
        The compact bootstrap buffer and reset plan ``(idx, code, src)`` (:data:`COMPACT`).
    first
        The first row to derive (row ``first − 1`` is the one before it, e.g. a chunk's overlap row).
    state
        ``(isv, chain)`` from the rows before (:func:`fresh_state` when ``None``); updated in place.
    compiled_loop
        Run compiled (True), as Python (False), or by size (None: Python below :data:`PYTHON_ROWS` rows
        until the compiled loop is loaded in this process).
    resync
        True: each row starts from the logged state (the re-derivation). False: a local replay that
        starts from the logged state at row ``first − 1`` and then runs free on the logged inputs and
        config, each output taken from the step functions (the logged value only where an input the
        diag does not log leaves it uncomputable).

    Returns
    -------
    (exp float32 [T, len(OUTPUTS)] (rows before ``first`` NaN), chain_ok bool [T], state)
    """
    t_rows = logged.shape[0]
    exp = np.full((t_rows, len(OUTPUTS)), np.nan, dtype=np.float32)
    chain_ok = np.zeros(t_rows, dtype=np.bool_)
    isv, chain = fresh_state(boot) if state is None else state
    if compiled_loop is None:  # compiled once it is loaded here, or when the frame is worth the compile
        compiled_loop = HAVE_NUMBA and (is_compiled() or t_rows - first >= PYTHON_ROWS)
    use = compiled_loop
    fn = compiled() if use else _PYTHON_LOOP
    r_idx, r_code, r_src = plan
    with np.errstate(all="ignore"):
        fn(logged, col_of, cfg_pos, flat, bsz, extra, start, skip, boundary, boot, r_idx, r_code, r_src,
           int(first), isv, chain, exp, chain_ok, bool(resync))
    return exp, chain_ok, (isv, chain)


__all__ = ["OUTPUTS", "OUTPUT_NAMES", "EXTRA", "COMPACT", "PYTHON_ROWS", "run", "fresh_state", "compiled", "is_compiled", "warm",
           "warm_in_background"]
