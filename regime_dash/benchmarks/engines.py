"""Replay-engine benchmark: ``python -m regime_dash bench engines``.

::

    python -m regime_dash bench engines [--json FILE] [--steps T] [--accounts B]
        [--repeats N] [--sweep-sizes 1,1024,16384] [--budget SECONDS] [--seed S]

On one synthetic stream (T = 25,000 steps × b = 1,024 accounts by default; see
:func:`bench_stream`) it times, in one process:

``reference``              the NumPy oracle (:func:`reference.run`)
``fast`` CPU               phase 1 + scan + normalize with numba; phase 1 alone too
``cuda`` per step          the spec kernels launched per step, without and with a CUDA graph
                           (:func:`cuda.per_step_us`: device time, stream already on the device)
``fast`` GPU device        phase 1 + scan + normalize launched on device-resident data
                           (CUDA events), the like-for-like partner of ``cuda`` per step
``fast`` GPU end to end    ``fast_gpu.run``: host arrays in, host arrays out
``sweep``                  :func:`regime_dash.runs.sweeps` with S configs, on each device here
D2D copy                   a device-to-device copy of the stream's rewards and lots: the roofline
live                       one live step of the GPU and the reference stepper, the market apart
                           (:mod:`regime_dash.benchmarks.live_step`; ``--live-only`` runs just these)

The rows are declared as data (:func:`engine_rows`: a :class:`BenchRow` each, its name,
device, setup and target); the setup builds the row's inputs, warms it up and hands back
its timed call (:class:`Timed`), and one runner (:func:`measure`) times every row the same
way. Every figure is the median of up to ``--repeats`` runs taken after a warm-up run
(so JIT and NVRTC compile time is not counted); a row stops repeating once its
runs have used ``--budget`` seconds, and says how many it took. Ratios are
computed only from figures measured in this run. Rows that cannot run here say
``unavailable: <reason>``; nothing is estimated.

Bandwidth counts DRAM bytes moved: the copy reads and writes the stream's
rewards and lots (2 × bytes), phase 1 reads them once and writes 16 bytes per
step. Phase 1 at 100 % of copy bandwidth moves bytes as fast as the copy does.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field
from typing import Any, Callable, Sequence

import numpy as np

from regime_dash.benchmarks.engine_defaults import (DEFAULT_ACCOUNTS, DEFAULT_GPU_SWEEP_SIZES,  # noqa: F401
                                                     DEFAULT_SCALE_OUT_SIZE, DEFAULT_STEPS, DEFAULT_SWEEP_SIZES)
from regime_dash.benchmarks.inputs import bench_stream
from regime_dash.benchmarks.timing import repeat, timed, wall
from regime_dash.core.config import RegimeConfig
from regime_dash.core.streams import Stream

#: Targets read as ratios of figures measured in one run.
RATIO_TARGETS = {
    "fast_gpu_vs_cuda_per_step": 300.0,
    "sweep_two_gpus_vs_one": 1.8,
    "phase1_vs_copy_bandwidth": 0.70,
    "fast_cpu_vs_reference": 20.0,
}
#: Scenario-steps/s target of the GPU sweep at S = 65,536.
GPU_SWEEP_TARGET = 2e10
#: The target printed next to a sweep row, by (device, S).
SWEEP_ROW_TARGETS = {("gpu", 65_536): ">= 2e10 scenario-steps/s",
                     ("cpu", 1_024): ">= 5x the CPU sweep before the sweep-kernel rewrite (timed back to back: BENCHMARKS.md)"}


# ---- inputs ------------------------------------------------------------------------
def sweep_grid(n: int) -> dict[str, list[float]]:
    """A grid ``{max_duration: ..., eps_min: ...}`` of exactly ``n`` configs: what a user sweeping passes.

    ``max_duration`` takes the largest divisor of ``n`` up to 1,024 values (50, 51, ...),
    ``eps_min`` the rest, evenly in [0, 0.5).
    """
    a = max(d for d in range(1, min(n, 1024) + 1) if n % d == 0)
    m = n // a
    return {"max_duration": [50.0 + k for k in range(a)], "eps_min": [0.5 * k / m for k in range(m)]}


def sweep_configs(n: int) -> list[RegimeConfig]:
    """``n`` distinct configs (max duration, ε_min and the resurrection switch vary)."""
    return [RegimeConfig(max_duration=50 + k % 1000, eps_min=0.001 * ((k // 1000) % 50),
                         resurrection=(k // 50_000) % 2 == 0) for k in range(n)]


# ---- machine -------------------------------------------------------------------------
def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict[str, Any]:
    """CPU, GPU (through cupy, when there is one) and library versions."""
    import numba

    import regime_dash
    from regime_dash.engine import loader

    info: dict[str, Any] = {
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "numba_threads": numba.get_num_threads(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "regime_dash": regime_dash.__version__,
    }
    reason = loader.available()
    if reason is not None:
        info["gpu"] = f"unavailable: {reason}"
        return info
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"]
    info.update({
        "gpu": name.decode() if isinstance(name, bytes) else str(name),
        "gpu_count": cupy.cuda.runtime.getDeviceCount(),
        "gpu_memory_gib": round(props["totalGlobalMem"] / 2 ** 30, 1),
        "gpu_compute_capability": f"{props['major']}.{props['minor']}",
        "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
        "cuda_driver": cupy.cuda.runtime.driverGetVersion(),
        "cupy": cupy.__version__,
    })
    return info


def _row(name: str, device: str, runs: list[float], steps: int, scenarios: int = 1,
         **extra: Any) -> dict[str, Any]:
    seconds = statistics.median(runs)
    return {"name": name, "device": device, "status": "ok", "seconds": seconds, "runs": runs,
            "repeats": len(runs), "per_step_us": seconds / steps * 1e6, "scenarios": scenarios,
            "scenario_steps_per_s": scenarios * steps / seconds if seconds > 0 else None, **extra}


def _missing(name: str, device: str, status: str, scenarios: int = 1) -> dict[str, Any]:
    return {"name": name, "device": device, "status": status, "seconds": None, "runs": [],
            "repeats": 0, "per_step_us": None, "scenarios": scenarios, "scenario_steps_per_s": None}


def _attempt(name: str, device: str, make_row: Callable[[], dict[str, Any]],
             scenarios: int = 1) -> dict[str, Any]:
    """``make_row()``, or a row saying why it could not be measured."""
    from regime_dash.errors import EngineUnavailable

    try:
        return make_row()
    except EngineUnavailable as exc:
        return _missing(name, device, f"unavailable: {exc}", scenarios)
    except Exception as exc:  # a benchmark reports a failed row and goes on with the others
        return _missing(name, device, f"error: {type(exc).__name__}: {exc}", scenarios)


# ---- GPU pieces -------------------------------------------------------------------------
def _event_seconds(cp, launch: Callable[[], Any], before: Callable[[], Any] | None = None) -> Callable[[], float]:
    """A ``once`` timing ``launch`` on the current CUDA stream with events (``before`` runs untimed)."""
    def once() -> float:
        if before is not None:
            before()
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        launch()
        stop.record()
        stop.synchronize()
        return cp.cuda.get_elapsed_time(start, stop) / 1e3
    return once


class _FastGpuDevice:
    """fast_gpu's launch sequence on device-resident data, for timing without host transfers.

    Mirrors ``fast_gpu.run`` (phase 1, the scan, Pass 3) with the stream already
    on the device; :meth:`check` compares its snapshot with ``fast_gpu.run`` bit
    for bit, so a drift from the real launch sequence fails the row instead of
    timing something else.
    """

    def __init__(self, stream: Stream, isv0: np.ndarray, boot: np.ndarray, layout, snap_idx: np.ndarray):
        from regime_dash.engine import fast_gpu, loader

        if stream.v_pred is not None:
            raise ValueError("the device-resident timing covers streams without v_pred")
        self.cp = cp = loader.cupy_module()
        self.fg = fast_gpu
        self.mod = fast_gpu.module(layout)
        self.layout, self.snap_idx = layout, snap_idx
        t_steps, b = stream.rewards.shape
        self.t_steps, self.b = t_steps, b
        self.raw = cp.asarray(stream.rewards)
        self.lots = cp.asarray(stream.lots)
        self.p1 = fast_gpu.DevicePhase1(cp, self.mod, stream, t_steps, b)
        self.isv0 = cp.asarray(isv0)[None, :]
        self.boot = cp.asarray(boot)[None, :]
        self.norm = cp.empty((t_steps, 4), np.float32)
        self.no_v = cp.zeros(1, np.float32)
        self.snap = None
        # phase 1 reads rewards and lots, writes 3 floats and 1 int per step
        self.phase1_bytes = stream.rewards.nbytes + stream.lots.nbytes + t_steps * 16

    def phase1(self) -> None:
        fg, i32 = self.fg, np.int32
        shared = (fg.STATS_BLOCK * 3 + fg.STATS_BLOCK // 32) * 4  # as fast_gpu.DevicePhase1
        self.mod["replay_step_stats"]((self.t_steps,), (fg.STATS_BLOCK,), (
            self.p1.rewards, self.lots, i32(self.b), i32(self.t_steps), self.p1.stats, self.p1.flat),
            shared_mem=shared)

    def replay(self) -> None:
        fg, i32 = self.fg, np.int32
        self.phase1()
        self.snap = fg._scan(self.cp, self.mod, self.p1, self.layout, self.snap_idx, self.isv0.copy(),
                             self.boot.copy(), np.zeros(1, np.int32), 1, norm_params=self.norm)
        total = self.t_steps * self.b
        grid = (min((total + fg.NORMALIZE_BLOCK - 1) // fg.NORMALIZE_BLOCK, 65535),)
        self.mod["replay_normalize"](grid, (fg.NORMALIZE_BLOCK,), (
            self.p1.rewards, self.no_v, i32(0), self.norm, i32(self.t_steps), i32(self.b)))

    def restore(self) -> None:
        """Put the raw rewards back (Pass 3 normalizes them in place)."""
        self.p1.rewards[...] = self.raw

    def check(self, want_snap: np.ndarray, want_normalized: np.ndarray) -> None:
        self.restore()
        self.replay()
        got = self.cp.asnumpy(self.snap[0])
        norm = self.cp.asnumpy(self.p1.rewards)
        if not (np.array_equal(got.view(np.int32), want_snap.view(np.int32))
                and np.array_equal(norm.view(np.int32), want_normalized.view(np.int32))):
            raise RuntimeError("the mirrored launch sequence disagrees with fast_gpu.run; "
                               "benchmarks/engines.py needs updating")


# ---- the declared rows and their runner ------------------------------------------------
@dataclass
class Timed:
    """A row's timed call, made ready (inputs built, warmed up) by its setup.

    ``once()`` runs the call once and returns its seconds (wall clock, or CUDA events);
    ``fields`` go into the row as they are; ``per_step`` is False for a row that is not a
    replay of the stream (the copy roofline: no µs/step); ``close`` ends what the setup
    opened for the runs (a CUDA stream, a cluster), once they are done.
    """

    once: Callable[[], float]
    fields: dict[str, Any] = dataclass_field(default_factory=dict)
    per_step: bool = True
    close: Callable[[], Any] | None = None


@dataclass(frozen=True)
class BenchRow:
    """One row of the table: its name and device, the setup that makes its timed call ready, its target."""

    name: str
    device: str
    setup: Callable[["Context"], Timed]
    target: str | None = None
    scenarios: int = 1


@dataclass
class Context:
    """What every row's setup reads: the stream, the engines' initial state, the repeat budget."""

    stream: Stream
    warm: Stream
    init: tuple[Any, ...]  # (isv0, boot, layout, snap_idx), as every engine takes them
    repeats: int
    budget_s: float
    gpu_reason: str | None
    state: dict[str, Any] = dataclass_field(default_factory=dict)  # what one row leaves for a later one

    @property
    def steps(self) -> int:
        return self.stream.steps

    def on(self, stream: Stream) -> "Context":
        """The same context on another stream (the scale-out rows at another T, or pinned)."""
        return replace(self, stream=stream, warm=stream.slice(0, min(stream.steps, 64)), state={})


def measure(row: BenchRow, ctx: Context) -> dict[str, Any]:
    """The runner: ``row``'s setup, then up to ``ctx.repeats`` timed runs within ``ctx.budget_s``, as a row dict
    (or a row saying why it could not be measured)."""
    if row.device == "gpu" and ctx.gpu_reason is not None:
        return _missing(row.name, "gpu", f"unavailable: {ctx.gpu_reason}", row.scenarios)

    def make() -> dict[str, Any]:
        timed = row.setup(ctx)
        try:
            runs = repeat(timed.once, ctx.repeats, ctx.budget_s)
        finally:
            if timed.close is not None:
                timed.close()
        return _figures(row, runs, ctx.steps, timed)

    return _attempt(row.name, row.device, make, row.scenarios)


def _figures(row: BenchRow, runs: list[float], steps: int, timed: Timed) -> dict[str, Any]:
    """The row dict of ``runs``; GB/s where the row says how many bytes it moves."""
    if timed.per_step:
        out = _row(row.name, row.device, runs, steps, row.scenarios, **timed.fields)
    else:
        out = {"name": row.name, "device": row.device, "status": "ok", "seconds": statistics.median(runs),
               "runs": runs, "repeats": len(runs), **timed.fields}
    if out.get("bytes_moved") and out["seconds"]:
        out["gb_per_s"] = out["bytes_moved"] / out["seconds"] / 1e9
    if row.target is not None or "target" in timed.fields:
        out["target"] = row.target
    return out


def _walled(fn: Callable[[], Any], warm: Callable[[], Any] | None = None, **fields: Any) -> Timed:
    """``fn`` timed by the wall clock, after one untimed call of ``warm`` (``fn`` itself by default)."""
    (warm or fn)()
    return Timed(wall(fn), fields)


def _inside(cm: Any, make: Callable[[], Timed]) -> Timed:
    """``make()`` run inside the context ``cm``, which stays open until the row's runs are done."""
    stack = contextlib.ExitStack()
    stack.enter_context(cm)
    try:
        timed = make()
    except BaseException:
        stack.close()
        raise
    return replace(timed, close=stack.close)


