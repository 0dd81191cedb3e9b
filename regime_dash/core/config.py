"""RegimeConfig: the what-if knobs of the regime pipeline.

Every field is one ISV config slot (or a feature switch, itself a local config
slot), so a config *is* a set of slot values: :meth:`RegimeConfig.to_isv` gives
them by slot name and :meth:`RegimeConfig.from_isv` reads them back. Defaults are
the spec's bootstrap values; values the spec does not give (the v9 ramp lengths
and targets, τ_min, the Kelly cap) are models and say so below.

The fields are declared with :func:`regime_dash.core.params.param`, as every module
config is: the slider domain, step, doc and model flag of each come from that
one declaration (the Replay and Controllers pages and the sensitivity sweep
read it through :meth:`RegimeConfig.field_specs`). The domains are ours
(the spec gives defaults, not ranges), and lie inside the checks of
:class:`RegimeConfig`, which accept more (a whole number of steps has no upper
bound): the checks, not the slider ends, say what a config may hold.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Mapping, Sequence

import numpy as np

from regime_dash.core import params
from regime_dash.errors import ConfigError
from regime_dash.core.params import ConfigFields, param

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
    "tail_on_deviation": "RL_REGIME_MODEL_TAIL_ON_DEVIATION_INDEX",
    "duration_across_cycles": "RL_REGIME_MODEL_DURATION_ACROSS_CYCLES_INDEX",
    "fused_mirror_tau_boost": "RL_FUSED_MIRROR_TAU_BOOST_INDEX",
    "fused_mirror_resurrection": "RL_FUSED_MIRROR_RESURRECTION_INDEX",
}

#: The spec's feature switches F2, F4, F5, the model switches (off = the spec's code), then the
#: fused path's mirror switches (on = the spec's mirror).
SWITCHES = ("resurrection", "envelope", "tau_boost", "tail_on_deviation", "duration_across_cycles",
            "fused_mirror_tau_boost", "fused_mirror_resurrection")
#: The model switches: what-if readings of the spec's prose that its code does not do (docs/SPEC_NOTES.md).
MODEL_SWITCHES = ("tail_on_deviation", "duration_across_cycles")
#: The mirror switches of ``rl_fused_controllers``: read by the fused path only
#: (``replay(..., controllers="fused")``); off is a fused copy that never got the block (docs/SPEC_NOTES.md).
MIRROR_SWITCHES = ("fused_mirror_tau_boost", "fused_mirror_resurrection")


@dataclass(frozen=True)
class RegimeConfig(ConfigFields):
    """Config slots of the regime observer, Kelly resurrection, τ boost, PopArt and v9.

    Attributes
    ----------
    max_duration
        TIMEOUT_FLAG fires once DURATION, the count of *consecutive* dead-zone
        steps, exceeds it (spec: 1000). With resurrection (F2) on, ``kelly_f = ε``
        clears the flag on the next step, so DURATION cycles 0/1 and the timeout
        never fires however long the dead zone lasts: the field then has no
        effect (finding ``timeout_unreachable``; docs/SPEC_NOTES.md). Only a dead
        zone that persists without a break (F2 off, or no override) times out,
        unless the model switch ``duration_across_cycles`` is on.
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
    tail_on_deviation
        Model switch, off by default (off is the spec's code, bit for bit). On,
        the tail test of rl_regime_observer's Phase 3 compares
        ``|Δworst − mean|`` with ``tail_sigma_threshold · σ`` instead of the
        spec's ``|Δworst|`` (``fabsf(dx) > sigma_thr * sigma``); ``mean`` and
        ``σ`` are the Welford mean and standard deviation of Δworst after this
        step's update, the σ the spec's test already uses. A steady drift
        (Δworst about constant) then no longer reads as a tail on every step
        (finding ``tail_on_drift``).
    duration_across_cycles
        Model switch, off by default (off is the spec's code, bit for bit). On,
        DURATION is not reset on a step whose dead-zone flag is off only
        because F2 overrode kelly_f on the step before: the previous step's
        flag was 1 and its timeout flag 0, F2 is on, every account is still
        flat and there is no cooldown (so kelly_f(t−1) = ε_live is the one
        reason the flag is off). On such a step DURATION counts on
        (``duration + 1``) while the flag stays 0, so DURATION is the length in
        steps of the whole cycling dead zone, and TIMEOUT_FLAG fires after
        ``max_duration`` steps of it, as Theorem 3 and Risk 3 expect. Any other
        flag-off step resets DURATION to 0, as in the spec.
    """

    max_duration: float = param(1000.0, 0, 10_000, "consecutive dead-zone steps before the timeout flag "
                                "(unreachable while F2 cycles the dead zone, unless duration_across_cycles is on)",
                                integer=True, step=10)
    eps_min: float = param(0.05, 0.0, 1.0, "ε_recovery right after a tail event", step=0.01)
    eps_max: float = param(0.50, 0.0, 1.0, "ε_recovery once recovered", step=0.01)
    n_recovery: float = param(100.0, 0, 5_000, "tail-free steps for a full ε ramp", integer=True, step=10)
    tau_boost_factor: float = param(1.5, 1.0, 5.0, "IQN τ_min multiplier after a tail", step=0.05)
    tau_boost_window: float = param(100.0, 0, 5_000, "steps the τ boost lasts", integer=True, step=10)
    tail_sigma_threshold: float = param(3.0, 0.1, 10.0, "tail event threshold in σ of Δworst", step=0.1)
    envelope_decay_alpha: float = param(0.01, 0.0001, 1.0, "PopArt envelope decay α", step=0.0001)
    popart_alpha: float = param(0.001, 0.00001, 1.0, "PopArt EMA α", step=0.00001)
    transition_steps: float = param(500.0, 0, 10_000, "v9 transition length", model=True, integer=True,
                                    step=10)
    transition_decay_steps: float = param(250.0, 0, 10_000, "v9 ramp length at the transition's end",
                                          model=True, integer=True, step=10)
    safety_frac_defensive: float = param(0.25, 0.0, 1.0, "v9 Kelly safety fraction after a boundary",
                                         model=True, step=0.01)
    safety_frac_normal: float = param(0.50, 0.0, 1.0, "v9 Kelly safety fraction after the transition",
                                      model=True, step=0.01)
    tau_min: float = param(0.10, 0.0, 1.0, "IQN τ_min before the boost", model=True, step=0.01)
    kelly_cap: float = param(1.0, 0.01, 5.0, "upper clamp of the analytic Kelly fraction", model=True,
                             step=0.01)
    resurrection: bool = param(True, doc="F2: Kelly resurrection")
    envelope: bool = param(True, doc="F4: PopArt max-|r| envelope floor")
    tau_boost: bool = param(True, doc="F5: IQN τ tail boost")
    tail_on_deviation: bool = param(False, doc="Model: tail test on |Δworst − mean| (not the spec's |Δworst|)",
                                    model=True)
    duration_across_cycles: bool = param(False, doc="Model: DURATION counts across F2's resurrection cycles",
                                         model=True)
    fused_mirror_tau_boost: bool = param(True, doc="Fused path: the F5 τ boost mirrored in rl_fused_controllers' "
                                         "Layer-2 branch (off: a fused copy never updated)")
    fused_mirror_resurrection: bool = param(True, doc="Fused path: the F2 resurrection mirrored in "
                                            "rl_fused_controllers' Layer-4 branch (off: a fused copy never updated)")

    def __post_init__(self):
        for f in fields(self):
            object.__setattr__(self, f.name, coerce_value(f.name, getattr(self, f.name)))
        for names, ok, why in _RULES:
            values = [getattr(self, n) for n in names]
            if not ok(*values):
                raise _rule_error(names, values, why)

    @classmethod
    def first_invalid(cls, axes: Mapping[str, Sequence[Any]],
                      base: "RegimeConfig") -> tuple[tuple[int, ...], ConfigError] | None:
        """The first combination of the product of ``axes`` that is not a valid config, without expanding it.

        ``axes`` maps fields to coerced values (:func:`coerce_value`); the product
        runs first axis slowest (as :func:`itertools.product`), ``base`` giving the
        other fields. Each rule reads one or two fields, so it is evaluated on the
        product of its own fields' values only: the cost is the axes' lengths, not
        their product's. The answer is what building the configs one by one would
        find: the first failing combination, and the error its constructor raises
        there (the first rule, in the constructor's order, that it breaks).

        Returns
        -------
        None if every combination is valid, else ``(index of each axis, ConfigError)``.
        """
        names = list(axes)
        lens = [len(axes[n]) for n in names]
        strides = [int(np.prod(lens[k + 1:], dtype=np.int64)) for k in range(len(names))]
        best: tuple[int, int, tuple[int, ...], ConfigError] | None = None
        for order, (fields_, ok, why) in enumerate(_RULES):
            if not any(n in axes for n in fields_):
                continue
            own = [np.asarray(axes[n] if n in axes else [getattr(base, n)]) for n in fields_]
            mesh = np.meshgrid(*own, indexing="ij")
            bad = ~np.asarray(ok(*mesh), dtype=bool)
            if not bad.any():
                continue
            hits = np.argwhere(bad)  # [k, len(fields_)]: each rule field's index into its values
            flat = sum(hits[:, j] * strides[names.index(n)] for j, n in enumerate(fields_) if n in axes)
            i = int(np.argmin(flat))
            if best is None or (int(flat[i]), order) < best[:2]:
                at = [0] * len(names)
                for j, n in enumerate(fields_):
                    if n in axes:
                        at[names.index(n)] = int(hits[i, j])
                values = [own[j][hits[i, j]].item() for j in range(len(fields_))]
                best = (int(flat[i]), order, tuple(at), _rule_error(fields_, values, why))
        return None if best is None else (best[2], best[3])

    # ---- conversions ---------------------------------------------------------
    def to_isv(self) -> dict[str, float]:
        """Slot values by slot name, including the bootstraps that follow a config.

        ``RL_KELLY_EPS_RECOVERY_LIVE`` bootstraps to ε_max ("= ε_max, no override
        needed"), the Kelly safety fraction to the normal v9 target and the
        effective τ_min to τ_min.
        """
        out = {slot: float(getattr(self, name)) for name, slot in FIELD_SLOTS.items()}
        out.update(derived_bootstraps(out))
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


def derived_bootstraps(slots: Mapping[str, float]) -> dict[str, float]:
    """The bootstraps that follow config slots (given by slot name): ε_live = ε_max, the Kelly safety
    fraction = the normal v9 target, τ_min_eff = τ_min."""
    return {"RL_KELLY_EPS_RECOVERY_LIVE_INDEX": slots[FIELD_SLOTS["eps_max"]],
            "RL_KELLY_SAFETY_FRAC_INDEX": slots[FIELD_SLOTS["safety_frac_normal"]],
            "RL_IQN_TAU_MIN_EFFECTIVE_INDEX": slots[FIELD_SLOTS["tau_min"]]}


def coerce_value(name: str, value: Any) -> bool | float:
    """A RegimeConfig field's value as the object holds it: a bool for a switch, else a finite float.

    Raises
    ------
    ConfigError
        A switch that is not a boolean (or 0/1), or a number that is a bool, not a
        number, or not finite.
    """
    if name in SWITCHES:
        if not isinstance(value, (bool, int)) or value not in (0, 1):
            raise ConfigError(f"{name} must be a boolean, got {value!r}", field=name, value=value)
        return bool(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, got {value!r}", field=name, value=value)
    _check_float32(name, float(value))
    return float(value)


def _check_float32(name: str, value: float) -> None:
    """Refuse ``value`` where its float32 slot would not hold it (:func:`params.float32_problem`): the error
    names the slot, the value, what the slot holds and the field's rules."""
    spec = next(f for f in fields(RegimeConfig) if f.name == name)
    integer = bool(spec.metadata.get("integer"))
    problem = params.float32_problem(value, integer)
    if problem is None:
        return
    rules = "; ".join(f"{name} {why}" for names, _, why in _RULES if names == (name,))
    raise ConfigError(f"{name}={value!r} {problem}, the type of its slot {FIELD_SLOTS[name]}; the slot holds "
                      f"{params.float32_range(integer)}" + (f"; the rule: {rules}" if rules else ""),
                      field=name, value=value)


def _in_unit(v):
    return (v >= 0.0) & (v <= 1.0)


def _whole_steps(v):
    return (v >= 0) & (v % 1 == 0)


#: RegimeConfig's checks, in order: ``(fields, ok(*values), why)``. ``ok`` uses only
#: operators, so the same rule checks one object's floats and whole columns of them.
_RULES: tuple[tuple[tuple[str, ...], Any, str], ...] = (
    (("eps_min", "eps_max"), lambda lo, hi: lo <= hi, "is greater than eps_max={1!r}"),
    *((( n,), _in_unit, "is outside [0, 1]") for n in ("eps_min", "eps_max")),
    *(((n,), lambda v: (v > 0.0) & (v <= 1.0), "is outside (0, 1]")
      for n in ("envelope_decay_alpha", "popart_alpha")),
    *(((n,), _whole_steps, "must be a whole number of steps >= 0")
      for n in ("max_duration", "n_recovery", "tau_boost_window", "transition_steps",
                "transition_decay_steps")),
    (("tail_sigma_threshold",), lambda v: v > 0, "must be > 0"),
    (("tau_boost_factor",), lambda v: v >= 1.0, "must be >= 1 (a boost never lowers τ_min)"),
    *(((n,), _in_unit, "is outside [0, 1]") for n in ("safety_frac_defensive", "safety_frac_normal", "tau_min")),
    (("kelly_cap",), lambda v: v > 0, "must be > 0"),
)


def _rule_error(names: Sequence[str], values: Sequence[Any], why: str) -> ConfigError:
    text = f"{names[0]}={values[0]!r} " + why.format(*values)
    return ConfigError(text, field=names[0], value=values[0] if len(values) == 1 else tuple(values))


def field_names() -> list[str]:
    """The RegimeConfig field names, in declaration order."""
    return [f.name for f in fields(RegimeConfig)]


def parse_setting(text: str) -> tuple[str, Any]:
    """Parse one ``FIELD=VALUE`` of a RegimeConfig field; the error names the field and lists the valid ones."""
    return params.parse_setting(text, RegimeConfig.field_specs())


def parse_grid(items: Sequence[str]) -> dict[str, list[Any]]:
    """``{field: [values]}`` of ``FIELD=v1,v2,...`` strings over RegimeConfig (strict: see
    :func:`regime_dash.core.params.parse_grid`)."""
    return params.parse_grid(items, RegimeConfig.field_specs())
