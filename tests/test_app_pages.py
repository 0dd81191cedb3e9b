"""Every dashboard page under streamlit's AppTest, on an empty and on a loaded store.

The store is a temporary directory (``REGIME_DASH_STORE``); the loaded store
holds the committed sample diag (through the Runs page's one-click start) and
a replay written as a second diag file.
"""
from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from regime_dash import RegimeConfig, replay  # noqa: E402
from regime_dash.sources import scenarios
from regime_dash.diag import catalogue as diag
from regime_dash.engine import engine_status  # noqa: E402
from regime_dash.sources.samples import DIAG_NAME, SAMPLE_DIR  # noqa: E402
from regime_dash.text import markdown_literal  # noqa: E402  (file names are shown as text)

import apptest_protos as protos  # noqa: E402

APP = str(Path(__file__).resolve().parents[1] / "app.py")
PAGES = ("runs", "explore", "replay", "live", "slots", "compare")
TIMEOUT = 300  # a cold checkout compiles the fast engine (numba) in the first replay


def page(name: str) -> str:
    return f"regime_dash/ui/pages/{name}.py"


def open_app(store: Path, monkeypatch) -> AppTest:
    monkeypatch.setenv("REGIME_DASH_STORE", str(store))
    return AppTest.from_file(APP, default_timeout=TIMEOUT).run()


def open_page(store: Path, monkeypatch, name: str, **params) -> AppTest:
    """Page ``name`` opened with the store at ``store`` and the URL's query ``params``, checked for exceptions."""
    monkeypatch.setenv("REGIME_DASH_STORE", str(store))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for k, v in params.items():
        at.query_params[k] = v
    at.switch_page(page(name)).run()
    no_exception(at, name)
    return at


def shown(markdown: str) -> str:
    """The text a reader sees of an element's Markdown: the backslash escapes that keep file
    text literal (:func:`regime_dash.text.markdown_literal`) taken out."""
    import re

    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown)


def no_exception(at: AppTest, where: str) -> None:
    assert not at.exception, f"{where}: {[e.message for e in at.exception]}"


def drawn_in_place(at: AppTest) -> dict[str, dict]:
    """``{key: data}`` of every chart drawn in place (``regime_dash.ui.plotly_react``): what the page
    gave each component element, ``{"figure", "config", "bundle", "events"}``, the figure parsed."""
    from regime_dash.ui import plotly_react

    out = {}
    for e in at.get("bidi_component"):
        name, element_id, data = protos.component(e)
        if name != plotly_react.NAME:
            continue
        if isinstance(data["figure"], str):  # a Figure is sent as its JSON text
            data["figure"] = json.loads(data["figure"])
        out[element_id.rsplit("-", 1)[-1]] = data  # the element id ends with the chart's key
    return out


def charts(at: AppTest) -> list[dict]:
    """Every chart's figure on the page: each ``st.plotly_chart``'s spec, then each in-place chart's."""
    return [protos.plotly_spec(c) for c in at.get("plotly_chart")] + [
        d["figure"] for d in drawn_in_place(at).values()]


def chart_spec(at: AppTest, i: int = 0) -> dict:
    """The ``i``-th chart's figure (see :func:`charts`)."""
    return charts(at)[i]


def values(v) -> np.ndarray:
    """A plotly JSON array: a list, or plotly's typed-array form ``{"bdata", "dtype"}``."""
    if isinstance(v, dict) and "bdata" in v:
        out = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
        if "shape" in v:
            shape = v["shape"]
            shape = [int(n) for n in shape.split(",")] if isinstance(shape, str) else shape
            out = out.reshape(shape)
        return out
    return np.asarray(v)


def table_with(at: AppTest, column: str):
    """The (only) dataframe on the page that has ``column``."""
    (frame,) = [d.value for d in at.dataframe if column in d.value.columns]
    return frame


def run_ids() -> list[str]:
    """Ids of the runs in the store the app is pointed at."""
    import os

    from regime_dash.store.open import open_store

    return [r["run_id"] for r in open_store(os.environ["REGIME_DASH_STORE"]).list_runs()]


def upload_sample_stream(at: AppTest, key: str):
    """Pick "Stream file" under source widget ``key``, check the prompt, upload the sample stream; the Stream."""
    from regime_dash.core.streams import load

    at.radio(key=f"{key}.kind").set_value("Stream file").run()
    no_exception(at, "stream file, nothing uploaded")
    assert any("Upload a stream file" in i.value for i in at.info)
    sample = SAMPLE_DIR / "recorded_stream.npz"
    at.file_uploader(key=f"{key}.file").set_value(
        ("recorded_stream.npz", sample.read_bytes(), "application/octet-stream")).run()
    no_exception(at, "stream file")
    return load(sample)


def metric(at: AppTest, label: str) -> str:
    (m,) = [m for m in at.metric if m.label == label]
    return m.value


@pytest.fixture(scope="module")
def replay_diag(tmp_path_factory) -> Path:
    """A second run: the tail_shock scenario replayed and written as a diag.jsonl."""
    path = tmp_path_factory.mktemp("diag") / "tail_shock.jsonl"
    frame = replay(scenarios.make("tail_shock", steps=400, accounts=64), RegimeConfig(), engine="reference")
    diag.write_jsonl(frame, path)
    return path


@pytest.fixture
def loaded(tmp_path, monkeypatch, replay_diag) -> AppTest:
    """The app on a store holding the sample diag (loaded by the one-click start) and a replay."""
    at = open_app(tmp_path / "store", monkeypatch)
    at.button(key="runs.samples").click().run()
    no_exception(at, "samples")
    at.file_uploader(key="runs.upload").set_value(
        ("tail_shock.jsonl", replay_diag.read_bytes(), "application/json")).run()
    no_exception(at, "upload")
    return at


# ---- empty store ---------------------------------------------------------------------------
def test_every_page_renders_on_an_empty_store(tmp_path, monkeypatch):
    at = open_app(tmp_path / "empty", monkeypatch)
    no_exception(at, "runs")
    # the first run does not show a blank page: it offers the samples
    assert any("store is empty" in i.value for i in at.info)
    assert at.button(key="runs.samples").label.startswith("Load 1 sample file")
    for name in PAGES[1:]:
        at.switch_page(page(name)).run()
        no_exception(at, name)
        assert at.title[0].value, name
    at.switch_page(page("explore")).run()
    assert any("No runs in the store" in i.value for i in at.info)
    at.switch_page(page("compare")).run()
    assert any("holds 0" in i.value for i in at.info)


# ---- Runs ----------------------------------------------------------------------------------
def test_runs_ingest_report_and_list(loaded, replay_diag):
    at = loaded
    heads = [e.label for e in at.expander]
    sample_rows = sum(1 for line in (SAMPLE_DIR / DIAG_NAME).open() if line.strip())
    assert any(h.startswith(f"{markdown_literal(DIAG_NAME)}: {sample_rows:,} rows, 0 rejected") for h in heads), heads
    assert any(h.startswith(markdown_literal("tail_shock.jsonl") + ": 400 rows, 0 rejected") and "steps 0…399" in h for h in heads)
    table = table_with(at, "ingested_at")
    assert sorted(table["rows"]) == sorted([sample_rows, 400])
    assert {"name", "rows", "steps", "ingested_at", "source"} <= set(table.columns)


