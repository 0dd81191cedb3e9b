"""The reference engine: NumPy float32, per step, statement by statement like the .cu files.

This is the oracle every other engine is compared with, bit for bit. Each
``@jitable`` function below is the twin of one kernel (or of the scalar
``tid == 0`` part of one) and follows the spec's code line by line, in float32:
every constant is an ``np.float32`` so neither NumPy nor numba widens to
float64, and every ``a * b + c`` is a separate multiply and add, which is what
the kernels compile to with ``--fmad=false``.

The batch sums follow the GPU block reduction of ``kernels/common.cuh``: 256
threads stride over the batch, each warp reduces with shuffle-down, and the
first warp reduces the warp partials (:func:`block_reduce_stats`).

The fast CPU engine compiles these same functions with numba; nothing here is
restated elsewhere.

Slot indices are not constants: a user may load another layout. Each function
takes ``ix``, an int32 table holding the layout index of every registry slot,
and reads ``isv[ix[NAME]]`` where ``NAME`` is the slot's position in
:data:`SLOT_ORDER` (a module constant named exactly like the spec's constant).
"""
from __future__ import annotations

import numpy as np

from regime_dash.engine.jit import jitable
from regime_dash.engine.controllers import check_controllers
from regime_dash.core.slots import DEFAULT_LAYOUT, POLICY_CODES, SlotLayout

#: Registry slot names in a fixed order; ``ix[k]`` is the layout index of ``SLOT_ORDER[k]``.
SLOT_ORDER: tuple[str, ...] = tuple(sorted(DEFAULT_LAYOUT.names))
# One module constant per slot, named as in the spec, holding its position in
# ``ix``. Generated rather than typed out so the registry stays the only list.
globals().update({name: k for k, name in enumerate(SLOT_ORDER)})

BLOCK_DIM = 256
WARP = 32
N_WARPS = BLOCK_DIM // WARP

F0 = np.float32(0.0)
F1 = np.float32(1.0)
F10 = np.float32(10.0)
#: Model: the floor under PopArt's EMA variance, so σ never reaches 0 and the
#: normalizer never divides by 0. The spec does not give PopArt's update.
POPART_VAR_FLOOR = np.float32(1e-8)

CLEAR = POLICY_CODES["clear"]
REBOOTSTRAP = POLICY_CODES["re-bootstrap"]
ALIGN = POLICY_CODES["align"]


def index_table(layout: SlotLayout = DEFAULT_LAYOUT) -> np.ndarray:
    """``ix``: the int32 layout index of every name in :data:`SLOT_ORDER`."""
    return np.array([layout.index(n) for n in SLOT_ORDER], dtype=np.int32)


# ---- CUDA intrinsics with CUDA's NaN semantics ----------------------------------
@jitable
def fminf(a, b):
    if a != a:
        return b
    if b != b:
        return a
    return a if a < b else b


@jitable
def fmaxf(a, b):
    # fminf mirrored: negation is exact, so NaNs, signed zeros and ties come out as CUDA's fmaxf gives them
    return -fminf(-a, -b)


# ---- common.cuh: the one block reduction ----------------------------------------
# Plain NumPy, not @jitable: the fast CPU engine runs it on [T, b] at once (each
# step's row reduced exactly as a [b] vector would be), so numba never compiles it.
def _warp_reduce_sum(v):
    """Lane 0 after ``val += __shfl_down_sync(val, offset)``, offsets 16..1; lanes on the first axis of ``v``.

    After the step with offset ``o`` only lanes ``[0, o)`` still feed lane 0,
    and each of them reads lanes ``[o, 2o)``; so halving in place gives lane 0
    exactly the shuffle's value, with no copies. ``v`` is overwritten.
    """
    offset = WARP // 2
    while offset > 0:
        v[:offset] += v[offset:2 * offset]
        offset >>= 1
    return v[0]


def _warp_reduce_max(v):
    """As :func:`_warp_reduce_sum` for ``fmaxf``; ``v`` is overwritten."""
    offset = WARP // 2
    while offset > 0:
        v[:offset] = np.fmax(v[:offset], v[offset:2 * offset])
        offset >>= 1
    return v[0]


