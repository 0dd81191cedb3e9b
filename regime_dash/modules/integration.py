"""What the app, the CLI, the sweep and ``check`` call to treat every module alike.

* :func:`module_check_results`: the invariants of every module whose columns a
  frame has, as :class:`~regime_dash.analysis.invariants.CheckResult` objects, so
  ``check`` appends them to its report (the regime observer's run in the core
  already: ``core=True`` modules are left out).
* :func:`sweep_module`: one row per config of a grid: the config, the module's
  summary metrics and its failed-check count.
* :data:`MODULE_CHECKS`: the module check ids and :func:`module_check_results` as the
  provider that :func:`regime_dash.analysis.verdict.verdict` loads by name
  (:mod:`regime_dash.analysis.registry`).

Pure functions on values. A module's bench rows are :func:`regime_dash.benchmarks.modules.bench_module`.
"""
from __future__ import annotations

import itertools
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from regime_dash.core import params
from regime_dash.analysis.registry import CheckProvider
from regime_dash.analysis.verdict import verdict
from regime_dash.errors import ValidationError
from regime_dash.modules import MODULES, get
from regime_dash.modules.base import ControllerModule


def applicable(frame: pd.DataFrame, include_core: bool = False) -> list[ControllerModule]:
    """Modules whose check columns ``frame`` has (``core`` modules only when asked)."""
    return [m for m in MODULES.values() if (include_core or not m.core) and m.applies_to(frame)]


def module_check_ids(include_core: bool = False) -> list[str]:
    """Every module check id, module by module."""
    return [i for m in MODULES.values() if include_core or not m.core for i in m.check_ids]


def module_check_results(frame: pd.DataFrame, ids: Iterable[str] | None = None, include_core: bool = False,
                         options: Any = None) -> list:
    """CheckResults of every applicable module's invariants on ``frame`` (only ``ids`` when given),
    under the shared :class:`~regime_dash.analysis.invariants.CheckOptions`."""
    wanted = None if ids is None else set(ids)
    return [r for m in applicable(frame, include_core) for r in m.invariants(frame, options)
            if wanted is None or r.id in wanted]


#: The module checks as :func:`regime_dash.analysis.verdict.verdict` runs them: named in
#: the entry-point group ``regime_dash.checks`` (pyproject.toml), so the analysis layer never imports this one.
def module_coverage(frame: pd.DataFrame) -> list[dict]:
    """The coverage entries of every module whose columns ``frame`` has (each package's ``coverage``)."""
    import importlib

    out: list[dict] = []
    for m in applicable(frame):
        package = importlib.import_module(f"regime_dash.modules.{m.name}")
        if hasattr(package, "coverage"):
            out.extend(package.coverage(frame))
    return out


MODULE_CHECKS = CheckProvider("the controller modules", module_check_ids,
                              lambda frame, ids, options: module_check_results(frame, ids, options=options),
                              module_coverage)


def expand_grid(module: ControllerModule, grid: Mapping[str, Sequence[Any]], base: Any = None) -> list:
    """The configs of the cartesian product of ``grid`` ({field: values}) over ``base``."""
    base = module.config_type() if base is None else base
    names = {s.name for s in module.field_specs()}
    unknown = sorted(set(grid) - names)
    if unknown:
        raise ValidationError(f"{module.name}: unknown config field(s) {unknown}; valid: {', '.join(sorted(names))}",
                              field=unknown[0], value=grid[unknown[0]])
    keys = list(grid)
    for k in keys:
        if len(grid[k]) == 0:
            raise ValidationError(f"{module.name}: no values given for {k!r}", field=k, value=list(grid[k]))
    return [base.replace(**dict(zip(keys, combo))) for combo in itertools.product(*(grid[k] for k in keys))]


def sweep_module(module: ControllerModule | str, stream: Any, grid: Mapping[str, Sequence[Any]],
                 engine: str = "reference", base: Any = None) -> pd.DataFrame:
    """Replay ``stream`` under every config of ``grid``; one row each: the swept fields, the
    module's summary metrics, and ``checks_failed`` (its invariants that fail)."""
    module = get(module) if isinstance(module, str) else module
    rows = []
    for cfg in expand_grid(module, grid, base):
        frame = module.replay(stream, cfg, engine)
        row = {k: getattr(cfg, k) for k in grid}
        row.update(module.summary(frame))
        row["checks_failed"] = len(verdict(frame).failed)  # the one verdict, as `check` gives it
        rows.append(row)
    return pd.DataFrame(rows)


def parse_value(module: ControllerModule, name: str, raw: str) -> Any:
    """A config value of field ``name`` from text (see :func:`regime_dash.core.params.parse_value`)."""
    return params.parse_value(module.field_specs(), name, raw, owner=module.name)


def parse_settings(module: ControllerModule, settings: Sequence[str], base: Any = None) -> Any:
    """The module's config with ``FIELD=VALUE`` settings applied over ``base`` (default config)."""
    base = module.config_type() if base is None else base
    return base.replace(**params.parse_settings(settings, module.field_specs(), owner=module.name))


def parse_grid(module: ControllerModule, specs: Sequence[str]) -> dict[str, list]:
    """``{field: values}`` from ``FIELD=V1,V2,...`` strings (the strict :func:`regime_dash.core.params.parse_grid`)."""
    return params.parse_grid(specs, module.field_specs(), owner=module.name)
