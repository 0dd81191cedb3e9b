"""Dashboard latency benchmark: from a user's action to the updated chart, in headless chromium.

``python -m regime_dash bench ui [--steps 25000] [--big-steps 1000000] [--repeat 5] [--out FILE]``

1. makes the runs: ``kelly_trap_run8`` replayed for ``--steps`` steps and ingested
   (as ``bench page_load`` does), and a ``--big-steps`` run: the same diag lines,
   cut to the columns the charts draw, tiled and renumbered, then ingested;
2. starts ``streamlit run app.py`` against that store (the page-load benchmark's
   :func:`~regime_dash.benchmarks.page_load.serve`) and waits until the app's
   background compile of the fast engine is done (the Replay page says which
   engine ran);
3. in headless chromium (:func:`~regime_dash.benchmarks.page_load.chromium`),
   does what a user does and times each action from the key press or click
   until the browser has drawn the changed chart (a trace's data differs from
   before, plus two animation frames):

   - first use (:mod:`~regime_dash.benchmarks.first_use`, its own fresh clone and server, measured
     first): the Replay page's first what-if chart from a cold numba cache, then its slider;
   - Replay: a what-if slider moved one step (``eps_min`` by 0.01, 25k steps);
   - Explore: the smoothing slider, the step window, a run added (25k and big; from the
     click on the run in the open list, and from the click that opens the list);
   - Explore's custom panels (25k): a field picked from the search (its panel drawn), and a
     custom panel's log toggle (its y axis redrawn as log);
   - Compare: the smoothing slider with ``--compare-runs`` runs of ``--steps`` steps overlaid;
   - every page's first chart (or first table where a page has no chart), warm: opened as a
     new page load, and reached through the app's menu from another page; timed until the
     page's own stamp of the frame that painted it (:data:`STAMP_JS`), not until Playwright
     sees it (also reported: it can be later by the work the page does after its first chart);
   - Live: chart redraws per second while the simulator plays (20 steps a tick).

Each latency is the median of ``--repeat`` actions and is printed beside its
target. The views are opened by URL (``?runs=...&steps=...``), which
is what the dashboard's query parameters are for. The load average is printed
too: the machine is shared, and the figures move with it.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from regime_dash.benchmarks import first_use
from regime_dash.benchmarks.first_use import HAS_TRACE_JS
from regime_dash.benchmarks.page_load import PAINTED_JS, chromium, make_run, serve

#: Targets (seconds), by measurement name.
TARGETS: dict[str, float] = {
    "replay_slider": 0.5,
    "explore_smoothing": 0.7, "explore_window": 0.7, "explore_run_added": 0.7, "explore_run_added_from_open": 0.7,
    "explore_big_smoothing": 1.5, "explore_big_window": 1.5, "explore_big_run_added": 1.5,
    "explore_big_run_added_from_open": 1.5,
    "compare_10_runs_smoothing": 1.0,
    "explore_custom_panel_added": 0.7, "explore_custom_log_toggle": 0.7,
    "first_chart_runs": 2.0, "first_chart_explore": 2.0, "first_chart_replay": 2.0,
    "first_chart_live": 2.0, "first_chart_controllers": 2.0, "first_chart_slots": 2.0,
    "first_chart_compare": 2.0,
    **{f"first_chart_{p}_in_app": 2.0 for p in ("runs", "explore", "replay", "live", "controllers", "slots",
                                                 "compare")},
    "live_redraws_per_s": 10.0,
    "first_use_whatif_chart": 5.0, "first_use_slider": 0.3,
}
#: Measurements where more is better (the target is a floor, not a ceiling).
AT_LEAST = frozenset({"live_redraws_per_s"})

#: A signature of every Plotly graph on the page: trace names, lengths and a sample of
#: each trace's data. It changes when a chart is redrawn with other data. It runs every animation
#: frame while a change is awaited, on the page's own thread: it reads its five samples in place
#: (a copy of every trace's arrays, 400k numbers with ten runs, cost the page ~70 ms a redraw).
SIGNATURE_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd =>
    (gd._fullData || []).map(t => {
        const x = t.x || [], y = t.y || [];
        const k = [0, y.length >> 2, y.length >> 1, (3 * y.length) >> 2, y.length - 1];
        return `${t.name}:${y.length}:${k.map(i => y[i]).join(',')}:${x[0]}:${x[x.length - 1]}`;
    }).join('|')).join('||')"""

