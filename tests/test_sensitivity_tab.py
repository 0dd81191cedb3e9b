"""The Replay page's Sensitivity tab under streamlit's AppTest: run, tornado charts, no-effect list, a field's sweep."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from regime_dash.ui.sensitivity_tab import clicked_field  # noqa: E402
from regime_dash.benchmarks.page_load import CHROMIUM  # noqa: E402
import apptest_protos as protos  # noqa: E402
from tests.test_app_pages import charts  # noqa: E402

APP = str(Path(__file__).resolve().parents[1] / "app.py")
KEY = "replay.sensitivity"


def tornado_titles(at: AppTest) -> dict[str, dict]:
    out = {}
    for spec in charts(at):
        data = spec["data"]
        if data and data[0].get("type") == "bar" and data[0].get("orientation") == "h":
            out[spec["layout"]["title"]["text"].split(" ")[0]] = data[0]
    return out


def no_effect_table(at: AppTest):
    (frame,) = [d.value for d in at.dataframe if "explained by" in d.value.columns]
    return frame


@pytest.fixture
def replay_page(tmp_path, monkeypatch) -> AppTest:
    monkeypatch.setenv("REGIME_DASH_STORE", str(tmp_path / "store"))
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.switch_page("regime_dash/ui/pages/replay.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


@pytest.mark.slow  # a whole sensitivity through AppTest: ~1.4 s of CPU
def test_sensitivity_tab_runs_and_lists_max_duration_as_no_effect(replay_page):
    at = replay_page
    assert at.selectbox(key="replay.source.scenario").value == "kelly_trap_run8"
    assert any(c.value == "Press Run sensitivity." for c in at.caption)
    at.button(key=f"{KEY}.run").click().run()
    assert not at.exception, [e.message for e in at.exception]
    # 129 + the two model switches + the two mirror switches (no effect: the sensitivity replays the single path)
    assert any(c.value.startswith("133 one-at-a-time and") for c in at.caption)
    (bar,) = at.get("progress")
    value, text = protos.progress(bar)
    assert value == 100 and text.startswith("sensitivity: done in ")
    quiet = no_effect_table(at).set_index("field")
    assert quiet.loc["max_duration", "explained by"].startswith("timeout_unreachable: The dead zone cycled")
    assert quiet.loc["max_duration", "except at the end of its range"].startswith("Only max_duration=0")
    assert quiet.loc["transition_steps", "except at the end of its range"] == ""
    bars = tornado_titles(at)
    assert {"dead_zone_steps", "timeout_steps", "tail_events", "sigma_max"} <= set(bars)
    # each table downloads through the one download helper; the no-effect table as shown above
    assert not at.get("download_button")
    assert at.selectbox(key=f"{KEY}.download.table").options == ["effects", "one-at-a-time", "pairs", "pair grid",
                                                                  "no effect"]
    at.selectbox(key=f"{KEY}.download.table").set_value("no effect")
    at.radio(key=f"{KEY}.download.format").set_value("csv")
    at.button(key=f"{KEY}.download.prepare").click().run()
    (button,) = at.get("download_button")
    assert protos.label(button).startswith(f"Download regime-dash-sensitivity-no-effect.csv ({len(quiet)} rows, ")
    at.selectbox(key=f"{KEY}.download.table").set_value("one-at-a-time")
    at.radio(key=f"{KEY}.download.format").set_value("parquet")
    at.button(key=f"{KEY}.download.prepare").click().run()
    (button,) = at.get("download_button")
    # as many rows as the caption counts one-at-a-time replays
    assert protos.label(button).startswith("Download regime-dash-sensitivity-one-at-a-time.parquet (133 rows, ")
    # the no-effect fields are not drawn as bars
    assert all("max_duration" not in b["y"] for b in bars.values())
    assert bars["dead_zone_steps"]["customdata"] == bars["dead_zone_steps"]["y"]
    # open a field's sweep: one panel per metric it moves
    at.selectbox(key=f"{KEY}.field").set_value("envelope").run()
    assert not at.exception
    sweep = [c for c in charts(at) if c["data"] and c["data"][0].get("mode") == "lines+markers"
             and c["data"][0].get("name") in ("floor_active_steps", "sigma_max")]
    assert {t["name"] for t in sweep[0]["data"]} == {"floor_active_steps", "sigma_max"}
    assert sweep[0]["data"][0]["x"] == ["false", "true"]


@pytest.mark.slow  # two sensitivities through AppTest: ~1.2 s of CPU
def test_a_changed_config_asks_for_a_new_run_and_f2_off_moves_max_duration(replay_page):
    at = replay_page
    at.button(key=f"{KEY}.run").click().run()
    at.toggle(key="replay.whatif.resurrection").set_value(False).run()
    assert any("changed since the last run" in c.value for c in at.caption)
    assert not tornado_titles(at)
    at.button(key=f"{KEY}.run").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert "max_duration" in tornado_titles(at)["timeout_steps"]["y"]
    assert "max_duration" not in set(no_effect_table(at)["field"])


def test_a_rejected_config_says_so(replay_page):
    at = replay_page
    at.slider(key="replay.whatif.eps_min").set_value(0.9).run()
    assert not at.exception
    assert any("fix it to run a sensitivity" in i.value for i in at.info)


def test_clicked_field_applies_each_click_once():
    click = SimpleNamespace(selection=SimpleNamespace(points=[{"customdata": "max_duration", "y": "max_duration"}]))
    assert clicked_field(click, None) == "max_duration"
    assert clicked_field(click, "max_duration") is None  # the chart keeps its selection across reruns
    assert clicked_field(click, "envelope") == "max_duration"
    assert clicked_field(SimpleNamespace(selection=SimpleNamespace(points=[])), None) is None
    assert clicked_field(None, None) is None
    bogus = SimpleNamespace(selection=SimpleNamespace(points=[{"customdata": "not_a_field"}]))
    assert clicked_field(bogus, None) is None


# ---- in a real browser: a click on a bar opens that field's sweep ------------------------------
#: Whether a drawn Plotly graph holds a field sweep of ``name`` (line traces whose hover names it).
SWEEP_OF = """(name) => Array.from(document.querySelectorAll('.js-plotly-plot')).some(gd =>
    (gd._fullData || []).some(t => t.mode === 'lines+markers' &&
        String(t.hovertemplate || '').startsWith(name + '=')))"""


@pytest.mark.browser
@pytest.mark.slow  # a sensitivity run on the session's streamlit server, in chromium: 20 s and more on 2 shared cores
@pytest.mark.skipif(importlib.util.find_spec("playwright") is None, reason="playwright is in requirements-test.txt")
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is not installed (.ci/run installs it with apt)")
def test_clicking_a_tornado_bar_opens_the_field_sweep(app_server, browser_page):
    from artifacts import artifact
    from served_app import settle
    from tests.test_browser import traces_with

    page = browser_page
    page.goto(app_server.url + "/replay")
    traces_with(page, "baseline kelly_f")
    settle(page)  # a tab picked while the page still runs may be reset by that run
    page.get_by_role("tab", name="Sensitivity").click()
    page.get_by_role("button", name="Run sensitivity").click()
    page.get_by_text("one-at-a-time and").wait_for()
    bars = page.locator(".js-plotly-plot:visible .barlayer .point path")
    bars.first.wait_for()
    # the first tornado is dead_zone_steps; its top bar is the field that moves it most
    top = page.evaluate("""() => {
        const gd = Array.from(document.querySelectorAll('.js-plotly-plot')).find(g =>
            (g._fullData || []).some(t => t.type === 'bar'));
        const y = gd._fullData[0].y; return y[y.length - 1]; }""")
    assert not page.evaluate(SWEEP_OF, top)  # no sweep is open before the click
    first = page.locator(".js-plotly-plot:visible").filter(has=page.locator(".barlayer")).first
    paths = first.locator(".barlayer .point path")
    box = paths.nth(paths.count() - 1).bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    # the field's sweep: line traces whose hover names the clicked field
    page.wait_for_function(SWEEP_OF, arg=top)
    page.screenshot(path=str(artifact("sensitivity-tab.png")), full_page=True)
