"""``check`` of a long diag: ``python -m regime_dash bench check``.

::

    python -m regime_dash bench check [--steps 1000000] [--accounts 128] [--repeats 3] [--json FILE]

Writes one replayed run of ``--steps`` steps (the ``kelly_trap_run8`` scenario, its inputs
logged, so every formula is re-derived) as a Parquet diag, then times, each in a fresh
process as a user runs it:

* ``python -m regime_dash check RUN.parquet`` (the whole command: start-up, read, every check,
  re-derivation, findings and the report) and its peak RSS;
* the anchor, in the same run: a fresh process that reads the same file into pandas with
  pyarrow (``pd.read_parquet``), the floor any check of the file starts from.

It prints the medians, the ratio to the anchor, the rate in steps/s and the targets:
at most :data:`TARGET_S` seconds and under :data:`TARGET_RSS_MB` MB at 1,000,000 steps.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from regime_dash.benchmarks.timing import timed

TARGET_S = 5.0
TARGET_RSS_MB = 1024.0
_READ = "import sys, pandas as pd; pd.read_parquet(sys.argv[1])"


def write_run(path: Path, steps: int, accounts: int) -> Path:
    """The benchmark's diag: a replayed scenario with its inputs logged, as Parquet."""
    import regime_dash as rd
    from regime_dash.sources import scenarios

    stream = scenarios.make("kelly_trap_run8", steps=steps, accounts=accounts)
    frame = rd.replay(stream, engine="fast", device="cpu", log_inputs=True)
    frame.to_parquet(path, index=False)
    return path


def _child(argv: list[str]) -> tuple[float, float, int]:
    """(seconds, peak RSS MB, exit code) of one fresh process (its own ``wait4`` usage)."""
    def once():
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                cwd=Path(__file__).resolve().parents[2])
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        return proc.returncode, usage.ru_maxrss / 1024.0, err

    sec, (code, mb, err) = timed(once)
    if code not in (0, 1):  # check exits 1 when a check fails: that is a result
        raise RuntimeError(f"{' '.join(argv)} exited {code}: {err.decode(errors='replace').strip()[-400:]}")
    return sec, mb, code


def run(steps: int, accounts: int, repeats: int, work: Path) -> dict[str, Any]:
    path = work / "run.parquet"
    # written by a child, so this process stays small and the children it starts inherit nothing big
    subprocess.run([sys.executable, "-c", "import sys; from regime_dash.benchmarks.check import write_run; "
                    "write_run(__import__('pathlib').Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))",
                    str(path), str(steps), str(accounts)], check=True, cwd=Path(__file__).resolve().parents[2])
    check = [sys.executable, "-m", "regime_dash", "check", str(path)]
    read = [sys.executable, "-c", _READ, str(path)]
    _child(check)  # the first check loads (or compiles) the re-derivation kernel into numba's cache
    times: dict[str, list[float]] = {"check": [], "read": []}
    rss = {"check": 0.0, "read": 0.0}
    for _ in range(max(1, repeats)):  # interleaved, so a busy machine slows both alike
        for name, argv in (("check", check), ("read", read)):
            sec, mb, _ = _child(argv)
            times[name].append(sec)
            rss[name] = max(rss[name], mb)
    chk, rd_s = statistics.median(times["check"]), statistics.median(times["read"])
    return {"steps": steps, "accounts": accounts, "repeats": max(1, repeats), "check_s": chk, "read_s": rd_s,
            "ratio": chk / rd_s if rd_s > 0 else float("inf"), "steps_per_s": steps / chk if chk > 0 else 0.0,
            "check_rss_mb": rss["check"], "read_rss_mb": rss["read"], "target_s": TARGET_S,
            "target_rss_mb": TARGET_RSS_MB, "met": chk <= TARGET_S and rss["check"] < TARGET_RSS_MB}


def format_lines(r: dict[str, Any]) -> list[str]:
    return [f"check of a {r['steps']:,}-step diag ({r['accounts']} accounts), median of {r['repeats']}:",
            f"  check RUN.parquet     {r['check_s']:.2f} s  {r['steps_per_s']:,.0f} steps/s  peak RSS "
            f"{r['check_rss_mb']:,.0f} MB",
            f"  pd.read_parquet       {r['read_s']:.2f} s  peak RSS {r['read_rss_mb']:,.0f} MB (anchor)",
            f"  ratio {r['ratio']:.2f}x the anchor; target <= {r['target_s']:g} s and < {r['target_rss_mb']:,.0f} MB: "
            f"{'met' if r['met'] else 'NOT met'}"]


def main(args: argparse.Namespace) -> int:
    """``bench check`` (options in :mod:`regime_dash.benchmarks.targets`)."""
    with tempfile.TemporaryDirectory(prefix="regime-dash-bench-check-") as tmp:
        result = run(args.steps, args.accounts, args.repeats, Path(tmp))
    print("\n".join(format_lines(result)))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0
