"""The one field-spec framework of every config: the regime observer's and each module's.

A config is a frozen dataclass whose fields are declared with :func:`param`:
each carries its slider domain ``[lo, hi]``, step, one-line doc, whether it is
a whole number and whether we model the value (the source does not give it).
From that one declaration come

* the sliders every page builds (:func:`field_specs`, :class:`FieldSpec`),
* the ``FIELD=VALUE`` setting parser (:func:`parse_setting`) and the grid
  parser (:func:`parse_grid`) the CLI, the sweep and the modules use, each
  raising :class:`~regime_dash.errors.ConfigError` naming the field and value,
* the shared methods of :class:`ConfigFields` (``replace``, ``with_settings``,
  ``as_dict``, ``field_specs``, ``field_names``).

Validation stays with each config: :class:`regime_dash.modules.config.ModuleConfig`
checks every value against its ``[lo, hi]``; :class:`regime_dash.core.config.RegimeConfig`
keeps its own (wider) rules, and its ``[lo, hi]`` is the slider domain inside them.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, fields
from typing import Any, Iterable, Sequence

import numpy as np

from regime_dash.errors import ConfigError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def param(default: Any, lo: float | None = None, hi: float | None = None, doc: str = "", *,
          model: bool = False, integer: bool = False, step: float | None = None) -> Any:
    """A config field with its slider range and doc.

    Parameters
    ----------
    default
        Default value (a bool makes a switch).
    lo, hi
        Closed range of the value: the slider's range (and, in a module config,
        the values it accepts).
    doc
        One line for the slider's help.
    model
        True when the source does not give the value and we model it.
    integer
        The value must be a whole number.
    step
        Slider step; ``None`` lets the UI choose.
    """
    return dataclasses.field(default=default, metadata={
        "lo": lo, "hi": hi, "doc": doc, "model": model, "integer": integer, "step": step})


@dataclass(frozen=True)
class FieldSpec:
    """One config field as the app's slider generator sees it."""

    name: str
    kind: str  # "float", "int" or "bool"
    default: Any
    lo: float | None
    hi: float | None
    step: float | None
    doc: str
    model: bool


#: The largest finite float32 and the smallest normal one: what a float32 slot holds beside 0.
F32_MAX = float(np.finfo(np.float32).max)
F32_TINY = float(np.finfo(np.float32).tiny)


def float32_range(integer: bool) -> str:
    """What a float32 slot holds, in words (for the message that refuses a value)."""
    if integer:
        return "the whole numbers float32 holds exactly (all of them up to 16,777,216)"
    return f"0 and magnitudes from {F32_TINY:.8g} to {F32_MAX:.8g}"


def float32_problem(value: float, integer: bool = False) -> str | None:
    """What becomes of ``value`` (finite) held as the float32 of its slot, when it is not the value asked
    for; None when the slot holds it.

    Every config slot is a float32 of the ISV buffer: a value past its range runs as ±inf, one below
    its normal range runs as 0 (the kernels flush subnormals) or as a subnormal the CPU and GPU read
    differently; a whole-number field the float32 rounds counts to another number.
    """
    with np.errstate(over="ignore", under="ignore"):
        held = float(np.float32(value))
    if not math.isfinite(held):
        return f"overflows to {held} in float32"
    if value != 0 and abs(held) < F32_TINY:
        return "underflows to 0 in float32" if held == 0 else f"underflows to the subnormal {held!r} in float32"
    if integer and held != value:
        return f"is held as {held!r} in float32"
    return None


def field_specs(config_type: type) -> list[FieldSpec]:
    """The fields of a config dataclass in declaration order, with kind, range, step, doc and model flag."""
    out = []
    for f in fields(config_type):
        m = f.metadata
        kind = "bool" if isinstance(f.default, bool) else ("int" if m.get("integer") else "float")
        default = int(f.default) if kind == "int" else f.default
        out.append(FieldSpec(f.name, kind, default, m.get("lo"), m.get("hi"), m.get("step"),
                             m.get("doc", ""), bool(m.get("model"))))
    return out


def _by_name(specs: Iterable[FieldSpec]) -> dict[str, FieldSpec]:
    return {s.name: s for s in specs}


def _unknown(name: str, raw: Any, specs: dict[str, FieldSpec], owner: str) -> ConfigError:
    head = f"{owner}: " if owner else ""
    return ConfigError(f"{head}unknown config field {name!r}; valid fields: {', '.join(specs)}",
                       field=name, value=raw)