#: Columns the charts draw (the big run keeps only these, so its file stays a few hundred MB).
def _chart_columns() -> list[str]:
    from regime_dash.figures import signals as figures

    return sorted({"step", *figures.PANEL_COLUMNS})


def make_big_run(store: str | os.PathLike, steps: int, seed: int = 0, base_steps: int = 25_000) -> dict[str, Any]:
    """A ``steps``-step run in ``store``: a ``base_steps`` replay's chart columns, tiled with steps renumbered."""
    from regime_dash.diag import catalogue as diag
    from regime_dash.sources import scenarios
    from regime_dash.engine import replay
    from regime_dash.store.open import open_store

    t0 = time.perf_counter()
    frame = replay(scenarios.make("kelly_trap_run8", seed=seed, steps=base_steps, accounts=64), engine="auto")
    frame = frame[[c for c in _chart_columns() if c in frame.columns]]
    step_re = re.compile(r'"step": ?-?\d+')
    with tempfile.TemporaryDirectory() as tmp:
        small = diag.write_jsonl(frame, Path(tmp) / "base.jsonl")
        lines = [line for line in small.read_text().splitlines() if line.strip()]
        path = Path(tmp) / f"big-{steps}.jsonl"
        with open(path, "w") as out:
            for t in range(steps):
                out.write(step_re.sub(f'"step": {t}', lines[t % len(lines)], count=1) + "\n")
        size = path.stat().st_size
        result = open_store(store).ingest(path, name=f"big{steps}")
    return {"run_id": result.run_id, "rows": result.rows, "jsonl_bytes": size,
            "prepare_s": time.perf_counter() - t0}


def _signature(page) -> str:
    return page.evaluate(SIGNATURE_JS)


def timed_change(page, action: Callable[[], None], timeout_ms: int = 120_000) -> float:
    """Seconds from ``action()`` until some chart on ``page`` shows other data, painted."""
    return timed_steps(page, None, action, timeout_ms)[0]


def timed_steps(page, prepare: Callable[[], None] | None, action: Callable[[], None],
                timeout_ms: int = 120_000) -> tuple[float, float]:
    """``prepare()`` (what a user does before the action itself, such as opening a list), then
    ``action()``; seconds from the action, and from the start of ``prepare``, until some chart on
    ``page`` shows other data, painted."""
    before = _signature(page)
    t_prep = time.perf_counter()
    if prepare is not None:
        prepare()
    t0 = time.perf_counter()
    action()
    page.wait_for_function(f"(before) => ({SIGNATURE_JS})() !== before && ({SIGNATURE_JS})() !== ''",
                           arg=before, polling="raf", timeout=timeout_ms)
    page.evaluate(PAINTED_JS)
    end = time.perf_counter()
    return end - t0, end - t_prep


def _settle(page, quiet_ms: int = 600) -> None:
    """Wait until the app has stopped running (no 'Running…' status) and the charts stopped changing."""
    page.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')", polling=100)
    last, still = _signature(page), 0.0
    while still < quiet_ms / 1000:
        time.sleep(0.1)
        now = _signature(page)
        still = still + 0.1 if now == last else 0.0
        last = now


def _slider(page, label: str, nth: int = 0):
    return page.locator(f"input[type=range][aria-label='{label}'], [role=slider][aria-label='{label}']").nth(nth)


def _press(page, label: str, key: str, nth: int = 0) -> Callable[[], None]:
    thumb = _slider(page, label, nth)

    def act() -> None:
        thumb.focus()
        thumb.press(key)
    return act


