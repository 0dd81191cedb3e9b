"""The dashboard in a real browser: Debian's chromium driven by Playwright against ``streamlit run``.

On the session's ``streamlit run app.py`` (:mod:`served_app`: one server and one chromium for
every browser test), uploads the sample diag file, opens Explore and waits
for the Plotly charts to draw, then moves a what-if slider on the Replay page
and checks the chart changes, then runs a sweep and clicks a point of it to open
that config's replay. Screenshots go to the session's artifacts folder (:mod:`artifacts`),
for a person to look at. The server and browser helpers are the page-load
benchmark's (:mod:`regime_dash.benchmarks.page_load`).

CI (``.ci/run``) installs chromium with apt; Playwright drives that binary
(``executable_path``), so no ``playwright install`` is needed.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from artifacts import artifact
from regime_dash.benchmarks.page_load import CHROMIUM, PAINTED_JS
from served_app import settle, shot

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,  # a page of the shared streamlit server in chromium: seconds to a minute each on 2 shared cores
    pytest.mark.skipif(not Path(CHROMIUM).exists(),
                       reason=f"{CHROMIUM} is not installed (.ci/run installs it with apt)"),
]
pytest.importorskip("playwright.sync_api", reason="playwright is in requirements-test.txt")

#: ``{name: y}`` of every trace of the Plotly graph that has a trace named ``name``, as
#: the browser drew it (``_fullData``: plotly.js's decoded copy; ``data`` still holds
#: base64 typed arrays); null while no such graph is on the page.
TRACES_JS = """(name) => {
    for (const gd of document.querySelectorAll('.js-plotly-plot')) {
        const data = gd._fullData || [];
        if (data.some(t => t.name === name && (t.y || []).length > 0))
            return Object.fromEntries(data.map(t => [t.name || '', Array.from(t.y || []).map(Number)]));
    }
    return null;
}"""


#: For each Plotly graph on the page, how many pixels plotly.js added to each margin
#: (left, right, top, bottom) to fit what sits in it. A margin widened means the whole figure
#: was drawn twice (plotly.js's automargin redraw).
WIDENED_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).filter(gd => gd._fullLayout)
    .map(gd => { const L = gd._fullLayout;
        return ['l', 'r', 't', 'b'].map(k => Math.round(L._size[k] - L.margin[k])); })"""


def assert_drawn_once(page) -> None:
    """No Plotly graph on ``page`` had a margin widened (so none was drawn a second time)."""
    widened = page.evaluate(WIDENED_JS)
    assert widened and all(w == [0, 0, 0, 0] for w in widened), widened


@pytest.fixture
def server(app_server) -> str:
    """The base URL of the session's server (its store is shared: each test keeps to its own runs)."""
    return app_server.url


def traces_with(page, name: str) -> dict[str, list[float]]:
    """Wait until a Plotly graph has drawn a trace called ``name``; that graph's traces.

    Waiting for a named trace, not for any graph, matters after a page switch:
    streamlit keeps the old page's elements on screen until the new ones arrive.
    """
    page.wait_for_function(f"() => ({TRACES_JS})({name!r}) !== null")
    return page.evaluate(TRACES_JS, name)


#: The box of the panel that draws trace ``name`` in the last graph holding it: its x axis's page
#: offset, length and range, and the y of its middle.
PANEL_BOX_JS = """(name) => {
    const gd = Array.from(document.querySelectorAll('.js-plotly-plot'))
        .filter(g => (g._fullData || []).some(t => t.name === name)).pop();
    const t = gd._fullData.find(t => t.name === name);
    const ax = gd._fullLayout['xaxis' + t.xaxis.slice(1)], ya = gd._fullLayout['yaxis' + t.yaxis.slice(1)];
    const r = gd.getBoundingClientRect();
    return {left: r.left + ax._offset, width: ax._length, x0: ax.range[0], x1: ax.range[1],
            y: r.top + ya._offset + ya._length / 2};
}"""


def drag_across(page, name: str, lo: float, hi: float) -> None:
    """A mouse drag across the panel of trace ``name`` from step ``lo`` to step ``hi`` (a box zoom)."""
    box = page.evaluate(PANEL_BOX_JS, name)

    def px(step):
        return box["left"] + (step - box["x0"]) / (box["x1"] - box["x0"]) * box["width"]
    page.mouse.move(px(lo), box["y"])
    page.mouse.down()
    page.mouse.move(px((lo + hi) / 2), box["y"], steps=5)
    page.mouse.move(px(hi), box["y"], steps=5)
    page.mouse.up()