def block_reduce_stats(r):
    """(Σr, Σr², max|r|) over the last axis of ``r``, in rl_popart_normalize's reduction order.

    ``r`` is one step's float32 rewards [b], or [T, b] for T steps at once
    (then each of the three is a float32 [T]); every row is reduced as the
    256-thread block of ``common.cuh`` reduces it.
    """
    lead = r.shape[:-1]
    b = r.shape[-1]
    # this thread's local_sum, local_sum_sq, local_max_abs, per thread tid on the last axis
    local = np.zeros((3, *lead, BLOCK_DIM), dtype=np.float32)
    for start in range(0, b, BLOCK_DIM):  # thread tid takes i = tid, tid+256, ...
        n = min(BLOCK_DIM, b - start)
        x = r[..., start:start + n]
        local[0, ..., :n] += x
        local[1, ..., :n] += x * x
        local[2, ..., :n] = np.fmax(local[2, ..., :n], np.abs(x))
    # lanes first, [3, WARP, *lead, N_WARPS]: each shuffle step is then one contiguous slab
    warps = np.ascontiguousarray(np.moveaxis(local.reshape(3, *lead, N_WARPS, WARP), -1, 1))
    # first warp: lanes < n_warps hold the warp partials, the rest 0
    first = np.zeros((3, WARP, *lead), dtype=np.float32)
    first[0, :N_WARPS] = np.moveaxis(_warp_reduce_sum(warps[0]), -1, 0)
    first[1, :N_WARPS] = np.moveaxis(_warp_reduce_sum(warps[1]), -1, 0)
    first[2, :N_WARPS] = np.moveaxis(_warp_reduce_max(warps[2]), -1, 0)
    # [()] turns a 0-d result (one step) into a NumPy scalar and leaves [T] arrays as they are
    return (_warp_reduce_sum(first[0])[()], _warp_reduce_sum(first[1])[()],
            _warp_reduce_max(first[2])[()])


# ---- host/device writes of one step -------------------------------------------
@jitable
def write_step_inputs(isv, ix, cooldown, worst, kelly_edge, tau_action):
    """The trainer's own writes before the regime kernels (stream inputs of step t)."""
    isv[ix[RL_COOLDOWN_REMAINING_STEPS_INDEX]] = cooldown
    isv[ix[RL_SESSION_PNL_WORST_INDEX]] = worst
    isv[ix[RL_KELLY_EDGE_INPUT_INDEX]] = kelly_edge
    isv[ix[RL_IQN_TAU_ACTION_INPUT_INDEX]] = tau_action


@jitable
def reset_session_state(isv, boot, r_idx, r_code, r_src):
    """The spec's reset policy, driven by :meth:`SlotLayout.reset_plan`."""
    for k in range(r_idx.shape[0]):
        i = r_idx[k]
        code = r_code[k]
        if code == CLEAR:
            isv[i] = F0
        elif code == REBOOTSTRAP:
            isv[i] = boot[i]
        elif code == ALIGN:
            isv[i] = isv[r_src[k]]


# ---- rl_popart_normalize (the tid == 0 block) ------------------------------------
# The block is written as three pieces, called in the kernel's order by
# rl_popart_normalize_update: each is one logged output's formula, so a re-derivation
# (analysis.rederive) can run one of them from logged inputs alone.
@jitable
def popart_moments(isv, ix, v_sum, v_ssq, b_size):
    """PopArt's EMA mean and variance; returns the new variance. μ and σ before the update are kept
    for rl_popart_v_correct.

    Model (the spec does not give PopArt's update): μ ← (1−α)μ + α·batch_mean,
    var ← max((1−α)var + α·batch_var, 1e-8). The batch moments are the spec's lines 92-93.
    """
    b = np.float32(b_size)
    batch_mean = v_sum / b
    batch_var = v_ssq / b - batch_mean * batch_mean
    alpha = isv[ix[POPART_ALPHA_INDEX]]
    keep = F1 - alpha
    old_mean = isv[ix[POPART_MEAN_INDEX]]
    old_var = isv[ix[POPART_VAR_INDEX]]
    isv[ix[POPART_PREV_MEAN_INDEX]] = old_mean
    isv[ix[POPART_PREV_SIGMA_INDEX]] = isv[ix[POPART_SIGMA_INDEX]]
    new_mean = keep * old_mean + alpha * batch_mean
    new_var = fmaxf(keep * old_var + alpha * batch_var, POPART_VAR_FLOOR)
    isv[ix[POPART_MEAN_INDEX]] = new_mean
    isv[ix[POPART_VAR_INDEX]] = new_var
    return new_var