def test_runs_reports_rejected_lines(tmp_path, monkeypatch, replay_diag):
    at = open_app(tmp_path / "store", monkeypatch)
    lines = replay_diag.read_text().splitlines()[:20]
    lines[4] = "{not json"
    lines[9] = "[1, 2]"
    at.file_uploader(key="runs.upload").set_value(
        ("broken.jsonl", ("\n".join(lines) + "\n").encode(), "application/json")).run()
    no_exception(at, "broken upload")
    assert any(e.label.startswith(markdown_literal("broken.jsonl") + ": 18 rows, 2 rejected") for e in at.expander)
    (rejects,) = [d.value for d in at.dataframe if "line" in d.value.columns and "text" not in d.value.columns]
    assert list(rejects["line"]) == [5, 10]

    # a later session (a new browser tab, a restart) reads the rejects from the store
    later = open_app(tmp_path / "store", monkeypatch)
    no_exception(later, "later session")
    assert not [e for e in later.expander if e.label.startswith(markdown_literal("broken.jsonl") + ": 18 rows")]
    assert any(e.label == "Rejected lines (2 in 1 run(s))" for e in later.expander)
    (stored,) = [d.value for d in later.dataframe if "text" in d.value.columns]
    assert list(stored["line"]) == [5, 10]
    assert list(stored["text"]) == ["{not json", "[1, 2]"]
    assert all(stored["reason"].str.len() > 0)


def test_runs_several_files_gzip_and_unreadable(tmp_path, monkeypatch, replay_diag):
    import gzip

    at = open_app(tmp_path / "store", monkeypatch)
    at.file_uploader(key="runs.upload").set_value([
        ("junk.jsonl", b"\x00\x01garbage\nnot json\n", "application/json"),
        ("run.jsonl.gz", gzip.compress(replay_diag.read_bytes()), "application/gzip"),
    ]).run()
    no_exception(at, "two uploads")
    assert any(e.label.startswith(markdown_literal("run.jsonl.gz") + ": 400 rows, 0 rejected") for e in at.expander)
    (err,) = [e.value for e in at.error]
    assert err.startswith(markdown_literal("junk.jsonl") + ": not ingested") and "line 1" in err
    assert list(table_with(at, "ingested_at")["rows"]) == [400]


def test_runs_delete(loaded):
    at = loaded
    assert len(table_with(at, "ingested_at")) == 2
    at.checkbox(key="runs.delete.sure").check().run()
    at.button(key="runs.delete.go").click().run()
    no_exception(at, "delete")
    assert len(table_with(at, "ingested_at")) == 1


def test_runs_check_all_shows_one_row_per_run(loaded):
    at = loaded
    at.switch_page(page("runs")).run()
    at.button(key="runs.check_all").click().run()
    no_exception(at, "check all")
    summary = table_with(at, "first_failure")
    assert len(summary) == 2 and {"run", "status", "pass", "fail", "skip", "findings"} <= set(summary.columns)
    assert set(summary["run"]) == set(table_with(at, "ingested_at")["run_id"])
    assert any("run(s) failed or could not be checked" in c.value for c in at.caption)


# ---- loaded store: every page ---------------------------------------------------------------
def test_every_page_renders_on_a_loaded_store(loaded):
    at = loaded
    for name in PAGES:
        at.switch_page(page(name)).run()
        no_exception(at, name)
    at.switch_page(page("explore")).run()
    assert len(charts(at)) == 1
    at.switch_page(page("compare")).run()
    assert len(charts(at)) == 1


# ---- Explore -------------------------------------------------------------------------------
def test_explore_widgets_change_the_figure(loaded):
    at = loaded
    at.switch_page(page("explore")).run()
    runs = at.multiselect(key="explore.runs")
    before = chart_spec(at)
    kelly = [t for t in before["data"] if t.get("name", "").endswith("kelly_f")]
    assert len(kelly) == 1

    at.slider(key="explore.smoothing").set_value(0.9).run()
    no_exception(at, "smoothing")
    after = chart_spec(at)
    kelly_s = [t for t in after["data"] if t.get("name", "").endswith("kelly_f")]
    assert not np.array_equal(values(kelly_s[0]["y"]), values(kelly[0]["y"]))

    runs.set_value(run_ids()).run()  # overlay both runs
    no_exception(at, "overlay")
    legend = [t for t in chart_spec(at)["data"] if t.get("showlegend")]
    assert len(legend) == 2 and legend[0]["line"]["color"] != legend[1]["line"]["color"]

    window = [s for s in at.slider if s.label == "Steps in view"][0]
    window.set_value((100, 300)).run()
    xs = np.concatenate([values(t["x"]) for t in chart_spec(at)["data"] if t.get("name", "").endswith("kelly_f")])
    assert min(xs) >= 100 and max(xs) <= 300


@pytest.mark.slow  # two replays and Explore through AppTest: ~1.1 s of CPU
def test_explore_pairs_a_fused_run_with_its_single_twin_for_the_mirror_drift(tmp_path, monkeypatch):
    """A stored fused run with the Layer-2 mirror off, beside the single path's run of the same inputs:
    alone it fails tau_boost (the τ no longer boosted); paired, the verdict names the drift's first step."""
    stream = scenarios.make("tail_shock", steps=400, accounts=64)
    cfg = RegimeConfig(fused_mirror_tau_boost=False)
    files = {}
    for name, controllers in (("fused.jsonl", "fused"), ("single.jsonl", "single")):
        files[name] = diag.write_jsonl(replay(stream, cfg, controllers=controllers), tmp_path / name)
    first = replay(stream, cfg, controllers="fused")
    at = open_app(tmp_path / "store", monkeypatch)
    for name, path in files.items():
        at.file_uploader(key="runs.upload").set_value((name, path.read_bytes(), "application/json")).run()
        no_exception(at, f"upload {name}")
    at.switch_page(page("explore")).run()
    import os

    from regime_dash.store.open import open_store

    names = {r["name"]: r["run_id"] for r in open_store(os.environ["REGIME_DASH_STORE"]).list_runs()}
    fused_id = next(i for n, i in names.items() if n.startswith("fused"))
    single_id = next(i for n, i in names.items() if n.startswith("single"))
    at.multiselect(key="explore.runs").set_value([fused_id]).run()
    no_exception(at, "explore fused alone")
    assert any(c.value.startswith("fused ran the fused controllers: pick the single path") for c in at.caption)
    assert any("first failure: tau_boost" in b.label for b in at.button)
    at.multiselect(key="explore.runs").set_value([fused_id, single_id]).run()
    at.selectbox(key=f"explore.single_twin.{fused_id}").set_value(single_id).run()
    no_exception(at, "explore paired")
    (drift,) = [b.label for b in at.button if "fused_mirror_drift" in b.label]
    boosted = np.flatnonzero(first["risk_stack.iqn.tau_min_effective"].to_numpy()
                             != replay(stream, cfg)["risk_stack.iqn.tau_min_effective"].to_numpy())
    assert drift.split("@ ")[1].startswith(f"{int(first['step'].iloc[boosted[0]])}–")
    assert any(c.value.startswith("fused_mirror_drift: The fused controller path parts") for c in at.caption)


