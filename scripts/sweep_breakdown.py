"""Where the time of a GPU sweep goes: the host link, phase 1's upload variants, the pieces of a shard, and dask.

    python scripts/sweep_breakdown.py [--steps T] [--sizes 65536,262144] [--dask] [--phase1-steps T2] [--json FILE]

Times, on the bench stream (``benchmarks.engines.bench_stream``), median of 5
after a warm-up unless said otherwise:

- the host link: a pinned host→device copy of the stream's bytes to each GPU
  alone and to all GPUs at once, and the host's pageable→pinned copy of the same
  bytes on 1, 8 and 16 threads (what bounds phase 1's upload: the link or the host);
  and the rewards page-locked in place (cudaHostRegister, whole and in four pieces
  on four threads) and copied from there;
- phase 1: pageable (``fast_gpu.step_stats``), and staged through pinned chunks
  (``staged_phase1.step_stats``) on 4, 8 and 12 threads, on one GPU or spread over
  every GPU (``devices=``); with ``--phase1-steps``, again at that T;
- per sweep size: the grid check, its columns, the slot plan, the pieces of one
  shard on the device (the per-step inputs up, the rows built, the kernel, the
  metrics finalized and packed, the copy back, and what the host packing cost
  before; then the same shard in one call), the table, and the whole in-process sweep;
- with ``--dask`` and two GPUs or more, a local cluster of one worker per GPU:
  the same shard pieces on each worker at once (half the configs each), a no-op
  round trip, and the whole sweep through it, each shard's compute time on its
  worker (dask's task stream; it includes the wait for phase 1).

A diagnostic, not the benchmark: ``python -m regime_dash bench engines`` is.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import statistics
import time

import numpy as np


def med(fn, n=5):
    fn()
    runs = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def link_ms(stream, n_gpu: int) -> dict:
    """Pinned H2D of the stream's rewards + lots bytes per GPU and on all at once; the host's pageable→pinned copy."""
    import cupy as cp

    nbytes = stream.rewards.nbytes + stream.lots.nbytes
    host = np.concatenate([stream.rewards.reshape(-1).view(np.uint8), stream.lots.reshape(-1).view(np.uint8)])
    mem = cp.cuda.alloc_pinned_memory(nbytes)
    pinned = np.frombuffer(mem, np.uint8, nbytes)
    pinned[...] = host
    dev = []
    for d in range(n_gpu):
        with cp.cuda.Device(d):
            dev.append(cp.empty(nbytes, np.uint8))
    out = {"bytes": nbytes}

    def h2d(d):
        with cp.cuda.Device(d), cp.cuda.Stream(non_blocking=True) as s:
            dev[d].data.copy_from_host_async(pinned.ctypes.data, nbytes, s)
            s.synchronize()

    for d in range(n_gpu):
        out[f"pinned H2D, GPU {d} alone"] = 1e3 * med(lambda d=d: h2d(d))
    if n_gpu > 1:
        with concurrent.futures.ThreadPoolExecutor(n_gpu) as pool:
            out["pinned H2D, all GPUs at once (each the same bytes)"] = 1e3 * med(
                lambda: list(pool.map(h2d, range(n_gpu))))
    for threads in (1, 8, 16):
        parts = np.array_split(np.arange(nbytes // (4 << 20) + 1), threads)
        step = 4 << 20

        def copy_part(idx):
            for k in idx:
                np.copyto(pinned[k * step:(k + 1) * step], host[k * step:(k + 1) * step])

        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            out[f"host pageable->pinned copy, {threads} threads"] = 1e3 * med(
                lambda: list(pool.map(copy_part, parts)))
    out["GB/s"] = {k: round(nbytes / (v / 1e3) / 1e9, 1) for k, v in out.items() if k != "bytes"}
    return out


def register_ms(stream) -> dict:
    """Page-locking the stream's rewards in place (cudaHostRegister) and copying straight from them: the
    alternative to staging through pinned buffers (no host copy), timed piece by piece."""
    import cupy as cp

    arr = stream.rewards
    out: dict = {"bytes": arr.nbytes}
    dev = cp.empty(arr.shape, np.float32)
    try:
        regs, copies, unregs = [], [], []
        for _ in range(4):
            t0 = time.perf_counter()
            cp.cuda.runtime.hostRegister(arr.ctypes.data, arr.nbytes, 0)
            t1 = time.perf_counter()
            with cp.cuda.Stream(non_blocking=True) as s:
                dev.data.copy_from_host_async(arr.ctypes.data, arr.nbytes, s)
                s.synchronize()
            t2 = time.perf_counter()
            cp.cuda.runtime.hostUnregister(arr.ctypes.data)
            t3 = time.perf_counter()
            regs.append(t1 - t0)
            copies.append(t2 - t1)
            unregs.append(t3 - t2)
        out.update({"register": 1e3 * statistics.median(regs[1:]), "copy from it": 1e3 * statistics.median(copies[1:]),
                    "unregister": 1e3 * statistics.median(unregs[1:])})
        # does registering scale over threads? four page-disjoint pieces, registered at once
        page = 4096
        lo = -(-arr.ctypes.data // page) * page
        size = (arr.ctypes.data + arr.nbytes - lo) // page // 4 * page
        pieces = [(lo + k * size, size) for k in range(4)]
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            t0 = time.perf_counter()
            list(pool.map(lambda r: cp.cuda.runtime.hostRegister(r[0], r[1], 0), pieces))
            t1 = time.perf_counter()
            list(pool.map(lambda r: cp.cuda.runtime.hostUnregister(r[0]), pieces))
            t2 = time.perf_counter()
        out.update({"register, 4 threads, 4 pieces": 1e3 * (t1 - t0), "unregister, 4 threads": 1e3 * (t2 - t1),
                    "bytes in the pieces": 4 * size})
    except Exception as exc:  # a diagnostic: say what failed and go on
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out


def phase1_variants(stream, n_gpu: int, pageable: bool = True) -> dict:
    """Phase 1 from host memory: pageable, and staged through pinned chunks at several thread counts,
    on one GPU and spread over every GPU."""
    from regime_dash.engine import fast_gpu, staged_phase1

    p1: dict = {}
    if pageable:
        p1["pageable"] = 1e3 * med(lambda: fast_gpu.step_stats(stream))
    for devices in ([None] + ([list(range(n_gpu))] if n_gpu > 1 else [])):
        where = "1 GPU" if devices is None else f"{n_gpu} GPUs"
        for threads in (4, 8, 12):
            per_device = threads if devices is None else max(1, threads // n_gpu)
            p1[f"staged, {where}, {threads} threads"] = 1e3 * med(
                lambda: staged_phase1.step_stats(stream, threads=per_device, devices=devices))
    return p1


def shard_pieces(scalars, stats, accounts, grid, start, stop, repeats=3):
    """Each piece of one GPU shard (``sweep._fast_shard`` on the device), synchronized after each: median ms."""
    from regime_dash.engine import fast_gpu, loader, metric_pack
    from regime_dash.core.slots import DEFAULT_LAYOUT as layout
    from regime_dash.engine.config_grid import SlotPlan

    cp = loader.cupy_module()
    runs: dict = {}

    def tick(name, t0):
        runs.setdefault(name, []).append(1e3 * (time.perf_counter() - t0))

    none = np.zeros(0, np.int32)
    for _ in range(repeats + 1):
        t0 = time.perf_counter()
        plan = SlotPlan.of(grid.varying_columns(start, stop), stop - start, None, layout)
        tick("slot plan", t0)
        slot_idx = np.array([layout.index(s) for s in plan.slots], np.int32)
        t0 = time.perf_counter()
        mod = fast_gpu.module(layout)
        tick("module lookup", t0)
        with cp.cuda.Stream(non_blocking=True) as s:
            t0 = time.perf_counter()
            p1 = fast_gpu.DevicePhase1(cp, mod, scalars, scalars.steps, accounts, stats=stats)
            s.synchronize()
            tick("per-step inputs + phase 1 up", t0)
            t0 = time.perf_counter()
            rows, boots = fast_gpu.device_rows(cp, plan.isv0, plan.boot, slot_idx, plan.values, none)
            s.synchronize()
            tick("rows built on the device", t0)
            t0 = time.perf_counter()
            acc, _ = fast_gpu.launch_sweep(cp, mod, p1, layout, rows, boots, [])
            s.synchronize()
            tick("kernel", t0)
            del rows, boots
            t0 = time.perf_counter()
            cols = metric_pack.pack(cp, metric_pack.finalize(cp, acc, scalars.steps))
            s.synchronize()
            tick("metrics finalized + packed on the device", t0)
            t0 = time.perf_counter()
            metric_pack.device_to_host(cp, cols)
            tick("packed metrics to host (one copy)", t0)
            t0 = time.perf_counter()
            host_acc = cp.asnumpy(acc)
            tick("(before) accumulators to host", t0)
            t0 = time.perf_counter()
            metric_pack.pack(np, metric_pack.finalize(np, host_acc, scalars.steps))
            tick("(before) finalize + pack on the host", t0)
        t0 = time.perf_counter()
        fast_gpu.sweep_values(scalars, stats, accounts, plan.isv0, plan.boot, slot_idx, plan.values, none,
                              layout, packed=True)
        tick("the shard in one call (sweep_values, packed)", t0)
    return {k: round(statistics.median(v[1:]), 2) for k, v in runs.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=25_000)
    ap.add_argument("--accounts", type=int, default=1_024)
    ap.add_argument("--sizes", default="65536,262144")
    ap.add_argument("--dask", action="store_true")
    ap.add_argument("--phase1-steps", type=int, default=0, help="also time phase 1's variants at this T")
    ap.add_argument("--json")
    a = ap.parse_args()
    import pandas as pd

    from regime_dash.runs import scheduler as distributed

    from regime_dash.benchmarks.engines import bench_stream, sweep_grid
    from regime_dash.engine import loader, staged_phase1, summary
    from regime_dash.core.slots import DEFAULT_LAYOUT
    from regime_dash.engine.config_grid import ConfigGrid, SlotPlan
    from regime_dash.engine.sweep_shards import per_step
    from regime_dash.runs.sweeps import sweep

    reason = loader.available()
    if reason is not None:
        raise SystemExit(f"sweep_breakdown needs a GPU: {reason}")
    cp = loader.cupy_module()
    stream = bench_stream(a.steps, a.accounts)
    n_gpu = distributed.gpu_count()
    out: dict = {"steps": a.steps, "accounts": a.accounts, "gpus": n_gpu}
    out["link_ms"] = link_ms(stream, n_gpu)
    print("link", json.dumps(out["link_ms"], indent=1), flush=True)
    out["register_ms"] = register_ms(stream)
    print("register", json.dumps(out["register_ms"]), flush=True)
    out["phase1_ms"] = phase1_variants(stream, n_gpu)
    print("phase 1", json.dumps(out["phase1_ms"], indent=1), flush=True)
    if a.phase1_steps:
        out[f"phase1_ms T={a.phase1_steps}"] = phase1_variants(bench_stream(a.phase1_steps, a.accounts), n_gpu,
                                                               pageable=False)
        print("phase 1 long", json.dumps(out[f"phase1_ms T={a.phase1_steps}"], indent=1), flush=True)
    stats = staged_phase1.step_stats(stream)
    scalars = per_step(stream)
    layout = DEFAULT_LAYOUT
    for size in (int(s) for s in a.sizes.split(",")):
        g = sweep_grid(size)
        row: dict = {}
        grid = ConfigGrid.of(g)
        row["grid_check_ms"] = 1e3 * med(lambda: ConfigGrid.of(g))
        row["columns_ms"] = 1e3 * med(lambda: grid.columns())
        row["slot_plan_ms"] = 1e3 * med(lambda: SlotPlan.of(grid.varying_columns(), size, None, layout))
        row["shard_pieces_ms"] = shard_pieces(scalars, stats, stream.accounts, grid, 0, size)
        cols = grid.columns()
        metrics = np.random.default_rng(0).random((summary.N_METRICS, size))
        row["table_ms"] = 1e3 * med(lambda: pd.DataFrame(
            {**cols, **dict(zip(summary.METRICS, metrics))}, copy=False))
        row["sweep_ms"] = 1e3 * med(lambda: sweep(stream, g, device="gpu"))
        out[f"S={size}"] = row
        print(size, json.dumps(row, indent=1), flush=True)
    cp.get_default_memory_pool().free_all_blocks()
    if a.dask and n_gpu >= 2:
        import distributed as dd

        with distributed.local_cluster() as cluster, dd.Client(cluster) as client:
            client.wait_for_workers(n_gpu, timeout=120)
            workers = list(client.scheduler_info()["workers"])
            out["local_gpus"] = distributed.local_gpus(client)
            floor = out["dask_floor_ms"] = {}
            floor["round_trip_noop"] = 1e3 * med(lambda: client.submit(int, 1, pure=False).result())
            scal_f = distributed.scatter_shared(client, scalars)
            stats_f = distributed.scatter_shared(client, stats)
            floor["scatter_shared scalars (cached)"] = 1e3 * med(lambda: distributed.scatter_shared(client, scalars))
            floor["scatter_shared stats (cached)"] = 1e3 * med(lambda: distributed.scatter_shared(client, stats))
            print("dask floor", json.dumps(floor), flush=True)
            for size in (int(s) for s in a.sizes.split(",")):
                g = sweep_grid(size)
                grid = ConfigGrid.of(g)
                bounds = distributed.shard_bounds(size, len(workers))
                futs = [client.submit(shard_pieces, scal_f[w], stats_f[w], stream.accounts, grid, lo, hi, workers=[w],
                                      pure=False) for w, (lo, hi) in zip(workers, bounds)]
                out[f"dask S={size} shard pieces on each worker at once"] = client.gather(futs)
                print("dask pieces", size, json.dumps(out[f"dask S={size} shard pieces on each worker at once"]),
                      flush=True)
                sweep(stream, g, device="gpu", scheduler=client)
                walls, computes = [], []
                for _ in range(5):
                    with dd.get_task_stream(client=client) as ts:
                        t0 = time.perf_counter()
                        sweep(stream, g, device="gpu", scheduler=client)
                        walls.append(time.perf_counter() - t0)
                    tasks = [t for t in ts.data if str(t.get("key", "")).startswith("_fast_shard")]
                    # compute includes the wait for phase 1 (the shards start before it is done)
                    computes.append([{s["action"]: round(1e3 * (s["stop"] - s["start"]), 2)
                                      for s in t["startstops"]} for t in tasks])
                key = f"dask S={size}"
                out[key] = {"wall_ms": [round(1e3 * w, 2) for w in walls], "shard_compute_ms": computes}
                print(key, json.dumps(out[key]), flush=True)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