@jitable
def popart_envelope(isv, ix, v_max):
    """The F4 per-account max-magnitude envelope (fast up, slow down), when F4 is on."""
    if isv[ix[RL_REGIME_FEATURE_ENVELOPE_INDEX]] != F0:
        # ── NEW: per-account max-magnitude envelope (F4) ──
        max_r_this_step = v_max
        decay_alpha = isv[ix[RL_POPART_MAX_DECAY_ALPHA_INDEX]]
        max_r_ema = isv[ix[RL_POPART_MAX_ABS_REWARD_EMA_INDEX]]
        if max_r_this_step > max_r_ema:
            max_r_ema = max_r_this_step  # instant capture (fast-up)
        else:
            max_r_ema = (F1 - decay_alpha) * max_r_ema + decay_alpha * max_r_this_step  # slow decay
        isv[ix[RL_POPART_MAX_ABS_REWARD_EMA_INDEX]] = max_r_ema


@jitable
def popart_sigma(isv, ix, new_var):
    """σ = sqrt(var), floored by the envelope when F4 is on (σ_effective), written to POPART_SIGMA."""
    new_sigma = np.sqrt(new_var)
    if isv[ix[RL_REGIME_FEATURE_ENVELOPE_INDEX]] != F0:
        new_sigma = fmaxf(new_sigma, isv[ix[RL_POPART_MAX_ABS_REWARD_EMA_INDEX]])
    isv[ix[POPART_SIGMA_INDEX]] = new_sigma
    return new_sigma


@jitable
def rl_popart_normalize_update(isv, ix, v_sum, v_ssq, v_max, b_size):
    """PopArt statistics update and the F4 envelope floor; returns (new_mean, new_sigma)."""
    new_var = popart_moments(isv, ix, v_sum, v_ssq, b_size)
    popart_envelope(isv, ix, v_max)
    new_sigma = popart_sigma(isv, ix, new_var)
    return isv[ix[POPART_MEAN_INDEX]], new_sigma


@jitable
def rl_popart_normalize_apply(rewards, mean, sigma):
    """Pass 3: normalize the rewards in place."""
    inv_sigma = F1 / sigma
    rewards[:] = (rewards - mean) * inv_sigma


@jitable
def rl_popart_v_correct(v_pred, isv, ix):
    """v_pred ← (σ_old/σ_new)·v_pred + (μ_old − μ_new)/σ_new, in place."""
    s_old = isv[ix[POPART_PREV_SIGMA_INDEX]]
    s_new = isv[ix[POPART_SIGMA_INDEX]]
    m_old = isv[ix[POPART_PREV_MEAN_INDEX]]
    m_new = isv[ix[POPART_MEAN_INDEX]]
    scale = s_old / s_new
    shift = (m_old - m_new) / s_new
    v_pred[:] = scale * v_pred + shift


# ---- rl_regime_observer ---------------------------------------------------------
# The kernel's four phases, each split where one logged output is written, so each
# output's formula can be run from logged inputs (analysis.rederive); the kernel
# itself is rl_regime_observer below, the pieces called in the spec's order.
@jitable
def observer_dead_zone_flag(isv, ix, flat_count, b_size):
    """Phase 1: dead_zone = kelly_f(t−1) == 0 ∧ every account flat ∧ no cooldown; returns it."""
    kelly = isv[ix[RL_KELLY_FRACTION_INDEX]]  # prior-step value
    cooldown = isv[ix[RL_COOLDOWN_REMAINING_STEPS_INDEX]]
    dead_zone = 1 if (kelly == F0 and flat_count == b_size and cooldown == F0) else 0
    isv[ix[RL_REGIME_DEAD_ZONE_FLAG_INDEX]] = np.float32(dead_zone)
    return dead_zone


