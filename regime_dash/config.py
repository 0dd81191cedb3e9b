"""RegimeConfig: the what-if knobs of the regime pipeline.

Every field is one ISV config slot (or a feature switch, itself a local config
slot), so a config *is* a set of slot values: :meth:`RegimeConfig.to_isv` gives
them by slot name and :meth:`RegimeConfig.from_isv` reads them back. Defaults are
the spec's bootstrap values; values the spec does not give (the v9 ramp lengths
and targets, τ_min, the Kelly cap) are models and say so below.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, fields
from typing import Any, Mapping

from regime_dash.errors import ConfigError

#: field name -> ISV slot name
FIELD_SLOTS: dict[str, str] = {
    "max_duration": "RL_REGIME_DEAD_ZONE_MAX_DURATION_INDEX",
    "eps_min": "RL_KELLY_EPS_RECOVERY_MIN_INDEX",
    "eps_max": "RL_KELLY_EPS_RECOVERY_MAX_INDEX",
    "n_recovery": "RL_KELLY_EPS_RECOVERY_N_RECOVERY_INDEX",
    "tau_boost_factor": "RL_IQN_TAU_TAIL_BOOST_FACTOR_INDEX",
    "tau_boost_window": "RL_IQN_TAU_TAIL_BOOST_N_WINDOW_INDEX",
    "tail_sigma_threshold": "RL_REGIME_TAIL_SIGMA_THRESHOLD_INDEX",
    "envelope_decay_alpha": "RL_POPART_MAX_DECAY_ALPHA_INDEX",
    "popart_alpha": "POPART_ALPHA_INDEX",
    "transition_steps": "RL_REGIME_TRANSITION_STEPS_CONFIG_INDEX",
    "transition_decay_steps": "RL_REGIME_TRANSITION_DECAY_STEPS_CONFIG_INDEX",
    "safety_frac_defensive": "RL_V9_KELLY_SAFETY_FRAC_DEFENSIVE_INDEX",
    "safety_frac_normal": "RL_V9_KELLY_SAFETY_FRAC_NORMAL_INDEX",
    "tau_min": "RL_IQN_ACTION_TAU_MIN_INDEX",
    "kelly_cap": "RL_KELLY_CAP_INDEX",
    "resurrection": "RL_REGIME_FEATURE_RESURRECTION_INDEX",
    "envelope": "RL_REGIME_FEATURE_ENVELOPE_INDEX",
    "tau_boost": "RL_REGIME_FEATURE_TAU_BOOST_INDEX",
}

SWITCHES = ("resurrection", "envelope", "tau_boost")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class RegimeConfig:
    """Config slots of the regime observer, Kelly resurrection, τ boost, PopArt and v9.

    Attributes
    ----------
    max_duration
        TIMEOUT_FLAG fires once DURATION, the count of *consecutive* dead-zone
        steps, exceeds it (spec: 1000). With resurrection (F2) on, ``kelly_f = ε``
        clears the flag on the next step, so DURATION cycles 0/1 and the timeout
        never fires however long the dead zone lasts: the field then has no
        effect (finding ``timeout_unreachable``; docs/SPEC_NOTES.md). Only a dead
        zone that persists without a break (F2 off, or no override) times out.
    eps_min, eps_max
        ε_recovery right after a tail event and once recovered (spec: 0.05, 0.50).
    n_recovery
        Tail-free steps for a full ε ramp (spec: 100).
    tau_boost_factor, tau_boost_window
        IQN τ_min multiplier and the window after a tail (spec: 1.5, 100).
    tail_sigma_threshold
        Tail event threshold in σ of Δworst (spec: 3.0).
    envelope_decay_alpha
        PopArt envelope decay α (spec: 0.01).
    popart_alpha
        PopArt EMA α (0.001, as the spec's Theorem 6 uses).
    transition_steps, transition_decay_steps
        v9 transition length and the ramp at its end. Model: 500 (the spec's
        "500→0→-1") and 250 (not given by the spec).
    safety_frac_defensive, safety_frac_normal
        v9 Kelly safety fraction targets. Model: 0.25 and 0.50 (the spec says
        ε_max 0.50 "matches Kelly safety_frac normal value").
    tau_min
        IQN τ_min before the boost. Model: 0.10.
    kelly_cap
        Upper clamp of the analytic Kelly fraction. Model: 1.0.
    resurrection, envelope, tau_boost
        Feature switches F2, F4, F5. Off reproduces the behaviour from before
        the spec: no kelly override, no σ floor (envelope not tracked), no τ boost.
    """

    max_duration: float = 1000.0
    eps_min: float = 0.05
    eps_max: float = 0.50
    n_recovery: float = 100.0
    tau_boost_factor: float = 1.5
    tau_boost_window: float = 100.0
    tail_sigma_threshold: float = 3.0
    envelope_decay_alpha: float = 0.01
    popart_alpha: float = 0.001
    transition_steps: float = 500.0
    transition_decay_steps: float = 250.0
    safety_frac_defensive: float = 0.25
    safety_frac_normal: float = 0.50
    tau_min: float = 0.10
    kelly_cap: float = 1.0
    resurrection: bool = True
    envelope: bool = True
    tau_boost: bool = True

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name in SWITCHES:
                if not isinstance(v, (bool, int)) or v not in (0, 1):
                    raise ConfigError(f"{f.name} must be a boolean, got {v!r}", field=f.name, value=v)
                object.__setattr__(self, f.name, bool(v))
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ConfigError(f"{f.name} must be a finite number, got {v!r}", field=f.name, value=v)
            object.__setattr__(self, f.name, float(v))
        self._check()

    def _check(self) -> None:
        def bad(name, why):
            raise ConfigError(f"{name}={getattr(self, name)!r} {why}", field=name, value=getattr(self, name))

        if self.eps_min > self.eps_max:
            raise ConfigError(f"eps_min={self.eps_min!r} is greater than eps_max={self.eps_max!r}",
                              field="eps_min", value=(self.eps_min, self.eps_max))
        for name in ("eps_min", "eps_max"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                bad(name, "is outside [0, 1]")
        for name in ("envelope_decay_alpha", "popart_alpha"):
            if not 0.0 < getattr(self, name) <= 1.0:
                bad(name, "is outside (0, 1]")
        for name in ("max_duration", "n_recovery", "tau_boost_window", "transition_steps",
                     "transition_decay_steps"):
            v = getattr(self, name)
            if v < 0 or v != int(v):
                bad(name, "must be a whole number of steps >= 0")
        if self.tail_sigma_threshold <= 0:
            bad("tail_sigma_threshold", "must be > 0")
        if self.tau_boost_factor < 1.0:
            bad("tau_boost_factor", "must be >= 1 (a boost never lowers τ_min)")
        for name in ("safety_frac_defensive", "safety_frac_normal", "tau_min"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                bad(name, "is outside [0, 1]")
        if self.kelly_cap <= 0:
            bad("kelly_cap", "must be > 0")

    # ---- conversions ---------------------------------------------------------
    def to_isv(self) -> dict[str, float]:
        """Slot values by slot name, including the bootstraps that follow a config.

        ``RL_KELLY_EPS_RECOVERY_LIVE`` bootstraps to ε_max ("= ε_max, no override
        needed"), the Kelly safety fraction to the normal v9 target and the
        effective τ_min to τ_min.
        """
        out = {slot: float(getattr(self, name)) for name, slot in FIELD_SLOTS.items()}
        out["RL_KELLY_EPS_RECOVERY_LIVE_INDEX"] = self.eps_max
        out["RL_KELLY_SAFETY_FRAC_INDEX"] = self.safety_frac_normal
        out["RL_IQN_TAU_MIN_EFFECTIVE_INDEX"] = self.tau_min
        return out

    @classmethod
    def from_isv(cls, values: Mapping[str, float]) -> "RegimeConfig":
        """The config held by ISV slot values given by slot name (missing → default)."""
        kw: dict[str, Any] = {}
        for name, slot in FIELD_SLOTS.items():
            if slot in values:
                v = float(values[slot])
                kw[name] = bool(v) if name in SWITCHES else v
        return cls(**kw)

    def replace(self, **changes: Any) -> "RegimeConfig":
        """A copy with ``changes``; unknown fields raise :class:`ConfigError`."""
        unknown = sorted(set(changes) - set(field_names()))
        if unknown:
            raise ConfigError(f"unknown config field(s) {unknown}; valid fields: {', '.join(field_names())}",
                              field=unknown[0], value=changes[unknown[0]])
        return dataclasses.replace(self, **changes)

    def with_settings(self, settings: list[str] | tuple[str, ...]) -> "RegimeConfig":
        """Apply ``FIELD=VALUE`` strings (the CLI's ``--set``)."""
        return self.replace(**dict(parse_setting(s) for s in settings))

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def field_names() -> list[str]:
    """The RegimeConfig field names, in declaration order."""
    return [f.name for f in fields(RegimeConfig)]


def parse_setting(text: str) -> tuple[str, Any]:
    """Parse one ``FIELD=VALUE``; the error names the field and lists the valid ones."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r} is not FIELD=VALUE; valid fields: {', '.join(field_names())}",
                          field=text, value=text)
    name, raw = (p.strip() for p in text.split("=", 1))
    if name not in field_names():
        raise ConfigError(f"unknown config field {name!r}; valid fields: {', '.join(field_names())}",
                          field=name, value=raw)
    if name in SWITCHES:
        low = raw.lower()
        if low in _TRUE:
            return name, True
        if low in _FALSE:
            return name, False
        raise ConfigError(f"{name}={raw!r} is not a boolean (true/false)", field=name, value=raw)
    try:
        return name, float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number", field=name, value=raw) from None
