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
import sys
from pathlib import Path
from typing import Any


def run(steps: int | None = None, repeats: int = 3, engines: tuple[str, ...] = ("reference", "cuda"),
        include_core: bool = False, seed: int = 0) -> list[dict[str, Any]]:
    """The rows of every module (see the module docstring)."""
    from regime_dash.modules import MODULES
    from regime_dash.modules.integration import bench_module

    rows: list[dict[str, Any]] = []
    for m in MODULES.values():
        if m.core and not include_core:
            continue
        rows += bench_module(m, engines, steps, repeats, seed)
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
    """``bench modules``: run the benchmark and print its table (options in :mod:`regime_dash.cli.bench`)."""
    engines = tuple(e.strip() for e in args.engines.split(",") if e.strip())
    rows = run(args.steps, args.repeats, engines, args.include_core, args.seed)
    print(format_table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows}, indent=1, default=float), encoding="utf-8")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0