def explore_planted(tmp_path, monkeypatch, replay_diag) -> AppTest:
    """Explore on a run with a planted violation: a dead-zone duration at step 250 that does not
    follow flag ? prev+1 : 0."""
    lines = [json.loads(line) for line in replay_diag.read_text().splitlines()]
    lines[250]["risk_stack"]["regime"]["dead_zone"]["duration"] = 7.0
    bad = tmp_path / "planted.jsonl"
    bad.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    at = open_app(tmp_path / "store", monkeypatch)
    at.file_uploader(key="runs.upload").set_value(("planted.jsonl", bad.read_bytes(), "application/json")).run()
    at.switch_page(page("explore")).run()
    no_exception(at, "explore")
    return at


def test_explore_violation_jumps_to_its_step(tmp_path, monkeypatch, replay_diag):
    at = explore_planted(tmp_path, monkeypatch, replay_diag)
    assert not [b for b in at.button if b.label == "step 250"]  # only the open tab (Episodes) is built
    at.session_state["explore.tabs"] = "Invariants"
    at.run()
    jump = [b for b in at.button if b.label == "step 250"]
    assert jump, [b.label for b in at.button]
    jump[0].click().run()
    no_exception(at, "jump")
    lo, hi = [s for s in at.slider if s.label == "Steps in view"][0].value
    assert lo < 250 < hi and (lo, hi) != (0, 399)


def test_explore_verdict_strip_and_markers_at_a_planted_violation(tmp_path, monkeypatch, replay_diag):
    """Above the charts: the verdict per run (counts, first failure, findings), each a jump; on the
    chart a marker at the violation's step on the panel of its signal."""
    at = explore_planted(tmp_path, monkeypatch, replay_diag)
    assert any("verdict **FAIL**" in m.value for m in at.markdown)
    (first,) = [b for b in at.button if "first failure: dead_zone_duration @ 250" in b.label]
    spec = chart_spec(at)
    (marker,) = [t for t in spec["data"] if t.get("name") == "verdict:dead_zone_duration"]
    assert 250 in values(marker["x"]).tolist() and marker["yaxis"] == "y"  # the dead-zone panel
    first.click().run()
    no_exception(at, "strip jump")
    lo, hi = [s for s in at.slider if s.label == "Steps in view"][0].value
    assert lo < 250 < hi and (lo, hi) != (0, 399)


# ---- Explore's failures table and provenance panel ---------------------------------------
PLANTED_STEP = 700


@pytest.fixture(scope="module")
def planted_diag_file(tmp_path_factory):
    """``(path, clean frame)``: a correct replay whose PopArt mean at step 700 was made wrong in the file."""
    from helpers import planted_diag

    return planted_diag(tmp_path_factory.mktemp("planted") / "planted.jsonl", step=PLANTED_STEP)


def explore_with_planted_fault(tmp_path, monkeypatch, planted_diag_file) -> AppTest:
    path, _ = planted_diag_file
    at = open_app(tmp_path / "store", monkeypatch)
    at.file_uploader(key="runs.upload").set_value(("planted.jsonl", path.read_bytes(), "application/json")).run()
    at.switch_page(page("explore")).run()
    no_exception(at, "explore")
    return at


def failures_table(at: AppTest):
    (table,) = [d for d in at.dataframe if "message" in d.value.columns]
    return table


def html_bodies(at: AppTest) -> list[str]:
    return [e.proto.body for e in at.get("html")]


def test_explore_failures_table_says_what_check_says_and_a_row_opens_the_panel(tmp_path, monkeypatch,
                                                                              planted_diag_file):
    from regime_dash.diag.aliases import canonical_frame
    from regime_dash.analysis import diagnose
    from regime_dash.analysis.texts import check_message
    from regime_dash.usecases.check import load_target

    path, clean = planted_diag_file
    at = explore_with_planted_fault(tmp_path, monkeypatch, planted_diag_file)
    table = failures_table(at)
    report = diagnose(canonical_frame(load_target(str(path))[0]))  # what check prints for the same file
    (failed,) = report.failed
    assert table.value[["kind", "id", "first step"]].values.tolist() == [["check", failed.id, PLANTED_STEP]]
    assert table.value["message"].tolist() == [check_message(failed)]
    assert not any("Provenance" in m.value or "Formula" in m.value for m in at.markdown)  # nothing chosen yet

    at.session_state[table.key] = {"selection": {"rows": [0], "columns": [], "cells": []}}
    at.run()
    no_exception(at, "row chosen")
    flat = {k: (v[0] if isinstance(v, list) else v) for k, v in dict(at.query_params).items()}
    assert flat["failure"] == f"rederive.popart_mean@{PLANTED_STEP}" and flat["failure_run"] == run_ids()[0]
    # the formula with its numbers: the value the correct run logged, and the planted one
    right = float(np.float32(clean[diag.POPART_MEAN].iloc[PLANTED_STEP]))
    (filled,) = [c.value for c in at.code if "expected" in c.value]
    wrong = float(np.float32(right) * np.float32(1.5))
    assert f"expected {right:.9g}, logged {wrong:.9g}" in filled
    assert filled.startswith("μ_t = (1−α)·μ_{t−1} + α·Σr/b")
    # the rows t−1 and t, the fields the formula reads highlighted
    (rows,) = [b for b in html_bodies(at) if "rd-rows" in b]
    used = [r for r in rows.split("<tr")[1:] if r.startswith(" class='rd-used'")]
    assert len(used) == 5 and all(any(f in r for r in used) for f in (
        diag.POPART_MEAN, diag.B_SIZE, "risk_stack.inputs.batch_sum", "risk_stack.config.popart_alpha"))
    assert "risk_stack.regime.dead_zone.flag" in rows and not any("dead_zone.flag" in r for r in used)
    # the local replay over the logged trajectory, parting from it at the planted step
    (replay,) = [d["figure"] for k, d in drawn_in_place(at).items() if k.endswith(".replay")]
    traces = {t["name"]: t for t in replay["data"]}
    xs = values(traces["logged"]["x"]).tolist()
    i = xs.index(PLANTED_STEP)
    assert np.float32(values(traces["replayed"]["y"])[i]) == np.float32(right)
    assert np.float32(values(traces["logged"]["y"])[i]) != np.float32(right)
    assert replay["layout"]["shapes"][0]["x0"] == PLANTED_STEP