def test_upload_explore_and_what_if(server, browser_page):
    page = browser_page
    page.goto(server + "/")
    # the one test that stores the sample's own bytes: the newest run, which Explore opens on
    page.set_input_files("input[type=file]", str(ROOT / "data" / "samples" / "diag.jsonl"))
    page.get_by_text("diag.jsonl: 1,200 rows").wait_for()
    page.locator("[data-testid=stDataFrame] canvas").first.wait_for()  # the runs table has drawn
    assert page.get_by_text("0 rejected").count() >= 1
    shot(page, "1-runs-after-upload")

    page.get_by_role("link", name="Explore").click()
    traces = traces_with(page, "diag kelly_f")
    assert {"diag", "diag kelly_f", "diag σ", "diag τ_min effective"} <= set(traces)
    assert page.locator(".js-plotly-plot").count() == 1
    assert page.locator(".js-plotly-plot .subplot").count() >= 7  # the seven panels, drawn
    assert_drawn_once(page)
    shot(page, "2-explore")

    page.get_by_role("link", name="Replay & what-if").click()
    before = traces_with(page, "what-if kelly_f")
    timeouts_before = page.get_by_test_id("stMetric").filter(has_text="timeouts").first.inner_text()
    shot(page, "3-replay-before")

    slider = page.locator("input[type=range][aria-label=max_duration]")
    slider.focus()
    slider.press("Home")  # max_duration 1000 → 0: every dead-zone step now times out
    page.wait_for_function(
        """([name, y]) => Array.from(document.querySelectorAll('.js-plotly-plot')).some(gd =>
            (gd._fullData || []).some(t => t.name === name &&
                JSON.stringify(Array.from(t.y || []).map(Number)) !== JSON.stringify(y)))""",
        arg=["what-if kelly_f", before["what-if kelly_f"]])
    after = traces_with(page, "what-if kelly_f")
    assert slider.get_attribute("aria-valuetext") == "0"
    assert after["what-if kelly_f"] != before["what-if kelly_f"]
    assert after["baseline kelly_f"] == before["baseline kelly_f"]  # only the what-if run moved
    assert_drawn_once(page)
    # the metrics come after the chart in the page's run: on a busy machine they may land a moment later
    page.wait_for_function("""(before) => Array.from(document.querySelectorAll('[data-testid=stMetric]'))
        .some(m => m.innerText.includes('timeouts') && m.innerText !== before)""", arg=timeouts_before)
    timeouts_after = page.get_by_test_id("stMetric").filter(has_text="timeouts").first.inner_text()
    assert timeouts_after != timeouts_before
    shot(page, "4-replay-after-slider")

    # sweep max_duration and click a point of the metric line: that config's replay opens
    page.get_by_role("tab", name="Sweep").click()
    page.get_by_role("button", name="Run sweep").click()
    points = page.locator(".js-plotly-plot:visible .scatterlayer .trace .points path")
    points.first.wait_for()
    assert points.count() == 8
    box = points.nth(2).bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    opened = page.get_by_text("Replay of max_duration=")
    opened.wait_for()
    assert opened.inner_text().startswith("Replay of max_duration=")
    page.locator(".js-plotly-plot:visible .subplot").nth(6).wait_for()
    shot(page, "5-sweep-cell-opened")


#: Steps of each point of the trace named ``name`` (as drawn) that fall in ``[lo, hi]``.
POINTS_IN_JS = """([name, lo, hi]) => {
    for (const gd of document.querySelectorAll('.js-plotly-plot')) {
        const t = (gd._fullData || []).find(t => t.name === name);
        if (t) return Array.from(t.x).filter(x => x >= lo && x <= hi).length;
    }
    return -1;
}"""


