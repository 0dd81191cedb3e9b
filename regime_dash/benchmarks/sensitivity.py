"""What-if sensitivity benchmark: ``python -m regime_dash bench sensitivity``.

::

    python -m regime_dash bench sensitivity [--scenario kelly_trap_run8] [--steps T] [--accounts B]
        [--repeats N] [--device auto|cpu|gpu] [--json FILE]

Times :func:`regime_dash.runs.sensitivity.sensitivity` on one scenario (by default
Run #8's trap: 3,000 steps × 128 accounts, every config field one at a time and
the top three pairwise, findings included) and, in the same run and on the
same stream, one single replay on the same engine (``replay(..., engine="fast")``
on the same device). Both are the median of ``--repeats`` runs after one
warm-up run each, so numba's compile and cache loads are not counted. The
ratio says how many single replays the whole analysis costs. Target:
a 3,000-step scenario in ≤ 2 s on the CPU, warm.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from regime_dash.benchmarks.timing import median_of

#: Seconds a 3,000-step scenario's sensitivity may take on the CPU, warm.
TARGET_S = 2.0


def run(scenario: str = "kelly_trap_run8", steps: int | None = None, accounts: int | None = None,
        repeats: int = 5, device: str = "cpu", seed: int = 0) -> dict[str, Any]:
    """Time the sensitivity and a single replay of one scenario; see the module docstring."""
    from regime_dash.sources import scenarios
    from regime_dash.core.config import RegimeConfig
    from regime_dash.engine import replay
    from regime_dash.errors import ValidationError
    from regime_dash.runs.sensitivity import sensitivity

    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValidationError(f"repeats must be an int >= 1, got {repeats!r}", field="repeats", value=repeats)
    stream = scenarios.make(scenario, seed=seed, steps=steps, accounts=accounts)
    base = RegimeConfig()
    t_sens, sens_runs, result = median_of(
        lambda: sensitivity(stream, base, engine="fast", device=device), repeats)
    t_one, one_runs, frame = median_of(lambda: replay(stream, base, engine="fast", device=device), repeats)
    replays = len(result.oat) + len(result.pair_table)
    return {
        "benchmark": "sensitivity", "scenario": scenario, "steps": stream.steps, "accounts": stream.accounts,
        "device": device, "engine": result.engine, "replays": replays,
        "sensitivity_s": t_sens, "sensitivity_runs": sens_runs,
        "single_replay_s": t_one, "single_replay_runs": one_runs, "single_replay_engine": frame.attrs["engine"],
        "ratio_vs_single_replay": t_sens / t_one,
        "target_s": TARGET_S, "met": bool(t_sens <= TARGET_S),
        "no_effect": result.no_effect_fields,
    }


def format_report(r: dict[str, Any]) -> str:
    return "\n".join([
        f"sensitivity of {r['scenario']} ({r['steps']} steps × {r['accounts']} accounts, {r['replays']} replays, "
        f"{r['engine']}): median {r['sensitivity_s']:.3f} s over {len(r['sensitivity_runs'])} warm runs",
        f"single replay (fast, {r['device']}): median {r['single_replay_s'] * 1000:.1f} ms",
        f"ratio sensitivity / single replay: {r['ratio_vs_single_replay']:.1f}×",
        f"target ≤ {r['target_s']:g} s: {'met' if r['met'] else 'NOT met'}",
    ])


def main(args: argparse.Namespace) -> int:
    """``bench sensitivity``: run the benchmark and print its report (options in :mod:`regime_dash.benchmarks.targets`)."""
    r = run(args.scenario, args.steps, args.accounts, args.repeats, args.device, args.seed)
    print(format_report(r))
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=1), encoding="utf-8")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0
