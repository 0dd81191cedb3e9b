"""The dashboard's former dead ends: export of several runs, a sweep outside a field's range, the heatmap
click, Compare's default pair and headline, and the way from Runs to Explore."""
from __future__ import annotations

import io
import json
import os

import numpy as np
import pandas as pd
import pytest

from regime_dash.store.open import open_store

pytest.importorskip("streamlit")

from regime_dash import RegimeConfig, replay  # noqa: E402
from regime_dash.sources import scenarios
from regime_dash.diag import catalogue as diag
from regime_dash.analysis import diff_runs  # noqa: E402
from regime_dash.errors import ConfigError, ExportError  # noqa: E402
from regime_dash.store.export import settle, to_bytes  # noqa: E402
from regime_dash.runs.sweeps import expand_configs  # noqa: E402
import apptest_protos as protos  # noqa: E402
from tests.test_app_pages import (chart_spec, charts, no_exception, open_app, page, run_ids, shown,  # noqa: E402
                                  values)

@pytest.fixture(scope="module")
def diag_lines(tmp_path_factory) -> list[dict]:
    """The tail_shock scenario's diag (300 steps) as parsed JSON lines."""
    path = tmp_path_factory.mktemp("diag") / "tail.jsonl"
    frame = replay(scenarios.make("tail_shock", steps=300, accounts=16), RegimeConfig(), engine="reference")
    diag.write_jsonl(frame, path)
    return [json.loads(line) for line in path.read_text().splitlines()]


def _jsonl(lines: list[dict], head: str = "") -> bytes:
    return (head + "\n".join(json.dumps(r) for r in lines) + "\n").encode()


def _variant(lines: list[dict], *, label=None, bool_flags=False, shift=0) -> list[dict]:
    """The lines with an extra ``label`` field, dead-zone flags as JSON booleans, or shifted steps."""
    out = []
    for rec in json.loads(json.dumps(lines)):
        if label is not None:
            rec["label"] = label
        if bool_flags:
            dz = rec["risk_stack"]["regime"]["dead_zone"]
            dz["flag"] = bool(dz["flag"])
        rec["step"] += shift
        out.append(rec)
    return out


# ---- export ----------------------------------------------------------------------------------
def test_export_settles_columns_mixed_across_runs():
    a = pd.DataFrame({"step": [0, 1], "flag": [True, False], "label": [1.5, 2.5], "phase": ["train", "eval"]})
    b = pd.DataFrame({"step": [0], "flag": [0.5], "label": ["x"], "phase": [None]})
    both = pd.concat([a.assign(run="A"), b.assign(run="B")], ignore_index=True)
    with pytest.raises(Exception):  # what the export used to do: pyarrow refuses the mixed columns
        both.to_parquet(io.BytesIO())
    table, notes = settle(both)
    assert notes == ["flag: numbers and booleans mixed across runs; written as numbers (true = 1)",
                     "label: mixes float, str across runs; written as text"]
    back = pd.read_parquet(io.BytesIO(to_bytes(table, "parquet")))
    assert back["run"].tolist() == ["A", "A", "B"]
    assert back["flag"].tolist() == [1.0, 0.0, 0.5]
    assert back["label"].tolist() == ["1.5", "2.5", "x"]
    assert back["phase"].tolist()[:2] == ["train", "eval"] and pd.isna(back["phase"].iloc[2])
    csv = pd.read_csv(io.BytesIO(to_bytes(table, "csv")))
    assert csv["run"].tolist() == ["A", "A", "B"] and len(csv.columns) == 5


def test_export_failures_name_the_column():
    with pytest.raises(ExportError, match="unknown export format 'xlsx'"):
        to_bytes(pd.DataFrame({"a": [1]}), "xlsx")
    odd = pd.DataFrame({"step": [0, 1], "z": [complex(1, 2), complex(0, 1)]})
    with pytest.raises(ExportError, match="column 'z' .*complex.* cannot be written as Parquet") as err:
        to_bytes(odd, "parquet")
    assert err.value.column == "z" and err.value.format == "parquet"