def parse_value(specs: Iterable[FieldSpec], name: str, raw: str, owner: str = "") -> bool | int | float:
    """The value of field ``name`` from text: ``true``/``false`` (``on``/``off``, ``1``/``0``, ``yes``/``no``)
    for a switch, a number otherwise (an ``int`` for a whole-number field given a whole value).

    Raises
    ------
    ConfigError
        ``name`` is no field of ``specs`` (the error lists them; ``owner`` heads it), or
        ``raw`` is not a value of its kind.
    """
    specs = specs if isinstance(specs, dict) else _by_name(specs)
    if name not in specs:
        raise _unknown(name, raw, specs, owner)
    text = raw.strip()
    if specs[name].kind == "bool":
        low = text.lower()
        if low not in _TRUE | _FALSE:
            raise ConfigError(f"{name}={raw!r} is not a boolean (true/false)", field=name, value=raw)
        return low in _TRUE
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number", field=name, value=raw) from None
    return int(value) if specs[name].kind == "int" and value == int(value) else value


def parse_setting(text: str, specs: Iterable[FieldSpec], owner: str = "") -> tuple[str, Any]:
    """``(field, value)`` of one ``FIELD=VALUE`` (the CLI's ``--set``); errors name the field and value."""
    specs = _by_name(specs)
    if "=" not in text:
        raise ConfigError(f"--set {text!r} is not FIELD=VALUE; valid fields: {', '.join(specs)}",
                          field=text, value=text)
    name, raw = (p.strip() for p in text.split("=", 1))
    return name, parse_value(specs, name, raw, owner)


def parse_settings(settings: Sequence[str], specs: Iterable[FieldSpec], owner: str = "") -> dict[str, Any]:
    """``{field: value}`` of ``FIELD=VALUE`` strings (a later setting of a field wins, as on a command line)."""
    specs = list(specs)
    return dict(parse_setting(s, specs, owner) for s in settings)


def parse_grid(items: Sequence[str], specs: Iterable[FieldSpec], owner: str = "") -> dict[str, list[Any]]:
    """``["max_duration=100,500", "envelope=on,off"]`` → ``{field: [values]}`` (the CLI's ``--grid``).

    Strict: a field named twice, an empty value (``a=1,``) or no value raise
    :class:`ConfigError` naming the field; each value is parsed as by :func:`parse_value`.
    """
    specs = _by_name(specs)
    grid: dict[str, list[Any]] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--grid {item!r} is not FIELD=v1,v2,...", field=item, value=item)
        name, raw = (p.strip() for p in item.split("=", 1))
        if name in grid:
            raise ConfigError(f"--grid names field {name!r} twice", field=name, value=item)
        values = [v.strip() for v in raw.split(",")]
        if not raw.strip() or any(v == "" for v in values):
            if name not in specs:
                raise _unknown(name, raw, specs, owner)
            raise ConfigError(f"--grid {item!r} has an empty value", field=name, value=raw)
        grid[name] = [parse_value(specs, name, v, owner) for v in values]
    return grid


class ConfigFields:
    """Mixin of a frozen config dataclass declared with :func:`param`: the methods every config shares."""

    @classmethod
    def field_specs(cls) -> list[FieldSpec]:
        """The fields in declaration order, with kind, range, step, doc and model flag."""
        return field_specs(cls)

    @classmethod
    def numeric_specs(cls) -> dict[str, FieldSpec]:
        """The numeric fields (those with a slider range) by name, in declaration order."""
        return {s.name: s for s in field_specs(cls) if s.kind != "bool"}

    @classmethod
    def domain(cls, name: str) -> tuple[float, float, float]:
        """``(lo, hi, step)`` of numeric field ``name``, as floats: what its slider offers.

        Raises
        ------
        ConfigError
            For a name that is not a numeric field.
        """
        spec = cls.numeric_specs().get(name)
        if spec is None:
            raise ConfigError(f"{name!r} is not a numeric config field; numeric fields: "
                              f"{', '.join(cls.numeric_specs())}", field=name, value=name)
        return float(spec.lo), float(spec.hi), float(spec.step)

    @classmethod
    def field_names(cls) -> list[str]:
        """The field names, in declaration order."""
        return [f.name for f in fields(cls)]

    def replace(self, **changes: Any):
        """A copy with ``changes``; unknown fields raise :class:`ConfigError`."""
        names = self.field_names()
        unknown = sorted(set(changes) - set(names))
        if unknown:
            raise ConfigError(f"unknown config field(s) {unknown}; valid fields: {', '.join(names)}",
                              field=unknown[0], value=changes[unknown[0]])
        return dataclasses.replace(self, **changes)

    def with_settings(self, settings: Sequence[str]):
        """A copy with ``FIELD=VALUE`` strings applied (the CLI's ``--set``)."""
        return self.replace(**parse_settings(settings, self.field_specs()))

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


__all__ = ["ConfigFields", "F32_MAX", "F32_TINY", "FieldSpec", "field_specs", "float32_problem", "float32_range",
           "param", "parse_grid", "parse_setting",
           "parse_settings", "parse_value"]
