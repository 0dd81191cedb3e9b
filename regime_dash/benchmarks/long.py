"""``python -m regime_dash bench long``: one long run walked through every stage a user walks.

::

    python -m regime_dash bench long [--steps 1000000] [--accounts 128] [--sim-steps T]
                                     [--workdir DIR] [--json FILE]

One run of T steps × b accounts: the scenario generated (``kelly_trap_run8``) and a
closed-loop simulator run (``calm``); the whole ``replay --out run.jsonl`` and
``replay --out run.parquet`` commands; the diag writing alone against DuckDB's JSON
writer on the same frame; ``ingest`` of that file against DuckDB's ``COPY (SELECT * FROM
read_json(f)) TO 'x.parquet'`` (the ingest target's anchor; its ``read_json`` into a table,
which writes no file, is timed beside it);
``check``; Explore's first chart of the stored run and a smoothing change (the figure
dict the page sends; the browser's draw is ``bench ui``'s); the Replay page's what-if
slider on the 1M-step stream (a replay with one field changed and the chart's figure
dict, the stream's per-step fields and phase 1, read from its file block by block, and the
baseline's traces cached as the page caches them) on
the CPU fast engine, and on the GPU where cupy and a device are present (one line saying
why not otherwise).

Every stage runs in a child process of its own, so its peak RSS (``ru_maxrss``) is its
own; each prints its seconds, its throughput and, where it has one, the ratio to the
anchor timed in the same run. Before a stage the machine's dirty pages are written back
(the stages before wrote gigabytes), and each reader of run.jsonl reads it once untimed,
so ours and DuckDB's start from the same page cache; each side's imports are timed.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path
from typing import Callable

DEFAULT_STEPS = 1_000_000
DEFAULT_ACCOUNTS = 128
SCENARIO = "kelly_trap_run8"
SIM_PRESET = "calm"
RSS_LIMIT_MB = 1536.0

#: stage -> (seconds it may take at T = 1M, or None; what the anchor ratio must reach, or None).
TARGETS: dict[str, tuple[float | None, float | None]] = {
    "scenario": (3.0, None), "diag_write": (None, 0.7), "replay_jsonl": (15.0, None),
    "replay_parquet": (4.0, None), "check": (5.0, None), "whatif_cpu": (1.0, None), "whatif_gpu": (0.3, None),
    "ingest": (None, 1.5),
}


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _cli(a: argparse.Namespace, argv: list[str]) -> None:
    """``python -m regime_dash ARGV`` in this process, through the command line ``bench`` hands its stages
    (``a.command_line``: a stage runs as ``python -m regime_dash bench long --child STAGE``)."""
    command_line = getattr(a, "command_line", None)
    if command_line is None:
        raise RuntimeError("this stage times a whole command: run it as `python -m regime_dash bench long`")
    with redirect_stdout(io.StringIO()):
        code = command_line(argv)
    if code not in (0, 1):  # check exits 1 on a failed check, which is a result
        raise RuntimeError(f"`python -m regime_dash {' '.join(argv)}` exited {code}")


def _stage_scenario(work: Path, a: argparse.Namespace) -> dict:
    from regime_dash.sources import scenarios

    t0 = time.perf_counter()
    stream = scenarios.make(SCENARIO, steps=a.steps, accounts=a.accounts)
    seconds = time.perf_counter() - t0
    stream.save(work / "stream.npz")
    return {"seconds": seconds, "units": a.steps, "unit": "steps"}


def _stage_draws(work: Path, a: argparse.Namespace) -> dict:
    """The anchor of generation: NumPy drawing the run's random numbers alone (4 per account-step)."""
    import numpy as np

    g = np.random.Generator(np.random.Philox(0))
    t0 = time.perf_counter()
    for lo in range(0, a.steps, 65536):
        n = min(65536, a.steps - lo)
        g.random((n, 3 * a.accounts))
        g.standard_normal((n, a.accounts))
    return {"seconds": time.perf_counter() - t0, "units": a.steps, "unit": "steps"}


def _stage_simulate(work: Path, a: argparse.Namespace) -> dict:
    from regime_dash.sources.simulator import simulate

    t0 = time.perf_counter()
    simulate(SIM_PRESET, steps=a.sim_steps, accounts=a.accounts, engine="fast", keep_stream=False).frame()
    return {"seconds": time.perf_counter() - t0, "units": a.sim_steps, "unit": "steps"}


def _replay_command(work: Path, a: argparse.Namespace, out: str) -> dict:
    t0 = time.perf_counter()
    _cli(a, ["replay", "--scenario", SCENARIO, "--steps", str(a.steps), "--accounts", str(a.accounts),
          "--engine", "fast", "--out", str(work / out)])
    return {"seconds": time.perf_counter() - t0, "units": a.steps, "unit": "steps",
            "mb": (work / out).stat().st_size / 1e6}