def replay_slider(ctx, base: str, steps: int, repeat: int) -> list[float]:
    """Replay page, ``steps``-step trap scenario: ``eps_min`` one step up (0.01), ``repeat`` times."""
    page = ctx.new_page()
    try:
        page.goto(f"{base}/replay?steps={steps}")
        return first_use.slider_moves(page, repeat, timed_change, _press, _settle)
    finally:
        page.close()


def explore_actions(ctx, base: str, run_id: str, other_id: str, repeat: int) -> dict[str, list[float]]:
    """Explore with ``run_id``: smoothing and window moves, then ``other_id`` added to the view."""
    page = ctx.new_page()
    out: dict[str, list[float]] = {"smoothing": [], "window": [], "run_added": [], "run_added_from_open": []}
    try:
        page.goto(f"{base}/explore?runs={run_id}")
        page.locator(".js-plotly-plot").first.wait_for()
        _settle(page)
        for _ in range(repeat):
            out["smoothing"].append(timed_change(
                page, _press(page, "Smoothing (debiased EMA; flags and counters stay raw)", "PageUp")))
            _settle(page)
        for _ in range(repeat):
            out["window"].append(timed_change(page, _press(page, "Steps in view — start", "PageUp")))
            _settle(page)
        for _ in range(repeat):
            page.goto(f"{base}/explore?runs={run_id}")
            page.locator(".js-plotly-plot").first.wait_for()
            _settle(page)
            box = page.get_by_test_id("stMultiSelect").first
            # the list names each run "name · <the id's last 6 characters>"; the first option would
            # be whichever run the store lists first (with three runs stored, the 1,000,000-step one)
            option = page.get_by_role("option").filter(has_text=other_id[-6:]).first

            def open_list() -> None:
                box.click()
                option.wait_for()
            # the run is added by the click on it in the open list: timed from that click; the
            # figure from the click that opens the list (this benchmark's first method) is kept too
            added, from_open = timed_steps(page, open_list, option.click)
            out["run_added"].append(added)
            out["run_added_from_open"].append(from_open)
            _settle(page)
            page.keyboard.press("Escape")
        return out
    finally:
        page.close()


#: The y-axis type of the custom panel titled ``title`` (``"linear"``, ``"log"``), or null while
#: no graph on the page has that panel.
PANEL_AXIS_JS = """(title) => {
    for (const gd of document.querySelectorAll('.js-plotly-plot')) {
        const L = gd._fullLayout, k = ((L && L.annotations) || []).findIndex(a => a.text === title);
        if (k >= 0 && (gd._fullData || []).some(t => (t.y || []).length > 0)) return L['yaxis' + (k ? k + 1 : '')].type;
    }
    return null;
}"""


def custom_panel_actions(ctx, base: str, run_id: str, repeat: int) -> dict[str, list[float]]:
    """Explore with ``run_id``: a field picked from the panel search until its panel is drawn (on a
    fresh page each time), and that panel's log toggle until its y axis is drawn as log (or linear again)."""
    from regime_dash.diag import catalogue as diag

    field, title = diag.SIGMA, "popart.sigma"
    page = ctx.new_page()
    out: dict[str, list[float]] = {"custom_panel_added": [], "custom_log_toggle": []}

    def until(script: str, arg: str, t0: float) -> float:
        page.wait_for_function(f"(a) => {script}", arg=arg, polling="raf", timeout=120_000)
        page.evaluate(PAINTED_JS)
        return time.perf_counter() - t0
    try:
        search = page.get_by_test_id("stSelectbox").filter(has_text="Add a panel")
        for _ in range(repeat):
            page.goto(f"{base}/explore?runs={run_id}")  # a new session: the spec panels alone
            page.locator(".js-plotly-plot").first.wait_for()
            _settle(page)
            search.click()
            page.keyboard.type(field)
            page.get_by_role("option", name=field, exact=True).wait_for()
            t0 = time.perf_counter()
            page.keyboard.press("Enter")
            out["custom_panel_added"].append(until(f"({PANEL_AXIS_JS})(a) !== null", title, t0))
            _settle(page)
        page.goto(f"{base}/explore?runs={run_id}&panels={field}")
        page.wait_for_function(f"(a) => ({PANEL_AXIS_JS})(a) !== null", arg=title)
        _settle(page)
        for k in range(repeat):
            now = f"{title} (log)" if k % 2 == 0 else title  # the panel's title as it will be
            t0 = time.perf_counter()
            page.get_by_text("log", exact=True).click()
            want = "log" if k % 2 == 0 else "linear"
            out["custom_log_toggle"].append(until(f"({PANEL_AXIS_JS})(a) === {want!r}", now, t0))
            _settle(page)
        return out
    finally:
        page.close()