def test_zoom_redraws_the_window_with_more_detail(server, browser_page, tmp_path):
    """Dragging across Explore's chart re-reads the window at full resolution: more points in it."""
    import hashlib

    from regime_dash import RegimeConfig, replay
    from regime_dash.diag import catalogue as diag
    from regime_dash.sources import scenarios

    page = browser_page
    frame = replay(scenarios.make("kelly_trap_run8", steps=8000, accounts=16), RegimeConfig(), engine="reference")
    path = diag.write_jsonl(frame, tmp_path / "long.jsonl")
    page.goto(server + "/")
    page.set_input_files("input[type=file]", str(path))
    page.get_by_text("long.jsonl: 8,000 rows").wait_for()
    run_id = f"long-{hashlib.sha256(path.read_bytes()).hexdigest()[:12]}"  # the store's id: name-sha
    page.goto(f"{server}/explore?runs={run_id}")  # this run alone, whatever other tests stored
    traces_with(page, "long σ")
    settle(page)  # the app has finished its run (a drag on a chart that is being replaced is lost)
    lo, hi = 3000, 4000
    before = page.evaluate(POINTS_IN_JS, ["long σ", lo, hi])
    assert 0 < before < hi - lo  # the whole run's view keeps a sample of this window

    drag_across(page, "long σ", lo, hi)
    start = page.locator("input[type=range][aria-label='Steps in view — start']")
    page.wait_for_function("(el) => Number(el.getAttribute('aria-valuetext')) > 0", arg=start.element_handle())
    page.wait_for_function(f"() => ({POINTS_IN_JS})(['long σ', {lo + 50}, {hi - 50}]) > {before}")
    window = (int(start.get_attribute("aria-valuetext")),
              int(page.locator("input[type=range][aria-label='Steps in view — end']").get_attribute("aria-valuetext")))
    assert abs(window[0] - lo) < 150 and abs(window[1] - hi) < 150, window
    after = page.evaluate(POINTS_IN_JS, ["long σ", *window])
    assert after == window[1] - window[0] + 1  # every step of the window, not a sample
    assert "window=" in page.url  # the zoom is in the URL too
    shot(page, "6-explore-zoomed")


FILL_OF_JS = """(name) => {
    for (const gd of document.querySelectorAll('.js-plotly-plot')) {
        const t = (gd._fullData || []).find(t => t.name === name);
        if (t) return t.fill;
    }
    return null;
}"""


def test_replay_zoom_turns_the_duty_band_into_spans(server, browser_page):
    """Replay's default dead zone flips every step: a duty band over the whole run. Dragging across
    the chart zooms in (Explore's box zoom), and the window, drawn again from every step, shows the
    flag as its spans."""
    page = browser_page
    page.goto(server + "/replay")
    traces_with(page, "baseline kelly_f")
    settle(page)
    assert page.evaluate(FILL_OF_JS, "baseline dead-zone episode") == "tozeroy"
    lo, hi = 1000, 1300
    drag_across(page, "baseline kelly_f", lo, hi)
    page.wait_for_function(f"() => ({FILL_OF_JS})('baseline dead-zone episode') === 'toself'")
    shown = page.evaluate("""() => document.querySelector('.js-plotly-plot')._fullLayout.xaxis.range""")
    assert abs(shown[0] - lo) < 30 and abs(shown[1] - hi) < 30, shown
    shot(page, "replay-zoomed")
    page.wait_for_function("() => location.search.includes('window=')")  # the zoom is in the URL too
    url = page.url
    fresh = page.context.new_page()  # the copied URL in a new session opens the same window
    try:
        fresh.goto(url)
        traces_with(fresh, "baseline kelly_f")
        fresh.wait_for_function(f"() => ({FILL_OF_JS})('baseline dead-zone episode') === 'toself'")
        again = fresh.evaluate("""() => document.querySelector('.js-plotly-plot')._fullLayout.xaxis.range""")
        assert [round(v) for v in again] == [round(v) for v in shown], (again, shown)
    finally:
        fresh.close()