def test_explore_exports_two_runs_with_mixed_types(tmp_path, monkeypatch, diag_lines):
    at = open_app(tmp_path / "store", monkeypatch)
    at.file_uploader(key="runs.upload").set_value([
        ("numbers.jsonl", _jsonl(_variant(diag_lines, label=1.5)), "application/json"),
        ("text.jsonl", _jsonl(_variant(diag_lines, label="x")), "application/json")]).run()
    no_exception(at, "upload")
    at.switch_page(page("explore")).run()
    at.multiselect(key="explore.runs").set_value(run_ids()).run()
    at.session_state["explore.tabs"] = "Download"  # only the open tab is built
    at.run()
    at.radio(key="explore.download.format").set_value("parquet")
    at.button(key="explore.download.prepare").click().run()
    no_exception(at, "export")
    assert not at.error
    (button,) = at.get("download_button")
    assert protos.label(button).startswith("Download regime-dash-view.parquet (600 rows, ")
    captions = [shown(c.value) for c in at.caption]
    # one type per column store-wide (issue 14): the second run's text labels were set
    # aside at ingest (label is float64 in both runs), so no column mixes types here;
    # test_export_* above covers the export of frames that do mix them
    assert not any(c.startswith("label: mixes") for c in captions)
    assert [len(open_store(os.environ["REGIME_DASH_STORE"]).conflicts(r)) for r in run_ids()] in ([0, 300], [300, 0])

    # any failure says why, on the page
    from regime_dash.store import export

    def refuse(table, fmt):
        raise ExportError("column 'label' cannot be written as Parquet: planted", column="label", format=fmt)

    monkeypatch.setattr(export, "to_bytes", refuse)
    at.button(key="explore.download.prepare").click().run()
    no_exception(at, "failing export")
    assert [shown(e.value) for e in at.error] == ["Export failed: column 'label' cannot be written as Parquet: planted"]
    assert not at.get("download_button")


# ---- sweeps outside a field's range ----------------------------------------------------------
def test_a_sweep_value_out_of_range_is_named():
    with pytest.raises(ConfigError, match=r"sweep value eps_min=0\.7 is not a valid config: eps_min=0\.7 is "
                                          r"greater than eps_max=0\.5") as err:
        expand_configs({"eps_min": [0.1, 0.7]})
    assert err.value.field == "eps_min"
    with pytest.raises(ConfigError, match=r"sweep value max_duration=10, eps_max=0\.01 .* eps_min=0\.05 is "
                                          r"greater than eps_max=0\.01"):
        expand_configs({"max_duration": [10], "eps_max": [0.5, 0.01]})


def test_replay_sweeps_eps_min_over_its_range_and_names_bad_combinations(tmp_path, monkeypatch):
    at = open_app(tmp_path / "store", monkeypatch)
    at.switch_page(page("replay")).run()
    at.selectbox(key="replay.sweep.f1").set_value("eps_min").run()
    hi = at.number_input(key="replay.sweep.hi1")
    assert hi.value == 0.5  # the sweep range stops at the what-if config's eps_max
    at.number_input(key="replay.sweep.n1").set_value(3)
    at.button(key="replay.sweep.run").click().run()
    no_exception(at, "eps_min sweep")
    assert not at.error
    (line,) = [c for c in (chart_spec(at, i) for i in range(len(charts(at))))
               if c["data"][0].get("mode") == "lines+markers"]
    assert list(values(line["data"][0]["x"])) == [0.0, 0.25, 0.5]
    # both ends of the ε range swept against each other: some pairs are invalid, and the page says which
    at.selectbox(key="replay.sweep.f2").set_value("eps_max").run()
    at.number_input(key="replay.sweep.n2").set_value(2)
    at.button(key="replay.sweep.run").click().run()
    no_exception(at, "eps_min × eps_max")
    (err,) = at.error
    assert shown(err.value).startswith("Sweep rejected: sweep value eps_min=0.25, eps_max=0.05 is not a valid config: "
                                       "eps_min=0.25 is greater than eps_max=0.05")