def compare_smoothing(ctx, base: str, run_ids: list[str], repeat: int) -> list[float]:
    """Compare with every run of ``run_ids`` overlaid: the smoothing slider one page up, ``repeat`` times."""
    page = ctx.new_page()
    try:
        page.goto(f"{base}/compare?more={','.join(run_ids)}")
        page.wait_for_function(HAS_TRACE_JS, arg=f"{_label_of(run_ids[-1])} kelly_f", timeout=300_000)
        _settle(page)
        out = []
        for _ in range(repeat):
            out.append(timed_change(page, _press(page, "Smoothing (debiased EMA; flags and counters stay raw)",
                                                 "PageUp")))
            _settle(page)
        return out
    finally:
        page.close()


def _label_of(run_id: str) -> str:
    """The name the page gives a run made by :func:`~regime_dash.benchmarks.page_load.make_run` (its
    file's stem; runs of one length share it, so the page adds the id's last 6 characters)."""
    return f"{run_id.rsplit('-', 1)[0]} ({run_id[-6:]})"


#: Counts, for ``ms`` milliseconds, the animation frames in which the chart's data differs from
#: the frame before: the redraws the user sees (a frame with no chart drawn is not one).
COUNT_REDRAWS_JS = """(ms) => new Promise(done => {
    const sig = """ + SIGNATURE_JS + """;
    let last = sig(), n = 0;
    const t0 = performance.now();
    const tick = () => {
        const now = sig();
        if (now !== last && now !== '') n += 1;
        last = now;
        if (performance.now() - t0 < ms) requestAnimationFrame(tick); else done(n);
    };
    requestAnimationFrame(tick);
})"""


def live_rate(ctx, base: str, seconds: float = 5.0, repeat: int = 3) -> list[float]:
    """Redraws per second of the Live chart while it plays at the default 20 steps a tick."""
    page = ctx.new_page()
    try:
        page.goto(f"{base}/live")
        page.get_by_role("button", name="Play").click()
        page.wait_for_function(HAS_TRACE_JS, arg="kelly_f")
        time.sleep(1.0)  # past the first ticks
        return [page.evaluate(COUNT_REDRAWS_JS, seconds * 1000) / seconds for _ in range(repeat)]
    finally:
        page.close()


#: Page path → what shows that its first chart (or table) is drawn: (what, Playwright selector,
#: the same test as a JavaScript expression for the page's own stamp, :data:`STAMP_JS`).
_SUBPLOT = "document.querySelector('.js-plotly-plot .cartesianlayer .subplot')"
_TABLE = "document.querySelector('[data-testid=stDataFrame] canvas')"
FIRST_VIEW = {
    "runs": ("table", "[data-testid=stDataFrame] canvas", _TABLE),
    "explore": ("chart", ".js-plotly-plot .cartesianlayer .subplot", _SUBPLOT),
    "replay": ("chart", ".js-plotly-plot .cartesianlayer .subplot", _SUBPLOT),
    "live": ("controls", "button:has-text('Play')",
             "Array.from(document.querySelectorAll('button')).some(b => b.textContent.includes('Play'))"),
    "controllers": ("chart", ".js-plotly-plot .cartesianlayer .subplot", _SUBPLOT),
    "slots": ("table", "[data-testid=stDataFrame] canvas", _TABLE),
    "compare": ("chart", ".js-plotly-plot .cartesianlayer .subplot", _SUBPLOT),
}