def test_explore_shows_the_verdict_strip_and_a_marker_at_a_planted_violation(server, browser_page, tmp_path):
    """A file with a planted fault (a dead-zone duration at step 250, a NaN σ at step 600): the verdict
    strip above the charts names the first failure, and the chart has a marker at that step."""
    import json

    lines = [json.loads(x) for x in (ROOT / "data" / "samples" / "diag.jsonl").read_text().splitlines()]
    lines[250]["risk_stack"]["regime"]["dead_zone"]["duration"] = 7.0
    lines[600]["risk_stack"]["popart"]["sigma"] = float("nan")
    planted = tmp_path / "planted.jsonl"
    planted.write_text("\n".join(json.dumps(r) for r in lines) + "\n")

    page = browser_page  # a fresh session: Explore starts on the newest run
    page.goto(server + "/")
    page.set_input_files("input[type=file]", str(planted))
    page.get_by_text("planted.jsonl: 1,200 rows").wait_for()  # ingested (other tests add runs too)
    page.get_by_role("link", name="Explore").click()
    picker = page.locator("[data-testid=stMultiSelect] input").first
    picker.click()
    page.keyboard.type("planted")
    page.keyboard.press("Enter")  # overlay the planted run on the sample
    page.keyboard.press("Escape")
    traces = traces_with(page, "verdict:dead_zone_duration")
    xs = page.evaluate("""() => { for (const gd of document.querySelectorAll('.js-plotly-plot'))
        for (const t of (gd._fullData || [])) if (t.name === 'verdict:dead_zone_duration')
            return Array.from(t.x || []).map(Number); return null; }""")
    assert 250 in xs and "verdict:finite_risk_stack_fields" in traces
    page.get_by_text("first failure: dead_zone_duration @ 250").wait_for()
    strip = page.locator("[data-testid=stMarkdownContainer]").filter(has_text="planted — verdict").first.inner_text()
    from regime_dash.diag.aliases import canonical_frame
    from regime_dash.analysis import verdict
    from regime_dash.usecases.check import load_target

    failed = [c.id for c in verdict(canonical_frame(load_target(str(planted))[0])).failed]
    assert {"dead_zone_duration", "finite_risk_stack_fields"} <= set(failed)  # rederive.duration sees it too
    assert "verdict FAIL" in strip and f"{len(failed)} fail" in strip
    nan_marks = page.evaluate("""() => { for (const gd of document.querySelectorAll('.js-plotly-plot'))
        for (const t of (gd._fullData || [])) if ((t.name || '').endsWith('σ non-finite'))
            return Array.from(t.text || []); return null; }""")
    assert nan_marks == ["NaN"]
    path = shot(page, "6-explore-verdict-strip-and-markers")
    assert path.stat().st_size > 0


#: Whether plotly.js hovers a point of the trace named ``name`` (what a click then selects).
HOVERED_JS = """(name) => Array.from(document.querySelectorAll('.js-plotly-plot')).some(gd =>
    (gd._hoverdata || []).some(d => d.data && d.data.name === name))"""

#: Where the first point of the trace named ``name`` is on the page (its graph's pixels), or null.
POINT_JS = """(name) => {
    for (const gd of document.querySelectorAll('.js-plotly-plot')) {
        const t = (gd._fullData || []).find(t => t.name === name);
        if (!t) continue;
        const xa = gd._fullLayout['xaxis' + t.xaxis.slice(1)], ya = gd._fullLayout['yaxis' + t.yaxis.slice(1)];
        const r = gd.getBoundingClientRect();
        return {x: r.left + xa._offset + xa.l2p(t.x[0]), y: r.top + ya._offset + ya.l2p(t.y[0]), step: t.x[0]};
    }
    return null;
}"""

#: The failures table's box (the first data grid after the "Failures (n)" caption, not in a stale
#: element), once it has stayed put for two animation frames; null until then. While Explore reruns,
#: a grid of the page being replaced may still be laid out above it.
TABLE_BOX_JS = """() => {
    const caption = Array.from(document.querySelectorAll('[data-testid=stMarkdown]'))
        .find(m => m.innerText.trim().startsWith('Failures ('));
    const table = caption && Array.from(document.querySelectorAll('[data-testid=stDataFrame]')).find(t =>
        (caption.compareDocumentPosition(t) & Node.DOCUMENT_POSITION_FOLLOWING) && !t.closest('[data-stale=true]'));
    const r = table && table.getBoundingClientRect();
    const box = r && r.width > 0 && r.height > 0 ? `${r.x},${r.y}` : null;
    const steady = box !== null && box === window.__rdTableBox;
    window.__rdTableBox = box;
    return steady ? {x: r.x, y: r.y} : null;
}"""

#: Milliseconds from ``t0`` (``performance.now()``) until the provenance panel shows its formula, its
#: highlighted rows and its drawn replay chart (polled every animation frame); false until then.
PANEL_OPEN_JS = """(t0) => {
    const d = document.querySelector('[role=dialog]');
    if (!d || !d.querySelector('.rd-rows tr.rd-used') || !d.innerText.includes('With the numbers')) return false;
    const drawn = Array.from(d.querySelectorAll('.js-plotly-plot'))
        .some(gd => (gd._fullData || []).some(t => t.name === 'replayed' && (t.y || []).length > 0));
    return drawn ? performance.now() - t0 : false;
}"""