# ---- each row's setup ---------------------------------------------------------------
def _reference(ctx: Context) -> Timed:
    from regime_dash.engine import reference

    return _walled(lambda: reference.run(ctx.stream, *ctx.init), warm=lambda: reference.run(ctx.warm, *ctx.init))


def _fast_phase1_cpu(ctx: Context) -> Timed:
    from regime_dash.engine import fast

    return _walled(lambda: fast.step_stats(ctx.stream))  # the warm-up loads (or compiles) the kernels


def _fast_cpu(ctx: Context) -> Timed:
    from regime_dash.engine import fast

    return _walled(lambda: fast.run_cpu(ctx.stream, *ctx.init))


def _cuda_per_step(graph: bool) -> Callable[[Context], Timed]:
    def setup(ctx: Context) -> Timed:
        from regime_dash.engine import cuda

        cuda.per_step_us(ctx.warm, *ctx.init, graph=graph, repeats=1)  # compile
        return Timed(lambda: cuda.per_step_us(ctx.stream, *ctx.init, graph=graph, repeats=1) * ctx.steps / 1e6)
    return setup


def _fast_gpu_device(ctx: Context) -> Timed:
    from regime_dash.engine import fast_gpu

    dev = _FastGpuDevice(ctx.stream, *ctx.init)
    want = fast_gpu.run(ctx.stream, *ctx.init)
    dev.check(want[0], want[2])  # also the warm-up
    ctx.state["fast_gpu_device"] = dev  # the phase 1 row times its launch
    return Timed(_event_seconds(dev.cp, dev.replay, before=dev.restore), {"timing": "device-resident (CUDA events)"})


