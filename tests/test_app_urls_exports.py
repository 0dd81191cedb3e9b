"""Views kept in the URL and tables downloaded, under streamlit's AppTest: Compare's run picks,
the Controllers module and its sliders, the Runs table's sort; the sweep, sensitivity, Live and
Controllers downloads (one helper, ``widgets.download_view``, as Explore's view)."""
from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

import apptest_protos as protos  # noqa: E402
from regime_dash.modules import MODULES  # noqa: E402
from regime_dash.text import markdown_literal  # noqa: E402
from tests.test_app_pages import APP, TIMEOUT, no_exception, open_app, page, run_ids, swept_default  # noqa: E402
from tests.test_app_pages import loaded, replay_diag  # noqa: E402,F401  (fixtures)


def url(at: AppTest) -> dict[str, str]:
    """The query parameters as plain text values."""
    return {k: (v[0] if isinstance(v, list) else v) for k, v in dict(at.query_params).items()}


def reopened(name: str, params: dict[str, str]) -> AppTest:
    """Page ``name`` opened in a fresh session from a URL carrying ``params``."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update(params)
    at.switch_page(page(name)).run()
    no_exception(at, f"{name} reopened from {params}")
    return at


def dropped(at: AppTest, param: str) -> list[str]:
    """The notices saying URL parameter ``param`` was dropped (whole or in part)."""
    return [w.value for w in at.warning
            if w.value.startswith(f"URL parameter {markdown_literal(param)}") and "dropped" in w.value]


def prepared(at: AppTest, key: str, fmt: str) -> str:
    """Prepare the download of ``download_view`` ``key`` as ``fmt``; the download button's label."""
    assert not at.get("download_button")  # nothing is written before it is asked for
    at.radio(key=f"{key}.format").set_value(fmt)
    at.button(key=f"{key}.prepare").click().run()
    no_exception(at, f"prepare {key}")
    (button,) = at.get("download_button")
    return protos.label(button)


# ---- Compare -------------------------------------------------------------------------------
@pytest.mark.slow  # Compare run twice through AppTest: ~1.1 s of CPU
def test_compare_picks_round_trip_through_the_url(loaded, monkeypatch):
    at = loaded
    at.switch_page(page("compare")).run()
    ids = run_ids()
    assert (at.selectbox(key="compare.a").value, at.selectbox(key="compare.b").value) == (ids[0], ids[1])
    assert "run_a" not in at.query_params  # the pair it starts on stays out of the URL
    at.selectbox(key="compare.a").set_value(ids[1]).run()
    at.selectbox(key="compare.b").set_value(ids[0]).run()
    no_exception(at, "picks")
    # B is the run sharing most steps with A, the pair a URL naming only run_a opens: the URL may leave it out
    assert url(at)["run_a"] == ids[1] and url(at).get("run_b", ids[0]) == ids[0]
    fresh = reopened("compare", url(at))
    assert (fresh.selectbox(key="compare.a").value, fresh.selectbox(key="compare.b").value) == (ids[1], ids[0])
    assert [(m.label, m.value) for m in fresh.metric] == [(m.label, m.value) for m in at.metric]
    # a run named by its name, as the CLI takes it; a run that is gone is said and dropped
    named = reopened("compare", {"run_a": "tail_shock", "run_b": "no-such-run"})
    assert named.selectbox(key="compare.a").value == ids[1]
    (notice,) = dropped(named, "run_b")
    assert markdown_literal("no-such-run") in notice and "run_b" not in named.query_params
    assert named.selectbox(key="compare.b").value in ids


def test_explore_says_which_runs_of_the_url_are_gone(loaded):
    ids = run_ids()
    at = reopened("explore", {"runs": f"no-such-run,{ids[1]}"})
    assert at.multiselect(key="explore.runs").value == [ids[1]]
    (notice,) = dropped(at, "runs")
    assert markdown_literal("no-such-run") in notice and "the rest of it is used" in notice
    assert url(at)["runs"] == ids[1]  # the URL now names what is shown


# ---- Controllers ---------------------------------------------------------------------------
@pytest.mark.slow  # the Controllers page run several times: ~1.8 s of CPU
def test_controllers_module_and_sliders_round_trip_through_the_url(tmp_path, monkeypatch):
    at = open_app(tmp_path / "store", monkeypatch)
    at.switch_page(page("controllers")).run()
    at.selectbox(key="controllers.module").set_value("sp18_hold").run()
    at.sidebar.slider(key="controllers.sp18_hold.cfg.gamma").set_value(0.5).run()
    at.number_input(key="controllers.sp18_hold.seed").set_value(7).run()
    no_exception(at, "sp18 set")
    params = url(at)
    assert params == {"module": "sp18_hold", "gamma": "0.5", "seed": "7"}  # defaults stay out
    fresh = reopened("controllers", params)
    assert fresh.selectbox(key="controllers.module").value == "sp18_hold"
    assert fresh.sidebar.slider(key="controllers.sp18_hold.cfg.gamma").value == 0.5
    assert fresh.number_input(key="controllers.sp18_hold.seed").value == 7
    assert [(m.label, m.value) for m in fresh.metric] == [(m.label, m.value) for m in at.metric]
    # another module: the first one's parameters leave the URL, its values stay for a return
    at.selectbox(key="controllers.module").set_value("pearl_c").run()
    no_exception(at, "pearl_c")
    assert not dropped(at, "gamma") and "gamma" not in url(at) and "seed" not in url(at)
    at.sidebar.number_input(key="controllers.pearl_c.cfg.alpha_min").set_value(0.2).run()
    assert url(at)["alpha_min"] == "0.2"
    at.selectbox(key="controllers.module").set_value("sp18_hold").run()
    assert at.sidebar.slider(key="controllers.sp18_hold.cfg.gamma").value == 0.5
    assert url(at) == params  # pearl_c's alpha_min (sp18 has one too) left with pearl_c


