"""SP14 re-derivation: each logged output of the α-grad gate recomputed from the logged row through the twin.

Row ``t`` logs the step's inputs (aux_dir_acc, q_disagreement, var_aux, var_q, the
warmup gate), its nine outputs and the kernel's constants (``sp14.config.*``).
Each output is recomputed by the twin function the replay runs for it
(:mod:`.twin`), from row ``t``'s logged values of what the kernel computed
before it in the step and row ``t−1``'s of the state it carries (the Schmitt
state, var(α_raw), α_smoothed; their bootstrap at a fold start, where the kernel
re-bootstraps them). Check ids ``sp14.rederive.<output>``.

Nothing of the kernel's is unlogged. The two host inputs are inputs here:
var_aux is the stream's (slot 388 has no producer) or the ``var_aux_producer``
what-if's EMA variance, and the warmup gate is the stream's or the warmup model's.
"""
from __future__ import annotations

import pandas as pd

from regime_dash.analysis.invariants import CheckOptions, CheckResult
from regime_dash.modules.rederive import Formula, Unit
from regime_dash.modules.rederive import coverage as _coverage
from regime_dash.modules.rederive import run_units
from regime_dash.modules.sp14_alpha_grad_gate import slots as S
from regime_dash.modules.sp14_alpha_grad_gate import twin
from regime_dash.modules.sp14_alpha_grad_gate.replay import COLUMNS as C
from regime_dash.modules.sp14_alpha_grad_gate.replay import CONFIG_COLUMNS, PREFIX, initial_isv

KERNEL = "sp14_alpha_grad_gate"
_F = Formula
UNITS: tuple[Unit, ...] = (
    Unit(_F("k_aux", C["k_aux"], KERNEL, "k_aux = max(K_MIN, K_BASE_AUX / (1 + var_aux / VARIANCE_REF_AUX))"),
         twin.adaptive_k, ("config:k_base_aux", C["var_aux"], "config:variance_ref_aux", "config:k_min")),
    Unit(_F("k_q", C["k_q"], KERNEL, "k_q = max(K_MIN, K_BASE_Q / (1 + var_q / VARIANCE_REF_Q))"),
         twin.adaptive_k, ("config:k_base_q", C["var_q"], "config:variance_ref_q", "config:k_min")),
    Unit(_F("gate1_state", C["gate1_state"], KERNEL,
            "Schmitt trigger: a closed gate (state(t−1) < 0.5; 0 after a fold reset) opens when aux ≥ target + h, "
            "an open one closes when aux ≤ target − h, else it keeps state(t−1)"),
         twin.schmitt_gate1, ("prev:" + C["gate1_state"], C["aux_dir_acc"], "config:target", "config:hysteresis")),
    Unit(_F("gate1", C["gate1"], KERNEL, "gate1 = state · sigmoid(clip(k_aux · (aux − target), ±30))", fma=True),
         twin.gate1_value, (C["gate1_state"], C["k_aux"], C["aux_dir_acc"], "config:target")),
    Unit(_F("gate2", C["gate2"], KERNEL, "gate2 = sigmoid(clip(k_q · (0.5 − q_disagreement), ±30))", fma=True),
         twin.gate2_value, (C["k_q"], C["q_disagreement"])),
    Unit(_F("alpha_raw", C["alpha_raw"], KERNEL, "α_raw = gate1 · gate2 · warmup_gate"),
         twin.alpha_raw, (C["gate1"], C["gate2"], C["warmup_gate"])),
    Unit(_F("var_alpha", C["var_alpha"], KERNEL,
            "var_α = (1 − a) · var_α(t−1) + a · (α_raw − α_smoothed(t−1))², a = var_ema_alpha", fma=True),
         twin.alpha_variance, ("prev:" + C["var_alpha"], C["alpha_raw"], "prev:" + C["alpha_smoothed"],
                               "config:var_ema_alpha")),
    Unit(_F("beta", C["beta"], KERNEL,
            "β = min(BETA_MAX, max(BETA_BASE, BETA_BASE · (1 + var_α / VARIANCE_REF_BETA)))"),
         twin.adaptive_beta, (C["var_alpha"], "config:beta_base", "config:beta_max", "config:variance_ref_beta")),
    Unit(_F("alpha_smoothed", C["alpha_smoothed"], KERNEL, "α_smoothed = β · α_smoothed(t−1) + (1 − β) · α_raw",
            fma=True),
         twin.smoothed_alpha, (C["beta"], "prev:" + C["alpha_smoothed"], C["alpha_raw"])),
)
FORMULAS = tuple(u.formula for u in UNITS)
CHECK_IDS = tuple(f.check_id(PREFIX) for f in FORMULAS)
_BOOT = initial_isv()
#: The value a carried column holds before a fold's first step (the kernel re-bootstraps these slots).
RESETS = {C["gate1_state"]: _BOOT[S.GATE1], C["var_alpha"]: _BOOT[S.VAR_ALPHA],
          C["alpha_smoothed"]: _BOOT[S.SMOOTHED]}

INPUTS = {C["aux_dir_acc"]: "stream input: aux_dir_acc fast EMA (slot 373)",
          C["q_disagreement"]: "stream input: Q disagreement fast EMA (slot 383)",
          C["var_q"]: "stream input: Q disagreement variance EMA (slot 389)",
          C["var_aux"]: "stream input (slot 388); with var_aux_producer, the what-if's EMA variance, whose EMA "
                        "mean is not logged",
          C["warmup_gate"]: "host input: the stream's warmup gate or the warmup model's",
          **{f"{PREFIX}config.{n}": "logged config" for n in CONFIG_COLUMNS}}
#: Range checks that also cover a re-derived column.
BOUNDED = {C["alpha_raw"]: ("sp14.alpha_raw_bounded",), C["k_aux"]: ("sp14.k_floor",), C["k_q"]: ("sp14.k_floor",),
           C["beta"]: ("sp14.beta_bounds",), C["gate1_state"]: ("sp14.schmitt_hysteresis",),
           C["alpha_smoothed"]: ("sp14.rate_limiter",), C["var_aux"]: ("sp14.var_aux_producer",)}


def checks(frame: pd.DataFrame, options: CheckOptions | None = None) -> list[CheckResult]:
    """The ``sp14.rederive.*`` results of ``frame``."""
    opt = options or CheckOptions()
    return run_units(frame, PREFIX, UNITS, RESETS, opt.rederive_ulps)


def coverage(frame: pd.DataFrame) -> list[dict]:
    """One entry per logged field of an SP14 frame: ``{"field", "status", "checks", "needs"}``."""
    return _coverage(frame, PREFIX, FORMULAS, INPUTS, {}, BOUNDED)