def test_clicking_a_failure_marker_opens_its_provenance_panel(server, browser_page, tmp_path):
    """A run whose PopArt mean at step 700 was made wrong in the file: clicking the marker of
    ``rederive.popart_mean`` on the chart opens the provenance panel (formula with its numbers, rows
    t−1 and t, the local replay over the log), the selection goes into the URL, closing the panel takes
    it out, and a row of the failures table opens it again. The click-to-panel time is written to
    ``provenance-timing.json`` beside the screenshots (a figure to read, not a pass mark: the server
    loads the compiled re-derivation loop in the background when it starts, and a click before that
    is done runs the Python loop). The panel's picture for the README is ``provenance.png`` there;
    docs/img/provenance.png is a copy of it, made by hand when the panel changes."""
    import hashlib

    from helpers import planted_diag

    path, clean = planted_diag(tmp_path / "provenance.jsonl", step=700)
    run_id = f"provenance-{hashlib.sha256(path.read_bytes()).hexdigest()[:12]}"  # the store's id: name-sha
    page = browser_page
    page.goto(server + "/")
    page.set_input_files("input[type=file]", str(path))
    page.get_by_text("provenance.jsonl: 1,000 rows").wait_for()
    page.goto(f"{server}/explore?runs={run_id}")  # this run alone (other tests store runs too)
    traces_with(page, "verdict:rederive.popart_mean")
    page.get_by_text("Failures (1)").wait_for()
    settle(page)
    timings = []
    for attempt in range(2):
        point = page.evaluate(POINT_JS, "verdict:rederive.popart_mean")
        assert point["step"] == 700
        page.mouse.move(point["x"], point["y"])
        # plotly.js takes a click for the point it hovers: the marker, once the hover has found it
        page.wait_for_function(HOVERED_JS, arg="verdict:rederive.popart_mean", polling="raf")
        t0 = page.evaluate("performance.now()")
        page.mouse.click(point["x"], point["y"])
        timings.append(page.wait_for_function(PANEL_OPEN_JS, arg=t0, polling="raf").json_value())
        panel = page.locator("[role=dialog]")
        assert "Provenance: rederive.popart_mean at step 700" in panel.inner_text()
        page.wait_for_function("() => location.search.includes('failure=rederive.popart_mean%40700')")
        if attempt == 0:  # the dialog's opening animation run to its end, not caught half way
            page.screenshot(path=str(artifact("provenance.png")), clip={"x": 0, "y": 0, "width": 1400, "height": 1400},
                            animations="disabled")
            shot(page, "8-provenance-panel")
        text = panel.inner_text()
        right = float(clean["risk_stack.popart.mean"].iloc[700])
        assert f"expected {right:.9g}" in text and "replay splits at" in text and "step 700" in text
        used = panel.locator(".rd-rows tr.rd-used").all_inner_texts()
        assert len(used) == 5 and any("risk_stack.inputs.batch_sum" in r for r in used)
        page.keyboard.press("Escape")  # closed: the selection leaves the URL
        page.wait_for_function("() => !document.querySelector('[role=dialog]')")
        page.wait_for_function("() => !location.search.includes('failure=')")
        # the rest of the view stays: the same run's markers are still drawn (its id leaves the URL when it is
        # the page's default pick, as every value equal to its default does)
        assert f"runs={run_id}" in page.url or page.evaluate(POINT_JS, "verdict:rederive.popart_mean")["step"] == 700
    # a row of the failures table opens it too (the grid's row-selection cell, left of the first row)
    # the failures table, drawn again after the panel closed: found and measured in the page in one step,
    # since Streamlit may replace an element between a locator's wait and a separate bounding_box() call
    box = page.wait_for_function(TABLE_BOX_JS, polling="raf").json_value()
    x, y = box["x"] + 16, box["y"] + 35 + 17
    page.mouse.move(x, y)
    page.evaluate(PAINTED_JS)  # the grid draws the row's checkbox on hover, in its next frame
    page.mouse.click(x, y, delay=80)  # a press as a hand makes it: a press too quick is lost
    page.wait_for_function(PANEL_OPEN_JS, arg=page.evaluate("performance.now()"), polling="raf")
    page.wait_for_function("() => location.search.includes('failure=rederive.popart_mean%40700')")
    artifact("provenance-timing.json").write_text(json.dumps({"click_to_panel_ms": timings}))
    print(f"provenance panel: click to panel {', '.join(f'{t:.0f}' for t in timings)} ms")


