"""The panel set as data, its URL text, named layouts in the store, and the custom panels' figure."""
from __future__ import annotations

import json
import threading

import numpy as np
import pandas as pd
import pytest

from regime_dash.diag import catalogue as diag
from regime_dash.store import layouts as store_layouts
from regime_dash.errors import StoreError, ValidationError
from regime_dash.diag.panel_set import Panel, PanelSet, decode, encode, from_json, to_json
from regime_dash.store.run_store import RunStore

SIGMA, FLAG, KELLY = diag.SIGMA, diag.FLAG, diag.KELLY


# ---- the panel set and its URL text ---------------------------------------------------------
@pytest.mark.parametrize("panels", [
    PanelSet(),
    PanelSet((Panel(KELLY, True), Panel(SIGMA))),
    PanelSet((Panel("trainer.loss", True),), spec=False),
    PanelSet(spec=False),
])
def test_url_text_round_trips(panels):
    text = encode(panels)
    assert decode(text) == panels
    assert from_json(json.loads(json.dumps(to_json(panels)))) == panels


def test_url_text_reads_as_documented():
    assert encode(PanelSet()) == ""
    assert encode(PanelSet((Panel(KELLY, True), Panel(SIGMA)), spec=False)) == f"~nospec,{KELLY}~log,{SIGMA}"
    assert decode("a~log,b") == PanelSet((Panel("a", True), Panel("b", False)))


@pytest.mark.parametrize("bad", ["~log", "a~lin", "a,a", "a~log,a", "a~b~log", "x\x01y"])
def test_unparseable_text_raises_naming_the_value(bad):
    with pytest.raises(ValidationError) as info:
        decode(bad)
    assert info.value.field == "panels" and info.value.value == bad
    assert repr(bad)[1:-1].split("~")[0] in str(info.value)


def test_edits_add_move_toggle_and_remove():
    p = PanelSet().add("a").add("b").add("c")
    assert p.add("a") == p  # one panel a field
    assert p.move("c", -1).fields == ["a", "c", "b"]
    assert p.move("a", -5).fields == ["a", "b", "c"] and p.move("a", 9).fields == ["b", "c", "a"]
    assert p.with_log("b", True).panels[1] == Panel("b", True)
    assert p.remove("b").fields == ["a", "c"] and not p.with_spec(False).spec
    with pytest.raises(ValidationError, match="comma"):
        p.add("x,y")


# ---- named layouts in the store ------------------------------------------------------------
def test_layouts_save_load_list_delete(tmp_path):
    store = RunStore(tmp_path / "store")
    assert store_layouts.list_layouts(store) == []
    one = PanelSet((Panel(SIGMA, True),))
    two = PanelSet((Panel(KELLY),), spec=False)
    assert store_layouts.save(store, " sigma log ", one) == "sigma log"
    store_layouts.save(store, "kelly", two)
    assert store_layouts.list_layouts(store) == ["kelly", "sigma log"]
    assert store_layouts.load(store, "sigma log") == one and store_layouts.load(store, "kelly") == two
    store_layouts.save(store, "kelly", one)  # a save under a name replaces it
    assert store_layouts.load(store, "kelly") == one
    assert store_layouts.delete(store, "kelly") is True and store_layouts.delete(store, "kelly") is False
    assert store_layouts.list_layouts(store) == ["sigma log"]
    with pytest.raises(StoreError, match="no layout 'kelly'.*sigma log"):
        store_layouts.load(store, "kelly")
    # the store's own listing and its doctor are not disturbed by the file
    from regime_dash.store import doctor as store_doctor

    assert store.list_runs() == [] and store_doctor.survey(store) == []


@pytest.mark.parametrize("bad", ["", " ", "../x", "a/b", "-x", "x" * 65, "a,b", "naïve"])
def test_bad_layout_names_raise_naming_the_name(tmp_path, bad):
    store = RunStore(tmp_path / "store")
    for call in (lambda: store_layouts.save(store, bad, PanelSet()), lambda: store_layouts.load(store, bad),
                 lambda: store_layouts.delete(store, bad)):
        with pytest.raises(ValidationError) as info:
            call()
        assert info.value.field == "layout" and info.value.value == bad
    assert not (store.root / store_layouts.FILE).exists()


def test_a_stale_tmp_does_not_survive_into_the_file(tmp_path):
    store = RunStore(tmp_path / "store")
    store_layouts.save(store, "one", PanelSet((Panel(SIGMA),)))
    stale = store.root / (store_layouts.FILE + ".tmp")
    stale.write_text('{"layouts": {"half": ', encoding="utf-8")  # a writer killed mid-write
    assert store_layouts.list_layouts(store) == ["one"]  # readers never read the tmp
    store_layouts.save(store, "two", PanelSet((Panel(KELLY, True),)))
    assert store_layouts.list_layouts(store) == ["one", "two"] and not stale.exists()
    assert json.loads((store.root / store_layouts.FILE).read_text())["layouts"]["two"]["panels"][0]["log"]


