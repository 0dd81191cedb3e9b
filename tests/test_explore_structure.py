"""Explore on cluster runs: a resume drawn once with its marker, a failed resume's provenance (the
checkpoint row, the resumed row, the slots that did not continue), a writer chosen by its rank field."""
from __future__ import annotations

import numpy as np
import pytest

from cluster_runs import Job, interleaved, preempted
from regime_dash.diag import catalogue as diag
from regime_dash.diag.catalogue import write_jsonl
from test_app_pages import chart_spec, failures_table, html_bodies, no_exception, open_app, page, values

pytest.importorskip("streamlit.testing.v1")


def explore_with(tmp_path, monkeypatch, name: str, frame):
    path = write_jsonl(frame, tmp_path / name)
    at = open_app(tmp_path / "store", monkeypatch)
    at.file_uploader(key="runs.upload").set_value((name, path.read_bytes(), "application/json")).run()
    at.switch_page(page("explore")).run()
    no_exception(at, "explore")
    return at


def test_a_failed_resume_is_marked_drawn_once_and_its_provenance_names_the_slots(tmp_path, monkeypatch):
    job = Job.of("tail_shock", steps=900, accounts=16)
    frame, ckpt = preempted(job, 100, 460, restore=False)
    at = explore_with(tmp_path, monkeypatch, "resumed.jsonl", frame)
    spec = chart_spec(at)
    lines = [s for s in spec["layout"].get("shapes", []) if s.get("type") == "line" and s["x0"] == ckpt + 0.5]
    assert lines and all(s["line"]["dash"] == "dash" for s in lines)
    (recency,) = [t for t in spec["data"] if str(t.get("name", "")).endswith("recency+1")]
    assert values(recency["x"]).tolist() == list(range(900))  # drawn once: the resumed copy, no step twice
    table = failures_table(at)
    assert ["finding", "structure.resume", ckpt + 1] in table.value[["kind", "id", "first step"]].values.tolist()
    row = table.value["id"].tolist().index("structure.resume")
    at.session_state[table.key] = {"selection": {"rows": [row], "columns": [], "cells": []}}
    at.run()
    no_exception(at, "resume chosen")
    assert any("The checkpoint row (t−1) and the resumed row (t)" in m.value for m in at.markdown)
    (rows,) = [b for b in html_bodies(at) if "rd-rows" in b]
    used = [r for r in rows.split("<tr")[1:] if r.startswith(" class='rd-used'")]
    assert any(diag.COUNT in r and "did not continue" in r and "bootstrap value 0" in r for r in used)


def test_a_writer_is_chosen_by_its_rank_field_and_judged_as_its_own_run(tmp_path, monkeypatch):
    a, b = Job.of("calm", steps=600, accounts=16), Job.of("calm", steps=600, accounts=16, seed=4)
    bad = b.frame.copy()
    bad.loc[300, diag.DURATION] = np.float32(7)
    at = explore_with(tmp_path, monkeypatch, "ranks.jsonl", interleaved(a.frame, bad, 10, rank="rank"))
    (pick,) = [s for s in at.selectbox if "writer" in s.label]
    assert pick.options == ["0 (600 rows)", "1 (600 rows)"] and pick.value == "0"
    assert not [r for r in failures_table_rows(at) if r[0] == "dead_zone_duration"]
    pick.set_value("1").run()
    no_exception(at, "writer 1")
    assert ["dead_zone_duration", 300] in failures_table_rows(at)


def failures_table_rows(at) -> list[list]:
    tables = [d for d in at.dataframe if "message" in d.value.columns]
    return [] if not tables else tables[0].value[["id", "first step"]].values.tolist()