@jitable
def observer_duration(isv, ix, dead_zone, prev_flag, prev_timeout, flat_count, b_size):
    """Phase 1: DURATION counts dead-zone steps, 0 otherwise (and the model switch
    ``duration_across_cycles``: see :func:`rl_regime_observer`); returns it."""
    cooldown = isv[ix[RL_COOLDOWN_REMAINING_STEPS_INDEX]]
    duration = isv[ix[RL_REGIME_DEAD_ZONE_DURATION_INDEX]]
    if dead_zone:
        duration += F1
    elif (isv[ix[RL_REGIME_MODEL_DURATION_ACROSS_CYCLES_INDEX]] != F0 and prev_flag != F0
          and prev_timeout == F0 and isv[ix[RL_REGIME_FEATURE_RESURRECTION_INDEX]] != F0
          and flat_count == b_size and cooldown == F0):
        duration += F1  # model: only F2's ε of the step before took this step out of the dead zone
    else:
        duration = F0
    isv[ix[RL_REGIME_DEAD_ZONE_DURATION_INDEX]] = duration
    return duration


@jitable
def observer_timeout(isv, ix, duration):
    """Phase 1: the safety net, timeout = DURATION > MAX_DURATION."""
    max_dur = isv[ix[RL_REGIME_DEAD_ZONE_MAX_DURATION_INDEX]]
    timeout = 1 if duration > max_dur else 0
    isv[ix[RL_REGIME_DEAD_ZONE_TIMEOUT_FLAG_INDEX]] = np.float32(timeout)


@jitable
def observer_welford(isv, ix):
    """Phase 2: Welford variance of Δworst (skipped while both are 0); returns (dx, mean, count)."""
    worst_now = isv[ix[RL_SESSION_PNL_WORST_INDEX]]
    worst_prev = isv[ix[RL_REGIME_PREV_WORST_PNL_INDEX]]
    dx = worst_now - worst_prev
    isv[ix[RL_REGIME_PREV_WORST_PNL_INDEX]] = worst_now

    mean = isv[ix[RL_REGIME_SESSION_PNL_VAR_MEAN_INDEX]]
    m2 = isv[ix[RL_REGIME_SESSION_PNL_VAR_M2_INDEX]]
    count = isv[ix[RL_REGIME_SESSION_PNL_VAR_COUNT_INDEX]]

    if worst_now != F0 or worst_prev != F0:  # skip update on bootstrap (both zero)
        count += F1
        delta = dx - mean
        mean += delta / count
        delta2 = dx - mean
        m2 += delta * delta2
        isv[ix[RL_REGIME_SESSION_PNL_VAR_MEAN_INDEX]] = mean
        isv[ix[RL_REGIME_SESSION_PNL_VAR_M2_INDEX]] = m2
        isv[ix[RL_REGIME_SESSION_PNL_VAR_COUNT_INDEX]] = count
        variance = m2 / (count - F1) if count > F1 else F0
        isv[ix[RL_REGIME_SESSION_PNL_VARIANCE_EMA_INDEX]] = variance
    return dx, mean, count


@jitable
def observer_tail(isv, ix, dx, mean, count):
    """Phase 3: a tail event is |Δworst| > threshold·σ once count >= 10; recency 0 at one, +1 otherwise.
    Returns the recency."""
    var = isv[ix[RL_REGIME_SESSION_PNL_VARIANCE_EMA_INDEX]]
    sigma_thr = isv[ix[RL_REGIME_TAIL_SIGMA_THRESHOLD_INDEX]]
    sigma = np.sqrt(var)

    sufficient_count = count >= F10  # Welford bootstrap gate
    dev = dx - mean if isv[ix[RL_REGIME_MODEL_TAIL_ON_DEVIATION_INDEX]] != F0 else dx  # model switch
    is_tail = sufficient_count and sigma > F0 and abs(dev) > sigma_thr * sigma

    recency = isv[ix[RL_REGIME_TAIL_EVENT_RECENCY_INDEX]]
    if is_tail:
        recency = F0
    else:
        recency += F1
    isv[ix[RL_REGIME_TAIL_EVENT_RECENCY_INDEX]] = recency
    return recency


@jitable
def observer_recovery_factor(isv, ix, recency):
    """Phase 4: recovery_factor = min(1, recency / max(N_recovery, 1)); returns it."""
    n_recovery = isv[ix[RL_KELLY_EPS_RECOVERY_N_RECOVERY_INDEX]]
    recovery_factor = fminf(F1, recency / fmaxf(n_recovery, F1))
    isv[ix[RL_REGIME_RECOVERY_FACTOR_INDEX]] = recovery_factor
    return recovery_factor


