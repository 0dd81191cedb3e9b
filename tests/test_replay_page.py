"""The Replay page's box zoom window in the URL (``window=lo..hi``), under AppTest: written when the
window is zoomed, reopened from a URL, gone again at the whole run, and a value that cannot be a
window of this stream said and dropped; a new stream in the session drops the old one's window."""
from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from test_app_pages import no_exception, open_page, replay_chart  # noqa: E402

#: The default source's key (the kelly_trap_run8 preset: 3,000 steps of 128 accounts).
DEFAULT_SOURCE = "scenario:kelly_trap_run8:0:3000:128"
#: Its whole run, the x range drawn without a zoom.
WHOLE = [0, 2999]


def open_replay(tmp_path, monkeypatch, **params) -> AppTest:
    return open_page(tmp_path / "store", monkeypatch, "replay", **params)


def x_range(at: AppTest):
    return replay_chart(at)["layout"]["xaxis"].get("range")


def url_window(at: AppTest):
    value = at.query_params.get("window")
    return value[0] if isinstance(value, list) else value


def dropped_notes(at: AppTest) -> list[str]:
    return [w.value for w in at.warning if "URL parameter" in w.value and "window" in w.value]


def test_a_zoomed_window_goes_to_the_url_and_a_url_reopens_it(tmp_path, monkeypatch):
    from regime_dash.ui import widgets

    at = open_replay(tmp_path, monkeypatch)
    assert url_window(at) is None and x_range(at) == WHOLE  # the whole run: nothing in the URL
    at.session_state[widgets.window_key("replay.window", [DEFAULT_SOURCE])] = (1000, 1300)  # a box dragged
    at.run()
    no_exception(at, "zoomed")
    assert url_window(at) == "1000..1300" and x_range(at) == [1000, 1300]

    reopened = open_replay(tmp_path, monkeypatch, window="1000..1300")  # the copied URL, a new session
    assert x_range(reopened) == [1000, 1300] and not dropped_notes(reopened)
    reopened.button(key="replay.chart.later").click().run()
    assert url_window(reopened) == "1150..1450" and x_range(reopened) == [1150, 1450]
    reopened.button(key="replay.chart.out").click().run()
    assert url_window(reopened) is None and x_range(reopened) == WHOLE


@pytest.mark.parametrize("text", ["2000..5000", "1300..1000", "10..10", "a..b", "7"])
def test_a_url_window_that_cannot_be_used_is_said_and_dropped(tmp_path, monkeypatch, text):
    """Past the stream's last step, backwards, empty, not numbers, not a range: each is said, naming
    the parameter, dropped from the URL, and the whole run is drawn."""
    at = open_replay(tmp_path, monkeypatch, window=text)
    (note,) = dropped_notes(at)
    assert "window" in note and "dropped" in note
    assert url_window(at) is None and x_range(at) == WHOLE


def test_another_stream_drops_the_window_of_the_one_before(tmp_path, monkeypatch):
    at = open_replay(tmp_path, monkeypatch, window="1000..1300")
    assert x_range(at) == [1000, 1300]
    at.number_input(key="replay.source.seed").set_value(1).run()
    no_exception(at, "seed 1")
    assert url_window(at) is None and x_range(at) == WHOLE and not dropped_notes(at)


def test_a_replay_and_its_stream_are_cached_as_they_are_not_copied():
    """A slider move reads the cached baseline and what-if replays: the cache hands back the frames
    themselves (a value cache would unpickle a copy of each, at 1M steps most of a second), and the
    stream a page reads is the one cached (a value cache holds a pickled copy beside it)."""
    from regime_dash import RegimeConfig
    from regime_dash.ui import cache

    stream = cache.scenario_stream("tail_shock", 0, 300, 4)
    assert cache.scenario_stream("tail_shock", 0, 300, 4) is stream
    config = RegimeConfig(max_duration=40).as_dict()
    first = cache.replay("scenario:tail_shock:0:300:4", stream, config, "fast")
    again = cache.replay("scenario:tail_shock:0:300:4", stream, config, "fast")
    assert again is first and again["frame"] is first["frame"]
    other = cache.replay("scenario:tail_shock:0:300:4", stream, RegimeConfig().as_dict(), "fast")
    assert other["frame"] is not first["frame"]


@pytest.mark.parametrize("suffix", [".npz", ".parquet"])
def test_an_uploaded_stream_replays_light_and_as_the_whole_stream(suffix):
    """A stream file is held light (per-step fields and phase 1, no [T, b] arrays): its fast replays and
    sweeps equal the whole stream's bit for bit; the reference engine loads the whole stream from the file."""
    import hashlib
    import tempfile
    from pathlib import Path

    import pandas as pd

    from regime_dash import RegimeConfig
    from regime_dash.sources import scenarios
    from regime_dash.engine.file_phase1 import LightFile
    from regime_dash.ui import cache

    stream = scenarios.make("tail_shock", steps=700, accounts=19)
    with tempfile.TemporaryDirectory() as tmp:
        data = stream.save(Path(tmp) / f"s{suffix}").read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    light = cache.uploaded_stream(digest, data, suffix)
    assert isinstance(light, LightFile) and (light.steps, light.accounts) == (700, 19)
    key = f"file:{digest}"
    for config in (RegimeConfig(), RegimeConfig(max_duration=90, eps_min=0.11)):
        for engine in ("fast", "reference"):
            got = cache.replay(key, light, config.as_dict(), engine)["frame"]
            want = cache.replay("whole:" + key, stream, config.as_dict(), engine)["frame"]
            pd.testing.assert_frame_equal(got, want, check_exact=True)
    whole = cache.full_stream(key, light)
    assert (whole.rewards == stream.rewards).all() and (whole.lots == stream.lots).all()
    grid = {"max_duration": [50.0, 400.0]}
    for engine in ("fast", "reference"):
        pd.testing.assert_frame_equal(cache.sweep(key, light, grid, engine)["table"],
                                      cache.sweep("whole:" + key, stream, grid, "fast")["table"], check_exact=True)


@pytest.mark.slow  # a sweep and a sensitivity through AppTest: ~1.4 s of CPU
def test_an_uploaded_streams_sweep_and_sensitivity_on_the_fast_engine_never_load_it(tmp_path, monkeypatch):
    """On the fast engine the page's what-if, sweep and sensitivity of an uploaded file read only its light
    inputs: nothing asks for the whole stream (``cache.full_stream`` of the light source)."""
    from test_app_pages import upload_sample_stream

    from regime_dash.ui import cache

    real = cache.full_stream
    loads = []

    def whole(source_key, stream):
        if not isinstance(stream, cache.Stream):
            loads.append(source_key)
        return real(source_key, stream)

    monkeypatch.setattr(cache, "full_stream", whole)
    at = open_replay(tmp_path, monkeypatch)
    at.selectbox(key="replay.engine").set_value("fast").run()
    upload_sample_stream(at, "replay.source")
    at.number_input(key="replay.sweep.n1").set_value(3)
    at.button(key="replay.sweep.run").click().run()
    no_exception(at, "sweep of the file")
    assert any(c.value.startswith("3 replays in") for c in at.caption)
    at.button(key="replay.sensitivity.run").click().run()
    no_exception(at, "sensitivity of the file")
    assert any(c.value.startswith("133 one-at-a-time and") for c in at.caption)
    assert not at.error and loads == []
    at.selectbox(key="replay.engine").set_value("reference").run()  # the reference engine does load it
    no_exception(at, "reference replay of the file")
    assert loads