def _frame(work: Path):
    import pandas as pd

    return pd.read_parquet(work / "run.parquet")


def _stage_diag_write(work: Path, a: argparse.Namespace) -> dict:
    from regime_dash.diag import catalogue as diag

    frame = _frame(work)
    t0 = time.perf_counter()
    path = diag.write_jsonl(frame, work / "write.jsonl")
    seconds = time.perf_counter() - t0
    mb = path.stat().st_size / 1e6
    path.unlink()
    return {"seconds": seconds, "units": mb, "unit": "MB", "mb": mb}


def _stage_parquet_write(work: Path, a: argparse.Namespace) -> dict:
    from regime_dash.usecases.frames import write_frame

    frame = _frame(work)
    t0 = time.perf_counter()
    write_frame(frame, work / "write.parquet")
    seconds = time.perf_counter() - t0
    mb = (work / "write.parquet").stat().st_size / 1e6
    (work / "write.parquet").unlink()
    return {"seconds": seconds, "units": a.steps, "unit": "steps", "mb": mb}


def _stage_duckdb_json(work: Path, a: argparse.Namespace) -> dict:
    import duckdb

    frame = _frame(work)  # noqa: F841 - read by name from the SQL
    out = work / "duck.json"
    t0 = time.perf_counter()
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    con.execute(f"COPY (SELECT * FROM frame) TO '{out}' (FORMAT json)")
    seconds = time.perf_counter() - t0
    mb = out.stat().st_size / 1e6
    out.unlink()
    return {"seconds": seconds, "units": mb, "unit": "MB", "mb": mb}


def _cached(path: Path) -> Path:
    """``path`` read through once, untimed: each reader of run.jsonl starts from the page cache, not the
    first from the disk and the next from what the first read in (the machine may have let it go)."""
    buf = bytearray(16 << 20)
    with open(path, "rb", buffering=0) as fh:
        while fh.readinto(buf):
            pass
    return path


def _stage_ingest(work: Path, a: argparse.Namespace) -> dict:
    path = _cached(work / "run.jsonl")
    t0 = time.perf_counter()
    _cli(a, ["ingest", str(path), "--name", "long", "--store", str(work / "store")])
    mb = path.stat().st_size / 1e6
    return {"seconds": time.perf_counter() - t0, "units": mb, "unit": "MB"}


def _stage_duckdb_read(work: Path, a: argparse.Namespace) -> dict:
    path = _cached(work / "run.jsonl")
    t0 = time.perf_counter()
    import duckdb  # timed, as the ingest stage's own imports are

    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    con.execute(f"CREATE TABLE t AS SELECT * FROM read_json('{path}', format='newline_delimited')")
    mb = path.stat().st_size / 1e6
    return {"seconds": time.perf_counter() - t0, "units": mb, "unit": "MB"}


def _stage_duckdb_parquet(work: Path, a: argparse.Namespace) -> dict:
    path, out = _cached(work / "run.jsonl"), work / "duck.parquet"
    t0 = time.perf_counter()
    import duckdb  # timed, as the ingest stage's own imports are

    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    con.execute(f"COPY (SELECT * FROM read_json('{path}', format='newline_delimited')) TO '{out}' "
                "(FORMAT parquet)")
    seconds = time.perf_counter() - t0
    out.unlink()
    return {"seconds": seconds, "units": path.stat().st_size / 1e6, "unit": "MB"}


def _stage_check(work: Path, a: argparse.Namespace) -> dict:
    t0 = time.perf_counter()
    _cli(a, ["check", "long", "--json", "--store", str(work / "store")])
    return {"seconds": time.perf_counter() - t0, "units": a.steps, "unit": "steps"}


def _stage_explore(work: Path, a: argparse.Namespace) -> dict:
    from regime_dash.figures.signals import signal_spec
    from regime_dash.store.open import open_store

    t0 = time.perf_counter()
    store = open_store(work / "store")  # the format the CLI's ingest gave it
    run_id = store.list_runs()[0]["run_id"]
    runs = {"long": store.load(run_id, narrow=True)}  # as the page loads it
    signal_spec(runs)
    first = time.perf_counter() - t0
    t1 = time.perf_counter()
    signal_spec(runs, smoothing=0.6)
    return {"seconds": first, "units": a.steps, "unit": "steps", "smoothing_s": time.perf_counter() - t1}


#: Points per trace of the Replay page's what-if chart (``ui/pages/replay.py``'s CHART_POINTS).
WHATIF_POINTS = 700