def test_explore_provenance_selection_round_trips_through_the_url(tmp_path, monkeypatch, planted_diag_file):
    explore_with_planted_fault(tmp_path, monkeypatch, planted_diag_file)  # stores the run
    rid = run_ids()[0]
    fresh = AppTest.from_file(APP, default_timeout=TIMEOUT)
    fresh.query_params.update({"runs": rid, "failure": "rederive.popart_mean@701", "failure_run": rid})
    fresh.switch_page(page("explore")).run()
    no_exception(fresh, "reopened with a selection")
    assert any("`rederive.popart_mean` at step **701**" in m.value for m in fresh.markdown)
    assert any(k.endswith(".replay") for k in drawn_in_place(fresh))
    assert fresh.session_state["explore.failure"] == "rederive.popart_mean@701"

    # an item the run's verdict does not have opens nothing and leaves the URL
    gone = AppTest.from_file(APP, default_timeout=TIMEOUT)
    gone.query_params.update({"runs": rid, "failure": "no_such_check@5", "failure_run": rid})
    gone.switch_page(page("explore")).run()
    no_exception(gone, "unknown item in the URL")
    assert not any("at step **5**" in m.value for m in gone.markdown)
    assert "failure" not in dict(gone.query_params)


def test_a_verdict_warms_the_compiled_rederivation_loop():
    from regime_dash.engine import rederive as engine
    from regime_dash.ui import cache

    warm = cache.warm_rederivation()
    assert warm["thread"] is not None
    warm["thread"].join(timeout=TIMEOUT)
    assert not warm["thread"].is_alive() and warm["error"] is None
    assert engine.is_compiled()


def test_explore_aliases_map_renamed_fields(tmp_path, monkeypatch, replay_diag):
    import pandas as pd

    # a logger that writes kelly_f under a name no built-in alias knows
    lines = []
    for line in replay_diag.read_text().splitlines():
        rec = json.loads(line)
        rec["my_kelly"] = rec["risk_stack"]["kelly"].pop("fraction")
        lines.append(json.dumps(rec))
    renamed = tmp_path / "renamed.jsonl"
    renamed.write_text("\n".join(lines) + "\n")
    at = open_app(tmp_path / "store", monkeypatch)
    at.file_uploader(key="runs.upload").set_value(("renamed.jsonl", renamed.read_bytes(), "application/json")).run()
    at.switch_page(page("explore")).run()
    no_exception(at, "explore")
    assert not [t for t in chart_spec(at)["data"] if t.get("name", "").endswith("kelly_f")]
    at.session_state["explore.aliases"] = pd.DataFrame(
        {"canonical": ["risk_stack.kelly.fraction"], "alternatives": ["my_kelly"]})
    at.run()
    no_exception(at, "alias")
    (kelly,) = [t for t in chart_spec(at)["data"] if t.get("name", "").endswith("kelly_f")]
    want = [json.loads(line)["my_kelly"] for line in lines]
    steps = [json.loads(line)["step"] for line in lines]
    # flat stretches are sent as their ends (and every 16th point): the drawn line is the file's
    drawn = np.interp(steps, values(kelly["x"]), values(kelly["y"]))
    np.testing.assert_allclose(drawn, want, rtol=1e-6)


def test_alias_edits_fold_into_the_stored_table():
    import pandas as pd

    from regime_dash.ui.widgets import _apply_edits

    base = pd.DataFrame({"canonical": ["a", "b", "c"], "alternatives": ["x", "y", "z"]})
    out = _apply_edits(base, {"edited_rows": {1: {"alternatives": "y, yy"}}, "deleted_rows": [0],
                              "added_rows": [{"canonical": "d", "alternatives": "w"}, {}]})
    assert out.to_dict("list") == {"canonical": ["b", "c", "d"], "alternatives": ["y, yy", "z", "w"]}
    assert base["canonical"].tolist() == ["a", "b", "c"]  # the stored table is not changed in place


def test_explore_leaves_out_rows_without_a_step(tmp_path, monkeypatch, replay_diag):
    lines = replay_diag.read_text().splitlines()
    rec = json.loads(lines[10])
    rec["step"] = "ten"  # a logger bug: the whole step column becomes strings
    lines[10] = json.dumps(rec)
    at = open_app(tmp_path / "store", monkeypatch)
    at.file_uploader(key="runs.upload").set_value(
        ("odd.jsonl", ("\n".join(lines) + "\n").encode(), "application/json")).run()
    at.switch_page(page("explore")).run()
    no_exception(at, "explore")
    assert any("1 row(s) have no whole-number step" in w.value for w in at.warning)
    drawn_x = [values(t["x"]) for t in chart_spec(at)["data"]
              if t.get("legendgroup") == "odd" and t.get("mode") == "lines" and not t.get("fill")]
    # 399 steps drawn (a series that moves every step keeps them all; flat ones are thinned), none at 10
    assert max(len(x) for x in drawn_x) == 399 and not any(10 in x for x in drawn_x)


def test_explore_downloads_the_view(loaded):
    at = loaded
    at.switch_page(page("explore")).run()
    at.session_state["explore.tabs"] = "Download"
    at.run()
    assert not at.get("download_button")  # written only when asked for
    assert at.radio(key="explore.download.format").options == ["PARQUET", "CSV"]
    at.radio(key="explore.download.format").set_value("csv")
    at.button(key="explore.download.prepare").click().run()
    no_exception(at, "prepare")
    (button,) = at.get("download_button")
    assert protos.label(button).startswith("Download regime-dash-view.csv (1,200 rows, ")


# ---- Replay & what-if ----------------------------------------------------------------------
def test_replay_max_duration_changes_timeouts(tmp_path, monkeypatch):
    """Lowering max_duration on the trap scenario (resurrection off) changes the timeout count shown."""
    at = open_app(tmp_path / "store", monkeypatch)
    at.switch_page(page("replay")).run()
    no_exception(at, "replay")
    assert at.selectbox(key="replay.source.scenario").value == "kelly_trap_run8"
    at.toggle(key="replay.whatif.resurrection").set_value(False)
    at.slider(key="replay.whatif.max_duration").set_value(5000.0).run()
    no_exception(at, "max_duration 5000")
    assert metric(at, "timeouts") == "0"
    long_steps = float(metric(at, "timeout steps"))
    at.slider(key="replay.whatif.max_duration").set_value(200.0).run()
    no_exception(at, "max_duration 200")
    assert metric(at, "timeouts") == "1"
    assert float(metric(at, "timeout steps")) > long_steps
    assert any(c.value.startswith("What-if replayed in ") and " ms on the " in c.value for c in at.caption)
    names = {t.get("legendgroup") for t in chart_spec(at)["data"]}
    assert names == {"baseline", "what-if"}


