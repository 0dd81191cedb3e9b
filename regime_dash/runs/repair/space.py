"""The search space of a repair: which config fields move, over which domain, and how far a config is.

Built from a config type's ``param()`` declarations (:meth:`ConfigFields.field_specs`:
:class:`~regime_dash.core.config.RegimeConfig` or a controller module's config), the
same records the sliders and the sensitivity read. Each searched field is an
:class:`Axis`:

* a switch is one choice, flipped or not;
* a number is two choices: whether it moves from the run's value at all, then,
  where it moves, its value in the slider's domain ``[lo, hi]`` (widened to take
  the run's own value where that lies outside), on the slider's step grid where
  the domain is a whole number of steps, a whole number for an integer field,
  on a log scale where the domain spans :data:`~regime_dash.runs.sensitivity.LOG_SPAN`
  or more (``lo > 0``). The move choice lets the sampler learn which fields to
  leave alone, so the candidates it finds change few fields.

**Distance.** A candidate's distance from the run's logged config is the sum over
fields of each field's change normalised by its slot's domain: ``|new − old| /
(hi − lo)`` on a linear domain, ``|ln new − ln old| / (ln hi − ln lo)`` on a log
one, 1 for a flipped switch. So 1.0 is one slider moved end to end, or one switch
flipped; a field moved from a value outside its domain can count more than 1.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from regime_dash.core import params
from regime_dash.core.params import FieldSpec
from regime_dash.errors import ConfigError
from regime_dash.runs.sensitivity import LOG_SPAN


def _on_grid(lo: float, hi: float, step: float | None) -> float | None:
    """``step`` when ``[lo, hi]`` is a whole number of steps (else no grid)."""
    if not step or step <= 0:
        return None
    n = (hi - lo) / step
    return step if abs(n - round(n)) < 1e-9 * max(1.0, n) else None


@dataclass(frozen=True)
class Axis:
    """One searched field: its kind, its domain (the slider's) and the range the sampler draws from.

    ``lo``/``hi`` are the slot's domain (what distances are normalised by); ``low``/``high``
    the sampled range: the domain widened to hold the run's value ``origin``.
    """

    name: str
    kind: str  # "bool", "int" or "float"
    lo: float
    hi: float
    low: float
    high: float
    step: float | None
    log: bool
    origin: Any

    @classmethod
    def of(cls, spec: FieldSpec, origin: Any) -> "Axis":
        """The axis of ``spec`` around the run's value ``origin``.

        Raises
        ------
        ConfigError
            A numeric field whose declaration has no ``[lo, hi]``: it has no domain to search.
        """
        if spec.kind == "bool":
            return cls(spec.name, "bool", 0.0, 1.0, 0.0, 1.0, None, False, bool(origin))
        if spec.lo is None or spec.hi is None or not spec.hi > spec.lo:
            raise ConfigError(f"{spec.name} has no domain [lo, hi] to search (lo={spec.lo!r}, hi={spec.hi!r})",
                              field=spec.name, value=(spec.lo, spec.hi))
        lo, hi, value = float(spec.lo), float(spec.hi), float(origin)
        low, high = min(lo, value), max(hi, value)
        log = lo > 0 and hi / lo >= LOG_SPAN and low > 0
        step = None if log else _on_grid(low, high, spec.step)
        if spec.kind == "int":
            step = float(max(1, round(step))) if step and step >= 1 and _on_grid(low, high, round(step)) else 1.0
            log = log and low >= 1
        return cls(spec.name, spec.kind, lo, hi, low, high, step, log, origin)

    def distribution(self):
        """The value's Optuna distribution (switches have none: their move is the flip)."""
        from optuna.distributions import FloatDistribution, IntDistribution

        if self.kind == "int":
            return IntDistribution(int(self.low), int(self.high), log=self.log, step=1 if self.log else int(self.step))
        return FloatDistribution(self.low, self.high, log=self.log, step=self.step)

    def snap(self, value: Any) -> Any:
        """``value`` clipped into the sampled range and onto its grid (a switch: as a bool)."""
        if self.kind == "bool":
            return bool(value)
        v = min(max(float(value), self.low), self.high)
        if self.step:
            v = self.low + round((v - self.low) / self.step) * self.step
            v = min(v, self.high)
        return int(round(v)) if self.kind == "int" else v

    def distance(self, old: Any, new: Any) -> float:
        """The change ``old → new`` in units of the domain (see the module docstring)."""
        if self.kind == "bool":
            return float(bool(old) != bool(new))
        old, new = float(old), float(new)
        if self.log and old > 0 and new > 0:
            return abs(math.log(new) - math.log(old)) / (math.log(self.hi) - math.log(self.lo))
        return abs(new - old) / (self.hi - self.lo)

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.name, "kind": self.kind, "domain": [self.lo, self.hi],
                "sampled": [self.low, self.high], "step": self.step, "log": self.log}


def move_key(name: str) -> str:
    """The sampler's name of the choice whether numeric field ``name`` moves."""
    return f"move:{name}"