def _whatif(work: Path, a: argparse.Namespace, device: str) -> dict:
    """A slider move as the Replay page makes it: the stream file's per-step fields and phase 1 (read
    block by block, never its whole [T, b] arrays) and the baseline's replay and traces are the page's
    cached ones (made once, untimed; its cache hands them back as they are, not copies); a move replays
    the scan with one field changed and builds the what-if's traces and the figure dict."""
    from regime_dash.core.config import RegimeConfig
    from regime_dash.engine import ReplayOptions, file_phase1, prepare
    from regime_dash.figures.signals import run_traces, signal_spec

    # the page's prepared stream: the file held light (per-step fields and phase 1), on either device
    prepared = prepare(file_phase1.open_light(work / "stream.npz"), "fast",
                       ReplayOptions(device=device, normalized=False))
    base = prepared.replay(RegimeConfig()).frame  # compiles, uploads
    kept = {}

    def traces_of(label, frame, colour, **kw):
        if label != "baseline":
            return run_traces(label, frame, colour, **kw)
        if "traces" not in kept:
            kept["traces"] = run_traces(label, frame, colour, **kw)
        return kept["traces"]

    def move(max_duration: int) -> float:
        t0 = time.perf_counter()
        what_if = prepared.replay(RegimeConfig(max_duration=max_duration)).frame
        signal_spec({"baseline": base, "what-if": what_if}, n_out=WHATIF_POINTS, height=900, traces_of=traces_of)
        return time.perf_counter() - t0

    # the page's first chart, before any slider moved: the baseline drawn as both runs, its traces kept
    signal_spec({"baseline": base, "what-if": base}, n_out=WHATIF_POINTS, height=900, traces_of=traces_of)
    move(400)
    runs = sorted(move(v) for v in (500, 600, 700))
    return {"seconds": runs[1], "units": a.steps, "unit": "steps"}


def _stage_whatif_cpu(work: Path, a: argparse.Namespace) -> dict:
    return _whatif(work, a, "cpu")


def _stage_whatif_gpu(work: Path, a: argparse.Namespace) -> dict:
    from regime_dash.engine import fast_gpu

    reason = fast_gpu.available()
    if reason is not None:
        return {"skipped": f"skipped: no GPU engine here ({(reason.splitlines() or ['?'])[0][:160]})"}
    return _whatif(work, a, "gpu")


#: stage -> (what it times, how, its anchor stage or None). In this order: later stages read earlier files.
STAGES: dict[str, tuple[str, Callable[[Path, argparse.Namespace], dict], str | None]] = {
    "scenario": (f"scenarios.make({SCENARIO!r})", _stage_scenario, "draws"),
    "draws": ("NumPy's Philox draws alone (anchor)", _stage_draws, None),
    "simulate": (f"simulate({SIM_PRESET!r}, engine='fast')", _stage_simulate, "draws"),
    "replay_parquet": ("replay --out run.parquet (whole command)",
                       lambda w, a: _replay_command(w, a, "run.parquet"), None),
    "replay_jsonl": ("replay --out run.jsonl (whole command)", lambda w, a: _replay_command(w, a, "run.jsonl"),
                     None),
    "parquet_write": ("the frame's Parquet write alone (replay --out run.parquet's)", _stage_parquet_write, None),
    "diag_write": ("diag.write_jsonl of the frame", _stage_diag_write, "duckdb_json"),
    "duckdb_json": ("DuckDB COPY ... (FORMAT json), same frame (anchor)", _stage_duckdb_json, None),
    "ingest": ("ingest run.jsonl", _stage_ingest, "duckdb_parquet"),
    "duckdb_parquet": ("DuckDB COPY (read_json of run.jsonl) TO parquet (anchor: the ingest target's)",
                       _stage_duckdb_parquet, None),
    "duckdb_read": ("DuckDB read_json of run.jsonl into a table (no file written; for reference)",
                    _stage_duckdb_read, None),
    "check": ("check (the stored run)", _stage_check, None),
    "explore": ("Explore: first chart's figure (smoothing change after)", _stage_explore, None),
    "whatif_cpu": ("Replay what-if slider: replay + figures, fast CPU", _stage_whatif_cpu, None),
    "whatif_gpu": ("Replay what-if slider: replay + figures, fast GPU", _stage_whatif_gpu, None),
}