@pytest.mark.parametrize("param,value,why", [
    ("module", "no_such_module", "is outside what this control takes"),
    ("gamma", "5", "is outside what this control takes"),  # gamma is in [0, 1]
    ("seed", "-1", "is outside what this control takes"),
    ("steps", "many", "is not an int value here"),
    ("engine", "gpu", "is outside what this control takes"),
    ("clamp", "3", "is no control of SP18"),  # a field of Pearl C, not of the module shown
])
def test_controllers_bad_url_values_are_said_and_dropped(tmp_path, monkeypatch, param, value, why):
    monkeypatch.setenv("REGIME_DASH_STORE", str(tmp_path / "store"))
    params = {"module": "sp18_hold", param: value} if param != "module" else {param: value}
    at = reopened("controllers", params)
    (notice,) = dropped(at, param)
    assert why in notice, notice
    assert param not in at.query_params
    assert at.selectbox(key="controllers.module").value == ("sp18_hold" if param != "module" else
                                                            next(n for n in MODULES if not MODULES[n].core))


def test_controllers_downloads_the_replay_and_the_sweep(tmp_path, monkeypatch):
    monkeypatch.setenv("REGIME_DASH_STORE", str(tmp_path / "store"))
    at = reopened("controllers", {"module": "sp18_hold", "steps": "300"})
    label = prepared(at, "controllers.download", "parquet")
    assert label.startswith("Download regime-dash-sp18_hold.parquet (300 rows, ")
    at.session_state["controllers.tabs"] = "Sweep"
    at.run()
    at.number_input(key="controllers.sp18_hold.sweep.n").set_value(3)
    at.button(key="controllers.sp18_hold.sweep.run").click().run()
    no_exception(at, "sweep")
    label = prepared(at, "controllers.sweep.download", "csv")
    assert label.startswith("Download regime-dash-sp18_hold-sweep.csv (3 rows, ")


# ---- Runs ----------------------------------------------------------------------------------
@pytest.mark.slow  # stored runs and the Runs page through AppTest: ~1.2 s of CPU
def test_runs_sort_round_trips_through_the_url(loaded):
    at = loaded
    at.switch_page(page("runs")).run()

    def names(at_: AppTest) -> list[str]:
        (frame,) = [d.value for d in at_.dataframe if "ingested_at" in d.value.columns]
        return list(frame["name"])

    assert at.selectbox(key="runs.sort.by").value == ""
    ingest_order = names(at)
    at.selectbox(key="runs.sort.by").set_value("rows").run()
    rows_up = names(at)
    at.toggle(key="runs.sort.desc").set_value(True).run()
    no_exception(at, "sorted")
    assert names(at) == rows_up[::-1] and len(set(ingest_order)) == 2
    assert url(at) == {"sort": "rows", "desc": "1"}
    (frame,) = [d.value for d in at.dataframe if "ingested_at" in d.value.columns]
    assert list(frame["rows"]) == sorted(frame["rows"], reverse=True)
    fresh = reopened("runs", url(at))
    assert names(fresh) == names(at) and fresh.toggle(key="runs.sort.desc").value is True
    bad = reopened("runs", {"sort": "no_such_column", "desc": "yes"})
    assert len(dropped(bad, "sort")) == 1 and len(dropped(bad, "desc")) == 1
    assert names(bad) == ingest_order and not url(bad)


# ---- downloads ---------------------------------------------------------------------------
def test_replay_sweep_table_downloads(tmp_path, monkeypatch):
    at = swept_default(tmp_path, monkeypatch)
    label = prepared(at, "replay.sweep.download", "csv")
    assert label.startswith("Download regime-dash-sweep.csv (3 rows, ")


def test_live_trajectory_downloads(tmp_path, monkeypatch):
    at = open_app(tmp_path / "store", monkeypatch)
    at.switch_page(page("live")).run()
    for _ in range(3):
        at.button(key="live.controls.step").click().run()
    at.button(key="live.controls.shock").click().run()  # an injection steps once more
    assert at.session_state["live.run"].t == 4
    label = prepared(at, "live.download", "parquet")
    assert label.startswith("Download regime-dash-live.parquet (4 rows, ")
    assert at.session_state["live.run"].t == 4  # preparing it takes no step