def test_concurrent_saves_all_land(tmp_path):
    store = RunStore(tmp_path / "store")
    names = [f"l{i}" for i in range(8)]
    threads = [threading.Thread(target=store_layouts.save, args=(RunStore(store.root), n, PanelSet().add(n)))
               for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store_layouts.list_layouts(store) == names


def test_an_unreadable_layouts_file_is_a_store_error(tmp_path):
    store = RunStore(tmp_path / "store")
    store.root.mkdir(parents=True)
    (store.root / store_layouts.FILE).write_text("not json", encoding="utf-8")
    with pytest.raises(StoreError, match="cannot be read"):
        store_layouts.list_layouts(store)


# ---- the custom panels' figure ---------------------------------------------------------------
def _frame(n: int = 3000) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    flag = np.zeros(n, dtype=np.float32)
    flag[n // 3] = 1.0  # one step long: must still show
    return pd.DataFrame({"step": np.arange(n), SIGMA: np.exp(rng.normal(size=n)).astype(np.float32),
                         FLAG: flag, "trainer.loss": rng.normal(size=n),
                         "trainer.seen": np.arange(n, dtype=np.float64) // 7})


def _y(trace) -> np.ndarray:
    from regime_dash.figures.plotly_arrays import decode as arrays

    return np.asarray(arrays(trace["y"]), dtype=np.float64)


def test_figure_log_axis_units_and_unsmoothed_flags_and_counters():
    from regime_dash.figures.custom import custom_spec

    panels = PanelSet((Panel(SIGMA, True), Panel(FLAG), Panel("trainer.loss"), Panel("trainer.seen")))
    f = _frame()
    raw = custom_spec({"a": f}, panels)
    smooth = custom_spec({"a": f}, panels, smoothing=0.9)
    lay = raw["layout"]
    assert lay["yaxis"]["type"] == "log" and "type" not in lay["yaxis2"]
    assert lay["yaxis"]["title"]["text"] == "sigma (reward units)"
    assert lay["yaxis2"]["title"]["text"] == "flag (0/1 flag)"
    assert lay["yaxis3"]["title"]["text"] == "loss"  # a field the catalogue does not know: no unit
    by_axis = {t["yaxis"]: (t, s) for t, s in zip(raw["data"], smooth["data"])}
    flag_raw, flag_smooth = by_axis["y2"]
    assert np.array_equal(_y(flag_raw), _y(flag_smooth)) and set(_y(flag_raw)) == {0.0, 1.0}
    assert flag_raw["line"]["shape"] == "hv"
    assert np.array_equal(_y(by_axis["y4"][0]), _y(by_axis["y4"][1]))  # a counter stays whole
    assert not np.array_equal(_y(by_axis["y3"][0]), _y(by_axis["y3"][1]))  # a signal is smoothed
    assert len(_y(by_axis["y"][0])) <= 1300  # downsampled to about the chart's width


def test_figure_runs_in_their_colours_and_a_missing_field_left_out():
    from regime_dash.figures.signals import run_colours
    from regime_dash.figures.custom import custom_spec, numeric_columns

    a, b = _frame(200), _frame(200).drop(columns=["trainer.loss"]).assign(phase="train")
    spec = custom_spec({"a": a, "b": b}, PanelSet((Panel("trainer.loss"), Panel(SIGMA))))
    assert [(t["legendgroup"], t["yaxis"]) for t in spec["data"]] == [("a", "y"), ("a", "y2"), ("b", "y2")]
    assert spec["data"][0]["line"]["color"] == run_colours("ab")["a"] != spec["data"][2]["line"]["color"] == run_colours("ab")["b"]
    assert numeric_columns([b, a]) == [SIGMA, FLAG, "trainer.seen", "trainer.loss"]
    with pytest.raises(ValidationError):
        custom_spec({"a": a}, PanelSet())


def test_a_flag_flipping_faster_than_the_columns_is_a_duty_band_on_its_custom_panel():
    """A flag on every other step over 30,000 steps, drawn on 1,200 columns of 25 steps: each column
    filled to the fraction of its steps on (12 or 13 of 25), not a solid block of lines from 0 to 1."""
    from regime_dash.figures.custom import custom_spec

    n = 30_000
    f = pd.DataFrame({"step": np.arange(n), FLAG: (np.arange(n) % 2).astype(np.float32)})
    (band,) = [t for t in custom_spec({"a": f}, PanelSet((Panel(FLAG),)))["data"] if t.get("fill") == "tozeroy"]
    heights = _y(band)
    assert band["yaxis"] == "y" and band["line"]["shape"] == "hv"
    assert set(np.round(heights[:-1] * 25, 6)) == {12.0, 13.0} and len(heights) < 4 * 1300


def test_custom_panels_line_their_x_axes_up_with_the_spec_panels():
    """Drawn below the spec panels at the same width, the custom panels have their margins and x
    domain (the spec panels' right-hand y axes take room at the right), and the legend clears the
    first panel's title."""
    from regime_dash.figures.custom import custom_spec
    from regime_dash.figures.signals import SIGNAL_MARGIN, signal_spec

    spec_layout = signal_spec({"a": _frame(200)}, n_out=100)["layout"]
    layout = custom_spec({"a": _frame(200)}, PanelSet((Panel(SIGMA), Panel(FLAG))))["layout"]
    assert layout["margin"] == SIGNAL_MARGIN == spec_layout["margin"]
    assert layout["xaxis"]["domain"] == layout["xaxis2"]["domain"] == spec_layout["xaxis"]["domain"] != [0, 1]
    plot_height = layout["height"] - SIGNAL_MARGIN["t"] - SIGNAL_MARGIN["b"]
    assert (layout["legend"]["y"] - 1) * plot_height >= 20
