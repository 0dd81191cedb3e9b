"""First use, as a newcomer meets it: a fresh clone, its cold numba cache, the Replay page's first what-if chart.

``python -m regime_dash bench ui --only first_use [--repeat 5]``

1. clones the checkout's HEAD into a temporary folder (``git clone``: no ``__pycache__``, so every
   numba function of the clone compiles or loads as on a newcomer's machine);
2. starts ``streamlit run app.py`` in the clone (its package first on ``PYTHONPATH``) against an
   empty store and waits for ``/_stcore/health``;
3. opens ``/replay`` with the page's defaults in headless chromium and times the navigation until the
   what-if chart has drawn (the first what-if chart), and says which engine replayed it;
4. waits for the app's background compile of the fast engine (the page then says so), and times
   ``--repeat`` moves of a what-if slider (``eps_min`` one step up) until the chart is redrawn.

Uncommitted changes of the checkout are not in the clone: commit first to measure them.
"""
from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from regime_dash.benchmarks.page_load import PAINTED_JS, ROOT, serve
from regime_dash.errors import ValidationError

#: The what-if trace the first chart is waited for (the page draws its panels per run).
WHATIF_TRACE = "what-if kelly_f"
#: True once a Plotly graph with a trace named by the argument has data.
HAS_TRACE_JS = """(name) => Array.from(document.querySelectorAll('.js-plotly-plot')).some(gd =>
    (gd._fullData || []).some(t => t.name === name && (t.y || []).length > 0))"""
#: The Replay page's caption of the what-if run: its time and engine.
REPLAYED = re.compile(r"What-if replayed in ([\d.,]+) ms on the (\w+) engine")


def fresh_clone(into: str | os.PathLike, root: str | os.PathLike = ROOT) -> Path:
    """``git clone`` of ``root``'s HEAD into ``into``/checkout; the clone's folder.

    Raises
    ------
    ValidationError
        ``root`` is not a git checkout (an installed package has no clone to make).
    """
    if not (Path(root) / ".git").exists():
        raise ValidationError(f"{root} is not a git checkout: first use is measured on a fresh clone of one",
                              field="root", value=str(root))
    clone = Path(into) / "checkout"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(root), str(clone)], check=True)
    return clone


def first_whatif_chart(ctx, base: str, timeout_ms: int = 600_000) -> dict[str, Any]:
    """Seconds from opening ``/replay`` until its what-if chart is painted, and the engine that replayed it."""
    page = ctx.new_page()
    t0 = time.perf_counter()
    page.goto(f"{base}/replay")
    page.wait_for_function(HAS_TRACE_JS, arg=WHATIF_TRACE, timeout=timeout_ms)
    page.evaluate(PAINTED_JS)
    seconds = time.perf_counter() - t0
    caption = page.get_by_text("What-if replayed in").first.inner_text()
    found = REPLAYED.search(caption)
    return {"page": page, "seconds": seconds, "engine": found.group(2) if found else None,
            "replay_ms": float(found.group(1).replace(",", "")) if found else None}


def slider_moves(page, repeat: int, timed_change: Callable, press: Callable, settle: Callable,
                 timeout_ms: int = 600_000) -> list[float]:
    """Once the page replays on the fast engine, seconds of ``repeat`` what-if slider moves to the redrawn chart."""
    page.get_by_text("on the fast engine").first.wait_for(timeout=timeout_ms)
    page.wait_for_function(HAS_TRACE_JS, arg=WHATIF_TRACE)
    settle(page)
    out = []
    for _ in range(repeat):
        out.append(timed_change(page, press(page, "eps_min", "ArrowRight")))
        settle(page)
    return out


def measure(ctx_factory: Callable, repeat: int, timed_change: Callable, press: Callable,
            settle: Callable) -> dict[str, Any]:
    """The first-use measurements of a fresh clone: ``{"latencies": {name: [seconds]}, "detail": {...}}``."""
    tmp = tempfile.mkdtemp(prefix="regime-dash-first-use-")
    try:
        t0 = time.perf_counter()
        clone = fresh_clone(tmp)
        store = Path(tmp) / "store"
        env = {"PYTHONPATH": str(clone)}  # the store a newcomer gets
        with serve(store, root=clone, env=env) as base, ctx_factory() as ctx:
            ready_s = time.perf_counter() - t0
            first = first_whatif_chart(ctx, base)
            moves = slider_moves(first["page"], repeat, timed_change, press, settle)
        return {"latencies": {"first_use_whatif_chart": [first["seconds"]], "first_use_slider": moves},
                "detail": {"clone_and_server_ready_s": ready_s, "first_chart_engine": first["engine"],
                           "first_chart_replay_ms": first["replay_ms"],
                           "slider_median_s": statistics.median(moves)}}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
