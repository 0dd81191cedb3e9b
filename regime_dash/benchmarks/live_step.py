"""The live rows of ``bench engines``: what one live step costs, the engine's share apart from the market's.

For each b of ``--live-accounts`` it times, on the :func:`~regime_dash.benchmarks.inputs.bench_stream`
inputs (step t's rewards, lots and scalars, prepared before the clock starts):

``gpu step``          :meth:`GpuStepper.step` calls: wall time of each call (host writes
                      into the mapped ring, one graph launch, one synchronize, kelly_f
                      read) and CUDA events around each graph launch (the device's share)
``gpu block of 20``   :meth:`GpuStepper.steps` on blocks of 20 steps (the Live page's
                      tick on a recorded stream: one graph of 20 steps), per step; its
                      ring holds a whole number of ticks (:func:`tick_rows`) so no block
                      splits where the ring wraps, and every graph length the timed
                      blocks launch is captured before the clock starts
``reference step``    :meth:`ReferenceStepper.step` calls: the baseline, same inputs
``simulator ...``     :meth:`Simulator.step` with each stepper: the market model included
``market model``      :func:`regime_dash.sources.simulator.market_step` alone, per step

Every figure comes from this run; the first call of each stepper is a warm-up
and not timed. The target is a GPU step of at most
:data:`LIVE_TARGET_US` µs at b = 1,024.
"""
from __future__ import annotations

import cProfile
import io
import pstats
import statistics
import time
from typing import Any, Callable

import numpy as np

from regime_dash.benchmarks.engine_defaults import DEFAULT_LIVE_ACCOUNTS, DEFAULT_LIVE_STEPS  # noqa: F401

#: The live GPU step's target, µs at b = 1,024 (docs/BENCHMARKS.md).
LIVE_TARGET_US = 100.0
#: Steps of a Live page tick.
TICK = 20