@jitable
def observer_eps_live(isv, ix, recovery_factor):
    """Phase 4: ε_live = ε_min + (ε_max − ε_min)·recovery_factor (drift-free)."""
    eps_min = isv[ix[RL_KELLY_EPS_RECOVERY_MIN_INDEX]]
    eps_max = isv[ix[RL_KELLY_EPS_RECOVERY_MAX_INDEX]]
    eps_live = eps_min + (eps_max - eps_min) * recovery_factor
    isv[ix[RL_KELLY_EPS_RECOVERY_LIVE_INDEX]] = eps_live


@jitable
def rl_regime_observer(isv, ix, flat_count, b_size):
    """The spec's observer; the two model switches (off: the spec's code exactly) change only their own lines.

    ``RL_REGIME_MODEL_DURATION_ACROSS_CYCLES``: a flag-off step right after a
    dead-zone step whose kelly_f F2 overrode (previous flag 1, previous timeout
    0, F2 on, every account flat, no cooldown) counts on instead of resetting
    DURATION. ``RL_REGIME_MODEL_TAIL_ON_DEVIATION``: the tail test compares
    ``|dx − mean|`` (the Welford mean after this step's update) instead of ``|dx|``.
    """
    prev_flag = isv[ix[RL_REGIME_DEAD_ZONE_FLAG_INDEX]]  # the previous step's, before this step writes it
    prev_timeout = isv[ix[RL_REGIME_DEAD_ZONE_TIMEOUT_FLAG_INDEX]]
    # ─── Phase 1: dead-zone detection ───
    dead_zone = observer_dead_zone_flag(isv, ix, flat_count, b_size)
    duration = observer_duration(isv, ix, dead_zone, prev_flag, prev_timeout, flat_count, b_size)
    observer_timeout(isv, ix, duration)
    # ─── Phase 2: session_pnl_change Welford variance ───
    dx, mean, count = observer_welford(isv, ix)
    # ─── Phase 3: tail-event detection (3σ threshold) ───
    recency = observer_tail(isv, ix, dx, mean, count)
    # ─── Phase 4: recovery_factor and eps_recovery_live (drift-free) ───
    recovery_factor = observer_recovery_factor(isv, ix, recency)
    observer_eps_live(isv, ix, recovery_factor)


# ---- rl_iqn_action_tau_controller -------------------------------------------------
@jitable
def iqn_tau_boosted(isv, ix, boost_on):
    """The F5 block where ``boost_on``: τ_min·boost while recency < N_window; writes and returns τ_min_eff.

    ``boost_on`` is the F5 switch in the single kernel (:func:`iqn_tau_min_effective`),
    the F5 switch and the Layer-2 mirror in :func:`rl_fused_controllers`.
    """
    recency = isv[ix[RL_REGIME_TAIL_EVENT_RECENCY_INDEX]]
    tail_window = isv[ix[RL_IQN_TAU_TAIL_BOOST_N_WINDOW_INDEX]]
    boost = isv[ix[RL_IQN_TAU_TAIL_BOOST_FACTOR_INDEX]]

    tau_min_eff = isv[ix[RL_IQN_ACTION_TAU_MIN_INDEX]]
    if boost_on and recency < tail_window:
        tau_min_eff *= boost
    isv[ix[RL_IQN_TAU_MIN_EFFECTIVE_INDEX]] = tau_min_eff
    return tau_min_eff


@jitable
def iqn_tau_min_effective(isv, ix):
    """Tail-recency τ_min boost (F5): τ_min·boost while recency < N_window; returns τ_min_eff."""
    return iqn_tau_boosted(isv, ix, isv[ix[RL_REGIME_FEATURE_TAU_BOOST_INDEX]] != F0)


@jitable
def iqn_tau_clamp(isv, ix, tau_min_eff):
    """The final clamp τ = max(τ, τ_min_eff)."""
    isv[ix[RL_IQN_TAU_ACTION_INDEX]] = fmaxf(isv[ix[RL_IQN_TAU_ACTION_INPUT_INDEX]], tau_min_eff)


@jitable
def rl_iqn_action_tau_controller(isv, ix):
    """Tail-recency τ_min boost (F5), then the final clamp τ = max(τ, τ_min_eff)."""
    tau_min_eff = iqn_tau_min_effective(isv, ix)
    iqn_tau_clamp(isv, ix, tau_min_eff)