#: Stamps, in the page, the wall-clock time (ms since the epoch) of the second animation frame
#: after the one in which ``shown`` (a JavaScript expression) first holds: the view is painted.
#: Read by the benchmark instead of when Playwright sees it: Playwright's poll and its
#: round trips need the page's main thread, so a page that keeps that thread busy after its
#: first chart (more charts, tables) was seen up to 0.7 s after the chart was on screen.
STAMP_JS = """(shown) => {
    const test = new Function('return (' + shown + ');');
    window.__firstViewPainted = null;
    const check = () => {
        if (window.__firstViewPainted !== null || !test()) return false;
        window.__firstViewPainted = 0;
        requestAnimationFrame(() => requestAnimationFrame(() => {
            window.__firstViewPainted = performance.timeOrigin + performance.now();
        }));
        return true;
    };
    if (check()) return;
    const seen = new MutationObserver(() => { if (check()) seen.disconnect(); });
    seen.observe(document, {subtree: true, childList: true});
}"""


def _stamped(page, t0: float) -> tuple[float, float]:
    """``(painted, seen)``: seconds from ``t0`` (``time.time()``) until the page's stamp, and
    until Playwright, polling, saw the view painted (the slower, older way to read a first view)."""
    page.evaluate(PAINTED_JS)
    seen = time.time() - t0
    page.wait_for_function("() => window.__firstViewPainted > 0", polling=50)
    return page.evaluate("() => window.__firstViewPainted") / 1000.0 - t0, seen


def page_url(base: str, name: str) -> str:
    """The URL of page ``name`` (a key of :data:`FIRST_VIEW`): the default page, Runs, is the app's root."""
    return f"{base}/{'' if name == 'runs' else name}"


def first_views(ctx, base: str, runs_query: str, repeat: int,
                seen: dict[str, list[float]] | None = None) -> dict[str, list[float]]:
    """Seconds from navigating a fresh page to each page until its first chart (or table) is painted
    (the page's own stamp, :data:`STAMP_JS`); ``seen`` gets when Playwright saw it."""
    out: dict[str, list[float]] = {}
    for name, (_, selector, shown) in FIRST_VIEW.items():
        times, late = [], []
        for _ in range(repeat + 1):  # the first load of each page warms its caches; it is dropped
            page = ctx.new_page()
            try:
                page.add_init_script(f"({STAMP_JS})({json.dumps(shown)})")
                t0 = time.time()
                page.goto(page_url(base, name) + (runs_query if name == "explore" else ""))
                page.locator(selector).first.wait_for()
                painted, saw = _stamped(page, t0)
                times.append(painted)
                late.append(saw)
            finally:
                page.close()
        out[name] = times[1:]
        if seen is not None:
            seen[name] = late[1:]
    return out


def first_views_in_app(ctx, base: str, repeat: int,
                       seen: dict[str, list[float]] | None = None) -> dict[str, list[float]]:
    """Seconds from the click on a page's link in the app's menu until its first chart (or table)
    is painted: a page switch inside the app, as a user moving between pages makes it (the
    browser keeps the app's scripts, plotly.js among them, loaded and started), where
    :func:`first_views` opens each page as a new page load."""
    page = ctx.new_page()

    def go(name: str) -> None:  # the menu's link to a page is its URL (the served app names its pages)
        page.locator(f'[data-testid=stSidebarNav] a[href="{page_url(base, name)}"]').first.click()

    try:
        page.goto(f"{base}/live")
        page.locator(FIRST_VIEW["live"][1]).first.wait_for()
        out: dict[str, list[float]] = {}
        for name, (_, selector, shown) in FIRST_VIEW.items():
            hub = "runs" if name == "live" else "live"  # a page that shows nothing the target's view does
            times, late = [], []
            for _ in range(repeat + 1):  # the first switch to each page warms its caches; it is dropped
                go(hub)
                page.locator(FIRST_VIEW[hub][1]).first.wait_for()
                _settle(page)
                page.locator(selector).first.wait_for(state="detached")  # nothing stale of the target left
                page.evaluate(STAMP_JS, shown)
                t0 = time.time()
                go(name)
                page.locator(selector).first.wait_for()
                painted, saw = _stamped(page, t0)
                times.append(painted)
                late.append(saw)
            out[name] = times[1:]
            if seen is not None:
                seen[name] = late[1:]
        return out
    finally:
        page.close()