def _fast_phase1_gpu(ctx: Context) -> Timed:
    dev = ctx.state.get("fast_gpu_device")
    if dev is None:
        raise RuntimeError("the device-resident fast GPU row failed")
    once = _event_seconds(dev.cp, dev.phase1)
    once()
    return Timed(once, {"bytes_moved": dev.phase1_bytes})


def _fast_gpu_end_to_end(ctx: Context) -> Timed:
    from regime_dash.engine import fast_gpu

    return _walled(lambda: fast_gpu.run(ctx.stream, *ctx.init), timing="host arrays in and out (perf_counter)")


def _copy(ctx: Context) -> Timed:
    from regime_dash.engine import loader

    cp = loader.cupy_module()
    nbytes = ctx.stream.rewards.nbytes + ctx.stream.lots.nbytes
    return _inside(cp.cuda.Stream(non_blocking=True), lambda: _copy_timed(cp, nbytes))


def _phase1_from_host(staged: bool) -> Callable[[Context], Timed]:
    def setup(ctx: Context) -> Timed:
        from regime_dash.engine import fast_gpu, staged_phase1

        step_stats = staged_phase1.step_stats if staged else fast_gpu.step_stats
        return _walled(lambda: step_stats(ctx.stream),  # the warm-up compiles and fills the pinned pool
                       bytes_moved=ctx.stream.rewards.nbytes + ctx.stream.lots.nbytes,
                       timing="host arrays in, [T] statistics out (perf_counter)")
    return setup


