"""The Replay page's Sensitivity tab under streamlit's AppTest: run, tornado charts, no-effect list, a field's sweep."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from regime_dash.ui.sensitivity_tab import clicked_field  # noqa: E402

APP = str(Path(__file__).resolve().parents[1] / "app.py")
KEY = "replay.sensitivity"


def charts(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def tornado_titles(at: AppTest) -> dict[str, dict]:
    out = {}
    for spec in charts(at):
        data = spec["data"]
        if data and data[0].get("type") == "bar" and data[0].get("orientation") == "h":
            out[spec["layout"]["title"]["text"].split(" ")[0]] = data[0]
    return out


def no_effect_table(at: AppTest):
    (frame,) = [d.value for d in at.dataframe if list(d.value.columns) == ["field", "why"]]
    return frame


@pytest.fixture
def replay_page(tmp_path, monkeypatch) -> AppTest:
    monkeypatch.setenv("REGIME_DASH_STORE", str(tmp_path / "store"))
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.switch_page("regime_dash/ui/pages/replay.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_sensitivity_tab_runs_and_lists_max_duration_as_no_effect(replay_page):
    at = replay_page
    assert at.selectbox(key="replay.source.scenario").value == "kelly_trap_run8"
    assert any(c.value == "Press Run sensitivity." for c in at.caption)
    at.button(key=f"{KEY}.run").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert any(c.value.startswith("130 one-at-a-time and") for c in at.caption)
    quiet = no_effect_table(at).set_index("field")["why"]
    assert "timeout_unreachable" in quiet["max_duration"]
    bars = tornado_titles(at)
    assert {"dead_zone_steps", "timeout_steps", "tail_events", "sigma_max"} <= set(bars)
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
