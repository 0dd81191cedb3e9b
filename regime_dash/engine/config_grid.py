"""Many configs as NumPy columns: a checked grid, a list read in one pass, and their initial ISV rows.

A grid ``{field: values}`` is swept as NumPy columns (:class:`ConfigGrid`): it is
checked once per axis value and once on the unexpanded product, and no
:class:`RegimeConfig` is built per scenario; each shard's initial ISV rows are
built from the few slots its configs vary (:class:`SlotPlan`; the others go into one
base row). A list of RegimeConfig objects is read into the same columns in one
C-level pass (:func:`list_columns`), and gives the same rows.
"""
from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from regime_dash.core.config import FIELD_SLOTS, SWITCHES, RegimeConfig, coerce_value, field_names
from regime_dash.core.slots import SlotLayout
from regime_dash.engine.start import initial_isv
from regime_dash.errors import ConfigError


def expand_configs(configs: Sequence[RegimeConfig] | Mapping[str, Any],
                   base: RegimeConfig | None = None) -> list[RegimeConfig]:
    """The configs a sweep runs, as objects: a list of :class:`RegimeConfig` as given, or a grid expanded.

    A sweep itself never builds these objects for a grid (see :class:`ConfigGrid`);
    this is the per-object view of the same configs, in the same order.

    Parameters
    ----------
    configs
        A sequence of :class:`RegimeConfig`, or a grid ``{field: values}`` whose
        cartesian product (first field slowest, like :func:`itertools.product`)
        is applied on top of ``base``. A single value stands for a one-value list.
    base
        The config a grid varies; the spec's defaults if None.

    Raises
    ------
    ConfigError
        An unknown field (the message lists the valid ones), an empty value list,
        a value out of its domain, or an element of the list that is not a RegimeConfig.
    """
    if isinstance(configs, Mapping):
        return ConfigGrid.of(configs, base).configs()
    return config_list(configs)


def config_list(configs: Any) -> list[RegimeConfig]:
    """``configs`` as a list of :class:`RegimeConfig`, or :class:`ConfigError` naming the element that is not one."""
    if isinstance(configs, (str, bytes)) or not isinstance(configs, Iterable):
        raise ConfigError(f"configs must be a list of RegimeConfig or a dict field -> values, "
                          f"got {type(configs).__name__}", field="configs", value=type(configs).__name__)
    out = list(configs)
    if not all(issubclass(t, RegimeConfig) for t in set(map(type, out))):  # one C-level pass
        i, c = next((i, c) for i, c in enumerate(out) if not isinstance(c, RegimeConfig))
        raise ConfigError(f"configs[{i}] is a {type(c).__name__}, not a RegimeConfig",
                          field=f"configs[{i}]", value=type(c).__name__)
    return out


Columns = dict[str, np.ndarray]


def _column_dtype(name: str) -> type:
    return np.bool_ if name in SWITCHES else np.float64