def _warm_sweep(ctx: Context, device: str) -> None:
    """One small sweep per device before its rows (the kernels loaded); its failure fails each of them."""
    from regime_dash.runs.sweeps import sweep

    key = ("warm sweep", device)
    if key not in ctx.state:
        try:
            sweep(ctx.warm, sweep_configs(2), engine="fast", device=device)
            ctx.state[key] = None
        except Exception as exc:  # reported on each sweep row of the device
            ctx.state[key] = exc
    if ctx.state[key] is not None:
        raise ctx.state[key]


def _sweep(device: str, size: int, as_list: bool) -> Callable[[Context], Timed]:
    def setup(ctx: Context) -> Timed:
        from regime_dash.runs.sweeps import expand_configs, sweep

        _warm_sweep(ctx, device)
        configs = expand_configs(sweep_grid(size)) if as_list else sweep_grid(size)
        fields = {"configs": "list"} if as_list else {"configs": "grid", "target": None}
        return Timed(wall(lambda: sweep(ctx.stream, configs, engine="fast", device=device)), fields)
    return setup


def engine_rows(sizes: Sequence[int], gpu_sizes: Sequence[int]) -> list[BenchRow]:
    """The table of rows ``bench engines`` times, in order (the scale-out rows follow them)."""
    rows = [BenchRow("reference", "cpu", _reference),
            BenchRow("fast phase 1", "cpu", _fast_phase1_cpu),
            BenchRow("fast", "cpu", _fast_cpu),
            BenchRow("cuda per step", "gpu", _cuda_per_step(False)),
            BenchRow("cuda per step (graph)", "gpu", _cuda_per_step(True)),
            BenchRow("fast", "gpu", _fast_gpu_device),
            BenchRow("fast phase 1", "gpu", _fast_phase1_gpu),
            BenchRow("fast end to end", "gpu", _fast_gpu_end_to_end),
            BenchRow("D2D copy (roofline)", "gpu", _copy),
            BenchRow("phase 1 from host, pageable", "gpu", _phase1_from_host(False)),
            BenchRow("phase 1 from host, pinned chunks", "gpu", _phase1_from_host(True))]
    for device, dev_sizes in (("cpu", sizes), ("gpu", gpu_sizes)):
        rows += [BenchRow(f"sweep S={s}", device, _sweep(device, s, False), SWEEP_ROW_TARGETS.get((device, s)), s)
                 for s in dev_sizes]
        if dev_sizes:  # the largest sweep again, given as a list of RegimeConfig objects
            big = max(dev_sizes)
            rows.append(BenchRow(f"sweep S={big} (list)", device, _sweep(device, big, True), scenarios=big))
    if gpu_sizes:
        big = max(gpu_sizes)
        rows.append(BenchRow(f"sweep kernel S={big}", "gpu", _sweep_kernel(big), scenarios=big))
    return rows

def _copy_timed(cp, nbytes: int) -> Timed:
    """A device-to-device copy of ``nbytes`` on the current CUDA stream, warmed up: the roofline's timed call."""
    src = cp.empty(nbytes, dtype=np.uint8)
    dst = cp.empty(nbytes, dtype=np.uint8)
    src.fill(1)
    stream = cp.cuda.get_current_stream()
    once = _event_seconds(cp, lambda: dst.data.copy_from_device_async(src.data, nbytes, stream))
    once()  # warm-up
    return Timed(once, {"bytes_moved": 2 * nbytes}, per_step=False)


def _copy_roofline(cp, nbytes: int, repeats: int, budget_s: float) -> dict[str, Any]:
    """The ``D2D copy (roofline)`` row of ``nbytes`` on the current CUDA stream (for scripts that time it alone)."""
    timed = _copy_timed(cp, nbytes)
    return _figures(BenchRow("D2D copy (roofline)", "gpu", lambda ctx: timed), repeat(timed.once, repeats, budget_s),
                    1, timed)


def _sweep_kernel(size: int) -> Callable[[Context], Timed]:
    """``replay_sweep`` alone on device-resident inputs and rows (CUDA events): the GPU's share of a sweep."""
    def setup(ctx: Context) -> Timed:
        from regime_dash.engine import loader

        return _inside(loader.cupy_module().cuda.Stream(non_blocking=True), lambda: _sweep_kernel_timed(ctx, size))
    return setup


def _sweep_kernel_timed(ctx: Context, size: int) -> Timed:
    import importlib

    from regime_dash.engine import fast_gpu, initial_isv, loader

    sw = importlib.import_module("regime_dash.runs.sweeps")  # the package exports the function under that name
    layout = ctx.init[2]
    cp = loader.cupy_module()
    mod = fast_gpu.module(layout)
    slots, values = sw.config_slot_values(sw.ConfigGrid.of(sweep_grid(size)).columns())  # the sweep row's grid
    isv0, boot = initial_isv(RegimeConfig(), None, layout)
    slot_idx = np.array([layout.index(s) for s in slots], np.int32)
    stream = ctx.stream
    p1 = fast_gpu.DevicePhase1(cp, mod, stream, stream.steps, stream.accounts)
    rows0, boots = fast_gpu.device_rows(cp, isv0, boot, slot_idx, values, np.zeros(0, np.int32))
    rows = rows0.copy()

    def before():
        rows[...] = rows0  # each run starts from the initial rows

    once = _event_seconds(cp, lambda: fast_gpu.launch_sweep(cp, mod, p1, layout, rows, boots, []), before)
    once()  # warm-up
    return Timed(once, {"timing": "replay_sweep alone, device-resident (CUDA events)", "configs": "grid"})