def child(args: argparse.Namespace) -> int:
    """One stage in this process: its figures as one JSON line on stdout."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu0 = usage.ru_utime + usage.ru_stime
    result = STAGES[args.child][1](Path(args.workdir), args)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    # the process's CPU seconds over the stage (every thread, set-up included): on a loaded machine
    # the wall seconds are the machine's share, this is the work
    result["cpu_s"] = usage.ru_utime + usage.ru_stime - cpu0
    result["rss_mb"] = _rss_mb()
    sys.stdout.write("\n" + json.dumps(result) + "\n")
    return 0


def _run_child(stage: str, work: Path, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, "-m", "regime_dash", "bench", "long", "--child", stage, "--workdir", str(work),
           "--steps", str(args.steps), "--accounts", str(args.accounts), "--sim-steps", str(args.sim_steps)]
    root = Path(__file__).resolve().parents[2]  # where `-m regime_dash...` finds the package
    # the stages before wrote gigabytes (run.jsonl, DuckDB's JSON): written back now, not while this one is timed
    os.sync()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=root,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["exit %d" % done.returncode])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(args: argparse.Namespace, work: Path) -> dict[str, dict]:
    """Every stage, each in its own child process, in :data:`STAGES` order."""
    from regime_dash.benchmarks.ingest import compile_bytecode, warm_shapes
    from regime_dash.engine import warm

    # the modules byte-compiled as a wheel's install leaves them: a checkout run with
    # PYTHONDONTWRITEBYTECODE set compiles every module again in every stage's process
    compile_bytecode()
    warm.compile_kernels()  # the fast engine's compile is not a stage's time
    # nor the ingest scanner's where it is numba's (no C compiler at install): on a cold
    # cache it compiles on a thread during the ingest stage, a core taken from the workers
    warm_shapes()
    rows: dict[str, dict] = {}
    for stage, (what, _, _) in STAGES.items():
        print(f"bench long: {stage} ({what})…", file=sys.stderr, flush=True)
        rows[stage] = _run_child(stage, work, args)
    for stage, (_, _, anchor) in STAGES.items():
        row, base = rows[stage], rows.get(anchor) if anchor else None
        if base and "seconds" in row and "seconds" in base:
            row["anchor"] = anchor
            row["ratio"] = base["seconds"] / row["seconds"]  # > 1: faster than the anchor
    return rows


#: The stages that time another tool (NumPy's draws, DuckDB): no target of ours, their memory not judged.
ANCHORS = frozenset({"draws", "duckdb_json", "duckdb_parquet", "duckdb_read"})


def _met(stage: str, row: dict, steps: int) -> str:
    limit, ratio = TARGETS.get(stage, (None, None))
    if "seconds" not in row or stage in ANCHORS:
        return ""
    ok = row["rss_mb"] < RSS_LIMIT_MB
    if limit is not None:
        ok &= row["seconds"] <= limit * steps / DEFAULT_STEPS
    if ratio is not None:
        ok &= row.get("ratio", 0.0) >= ratio
    return "yes" if ok else "NO"


def table(rows: dict[str, dict], steps: int) -> str:
    lines = [f"{'stage':<15} {'seconds':>8} {'cpu s':>7} {'throughput':>16} {'peak RSS':>9} {'vs anchor':>10} "
             f"{'target':>7}"]
    for stage, row in rows.items():
        if "seconds" not in row:
            lines.append(f"{stage:<15} {row.get('skipped') or 'error: ' + row.get('error', '?')}")
            continue
        rate = f"{row['units'] / row['seconds']:,.0f} {row['unit']}/s"
        ratio = f"{row['ratio']:.2f}x" if "ratio" in row else ""
        lines.append(f"{stage:<15} {row['seconds']:8.2f} {row.get('cpu_s', float('nan')):7.2f} {rate:>16} "
                     f"{row['rss_mb']:7.0f}MB {ratio:>10} "
                     f"{_met(stage, row, steps):>7}")
        if "smoothing_s" in row:
            lines.append(f"{'  smoothing':<15} {row['smoothing_s']:8.2f}")
    lines.append("cpu s: the stage process's CPU seconds over the stage (all threads; set-up included, the "
                 "interpreter's start not); vs anchor: the anchor's seconds over the stage's (> 1: faster than it); "
                 "target: the stage's "
                 f"(seconds scaled to T = {steps:,}, peak RSS < {RSS_LIMIT_MB:.0f} MB)")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    if args.child:
        return child(args)
    if args.sim_steps is None:
        args.sim_steps = args.steps
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        rows = run(args, Path(tmp))
    print(f"bench long: T = {args.steps:,}, b = {args.accounts}, simulator T = {args.sim_steps:,}, "
          f"{os.cpu_count()} cores")
    print(table(rows, args.steps), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"steps": args.steps, "accounts": args.accounts,
                                               "sim_steps": args.sim_steps, "stages": rows}, indent=1))
    return 0 if all("error" not in r for r in rows.values()) else 1


if __name__ == "__main__":
    from regime_dash.benchmarks.targets import standalone

    raise SystemExit(standalone("long", sys.modules[__name__]))
