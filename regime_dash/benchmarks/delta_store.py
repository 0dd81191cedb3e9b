"""The Delta store's benchmark: ingest against DuckDB's COPY to Parquet, and ``runs`` over 1,000 runs.

``regime-dash bench delta_store [--size-mb 100] [--repeat 3] [--runs 1000] [--s3] [--skip-ingest]``

* **ingest**: the same generated diag.jsonl (:func:`regime_dash.benchmarks.ingest.make_diag_file`)
  ingested into a fresh local Delta store (``DeltaRunStore.ingest`` end to end: parse, sha256,
  Parquet files, the catalogue's claim, the rejects and rows commits, the live mark), into a fresh
  folder store (``RunStore.ingest``, today's), and copied by DuckDB's
  ``COPY (SELECT * FROM read_json(file)) TO 'x.parquet'``; interleaved, median of ``--repeat``.
  Target: Delta ingest >= 1.5x DuckDB's COPY.
* **runs**: ``list_runs()`` of a store holding ``--runs`` runs (built in bulk: a small file a run in
  one rows commit, the catalogue written with each run's full metadata, then a dozen single
  changes so that opening reads a checkpoint and the commits after it, as a store that grew run
  by run does), timed in a fresh store object each time; locally and, with ``--s3``, against a
  moto S3 server started on 127.0.0.1. Target: <= 1 s.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["build_runs", "main", "time_ingest", "time_runs"]


def time_ingest(size_mb: float, repeat: int) -> dict[str, Any]:
    """Seconds (medians) of the three ingests of one generated file, and the ratios."""
    import duckdb

    from regime_dash.benchmarks.ingest import make_diag_file
    from regime_dash.ingest import shapes
    from regime_dash.store.delta import DeltaRunStore
    from regime_dash.store.run_store import RunStore

    work = Path(tempfile.mkdtemp(prefix="bench-delta-"))
    try:
        src = work / "diag.jsonl"
        make_diag_file(src, size_mb)
        mb = src.stat().st_size / 1e6
        shapes.wait_loaded()  # the shape path's scanner loaded, as in a process that ingested before
        contenders = {
            "delta": lambda: DeltaRunStore(work / "delta", vacuum_every_hours=None).ingest(src),
            "folder": lambda: RunStore(work / "folder").ingest(src),
            "duckdb": lambda: duckdb.sql(f"COPY (SELECT * FROM read_json('{src}')) TO '{work / 'duck.parquet'}' "
                                         "(FORMAT parquet)"),
        }
        contenders["delta"]()  # warm-up, untimed
        times: dict[str, list[float]] = {k: [] for k in contenders}
        for _ in range(repeat):
            for name, fn in contenders.items():
                for d in ("delta", "folder"):
                    shutil.rmtree(work / d, ignore_errors=True)
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
        med = {k: statistics.median(v) for k, v in times.items()}
        return {"mb": round(mb, 1), "seconds": {k: round(v, 3) for k, v in med.items()},
                "mb_per_s": {k: round(mb / v, 1) for k, v in med.items()},
                "delta_vs_duckdb": round(med["duckdb"] / med["delta"], 2),
                "folder_vs_duckdb": round(med["duckdb"] / med["folder"], 2),
                "duckdb": duckdb.__version__}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _meta(run_id: str, i: int) -> dict[str, Any]:
    from regime_dash.diag.catalogue import DIAG_FIELDS

    return {"format_version": 1, "run_id": run_id, "name": f"run{i:04d}", "source": f"run{i:04d}.jsonl",
            "sha256": f"{i:064x}", "source_bytes": 1000, "content_bytes": 1000, "gzip": False,
            "truncated_gzip": False, "lines": 10, "rows": 10, "blank_lines": 0, "rejected_count": 0,
            "aside_count": 0, "coerced": {}, "columns": {"step": "int64", **{c: "double" for c, _ in DIAG_FIELDS}},
            "first_step": 0, "last_step": 9, "ingested_at": f"2026-01-01T00:00:{i % 60:02d}.000+00:00",
            "tags": ["bench"], "notes": "", "aliases": [], "verdict": {"status": "pass", "fail": 0, "warn": 1}}


def build_runs(store, n: int) -> None:
    """``n`` runs of 10 rows each in ``store`` (a ``DeltaRunStore``), in bulk (see the module doc)."""
    import pyarrow as pa

    from regime_dash.store.delta import catalogue as cat
    from regime_dash.store.delta.parts import write_table
    from regime_dash.store.delta.tables import PARTITION, add_action

    ids = [f"run{i:04d}-{i:012x}" for i in range(n)]
    store.commit_rows(ids[0], [])  # the table, created
    if store.root.is_local:
        actions = []
        for rid in ids:
            rows = pa.table({"_line": pa.array(range(1, 11), pa.int64()), "step": pa.array(range(10), pa.int64())})
            home = os.path.join(store.tables.local_dir("rows"), f"{PARTITION}={rid}")
            (part,) = write_table(home, rows)
            actions.append(add_action(part, rid))
        dt = store.tables.open("rows")
        dt.create_write_transaction(actions, "append", dt.schema(), partition_by=[PARTITION])
    else:  # one upload of every run's rows, delta-rs's writer splitting them by partition
        from deltalake import write_deltalake

        rows = pa.table({"_line": pa.array(list(range(1, 11)) * n, pa.int64()),
                         "step": pa.array(list(range(10)) * n, pa.int64()),
                         PARTITION: pa.array([rid for rid in ids for _ in range(10)], pa.string())})
        write_deltalake(store.tables.uri("rows"), rows, mode="append", partition_by=[PARTITION],
                        schema_mode="merge", storage_options=store.root.options())
    store.catalogue.change(lambda docs: docs.update({rid: cat.doc(cat.LIVE, _meta(rid, i))
                                                     for i, rid in enumerate(ids)}), "bench")
    for k in range(12):
        store.update_meta(ids[k], lambda m: m.update(notes="changed"))


def time_runs(where: str, n: int, repeat: int, options: dict[str, str] | None = None) -> dict[str, Any]:
    """Seconds of ``list_runs()`` (median and worst of ``repeat``) over a store of ``n`` runs at ``where``."""
    from regime_dash.store.delta import DeltaRunStore

    build_runs(DeltaRunStore(where, storage_options=options, vacuum_every_hours=None), n)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        got = DeltaRunStore(where, storage_options=options).list_runs()
        times.append(time.perf_counter() - t0)
        assert len(got) == n, f"{len(got)} runs listed of {n}"
    return {"runs": n, "median_s": round(statistics.median(times), 3), "max_s": round(max(times), 3)}


def _moto() -> tuple[subprocess.Popen, dict[str, str]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = shutil.which("moto_server")
    cmd = [exe, "-H", "127.0.0.1", "-p", str(port)] if exe else [sys.executable, "-m", "moto.server", "-H",
                                                                 "127.0.0.1", "-p", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    env = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
    import boto3

    boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], aws_access_key_id="bench",
                 aws_secret_access_key="bench", region_name="us-east-1").create_bucket(Bucket="bench")
    return proc, env


def main(args: argparse.Namespace) -> int:
    """``bench delta_store`` (options in :mod:`regime_dash.benchmarks.targets`)."""
    out: dict[str, Any] = {"cpus": os.cpu_count()}
    if not args.skip_ingest:
        out["ingest"] = time_ingest(args.size_mb, args.repeat)
    work = tempfile.mkdtemp(prefix="bench-delta-runs-")
    try:
        out["runs_local"] = time_runs(os.path.join(work, "store"), args.runs, 5)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.s3:
        proc, env = _moto()
        try:
            out["runs_s3"] = time_runs("s3://bench/store", args.runs, 5, env)
        finally:
            proc.terminate()
            proc.wait(10)
    targets = {}
    if "ingest" in out:
        targets["delta ingest >= 1.5x duckdb COPY"] = out["ingest"]["delta_vs_duckdb"] >= 1.5
    targets["runs of 1,000 <= 1 s (local)"] = out["runs_local"]["median_s"] <= 1.0
    if "runs_s3" in out:
        targets["runs of 1,000 <= 1 s (local S3 server)"] = out["runs_s3"]["median_s"] <= 1.0
    out["targets"] = targets
    print(json.dumps(out, indent=1))
    return 0 if all(targets.values()) else 1


if __name__ == "__main__":
    from regime_dash.benchmarks.targets import standalone

    sys.exit(standalone("delta_store", sys.modules[__name__]))