def _one_gpu_sweep(grid: dict[str, list[float]], small: dict[str, list[float]]) -> Callable[[Context], Timed]:
    def setup(ctx: Context) -> Timed:
        from regime_dash.runs.sweeps import sweep

        sweep(ctx.warm, small, engine="fast", device="gpu")
        return _walled(lambda: sweep(ctx.stream, grid, engine="fast", device="gpu"), gpus=1)  # warm-up at full size
    return setup


def _dask_sweep(grid: dict[str, list[float]], small: dict[str, list[float]], client: Any,
                labelled: bool) -> Callable[[Context], Timed]:
    """The grid sweep through a local cluster of one worker per GPU (``client``'s, or its own if None)."""
    def setup(ctx: Context) -> Timed:
        from regime_dash.runs import scheduler as distributed
        from regime_dash.errors import EngineUnavailable

        n_gpu = distributed.gpu_count()
        if n_gpu < 2:
            raise EngineUnavailable(f"{n_gpu} GPU(s) here, 2 needed")
        stack = contextlib.ExitStack()
        return _inside(stack, lambda: _dask_timed(ctx, grid, small, client or stack.enter_context(
            distributed.connect("local")), n_gpu, labelled))  # as sweep(scheduler="local") makes it
    return setup


def _dask_timed(ctx: Context, grid, small, client: Any, n_gpu: int, labelled: bool) -> Timed:
    from regime_dash.runs import scheduler as distributed
    from regime_dash.runs.sweeps import sweep

    client.wait_for_workers(n_gpu, timeout=120)
    want = sweep(ctx.stream, small, engine="fast", device="gpu").table
    got = sweep(ctx.stream, small, engine="fast", device="gpu", scheduler=client).table
    if not want.equals(got):
        raise RuntimeError("the dask sweep's table differs from the in-process one")
    return _walled(lambda: sweep(ctx.stream, grid, engine="fast", device="gpu", scheduler=client),  # warm-up
                   gpus=n_gpu, workers=distributed.worker_count(client), target=None)


def _scale_out_rows(ctx: Context, size: int, add: Callable[[dict[str, Any]], dict[str, Any]], label: str = "",
                    client: Any = None):
    """``sweep S=size`` of a grid on one GPU in-process, then through a local cluster of one worker per GPU.

    Both rows must give the same table (checked once); the cluster is started
    (or ``client``'s is used) and warmed up before its runs are timed, and stays up
    across them (as a client a user keeps open would). ``label`` tells rows of another T apart.
    """
    grid, small = sweep_grid(size), sweep_grid(4096)
    one = BenchRow(f"sweep S={size} (1 GPU){label}", "gpu", _one_gpu_sweep(grid, small), scenarios=size)
    two = BenchRow(f"sweep S={size} (GPUs over dask){label}", "gpu", _dask_sweep(grid, small, client, bool(label)),
                   target=None if label else ">= 1.8x the 1-GPU row", scenarios=size)
    one_row = add(measure(one, ctx))
    return one_row, add(measure(two, ctx))

def _steps_list(scale_out_steps: int | Sequence[int]) -> tuple[int, ...]:
    """``scale_out_steps`` as a tuple of T > 0 (0 or an empty sequence: none)."""
    from regime_dash.errors import ValidationError

    values = (scale_out_steps,) if isinstance(scale_out_steps, int) else tuple(scale_out_steps)
    if any(isinstance(t, bool) or not isinstance(t, int) or t < 0 for t in values):
        raise ValidationError(f"scale-out steps must be ints >= 0, got {scale_out_steps!r}",
                              field="scale_out_steps", value=scale_out_steps)
    return tuple(t for t in values if t)


def _ratio(key: str, num: dict[str, Any] | None, den: dict[str, Any] | None, field: str = "seconds",
          invert: bool = True) -> dict[str, Any]:
    """``num`` vs ``den`` as a ratio row (den/num of ``field``, or num/den with ``invert=False``),
    with its target from :data:`RATIO_TARGETS`, or why it could not be computed."""
    target = RATIO_TARGETS.get(key)
    if num is None or den is None or num.get(field) is None or den.get(field) is None:
        missing = [f"{r['name']} [{r['device']}]" for r in (num, den) if r is not None and r.get(field) is None]
        return {"value": None, "target": target, "met": None,
                "status": "not measured: no figure for " + (", ".join(missing) or "a row")}
    value = den[field] / num[field] if invert else num[field] / den[field]
    return {"value": value, "target": target, "met": None if target is None else value >= target,
            "status": "ok"}