def test_replay_slider_rebuilds_only_the_what_if_traces(tmp_path, monkeypatch):
    """A what-if slider move builds the what-if run's traces; the baseline's come from the cache."""
    from regime_dash.figures import signals as figures

    at = open_app(tmp_path / "store", monkeypatch)
    at.switch_page(page("replay")).run()
    at.slider(key="replay.whatif.eps_min").set_value(0.13).run()
    no_exception(at, "eps_min 0.13")
    built = []
    real = figures.run_traces

    def counting(label, *args, **kw):
        built.append(label)
        return real(label, *args, **kw)

    monkeypatch.setattr(figures, "run_traces", counting)
    at.slider(key="replay.whatif.eps_min").set_value(0.14).run()
    no_exception(at, "eps_min 0.14")
    assert built == ["what-if"]
    # the chart is the in-place component under its key (the page loads no st.plotly_chart), given
    # the figure, the dashboard's config and the vendored bundle's URL
    from regime_dash.ui import plotly_react

    assert not at.get("plotly_chart")
    chart = drawn_in_place(at)["replay.chart.0"]
    assert chart["config"] == {**plotly_react.CONFIG, "scrollZoom": False}  # a drag zooms (box), not the wheel
    # beside the component's module where streamlit found its manifest (an installed package),
    # else by the v1 file route
    assert (chart["bundle"], chart["bundle_base"]) == (plotly_react.BUNDLE, "module") or (
        chart["bundle_base"] == "page" and chart["bundle"].endswith("/" + plotly_react.BUNDLE))
    spec = chart["figure"]
    assert {t.get("legendgroup") for t in spec["data"]} == {"baseline", "what-if"}
    live = [t for t in spec["data"] if t.get("name") == "what-if ε live"]
    assert len(live) == 1 and len(values(live[0]["y"])) <= 700  # about the chart's pixel width


def replay_chart(at: AppTest) -> dict:
    """The Replay chart's figure (its key carries the zoom count)."""
    (figure,) = [d["figure"] for k, d in drawn_in_place(at).items() if k.startswith("replay.chart.")]
    return figure


def test_replay_box_zoom_keeps_its_window_and_redraws_at_full_resolution(tmp_path, monkeypatch):
    """The default scenario's dead-zone flag flips every step: a duty band over the whole run; zoomed to
    300 steps (the window a dragged box sets) every step is drawn and the flag is spans again; the
    window stays through a slider move and the buttons step it."""
    from regime_dash.ui import widgets

    at = open_app(tmp_path / "store", monkeypatch)
    at.switch_page(page("replay")).run()
    no_exception(at, "replay")

    def dead_zone(figure, run="baseline"):
        (trace,) = [t for t in figure["data"] if t.get("name") == f"{run} dead-zone episode"]
        return trace

    whole = replay_chart(at)
    assert dead_zone(whole)["fill"] == "tozeroy" and whole["layout"]["dragmode"] == "select"
    key = widgets.window_key("replay.window", ["scenario:kelly_trap_run8:0:3000:128"])
    at.session_state[key] = (1000, 1300)
    at.run()
    no_exception(at, "zoomed")
    zoomed = replay_chart(at)
    assert zoomed["layout"]["xaxis"]["range"] == [1000, 1300]
    assert dead_zone(zoomed)["fill"] == "toself"  # 300 steps fit the pixel columns: spans
    (duration,) = [t for t in zoomed["data"] if t.get("legendgroup") == "baseline"
                   and "duration:" in t.get("hovertemplate", "")]
    np.testing.assert_array_equal(values(duration["x"]), np.arange(1000, 1301))  # every step, none skipped
    at.slider(key="replay.whatif.eps_min").set_value(0.13).run()
    no_exception(at, "slider while zoomed")
    assert replay_chart(at)["layout"]["xaxis"]["range"] == [1000, 1300]
    at.button(key="replay.chart.earlier").click().run()
    assert replay_chart(at)["layout"]["xaxis"]["range"] == [850, 1150]
    at.button(key="replay.chart.out").click().run()
    assert dead_zone(replay_chart(at))["fill"] == "tozeroy"


def test_replay_model_switch_toggle_lets_the_timeout_fire_with_resurrection_on(tmp_path, monkeypatch):
    """The duration_across_cycles toggle (from the config declaration) moves the timeout count with F2 on."""
    at = open_app(tmp_path / "store", monkeypatch)
    at.switch_page(page("replay")).run()
    no_exception(at, "replay")
    assert at.toggle(key="replay.whatif.resurrection").value is True
    assert metric(at, "timeouts") == "0"  # the spec's code: the cycling dead zone never times out
    assert at.toggle(key="replay.whatif.duration_across_cycles").value is False
    at.toggle(key="replay.whatif.duration_across_cycles").set_value(True).run()
    no_exception(at, "duration_across_cycles on")
    assert metric(at, "timeouts") == "1"


def test_replay_fused_path_with_the_layer4_mirror_off_shows_the_drift_and_the_single_twin(tmp_path, monkeypatch):
    """Fused path: the mirrors on agree with the single path; the Layer-4 mirror off names step 341."""
    at = open_app(tmp_path / "store", monkeypatch)
    at.switch_page(page("replay")).run()
    at.radio(key="replay.controllers").set_value("fused").run()
    no_exception(at, "fused, mirrors on")
    assert {t.get("legendgroup") for t in chart_spec(at)["data"]} == {"baseline", "what-if"}
    assert any("rl_fused_controllers" in c.value for c in at.caption)
    assert metric(at, "timeouts") == "0"  # F2 mirrored: the dead zone cycles as on the single path
    at.toggle(key="replay.whatif.fused_mirror_resurrection").set_value(False).run()
    no_exception(at, "fused, Layer-4 mirror off")
    (err,) = [e.value for e in at.error if "fused_mirror_drift" in e.value]
    assert "step 341" in err and "Layer-4" in shown(err)
    assert {t.get("legendgroup") for t in chart_spec(at)["data"]} == {"baseline", "what-if",
                                                                      "what-if, single path"}
    assert metric(at, "timeouts") == "1"  # no resurrection in the fused copy: the dead zone times out
    at.radio(key="replay.controllers").set_value("single").run()  # the switch means nothing on the single path
    no_exception(at, "single, mirror switch off")
    assert not [e for e in at.error if "fused_mirror_drift" in e.value]
    assert metric(at, "timeouts") == "0"


def test_every_config_field_has_a_slider_around_its_default():
    from regime_dash.core.config import SWITCHES, RegimeConfig, field_names
    from regime_dash.ui import widgets

    numeric = [f for f in field_names() if f not in SWITCHES]
    assert widgets.numeric_fields() == numeric
    assert set(widgets.numeric_specs()) == set(numeric)
    for name in numeric:
        lo, hi, step = widgets.slider_domain(name)
        default = getattr(RegimeConfig(), name)
        assert lo <= default <= hi and step > 0, name
        # both ends are values RegimeConfig accepts (from an ε range that lets either end move)
        wide = RegimeConfig(eps_min=0.0, eps_max=1.0)
        wide.replace(**{name: lo})
        wide.replace(**{name: hi})
    assert set(widgets.SWITCH_LABELS) == set(SWITCHES)
    # a toggle's label does not wrap: each fits the What-if column of a 1,280 px window beside its
    # help icon (about 21 characters; "model: tail test on |Δworst − mean|" was cut there)
    assert max(len(label) for label in widgets.SWITCH_LABELS.values()) <= 22


