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
import time
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

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
        times = []
        for _ in range(max(1, repeats)):
            t0 = time.perf_counter()
            module.replay(stream, engine=engine)
            times.append(time.perf_counter() - t0)
        sec = statistics.median(times)
        row.update(repeats=len(times), seconds=sec, steps_per_s=stream.steps / sec if sec > 0 else float("inf"))
        rows.append(row)
    ref = next((r for r in rows if r["engine"] == "reference" and "seconds" in r), None)
    for r in rows:
        if ref is not None and "seconds" in r and r is not ref:
            r["speedup_vs_reference"] = ref["seconds"] / r["seconds"]
    return rows


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def parse_value(module: ControllerModule, name: str, raw: str) -> Any:
    """A config value of field ``name`` from text (``true``/``false`` for switches, numbers otherwise)."""
    specs = {s.name: s for s in module.field_specs()}
    if name not in specs:
        raise ValidationError(f"{module.name}: unknown config field {name!r}; valid: {', '.join(specs)}",
                              field=name, value=raw)
    text = raw.strip()
    if specs[name].kind == "bool":
        if text.lower() not in _TRUE | _FALSE:
            raise ValidationError(f"{name}={raw!r} is not a boolean (true/false)", field=name, value=raw)
        return text.lower() in _TRUE
    try:
        value = float(text)
    except ValueError:
        raise ValidationError(f"{name}={raw!r} is not a number", field=name, value=raw) from None
    return int(value) if specs[name].kind == "int" and value == int(value) else value


def parse_settings(module: ControllerModule, settings: Sequence[str], base: Any = None) -> Any:
    """The module's config with ``FIELD=VALUE`` settings applied over ``base`` (default config)."""
    base = module.config_type() if base is None else base
    changes = {}
    for text in settings:
        if "=" not in text:
            raise ValidationError(f"--set {text!r} is not FIELD=VALUE", field=text, value=text)
        name, raw = text.split("=", 1)
        changes[name.strip()] = parse_value(module, name.strip(), raw)
    return base.replace(**changes)


def parse_grid(module: ControllerModule, specs: Sequence[str]) -> dict[str, list]:
    """``{field: values}`` from ``FIELD=V1,V2,...`` strings."""
    grid: dict[str, list] = {}
    for text in specs:
        if "=" not in text:
            raise ValidationError(f"--grid {text!r} is not FIELD=V1,V2,...", field=text, value=text)
        name, raw = text.split("=", 1)
        grid[name.strip()] = [parse_value(module, name.strip(), v) for v in raw.split(",") if v.strip()]
    return grid
