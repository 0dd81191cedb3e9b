"""Dashboard page-load benchmark: Explore of a 25,000-step run in headless chromium.

``python -m regime_dash bench page_load [--steps 25000] [--accounts 64] [--repeat 5] [--out FILE]
[--store-format folder,delta]`` (or ``python -m regime_dash.benchmarks.page_load``)

1. makes a run: the ``kelly_trap_run8`` scenario of ``--steps`` steps replayed
   (engine ``auto``), written as a diag.jsonl and ingested into a temporary store;
2. starts ``streamlit run app.py`` on a free port against that store and waits
   for ``/_stcore/health``;
3. opens ``/explore`` in a fresh page of headless chromium ``--repeat`` times and
   times each load from the navigation until the Plotly figure has drawn: all
   seven panels laid out, the traces in place, and two animation frames later.

The first load is *cold* (the server process imports plotly and the analysis
code, reads the Parquet run, runs the invariant checks and builds the figure);
the later loads are *warm* (the cached frame and figure are reused, so they
time the transfer and the browser's drawing). Both are reported; the machine is
shared, so the warm figure is the median of the repeats. For scale, the median
load of the Slots page (a table, no chart) in the same browser is reported too,
and the load average during the run. ``--store-format folder,delta`` measures a store of each
format in turn (a server each), in the same run.

A million-step run is not loaded in the browser (its diag.jsonl would be ~1 GB);
instead ``million_steps`` times, in-process, what the Explore page computes for
one (the 25k run tiled to 1,000,000 steps): the analysis, the figure of the
whole run, smoothed, and of a 10 % window, and the figure's JSON size.

The helpers :func:`serve` and :func:`chromium` are what ``tests/test_browser.py``
uses too.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

from regime_dash.benchmarks.timing import Stopwatch, timed

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
#: Flags headless chromium needs on this machine kind: no sandbox inside a container, no
#: GPU, no QUIC, and nothing that phones home.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
#: True in the browser once the first Plotly graph has laid out its seven panels and drawn traces.
DRAWN_JS = """() => {
    const gd = document.querySelector('.js-plotly-plot');
    return !!(gd && gd._fullData && gd._fullData.length > 0
              && gd.querySelectorAll('.cartesianlayer .subplot').length >= 7
              && gd.querySelectorAll('.scatterlayer .trace').length > 0);
}"""
#: Resolves after two animation frames: what was laid out has been painted.
PAINTED_JS = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(base_url: str, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    """Poll ``/_stcore/health`` until it answers ``ok``; raise if the server dies or times out."""
    deadline = time.monotonic() + timeout
    url = f"{base_url}/_stcore/health"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with code {proc.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.read().strip() == b"ok":
                    return
        except OSError:
            pass
        time.sleep(0.25)
    raise TimeoutError(f"{url} did not answer ok within {timeout:.0f} s")


def stop(proc: subprocess.Popen, grace_s: float = 20.0) -> None:
    """Stop a server: SIGTERM, then SIGKILL if it has not exited within ``grace_s``."""
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def serve(store: str | os.PathLike, log: str | os.PathLike | None = None, *, app: str | os.PathLike = "app.py",
          env: dict[str, str] | None = None, root: str | os.PathLike = ROOT) -> Iterator[str]:
    """``streamlit run app.py`` (or ``app``) in the checkout ``root`` on a free port against ``store``, with
    ``env`` added to the environment; yields the base URL, stops the server after."""
    port = free_port()
    env = dict(os.environ, REGIME_DASH_STORE=str(store), **(env or {}))
    out = open(log, "w") if log else subprocess.DEVNULL
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(app), "--server.port", str(port),
                             "--server.headless", "true"], cwd=root, env=env, stdout=out,
                            stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, proc)
        yield base
    finally:
        stop(proc)
        if log:
            out.close()


@contextlib.contextmanager
def chromium(viewport: tuple[int, int] = (1400, 2400), timeout_ms: int = 120_000):
    """A headless chromium context on a fresh profile directory; yields the Playwright context."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="regime-dash-chromium-") as profile, sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True,
                                                   args=CHROMIUM_ARGS,
                                                   viewport={"width": viewport[0], "height": viewport[1]})
        ctx.set_default_timeout(timeout_ms)
        try:
            yield ctx
        finally:
            ctx.close()


def make_run(store: str | os.PathLike, steps: int, accounts: int, seed: int = 0,
             store_format: str | None = None) -> dict[str, Any]:
    """Replay ``kelly_trap_run8`` for ``steps`` steps, write it as a diag.jsonl and ingest it into ``store``
    (a new store of ``store_format``, default the one a new store gets)."""
    from regime_dash.diag import catalogue as diag
    from regime_dash.sources import scenarios
    from regime_dash.engine import replay_trajectory
    from regime_dash.store.open import open_store

    with Stopwatch() as sw:
        stream = scenarios.make("kelly_trap_run8", seed=seed, steps=steps, accounts=accounts)
        traj = replay_trajectory(stream, engine="auto")
        with tempfile.TemporaryDirectory() as tmp:
            path = diag.write_jsonl(traj.frame, Path(tmp) / f"trap-{steps}.jsonl")
            size = path.stat().st_size
            result = open_store(store, store_format_asked=store_format).ingest(path)
    return {"run_id": result.run_id, "rows": result.rows, "jsonl_bytes": size, "engine": traj.engine,
            "prepare_s": sw.seconds}