#: The Live page's step metric as a number (the metric reads "1,240" or "1,240 of 3,000").
#: The Live page's "step" metric (-1 while it is not on the page). Found by its label: while a
#: tick's elements are replaced, the first metric on the page may be another one (open accounts).
STEP_JS = """() => {
    for (const m of document.querySelectorAll('[data-testid=stMetric]')) {
        const label = m.querySelector('[data-testid=stMetricLabel]');
        const value = m.querySelector('[data-testid=stMetricValue]');
        if (label && value && label.textContent.trim() === 'step') {
            return Number(value.textContent.split(' ')[0].replace(/,/g, ''));
        }
    }
    return -1;
}"""


#: The steps the Live page's step metric showed over ``ms`` milliseconds of animation frames, each once.
STEPS_SEEN_JS = f"""(ms) => new Promise(done => {{
    const seen = new Set(), t0 = performance.now();
    const tick = () => {{
        seen.add(({STEP_JS})());
        if (performance.now() - t0 < ms) requestAnimationFrame(tick); else done(Array.from(seen));
    }};
    requestAnimationFrame(tick);
}})"""


#: Over ``ms`` milliseconds of animation frames, how many had a laid-out Plotly graph hidden.
HIDDEN_FRAMES_JS = """(ms) => new Promise(done => {
    let hidden = 0;
    const t0 = performance.now();
    const tick = () => {
        hidden += Array.from(document.querySelectorAll('.js-plotly-plot')).some(gd =>
            gd.getBoundingClientRect().height > 0 && getComputedStyle(gd).visibility === 'hidden') ? 1 : 0;
        if (performance.now() - t0 < ms) requestAnimationFrame(tick); else done(hidden);
    };
    requestAnimationFrame(tick);
})"""


def test_live_plays_in_place_and_pauses(server, browser_page):
    """While playing, one fragment run plays tick after tick, each drawn in place; Pause
    interrupts it at once and the step stays where it stopped."""
    page = browser_page
    page.goto(server + "/live")
    page.get_by_role("button", name="Play").click()
    traces_with(page, "kelly_f")
    page.wait_for_function(f"() => ({STEP_JS})() >= 200")  # ten ticks of 20 steps and more
    # redrawn in place: never a second chart on screen (the tick before may linger in the page
    # as a stale, collapsed element until the fragment's run ends; the new one may not be laid
    # out yet in the frame sampled)
    assert page.locator(".js-plotly-plot").filter(visible=True).count() <= 1
    # each tick's new chart is shown from its first drawing, not hidden until streamlit has
    # measured it (a blank frame: the chart blinked)
    assert page.evaluate(HIDDEN_FRAMES_JS, 1500) == 0
    assert_drawn_once(page)
    page.get_by_role("button", name="Pause").click()
    try:
        page.get_by_role("button", name="Play").wait_for()
    except Exception as exc:  # say what the page showed instead: its buttons, step and errors
        buttons = page.evaluate("() => [...document.querySelectorAll('button')].map(b => b.innerText.trim())")
        errors = page.locator("[data-testid=stException], [data-testid=stAlert]").all_inner_texts()
        raise AssertionError(f"no Play button after Pause: buttons {buttons}, step {page.evaluate(STEP_JS)}, "
                             f"alerts {errors}") from exc
    # the pausing run has ended (its controls come before its draw of the step, which a loaded
    # machine sent seconds later), and a tick in flight when Pause was pressed has landed
    settle(page)
    stopped = page.evaluate(STEP_JS)
    # what is tested takes time: for 1.5 s after the pause, no frame shows another step
    assert stopped > 0 and page.evaluate(STEPS_SEEN_JS, 1500) == [stopped]
    assert stopped % 20 == 0  # whole ticks of the default speed
    shot(page, "live-paused")