def test_replay_rejects_bad_config_and_marks_engines(tmp_path, monkeypatch):
    at = open_app(tmp_path / "store", monkeypatch)
    at.switch_page(page("replay")).run()
    at.slider(key="replay.whatif.eps_min").set_value(0.9).run()
    no_exception(at, "eps_min > eps_max")
    assert any("eps_min=0.9" in shown(e.value) for e in at.error)
    status = engine_status()
    engine = at.selectbox(key="replay.engine")
    assert engine.options[:1] == ["auto (→ fast)"] or engine.options[0].startswith("auto")
    for name, reason in status.items():
        label = [o for o in engine.options if o.split(" ")[0] == name][0]
        assert ("unavailable" in label) == (reason is not None), label
    down = [n for n, r in status.items() if r is not None]
    if down:  # on a machine with every engine available there is nothing to mark
        at.selectbox(key="replay.engine").set_value(down[0]).run()
        assert any("cannot run here" in e.value for e in at.error)


def swept_default(tmp_path, monkeypatch):
    """The app on the Replay page after its default sweep (the first field over 3 values), with no exception."""
    at = open_app(tmp_path / "store", monkeypatch)
    at.switch_page(page("replay")).run()
    at.number_input(key="replay.sweep.n1").set_value(3)
    at.button(key="replay.sweep.run").click().run()
    no_exception(at, "default sweep")
    return at


def test_replay_default_sweep_flat_line_says_why(tmp_path, monkeypatch):
    """The default sweep (max_duration against timeout steps, F2 on) is flat; the caption names the finding."""
    at = swept_default(tmp_path, monkeypatch)
    notes = [c.value for c in at.caption if c.value.startswith("A flat line")]
    assert len(notes) == 1 and "timeout_unreachable" in notes[0] and "Theorem 3" in notes[0]


@pytest.mark.slow  # a sweep and a cell replay through the page: about 6 s
def test_replay_sweep_and_open_a_cell(tmp_path, monkeypatch):
    at = open_app(tmp_path / "store", monkeypatch)
    at.switch_page(page("replay")).run()
    at.toggle(key="replay.whatif.resurrection").set_value(False).run()  # sweeps vary the what-if config
    at.number_input(key="replay.sweep.lo1").set_value(1000.0)
    at.number_input(key="replay.sweep.hi1").set_value(4000.0)
    at.number_input(key="replay.sweep.n1").set_value(4)
    at.selectbox(key="replay.sweep.metric").set_value("timeouts").run()
    at.button(key="replay.sweep.run").click().run()
    no_exception(at, "sweep")
    line = [c for c in (chart_spec(at, i) for i in range(len(charts(at))))
            if c["data"][0].get("mode") == "lines+markers"][0]
    assert list(values(line["data"][0]["x"])) == [1000.0, 2000.0, 3000.0, 4000.0]
    # the trap's one dead zone lasts 2649 steps: it times out below that, not above
    assert list(values(line["data"][0]["y"])) == [1.0, 1.0, 0.0, 0.0]
    at.selectbox(key="replay.sweep.row").set_value(0).run()
    no_exception(at, "open cell")
    assert any(m.value.startswith("**Replay of max_duration=1000** — timeouts = 1") for m in at.markdown)
    # two fields: a heatmap
    at.selectbox(key="replay.sweep.f2").set_value("n_recovery").run()
    at.number_input(key="replay.sweep.n2").set_value(2).run()
    at.button(key="replay.sweep.run").click().run()
    no_exception(at, "heatmap")
    heat = [c for c in (chart_spec(at, i) for i in range(len(charts(at))))
            if c["data"][0].get("type") == "heatmap"]
    assert len(heat) == 1
    z = heat[0]["data"][0]["z"]
    z = values(z) if isinstance(z, dict) else np.array([values(r) for r in z])
    assert z.shape == (2, 4)  # n_recovery rows × max_duration columns
    np.testing.assert_array_equal(z[0], [1.0, 1.0, 0.0, 0.0])


@pytest.mark.slow  # three sources replayed through AppTest: ~1.2 s of CPU
def test_replay_sources_stream_file_and_simulator(tmp_path, monkeypatch):
    at = open_app(tmp_path / "store", monkeypatch)
    at.switch_page(page("replay")).run()
    stream = upload_sample_stream(at, "replay.source")
    assert any(c.value.startswith(f"Stream: {stream.steps:,} steps × {stream.accounts:,} accounts.")
               for c in at.caption)
    at.radio(key="replay.source.kind").set_value("Simulator").run()
    at.number_input(key="replay.source.simsteps").set_value(300).run()
    no_exception(at, "simulator")
    assert any(c.value.startswith("Stream: 300 steps") for c in at.caption)
    assert {t.get("legendgroup") for t in chart_spec(at)["data"]} == {"baseline", "what-if"}


# ---- Slots ---------------------------------------------------------------------------------
def test_slots_filter_import_and_report(tmp_path, monkeypatch):
    at = open_app(tmp_path / "store", monkeypatch)
    at.switch_page(page("slots")).run()
    default_fp = metric(at, "Fingerprint (FNV-1a 64)")
    full = len(table_with(at, "bootstrap"))
    at.text_input(key="slots.filter").set_value("re-bootstrap").run()
    filtered = table_with(at, "bootstrap")
    assert 0 < len(filtered) < full and set(filtered["policy"]) == {"re-bootstrap"}
    rs = (b"pub const RL_REGIME_DEAD_ZONE_FLAG_INDEX: usize = 697;\n"
          b"pub const SOMETHING_ELSE: usize = 3;\n")
    at.file_uploader(key="slots.upload").set_value(("isv_slots.rs", rs, "text/plain")).run()
    no_exception(at, "import")
    assert metric(at, "Fingerprint (FNV-1a 64)") != default_fp
    assert any("overlap at [697]" in shown(e.value) for e in at.error)
    at.file_uploader(key="slots.upload").set_value(("isv_slots.rs", b"fn main() {}\n", "text/plain")).run()
    assert any("no `pub const" in shown(e.value) for e in at.error)


def test_streamlit_config_is_deliberate():
    import tomllib

    cfg = tomllib.loads((Path(APP).parent / ".streamlit" / "config.toml").read_text())
    assert cfg["server"]["address"] == "127.0.0.1"
    assert cfg["server"]["enableXsrfProtection"] is True
    assert isinstance(cfg["server"]["maxUploadSize"], int) and cfg["server"]["maxUploadSize"] != 200
    assert cfg["browser"]["gatherUsageStats"] is False


