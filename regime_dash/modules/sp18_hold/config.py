"""Sp18Config: the D-leg reward and cap-producer constants and the B-leg TD(λ)/bootstrap knobs.

Given by the design: the safety factor 1.5, NEG = −2 × POS, the sentinels
(+5, −10), the position-side caps [−10, +5], td_lambda 0.9, γ ≈ 0.95, the
settled-cap gate [0.01, 5.0] (used as the POS bounds) and the slow α = 0.01
(used as the Wiener-α floor). Models (``model=True``): the α ceiling, the
producer cadence, the vol floor, the trace length and the synthetic Q nets.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from regime_dash.errors import ConfigError
from regime_dash.modules.base import ModuleConfig, param


@dataclass(frozen=True)
class Sp18Config(ModuleConfig):
    """SP18 D-leg and B-leg constants (``model`` marks the modelled ones)."""

    shaping_scale: float = param(1.0, 0.0, 10.0, "shaping_scale multiplying the Hold opportunity cost")
    safety_factor: float = param(1.5, 0.1, 10.0, "POS = p99|step_ret| × safety_factor")
    neg_ratio: float = param(2.0, 0.0, 10.0, "NEG = −neg_ratio × POS (DD5: mirrored, 2)")
    pos_min: float = param(0.01, 0.0, 5.0, "lower bound of POS (the design's settled range [0.01, 5])")
    pos_max: float = param(5.0, 0.01, 100.0, "upper bound of POS")
    alpha_min: float = param(0.01, 1e-4, 1.0, "Wiener-α floor (the design's slow α = 0.01)")
    alpha_max: float = param(0.5, 1e-4, 1.0, "Wiener-α ceiling", model=True)
    cap_update_every: int = param(100, 1, 100_000, "bars between cap-producer launches (an epoch's worth)",
                                  model=True, integer=True, step=10)
    position_pos_cap: float = param(5.0, 0.0, 100.0, "REWARD_POS_CAP of Long/Short trade rewards")
    position_neg_cap: float = param(-10.0, -100.0, 0.0, "REWARD_NEG_CAP of Long/Short trade rewards")
    vol_floor: float = param(1e-8, 1e-12, 1.0, "floor under vol_proxy in the normalisation", model=True)
    gamma: float = param(0.95, 0.0, 1.0, "discount γ", step=0.005)
    td_lambda: float = param(0.9, 0.0, 1.0, "λ of the TD(λ) returns (config.rs: 0.9)", step=0.01)
    max_trace: int = param(10, 1, 1000, "max_trace_length of a λ-return", model=True, integer=True)
    q_scale: float = param(1.0, 0.0, 100.0, "scale of the synthetic (untrained, HD0-like) Q nets", model=True)
    target_lag: float = param(0.1, 0.0, 5.0, "target-net weight offset from the online net (Polyak lag)",
                              model=True)
    net_seed: int = param(0, 0, 2**31 - 1, "seed of the synthetic Q nets", model=True, integer=True)

    def _check(self) -> None:
        if self.pos_min > self.pos_max:
            raise ConfigError(f"pos_min={self.pos_min!r} is greater than pos_max={self.pos_max!r}",
                              field="pos_min", value=(self.pos_min, self.pos_max))
        if self.alpha_min > self.alpha_max:
            raise ConfigError(f"alpha_min={self.alpha_min!r} is greater than alpha_max={self.alpha_max!r}",
                              field="alpha_min", value=(self.alpha_min, self.alpha_max))

    def cap_params(self) -> tuple:
        """The cap kernel's float arguments after ``n``: safety, neg_ratio, pos_min, pos_max, α_min, α_max."""
        return tuple(np.float32(v) for v in (self.safety_factor, self.neg_ratio, self.pos_min, self.pos_max,
                                             self.alpha_min, self.alpha_max))