def test_replay_slider_redraws_the_chart_in_place_with_the_small_bundle(server, browser_page):
    """A what-if slider move redraws the Replay chart in its graph div (same element, new data,
    one drawing: ``Plotly.react``), on the vendored cartesian bundle, without streamlit's plotly.js."""
    from regime_dash.ui import plotly_react

    page = browser_page
    requested: list[str] = []

    def on_request(request) -> None:
        requested.append(request.url)

    page.on("request", on_request)
    try:
        page.goto(server + "/replay")
        before = traces_with(page, "what-if kelly_f")
        settle(page)
        # mark the graph div and count its drawings from here on
        page.evaluate("""() => {
            const gd = document.querySelector('.js-plotly-plot');
            window.__replayGraph = gd;
            window.__drawings = 0;
            gd.on('plotly_afterplot', () => { window.__drawings += 1; });
        }""")
        slider = page.locator("input[type=range][aria-label=eps_min], [role=slider][aria-label=eps_min]").first
        slider.focus()
        slider.press("ArrowRight")  # eps_min one step up: the what-if run's ε floor moves
        # new traces drawn (not the moment of a redraw that holds none yet: no traces read as null)
        # both sides written by JSON.stringify (Python's json.dumps spaces and formats numbers
        # otherwise: every comparison with its text read "changed", before any redraw)
        page.wait_for_function(f"""(before) => {{ const t = ({TRACES_JS})('what-if kelly_f');
                                    return t !== null && JSON.stringify(t) !== JSON.stringify(before); }}""",
                               arg=before)
        settle(page)  # the run is over and what it sent is drawn: a second drawing would have come
        after = traces_with(page, "what-if kelly_f")
        moved = {name for name in after if after[name] != before.get(name)}
        assert moved and all(name.startswith("what-if") for name in moved), moved  # only the what-if run
        assert page.evaluate("() => document.querySelectorAll('.js-plotly-plot').length") == 1
        assert page.evaluate("() => document.querySelector('.js-plotly-plot') === window.__replayGraph")
        assert page.evaluate("() => window.__drawings") == 1  # one drawing of the new figure
        assert_drawn_once(page)
        assert len([u for u in requested if u.endswith("/" + plotly_react.BUNDLE)]) == 1  # once a page
        assert not [u for u in requested if "PlotlyChart" in u]  # streamlit's plotly.js chunk: not loaded
        assert page.evaluate("() => window.Plotly.version") == "4.1.1"
        assert not page.get_by_text("The chart could not be drawn").count()
        shot(page, "replay-redrawn-in-place")
    finally:
        page.remove_listener("request", on_request)


def test_a_chart_whose_plotly_js_cannot_load_says_so(server, browser_page):
    """With the bundle's request refused, the Replay chart's place says why, in words (no traceback)."""
    from regime_dash.ui import plotly_react

    page = browser_page
    pattern = "**/" + plotly_react.BUNDLE
    page.route(pattern, lambda route: route.abort())
    try:
        page.goto(server + "/replay")
        status = page.get_by_text("The chart could not be drawn: plotly.js did not load")
        status.wait_for()
        assert "Reload the page" in status.inner_text()
        assert not page.locator(".js-plotly-plot").count()
        assert not page.get_by_text("BidiComponent Error").count()  # streamlit's error box, with a stack
        shot(page, "replay-bundle-refused")
    finally:
        page.unroute(pattern)


THEME_JS = """() => {
    const gd = document.querySelector('.js-plotly-plot');
    const fl = gd && gd._fullLayout;
    return fl ? {paper: fl.paper_bgcolor.replace(/ /g, ''), plot: fl.plot_bgcolor.replace(/ /g, ''),
                 font: fl.font.color.toLowerCase(),
                 text: getComputedStyle(gd).getPropertyValue('--st-text-color').trim().toLowerCase()} : null;
}"""


def test_in_place_charts_follow_the_pages_light_or_dark_theme(server, browser_page):
    """The chart is drawn over the page's own background in the page's text colour, in the dark
    theme as in the light one (not a white box on a dark page)."""
    page = browser_page
    seen = {}
    try:
        for scheme in ("dark", "light"):
            page.emulate_media(color_scheme=scheme)
            page.goto(server + "/replay")
            traces_with(page, "what-if kelly_f")
            got = page.evaluate(THEME_JS)
            assert got["paper"] == got["plot"] == "rgba(0,0,0,0)", got
            assert got["text"] and got["font"] == got["text"], got
            seen[scheme] = got["text"]
    finally:
        page.emulate_media(color_scheme="light")
    assert seen["dark"] != seen["light"]  # the theme really changed between the two
