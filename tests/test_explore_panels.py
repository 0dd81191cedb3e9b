"""Explore's custom panels under AppTest: any field picked gets a panel, log scale, order, removal,
named layouts kept with the store, and the panel set in the URL (``panels``, ``layout``)."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from regime_dash import RegimeConfig, replay  # noqa: E402
from regime_dash.store import layouts as store_layouts
from regime_dash.diag import catalogue as diag
from regime_dash.sources import scenarios
from regime_dash.diag.panel_set import Panel, PanelSet  # noqa: E402
from regime_dash.store.run_store import RunStore  # noqa: E402
from test_app_pages import APP, TIMEOUT, drawn_in_place, no_exception, page  # noqa: E402

SIGMA, FLAT = diag.SIGMA, diag.FLAT_COUNT


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> tuple[Path, list[str]]:
    """A store of two tail_shock replays (300 steps) and their run ids."""
    root = tmp_path_factory.mktemp("panels") / "store"
    rs = RunStore(root)
    ids = []
    for seed in (0, 1):
        frame = replay(scenarios.make("tail_shock", seed=seed, steps=300, accounts=16), RegimeConfig(),
                       engine="reference")
        ids.append(rs.ingest(diag.write_jsonl(frame, root.parent / f"s{seed}.jsonl"), name=f"s{seed}").run_id)
    return root, ids


def open_explore(store, monkeypatch, **params) -> AppTest:
    root, ids = store
    monkeypatch.setenv("REGIME_DASH_STORE", str(root))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["runs"] = ",".join(ids)
    for k, v in params.items():
        at.query_params[k] = v
    at.switch_page(page("explore")).run()
    no_exception(at, "explore")
    return at


def custom(at: AppTest) -> dict | None:
    """The custom panels' figure, or None when the page draws none."""
    chart = drawn_in_place(at).get("explore.custom")
    return chart["figure"] if chart else None


def titles(fig: dict) -> list[str]:
    return [a["text"] for a in fig["layout"]["annotations"]]


def url(at: AppTest, name: str) -> str | None:
    v = dict(at.query_params).get(name)
    return v[0] if isinstance(v, list) else v


def pick(at: AppTest, field: str) -> None:
    at.selectbox(key="explore.panels.pick").set_value(field).run()
    no_exception(at, f"pick {field}")


def test_a_picked_field_gets_a_panel_with_its_unit_and_a_log_toggle(store, monkeypatch):
    at = open_explore(store, monkeypatch)
    assert custom(at) is None and "explore.chart" in " ".join(drawn_in_place(at))
    options = at.selectbox(key="explore.panels.pick").options
    assert SIGMA in options and "wall_time" not in options and "step" not in options
    pick(at, SIGMA)
    fig = custom(at)
    assert titles(fig) == ["popart.sigma"]
    assert fig["layout"]["yaxis"]["title"]["text"] == "sigma (reward units)"
    assert "type" not in fig["layout"]["yaxis"]
    assert {t["legendgroup"] for t in fig["data"]} == {"s0", "s1"}  # both runs, one trace each
    assert at.selectbox(key="explore.panels.pick").value is None  # emptied for the next field
    assert url(at, "panels") == SIGMA

    at.toggle(key=f"explore.panels.log.{SIGMA}").set_value(True).run()
    no_exception(at, "log")
    fig = custom(at)
    assert fig["layout"]["yaxis"]["type"] == "log" and titles(fig) == ["popart.sigma (log)"]
    assert url(at, "panels") == f"{SIGMA}~log"


def test_panels_reorder_and_remove(store, monkeypatch):
    at = open_explore(store, monkeypatch)
    pick(at, SIGMA)
    pick(at, FLAT)
    assert titles(custom(at)) == ["popart.sigma", "positions.flat_count"]
    assert custom(at)["layout"]["yaxis2"]["title"]["text"] == "flat_count (count)"
    at.button(key=f"explore.panels.down.{SIGMA}").click().run()
    no_exception(at, "down")
    assert titles(custom(at)) == ["positions.flat_count", "popart.sigma"]
    assert url(at, "panels") == f"{FLAT},{SIGMA}"
    at.button(key=f"explore.panels.up.{SIGMA}").click().run()
    assert titles(custom(at)) == ["popart.sigma", "positions.flat_count"]
    at.button(key=f"explore.panels.remove.{SIGMA}").click().run()
    no_exception(at, "remove")
    assert titles(custom(at)) == ["positions.flat_count"]
    at.button(key=f"explore.panels.remove.{FLAT}").click().run()
    assert custom(at) is None and url(at, "panels") is None  # the default set leaves the URL


def test_spec_panels_can_be_hidden(store, monkeypatch):
    at = open_explore(store, monkeypatch, panels=f"~nospec,{SIGMA}")
    assert "explore.chart" not in " ".join(drawn_in_place(at))
    assert titles(custom(at)) == ["popart.sigma"]
    at.toggle(key="explore.panels.spec").set_value(True).run()
    no_exception(at, "spec on")
    assert any(k.startswith("explore.chart") for k in drawn_in_place(at))
    assert url(at, "panels") == SIGMA


def test_a_layout_is_saved_loaded_deleted_and_opened_by_url(store, monkeypatch):
    root, _ = store
    at = open_explore(store, monkeypatch)
    pick(at, SIGMA)
    at.toggle(key=f"explore.panels.log.{SIGMA}").set_value(True).run()
    at.text_input(key="explore.panels.save_name").set_value("sigma log").run()
    at.button(key="explore.panels.save").click().run()
    no_exception(at, "save")
    assert store_layouts.load(RunStore(root), "sigma log") == PanelSet((Panel(SIGMA, True),))
    at.button(key="explore.panels.reset").click().run()
    assert custom(at) is None
    at.selectbox(key="explore.panels.load_name").set_value("sigma log").run()
    at.button(key="explore.panels.load").click().run()
    no_exception(at, "load")
    assert custom(at)["layout"]["yaxis"]["type"] == "log"

    fresh = open_explore(store, monkeypatch, layout="sigma log")
    assert titles(custom(fresh)) == ["popart.sigma (log)"]
    assert url(fresh, "layout") is None and url(fresh, "panels") == f"{SIGMA}~log"

    at.selectbox(key="explore.panels.load_name").set_value("sigma log").run()
    at.button(key="explore.panels.delete").click().run()
    no_exception(at, "delete")
    assert "sigma log" not in store_layouts.list_layouts(RunStore(root))
    gone = open_explore(store, monkeypatch, layout="sigma log")
    assert any("layout" in w.value and "no layout 'sigma log'" in w.value.replace("\\", "") for w in gone.warning)
    assert custom(gone) is None and url(gone, "layout") is None


@pytest.mark.parametrize("bad", ["~log", f"{SIGMA}~lin", f"{SIGMA},{SIGMA}"])
def test_a_bad_panels_url_value_is_said_naming_panels_and_dropped(store, monkeypatch, bad):
    at = open_explore(store, monkeypatch, panels=bad)
    said = [w.value for w in at.warning if "panels" in w.value]
    assert said and "dropped" in said[0], [w.value for w in at.warning]
    assert custom(at) is None and any(k.startswith("explore.chart") for k in drawn_in_place(at))
    assert url(at, "panels") is None