def load_explore(ctx, base_url: str) -> tuple[float, float | None]:
    """``(painted, figure_received)``: seconds from navigating a fresh page to ``/explore``
    until the figure has been painted, and until the largest websocket frame (the
    figure's JSON) arrived; the difference is the browser's share."""
    page = ctx.new_page()
    frames: list[tuple[int, float]] = []

    def on_ws(ws) -> None:
        ws.on("framereceived", lambda f: frames.append((len(f), time.perf_counter())))

    page.on("websocket", on_ws)
    try:
        sw = Stopwatch()
        page.goto(f"{base_url}/explore")
        page.wait_for_function(DRAWN_JS, polling=50)
        page.evaluate(PAINTED_JS)
        painted = sw.elapsed()
        received = max(frames)[1] - sw.start if frames else None
        return painted, received
    finally:
        page.close()


def load_slots(ctx, base_url: str) -> float:
    """Seconds to load ``/slots`` (a table, no chart): the frontend's fixed cost on this machine."""
    page = ctx.new_page()
    try:
        sw = Stopwatch()
        page.goto(f"{base_url}/slots")
        page.get_by_text("Fingerprint (FNV-1a 64)").wait_for()
        page.evaluate(PAINTED_JS)
        return sw.elapsed()
    finally:
        page.close()


def million_step_costs(store: str | os.PathLike, run_id: str, target: int = 1_000_000) -> dict[str, Any]:
    """Server-side costs of a run of ``target`` steps: the stored run tiled (steps renumbered).

    Times what the Explore page computes for it, in this process: the
    analysis (:func:`regime_dash.analysis.diagnose`), the seven-panel figure of
    the whole run, the same with smoothing, and the figure of a 10 % window,
    plus the size of the figure's JSON (what goes to the browser).
    """
    import numpy as np
    import pandas as pd

    from regime_dash.figures import signals as figures
    from regime_dash.diag.aliases import canonical_frame
    from regime_dash.analysis import diagnose
    from regime_dash.store.open import open_store

    frame = canonical_frame(open_store(store).load(run_id))
    big = pd.concat([frame] * -(-target // len(frame)), ignore_index=True).iloc[:target]
    big["step"] = np.arange(len(big), dtype=np.int64)
    out: dict[str, Any] = {"steps": len(big)}

    out["diagnose_s"], _ = timed(lambda: diagnose(big))
    out["figure_s"], fig = timed(lambda: figures.signal_panels({"run": big}))
    out["figure_smoothed_s"], _ = timed(lambda: figures.signal_panels({"run": big}, smoothing=0.9))
    window = big[big["step"] < len(big) // 10]
    out["figure_window_10pct_s"], _ = timed(lambda: figures.signal_panels({"run": window}))
    out["figure_json_mb"] = len(fig.to_json()) / 1e6
    out["max_points_per_trace"] = max(len(t.x) for t in fig.data if t.x is not None)
    return out


def run(steps: int = 25_000, accounts: int = 64, repeat: int = 5, screenshot: str | None = None,
        store_format: str | None = None) -> dict[str, Any]:
    """The whole benchmark on a store of ``store_format`` (default: the one a new store gets); returns the
    JSON-able result."""
    from regime_dash.errors import ValidationError
    from regime_dash.store.open import open_store

    if repeat < 2:
        raise ValidationError(f"repeat must be >= 2 (one cold load and at least one warm one), got {repeat!r}",
                              field="repeat", value=repeat)
    with tempfile.TemporaryDirectory(prefix="regime-dash-store-") as store:
        made = make_run(store, steps, accounts, store_format=store_format)
        fmt = open_store(store).format
        million = million_step_costs(store, made["run_id"])
        with serve(store) as base, chromium() as ctx:
            timed = [load_explore(ctx, base) for _ in range(repeat)]
            baseline = [load_slots(ctx, base) for _ in range(repeat - 1)]
            if screenshot:
                page = ctx.new_page()
                page.goto(f"{base}/explore")
                page.wait_for_function(DRAWN_JS, polling=50)
                page.screenshot(path=screenshot, full_page=True)
                page.close()
    loads = [t for t, _ in timed]
    received = [r for _, r in timed]
    warm = loads[1:]
    return {"benchmark": "page_load", "page": "explore", "store_format": fmt, "steps": steps, "accounts": accounts,
            **made,
            "cold_s": loads[0], "warm_median_s": statistics.median(warm), "warm_min_s": min(warm),
            "warm_max_s": max(warm), "loads_s": loads, "figure_received_s": received,
            "slots_page_median_s": statistics.median(baseline), "million_steps": million,
            "chromium": CHROMIUM, "cpus": os.cpu_count(), "load_average": os.getloadavg()}


def main(args: argparse.Namespace) -> int:
    """``bench page_load``: run the benchmark and print its JSON (options in :mod:`regime_dash.benchmarks.targets`)."""
    from regime_dash.benchmarks.targets import store_formats

    results = [run(args.steps, args.accounts, args.repeat, args.screenshot, fmt) for fmt in store_formats(args)]
    text = json.dumps(results[0] if len(results) == 1 else results, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    from regime_dash.benchmarks.targets import standalone

    sys.exit(standalone("page_load", sys.modules[__name__]))