# ---- rl_kelly_fraction_controller ---------------------------------------------------
@jitable
def kelly_analytic(isv, ix):
    """Analytic Kelly (a model): f = clamp(safety_frac · edge, 0, cap), with edge = p − (1−p)·L/W the
    full-Kelly edge from the stream. Written to both the analytic and the fraction slot."""
    edge = isv[ix[RL_KELLY_EDGE_INPUT_INDEX]]
    safety = isv[ix[RL_KELLY_SAFETY_FRAC_INDEX]]
    cap = isv[ix[RL_KELLY_CAP_INDEX]]
    f = fminf(fmaxf(safety * edge, F0), cap)
    isv[ix[RL_KELLY_ANALYTIC_INDEX]] = f
    isv[ix[RL_KELLY_FRACTION_INDEX]] = f


@jitable
def kelly_resurrection(isv, ix):
    """The spec's resurrection block (Theorem 1): kelly_f ← ε_live in the dead zone before a timeout."""
    dead_zone = int(isv[ix[RL_REGIME_DEAD_ZONE_FLAG_INDEX]])
    timeout = int(isv[ix[RL_REGIME_DEAD_ZONE_TIMEOUT_FLAG_INDEX]])
    if isv[ix[RL_REGIME_FEATURE_RESURRECTION_INDEX]] != F0 and dead_zone and not timeout:
        isv[ix[RL_KELLY_FRACTION_INDEX]] = isv[ix[RL_KELLY_EPS_RECOVERY_LIVE_INDEX]]


@jitable
def rl_kelly_fraction_controller(isv, ix):
    """Analytic Kelly (a model), then the spec's resurrection block appended at the end."""
    kelly_analytic(isv, ix)
    kelly_resurrection(isv, ix)


# ---- rl_fused_controllers ------------------------------------------------------------
@jitable
def fused_tau_boost_on(isv, ix):
    """Whether the fused kernel's Layer-2 branch runs the F5 block: F5 on and its mirror on."""
    return isv[ix[RL_REGIME_FEATURE_TAU_BOOST_INDEX]] != F0 and isv[ix[RL_FUSED_MIRROR_TAU_BOOST_INDEX]] != F0


@jitable
def rl_fused_controllers(isv, ix):
    """The risk-stack controllers in one launch (launch order step 8), "mirrors single-controller behavior".

    The spec's order is CMDP → IQN τ → Inventory β → Kelly; regime-dash models
    the IQN τ (Layer 2) and Kelly (Layer 4) branches only, each made of the
    single kernels' own functions (the ones the re-derivation runs), so with both
    mirror switches on (the spec) this is the single path bit for bit. A mirror
    off leaves its block out of the fused copy, as in a trainer whose fused
    kernel was never updated: Layer 2 without the F5 boost, Layer 4 without the
    F2 resurrection.
    """
    # Layer-1 branch, CMDP: not modelled
    # Layer-2 branch, IQN τ (F5 mirrored)
    iqn_tau_clamp(isv, ix, iqn_tau_boosted(isv, ix, fused_tau_boost_on(isv, ix)))
    # Layer-3 branch, Inventory β: not modelled
    # Layer-4 branch, Kelly (F2 mirrored): the resurrection block reads the F2 switch itself
    kelly_analytic(isv, ix)
    if isv[ix[RL_FUSED_MIRROR_RESURRECTION_INDEX]] != F0:
        kelly_resurrection(isv, ix)


# ---- eval_warmup_decay (v9, a model) ---------------------------------------------------
@jitable
def v9_countdown(isv, ix, r):
    """The v9 remaining: N−1 … 0 then −1 (idle), from ``r`` before this step; returns the new value."""
    if r > F0:
        r = r - F1
        isv[ix[RL_REGIME_TRANSITION_REMAINING_INDEX]] = r
    elif r == F0:
        r = -F1
        isv[ix[RL_REGIME_TRANSITION_REMAINING_INDEX]] = r
    return r