def test_an_imported_layout_is_used_by_replays(tmp_path, monkeypatch):
    from regime_dash.core.slots import DEFAULT_LAYOUT

    at = open_app(tmp_path / "store", monkeypatch)
    at.switch_page(page("replay")).run()
    assert any(f"fingerprint {DEFAULT_LAYOUT.fingerprint_hex()}" in c.value for c in at.caption)
    before = metric(at, "dead zone steps")
    at.switch_page(page("slots")).run()
    rs = b"pub const RL_REGIME_DEAD_ZONE_FLAG_INDEX: usize = 900;\n"  # moved to a free index
    at.file_uploader(key="slots.upload").set_value(("isv_slots.rs", rs, "text/plain")).run()
    moved = metric(at, "Fingerprint (FNV-1a 64)")
    assert moved != DEFAULT_LAYOUT.fingerprint_hex()
    at.switch_page(page("replay")).run()
    no_exception(at, "replay with the imported layout")
    assert any(f"isv_slots.rs, fingerprint {moved}" in shown(c.value) for c in at.caption)
    assert metric(at, "dead zone steps") == before  # same semantics, other indices
    at.switch_page(page("slots")).run()
    assert any("Replays use the layout of isv_slots.rs" in shown(i.value) for i in at.info)
    at.button(key="slots.reset").click().run()
    at.switch_page(page("replay")).run()
    assert any(f"fingerprint {DEFAULT_LAYOUT.fingerprint_hex()}" in c.value for c in at.caption)


# ---- Compare -------------------------------------------------------------------------------
def test_compare_two_runs(loaded):
    at = loaded
    at.switch_page(page("compare")).run()
    no_exception(at, "compare")
    assert any(shown(w.value).startswith("differ: first at step") for w in at.warning)
    n = int(metric(at, "differing fields"))
    assert n > 0
    # the fields table and the full report are built only once their expander is opened
    assert not at.dataframe and not at.code
    assert [e.label for e in at.expander] == [f"The {n} differing field(s)", "Full diff report"]
    at.session_state["compare.fields.open"] = True
    at.session_state["compare.report.open"] = True
    at.run()
    no_exception(at, "details open")
    assert len(at.dataframe) == 1 and len(at.dataframe[0].value) == n
    assert at.code[0].value.splitlines()[0].startswith("differ: first at step")
    at.selectbox(key="compare.b").set_value(run_ids()[0]).run()
    no_exception(at, "same run")
    assert any(s.value.startswith("identical") for s in at.success)


# ---- views that survive (query parameters, selection across pages) -------------------------
@pytest.mark.slow  # Explore run through AppTest again and again: ~1.6 s of CPU
def test_explore_view_round_trips_through_the_url(loaded, monkeypatch):
    at = loaded
    at.switch_page(page("explore")).run()
    ids = run_ids()
    at.multiselect(key="explore.runs").set_value(ids).run()
    at.slider(key="explore.smoothing").set_value(0.5).run()
    at.slider(key="explore.window").set_value((100, 300)).run()
    no_exception(at, "view set")
    url = dict(at.query_params)
    assert url["runs"] == [",".join(ids)] or url["runs"] == ",".join(ids)
    flat = {k: (v[0] if isinstance(v, list) else v) for k, v in url.items()}
    assert flat["smooth"] == "0.5" and flat["window"] == "100..300"

    # the copied URL, opened in a new session, shows the same view
    fresh = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for k, v in flat.items():
        fresh.query_params[k] = v
    fresh.switch_page(page("explore")).run()
    no_exception(fresh, "reopened")
    assert fresh.multiselect(key="explore.runs").value == ids
    assert fresh.slider(key="explore.smoothing").value == 0.5
    assert fresh.slider(key="explore.window").value == (100, 300)
    legend = [t for t in chart_spec(fresh)["data"] if t.get("showlegend")]
    assert len(legend) == 2
    xs = np.concatenate([values(t["x"]) for t in chart_spec(fresh)["data"] if t.get("name", "").endswith("kelly_f")])
    assert min(xs) >= 100 and max(xs) <= 300

    # a URL naming a run that is gone keeps the rest of the view
    gone = AppTest.from_file(APP, default_timeout=TIMEOUT)
    gone.query_params["runs"] = f"no-such-run,{ids[1]}"
    gone.switch_page(page("explore")).run()
    no_exception(gone, "unknown run in the URL")
    assert gone.multiselect(key="explore.runs").value == [ids[1]]


@pytest.mark.slow  # four pages rendered in turn: about 12 s with its fixture
def test_selection_survives_page_switches(loaded):
    at = loaded
    at.switch_page(page("explore")).run()
    ids = run_ids()
    at.multiselect(key="explore.runs").set_value(ids[::-1]).run()
    at.slider(key="explore.smoothing").set_value(0.25).run()
    for other in ("runs", "replay", "compare"):
        at.switch_page(page(other)).run()
        no_exception(at, other)
        at.switch_page(page("explore")).run()
        no_exception(at, f"explore after {other}")
        assert at.multiselect(key="explore.runs").value == ids[::-1], other
        assert at.slider(key="explore.smoothing").value == 0.25, other


def test_replay_config_round_trips_through_the_url(tmp_path, monkeypatch):
    at = open_app(tmp_path / "store", monkeypatch)
    at.query_params.update({"resurrection": "0", "max_duration": "200", "steps": "3000"})
    at.switch_page(page("replay")).run()
    no_exception(at, "replay from a URL")
    assert at.toggle(key="replay.whatif.resurrection").value is False
    assert at.slider(key="replay.whatif.max_duration").value == 200.0
    assert at.number_input(key="replay.source.steps").value == 3000
    assert metric(at, "timeouts") == "1"
    at.slider(key="replay.whatif.max_duration").set_value(5000.0).run()
    flat = {k: (v[0] if isinstance(v, list) else v) for k, v in dict(at.query_params).items()}
    assert flat["max_duration"] == "5000" and flat["resurrection"] == "0" and flat["steps"] == "3000"
    assert "eps_min" not in flat  # defaults stay out of the URL
    at.slider(key="replay.whatif.max_duration").set_value(1000.0).run()  # back to the default
    assert "max_duration" not in dict(at.query_params)


@pytest.mark.slow  # a replay page run while a compile runs: ~1.1 s of CPU
def test_first_replay_answers_while_the_fast_engine_compiles(tmp_path, monkeypatch):
    """A compile in progress (held here, as a cold one would be) does not hold the first replay."""
    from regime_dash.engine import warm

    monkeypatch.setattr(warm, "start_fast_compile", lambda: None)
    monkeypatch.setattr(warm, "_loaded_in_process", lambda: False)  # as in a process that has not compiled
    monkeypatch.setitem(warm._STATE, "state", "compiling")
    monkeypatch.setitem(warm._STATE, "started", __import__("time").monotonic())
    monkeypatch.setitem(warm._STATE, "cached", False)
    monkeypatch.setitem(warm._STATE, "finished", None)
    at = open_app(tmp_path / "store", monkeypatch)
    at.switch_page(page("replay")).run()
    no_exception(at, "replay while compiling")
    assert any(c.value.startswith("What-if replayed in ") and c.value.endswith("on the reference engine.")
               for c in at.caption)
    assert at.selectbox(key="replay.engine").options[0] == "auto (→ reference)"
    progress = at.get("progress")
    assert progress and "Compiling the fast engine in the background" in protos.progress(progress[0])[1]
    assert metric(at, "timeouts") in ("0", "1")  # the replay answered: its summary is on the page


