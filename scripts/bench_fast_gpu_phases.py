"""Phase 1 and the scan of the fast GPU engine, timed apart, against the per-step engine.

::

    python3 scripts/bench_fast_gpu_phases.py [--json FILE] [--steps T] [--accounts B]
        [--repeats N] [--cuda-repeats N] [--before DIR]

The GPU rows of ``bench engines`` that issue 4's two GPU targets are computed
from (``cuda`` per step, ``fast`` device-resident, ``fast phase 1``, the D2D
copy), without the slow CPU and sweep rows, plus each phase-2 kernel alone on
a single replay (S = 1, snapshot and norm params written): ``replay_scan_warp``
(what ``fast_gpu.run`` launches: the split chain, pipelined), the same built
with ``-DSCAN_WARP_SPLIT=0`` (the whole chain on lane 0), with
``-DSCAN_WARP_PIPELINE=0`` (the split chain one batch at a time) and with
``-DSCAN_WARP_PREDIVIDE=0``. With ``--before DIR`` (a directory holding older
``replay_scan.cu`` and ``replay_step_stats.cu`` with the same launch contract)
their phase 1 and ``replay_scan_warp`` are timed in the same run, for a
before/after on one device. Every variant's snapshot and phase-1 stats must equal the engine's bit
for bit, or the script fails instead of timing it.

Figures are medians of CUDA-event timings on device-resident data after a
warm-up; the machine is whatever GPU cupy sees.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np


def _median_seconds(cp, launch, repeats: int, before=None) -> tuple[float, list[float]]:
    from regime_dash.benchmarks import engines, timing

    once = engines._event_seconds(cp, launch, before=before)
    once()  # warm-up
    runs = timing.repeat(once, repeats, budget_s=60.0)
    return statistics.median(runs), runs


def _before_module(cp, directory: Path, layout):
    """The older kernels compiled as the loader compiles the current ones."""
    from regime_dash.engine import loader

    code = "".join(f'#line 1 "before/{name}"\n{(directory / name).read_text(encoding="utf-8")}\n'
                   for name in ("replay_step_stats.cu", "replay_scan.cu"))
    raw = cp.RawModule(code=code, options=(*loader.PARITY_OPTIONS, f"-I{loader.KERNEL_DIR}",
                                           *loader.defines(layout)))
    raw.compile()
    return raw


def main(argv: list[str] | None = None) -> int:
    from regime_dash.benchmarks import engines

    p = argparse.ArgumentParser(description=__doc__.split("::")[0].strip())
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--steps", type=int, default=engines.DEFAULT_STEPS)
    p.add_argument("--accounts", type=int, default=engines.DEFAULT_ACCOUNTS)
    p.add_argument("--repeats", type=int, default=20, help="timed runs of each fast row")
    p.add_argument("--cuda-repeats", type=int, default=3, help="timed runs of the per-step engine")
    p.add_argument("--before", type=Path, metavar="DIR", help="older kernels to time alongside")
    args = p.parse_args(argv)

    out: dict = {"params": vars(args) | {"before": str(args.before) if args.before else None},
                 "machine": engines.machine_info()}
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731

    try:
        _measure(args, out, say)
    finally:
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in out.items() if not k.endswith("_runs") and k != "machine"},
                     indent=1))
    return 0


def _measure(args, out: dict, say) -> None:
    """Fill ``out`` row by row (what was measured survives a later failure)."""
    from regime_dash.benchmarks import engines
    from regime_dash.core.config import RegimeConfig
    from regime_dash.engine import cuda, fast_gpu, initial_isv, loader, snapshot_indices
    from regime_dash.core.slots import DEFAULT_LAYOUT

    layout = DEFAULT_LAYOUT
    stream = engines.bench_stream(args.steps, args.accounts)
    isv0, boot = initial_isv(RegimeConfig(), None, layout)
    snap_idx = snapshot_indices(layout)
    t_steps, b = args.steps, args.accounts

    # the per-step engine, as bench engines times it (median of whole-stream runs)
    cuda.per_step_us(stream.slice(0, 64), isv0, boot, layout, snap_idx, graph=False, repeats=1)
    cuda_runs = [cuda.per_step_us(stream, isv0, boot, layout, snap_idx, graph=False, repeats=1)
                 * t_steps / 1e6 for _ in range(args.cuda_repeats)]
    out["cuda_per_step_s"] = statistics.median(cuda_runs)
    out["cuda_per_step_runs"] = cuda_runs
    say(f"cuda per step: {out['cuda_per_step_s']:.4f} s")

    # the fast engine's launch sequence on device-resident data (checked against fast_gpu.run)
    dev = engines._FastGpuDevice(stream, isv0, boot, layout, snap_idx)
    cp = dev.cp
    want = fast_gpu.run(stream, isv0, boot, layout, snap_idx)
    dev.check(want[0], want[2])
    out["fast_device_s"], out["fast_device_runs"] = _median_seconds(cp, dev.replay, args.repeats,
                                                                    before=dev.restore)
    out["phase1_s"], out["phase1_runs"] = _median_seconds(cp, dev.phase1, args.repeats)
    out["phase1_gb_per_s"] = dev.phase1_bytes / out["phase1_s"] / 1e9
    with cp.cuda.Stream(non_blocking=True):
        copy = engines._copy_roofline(cp, stream.rewards.nbytes + stream.lots.nbytes, args.repeats, 60.0)
    out["copy_gb_per_s"] = copy["gb_per_s"]
    out["ratio_fast_gpu_vs_cuda_per_step"] = out["cuda_per_step_s"] / out["fast_device_s"]
    out["ratio_phase1_vs_copy_bandwidth"] = out["phase1_gb_per_s"] / out["copy_gb_per_s"]
    say(f"fast device {out['fast_device_s'] * 1e3:.3f} ms, phase 1 {out['phase1_s'] * 1e3:.4f} ms "
        f"({out['phase1_gb_per_s']:.0f} GB/s), copy {out['copy_gb_per_s']:.0f} GB/s")

    # each scan kernel alone, S = 1, snapshot + norm params, on the raw stream's phase-1 stats
    dev.restore()
    dev.phase1()
    i32 = np.int32
    r_idx, r_code, r_src = (cp.asarray(a) for a in layout.reset_plan())
    p1 = dev.p1
    isv_d, boot_d = cp.asarray(isv0)[None, :], cp.asarray(boot)[None, :]
    isv_run = isv_d.copy()
    snap = cp.empty((1, t_steps, len(snap_idx)), np.float32)
    norm = cp.empty((t_steps, 4), np.float32)
    keep = cp.zeros(1, i32)
    head = lambda: (isv_run, boot_d, i32(1), i32(t_steps), i32(b), r_idx, r_code, r_src,  # noqa: E731
                    i32(len(r_idx)), p1.stats, p1.flat, p1.cooldown, p1.worst, p1.kelly_edge,
                    p1.tau_action, p1.boundary, keep, snap)
    reset = lambda: isv_run.__setitem__(Ellipsis, isv_d)  # noqa: E731
    want_snap = want[0].view(np.int32)

    def scan_row(name, kernel, grid, block, tail):
        def launch():
            kernel(grid, block, (*head(), *tail))
        reset()
        snap.fill(0)
        launch()
        if not np.array_equal(cp.asnumpy(snap[0]).view(np.int32), want_snap):
            raise RuntimeError(f"{name}: its snapshot differs from fast_gpu.run's")
        sec, runs = _median_seconds(cp, launch, args.repeats, before=reset)
        out[name + "_s"], out[name + "_runs"] = sec, runs
        say(f"{name}: {sec * 1e3:.3f} ms ({sec / t_steps * 1e9:.0f} ns/step)")

    mod = dev.mod
    scan_row("scan_warp", mod["replay_scan_warp"], (1,), (32,), (norm, i32(1)))
    # the same kernel in its other modes (replay_scan.cu): the whole chain on
    # lane 0, the split chain one batch at a time, and the two divisions by b
    # left to the chain
    for name, option in (("scan_warp_serial", "-DSCAN_WARP_SPLIT=0"),
                         ("scan_warp_unpipelined", "-DSCAN_WARP_PIPELINE=0"),
                         ("scan_warp_no_predivide", "-DSCAN_WARP_PREDIVIDE=0")):
        variant = fast_gpu.module(layout, (*loader.PARITY_OPTIONS, option))
        scan_row(name, variant["replay_scan_warp"], (1,), (32,), (norm, i32(1)))
    out["ratio_scan_serial_vs_split"] = out["scan_warp_serial_s"] / out["scan_warp_s"]

    if args.before is not None:
        _time_before(cp, args, layout, dev, out, scan_row, norm, say)


def _time_before(cp, args, layout, dev, out, scan_row, norm, say) -> None:
    """Phase 1 and the warp scan of the kernels in ``args.before``, checked against the current ones."""
    from regime_dash.engine import fast_gpu

    i32 = np.int32
    t_steps, b, p1 = args.steps, args.accounts, dev.p1
    old = _before_module(cp, args.before, layout)
    stats_new = cp.asnumpy(p1.stats).view(np.int32).copy()
    flat_new = cp.asnumpy(p1.flat).copy()
    shared = (fast_gpu.STATS_BLOCK * 3 + fast_gpu.STATS_BLOCK // 32) * 4
    old_p1 = old.get_function("replay_step_stats")

    def old_phase1():
        old_p1((t_steps,), (fast_gpu.STATS_BLOCK,), (dev.raw, dev.lots, i32(b), i32(t_steps),
                                                     p1.stats, p1.flat), shared_mem=shared)
    old_phase1()
    if not (np.array_equal(cp.asnumpy(p1.stats).view(np.int32), stats_new)
            and np.array_equal(cp.asnumpy(p1.flat), flat_new)):
        raise RuntimeError("before/replay_step_stats disagrees with the current phase 1")
    out["before_phase1_s"], out["before_phase1_runs"] = _median_seconds(cp, old_phase1, args.repeats)
    out["before_phase1_gb_per_s"] = dev.phase1_bytes / out["before_phase1_s"] / 1e9
    say(f"before phase 1: {out['before_phase1_s'] * 1e3:.4f} ms "
        f"({out['before_phase1_gb_per_s']:.0f} GB/s)")
    scan_row("before_scan_warp", old.get_function("replay_scan_warp"), (1,), (32,), (norm, i32(1)))
    out["ratio_scan_before_vs_now"] = out["before_scan_warp_s"] / out["scan_warp_s"]


if __name__ == "__main__":
    sys.exit(main())
