"""The Live page under streamlit's AppTest: every source, config changes while playing, injections, marks."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("streamlit")

from regime_dash import RegimeConfig, replay  # noqa: E402
from tests.test_app_pages import (chart_spec, metric, no_exception, open_app, page, shown,  # noqa: E402
                                  upload_sample_stream, values)


def marks(at) -> list[tuple[float, str]]:
    """``(x, name)`` of the vertical marks on the live chart."""
    return [(s["x0"], s["name"]) for s in chart_spec(at).get("layout", {}).get("shapes", [])]


def live_scenario(tmp_path, monkeypatch, scenario: str, steps: int):
    """The Live page with a scenario of ``steps`` steps chosen as its source."""
    at = open_app(tmp_path / "store", monkeypatch)
    at.switch_page(page("live")).run()
    at.radio(key="live.source.kind").set_value("Scenario").run()
    at.selectbox(key="live.source.scenario").set_value(scenario).run()
    at.number_input(key="live.source.steps").set_value(steps).run()
    return at


def test_live_simulator_steps_and_injections(tmp_path, monkeypatch):
    at = open_app(tmp_path / "store", monkeypatch)
    at.switch_page(page("live")).run()
    no_exception(at, "live")
    assert at.radio(key="live.source.kind").value == "Simulator"
    horizon = at.number_input(key="live.source.sim.horizon").value
    assert metric(at, "step") == f"0 of {horizon:,}"  # the simulator's schedule length
    at.button(key="live.controls.step").click().run()
    assert metric(at, "step") == f"1 of {horizon:,}"
    points = len(values(chart_spec(at)["data"][0]["x"]))
    for _ in range(3):
        at.button(key="live.controls.step").click().run()
    assert metric(at, "step") == f"4 of {horizon:,}"
    assert len(values(chart_spec(at)["data"][0]["x"])) > points  # the chart grows with the run
    at.button(key="live.controls.shock").click().run()
    at.button(key="live.controls.flat").click().run()
    at.button(key="live.controls.boundary").click().run()
    no_exception(at, "injections")
    run = at.session_state["live.run"]
    market = run.market_frame()
    assert list(market["shock"].to_numpy().nonzero()[0]) == [4]
    assert list(market["forced_flat"].to_numpy().nonzero()[0]) == [5]
    assert run.frame()["phase"].iloc[-1] == "eval"  # the boundary switched train to eval
    assert [(x, n.split(":")[0]) for x, n in marks(at)] == [(4, "shock at 4"), (5, "flat at 5"),
                                                            (6, "boundary at 6")]
    t = run.t
    at.button(key="live.controls.play").click().run()
    assert at.session_state["live.controls.playing"] is True
    assert at.button(key="live.controls.play").label == "Pause"
    assert at.session_state["live.run"].t == t + 20  # each tick of the fragment advances `speed` steps
    at.button(key="live.controls.play").click().run()
    assert at.session_state["live.controls.playing"] is False
    at.button(key="live.controls.reset").click().run()
    no_exception(at, "reset")
    assert at.session_state["live.run"] is not run and at.session_state["live.run"].t == 0


def test_the_live_simulator_stops_at_the_end_of_its_schedule(tmp_path, monkeypatch):
    """A schedule of 100 steps played at 500 steps a tick: the run ends at step 100, says so, and
    stops playing (no tick clock); an injection after the end is refused in words."""
    at = open_app(tmp_path / "store", monkeypatch)
    at.switch_page(page("live")).run()
    at.number_input(key="live.source.sim.horizon").set_value(100).run()
    at.slider(key="live.controls.speed").set_value(500).run()
    at.button(key="live.controls.play").click().run()
    no_exception(at, "play")
    run = at.session_state["live.run"]
    assert run.t == 100 and run.done and len(run.frame()) == 100
    assert metric(at, "step") == "100 of 100"
    assert any("run its schedule of 100 steps to its end" in i.value for i in at.info)
    at.button(key="live.controls.step").click().run()  # a step past the end takes none
    assert at.session_state["live.run"].t == 100
    at.button(key="live.controls.shock").click().run()
    no_exception(at, "shock after the end")
    assert any("nothing left to shock" in w.value for w in at.warning)


def test_live_stream_file_reconfigured_while_it_plays(tmp_path, monkeypatch):
    at = open_app(tmp_path / "store", monkeypatch)
    at.switch_page(page("live")).run()
    stream = upload_sample_stream(at, "live.source")
    assert metric(at, "step") == f"0 of {stream.steps:,}"
    at.button(key="live.controls.play").click().run()      # one tick: 20 steps
    no_exception(at, "play")
    run = at.session_state["live.run"]
    assert run.t == 20 and run.source.startswith("file:")
    # a slider moved while it plays: the change acts from the current step on
    at.slider(key="live.config.max_duration").set_value(300.0).run()
    no_exception(at, "slider")
    assert at.session_state["live.run"] is run
    assert [(c.step, c.kind, c.label) for c in run.changes][0] == (int(stream.step[20]), "config",
                                                                   "max_duration=300")
    at.button(key="live.controls.play").click().run()       # pause
    at.button(key="live.controls.shock").click().run()      # on a recording: an edit of the next input
    no_exception(at, "shock")
    frame = run.frame()
    dz_max = frame["risk_stack.regime.dead_zone.max_duration"].to_numpy()
    assert (dz_max[:20] == 1000).all() and (dz_max[20:] == 300).all()
    pd.testing.assert_frame_equal(frame.iloc[:20], replay(stream.slice(0, 20), RegimeConfig()))
    shocked = run.t - 1
    assert run.changes[-1].kind == "shock" and run.changes[-1].step == int(stream.step[shocked])
    assert (run.inputs().rewards[shocked] != stream.rewards[shocked]).sum() == 1
    names = [n for _, n in marks(at)]
    assert names[0].startswith(f"config at {int(stream.step[20])}: max_duration=300")
    assert names[-1].startswith(f"shock at {int(stream.step[shocked])}: tail shock")
    assert len(json.dumps(chart_spec(at)["layout"]["annotations"])) > 0


def test_live_scenario_and_a_rejected_config(tmp_path, monkeypatch):
    at = live_scenario(tmp_path, monkeypatch, "tail_shock", 400)
    no_exception(at, "scenario")
    assert metric(at, "step") == "0 of 400"
    at.button(key="live.controls.step").click().run()
    run = at.session_state["live.run"]
    assert run.source.startswith("scenario:tail_shock:") and run.t == 1
    at.slider(key="live.config.eps_min").set_value(0.9).run()  # above eps_max 0.5
    no_exception(at, "bad config")
    assert any("eps_min=0.9" in shown(e.value) and "keeps its current config" in e.value for e in at.error)
    assert at.session_state["live.run"] is run and run.changes == []
    at.button(key="live.controls.step").click().run()
    assert run.t == 2
    # another scenario is another run
    at.selectbox(key="live.source.scenario").set_value("calm").run()
    assert at.session_state["live.run"] is not run and at.session_state["live.run"].t == 0
    np.testing.assert_array_equal(run.frame()["step"], [0, 1])


def test_live_injection_after_the_end_of_a_stream_is_a_warning(tmp_path, monkeypatch):
    at = live_scenario(tmp_path, monkeypatch, "calm", 100)
    at.slider(key="live.controls.speed").set_value(100)
    at.button(key="live.controls.play").click().run()
    assert at.session_state["live.run"].done
    assert any("played to its end" in i.value for i in at.info)
    at.button(key="live.controls.flat").click().run()
    no_exception(at, "flat after the end")
    assert any("played to its end (100 steps): nothing left to flatten" in shown(w.value) for w in at.warning)
    assert len(at.get("plotly_chart")) == 1  # the chart stays
