"""Issue 12's corrected checks: each fails on a file built to break it and passes on the clean sample.

Built faults: a resurrection that never overrides (with and without the F2 switch in the file), a
NaN in risk_stack.popart.sigma, a field that first appears mid-run (must pass), a null inside a
field's span (reported apart from NaN). The cycling trap is in test_invariants and test_findings.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from regime_dash.analysis import run_checks, verdict
from regime_dash.analysis import view as v
from regime_dash.cli import main
from regime_dash.diag.catalogue import SWITCH_COLUMNS, write_jsonl
from test_invariants import STEP0, rich_frame

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "data" / "samples" / "diag.jsonl"
F2 = SWITCH_COLUMNS["resurrection"]


def result(frame, check_id):
    (res,) = run_checks(frame, [check_id])
    return res


def broken_resurrection(frame):
    """kelly_f left at its analytic value on every dead-zone row before a timeout: F2 never acts."""
    out = frame.copy()
    override = (out[v.FLAG] == 1) & (out[v.TIMEOUT] == 0)
    assert override.sum() > 100
    out.loc[override, v.KELLY] = out.loc[override, v.KELLY_ANALYTIC]
    return out, int(out.loc[override, "step"].iloc[0])


# ---- resurrection --------------------------------------------------------------------------
def test_missing_resurrection_fails_where_the_file_says_f2_is_on():
    clean = rich_frame()
    assert (clean[F2] == 1).all() and result(clean, "kelly_resurrection").status == "pass"
    bad, first = broken_resurrection(clean)
    res = result(bad, "kelly_resurrection")
    assert res.status == "fail" and res.first_step == first and str(first) in res.detail


def test_missing_resurrection_without_the_switch_warns_and_the_spec_rederivation_fails():
    bad, first = broken_resurrection(rich_frame())
    res = result(bad.drop(columns=[F2]), "kelly_resurrection")
    assert res.status == "warn" and "cannot tell" in res.detail and res.first_step == first
    # a file that does not log the switch ran the spec's code, where F2 is always on: re-derived, it fails
    judged = verdict(bad.drop(columns=[F2]))
    assert judged.status == "fail"
    (kelly,) = [c for c in judged.checks if c.id == "rederive.kelly"]
    assert kelly.status == "fail" and kelly.first_step == first


def test_a_partly_broken_resurrection_fails_when_f2_is_inferred_from_the_rows():
    clean = rich_frame().drop(columns=[F2])
    assert "inferred on" in result(clean, "kelly_resurrection").detail
    bad = clean.copy()
    rows = np.flatnonzero((bad[v.FLAG] == 1) & (bad[v.TIMEOUT] == 0))
    k = int(rows[len(rows) // 2])
    bad.loc[k, v.KELLY] = bad.loc[k, v.KELLY_ANALYTIC]
    res = result(bad, "kelly_resurrection")
    assert res.status == "fail" and res.steps == [STEP0 + k]


def test_resurrection_off_in_the_file_passes_with_analytic_kelly():
    bad, _ = broken_resurrection(rich_frame())
    off = bad.assign(**{F2: np.float32(0)})
    assert result(off, "kelly_resurrection").status == "pass"


# ---- non-finite ----------------------------------------------------------------------------
def test_nan_in_popart_sigma_is_flagged_at_its_step_and_blamed_once():
    f = rich_frame()
    k = 777
    f.loc[k, v.SIGMA] = np.nan
    res = result(f, "finite_risk_stack_fields")
    assert res.status == "fail" and res.steps == [STEP0 + k] and res.column == v.SIGMA
    assert "popart.sigma NaN" in res.detail and res.evidence["fields"][v.SIGMA]["NaN"] == [STEP0 + k]
    judged = verdict(f)
    assert [c.id for c in judged.failed] == ["finite_risk_stack_fields"]  # envelope_floor does not blame it too


def test_inf_in_kelly_is_told_apart_from_nan():
    f = rich_frame()
    f.loc[100, v.KELLY] = np.inf
    f.loc[200, v.KELLY] = -np.inf
    res = result(f, "finite_risk_stack_fields")
    assert res.status == "fail" and res.evidence["fields"][v.KELLY] == {"+Inf": [STEP0 + 100], "-Inf": [STEP0 + 200]}


def test_a_field_added_mid_run_passes_and_says_from_when(tmp_path, capsys):
    f = rich_frame()
    late = v.R + "tail.new_field"
    f[late] = np.where(np.arange(len(f)) >= 1200, np.float32(1.5), np.nan).astype(np.float32)
    res = result(f, "finite_regime_fields")
    assert res.status == "pass" and res.violations == 0
    assert f"from step {STEP0 + 1200}" in res.detail and res.evidence["first_recorded"] == {late: STEP0 + 1200}
    # the same as a file in which the key first appears at step 11200
    path = write_jsonl(f.drop(columns=[late]), tmp_path / "late.jsonl")
    lines = path.read_text().splitlines()
    for i in range(1200, len(lines)):
        rec = json.loads(lines[i])
        rec["risk_stack"]["regime"]["tail"]["new_field"] = 1.5
        lines[i] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n")
    assert main(["check", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (fin,) = [c for c in doc["checks"] if c["id"] == "finite_regime_fields"]
    assert fin["status"] == "pass" and fin["steps"] == []


def test_a_null_inside_a_fields_span_is_reported_apart_from_nan(tmp_path, capsys):
    f = rich_frame()
    f.loc[500, v.ENVELOPE] = np.nan  # written as NaN
    path = write_jsonl(f, tmp_path / "holes.jsonl")
    lines = path.read_text().splitlines()
    rec = json.loads(lines[900])
    del rec["risk_stack"]["regime"]["tail"]["recency"]  # the trainer did not log it on this row
    lines[900] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n")
    assert main(["check", str(path), "--json", "--only", "finite_regime_fields"]) == 1
    (fin,) = json.loads(capsys.readouterr().out)["checks"]
    fields = fin["evidence"]["fields"]
    assert fields[v.ENVELOPE] == {"NaN": [STEP0 + 500]} and fields[v.RECENCY] == {"null": [STEP0 + 900]}
    assert fin["steps"] == [STEP0 + 500]  # the null is not a NaN violation


# ---- the clean sample ----------------------------------------------------------------------
def test_every_corrected_check_passes_on_the_clean_sample(capsys):
    assert main(["check", str(SAMPLE), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    by = {c["id"]: c["status"] for c in doc["checks"]}
    for cid in ("kelly_resurrection", "kelly_trap", "finite_regime_fields", "finite_risk_stack_fields"):
        assert by[cid] == "pass", (cid, by[cid])
    assert "fail" not in by.values() and doc["status"] in ("pass", "warn")
    assert all(f["severity"] != "fail" for f in doc["findings"])


@pytest.mark.parametrize("text", ["hello\n", "", "[1, 2, 3]\n", '{"no_step": 1}\n{"no_step": 2}\n'])
def test_check_and_diff_on_a_file_that_is_not_a_diag_exit_2_naming_it(tmp_path, capsys, text):
    path = tmp_path / "notes.jsonl"
    path.write_text(text)
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "notes.jsonl" in err and "not a diag" in err
    assert main(["diff", str(path), str(SAMPLE)]) == 2
    assert "notes.jsonl" in capsys.readouterr().err


def test_a_live_run_that_switches_f2_mid_run_carries_the_switch_per_row():
    """Live: F2 turned off at step 600; the switch column follows, and G17 is judged row by row."""
    from regime_dash import RegimeConfig
    from regime_dash.sources import scenarios
    from regime_dash.runs.live import LiveRun

    run = LiveRun.of_stream(scenarios.make("kelly_trap_run8", steps=1940, accounts=16), RegimeConfig())
    run.step(600)  # into the cycling dead zone (from step 114)
    run.set_config(RegimeConfig(resurrection=False))
    run.step(400)
    f = run.frame()
    assert (f[F2].iloc[:600] == 1).all() and (f[F2].iloc[600:] == 0).all()
    assert (f[v.KELLY].iloc[:600] > 0).any() and (f[v.KELLY].iloc[650:] == 0).all()  # overridden, then not
    res = result(f, "kelly_resurrection")
    assert res.status == "pass" and "switched" in res.detail
