"""Where the time of a GPU sweep goes: the host pieces, phase 1's upload variants, and the dask shards.

    python scripts/sweep_breakdown.py [--steps T] [--sizes 65536,262144] [--json FILE]

Times, on the bench stream (``benchmarks.engines.bench_stream``), each piece of
``sweep(stream, grid, device="gpu")`` on its own (median of 5 after a warm-up):
the grid check, its columns, the slot plan, phase 1 (``fast_gpu.step_stats``:
pageable; ``staged_phase1.step_stats`` at several thread counts and chunk sizes),
one shard on the device (``fast_gpu.sweep_values``), the table; then the whole
sweep. With two GPUs or more, a local dask cluster of one worker per GPU: the
whole sweep through it, and each shard's compute time on its worker (dask's task
stream), so the client's share and the transfers are what is left.
A diagnostic, not the benchmark: ``python -m regime_dash bench engines`` is.
"""
from __future__ import annotations

import argparse
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=25_000)
    ap.add_argument("--accounts", type=int, default=1_024)
    ap.add_argument("--sizes", default="65536,262144")
    ap.add_argument("--dask", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    import pandas as pd

    from regime_dash import distributed
    from regime_dash.benchmarks.engines import bench_stream, sweep_grid
    from regime_dash.engine import fast_gpu, loader, staged_phase1, summary
    from regime_dash.slots import DEFAULT_LAYOUT
    from regime_dash.sweep import ConfigGrid, _metric_columns, _scalar_stream, _SlotPlan, sweep

    stream = bench_stream(a.steps, a.accounts)
    out: dict = {"steps": a.steps, "accounts": a.accounts}
    p1 = out["phase1_ms"] = {}
    p1["pageable"] = 1e3 * med(lambda: fast_gpu.step_stats(stream))
    for threads in (1, 4, 8, 16):
        for mb in (2, 8):
            p1[f"staged t={threads} chunk={mb}MB"] = 1e3 * med(
                lambda: staged_phase1.step_stats(stream, threads=threads, chunk_bytes=mb << 20))
    print(json.dumps(p1, indent=1), flush=True)
    stats = staged_phase1.step_stats(stream)
    scalars = _scalar_stream(stream)
    layout = DEFAULT_LAYOUT
    cp = loader.cupy_module()
    for size in (int(s) for s in a.sizes.split(",")):
        g = sweep_grid(size)
        row: dict = {}
        grid = ConfigGrid.of(g)
        row["grid_check_ms"] = 1e3 * med(lambda: ConfigGrid.of(g))
        row["columns_ms"] = 1e3 * med(lambda: grid.columns())
        cols = grid.columns()
        row["slot_plan_ms"] = 1e3 * med(lambda: _SlotPlan.of(grid.varying_columns(), size, None, layout))
        plan = _SlotPlan.of(grid.varying_columns(), size, None, layout)
        slot_idx = np.array([layout.index(s) for s in plan.slots], np.int32)
        none = np.zeros(0, np.int32)
        row["device_shard_ms"] = 1e3 * med(lambda: fast_gpu.sweep_values(
            scalars, stats, stream.accounts, plan.isv0, plan.boot, slot_idx, plan.values, none, layout))
        acc, _ = fast_gpu.sweep_values(scalars, stats, stream.accounts, plan.isv0, plan.boot, slot_idx,
                                       plan.values, none, layout)
        row["table_ms"] = 1e3 * med(lambda: pd.DataFrame(
            {**cols, **dict(zip(summary.METRICS, _metric_columns(acc, stream.steps)))}, copy=False))
        row["sweep_ms"] = 1e3 * med(lambda: sweep(stream, g, device="gpu"))
        out[f"S={size}"] = row
        print(size, json.dumps(row), flush=True)
    cp.get_default_memory_pool().free_all_blocks()
    if a.dask and distributed.gpu_count() >= 2:
        import distributed as dd

        with distributed.local_cluster() as cluster, dd.Client(cluster) as client:
            client.wait_for_workers(distributed.gpu_count(), timeout=120)
            floor = out["dask_floor_ms"] = {}
            floor["round_trip_noop"] = 1e3 * med(lambda: client.submit(int, 1, pure=False).result())
            floor["fetch_12.6MB_one_worker"] = 1e3 * med(
                lambda: client.submit(np.zeros, (12, 131072), pure=False).result())
            floor["fetch_2x6.6MB_two_workers"] = 1e3 * med(lambda: client.gather(
                [client.submit(np.zeros, (13, 65536), pure=False, workers=[w])
                 for w in client.scheduler_info()["workers"]]))
            print("dask floor", json.dumps(floor), flush=True)
            for size in (int(s) for s in a.sizes.split(",")):
                g = sweep_grid(size)
                sweep(stream, g, device="gpu", scheduler=client)
                walls, computes = [], []
                for _ in range(5):
                    with dd.get_task_stream(client=client) as ts:
                        t0 = time.perf_counter()
                        sweep(stream, g, device="gpu", scheduler=client)
                        walls.append(time.perf_counter() - t0)
                    tasks = [t for t in ts.data if str(t.get("key", "")).startswith("_fast_shard")]
                    computes.append([{s["action"]: round(1e3 * (s["stop"] - s["start"]), 2)
                                      for s in t["startstops"]} for t in tasks])
                out[f"dask S={size}"] = {"wall_ms": [round(1e3 * w, 2) for w in walls],
                                         "shard_compute_ms": computes}
                print("dask", size, json.dumps(out[f"dask S={size}"]), flush=True)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
