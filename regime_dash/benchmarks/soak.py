"""``bench soak``: the dashboard server's memory over a live follow with two tabs open.

A writer process appends diag lines (the committed sample's, steps renumbered) to one file at
``--rate`` lines a second; ``ingest --follow`` (a separate process, as a user runs it) commits them
every second; the app is served (``streamlit run app.py``) and ``--tabs`` headless chromium tabs
keep Explore open on the live run (it redraws every second). The server's RSS is sampled every
``--sample-every`` seconds for ``--minutes`` (30 by default). Reported: the RSS at the start, the end
and its peak, and its growth over the first and the last ``--window`` minutes (5, or a third of a
shorter soak), each as a least-squares slope in MB a minute. It has levelled off when the last
window's slope is at most :data:`LEVEL_SLOPE_MB_MIN` and at most :data:`LEVEL_RATIO` of the first
window's (a first window flatter than :data:`FLAT_MB_MIN` counts as that): the caches filling up is
the first window's growth, a leak grows alike in every window, so a series still rising at its end fails.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from regime_dash.benchmarks.page_load import ROOT, chromium, serve

#: What the writer runs: the sample's lines, steps renumbered, ``rate`` a second for ``seconds``.
WRITER = r"""
import json, sys, time
src, dst, rate, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
lines = [json.loads(l) for l in open(src, 'rb').read().splitlines()]
step, t0 = 0, time.monotonic()
with open(dst, "ab", buffering=0) as fh:
    while time.monotonic() - t0 < seconds:
        due = int((time.monotonic() - t0) * rate)
        chunk = []
        while step < due:
            obj = lines[step % len(lines)]; obj["step"] = step
            chunk.append(json.dumps(obj)); step += 1
        if chunk:
            fh.write(("\n".join(chunk) + "\n").encode())
        time.sleep(0.05)
"""
SAMPLE = ROOT / "data" / "samples" / "diag.jsonl"
#: The last window's slope (MB a minute) that still counts as level: the live run's own rows grow the
#: frames the server holds (about 240 bytes a row, 20 rows a second: 0.3 MB a minute a copy).
LEVEL_SLOPE_MB_MIN = 2.0
#: ... and the share of the first window's slope the last may keep at most.
LEVEL_RATIO = 0.25
#: A first window flatter than this (MB a minute) is taken as this slope: sampling noise, not growth.
FLAT_MB_MIN = 0.5


def rss_mb(pid: int) -> float:
    """The resident set of process ``pid`` in MB (``VmRSS`` of ``/proc/<pid>/status``)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"process {pid} reports no VmRSS (a zombie?)")


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[1])


def server_pid(port: int, ancestor: int | None = None) -> int:
    """The pid of the streamlit server on ``port`` started by this process (``ancestor``) or its children."""
    ancestor = os.getpid() if ancestor is None else ancestor
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            if b"streamlit" not in b" ".join(argv) or str(port).encode() not in argv:
                continue
            pid = int(entry)
            p = pid
            while p > 1:
                p = _parent(p)
                if p == ancestor:
                    return pid
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    raise RuntimeError(f"no streamlit server of ours listens on port {port}")


def slope_mb_min(samples: list[tuple[float, float]]) -> float:
    """The least-squares slope of ``samples`` ((seconds, MB)) in MB a minute (0 for fewer than two times)."""
    n = len(samples)
    mt = sum(t for t, _ in samples) / n
    mm = sum(mb for _, mb in samples) / n
    var = sum((t - mt) ** 2 for t, _ in samples)
    return 0.0 if var == 0 else 60.0 * sum((t - mt) * (mb - mm) for t, mb in samples) / var


def growth(samples: list[tuple[float, float]], window_s: float) -> dict[str, Any]:
    """The RSS ``samples`` ((seconds, MB), in time order) summed up: start, end, peak, the growth and the
    slope over the first and the last ``window_s`` seconds, and whether the last window is level."""
    if len(samples) < 2:
        raise ValueError(f"growth needs two samples at least, got {len(samples)}")
    t0, t1 = samples[0][0], samples[-1][0]
    if t1 - t0 < 2 * window_s:
        raise ValueError(f"samples span {t1 - t0:.0f} s, less than two windows of {window_s:.0f} s")
    first = [s for s in samples if s[0] <= t0 + window_s]
    last = [s for s in samples if s[0] >= t1 - window_s]
    first_slope, last_slope = slope_mb_min(first), slope_mb_min(last)
    allowed = min(LEVEL_SLOPE_MB_MIN, LEVEL_RATIO * max(first_slope, FLAT_MB_MIN))
    return {"start_mb": round(samples[0][1], 1), "end_mb": round(samples[-1][1], 1),
            "peak_mb": round(max(mb for _, mb in samples), 1), "window_s": window_s,
            "first_window_growth_mb": round(first[-1][1] - first[0][1], 1),
            "last_window_growth_mb": round(last[-1][1] - last[0][1], 1),
            "first_window_mb_min": round(first_slope, 2), "last_window_mb_min": round(last_slope, 2),
            "allowed_mb_min": round(allowed, 2), "levelled_off": last_slope <= allowed, "samples": len(samples)}


