"""``bench follow``: a follower keeping up with 8 files written at 1,000 lines a second each.

A writer process appends diag lines (the committed sample's, steps renumbered) to
``--files`` files at ``--rate`` lines a second each, noting when it wrote each line;
``ingest --follow DIR --glob '*.diag.jsonl'`` (a separate process, as a user runs it)
commits them every 2 s. Reported:

* store latency: for every line, the time from its write to the commit that holds it (a
  thread reads the runs' follow status every 0.1 s); p50, p95 and max; the p95 by the
  parts' mtimes too (a merged part's mtime is its merge's, so that one overstates it);
* the follower's CPU, as a share of one core per followed file (its user+system time
  over the wall time, divided by the files), and its RSS sampled every second (first
  after the warm-up, last, max, and its slope in MB a minute over the run and each half);
* the baseline timed in the same run: a one-shot ``ingest`` of the same lines, and the
  follower's CPU per line against it.

* chart latency: a reader process does what the Explore page does for a live run once
  a second (the follow status read, then, when the run's version moved, the held frame
  grown by the new rows: :class:`regime_dash.follow.live_frame.LiveFrame`) on the first file's
  run; for every line, the time from its write to that reader holding it. The browser's
  draw of what it holds is not in it (``tests/test_browser_follow.py`` shows the in-place
  redraw);
* the part count of each run at the end (compaction keeps it at the log of the commits).

``--store-format folder,delta`` measures each store format in turn, in the same run (default: the
format a new store gets, :func:`regime_dash.store.open.store_format`); the parts' mtime latency is a
folder store's figure only (a Delta store's files are not renamed into place).
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: What the writer runs: N files, R lines a second each, for S seconds; it prints the write times.
_WRITER = r"""
import json, sys, time
src, folder, files, rate, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
lines = [json.loads(l) for l in open(src, 'rb').read().splitlines()]
fhs = [open(f"{folder}/w{i}.diag.jsonl", "ab", buffering=0) for i in range(files)]
times, step, t0 = [], 0, time.monotonic()
while time.monotonic() - t0 < seconds:
    due = int((time.monotonic() - t0) * rate)
    while step < due:
        obj = lines[step % len(lines)]; obj["step"] = step
        raw = (json.dumps(obj) + "\n").encode()
        now = time.time()
        for fh in fhs:
            fh.write(raw)
        times.append(now); step += 1
    time.sleep(0.01)
json.dump(times, open(f"{folder}/../write-times.json", "w"))  # a file: a pipe this big would block
"""


#: What the chart reader runs: Explore's live redraw of one run, once a second, until the run's follow ends.
_READER = r"""
import json, sys, time
from regime_dash.follow.live_frame import LiveFrame
from regime_dash.store.open import open_store
store = open_store(sys.argv[1], store_format_asked=sys.argv[5])
name, out, limit = sys.argv[2], sys.argv[3], float(sys.argv[4])
seen, live, version, started = {}, None, None, time.monotonic()
while time.monotonic() - started < limit:
    status = store.follow_status()
    rid = next((r for r in status if r.startswith(name + "-")), None)
    if rid is not None:
        live = live or LiveFrame(store, rid)
        if status[rid]["version"] != version:
            version = status[rid]["version"]
            before = len(live.frame)
            live.refresh()
            now = time.time()
            for s in live.frame["step"].iloc[before:].tolist():
                seen.setdefault(int(s), now)
        if not status[rid]["live"] and time.monotonic() - started > 10:
            break
    time.sleep(1.0)