@dataclass(frozen=True)
class SearchSpace:
    """The fields a repair searches over a base config, and the distance of any config from the run's.

    Attributes
    ----------
    origin
        The run's logged config (the config it failed under).
    base
        ``origin`` with the held fields (``--set``) applied: every candidate holds them.
    axes
        The searched fields, in declaration order.
    held
        ``{field: value}`` held fixed.
    """

    origin: Any
    base: Any
    axes: tuple[Axis, ...]
    held: Mapping[str, Any]

    @classmethod
    def of(cls, origin: Any, fields: Sequence[str] | None = None, held: Mapping[str, Any] | None = None
           ) -> "SearchSpace":
        """The space over ``origin``'s config type: ``fields`` (every field with a domain if None), less ``held``.

        Raises
        ------
        ConfigError
            A field of ``fields`` or ``held`` that the config does not have (the error lists the valid
            ones), a field both searched and held, a held value the config rejects, or a named field
            without a domain.
        """
        specs = {s.name: s for s in origin.field_specs()}
        held = dict(held or {})
        for name in [*(fields or ()), *held]:
            if name not in specs:
                raise ConfigError(f"unknown config field {name!r}; valid fields: {', '.join(specs)}",
                                  field=name, value=name)
        both = [n for n in (fields or ()) if n in held]
        if both:
            raise ConfigError(f"{both[0]!r} is both searched (--fields) and held (--set): choose one",
                              field=both[0], value=held[both[0]])
        base = origin.replace(**held)
        named = list(dict.fromkeys(fields)) if fields else [n for n, s in specs.items() if _has_domain(s)]
        axes = tuple(Axis.of(specs[n], getattr(base, n)) for n in specs if n in named and n not in held)
        return cls(origin, base, axes, held)

    @property
    def names(self) -> list[str]:
        return [a.name for a in self.axes]

    def suggest(self, trial) -> dict[str, Any]:
        """``{field: value}`` of the fields ``trial`` moves (switches flipped, numbers drawn).

        A number's value is drawn whether or not it moves, so every trial has the same
        parameters (a fixed space, which every sampler models whole).
        """
        changes: dict[str, Any] = {}
        for a in self.axes:
            if a.kind == "bool":
                if trial.suggest_categorical(a.name, [False, True]):
                    changes[a.name] = not a.origin
                continue
            move = trial.suggest_categorical(move_key(a.name), [False, True])
            dist = a.distribution()
            if a.kind == "int":
                value = trial.suggest_int(a.name, dist.low, dist.high, step=dist.step, log=dist.log)
            else:
                value = trial.suggest_float(a.name, dist.low, dist.high, step=dist.step, log=dist.log)
            if move:
                changes[a.name] = value
        return changes

    def params_of(self, changes: Mapping[str, Any]) -> dict[str, Any]:
        """The sampler's parameters of a config given by its ``changes`` from the base (for an enqueued trial)."""
        out: dict[str, Any] = {}
        for a in self.axes:
            if a.kind == "bool":
                out[a.name] = a.name in changes and bool(changes[a.name]) != bool(a.origin)
                continue
            out[move_key(a.name)] = a.name in changes
            out[a.name] = a.snap(changes.get(a.name, a.origin))
        return out

    def config(self, changes: Mapping[str, Any]):
        """The base config with ``changes``; raises the config's :class:`ConfigError` if it rejects them."""
        return self.base.replace(**changes) if changes else self.base

    def changes(self, config: Any) -> dict[str, tuple[Any, Any]]:
        """``{field: (the run's value, the config's)}`` of every field ``config`` changes from the run's."""
        return {n: (getattr(self.origin, n), getattr(config, n)) for n in self.origin.field_names()
                if getattr(config, n) != getattr(self.origin, n)}

    def distance(self, config: Any) -> float:
        """``config``'s distance from the run's logged config (see the module docstring)."""
        axes = {a.name: a for a in self.axes}
        specs = {s.name: s for s in self.origin.field_specs()}
        total = 0.0
        for name, (old, new) in self.changes(config).items():
            axis = axes.get(name) or Axis.of(specs[name], old)
            total += axis.distance(old, new)
        return total

    def to_dict(self) -> dict[str, Any]:
        return {"axes": [a.to_dict() for a in self.axes], "held": dict(self.held)}


def _has_domain(spec: FieldSpec) -> bool:
    return spec.kind == "bool" or (spec.lo is not None and spec.hi is not None and spec.hi > spec.lo)


def parse_fields(text: str | Iterable[str] | None, specs: Iterable[FieldSpec]) -> list[str] | None:
    """The ``--fields`` list (``a,b`` or several values) checked against the config's fields; ``None`` for none.

    Raises
    ------
    ConfigError
        An empty name, or one the config does not have (naming it and listing the valid ones).
    """
    if text is None:
        return None
    parts = text.split(",") if isinstance(text, str) else [p for t in text for p in str(t).split(",")]
    names = [p.strip() for p in parts]
    valid = [s.name for s in specs]
    for name in names:
        if name not in valid:
            raise ConfigError(f"--fields {name!r} is not a config field; valid fields: {', '.join(valid)}",
                              field=name or "fields", value=name)
    return list(dict.fromkeys(names))


def parse_held(settings: Sequence[str], specs: Iterable[FieldSpec], owner: str = "") -> dict[str, Any]:
    """The ``--set FIELD=VALUE`` settings held fixed (the one setting parser, :func:`params.parse_settings`)."""
    return params.parse_settings(list(settings), list(specs), owner)


__all__ = ["Axis", "SearchSpace", "move_key", "parse_fields", "parse_held"]
