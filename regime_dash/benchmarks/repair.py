"""Repair benchmark: ``python -m regime_dash bench repair``.

::

    python -m regime_dash bench repair [--scenario kelly_trap_run8] [--steps T] [--accounts B]
        [--trials N] [--batch N] [--seed S] [--sampler nsga2|tpe|qmc|random] [--device auto|cpu|gpu]
        [--top N] [--verify N] [--verify-engine reference|fast|cuda] [--workers N] [--module NAME|none]
        [--json FILE]

Times :func:`regime_dash.runs.repair.repair` end to end on one scenario (by default the
spec's Run #8, which fails): the diagnosis (the run's config replayed and judged), the
sensitivity screen, the search (Optuna's sampler in batches, one sweep of the fast engine
each), the pruning and the verification (full replays judged by the verdict, one process per
core by default), after one
untimed warm-up repair on a short stream (numba's compile and cache loads are not
counted). Then, where ``--module`` names one, the same search for a controller module
whose demo fails its own checks (SP14's, by default). Targets:

* Run #8 repaired with a verified passing config, and the module demo too;
* CPU: 100,000 steps in ≤ 60 s on 2 cores (``--device cpu``, the defaults);
* GPU: 1,000,000 steps, up to 10,000 candidates, in ≤ 10 s (on a device machine:
  ``--device gpu --steps 1000000 --trials 10000 --batch 2000 --verify-engine fast``;
  the reference engine's full replay of 1M steps alone takes minutes).

A time target is judged only at its size (steps, and on the GPU at most 10,000 trials);
at another size the row says so.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

#: (device, steps at least, trials at most, seconds at most) of each time target.
TARGETS = {"cpu": (100_000, None, 60.0), "gpu": (1_000_000, 10_000, 10.0)}
DEFAULT_STEPS = 100_000
DEFAULT_MODULE = "sp14_alpha_grad_gate"


def _target(device: str, steps: int, trials: int) -> tuple[float | None, str]:
    """``(seconds allowed, why not judged)`` of the time target at this size (None: not judged)."""
    least, most, seconds = TARGETS["gpu" if device == "gpu" else "cpu"]
    if steps < least:
        return None, f"the target is at {least:,} steps"
    if most is not None and trials > most:
        return None, f"the target is at most {most:,} candidates"
    return seconds, ""


def _cpu_s() -> float:
    """CPU seconds used so far by this process and its finished children (the verifying processes): on a
    machine shared with other work, what the run itself cost, whatever the others took."""
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def run_core(scenario: str = "kelly_trap_run8", steps: int = DEFAULT_STEPS, accounts: int | None = None,
             trials: int = 256, batch: int = 64, seed: int = 0, sampler: str = "nsga2", device: str = "cpu",
             top: int = 5, verify: int | None = None, verify_engine: str = "reference",
             workers: int | None = None) -> dict[str, Any]:
    """Repair one scenario, timed end to end after a warm-up; see the module docstring."""
    from regime_dash.runs.repair import repair
    from regime_dash.runs.repair.verifier import default_workers
    from regime_dash.sources import scenarios

    verify = top if verify is None else verify
    workers = default_workers(verify, steps) if workers is None else workers
    options = dict(trials=trials, batch=batch, seed=seed, sampler=sampler, top=top, verify=verify, engine="fast",
                   device=device, verify_engine=verify_engine, workers=workers)
    warm = scenarios.make(scenario, steps=None, accounts=8)
    repair(warm, **{**options, "trials": min(trials, 8), "batch": min(batch, 8), "verify": 1, "workers": 1})
    t = time.perf_counter()
    stream = scenarios.make(scenario, steps=steps, accounts=accounts)
    made_s = time.perf_counter() - t
    t, cpu = time.perf_counter(), _cpu_s()
    result = repair(stream, **options)
    seconds, cpu = time.perf_counter() - t, _cpu_s() - cpu
    allowed, why = _target(device, stream.steps, trials)
    best = result.passing[0] if result.passing else None
    return {"scenario": scenario, "steps": stream.steps, "accounts": stream.accounts, "device": device,
            "engine": result.engine, "verify_engine": verify_engine, "workers": workers, "sampler": result.sampler, "seed": seed,
            "trials": trials, "batch": batch, "searched": result.searched, "status": result.status,
            "repaired": bool(result.passing), "passing": len(result.passing),
            "verified": sum(c.verified for c in result.candidates),
            "best": None if best is None else {"changes": best.changes_text(), "distance": best.distance},
            "stream_s": made_s, "seconds": seconds, "cpu_s": cpu, "phases": result.seconds, "target_s": allowed,
            "target_note": why, "met": None if allowed is None else bool(seconds <= allowed and result.passing)}


def run_module(name: str = DEFAULT_MODULE, seed: int = 0) -> dict[str, Any]:
    """Repair a controller module's demo, timed; whether its demo fails its checks at all is reported."""
    from regime_dash.modules import get
    from regime_dash.modules.repair import repair_module

    m = get(name)
    t = time.perf_counter()
    result = repair_module(m, m.demo_stream(), seed=seed)
    best = result.passing[0] if result.passing else None
    return {"module": name, "status": result.status, "repaired": bool(result.passing),
            "failures": [f.id for f in result.failures], "searched": result.searched,
            "best": None if best is None else {"changes": best.changes_text(), "distance": best.distance},
            "seconds": time.perf_counter() - t}


def format_report(r: dict[str, Any]) -> str:
    c = r["core"]
    lines = [f"repair of {c['scenario']} ({c['steps']:,} steps × {c['accounts']} accounts; {c['engine']}, "
             f"{c['sampler']} seed {c['seed']}, {c['searched']} configs searched, {c['verified']} verified on "
             f"{c['verify_engine']} in {c['workers']} process(es)): {c['status']} in {c['seconds']:.2f} s end to end "
             f"({c['cpu_s']:.1f} CPU s)",
             "  phases: " + ", ".join(f"{k} {v:.2f} s" for k, v in c["phases"].items()),
             f"  best: {c['best']['changes']} (distance {c['best']['distance']:.3g})" if c["best"] else
             "  no verified passing config"]
    if c["target_s"] is None:
        lines.append(f"  time target: not judged ({c['target_note']})")
    else:
        lines.append(f"  target ≤ {c['target_s']:g} s on the {c['device']} with a verified pass: "
                     f"{'met' if c['met'] else 'NOT met'}")
    m = r.get("module")
    if m is not None:
        lines.append(f"module {m['module']}: fails {', '.join(m['failures']) or 'nothing'}; {m['status']} in "
                     f"{m['seconds']:.2f} s" + (f"; best: {m['best']['changes']}" if m["best"] else ""))
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    """``bench repair``: run the benchmark and print its report (options in :mod:`regime_dash.cli.bench`)."""
    r = {"benchmark": "repair",
         "core": run_core(args.scenario, args.steps, args.accounts, args.trials, args.batch, args.seed,
                          args.sampler, args.device, args.top, args.verify, args.verify_engine, args.workers)}
    if args.module != "none":
        r["module"] = run_module(args.module, args.seed)
    print(format_report(r))
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=1), encoding="utf-8")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0