def sample_rss(pid: int, seconds: float, every: float, on_sample: Callable[[float, float], None] = lambda t, mb: None,
               ) -> list[tuple[float, float]]:
    """``pid``'s RSS every ``every`` seconds for ``seconds``: ``(seconds since the first, MB)``."""
    out: list[tuple[float, float]] = []
    t0 = time.monotonic()
    while True:
        now = time.monotonic() - t0
        out.append((now, rss_mb(pid)))
        on_sample(*out[-1])
        if now >= seconds:
            return out
        time.sleep(min(every, max(0.0, seconds - now)))


def _wait_live(store: Path, name: str, proc: subprocess.Popen, timeout: float = 120.0) -> str:
    """The id of the followed run ``name`` once its first commit is in ``store``."""
    from regime_dash.store.open import open_store

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the follower exited with code {proc.returncode} before its first commit")
        for rid, st in open_store(store).follow_status().items():
            if st.get("live") and rid.startswith(name):
                return rid
        time.sleep(0.2)
    raise TimeoutError(f"no live run {name!r} in {store} within {timeout:.0f} s")


def measure(minutes: float, rate: float = 20.0, tabs: int = 2, every: float = 5.0, window_min: float | None = None,
            workdir: Path | None = None, log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Follow a live-written run into a store served to ``tabs`` chromium tabs on Explore; sample the
    server's RSS for ``minutes``; the figures of :func:`growth` with the soak's settings."""
    window = 60.0 * (window_min if window_min else min(5.0, minutes / 3))
    with tempfile.TemporaryDirectory(prefix="regime-dash-soak-", dir=workdir) as tmp:
        store, src = Path(tmp) / "store", Path(tmp) / "soak.diag.jsonl"
        src.touch()
        seconds = minutes * 60 + 120  # past the server's start and the tabs' first draw
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(SAMPLE), str(src), str(rate), str(seconds)])
        follower = subprocess.Popen([sys.executable, "-m", "regime_dash", "ingest", str(src), "--follow", "--name",
                                     "soak", "--store", str(store), "--commit-every", "1"], cwd=ROOT,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            run_id = _wait_live(store, "soak", follower)
            with serve(store, Path(tmp) / "server.log") as base, chromium() as ctx:
                pid = server_pid(int(base.rsplit(":", 1)[1]))
                pages = [ctx.new_page() if i else (ctx.pages[0] if ctx.pages else ctx.new_page())
                         for i in range(tabs)]
                for page in pages:
                    page.goto(f"{base}/explore?runs={run_id}")
                    page.wait_for_selector(".js-plotly-plot", timeout=180_000)
                log(f"server pid {pid}, {tabs} tabs on {run_id}; sampling for {minutes:g} min")
                minutes_said: set[int] = set()

                def said(t: float, mb: float) -> None:  # one line a minute
                    if int(t // 60) not in minutes_said:
                        minutes_said.add(int(t // 60))
                        log(f"{t:7.0f} s  {mb:7.1f} MB")

                samples = sample_rss(pid, minutes * 60, every, said)
        finally:
            for p in (writer, follower):
                p.kill()
                p.wait(30)
    out = growth(samples, window)
    out.update(minutes=minutes, rate=rate, tabs=tabs, run_id=run_id,
               series=[(round(t, 1), round(mb, 1)) for t, mb in samples])
    return out


def table(r: dict[str, Any]) -> str:
    """The figures as a few lines of text."""
    w = r["window_s"] / 60
    return "\n".join([
        f"soak: {r['minutes']:g} min, {r['tabs']} tabs on Explore, a live run at {r['rate']:g} lines/s",
        f"server RSS: start {r['start_mb']:.0f} MB, end {r['end_mb']:.0f} MB, peak {r['peak_mb']:.0f} MB",
        f"first {w:.3g} min: {r['first_window_growth_mb']:+.0f} MB ({r['first_window_mb_min']:+.2f} MB/min); "
        f"last {w:.3g} min: {r['last_window_growth_mb']:+.0f} MB ({r['last_window_mb_min']:+.2f} MB/min; "
        f"level at <= {r['allowed_mb_min']:.2f} MB/min)",
        f"levelled off: {'yes' if r['levelled_off'] else 'NO'}",
    ])


def main(args) -> int:
    r = measure(args.minutes, rate=args.rate, tabs=args.tabs, every=args.sample_every, window_min=args.window,
                workdir=Path(args.workdir) if args.workdir else None,
                log=(lambda s: None) if args.json else (lambda s: print(s, flush=True)))
    if args.out:
        Path(args.out).write_text(json.dumps(r, indent=1))
    print(json.dumps({k: v for k, v in r.items() if k != "series"}) if args.json else table(r))
    return 0 if r["levelled_off"] else 1


if __name__ == "__main__":
    from regime_dash.benchmarks.targets import standalone

    raise SystemExit(standalone("soak", sys.modules[__name__]))