@dataclass(frozen=True, eq=False)
class ConfigGrid:
    """A checked grid ``{field: values}`` on a base config: its configs as NumPy columns, never objects.

    :meth:`of` coerces every axis value once (:func:`config.coerce_value`: a
    switch to bool, a number to a finite float) and checks the product against
    RegimeConfig's rules without expanding it (:meth:`RegimeConfig.first_invalid`),
    so a grid is valid exactly when every config of its product would be.
    :meth:`columns` then gives any index range of the product (first field
    slowest, as :func:`itertools.product`) as one float64 (bool for a switch)
    array per field, by index arithmetic: what a sweep's table and initial
    ISV rows are built from, here or on a worker that gets only the grid and its range.
    """

    names: tuple[str, ...]
    axes: tuple[np.ndarray, ...]
    base: RegimeConfig

    @classmethod
    def of(cls, grid: Mapping[str, Any], base: RegimeConfig | None = None) -> "ConfigGrid":
        """The grid ``{field: values}`` over ``base`` (the spec's defaults if None), checked.

        ``values`` is a sequence, a NumPy array (its elements taken as the Python
        numbers they hold), or a single value.

        Raises
        ------
        ConfigError
            An unknown field (listing the valid ones), an empty value list, or a
            value that is not valid for its field (naming the field and the value).
        """
        if base is not None and not isinstance(base, RegimeConfig):
            raise ConfigError(f"the sweep grid's base must be a RegimeConfig, got {type(base).__name__} {base!r}",
                              field="base", value=base)
        valid = field_names()
        unknown = [k for k in grid if k not in valid]
        if unknown:
            raise ConfigError(f"unknown config field(s) {unknown} in the sweep grid; "
                              f"valid fields: {', '.join(valid)}", field=str(unknown[0]), value=unknown[0])
        raw, axes = [], []
        for name, values in grid.items():
            if isinstance(values, np.ndarray):
                values = values.tolist()  # NumPy scalars to the Python numbers a config holds
            vals = [values] if isinstance(values, (str, bytes)) or not isinstance(values, Iterable) \
                else list(values)
            if not vals:
                raise ConfigError(f"sweep grid field {name!r} has no values", field=name, value=values)
            raw.append(vals)
            axes.append(np.array([_grid_value(name, v) for v in vals], dtype=_column_dtype(name)))
        base = RegimeConfig() if base is None else base
        out = cls(tuple(grid), tuple(axes), base)
        bad = RegimeConfig.first_invalid(dict(zip(out.names, out.axes)), base)
        if bad is not None:  # named as the first config of the product that fails, as it was given
            at, exc = bad
            combo = ", ".join(f"{n}={vals[i]!r}" for n, vals, i in zip(out.names, raw, at))
            raise ConfigError(f"sweep value {combo} is not a valid config: {exc}",
                              field=exc.field, value=exc.value)
        return out

    def __len__(self) -> int:
        return int(np.prod([len(a) for a in self.axes], dtype=np.int64))

    def columns(self, start: int = 0, stop: int | None = None) -> Columns:
        """Configs ``start..stop`` of the product as ``{field: array}``, in declaration order."""
        stop = len(self) if stop is None else stop
        index = np.arange(start, stop, dtype=np.int64)
        swept: Columns = {}
        stride = len(self)
        for name, axis in zip(self.names, self.axes):
            stride //= len(axis)
            swept[name] = axis[(index // stride) % len(axis)]
        return {name: swept[name] if name in swept
                else np.full(len(index), getattr(self.base, name), dtype=_column_dtype(name))
                for name in field_names()}

    def varying_columns(self, start: int = 0, stop: int | None = None) -> dict[str, Any]:
        """Configs ``start..stop`` as :meth:`columns`, but a field with one value is that value, not an array.

        All a shard needs to build its initial rows (:class:`SlotPlan`): only the
        axes with several values are expanded.
        """
        stop = len(self) if stop is None else stop
        index = np.arange(start, stop, dtype=np.int64)
        out: dict[str, Any] = {name: getattr(self.base, name) for name in field_names()}
        stride = len(self)
        for name, axis in zip(self.names, self.axes):
            stride //= len(axis)
            out[name] = axis[(index // stride) % len(axis)] if len(axis) > 1 else axis[0].item()
        return out

    def configs(self, start: int = 0, stop: int | None = None) -> list[RegimeConfig]:
        """Configs ``start..stop`` as objects (for callers that want them; a sweep does not)."""
        cols = self.columns(start, stop)
        names = list(cols)
        return [RegimeConfig(**dict(zip(names, row)))
                for row in zip(*(c.tolist() for c in cols.values()))]


def _grid_value(name: str, value: Any) -> bool | float:
    try:
        return coerce_value(name, value)
    except ConfigError as exc:
        raise ConfigError(f"sweep value {name}={value!r} is not a valid config: {exc}",
                          field=name, value=value) from None


#: Slots of :meth:`RegimeConfig.to_isv` that copy another field (the rest are ``FIELD_SLOTS``).
_DERIVED_SLOTS = {"RL_KELLY_EPS_RECOVERY_LIVE_INDEX": "eps_max",
                  "RL_KELLY_SAFETY_FRAC_INDEX": "safety_frac_normal",
                  "RL_IQN_TAU_MIN_EFFECTIVE_INDEX": "tau_min"}


def list_columns(configs: Sequence[RegimeConfig]) -> Columns:
    """The configs of a list as ``{field: column}``, in declaration order (one C-level pass)."""
    names = field_names()
    # one C-level pass over the configs (fromiter over attrgetter tuples): the per-config cost
    # of a sweep over a list
    flat = np.fromiter(itertools.chain.from_iterable(map(operator.attrgetter(*names), configs)),
                       dtype=np.float64, count=len(configs) * len(names))
    values = flat.reshape(len(configs), len(names))
    return {name: values[:, k].astype(_column_dtype(name)) for k, name in enumerate(names)}


def config_columns(configs: Sequence[RegimeConfig]) -> pd.DataFrame:
    """The configs as a table: one column per field (declaration order), one row per config."""
    return pd.DataFrame(list_columns(configs))


def _slot_sources() -> dict[str, str]:
    """``{slot: field}`` of every slot :meth:`RegimeConfig.to_isv` writes, in its order."""
    source = {**{slot: name for name, slot in FIELD_SLOTS.items()}, **_DERIVED_SLOTS}
    slots = list(RegimeConfig().to_isv())
    missing = [s for s in slots if s not in source]
    if missing:  # to_isv grew a slot this map does not know: a bug here, not the caller's
        raise ConfigError(f"sweep cannot vectorize RegimeConfig.to_isv slots {missing}",
                          field="configs", value=missing)
    return {s: source[s] for s in slots}


def config_slot_values(columns: Mapping[str, Any]) -> tuple[list[str], np.ndarray]:
    """``(slot names, float32 [S, K])``: each config's :meth:`RegimeConfig.to_isv` values, vectorized.

    ``columns`` is a table of configs (:func:`config_columns`, or
    :meth:`ConfigGrid.columns`); column k holds slot k's value for every config.
    A test checks this equals ``to_isv`` config by config.
    """
    sources = _slot_sources()
    # slot-major, then one transpose: a column write into a C-order [S, K] array is strided
    values = np.empty((len(sources), len(np.asarray(columns[field_names()[0]]))), dtype=np.float32)
    for k, name in enumerate(sources.values()):
        values[k] = np.asarray(columns[name], dtype=np.float64)
    return list(sources), np.ascontiguousarray(values.T)


@dataclass
class SlotPlan:
    """A shard's initial rows, factored: one base row pair, and the slots that differ per config.

    Configs differ only in the slots their fields vary (a grid's swept fields,
    typically two or three of the 23): those go per config, float32 [n, K'];
    every other slot of :meth:`RegimeConfig.to_isv` holds one value for all and
    is written into the base rows once. Rows built from a plan equal
    :func:`initial_rows` bit for bit (a test checks it).
    """

    isv0: np.ndarray       # float32 [n_isv]: the override slots' values (isv= applied)
    boot: np.ndarray       # float32 [n_isv]: the bootstrap row with the constant slots filled
    slots: list[str]       # the varying slots
    values: np.ndarray     # float32 [n, len(slots)]

    @classmethod
    def of(cls, columns: Mapping[str, Any], n: int, isv: Mapping[str, float] | None,
           layout: SlotLayout) -> "SlotPlan":
        """The plan of ``n`` configs' ``columns`` (``{field: array}``; a field may be a scalar: one value for all)."""
        isv0, boot = initial_isv(RegimeConfig(), isv, layout)
        boot = boot.copy()
        varying: list[tuple[str, np.ndarray]] = []
        for slot, name in _slot_sources().items():
            col = np.asarray(columns[name])
            f32 = col.astype(np.float64).astype(np.float32).reshape(-1)  # as the slot holds it
            # one value for every config: the same float32 bits (0.0 and -0.0 differ)
            bits = f32.view(np.uint32)
            if col.ndim == 0 or (len(col) and (bits == bits[0]).all()):
                boot[layout.index(slot)] = f32[0]
            else:
                varying.append((slot, f32))
        values = np.empty((len(varying), n), dtype=np.float32)
        for k, (_, f32) in enumerate(varying):
            values[k] = f32
        return cls(isv0, boot, [s for s, _ in varying], np.ascontiguousarray(values.T))

    def rows(self, start: int, stop: int, isv: Mapping[str, float] | None,
             layout: SlotLayout) -> tuple[np.ndarray, np.ndarray]:
        """float32 [stop - start, n_isv] ``(isv0s, boot_rows)`` of configs ``start..stop``."""
        boot_rows = np.tile(self.boot, (stop - start, 1))
        boot_rows[:, [layout.index(s) for s in self.slots]] = self.values[start:stop]
        isv0s = boot_rows.copy()
        for name in (isv or {}):
            isv0s[:, layout.index(name)] = self.isv0[layout.index(name)]
        return isv0s, boot_rows


def initial_rows(configs: Sequence[RegimeConfig] | Mapping[str, Any], isv: Mapping[str, float] | None,
                 layout: SlotLayout) -> tuple[np.ndarray, np.ndarray]:
    """float32 [S, n_isv] ``(isv0s, boot_rows)``: :func:`engine.initial_isv` of every config.

    The vectorized form of ``initial_isv``: the configs differ only in the slots
    :meth:`RegimeConfig.to_isv` names, so the spec's bootstrap row (with the slots
    every config shares filled in) is tiled and the others filled per config; the
    ``isv`` overrides are then re-applied, as ``initial_isv`` applies them last.
    ``configs`` is a list of RegimeConfig or a table of them (a DataFrame or
    ``{field: column}``). A test checks the two agree.
    """
    columns = configs if isinstance(configs, Mapping) else list_columns(configs)
    n = len(np.asarray(columns[field_names()[0]]))
    return SlotPlan.of(columns, n, isv, layout).rows(0, n, isv, layout)


__all__ = ["Columns", "ConfigGrid", "SlotPlan", "config_columns", "config_list", "config_slot_values",
           "expand_configs", "initial_rows", "list_columns"]