def test_explore_aligns_runs_at_their_first_step(tmp_path, monkeypatch, replay_diag):
    # the same run logged again 5,000 steps later: aligned, the two lie on top of each other
    lines = [json.loads(line) for line in replay_diag.read_text().splitlines()]
    for rec in lines:
        rec["step"] += 5000
    later = tmp_path / "later.jsonl"
    later.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    at = open_app(tmp_path / "store", monkeypatch)
    at.file_uploader(key="runs.upload").set_value([
        ("early.jsonl", replay_diag.read_bytes(), "application/json"),
        ("later.jsonl", later.read_bytes(), "application/json")]).run()
    at.switch_page(page("explore")).run()
    at.multiselect(key="explore.runs").set_value(run_ids()).run()
    at.toggle(key="explore.align").set_value(True).run()
    no_exception(at, "aligned")
    kelly = [t for t in chart_spec(at)["data"] if t.get("name", "").endswith("kelly_f")]
    assert len(kelly) == 2
    assert list(values(kelly[0]["x"])) == list(values(kelly[1]["x"])) and values(kelly[0]["x"])[0] == 0
    assert at.slider(key="explore.window").value == (0, 399)
    assert at.slider(key="explore.window").label == "Steps in view (since each run's first step)"


def test_runs_delete_refuses_when_the_confirmed_run_is_gone(loaded, tmp_path):
    """A run deleted elsewhere (another tab, ``rm``) between the tick and the click: the list falls
    back to another run, and that run must not be deleted in its place."""
    from regime_dash.store.open import open_store

    at = loaded
    store = open_store(tmp_path / "store")
    first, second = [r["run_id"] for r in store.list_runs()]
    at.selectbox(key="runs.delete.run").set_value(second).run()
    at.checkbox(key="runs.delete.sure").check().run()
    assert second in shown(at.checkbox(key="runs.delete.sure").label)  # the tick names its run
    store.delete(second)  # the other tab's delete
    at.button(key="runs.delete.go").click().run()
    no_exception(at, "delete after the run went")
    assert [r["run_id"] for r in store.list_runs()] == [first]
    assert any(second in shown(w.value) and "nothing was deleted" in w.value for w in at.warning)
    assert not at.checkbox(key="runs.delete.sure").value


def test_runs_delete_refuses_a_run_picked_after_the_tick(loaded, tmp_path):
    from regime_dash.store.open import open_store

    at = loaded
    store = open_store(tmp_path / "store")
    first, second = [r["run_id"] for r in store.list_runs()]
    at.checkbox(key="runs.delete.sure").check().run()
    at.selectbox(key="runs.delete.run").set_value(second).run()
    assert at.button(key="runs.delete.go").disabled  # the tick was for the first run: it is cleared
    assert not at.checkbox(key="runs.delete.sure").value
    assert any(first in shown(w.value) and "nothing was deleted" in w.value for w in at.warning)
    assert len(store.list_runs()) == 2


@pytest.fixture
def folder_format(monkeypatch) -> None:
    """A new store made as a folder store (before ``loaded`` makes it: put it first among a test's fixtures)."""
    monkeypatch.setenv("REGIME_DASH_STORE_FORMAT", "folder")


def test_explore_draws_the_good_run_beside_a_damaged_one(folder_format, loaded, tmp_path):
    """A damaged part file (here emptied) in one picked run: the page says which run, in one
    notice, and still draws the other."""
    from regime_dash.store.run_store import RunStore

    at = loaded
    store = RunStore(tmp_path / "store")
    good, bad = [r["run_id"] for r in store.list_runs()]
    for part in store.parts(bad):
        part.write_bytes(b"")
    at.switch_page(page("explore")).run()
    at.multiselect(key="explore.runs").set_value([good, bad]).run()
    no_exception(at, "explore with a damaged run")
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "damaged" in errors[0] and bad[-6:] in shown(errors[0]), errors
    assert charts(at) or drawn_in_place(at)


# ---- "Find a passing config" on Replay and Explore -----------------------------------------
@pytest.mark.slow
def test_replay_finds_a_passing_config_and_apply_sets_the_what_if_sliders(tmp_path, monkeypatch):
    """Replay's Repair tab searches on the page's stream (its settings from the URL); a candidate's
    "Apply" moves the what-if sliders, and the what-if run under them is replayed."""
    at = open_page(tmp_path / "store", monkeypatch, "replay", steps="2000", accounts="8",
                   repair_fields="max_duration,resurrection", repair_trials="8", repair_seed="4")
    assert at.multiselect(key="replay.repair.fields").value == ["max_duration", "resurrection"]
    (find,) = [b for b in at.button if b.label == "Find a passing config"]
    before = (at.slider(key="replay.whatif.max_duration").value, at.toggle(key="replay.whatif.resurrection").value)
    find.click().run()
    no_exception(at, "repair search")
    result = at.session_state["replay.repair.result"][1]
    best = result.candidates[0]
    assert result.status == "passing" and best.passing and best.verified
    assert (best.config.max_duration, best.config.resurrection) != before
    at.button(key="replay.repair.apply.1").click().run()
    no_exception(at, "apply")
    assert at.slider(key="replay.whatif.max_duration").value == best.config.max_duration
    assert at.toggle(key="replay.whatif.resurrection").value == best.config.resurrection
    assert best.config == RegimeConfig(max_duration=best.config.max_duration,
                                       resurrection=best.config.resurrection)  # searched around the defaults
    # the metrics above the chart are the applied config's, as the verifying replay counted them
    assert metric(at, "timeouts") == str(int(best.after["timeouts"]))


def test_explore_answers_find_a_passing_config_for_a_stored_failing_run(tmp_path, monkeypatch, replay_diag):
    """Explore's repair expander on a stored run that fails: the run judged, and where config may help
    the answer says the search needs the run's stream (a diag does not hold it)."""
    from regime_dash.runs.repair import repair_run

    at = explore_planted(tmp_path, monkeypatch, replay_diag)
    (find,) = [b for b in at.button if b.label == "Find a passing config"]
    find.click().run()
    no_exception(at, "explore repair")
    (rid,) = run_ids()
    stored = at.session_state["explore.repair.result"]
    assert stored[0] == rid
    from regime_dash.diag.aliases import canonical_frame
    from regime_dash.store.open import open_store

    expected = repair_run(canonical_frame(open_store(tmp_path / "store").load(rid), None))
    assert stored[1].status == expected.status != "already_passes"
    shown_text = [e.value for e in (*at.warning, *at.error)]
    assert shown(markdown_literal(expected.message)) in [shown(t) for t in shown_text]