def tick_rows(accounts: int) -> int:
    """Ring rows for the block row: the default ring rounded down to a whole number of ticks (at least one)."""
    from regime_dash.engine.gpu_stepper import default_rows

    return max(TICK, default_rows(accounts) // TICK * TICK)


def graph_lengths(rows: int, blocks: int, tick: int = TICK) -> list[int]:
    """The distinct k of the graphs that ``blocks`` blocks of ``tick`` steps launch on a fresh ring of ``rows``."""
    from regime_dash.engine.gpu_stepper import block_plan

    row, ks = 0, set()
    for _ in range(blocks):
        plan = block_plan(row, rows, tick)
        ks.update(k for _, k in plan)
        row = plan[-1][0] + plan[-1][1]
    return sorted(ks)


def _stats(seconds: list[float] | np.ndarray, per: int = 1) -> dict[str, float]:
    us = np.asarray(seconds, dtype=np.float64) * 1e6 / per
    return {"median_us": float(np.median(us)), "mean_us": float(us.mean()),
            "p90_us": float(np.percentile(us, 90)), "calls": int(us.size)}


def _call_seconds(call: Callable[[int], Any], n: int, warm: bool = True) -> list[float]:
    """Wall seconds of ``call(i)`` for i in 0..n-1 (with ``warm``, ``call(0)`` once before, untimed)."""
    if warm:
        call(0)
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        call(i)
        out.append(time.perf_counter() - t0)
    return out


def _step_call(stepper, stream, inputs):
    rewards, lots = stream.rewards, stream.lots
    return lambda i: stepper.step(rewards[i], lots[i], inputs[i])


def measure(accounts: int, steps: int = DEFAULT_LIVE_STEPS, seed: int = 0) -> dict[str, Any]:
    """The live rows at b = ``accounts`` (see the module docstring); GPU rows say why when they cannot run."""
    from regime_dash.benchmarks.inputs import bench_stream
    from regime_dash.core.config import RegimeConfig
    from regime_dash.engine import initial_isv
    from regime_dash.engine.gpu_stepper import GpuStepper, available
    from regime_dash.engine.steppers import ReferenceStepper, block_inputs
    from regime_dash.sources.simulator import Draws, Market, MarketState, Simulator, market_step
    from regime_dash.core.slots import DEFAULT_LAYOUT

    layout = DEFAULT_LAYOUT
    stream = bench_stream(steps + TICK, accounts, seed)
    inputs = [block_inputs(stream, t) for t in range(stream.steps)]
    isv0, boot = initial_isv(RegimeConfig(), None, layout)
    rows: dict[str, Any] = {}

    def simulator(stepper) -> dict[str, float]:
        sim = Simulator(accounts=accounts, seed=seed, engine=stepper)
        sim.step(TICK)
        t0 = time.perf_counter()
        sim.step(steps)
        return {"mean_us": (time.perf_counter() - t0) / steps * 1e6, "calls": steps}

    rows["reference step"] = _stats(_call_seconds(_step_call(ReferenceStepper(isv0, boot, layout), stream, inputs),
                                                  steps))
    reason = available()
    if reason is None:
        gpu = GpuStepper(isv0, boot, layout, accounts, events=True)
        call = _step_call(gpu, stream, inputs)
        call(0)
        gpu.event_ms.clear()
        rows["gpu step"] = {**_stats(_call_seconds(call, steps, warm=False)),
                            "device_us": statistics.median(gpu.event_ms) * 1e3, "ring_rows": gpu.rows}
        gpu = GpuStepper(isv0, boot, layout, accounts, rows=tick_rows(accounts), events=True)
        blocks = [stream.slice(t, t + TICK) for t in range(0, steps, TICK)]
        lengths = graph_lengths(gpu.rows, len(blocks) + 1)  # the warm block, then the timed ones
        for k in lengths:
            gpu.capture(k)
        gpu.steps(blocks[0])
        gpu.event_ms.clear()
        rows[f"gpu block of {TICK}"] = {**_stats(_call_seconds(lambda i: gpu.steps(blocks[i]), len(blocks),
                                                               warm=False), per=TICK),
                                        "device_us": statistics.median(gpu.event_ms) * 1e3 / TICK,
                                        "ring_rows": gpu.rows, "graph_lengths": lengths}
        rows["simulator gpu"] = simulator(GpuStepper(isv0, boot, layout, accounts))
    else:
        for name in ("gpu step", f"gpu block of {TICK}", "simulator gpu"):
            rows[name] = {"status": f"unavailable: {reason}"}
    rows["simulator reference"] = simulator(ReferenceStepper(isv0, boot, layout))
    market, state = Market(), MarketState.start(Market(), accounts)
    rows["market model"] = _stats(_call_seconds(
        lambda i: market_step(state, market, Draws.of(seed, i, accounts), p_true=0.56, kelly_f=0.5), steps))
    out: dict[str, Any] = {"accounts": accounts, "steps": steps, "rows": rows}
    gpu_row, ref_row = rows.get("gpu step", {}), rows["reference step"]
    if "median_us" in gpu_row:
        out["gpu_vs_reference_step"] = ref_row["median_us"] / gpu_row["median_us"]
    return out


def run(accounts: tuple[int, ...] = DEFAULT_LIVE_ACCOUNTS, steps: int = DEFAULT_LIVE_STEPS, seed: int = 0,
        log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """:func:`measure` for each b, and the target's verdict at b = 1,024 (when that b is measured)."""
    say = log or (lambda line: None)
    per_b = []
    for b in accounts:
        per_b.append(measure(int(b), steps, seed))
        say(f"live rows b={b}: done")
    target: dict[str, Any] = {"target_us": LIVE_TARGET_US, "accounts": 1_024, "value_us": None, "met": None}
    for m in per_b:
        row = m["rows"].get("gpu step", {})
        if m["accounts"] == 1_024 and "median_us" in row:
            target.update(value_us=row["median_us"], met=row["median_us"] <= LIVE_TARGET_US)
    return {"per_accounts": per_b, "target": target}


def profile(accounts: int = 1_024, steps: int = DEFAULT_LIVE_STEPS, top: int = 25) -> str:
    """cProfile of ``steps`` :meth:`GpuStepper.step` calls at b = ``accounts``: the top functions by own time."""
    from regime_dash.benchmarks.inputs import bench_stream
    from regime_dash.core.config import RegimeConfig
    from regime_dash.engine import initial_isv
    from regime_dash.engine.gpu_stepper import GpuStepper
    from regime_dash.engine.steppers import block_inputs
    from regime_dash.core.slots import DEFAULT_LAYOUT

    stream = bench_stream(steps + 1, accounts)
    inputs = [block_inputs(stream, t) for t in range(stream.steps)]
    isv0, boot = initial_isv(RegimeConfig(), None, DEFAULT_LAYOUT)
    call = _step_call(GpuStepper(isv0, boot, DEFAULT_LAYOUT, accounts), stream, inputs)
    call(0)
    prof = cProfile.Profile()
    prof.enable()
    for i in range(1, steps + 1):
        call(i)
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    return buf.getvalue()


def format_lines(live: dict[str, Any] | None,
                 skip: Callable[[dict[str, Any]], bool] = lambda row: False) -> list[str]:
    """The live rows as text lines, the target's verdict last (nothing when they were not run);
    rows ``skip`` names are left out (the GPU rows of a machine without one, said once above)."""
    if not live:
        return []
    lines = ["", f"live stepper (µs a step; wall per call, CUDA events around the graph launch as device µs)",
             f"{'b':>6s}  {'row':24s} {'median':>9s} {'mean':>9s} {'p90':>9s} {'device':>9s}"]
    for m in live["per_accounts"]:
        for name, r in m["rows"].items():
            if "status" in r and skip({"seconds": None, **r}):
                continue
            if "status" in r:
                lines.append(f"{m['accounts']:>6,d}  {name:24s} {r['status']}")
                continue
            cells = [format(r[k], "9.1f") if r.get(k) is not None else " " * 9
                     for k in ("median_us", "mean_us", "p90_us", "device_us")]
            lines.append(f"{m['accounts']:>6,d}  {name:24s} {' '.join(cells)}")
        if "gpu_vs_reference_step" in m:
            lines.append(f"{m['accounts']:>6,d}  gpu step vs reference step: {m['gpu_vs_reference_step']:.2f}x")
    t = live["target"]
    verdict = ("not measured (no GPU step at b = 1,024)" if t["met"] is None else
               f"{t['value_us']:.1f} µs ({'met' if t['met'] else 'NOT met'})")
    lines.append(f"live GPU step at b = 1,024, target <= {t['target_us']:g} µs: {verdict}")
    return lines


__all__ = ["DEFAULT_LIVE_ACCOUNTS", "DEFAULT_LIVE_STEPS", "LIVE_TARGET_US", "TICK", "format_lines",
           "graph_lengths", "measure", "profile", "run", "tick_rows"]