# ---- the heatmap cell click -------------------------------------------------------------------
def test_heatmap_cells_are_clickable_points_naming_their_row(tmp_path, monkeypatch):
    at = open_app(tmp_path / "store", monkeypatch)
    at.switch_page(page("replay")).run()
    at.number_input(key="replay.sweep.n1").set_value(3)
    at.selectbox(key="replay.sweep.f2").set_value("n_recovery").run()
    at.number_input(key="replay.sweep.n2").set_value(2)
    at.button(key="replay.sweep.run").click().run()
    no_exception(at, "heatmap")
    (heat,) = [c for c in (chart_spec(at, i) for i in range(len(charts(at))))
               if c["data"][0].get("type") == "heatmap"]
    heatmap, cells = heat["data"]
    assert cells["type"] == "scatter" and cells["mode"] == "markers" and heat["layout"]["clickmode"] == \
        "event+select"
    rows = values(cells["customdata"])[:, 0].astype(int)
    xs, ys = values(cells["x"]), values(cells["y"])
    assert sorted(rows) == list(range(6))
    # each marker sits on its cell and names the sweep row of that cell
    grid = values(heatmap["customdata"])
    hx, hy = list(values(heatmap["x"])), list(values(heatmap["y"]))
    for r, x, y in zip(rows, xs, ys):
        assert grid[hy.index(y), hx.index(x)] == r


# ---- Compare -------------------------------------------------------------------------------
def test_compare_starts_on_runs_sharing_steps_and_ignores_storage_details(tmp_path, monkeypatch, diag_lines):
    at = open_app(tmp_path / "store", monkeypatch)
    uploads = [("plain.jsonl", _jsonl(diag_lines)),
               ("later.jsonl", _jsonl(_variant(diag_lines, shift=10_000))),
               # same values: one rejected line first (so every _line is one more), flags as booleans
               ("twin.jsonl", _jsonl(_variant(diag_lines, bool_flags=True), head="not json\n"))]
    for name, data in uploads:  # one at a time: newest first in the list is twin, later, plain
        at.file_uploader(key="runs.upload").set_value((name, data, "application/json")).run()
    no_exception(at, "uploads")
    at.switch_page(page("compare")).run()
    no_exception(at, "compare")
    names = {r: n for r, n in zip(run_ids(), ["twin", "later", "plain"])}
    a, b = at.selectbox(key="compare.a").value, at.selectbox(key="compare.b").value
    assert {names.get(a), names.get(b)} == {"twin", "plain"}, (a, b)  # "later" shares no step
    assert [shown(s.value) for s in at.success] == ["identical: 300 steps, every field equal"]
    at.selectbox(key="compare.b").set_value([r for r in run_ids() if names[r] == "later"][0]).run()
    no_exception(at, "disjoint")
    assert any("share no step" in w.value for w in at.warning)


def test_diff_compares_values_not_storage_types():
    a = pd.DataFrame({"step": [0, 1, 2], "_line": [1, 2, 3], "flag": [1.0, 0.0, 1.0], "n": [1.0, 2.0, 3.0]})
    b = pd.DataFrame({"step": [0, 1, 2], "_line": [7, 8, 9], "flag": [True, False, True],
                      "n": ["1.0", "2", "3"]})
    d = diff_runs(a, b)
    assert d.identical and d.fields == []
    b.loc[2, "n"] = "4"
    d = diff_runs(a, b)
    assert [(f.column, f.first_step, f.max_abs) for f in d.fields] == [("n", 2, 1.0)]
    assert diff_runs(a, a.assign(extra=1)).lines()[0] == "differ: in their columns (3 shared steps compared)"


# ---- Runs → Explore ----------------------------------------------------------------------------
def test_runs_offers_explore_after_the_sample_loads(tmp_path, monkeypatch):
    at = open_app(tmp_path / "store", monkeypatch)
    assert not [b for b in at.button if b.key == "runs.explore"]
    at.button(key="runs.samples").click().run()
    no_exception(at, "samples")
    assert at.button(key="runs.explore").label == "Next: look at the run on Explore"
    at.button(key="runs.explore").click().run()
    no_exception(at, "explore")
    assert at.title[0].value == "Explore" and len(charts(at)) == 1