def _scale_out_section(ctx: Context, extra_steps: Sequence[int], accounts: int, seed: int, size: int,
                       add: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The scale-out rows at ``ctx.stream``'s T (the target's) and at each of ``extra_steps``; their ratios.

    ``sweep_two_gpus_vs_one`` is the ratio at the stream's T, ``sweep_two_gpus_vs_one_T=<T>``
    the ratio at each extra T; ``..._pinned...`` the same with the stream pinned once
    (:func:`regime_dash.engine.staged_phase1.pinned`). Each is shown against the target, 1.8.
    """
    if not size:
        return {"sweep_two_gpus_vs_one": {"value": None, "target": RATIO_TARGETS.get("sweep_two_gpus_vs_one"),
                                          "met": None, "status": "not measured: --scale-out-size 0"}}
    with contextlib.ExitStack() as stack:
        # one cluster for every two-GPU row: a cluster started per row measured erratic in its first rows
        client = _cluster_client(stack) if ctx.gpu_reason is None else None
        return _scale_out_ratios(ctx, extra_steps, accounts, seed, size, add, client)


def _cluster_client(stack: contextlib.ExitStack) -> Any:
    """A client of a local cluster of one worker per GPU, closed with ``stack``; None with fewer than two GPUs."""
    from regime_dash.runs import scheduler as distributed

    if distributed.gpu_count() < 2:
        return None
    try:
        return stack.enter_context(distributed.connect("local"))  # as sweep(scheduler="local") makes it
    except Exception:  # each two-GPU row then starts its own and reports why it could not
        return None


def _scale_out_ratios(ctx: Context, extra_steps, accounts, seed, size, add, client) -> dict[str, dict[str, Any]]:
    """:func:`_scale_out_section`'s rows and ratios, the two-GPU rows on ``client`` (each its own cluster if None)."""
    out = {}
    for t in (None, *extra_steps):
        data = ctx.stream if t is None else bench_stream(t, accounts, seed)
        label = "" if t is None else f", T={t:,}"
        suffix = "" if t is None else f"_T={t}"
        one, two = _scale_out_rows(ctx.on(data), size, add, label=label, client=client)
        out[f"sweep_two_gpus_vs_one{suffix}"] = _ratio("sweep_two_gpus_vs_one", two, one)
        # the same sweeps of the stream pinned once (staged_phase1.pinned): phase 1 then reads it
        # over the PCIe links with no staging copy, which is what bounds it otherwise
        pin_row = _attempt(f"pin the stream once{label}", "gpu", lambda: _pinned_stream(data, label))
        add({k: v for k, v in pin_row.items() if k != "stream"})
        if pin_row.get("stream") is not None:
            data = pin_row["stream"]
            one, two = _scale_out_rows(ctx.on(data), size, add, label=f"{label}, pinned stream", client=client)
            out[f"sweep_two_gpus_vs_one_pinned{suffix}"] = _ratio("sweep_two_gpus_vs_one", two, one)
        else:
            out[f"sweep_two_gpus_vs_one_pinned{suffix}"] = _ratio("sweep_two_gpus_vs_one", None, None)
        del data
    return out


def _pinned_stream(stream: Stream, label: str) -> dict[str, Any]:
    """The row of how long pinning ``stream`` took (:func:`staged_phase1.pinned`), the pinned stream under ``stream``."""
    from regime_dash.engine import staged_phase1

    seconds, out = timed(lambda: staged_phase1.pinned(stream))
    return _row(f"pin the stream once{label}", "gpu", [seconds], stream.steps,
                timing="copy of rewards and lots into page-locked memory, once per stream", stream=out)


