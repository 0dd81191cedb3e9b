"""Start-up benchmark: ``python -m regime_dash bench startup``.

::

    python -m regime_dash bench startup [--repeats N] [--json FILE]

Times fresh processes of ``python -m regime_dash --help`` against ``python -c pass`` (the
interpreter's own start-up, the baseline), both with this interpreter, interleaved in
the same run so that a loaded machine slows both alike. It prints the median of each,
the difference (the target: at most :data:`TARGET_EXTRA_S` seconds) and their ratio.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from regime_dash.benchmarks.timing import timed

#: Seconds ``--help`` may take beyond ``python -c pass``.
TARGET_EXTRA_S = 0.25
COMMANDS = {"python -c pass": [sys.executable, "-c", "pass"],
            "python -m regime_dash --help": [sys.executable, "-m", "regime_dash", "--help"]}


def run(repeats: int = 10) -> dict[str, Any]:
    """Median seconds of each command over ``repeats`` interleaved runs (after one untimed run of each)."""
    root = Path(__file__).resolve().parents[2]
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for k in range(max(1, repeats) + 1):
        for name, argv in COMMANDS.items():
            sec, done = timed(lambda: subprocess.run(argv, cwd=root, capture_output=True))
            if done.returncode != 0:
                raise RuntimeError(f"{name} exited {done.returncode}: {done.stderr.decode(errors='replace')}")
            if k:  # the first round warms the file cache
                times[name].append(sec)
    base, cli = (statistics.median(times[name]) for name in COMMANDS)
    return {"repeats": max(1, repeats), "baseline_s": base, "help_s": cli, "extra_s": cli - base,
            "ratio": cli / base if base > 0 else float("inf"), "target_extra_s": TARGET_EXTRA_S,
            "met": cli - base <= TARGET_EXTRA_S}


def format_lines(result: dict[str, Any]) -> list[str]:
    names = list(COMMANDS)
    return [f"{names[0]:<30} {result['baseline_s']:.3f} s (median of {result['repeats']})",
            f"{names[1]:<30} {result['help_s']:.3f} s",
            f"{'extra':<30} {result['extra_s']:+.3f} s ({result['ratio']:.2f}x the baseline; target <= "
            f"+{result['target_extra_s']:.2f} s: {'met' if result['met'] else 'NOT met'})"]


def main(args: argparse.Namespace) -> int:
    """``bench startup``: run the benchmark and print its lines (options in :mod:`regime_dash.benchmarks.targets`)."""
    result = run(args.repeats)
    print("\n".join(format_lines(result)))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1), encoding="utf-8")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0