#: Groups of measurements ``--only`` picks from.
GROUPS = ("first_use", "replay", "explore", "big", "compare", "pages", "live")


def served_latencies(steps: int, big_steps: int, repeat: int, only: tuple[str, ...], compare_runs: int,
                     load: list) -> tuple[dict[str, list[float]], dict[str, list[float]], dict[str, Any]]:
    """The groups measured on one served app over a store of prepared runs: the latencies, the first views as
    Playwright saw them, and the runs; appends the load average after each stage to ``load``."""
    latencies: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="regime-dash-store-") as store:
        print("preparing the runs…", file=sys.stderr)
        small = make_run(store, steps, 64)
        second = make_run(store, steps, 64, seed=1)
        big = make_big_run(store, big_steps) if big_steps else None
        more = [make_run(store, steps, 64, seed=s)["run_id"] for s in range(2, compare_runs)] \
            if "compare" in only else []
        with serve(store) as base, chromium(viewport=(1600, 1200)) as ctx:
            seen_by_playwright: dict[str, list[float]] = {}
            if "replay" in only:
                print("replay slider…", file=sys.stderr)
                latencies["replay_slider"] = replay_slider(ctx, base, steps, repeat)
            load.append(os.getloadavg())
            if "explore" in only:
                print(f"explore, {steps:,} steps…", file=sys.stderr)
                for k, v in explore_actions(ctx, base, small["run_id"], second["run_id"], repeat).items():
                    latencies[f"explore_{k}"] = v
            if "explore" in only:
                print(f"explore's custom panels, {steps:,} steps…", file=sys.stderr)
                for k, v in custom_panel_actions(ctx, base, small["run_id"], repeat).items():
                    latencies[f"explore_{k}"] = v
            if big:
                print(f"explore, {big_steps:,} steps…", file=sys.stderr)
                for k, v in explore_actions(ctx, base, big["run_id"], small["run_id"], repeat).items():
                    latencies[f"explore_big_{k}"] = v
            if "compare" in only:
                print(f"compare, {compare_runs} runs of {steps:,} steps…", file=sys.stderr)
                latencies[f"compare_{compare_runs}_runs_smoothing"] = compare_smoothing(
                    ctx, base, [small["run_id"], second["run_id"], *more], repeat)
            load.append(os.getloadavg())
            if "live" in only:
                print("live redraws…", file=sys.stderr)
                latencies["live_redraws_per_s"] = live_rate(ctx, base)
            if "pages" in only:
                print("first chart of each page…", file=sys.stderr)
                seen: dict[str, list[float]] = {}
                for k, v in first_views(ctx, base, f"?runs={small['run_id']}", repeat, seen).items():
                    latencies[f"first_chart_{k}"] = v
                    seen_by_playwright[f"first_chart_{k}"] = seen[k]
                seen = {}
                for k, v in first_views_in_app(ctx, base, repeat, seen).items():
                    latencies[f"first_chart_{k}_in_app"] = v
                    seen_by_playwright[f"first_chart_{k}_in_app"] = seen[k]
            load.append(os.getloadavg())
    return latencies, seen_by_playwright, {"small": small, "second": second, "big": big}


