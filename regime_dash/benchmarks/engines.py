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
``sweep``                  :func:`regime_dash.sweep` with S configs, on each device here
D2D copy                   a device-to-device copy of the stream's rewards and lots: the roofline
live                       one live step of the GPU and the reference stepper, the market apart
                           (:mod:`regime_dash.benchmarks.live_step`; ``--live-only`` runs just these)

Every figure is the median of up to ``--repeats`` runs taken after a warm-up run
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
from typing import Any, Callable, Sequence

import numpy as np

from regime_dash.benchmarks.inputs import bench_stream
from regime_dash.benchmarks.timing import repeat, wall
from regime_dash.config import RegimeConfig
from regime_dash.streams import Stream

#: Targets of issue 4 / DESIGN.md, as ratios measured in one run.
RATIO_TARGETS = {
    "fast_gpu_vs_cuda_per_step": 300.0,
    "sweep_two_gpus_vs_one": 1.8,
    "phase1_vs_copy_bandwidth": 0.70,
    "fast_cpu_vs_reference": 20.0,
}
DEFAULT_STEPS = 25_000
DEFAULT_ACCOUNTS = 1_024
DEFAULT_SWEEP_SIZES = (1, 1_024, 16_384)
#: Sweep sizes on the GPU (issue 15: the throughput target is at S = 65,536).
DEFAULT_GPU_SWEEP_SIZES = (1_024, 16_384, 65_536)
#: The sweep size of the one-GPU vs two-GPU scale-out rows.
DEFAULT_SCALE_OUT_SIZE = 262_144
#: Scenario-steps/s target of the GPU sweep at S = 65,536 (issue 15).
GPU_SWEEP_TARGET = 2e10
#: The target printed next to a sweep row, by (device, S).
SWEEP_ROW_TARGETS = {("gpu", 65_536): ">= 2e10 scenario-steps/s (issue 15)",
                     ("cpu", 1_024): ">= 5x the pre-issue-15 CPU sweep (timed back to back: BENCHMARKS.md)"}


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
        self.p1 = fast_gpu._Phase1(cp, self.mod, stream, t_steps, b)
        self.isv0 = cp.asarray(isv0)[None, :]
        self.boot = cp.asarray(boot)[None, :]
        self.norm = cp.empty((t_steps, 4), np.float32)
        self.no_v = cp.zeros(1, np.float32)
        self.snap = None
        # phase 1 reads rewards and lots, writes 3 floats and 1 int per step
        self.phase1_bytes = stream.rewards.nbytes + stream.lots.nbytes + t_steps * 16

    def phase1(self) -> None:
        fg, i32 = self.fg, np.int32
        shared = (fg.STATS_BLOCK * 3 + fg.STATS_BLOCK // 32) * 4  # as fast_gpu._Phase1
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


def _copy_roofline(cp, nbytes: int, repeats: int, budget_s: float) -> dict[str, Any]:
    src = cp.empty(nbytes, dtype=np.uint8)
    dst = cp.empty(nbytes, dtype=np.uint8)
    src.fill(1)
    stream = cp.cuda.get_current_stream()

    def launch():
        dst.data.copy_from_device_async(src.data, nbytes, stream)

    once = _event_seconds(cp, launch)
    once()  # warm-up
    runs = repeat(once, repeats, budget_s)
    seconds = statistics.median(runs)
    return {"name": "D2D copy (roofline)", "device": "gpu", "status": "ok", "seconds": seconds,
            "runs": runs, "repeats": len(runs), "bytes_moved": 2 * nbytes,
            "gb_per_s": 2 * nbytes / seconds / 1e9}


def _sweep_kernel_row(stream: Stream, size: int, repeats: int, budget_s: float) -> dict[str, Any]:
    """``replay_sweep`` alone on device-resident inputs and rows (CUDA events): the GPU's share of a sweep."""
    import importlib

    from regime_dash.engine import fast_gpu, initial_isv, loader
    from regime_dash.slots import DEFAULT_LAYOUT

    sw = importlib.import_module("regime_dash.sweep")  # the package exports the function under that name
    layout = DEFAULT_LAYOUT
    cp = loader.cupy_module()
    mod = fast_gpu.module(layout)
    slots, values = sw.config_slot_values(sw.ConfigGrid.of(sweep_grid(size)).columns())  # the sweep row's grid
    isv0, boot = initial_isv(RegimeConfig(), None, layout)
    slot_idx = np.array([layout.index(s) for s in slots], np.int32)
    with cp.cuda.Stream(non_blocking=True):
        p1 = fast_gpu._Phase1(cp, mod, stream, stream.steps, stream.accounts)
        rows0, boots = fast_gpu._device_rows(cp, isv0, boot, slot_idx, values, np.zeros(0, np.int32))
        rows = rows0.copy()

        def before():
            rows[...] = rows0  # each run starts from the initial rows

        once = _event_seconds(cp, lambda: fast_gpu._launch_sweep(cp, mod, p1, layout, rows, boots, []), before)
        once()  # warm-up
        runs = repeat(once, repeats, budget_s)
    return _row(f"sweep kernel S={size}", "gpu", runs, stream.steps, scenarios=size,
                timing="replay_sweep alone, device-resident (CUDA events)", configs="grid")


def _scale_out_rows(stream: Stream, size: int, repeats: int, budget_s: float, gpu_reason: str | None,
                    add: Callable[[dict[str, Any]], dict[str, Any]], label: str = "", client: Any = None):
    """``sweep S=size`` of a grid on one GPU in-process, then through a local cluster of one worker per GPU.

    Both rows must give the same table (checked once); the cluster is started
    (or ``client``'s is used) and warmed up before its runs are timed, and stays up
    across them (as a client a user keeps open would). ``label`` tells rows of another T apart.
    """
    from regime_dash import distributed
    from regime_dash.sweep import sweep

    one_name = f"sweep S={size} (1 GPU){label}"
    two_name = f"sweep S={size} (GPUs over dask){label}"
    if gpu_reason is not None:
        return (add(_missing(one_name, "gpu", f"unavailable: {gpu_reason}", size)),
                add(_missing(two_name, "gpu", f"unavailable: {gpu_reason}", size)))
    grid = sweep_grid(size)
    small = sweep_grid(4096)

    def one():
        sweep(stream.slice(0, min(stream.steps, 64)), small, engine="fast", device="gpu")
        sweep(stream, grid, engine="fast", device="gpu")  # warm-up at full size (device pools)
        return _row(one_name, "gpu", repeat(wall(lambda: sweep(stream, grid, engine="fast", device="gpu")),
                                             repeats, budget_s), stream.steps, scenarios=size, gpus=1)

    one_row = add(_attempt(one_name, "gpu", one, size))
    n_gpu = distributed.gpu_count()
    if n_gpu < 2:
        return one_row, add(_missing(two_name, "gpu", f"unavailable: {n_gpu} GPU(s) here, 2 needed", size))

    def two():
        import distributed as dd

        with contextlib.ExitStack() as stack:
            nonlocal client
            if client is None:
                cluster = stack.enter_context(distributed.local_cluster())
                client = stack.enter_context(dd.Client(cluster))
            client.wait_for_workers(n_gpu, timeout=120)
            want = sweep(stream, small, engine="fast", device="gpu").table
            got = sweep(stream, small, engine="fast", device="gpu", scheduler=client).table
            if not want.equals(got):
                raise RuntimeError("the dask sweep's table differs from the in-process one")
            sweep(stream, grid, engine="fast", device="gpu", scheduler=client)  # warm-up at full size
            runs = repeat(wall(lambda: sweep(stream, grid, engine="fast", device="gpu", scheduler=client)),
                          repeats, budget_s)
            return _row(two_name, "gpu", runs, stream.steps, scenarios=size, gpus=n_gpu,
                        workers=distributed.worker_count(client),
                        target=">= 1.8x the 1-GPU row (issue 15)" if not label else None)

    return one_row, add(_attempt(two_name, "gpu", two, size))


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


def _scale_out_section(stream: Stream, extra_steps: Sequence[int], accounts: int, seed: int, size: int,
                       repeats: int, budget_s: float, gpu_reason: str | None,
                       add: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The scale-out rows at ``stream``'s T (the target's) and at each of ``extra_steps``; their ratios.

    ``sweep_two_gpus_vs_one`` is the ratio at ``stream``'s T, ``sweep_two_gpus_vs_one_T=<T>``
    the ratio at each extra T; ``..._pinned...`` the same with the stream pinned once
    (:func:`regime_dash.engine.staged_phase1.pinned`). Each is shown against the target, 1.8.
    """
    if not size:
        return {"sweep_two_gpus_vs_one": {"value": None, "target": RATIO_TARGETS.get("sweep_two_gpus_vs_one"),
                                          "met": None, "status": "not measured: --scale-out-size 0"}}
    with contextlib.ExitStack() as stack:
        # one cluster for every two-GPU row: a cluster started per row measured erratic in its first rows
        client = _cluster_client(stack) if gpu_reason is None else None
        return _scale_out_ratios(stream, extra_steps, accounts, seed, size, repeats, budget_s, gpu_reason, add,
                                 client)


def _cluster_client(stack: contextlib.ExitStack) -> Any:
    """A client of a local cluster of one worker per GPU, closed with ``stack``; None with fewer than two GPUs."""
    from regime_dash import distributed

    if distributed.gpu_count() < 2:
        return None
    try:
        import distributed as dd

        return stack.enter_context(dd.Client(stack.enter_context(distributed.local_cluster())))
    except Exception:  # each two-GPU row then starts its own and reports why it could not
        return None


def _scale_out_ratios(stream, extra_steps, accounts, seed, size, repeats, budget_s, gpu_reason, add,
                      client) -> dict[str, dict[str, Any]]:
    """:func:`_scale_out_section`'s rows and ratios, the two-GPU rows on ``client`` (each its own cluster if None)."""
    out = {}
    for t in (None, *extra_steps):
        data = stream if t is None else bench_stream(t, accounts, seed)
        label = "" if t is None else f", T={t:,}"
        suffix = "" if t is None else f"_T={t}"
        one, two = _scale_out_rows(data, size, repeats, budget_s, gpu_reason, add, label=label, client=client)
        out[f"sweep_two_gpus_vs_one{suffix}"] = _ratio("sweep_two_gpus_vs_one", two, one)
        # the same sweeps of the stream pinned once (staged_phase1.pinned): phase 1 then reads it
        # over the PCIe links with no staging copy, which is what bounds it otherwise
        pin_row = _attempt(f"pin the stream once{label}", "gpu", lambda: _pinned_stream(data, label))
        add({k: v for k, v in pin_row.items() if k != "stream"})
        if pin_row.get("stream") is not None:
            data = pin_row["stream"]
            one, two = _scale_out_rows(data, size, repeats, budget_s, gpu_reason, add,
                                       label=f"{label}, pinned stream", client=client)
            out[f"sweep_two_gpus_vs_one_pinned{suffix}"] = _ratio("sweep_two_gpus_vs_one", two, one)
        else:
            out[f"sweep_two_gpus_vs_one_pinned{suffix}"] = _ratio("sweep_two_gpus_vs_one", None, None)
        del data
    return out


def _pinned_stream(stream: Stream, label: str) -> dict[str, Any]:
    """The row of how long pinning ``stream`` took (:func:`staged_phase1.pinned`), the pinned stream under ``stream``."""
    from regime_dash.engine import staged_phase1

    t0 = time.perf_counter()
    out = staged_phase1.pinned(stream)
    return _row(f"pin the stream once{label}", "gpu", [time.perf_counter() - t0], stream.steps,
                timing="copy of rewards and lots into page-locked memory, once per stream", stream=out)


# ---- the benchmark ------------------------------------------------------------------
def run(steps: int = DEFAULT_STEPS, accounts: int = DEFAULT_ACCOUNTS, json_path: str | Path | None = None,
        repeats: int = 5, sweep_sizes: tuple[int, ...] = DEFAULT_SWEEP_SIZES, budget_s: float = 120.0,
        seed: int = 0, log: Callable[[str], None] | None = None,
        gpu_sweep_sizes: tuple[int, ...] = DEFAULT_GPU_SWEEP_SIZES,
        scale_out_size: int = DEFAULT_SCALE_OUT_SIZE, live_accounts: tuple[int, ...] = (1_024, 64),
        live_steps: int = 2_000, live_only: bool = False, scale_out_steps: int | Sequence[int] = 0,
        scale_out_only: bool = False) -> dict[str, Any]:
    """Time every engine on one synthetic stream; return (and optionally write) the figures.

    Parameters
    ----------
    steps, accounts
        Stream size T × b.
    json_path
        Also write the result as JSON here.
    repeats
        Timed runs per row (after one warm-up run); the median is reported.
    sweep_sizes, gpu_sweep_sizes
        Config counts S of the CPU and GPU sweep rows.
    scale_out_size
        S of the scale-out rows: the GPU sweep in-process on one GPU, and through a
        local dask cluster of one worker per GPU (the cluster started before timing),
        where there are two GPUs or more and ``distributed`` imports; 0 skips them.
    scale_out_steps
        T (or several), each > 0: the scale-out rows again on a stream of that many
        steps (extra rows, labelled with their T: the per-call costs of a sweep grow
        with S, its GPU work with S × T); 0 for none.
    scale_out_only
        Take only the scale-out rows (at ``steps`` and at ``scale_out_steps``) and
        their ratios: no other engine row, no live rows.
    live_accounts, live_steps, live_only
        b of the live rows (empty skips them), steps each times, and whether to run only them.
    budget_s
        A row stops repeating once its runs have taken this long (at least one run).
    seed
        Seed of :func:`bench_stream`.
    log
        Called with a line as each row finishes (progress); silent if None.

    Returns
    -------
    dict
        ``machine``, ``params``, ``rows`` (one per timing: median ``seconds``, all
        ``runs``, ``per_step_us``, ``scenario_steps_per_s``, ``status``),
        ``bandwidth`` and ``ratios`` (each with its target and whether it was met,
        or why it could not be computed).
    """
    from regime_dash.engine import cuda, fast, fast_gpu, initial_isv, loader, reference, snapshot_indices
    from regime_dash.errors import ValidationError
    from regime_dash.slots import DEFAULT_LAYOUT
    from regime_dash.sweep import expand_configs, sweep

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
    say = log or (lambda line: None)
    extra_steps = _steps_list(scale_out_steps)
    if scale_out_only:
        rows_only: list[dict[str, Any]] = []

        def keep_row(row: dict[str, Any]) -> dict[str, Any]:
            rows_only.append(row)
            say(f"{row['name']} [{row['device']}]: " + (f"{row['seconds']:.4g} s" if row["seconds"] is not None
                                                        else row["status"]))
            return row

        ratios = _scale_out_section(bench_stream(steps, accounts, seed), extra_steps, accounts, seed,
                                    scale_out_size, repeats, budget_s, loader.available(), keep_row)
        return _write({"benchmark": "engines", "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "machine": machine_info(),
                       "params": {"steps": steps, "accounts": accounts, "repeats": repeats,
                                  "scale_out_size": scale_out_size, "scale_out_steps": list(extra_steps),
                                  "scale_out_only": True, "budget_s": budget_s, "seed": seed,
                                  "statistic": "median after warm-up"},
                       "rows": rows_only, "ratios": ratios, "live": None}, json_path)
    from regime_dash.benchmarks import live_step

    live_accounts = tuple(int(b) for b in live_accounts if b)  # 0 leaves the live rows out
    if live_accounts and (any(b < 0 for b in live_accounts) or live_steps < 1):
        raise ValidationError(f"live accounts must be >= 0 and live steps >= 1, got {live_accounts!r}, "
                              f"{live_steps!r}", field="live_accounts", value=(live_accounts, live_steps))
    live = live_step.run(live_accounts, live_steps, seed, say) if live_accounts else None
    if live_only:
        return _write({"benchmark": "engines", "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "machine": machine_info(), "params": {"live_accounts": list(live_accounts),
                                                             "live_steps": live_steps, "seed": seed},
                       "rows": [], "ratios": {}, "live": live}, json_path)
    layout = DEFAULT_LAYOUT
    stream = bench_stream(steps, accounts, seed)
    warm = stream.slice(0, min(steps, 64))
    isv0, boot = initial_isv(RegimeConfig(), None, layout)
    snap_idx = snapshot_indices(layout)
    rows: list[dict[str, Any]] = []

    no_gpu = loader.available()
    if no_gpu is not None:
        say("GPU rows skipped: no usable GPU here (the table says why)")

    def add(row: dict[str, Any]) -> dict[str, Any]:
        rows.append(row)
        if not gpu_skipped(row, no_gpu):  # said once above
            fig = f"{row['seconds']:.4g} s" if row["seconds"] is not None else row["status"]
            say(f"{row['name']} [{row['device']}]: {fig}")
        return row

    # ---- CPU ----
    def reference_row():
        reference.run(warm, isv0, boot, layout, snap_idx)
        return _row("reference", "cpu", repeat(wall(lambda: reference.run(stream, isv0, boot, layout, snap_idx)),
                                                repeats, budget_s), steps)

    add(reference_row())

    def fast_phase1_row():
        fast.step_stats(stream)  # warm-up: loads (or compiles) the kernels
        return _row("fast phase 1", "cpu", repeat(wall(lambda: fast.step_stats(stream)), repeats, budget_s),
                    steps)

    def fast_cpu_row():
        fast.run_cpu(stream, isv0, boot, layout, snap_idx)
        return _row("fast", "cpu", repeat(wall(lambda: fast.run_cpu(stream, isv0, boot, layout, snap_idx)),
                                           repeats, budget_s), steps)

    add(_attempt("fast phase 1", "cpu", fast_phase1_row))
    add(_attempt("fast", "cpu", fast_cpu_row))

    # ---- GPU ----
    gpu_reason = loader.available()

    def gpu_row(name: str, make: Callable[[], dict[str, Any]], scenarios: int = 1) -> dict[str, Any]:
        if gpu_reason is not None:
            return add(_missing(name, "gpu", f"unavailable: {gpu_reason}", scenarios))
        return add(_attempt(name, "gpu", make, scenarios))

    def cuda_row(graph: bool):
        def make():
            cuda.per_step_us(warm, isv0, boot, layout, snap_idx, graph=graph, repeats=1)  # compile
            runs = repeat(lambda: cuda.per_step_us(stream, isv0, boot, layout, snap_idx, graph=graph,
                                                    repeats=1) * steps / 1e6, repeats, budget_s)
            return _row("cuda per step" + (" (graph)" if graph else ""), "gpu", runs, steps)
        return make

    cuda_plain = gpu_row("cuda per step", cuda_row(False))
    cuda_graph = gpu_row("cuda per step (graph)", cuda_row(True))

    device: dict[str, Any] = {}

    def fast_gpu_device_row():
        dev = _FastGpuDevice(stream, isv0, boot, layout, snap_idx)
        want = fast_gpu.run(stream, isv0, boot, layout, snap_idx)
        dev.check(want[0], want[2])  # also the warm-up
        device["dev"] = dev
        once = _event_seconds(dev.cp, dev.replay, before=dev.restore)
        return _row("fast", "gpu", repeat(once, repeats, budget_s), steps,
                    timing="device-resident (CUDA events)")

    fast_dev = gpu_row("fast", fast_gpu_device_row)

    def phase1_row():
        dev = device.get("dev")
        if dev is None:
            raise RuntimeError("the device-resident fast GPU row failed")
        once = _event_seconds(dev.cp, dev.phase1)
        once()
        runs = repeat(once, repeats, budget_s)
        row = _row("fast phase 1", "gpu", runs, steps, bytes_moved=dev.phase1_bytes)
        row["gb_per_s"] = dev.phase1_bytes / row["seconds"] / 1e9
        return row

    phase1_gpu = gpu_row("fast phase 1", phase1_row)

    def fast_gpu_e2e_row():
        fast_gpu.run(stream, isv0, boot, layout, snap_idx)
        return _row("fast end to end", "gpu", repeat(wall(
            lambda: fast_gpu.run(stream, isv0, boot, layout, snap_idx)), repeats, budget_s), steps,
            timing="host arrays in and out (perf_counter)")

    gpu_row("fast end to end", fast_gpu_e2e_row)

    def copy_row():
        cp = loader.cupy_module()
        with cp.cuda.Stream(non_blocking=True):
            return _copy_roofline(cp, stream.rewards.nbytes + stream.lots.nbytes, repeats, budget_s)

    copy = gpu_row("D2D copy (roofline)", copy_row)

    def upload_row(name: str, fn: Callable[[], Any]):
        def make():
            fn()  # warm-up: compile, pinned pool
            return _row(name, "gpu", repeat(wall(fn), repeats, budget_s), steps,
                        bytes_moved=stream.rewards.nbytes + stream.lots.nbytes,
                        timing="host arrays in, [T] statistics out (perf_counter)")
        return make

    from regime_dash.engine import staged_phase1

    for name, fn in (("phase 1 from host, pageable", lambda: fast_gpu.step_stats(stream)),
                     ("phase 1 from host, pinned chunks", lambda: staged_phase1.step_stats(stream))):
        row = gpu_row(name, upload_row(name, fn))
        if row.get("seconds"):
            row["gb_per_s"] = row["bytes_moved"] / row["seconds"] / 1e9

    # ---- sweeps ----
    devices = ["cpu"] + (["gpu"] if gpu_reason is None else [])
    for dev_name in devices:
        dev_sizes = sizes if dev_name == "cpu" else gpu_sizes
        def warm_sweep(d=dev_name):
            sweep(warm, sweep_configs(2), engine="fast", device=d)
        try:
            warm_sweep()
        except Exception as exc:  # reported on each row below
            for s in dev_sizes:
                add(_missing(f"sweep S={s}", dev_name, f"error: {type(exc).__name__}: {exc}", s))
            continue
        for s in dev_sizes:
            grid = sweep_grid(s)

            def make(grid=grid, s=s, d=dev_name):
                runs = repeat(wall(lambda: sweep(stream, grid, engine="fast", device=d)), repeats, budget_s)
                return _row(f"sweep S={s}", d, runs, steps, scenarios=s, configs="grid",
                            target=SWEEP_ROW_TARGETS.get((d, s)))
            add(_attempt(f"sweep S={s}", dev_name, make, s))
        if dev_sizes:  # the same sweep given as a list of RegimeConfig objects
            big_s = max(dev_sizes)
            configs = expand_configs(sweep_grid(big_s))

            def make_list(configs=configs, s=big_s, d=dev_name):
                runs = repeat(wall(lambda: sweep(stream, configs, engine="fast", device=d)), repeats, budget_s)
                return _row(f"sweep S={s} (list)", d, runs, steps, scenarios=s, configs="list")
            add(_attempt(f"sweep S={big_s} (list)", dev_name, make_list, big_s))
    if gpu_reason is not None:
        for s in gpu_sizes:
            add(_missing(f"sweep S={s}", "gpu", f"unavailable: {gpu_reason}", s))
        if gpu_sizes:
            add(_missing(f"sweep S={max(gpu_sizes)} (list)", "gpu", f"unavailable: {gpu_reason}", max(gpu_sizes)))
    kernel = None
    if gpu_sizes:
        big_s = max(gpu_sizes)
        kernel = gpu_row(f"sweep kernel S={big_s}",
                         lambda: _sweep_kernel_row(stream, big_s, repeats, budget_s), big_s)
    scale_ratios = _scale_out_section(stream, extra_steps, accounts, seed, scale_out_size, repeats, budget_s,
                                      gpu_reason, add)

    # ---- ratios, from this run's figures only ----
    by = {(r["name"], r["device"]): r for r in rows}

    ratios = {
        "fast_cpu_vs_reference": _ratio("fast_cpu_vs_reference", by.get(("fast", "cpu")),
                                        by.get(("reference", "cpu"))),
        "fast_gpu_vs_cuda_per_step": _ratio("fast_gpu_vs_cuda_per_step", fast_dev, cuda_plain),
        "fast_gpu_vs_cuda_graph": _ratio("fast_gpu_vs_cuda_graph", fast_dev, cuda_graph),
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
    k_sps = None if kernel is None else kernel.get("scenario_steps_per_s")
    ratios["gpu_sweep_kernel_scenario_steps_per_s"] = {
        "value": k_sps, "target": None, "met": None,
        "status": "ok" if k_sps is not None else "not measured: no sweep kernel row"}
    bandwidth = {"phase1_gb_per_s": phase1_gpu.get("gb_per_s"), "copy_gb_per_s": copy.get("gb_per_s"),
                 "phase1_bytes_moved": phase1_gpu.get("bytes_moved"), "copy_bytes_moved": copy.get("bytes_moved"),
                 "definition": "DRAM bytes moved / median seconds; the copy reads and writes "
                               "rewards+lots, phase 1 reads them and writes 16 B per step"}
    result = {
        "benchmark": "engines",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine_info(),
        "params": {"steps": steps, "accounts": accounts, "repeats": repeats, "sweep_sizes": list(sizes),
                   "gpu_sweep_sizes": list(gpu_sizes), "scale_out_size": scale_out_size,
                   "scale_out_steps": scale_out_steps,
                   "budget_s": budget_s, "seed": seed, "v_pred": False, "statistic": "median after warm-up"},
        "rows": rows,
        "bandwidth": bandwidth,
        "ratios": ratios,
        "live": live,
    }
    return _write(result, json_path)


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


# ---- CLI (the options are declared in regime_dash.cli.bench) ----------------------
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
