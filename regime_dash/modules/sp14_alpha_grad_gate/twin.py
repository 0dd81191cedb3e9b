"""The NumPy float32 twin of ``kernels/sp14_alpha_grad_gate.cu``, statement by statement.

:func:`alpha_grad_gate_step` is the kernel's ``sp14_alpha_grad_gate_step``, written
as one function per value it computes (:func:`adaptive_k` to :func:`smoothed_alpha`,
the kernel's statements in its order), so the re-derivation (:mod:`.rederive`) runs
each formula on logged values through the same code; :func:`replay_twin` is
``sp14_alpha_grad_gate_replay`` (fold reset, stream inputs into the ISV, one step,
snapshot). Every operation is a float32 op in the kernel's order, so the two agree
bit for bit.
"""
from __future__ import annotations

import numpy as np

from regime_dash.modules.f32 import F32, ONE, ZERO, fmaxf, fminf, sigmoid_f32
from regime_dash.modules.sp14_alpha_grad_gate import slots as S

HALF = F32(0.5)
#: Snapshot columns of one step, in the kernel's order.
SNAPSHOT = ("aux_dir_acc", "q_disagreement", "var_aux", "var_q", "warmup_gate", "k_aux", "k_q", "beta",
            "var_alpha", "gate1_state", "gate1", "gate2", "alpha_raw", "alpha_smoothed")


def adaptive_k(k_base, var, var_ref, k_min):
    """Step 2: the adaptive sigmoid steepness ``max(K_MIN, k_base / (1 + var / var_ref))`` (k_aux and k_q)."""
    return fmaxf(k_min, k_base / (ONE + var / var_ref))


def schmitt_gate1(gate1_state, aux, target, hysteresis):
    """Step 3: the Schmitt trigger; a band, so aux hovering at the target does not chatter."""
    open_th = target + hysteresis
    close_th = target - hysteresis
    if gate1_state < HALF:
        if aux >= open_th:
            gate1_state = ONE
    else:
        if aux <= close_th:
            gate1_state = ZERO
    return gate1_state


def gate1_value(gate1_state, k_aux, aux, target):
    """Step 4, Gate 1: the state times the clipped sigmoid of aux competence above the target."""
    return gate1_state * sigmoid_f32(k_aux * (aux - target))


def gate2_value(k_q, q_dis):
    """Step 4, Gate 2: the clipped sigmoid of Q-aux disagreement below the analytic 0.5 baseline."""
    return sigmoid_f32(k_q * (HALF - q_dis))


def alpha_raw(gate1, gate2, warmup_gate):
    """Step 5: structurally bounded in [0, 1]: no clamp."""
    return gate1 * gate2 * F32(warmup_gate)


def alpha_variance(var_alpha, raw, alpha_prev, var_ema_alpha):
    """Step 6: the variance EMA of α_raw about the previous smoothed value."""
    dev = raw - alpha_prev
    return (ONE - var_ema_alpha) * var_alpha + var_ema_alpha * (dev * dev)


def adaptive_beta(var_alpha, beta_base, beta_max, var_ref_beta):
    """Step 6: β from the variance, in [BETA_BASE, BETA_MAX]."""
    return fminf(beta_max, fmaxf(beta_base, beta_base * (ONE + var_alpha / var_ref_beta)))


def smoothed_alpha(beta, alpha_prev, raw):
    """Step 7: rate-limited smoothing."""
    return beta * alpha_prev + (ONE - beta) * raw


def alpha_grad_gate_step(isv: np.ndarray, warmup_gate, params) -> tuple[np.float32, np.float32]:
    """One step of the 8-step pipeline on ``isv`` (float32, updated in place).

    Returns the Gate 1 and Gate 2 values (intermediates the diag shows).
    """
    (k_base_aux, k_base_q, var_ref_aux, var_ref_q, k_min, target, hysteresis, beta_base, beta_max,
     var_ref_beta, var_ema_alpha) = params
    # 1. read the driver signals and the persistent state
    aux = isv[S.AUX]
    q_dis = isv[S.Q_DIS]
    var_aux = isv[S.VAR_AUX]
    var_q = isv[S.VAR_Q]
    var_alpha = isv[S.VAR_ALPHA]
    gate1_state = isv[S.GATE1]
    alpha_prev = isv[S.SMOOTHED]
    # 2. adaptive steepness, floored at K_MIN
    k_aux = adaptive_k(k_base_aux, var_aux, var_ref_aux, k_min)
    k_q = adaptive_k(k_base_q, var_q, var_ref_q, k_min)
    # 3. Schmitt trigger
    gate1_state = schmitt_gate1(gate1_state, aux, target, hysteresis)
    # 4. the two sigmoids (arguments clipped inside sigmoid_f32)
    gate1 = gate1_value(gate1_state, k_aux, aux, target)
    gate2 = gate2_value(k_q, q_dis)
    # 5. α_raw
    raw = alpha_raw(gate1, gate2, warmup_gate)
    # 6. variance of α_raw about the previous smoothed value → adaptive β
    var_alpha = alpha_variance(var_alpha, raw, alpha_prev, var_ema_alpha)
    beta = adaptive_beta(var_alpha, beta_base, beta_max, var_ref_beta)
    # 7. rate-limited smoothing
    smoothed = smoothed_alpha(beta, alpha_prev, raw)
    # 8. the 7 outputs
    isv[S.K_AUX] = k_aux
    isv[S.K_Q] = k_q
    isv[S.BETA] = beta
    isv[S.VAR_ALPHA] = var_alpha
    isv[S.GATE1] = gate1_state
    isv[S.RAW] = raw
    isv[S.SMOOTHED] = smoothed
    return F32(gate1), F32(gate2)


def replay_twin(isv: np.ndarray, aux: np.ndarray, q_dis: np.ndarray, var_q: np.ndarray,
                var_aux: np.ndarray | None, warmup: np.ndarray, boundary: np.ndarray,
                reset_idx: np.ndarray, reset_val: np.ndarray, params) -> np.ndarray:
    """Run every step; return the float32 [T, len(SNAPSHOT)] snapshot (``isv`` ends updated)."""
    t_steps = len(aux)
    snap = np.zeros((t_steps, len(SNAPSHOT)), dtype=np.float32)
    for t in range(t_steps):
        if boundary[t]:
            isv[reset_idx] = reset_val
        isv[S.AUX] = aux[t]
        isv[S.Q_DIS] = q_dis[t]
        isv[S.VAR_Q] = var_q[t]
        if var_aux is not None:
            isv[S.VAR_AUX] = var_aux[t]
        g1, g2 = alpha_grad_gate_step(isv, warmup[t], params)
        snap[t] = (isv[S.AUX], isv[S.Q_DIS], isv[S.VAR_AUX], isv[S.VAR_Q], warmup[t], isv[S.K_AUX],
                   isv[S.K_Q], isv[S.BETA], isv[S.VAR_ALPHA], isv[S.GATE1], g1, g2, isv[S.RAW],
                   isv[S.SMOOTHED])
    return snap