def run(steps: int = 25_000, big_steps: int = 1_000_000, repeat: int = 5,
        only: tuple[str, ...] = GROUPS, compare_runs: int = 10) -> dict[str, Any]:
    """The whole benchmark (or the groups ``only`` names); returns the JSON-able result."""
    from regime_dash.errors import ValidationError

    if repeat < 1:
        raise ValidationError(f"repeat must be >= 1, got {repeat!r}", field="repeat", value=repeat)
    if compare_runs < 2:
        raise ValidationError(f"compare runs must be >= 2, got {compare_runs!r}", field="compare_runs",
                              value=compare_runs)
    for g in only:
        if g not in GROUPS:
            raise ValidationError(f"unknown measurement group {g!r}; choose from {list(GROUPS)}",
                                  field="only", value=g)
    big_steps = big_steps if "big" in only else 0
    load = [os.getloadavg()]
    latencies: dict[str, list[float]] = {}
    detail: dict[str, Any] = {}
    if "first_use" in only:  # first: its own fresh clone and server, before this run's work loads the machine
        print("first use: a fresh clone's first what-if chart and slider…", file=sys.stderr)
        found = first_use.measure(lambda: chromium(viewport=(1600, 1200)), repeat, timed_change, _press, _settle)
        latencies.update(found["latencies"])
        detail["first_use"] = found["detail"]
    if [g for g in only if g != "first_use"]:
        served, seen_by_playwright, runs = served_latencies(steps, big_steps, repeat, only, compare_runs, load)
        latencies.update(served)
    else:
        seen_by_playwright, runs = {}, {}

    def meets(name: str, value: float) -> bool:
        target = TARGETS.get(name)
        return target is None or (value >= target if name in AT_LEAST else value <= target)

    rows = {name: {"median_s": statistics.median(v), "min_s": min(v), "max_s": max(v), "n": len(v),
                   "target_s": TARGETS.get(name), "meets": meets(name, statistics.median(v))}
            for name, v in latencies.items()}
    return {"benchmark": "ui", "steps": steps, "big_steps": big_steps, "repeat": repeat, "runs": runs,
            "latencies": rows, "samples_s": latencies, "load_average": load, "cpus": os.cpu_count(), "detail": detail,
        # the first views as Playwright saw them painted (polling; later by whatever work the page
        # does after its first chart), kept beside the stamped figure for comparison
        "first_views_seen_by_playwright_s": seen_by_playwright}


def table(result: dict[str, Any]) -> str:
    """The result as a text table: each latency beside its target."""
    seen = result.get("first_views_seen_by_playwright_s", {})
    lines = [f"{'measurement (seconds; live: per s)':<34} {'median':>7} {'min':>7} {'max':>7} {'target':>7}  ok"
             + ("  (Playwright saw it, median)" if seen else "")]
    for name, r in result["latencies"].items():
        target = "" if r["target_s"] is None else ("≥" if name in AT_LEAST else "≤") + f"{r['target_s']:.1f}"
        lines.append(f"{name:<34} {r['median_s']:>7.3f} {r['min_s']:>7.3f} {r['max_s']:>7.3f} {target:>7}  "
                     + ("yes" if r["meets"] else "NO ")
                     + (f"  ({statistics.median(seen[name]):.3f})" if name in seen else ""))
    lines.append("load average (1, 5, 15 min) at start, after replay, after explore, at end: "
                 + "; ".join(", ".join(f"{x:.1f}" for x in la) for la in result["load_average"]))
    first = result.get("detail", {}).get("first_use")
    if first:
        lines.append(f"first use: clone + server ready {first['clone_and_server_ready_s']:.1f} s; the first what-if "
                     f"chart replayed on the {first['first_chart_engine']} engine in {first['first_chart_replay_ms']} ms")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    result = run(args.steps, args.big_steps, args.repeat, tuple(args.only.split(",")), args.compare_runs)
    print(table(result))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    from regime_dash.benchmarks.targets import standalone

    sys.exit(standalone("ui", sys.modules[__name__]))