@jitable
def v9_safety_frac(isv, ix, r_before, r):
    """The v9 Kelly safety fraction: linear from defensive to normal over the last ``decay_steps``
    steps of the transition (``r`` the remaining after this step's countdown), normal once it ends."""
    if r_before > F0:
        decay = isv[ix[RL_REGIME_TRANSITION_DECAY_STEPS_CONFIG_INDEX]]
        w = fminf(F1, r / fmaxf(decay, F1))
        normal = isv[ix[RL_V9_KELLY_SAFETY_FRAC_NORMAL_INDEX]]
        defensive = isv[ix[RL_V9_KELLY_SAFETY_FRAC_DEFENSIVE_INDEX]]
        isv[ix[RL_KELLY_SAFETY_FRAC_INDEX]] = normal + (defensive - normal) * w
    elif r_before == F0:
        isv[ix[RL_KELLY_SAFETY_FRAC_INDEX]] = isv[ix[RL_V9_KELLY_SAFETY_FRAC_NORMAL_INDEX]]


@jitable
def eval_warmup_decay(isv, ix):
    """v9 transition ramp (a model): the countdown, then the safety fraction it sets."""
    r_before = isv[ix[RL_REGIME_TRANSITION_REMAINING_INDEX]]
    r = v9_countdown(isv, ix, r_before)
    v9_safety_frac(isv, ix, r_before, r)


# ---- one step's scalar kernels, in the spec's launch order ----------------------------
@jitable
def scalar_step(isv, ix, boot, r_idx, r_code, r_src, snap_idx, snap_row,
                boundary, cooldown, worst, kelly_edge, tau_action,
                v_sum, v_ssq, v_max, flat_count, b_size, fused=False):
    """Everything of one step except the [b]-wide passes; returns (popart mean, σ).

    Order: stream inputs, reset_session_state (at a boundary), rl_popart_normalize
    (its tid==0 block), rl_regime_flat_count's result → rl_regime_observer,
    the risk-stack controllers (``fused`` False: rl_iqn_action_tau_controller then
    rl_kelly_fraction_controller; True: rl_fused_controllers), eval_warmup_decay,
    then the diag snapshot into ``snap_row``.
    """
    write_step_inputs(isv, ix, cooldown, worst, kelly_edge, tau_action)
    if boundary:
        reset_session_state(isv, boot, r_idx, r_code, r_src)
    mean, sigma = rl_popart_normalize_update(isv, ix, v_sum, v_ssq, v_max, b_size)
    rl_regime_observer(isv, ix, flat_count, b_size)
    if fused:
        rl_fused_controllers(isv, ix)
    else:
        rl_iqn_action_tau_controller(isv, ix)
        rl_kelly_fraction_controller(isv, ix)
    eval_warmup_decay(isv, ix)
    for j in range(snap_idx.shape[0]):
        snap_row[j] = isv[snap_idx[j]]
    return mean, sigma


def run(stream, isv0: np.ndarray, boot: np.ndarray, layout: SlotLayout, snap_idx: np.ndarray,
        controllers: str = "single"):
    """Replay ``stream`` step by step from the ISV buffer ``isv0``.

    ``controllers`` is the risk-stack path: ``"single"`` (the single controller
    kernels) or ``"fused"`` (:func:`rl_fused_controllers`).

    Returns
    -------
    snap : float32 [T, len(snap_idx)]
    flat : int32 [T]
    rewards_normalized : float32 [T, b]
    v_pred_corrected : float32 [T, b] or None
    isv : the final ISV buffer
    """
    fused = check_controllers(controllers) == "fused"
    ix = index_table(layout)
    r_idx, r_code, r_src = layout.reset_plan()
    isv = isv0.copy()
    t_steps, b = stream.rewards.shape
    snap = np.empty((t_steps, snap_idx.shape[0]), dtype=np.float32)
    flat = np.empty(t_steps, dtype=np.int32)
    normalized = stream.rewards.copy()
    v_pred = None if stream.v_pred is None else stream.v_pred.copy()
    for t in range(t_steps):
        r = normalized[t]
        v_sum, v_ssq, v_max = block_reduce_stats(r)
        flat[t] = np.count_nonzero(stream.lots[t] == 0)  # rl_regime_flat_count
        mean, sigma = scalar_step(
            isv, ix, boot, r_idx, r_code, r_src, snap_idx, snap[t], bool(stream.boundary[t]),
            stream.cooldown[t], stream.session_pnl_worst[t], stream.kelly_analytic[t],
            stream.tau_action[t], v_sum, v_ssq, v_max, int(flat[t]), b, fused)
        rl_popart_normalize_apply(r, mean, sigma)
        if v_pred is not None:
            rl_popart_v_correct(v_pred[t], isv, ix)
    return snap, flat, normalized, v_pred, isv