json.dump({"seen": seen, "reloads": live.reloads if live else 0}, open(out, "w"))
"""


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _latencies(store: Path, times: list[float]) -> list[float]:
    """Write-to-commit seconds of every line of a folder store: each part's rename time minus its lines'
    write times."""
    import pyarrow.parquet as pq

    out = []
    for part in store.glob("run=*/part-*.parquet"):
        committed = part.stat().st_mtime  # the rename keeps the mtime of the part's last write
        for s in pq.read_table(part, columns=["step"]).column("step").to_pylist():
            out.append(committed - times[s])
    return out


def _rss_slope(samples: list[tuple[float, float]]) -> dict:
    """The follower's RSS growth in MB a minute: the least-squares slope over the samples after the warm-up,
    and over their first and second halves (a flat follower shows ~0 in the second half of a long run)."""
    import numpy as np

    def slope(part):
        if len(part) < 3:
            return None
        t, m = np.array(part, dtype=np.float64).T
        return round(float(np.polyfit(t / 60.0, m, 1)[0]), 2)

    half = len(samples) // 2
    return {"all": slope(samples), "first_half": slope(samples[:half]), "second_half": slope(samples[half:])}


class _CommitWatch:
    """When each step reached the store: a thread reading the runs' follow status every ``every`` s
    (its ``last_step`` moves at each commit, after the part's rename). A merged part's mtime is its
    merge's time, not its rows' commit, so the parts' mtimes overstate the latency once parts merge."""

    def __init__(self, store, every: float = 0.1):
        import threading

        self.store, self.every, self.seen = store, every, {}  # run -> [(time, last step)]
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        while not self.done.wait(self.every):
            status = self.store.follow_status()
            now = time.time()
            for rid, st in status.items():
                marks = self.seen.setdefault(rid, [])
                if st["last_step"] is not None and (not marks or st["last_step"] > marks[-1][1]):
                    marks.append((now, int(st["last_step"])))

    def latencies(self, times: list[float]) -> list[float]:
        """Write-to-commit seconds of every step of every run."""
        self.done.set()
        self.thread.join()
        out = []
        for marks in self.seen.values():
            lo = 0
            for at, last in marks:
                out.extend(at - times[k] for k in range(lo, min(last + 1, len(times))))
                lo = last + 1
        return out


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def _stored(runs) -> tuple[int, int]:
    """``(rows, most files of one run)`` of every run of the store ``runs``, whatever its format."""
    rows, parts = 0, 0
    for entry in runs.list_runs():
        rid = entry["run_id"]
        rows += runs.load_table(rid, columns=["step"]).num_rows
        n = (len(runs.files(rid)) if runs.format == "delta"
             else len(list((runs.root / f"run={rid}").glob("part-*.parquet"))))
        parts = max(parts, n)
    return rows, parts


def measure(files: int, rate: float, seconds: float, workdir: Path, warmup: float = 10.0,
            store_format: str = "delta") -> dict:
    from regime_dash.sources.samples import SAMPLE_DIR
    from regime_dash.store.open import open_store

    src, folder, store = SAMPLE_DIR / "diag.jsonl", workdir / "logs", workdir / "store"
    folder.mkdir(parents=True)
    runs = open_store(store, store_format_asked=store_format)
    follower = subprocess.Popen([sys.executable, "-m", "regime_dash", "ingest", str(folder), "--follow",
                                 "--glob", "*.diag.jsonl", "--store", str(store), "--store-format", store_format,
                                 "--until-idle", "6"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    reader = subprocess.Popen([sys.executable, "-c", _READER, str(store), "w0.diag", str(workdir / "chart.json"),
                               str(seconds + 120), store_format])
    time.sleep(3)  # its start (imports) is not a follow cost
    watch = _CommitWatch(runs)
    cpu0, t0 = _cpu_seconds(follower.pid), time.monotonic()
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(src), str(folder), str(files), str(rate),
                               str(seconds)])
    rss: list[tuple[float, float]] = []
    while writer.poll() is None:
        rss.append((time.monotonic() - t0, _rss_mb(follower.pid)))
        done = time.monotonic() - t0
        print(f"\rbench follow: {done:5.0f} / {seconds:.0f} s, follower RSS {rss[-1][1]:.0f} MB", end="",
              file=sys.stderr, flush=True)
        time.sleep(1.0)
    wall, cpu = time.monotonic() - t0, _cpu_seconds(follower.pid) - cpu0
    times = json.loads((workdir / "write-times.json").read_text())
    follower.wait(120)
    reader.wait(120)
    committed = watch.latencies(times)
    print(file=sys.stderr)
    lat = _latencies(store, times) if runs.format == "folder" else []
    stored, parts = _stored(runs)
    chart = json.loads((workdir / "chart.json").read_text())
    chart_lat = [t - times[int(s)] for s, t in chart["seen"].items()]
    every = max(1, int(len(rss) / 10))  # ten samples over the run, and the last
    samples = [(round(t), round(m, 1)) for t, m in rss[::every]] + [(round(rss[-1][0]), round(rss[-1][1], 1))]
    steady = [m for t, m in rss if t >= warmup] or [m for _t, m in rss]
    lines = len(times) * files
    base = _baseline(folder / "w0.diag.jsonl", workdir / "base-store", store_format)
    follow_cpu_per_line = cpu / lines
    return {"store_format": runs.format, "files": files, "rate": rate, "seconds": round(wall, 1), "lines": lines,
            "stored": stored, "latency_p50_s": round(_pct(committed, 0.5), 3),
            "latency_p95_s": round(_pct(committed, 0.95), 3),
            "latency_max_s": round(max(committed, default=float("nan")), 3), "latency_steps": len(committed),
            "part_mtime_latency_p95_s": round(_pct(lat, 0.95), 3) if lat else None,
            "cpu_share_per_file": round(cpu / wall / files, 4),
            "rss_first_mb": round(steady[0], 1), "rss_last_mb": round(steady[-1], 1),
            "rss_max_mb": round(max(steady), 1), "rss_samples_s_mb": samples,
            "rss_slope_mb_per_min": _rss_slope([(t, m) for t, m in rss if t >= warmup] or rss),
            "chart_rows": len(chart_lat), "chart_latency_p50_s": round(_pct(chart_lat, 0.5), 3),
            "chart_latency_p95_s": round(_pct(chart_lat, 0.95), 3),
            "chart_latency_max_s": round(max(chart_lat, default=float("nan")), 3),
            "chart_reloads": chart["reloads"], "parts_per_run_max": parts,
            "baseline_ingest_cpu_us_per_line": round(base * 1e6, 2),
            "follow_cpu_us_per_line": round(follow_cpu_per_line * 1e6, 2),
            "ratio_follow_vs_one_shot_cpu": round(follow_cpu_per_line / base, 2) if base else None}


def _baseline(path: Path, store: Path, store_format: str) -> float:
    """CPU seconds per line of a one-shot ``ingest`` of one of the files (the same process kind and store format)."""
    p = subprocess.Popen([sys.executable, "-m", "regime_dash", "ingest", str(path), "--store", str(store),
                          "--store-format", store_format], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    lines = sum(1 for _ in open(path, "rb"))
    # the start of a python process is paid once either way: timed apart and taken off
    q = subprocess.Popen([sys.executable, "-m", "regime_dash", "runs", "--store", str(store)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _s, start = os.wait4(q.pid, 0)
    work = (usage.ru_utime + usage.ru_stime) - (start.ru_utime + start.ru_stime)
    return max(work, 0.0) / max(lines, 1)


def _judged(res: dict) -> dict:
    """``res`` with its targets met or missed."""
    res["targets"] = {"latency_p95_s <= 3": res["latency_p95_s"] <= 3.0,
                      "cpu_share_per_file < 0.25": res["cpu_share_per_file"] < 0.25,
                      "chart_latency_p95_s <= 4": res["chart_latency_p95_s"] <= 4.0,
                      "stored == lines": res["stored"] == res["lines"]}
    return res


def main(args) -> int:
    from regime_dash.benchmarks.targets import store_formats

    results = []
    for fmt in store_formats(args):
        with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
            results.append(_judged(measure(args.files, args.rate, args.seconds, Path(tmp), store_format=fmt)))
    out = results[0] if len(results) == 1 else results
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        for res in results:
            for k, v in res.items():
                if k != "targets":
                    print(f"{k:34} {v}")
            for k, ok in res["targets"].items():
                print(f"{'met' if ok else 'MISSED':6} {k}")
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1))
    return 0
