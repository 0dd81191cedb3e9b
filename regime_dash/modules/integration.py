"""What the app, the CLI, the sweep and the bench call to treat every module alike.

* :func:`module_check_results`: the invariants of every module whose columns a
  frame has, as :class:`~regime_dash.analysis.invariants.CheckResult` objects, so
  ``check`` appends them to its report (the regime observer's run in the core
  already: ``core=True`` modules are left out).
* :func:`sweep_module`: one row per config of a grid: the config, the module's
  summary metrics and its failed-check count.
* :func:`bench_module`: replay wall time of a module's demo stream per engine.

Pure functions on values; the only I/O is the wall clock in :func:`bench_module`.
"""
from __future__ import annotations

import itertools
import statistics
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from regime_dash import params
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


def split_check_ids(ids: Sequence[str] | None) -> tuple[list[str] | None, list[str] | None]:
    """(core ids, module ids) of a ``--only`` list; ``(None, None)`` for all."""
    if ids is None:
        return None, None
    mod = set(module_check_ids())
    return [i for i in ids if i not in mod], [i for i in ids if i in mod]


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
    from regime_dash.analysis.verdict import verdict

    module = get(module) if isinstance(module, str) else module
    rows = []
    for cfg in expand_grid(module, grid, base):
        frame = module.replay(stream, cfg, engine)
        row = {k: getattr(cfg, k) for k in grid}
        row.update(module.summary(frame))
        row["checks_failed"] = len(verdict(frame).failed)  # the one verdict, as `check` gives it
        rows.append(row)
    return pd.DataFrame(rows)


def bench_module(module: ControllerModule | str, engines: Sequence[str] = ("reference", "cuda"),
                 steps: int | None = None, repeats: int = 3, seed: int = 0) -> list[dict]:
    """Median replay wall time of the module's demo stream per engine, after one warm-up run.

    Rows: ``module, engine, steps, repeats, seconds, steps_per_s`` or, for an
    engine that cannot run here, ``unavailable: <reason>``; ``speedup_vs_reference``
    where both ran in this call.
    """
    from regime_dash.benchmarks.timing import repeat, wall
    from regime_dash.errors import EngineUnavailable

    module = get(module) if isinstance(module, str) else module
    stream = module.demo_stream(seed, steps)
    rows = []
    for engine in engines:
        row: dict[str, Any] = {"module": module.name, "engine": engine, "steps": stream.steps}
        if engine not in module.engines:
            row["unavailable"] = f"the module has no {engine!r} engine"
            rows.append(row)
            continue
        try:
            module.replay(stream, engine=engine)  # warm-up: numba/NVRTC compile is not counted
        except EngineUnavailable as exc:
            row["unavailable"] = str(exc)
            rows.append(row)
            continue
        times = repeat(wall(lambda: module.replay(stream, engine=engine)), max(1, repeats))
        sec = statistics.median(times)
        row.update(repeats=len(times), seconds=sec, steps_per_s=stream.steps / sec if sec > 0 else float("inf"))
        rows.append(row)
    ref = next((r for r in rows if r["engine"] == "reference" and "seconds" in r), None)
    for r in rows:
        if ref is not None and "seconds" in r and r is not ref:
            r["speedup_vs_reference"] = ref["seconds"] / r["seconds"]
    return rows


def parse_value(module: ControllerModule, name: str, raw: str) -> Any:
    """A config value of field ``name`` from text (see :func:`regime_dash.params.parse_value`)."""
    return params.parse_value(module.field_specs(), name, raw, owner=module.name)


def parse_settings(module: ControllerModule, settings: Sequence[str], base: Any = None) -> Any:
    """The module's config with ``FIELD=VALUE`` settings applied over ``base`` (default config)."""
    base = module.config_type() if base is None else base
    return base.replace(**params.parse_settings(settings, module.field_specs(), owner=module.name))


def parse_grid(module: ControllerModule, specs: Sequence[str]) -> dict[str, list]:
    """``{field: values}`` from ``FIELD=V1,V2,...`` strings (the strict :func:`regime_dash.params.parse_grid`)."""
    return params.parse_grid(specs, module.field_specs(), owner=module.name)
