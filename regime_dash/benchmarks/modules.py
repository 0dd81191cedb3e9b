"""Controller-module benchmark: ``python -m regime_dash bench modules``.

::

    python -m regime_dash bench modules [--steps T] [--repeats N] [--engines reference,cuda]
        [--include-core] [--json FILE]

One row per module and engine: the median wall time of replaying the module's
demo stream (its default length unless ``--steps``) after one warm-up run (so
numba and NVRTC compile time is not counted), steps per second, and the speedup
over ``reference`` where both ran in this call. An engine that cannot run here
says ``unavailable: <reason>``; nothing is estimated. The regime observer has
its own ``bench engines``; ``--include-core`` adds it here too.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from regime_dash.benchmarks.timing import repeat, wall

if TYPE_CHECKING:  # the annotation only
    from regime_dash.modules.controller import ControllerModule


def run(steps: int | None = None, repeats: int = 3, engines: tuple[str, ...] = ("reference", "cuda"),
        include_core: bool = False, seed: int = 0) -> list[dict[str, Any]]:
    """The rows of every module (see the module docstring)."""
    from regime_dash.modules import MODULES

    rows: list[dict[str, Any]] = []
    for m in MODULES.values():
        if m.core and not include_core:
            continue
        rows += bench_module(m, engines, steps, repeats, seed)
    return rows


def bench_module(module: ControllerModule | str, engines: Sequence[str] = ("reference", "cuda"),
                 steps: int | None = None, repeats: int = 3, seed: int = 0) -> list[dict]:
    """Median replay wall time of the module's demo stream per engine, after one warm-up run.

    Rows: ``module, engine, steps, repeats, seconds, steps_per_s`` or, for an
    engine that cannot run here, ``unavailable: <reason>``; ``speedup_vs_reference``
    where both ran in this call.
    """
    from regime_dash.errors import EngineUnavailable
    from regime_dash.modules import get

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


def format_table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'module':<22} {'engine':<10} {'steps':>7} {'seconds':>10} {'steps/s':>12} {'vs ref':>8}"]
    for r in rows:
        if "unavailable" in r:
            lines.append(f"{r['module']:<22} {r['engine']:<10} {r['steps']:>7}  unavailable: {r['unavailable']}")
            continue
        vs = f"{r['speedup_vs_reference']:.1f}×" if "speedup_vs_reference" in r else ""
        lines.append(f"{r['module']:<22} {r['engine']:<10} {r['steps']:>7} {r['seconds']:>10.4f} "
                     f"{r['steps_per_s']:>12.0f} {vs:>8}")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    """``bench modules``: run the benchmark and print its table (options in :mod:`regime_dash.benchmarks.targets`)."""
    engines = tuple(e.strip() for e in args.engines.split(",") if e.strip())
    rows = run(args.steps, args.repeats, engines, args.include_core, args.seed)
    print(format_table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows}, indent=1, default=float), encoding="utf-8")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0
