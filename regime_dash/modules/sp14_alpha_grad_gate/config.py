"""Sp14Config: the constants of the α-grad gate.

The commit note gives K_MIN = 1, BETA_BASE = 0.5, BETA_MAX = 0.95, the
hysteresis ±0.03 and (through its test) the Gate 1 target 0.55. The rest is a
model, flagged ``model=True`` on the field: the base steepnesses and variance
references, the β variance reference, the variance-EMA rate and the warmup
length (the note's warmup gate is host-supplied and unspecified).
"""
from __future__ import annotations

from dataclasses import dataclass

from regime_dash.errors import ConfigError
from regime_dash.modules.base import ModuleConfig, param


@dataclass(frozen=True)
class Sp14Config(ModuleConfig):
    """Constants of the SP14 α-grad gate (see the field docs; ``model`` marks modelled ones)."""

    target: float = param(0.55, 0.0, 1.0, "Gate 1 target aux_dir_acc (the note's test: open 0.58, close 0.52)",
                          step=0.005)
    hysteresis: float = param(0.03, 0.0, 0.25, "Schmitt half-band: open at target+h, close at target−h",
                              step=0.005)
    k_base_aux: float = param(20.0, 1.0, 200.0, "K_BASE_AUX: Gate 1 sigmoid steepness at zero variance",
                              model=True)
    k_base_q: float = param(10.0, 1.0, 200.0, "K_BASE_Q: Gate 2 sigmoid steepness at zero variance", model=True)
    variance_ref_aux: float = param(0.01, 1e-6, 10.0, "VARIANCE_REF_AUX: var_aux that halves k_aux",
                                    model=True)
    variance_ref_q: float = param(0.01, 1e-6, 10.0, "VARIANCE_REF_Q: var_q that halves k_q", model=True)
    k_min: float = param(1.0, 0.0, 50.0, "K_MIN: floor of k_aux and k_q")
    beta_base: float = param(0.5, 0.0, 1.0, "BETA_BASE: floor of the rate-limiter β", step=0.01)
    beta_max: float = param(0.95, 0.0, 1.0, "BETA_MAX: ceiling of β", step=0.01)
    variance_ref_beta: float = param(0.01, 1e-6, 10.0,
                                     "var(α_raw) at which β = 2·BETA_BASE (β = BETA_BASE·(1 + var/ref))",
                                     model=True)
    var_ema_alpha: float = param(0.05, 1e-4, 1.0, "EMA rate of the α_raw variance", model=True)
    warmup_steps: int = param(100, 0, 100_000, "host warmup gate: min(1, (steps since fold start + 1)/N); 0 = off",
                              model=True, integer=True, step=10)
    var_aux_producer: bool = param(False, doc="what-if: run the missing slot-388 producer (an EMA variance "
                                   "of aux_dir_acc at var_ema_alpha) that the note's fix-up task would add",
                                   model=True)

    def _check(self) -> None:
        if self.beta_base > self.beta_max:
            raise ConfigError(f"beta_base={self.beta_base!r} is greater than beta_max={self.beta_max!r}",
                              field="beta_base", value=(self.beta_base, self.beta_max))

    def params(self):
        """The kernel's float arguments, in the kernel's order (:data:`PARAM_NAMES`)."""
        import numpy as np

        return tuple(np.float32(getattr(self, name)) for name in PARAM_NAMES)


#: The kernel's float arguments, in the kernel's order.
PARAM_NAMES = ("k_base_aux", "k_base_q", "variance_ref_aux", "variance_ref_q", "k_min", "target", "hysteresis",
               "beta_base", "beta_max", "variance_ref_beta", "var_ema_alpha")
