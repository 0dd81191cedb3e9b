"""SP14 ISV slots [383..396) and the SP13 input slot 373, as the commit note and registry give them.

Reset categories map onto the registry's policies: FoldReset with a sentinel is
``re-bootstrap`` (the bootstrap is the sentinel), "NOT reset" is ``keep``.
Slot 388 has consumers but no producer: the note's KNOWN LIMITATION, which
:func:`regime_dash.modules.orphan_slots` flags.
"""
from __future__ import annotations

from regime_dash.slots import Slot
from regime_dash.slots import slot as _s

KERNEL = "sp14_alpha_grad_gate"
Q_DIS_PRODUCER = "q_disagreement_update_kernel (B.3; stream input)"
AUX_PRODUCER = "sp13 AUX_DIR_ACC_SHORT_EMA producer (stream input)"
BACKWARD = "aux→Q backward path"


SLOTS: tuple[Slot, ...] = (
    _s("AUX_DIR_ACC_SHORT_EMA_INDEX", 373, "input", 0.0, "keep",
       "aux-head directional accuracy, fast EMA (SP13 slot; bootstrap not given here: model 0)",
       AUX_PRODUCER, (KERNEL,)),
    _s("Q_DISAGREEMENT_SHORT_EMA_INDEX", 383, "input", 0.5, "re-bootstrap",
       "K=4↔K=2 argmax mismatch fast EMA (0.5 = chance)", Q_DIS_PRODUCER, (KERNEL,)),
    _s("Q_DISAGREEMENT_LONG_EMA_INDEX", 384, "state", 0.5, "re-bootstrap",
       "K=4↔K=2 argmax mismatch slow EMA", Q_DIS_PRODUCER, ()),
    _s("K_AUX_ADAPTIVE_INDEX", 385, "signal", 0.0, "re-bootstrap",
       "Gate 1 sigmoid steepness K_BASE_AUX/(1 + var_aux/VARIANCE_REF_AUX), floor K_MIN",
       KERNEL, ("HEALTH_DIAG",)),
    _s("K_Q_ADAPTIVE_INDEX", 386, "signal", 0.0, "re-bootstrap",
       "Gate 2 sigmoid steepness K_BASE_Q/(1 + var_q/VARIANCE_REF_Q), floor K_MIN",
       KERNEL, ("HEALTH_DIAG",)),
    _s("BETA_RATE_LIMITER_ADAPTIVE_INDEX", 387, "signal", 0.0, "re-bootstrap",
       "rate-limiter β in [BETA_BASE, BETA_MAX], driven by the variance of α_raw",
       KERNEL, ("HEALTH_DIAG",)),
    _s("AUX_DIR_ACC_VARIANCE_EMA_INDEX", 388, "state", 0.0, "re-bootstrap",
       "Welford variance of aux_dir_acc for k_aux: KNOWN LIMITATION, no kernel writes it",
       "", (KERNEL,)),
    _s("Q_DISAGREEMENT_VARIANCE_EMA_INDEX", 389, "input", 0.0, "re-bootstrap",
       "Welford variance of q_disagreement for k_q", Q_DIS_PRODUCER, (KERNEL,)),
    _s("ALPHA_GRAD_RAW_VARIANCE_EMA_INDEX", 390, "state", 0.0, "re-bootstrap",
       "variance EMA of α_raw about the previous smoothed α (drives β)", KERNEL, (KERNEL,)),
    _s("GATE1_OPEN_STATE_INDEX", 391, "state", 0.0, "re-bootstrap",
       "Schmitt-trigger state of Gate 1 (0 closed, 1 open)", KERNEL, (KERNEL,)),
    _s("ALPHA_GRAD_RAW_INDEX", 392, "signal", 0.0, "keep",
       "α_raw = gate1 × gate2 × warmup (recomputed every step)", KERNEL, ("HEALTH_DIAG",)),
    _s("ALPHA_GRAD_SMOOTHED_INDEX", 393, "signal", 0.0, "re-bootstrap",
       "α_smoothed = β·prev + (1−β)·raw, the gate the backward path consumes", KERNEL,
       (KERNEL, BACKWARD)),
    _s("AUX_DIR_ACC_POST_OPEN_MIN_INDEX", 394, "state", 1.0, "re-bootstrap",
       "post-open aux_dir_acc minimum (circuit breaker; not part of B.4, not modelled)"),
    _s("GRADIENT_HACK_LOCKOUT_REMAINING_INDEX", 395, "state", 0.0, "keep",
       "lockout epochs remaining (anti-gradient-hacking; not part of B.4, not modelled)"),
)

IDX: dict[str, int] = {s.name: s.index for s in SLOTS}
AUX = IDX["AUX_DIR_ACC_SHORT_EMA_INDEX"]
Q_DIS = IDX["Q_DISAGREEMENT_SHORT_EMA_INDEX"]
K_AUX = IDX["K_AUX_ADAPTIVE_INDEX"]
K_Q = IDX["K_Q_ADAPTIVE_INDEX"]
BETA = IDX["BETA_RATE_LIMITER_ADAPTIVE_INDEX"]
VAR_AUX = IDX["AUX_DIR_ACC_VARIANCE_EMA_INDEX"]
VAR_Q = IDX["Q_DISAGREEMENT_VARIANCE_EMA_INDEX"]
VAR_ALPHA = IDX["ALPHA_GRAD_RAW_VARIANCE_EMA_INDEX"]
GATE1 = IDX["GATE1_OPEN_STATE_INDEX"]
RAW = IDX["ALPHA_GRAD_RAW_INDEX"]
SMOOTHED = IDX["ALPHA_GRAD_SMOOTHED_INDEX"]
#: The 7 outputs of step 8, in the note's order.
OUTPUTS = (K_AUX, K_Q, BETA, VAR_ALPHA, GATE1, RAW, SMOOTHED)


def defines() -> list[str]:
    """``-D`` options of ``kernels/sp14_alpha_grad_gate.cu``: one per slot."""
    return [f"-D{s.name}={s.index}" for s in SLOTS]