def _ratios(rows: list[dict[str, Any]], sizes: Sequence[int], gpu_sizes: Sequence[int],
            scale_ratios: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The ratios and throughputs read against their targets, from this run's rows only."""
    by = {(r["name"], r["device"]): r for r in rows}
    fast_dev, phase1_gpu, copy = by.get(("fast", "gpu")), by.get(("fast phase 1", "gpu")), by.get(
        ("D2D copy (roofline)", "gpu"))
    ratios = {
        "fast_cpu_vs_reference": _ratio("fast_cpu_vs_reference", by.get(("fast", "cpu")),
                                        by.get(("reference", "cpu"))),
        "fast_gpu_vs_cuda_per_step": _ratio("fast_gpu_vs_cuda_per_step", fast_dev, by.get(("cuda per step", "gpu"))),
        "fast_gpu_vs_cuda_graph": _ratio("fast_gpu_vs_cuda_graph", fast_dev, by.get(("cuda per step (graph)", "gpu"))),
        "phase1_vs_copy_bandwidth": _ratio("phase1_vs_copy_bandwidth", phase1_gpu, copy, field="gb_per_s",
                                           invert=False),
        **scale_ratios,
    }
    ratios["phase1_pinned_vs_pageable"] = _ratio(
        "phase1_pinned_vs_pageable", by.get(("phase 1 from host, pinned chunks", "gpu")),
        by.get(("phase 1 from host, pageable", "gpu")))
    for dev_name, dev_sizes in (("cpu", sizes), ("gpu", gpu_sizes)):
        if dev_sizes:
            big_s = max(dev_sizes)
            ratios[f"sweep_{dev_name}_grid_vs_list"] = _ratio(
                f"sweep_{dev_name}_grid_vs_list", by.get((f"sweep S={big_s}", dev_name)),
                by.get((f"sweep S={big_s} (list)", dev_name)))
    big = by.get((f"sweep S={max(gpu_sizes)}", "gpu")) if gpu_sizes else None
    sps = None if big is None else big.get("scenario_steps_per_s")
    ratios["gpu_sweep_scenario_steps_per_s"] = {
        "value": sps, "target": GPU_SWEEP_TARGET, "met": None if sps is None else sps >= GPU_SWEEP_TARGET,
        "status": "ok" if sps is not None else f"not measured: no GPU sweep S={max(gpu_sizes, default=0)}"}
    kernel = by.get((f"sweep kernel S={max(gpu_sizes)}", "gpu")) if gpu_sizes else None
    k_sps = None if kernel is None else kernel.get("scenario_steps_per_s")
    ratios["gpu_sweep_kernel_scenario_steps_per_s"] = {
        "value": k_sps, "target": None, "met": None,
        "status": "ok" if k_sps is not None else "not measured: no sweep kernel row"}
    return ratios


def _bandwidth(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by = {(r["name"], r["device"]): r for r in rows}
    phase1, copy = by.get(("fast phase 1", "gpu"), {}), by.get(("D2D copy (roofline)", "gpu"), {})
    return {"phase1_gb_per_s": phase1.get("gb_per_s"), "copy_gb_per_s": copy.get("gb_per_s"),
            "phase1_bytes_moved": phase1.get("bytes_moved"), "copy_bytes_moved": copy.get("bytes_moved"),
            "definition": "DRAM bytes moved / median seconds; the copy reads and writes "
                          "rewards+lots, phase 1 reads them and writes 16 B per step"}


# ---- the benchmark ------------------------------------------------------------------
def _check_sizes(steps: int, accounts: int, repeats: int, budget_s: float, sweep_sizes: Sequence[int],
                 gpu_sweep_sizes: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The sweep sizes as ints, once every size and count is valid."""
    from regime_dash.errors import ValidationError

    for name, value in (("steps", steps), ("accounts", accounts), ("repeats", repeats)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValidationError(f"{name} must be an int >= 1, got {value!r}", field=name, value=value)
    if not budget_s > 0:
        raise ValidationError(f"budget_s must be > 0, got {budget_s!r}", field="budget_s", value=budget_s)
    sizes = tuple(int(s) for s in sweep_sizes)
    gpu_sizes = tuple(int(s) for s in gpu_sweep_sizes)
    if any(s < 1 for s in sizes + gpu_sizes):
        raise ValidationError(f"sweep sizes must be >= 1, got {sweep_sizes!r}", field="sweep_sizes",
                              value=sweep_sizes)
    return sizes, gpu_sizes


def _context(steps: int, accounts: int, seed: int, repeats: int, budget_s: float) -> Context:
    from regime_dash.engine import initial_isv, loader, snapshot_indices
    from regime_dash.core.slots import DEFAULT_LAYOUT

    stream = bench_stream(steps, accounts, seed)
    isv0, boot = initial_isv(RegimeConfig(), None, DEFAULT_LAYOUT)
    return Context(stream, stream.slice(0, min(steps, 64)), (isv0, boot, DEFAULT_LAYOUT, snapshot_indices(DEFAULT_LAYOUT)),
                   repeats, budget_s, loader.available())


def _collector(rows: list[dict[str, Any]], say: Callable[[str], None],
               no_gpu: str | None = None) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``add(row)``: keeps ``row`` and says its figure (the progress line); a row skipped only for want
    of a GPU (``no_gpu``, the reason) is not said again: :func:`run` said it once."""
    def add(row: dict[str, Any]) -> dict[str, Any]:
        rows.append(row)
        if not gpu_skipped(row, no_gpu):
            say(f"{row['name']} [{row['device']}]: " + (f"{row['seconds']:.4g} s" if row["seconds"] is not None
                                                        else row["status"]))
        return row
    return add


def _live(live_accounts: Sequence[int], live_steps: int, seed: int, say: Callable[[str], None]) -> Any:
    """The live stepper's rows (:mod:`regime_dash.benchmarks.live_step`), or None without accounts."""
    from regime_dash.benchmarks import live_step
    from regime_dash.errors import ValidationError

    live_accounts = tuple(int(b) for b in live_accounts if b)  # 0 leaves the live rows out
    if live_accounts and (any(b < 0 for b in live_accounts) or live_steps < 1):
        raise ValidationError(f"live accounts must be >= 0 and live steps >= 1, got {live_accounts!r}, "
                              f"{live_steps!r}", field="live_accounts", value=(live_accounts, live_steps))
    return live_step.run(live_accounts, live_steps, seed, say) if live_accounts else None


def _result(params: dict[str, Any], rows: list[dict[str, Any]], ratios: dict[str, Any], live: Any,
            bandwidth: dict[str, Any] | None = None) -> dict[str, Any]:
    out = {"benchmark": "engines", "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "machine": machine_info(), "params": params, "rows": rows}
    if bandwidth is not None:
        out["bandwidth"] = bandwidth
    return {**out, "ratios": ratios, "live": live}


def run(steps: int = DEFAULT_STEPS, accounts: int = DEFAULT_ACCOUNTS, json_path: str | Path | None = None,
        repeats: int = 5, sweep_sizes: tuple[int, ...] = DEFAULT_SWEEP_SIZES, budget_s: float = 120.0,
        seed: int = 0, log: Callable[[str], None] | None = None,
        gpu_sweep_sizes: tuple[int, ...] = DEFAULT_GPU_SWEEP_SIZES,
        scale_out_size: int = DEFAULT_SCALE_OUT_SIZE, live_accounts: tuple[int, ...] = (1_024, 64),
        live_steps: int = 2_000, live_only: bool = False, scale_out_steps: int | Sequence[int] = 0,
        scale_out_only: bool = False) -> dict[str, Any]:
    """Time every engine on one synthetic stream; return (and optionally write) the figures.

    ``steps`` × ``accounts`` is the stream (seed ``seed``); each row is the median of up to
    ``repeats`` runs after a warm-up, stopping once its runs have taken ``budget_s``.
    ``sweep_sizes`` / ``gpu_sweep_sizes`` are the S of the CPU and GPU sweep rows;
    ``scale_out_size`` the S of the one-GPU vs two-GPU rows (0 skips them), again at each T
    of ``scale_out_steps``; ``scale_out_only`` takes only those. ``live_accounts`` (empty
    skips them) and ``live_steps`` size the live rows, ``live_only`` takes only them.
    ``log`` gets a line as each row finishes. The result holds ``machine``, ``params``,
    ``rows`` (median ``seconds``, all ``runs``, ``per_step_us``, ``scenario_steps_per_s``,
    ``status``), ``bandwidth`` and ``ratios`` (each with its target and whether it was met,
    or why it could not be computed); ``json_path`` also gets it as JSON.
    """
    sizes, gpu_sizes = _check_sizes(steps, accounts, repeats, budget_s, sweep_sizes, gpu_sweep_sizes)
    say = log or (lambda line: None)
    extra_steps = _steps_list(scale_out_steps)
    rows: list[dict[str, Any]] = []
    from regime_dash.engine import loader

    no_gpu = loader.available()
    if no_gpu is not None:
        say("GPU rows skipped: no usable GPU here (the table says why)")
    add = _collector(rows, say, no_gpu)
    if scale_out_only:
        ratios = _scale_out_section(_context(steps, accounts, seed, repeats, budget_s), extra_steps, accounts, seed,
                                    scale_out_size, add)
        return _write(_result({"steps": steps, "accounts": accounts, "repeats": repeats,
                               "scale_out_size": scale_out_size, "scale_out_steps": list(extra_steps),
                               "scale_out_only": True, "budget_s": budget_s, "seed": seed,
                               "statistic": "median after warm-up"}, rows, ratios, None), json_path)
    live = _live(live_accounts, live_steps, seed, say)
    if live_only:
        return _write(_result({"live_accounts": [int(b) for b in live_accounts if b], "live_steps": live_steps,
                               "seed": seed}, [], {}, live), json_path)
    ctx = _context(steps, accounts, seed, repeats, budget_s)
    for row in engine_rows(sizes, gpu_sizes):
        add(measure(row, ctx))
    scale_ratios = _scale_out_section(ctx, extra_steps, accounts, seed, scale_out_size, add)
    params = {"steps": steps, "accounts": accounts, "repeats": repeats, "sweep_sizes": list(sizes),
              "gpu_sweep_sizes": list(gpu_sizes), "scale_out_size": scale_out_size,
              "scale_out_steps": scale_out_steps, "budget_s": budget_s, "seed": seed, "v_pred": False,
              "statistic": "median after warm-up"}
    return _write(_result(params, rows, _ratios(rows, sizes, gpu_sizes, scale_ratios), live, _bandwidth(rows)),
                  json_path)


def _write(result: dict[str, Any], json_path: str | Path | None) -> dict[str, Any]:
    if json_path is not None:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)  # e.g. the README's data/out/
        Path(json_path).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


# ---- text output ---------------------------------------------------------------------
def no_gpu_reason(result: dict[str, Any]) -> str | None:
    """Why this machine has no usable GPU (the machine line says it), or None where it has one."""
    gpu = str(result.get("machine", {}).get("gpu", ""))
    return gpu.removeprefix("unavailable: ") if gpu.startswith("unavailable: ") else None


def gpu_skipped(row: dict[str, Any], reason: str | None) -> bool:
    """A row left unmeasured only because the machine has no GPU (``reason``): said once, not per row."""
    return reason is not None and row.get("seconds") is None and reason in str(row.get("status", ""))


def _gpu_ratio(key: str, q: dict[str, Any]) -> bool:
    return q["value"] is None and ("gpu" in key or "[gpu]" in str(q.get("status", "")))


def _cell(value: float | None, spec: str, width: int) -> str:
    return (" " * width) if value is None else format(value, f"{width}{spec}")


def format_table(result: dict[str, Any]) -> str:
    """The figures as a text table, the ratios below it."""
    from regime_dash.benchmarks import live_step

    if not result["rows"]:  # --live-only
        return "\n".join(live_step.format_lines(result.get("live"))).lstrip("\n")
    p = result["params"]
    m = result["machine"]
    reason = no_gpu_reason(result)
    gpu = f"none usable ({reason}): the GPU rows and their ratios are skipped" if reason else m["gpu"]
    lines = [f"replay engines, T = {p['steps']:,} × b = {p['accounts']:,}; median of up to "
             f"{p['repeats']} runs after a warm-up",
             f"CPU: {m['cpu_model']} ({m['cpu_count']} cores, numba threads {m['numba_threads']}); "
             f"GPU: {gpu}", ""]
    w = max([24] + [len(r["name"]) for r in result["rows"]])
    header = (f"{'row':{w}s} {'device':6s} {'median s':>10s} {'µs/step':>10s} {'scen-steps/s':>13s} "
              f"{'GB/s':>8s} runs")
    lines += [header, "-" * len(header)]
    for r in result["rows"]:
        if gpu_skipped(r, reason):
            continue
        if r["status"] != "ok":
            lines.append(f"{r['name']:{w}s} {r['device']:6s} {r['status']}")
            continue
        lines.append(f"{r['name']:{w}s} {r['device']:6s} {_cell(r['seconds'], '.4g', 10)} "
                     f"{_cell(r.get('per_step_us'), '.4g', 10)} {_cell(r.get('scenario_steps_per_s'), '.4g', 13)} "
                     f"{_cell(r.get('gb_per_s'), '.1f', 8)} {r['repeats']:4d}"
                     + (f"   target {r['target']}" if r.get("target") else ""))
    lines.append("")
    for key, q in result["ratios"].items():
        if reason and _gpu_ratio(key, q):
            continue
        if q["value"] is None:
            lines.append(f"{key:38s} {q['status']}")
            continue
        unit = "" if key in ("phase1_vs_copy_bandwidth", "gpu_sweep_scenario_steps_per_s",
                             "gpu_sweep_kernel_scenario_steps_per_s") else "x"
        target = "" if q["target"] is None else (
            f"  (target >= {q['target']:g}{unit}: {'met' if q['met'] else 'NOT met'})")
        lines.append(f"{key:38s} {q['value']:.3g}{unit}{target}")
    lines += live_step.format_lines(result.get("live"), skip=lambda r: gpu_skipped(r, reason))
    return "\n".join(lines)


# ---- CLI (the options are declared in regime_dash.benchmarks.targets) ----------------------
def main(args: argparse.Namespace) -> int:
    """``bench engines``: run the benchmark and print its table (the JSON goes to ``--json``)."""
    result = run(args.steps, args.accounts, args.json, args.repeats, args.sweep_sizes, args.budget, args.seed,
                 log=lambda line: print(line, file=sys.stderr, flush=True),
                 gpu_sweep_sizes=args.gpu_sweep_sizes, scale_out_size=args.scale_out_size,
                 live_accounts=args.live_accounts, live_steps=args.live_steps, live_only=args.live_only,
                 scale_out_steps=args.scale_out_steps, scale_out_only=args.scale_out_only)
    if args.live_profile:
        from regime_dash.benchmarks import live_step

        Path(args.live_profile).write_text(live_step.profile(), encoding="utf-8")
    print(format_table(result))
    if args.json:
        print(f"wrote {args.json}", file=sys.stderr)
    return 0
