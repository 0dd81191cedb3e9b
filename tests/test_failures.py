"""A verdict's failures in check's words, and one explained (regime_dash.analysis.texts, .failures),
the replay figure and the markers a click names (regime_dash.figures.overlay)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import regime_dash as rd
from regime_dash.diag import catalogue as diag
from regime_dash.sources import scenarios
from regime_dash.diag.aliases import canonical_frame
from regime_dash.analysis import diagnose, verdict
from regime_dash.analysis.failures import (OUTPUT_READ, READ_NOW, READ_PREV, explain, failures, find_item,
                                           marked, source_of)
from regime_dash.analysis.invariants import CheckResult
from regime_dash.analysis.rederive_formulas import BY_OUTPUT, PREV
from regime_dash.analysis.texts import check_line, check_message, finding_line, finding_message
from regime_dash.analysis.verdict import Verdict
from regime_dash.cli.check import report_lines
from regime_dash.usecases.check import load_target
from regime_dash.errors import ValidationError
from helpers import planted_diag

STEP = 700


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """``(frame read back from the planted diag file, the clean frame)``."""
    path, clean = planted_diag(tmp_path_factory.mktemp("planted") / "planted.jsonl", step=STEP)
    frame, _ = load_target(str(path))
    return canonical_frame(frame), clean


def test_check_prints_its_lines_through_the_texts_the_dashboard_shows():
    frame = rd.replay(scenarios.make("kelly_trap_run8", steps=3000, accounts=16), rd.RegimeConfig())
    report = diagnose(frame)
    assert report.verdict.failed and report.verdict.failing_findings  # kelly_trap, timeout_unreachable
    lines = report_lines(report, {"file": "trap.jsonl"})
    width = max(len(c.id) for c in report.checks)
    for c in report.checks:
        line = check_line(c, width)
        assert line in lines
        assert line.split(None, 2)[2].strip() == check_message(c)  # status, id, then the message
    for f in report.findings:
        assert finding_line(f) in lines
        assert finding_line(f).endswith(finding_message(f)) and f.message in finding_message(f)
    trap = next(c for c in report.checks if c.id == "kelly_trap")
    assert check_message(trap).startswith(f"{trap.violations} violation(s) first step {trap.first_step}")


def test_failures_are_the_failed_checks_and_the_findings_of_severity_fail():
    frame = rd.replay(scenarios.make("kelly_trap_run8", steps=3000, accounts=16), rd.RegimeConfig())
    vd = verdict(frame)
    got = failures(vd)
    assert [(x.kind, x.id) for x in got] == ([("check", c.id) for c in vd.failed]
                                             + [("finding", f.id) for f in vd.findings if f.severity == "fail"])
    finding = next(x for x in got if x.kind == "finding")
    f = next(f for f in vd.findings if f.id == finding.id)
    assert finding.first_step == f.spans[0][0] and finding.message == finding_message(f)
    assert {x.id for x in marked(vd)} >= {x.id for x in got} | {f.id for f in vd.findings}
    assert find_item(vd, "no_such_check") is None


def test_source_of_tells_the_core_a_module_and_the_rest_apart():
    assert source_of("rederive.sigma") == "rederive"
    assert source_of("sp14.rederive.var_ema") == "module"
    assert source_of("envelope_floor") == source_of("timeout_unreachable") == "bound"


def test_a_planted_value_is_explained_at_its_step(planted):
    frame, clean = planted
    vd = verdict(frame)
    assert [x.id for x in failures(vd)] == ["rederive.popart_mean"]
    item = find_item(vd, "rederive.popart_mean")
    e = explain(frame, item, STEP)
    row = int(np.flatnonzero(clean["step"].to_numpy() == STEP)[0])
    right = float(np.float32(clean[diag.POPART_MEAN].iloc[row]))
    wrong = float(np.float32(frame[diag.POPART_MEAN].iloc[row]))
    assert wrong != right
    # the formula's value is what the correct replay logged; the log holds the planted one
    assert e.source == "rederive" and e.expected == right and e.logged == wrong
    assert e.formula == BY_OUTPUT["popart_mean"].text and e.filled.startswith(e.formula)
    assert f"expected {right:.9g}, logged {wrong:.9g}" in e.filled
    # the replay runs free from the logged state before its window: it follows the correct run,
    # and parts from the log exactly at the planted step
    assert e.split_step == STEP
    r = e.replay.set_index("step")
    assert r.index.min() == STEP - 200 and r.index.max() == STEP + 200
    assert r.loc[STEP, "logged"] == np.float32(wrong) and r.loc[STEP, "replayed"] == np.float32(right)
    same = r.drop(index=STEP)
    assert (same["logged"] == same["replayed"]).all()
    # the rows: the output and every field the formula reads first, each with its use
    f = BY_OUTPUT["popart_mean"]
    uses = dict(zip(e.rows["field"], e.rows["use"]))
    read = {c for c, _ in f.reads} | set(f.needs)
    assert uses[diag.POPART_MEAN] == OUTPUT_READ
    assert all(uses[c] in (READ_NOW, READ_PREV, OUTPUT_READ) for c in read)
    assert list(e.rows["field"][:len(read)]) == [diag.POPART_MEAN] + [c for c in uses if c in read
                                                                     and c != diag.POPART_MEAN]
    assert (e.rows["use"][len(read):] == "").all() and len(e.rows) == frame.shape[1]
    at = e.rows.set_index("field")
    assert at.loc[diag.POPART_MEAN, "t"] == f"{wrong:.9g}" and at.loc["step", "t−1"] == str(STEP - 1)


def test_a_module_item_is_explained_from_its_evidence_without_a_replay():
    frame = pd.DataFrame({"step": np.arange(30), "m.gate": np.linspace(0, 1, 30, dtype=np.float32),
                          "m.alpha": np.full(30, 0.5, dtype=np.float32)})
    divs = [{"step": s, "expected": 0.25, "logged": 0.75, "boundary": False,
             "inputs": {"m.gate (t−1)": 0.125, "m.alpha": 0.5}} for s in (10, 20)]
    check = CheckResult("m.rederive.gate", "fail", 2, 10, [10, 20], "2 of 30 rows differ", column="m.gate",
                        evidence={"formula": "gate_t = gate_{t−1}·α", "divergences": divs})
    (item,) = failures(Verdict([check], []))
    e = explain(frame, item, 18)  # not a divergence: the nearest one listed is shown
    assert e.source == "module" and e.step == 20 and e.replay is None and e.split_step is None
    assert e.expected == 0.25 and e.logged == 0.75
    assert e.filled == "gate_t = gate_{t−1}·α; with gate (t−1)=0.125, alpha=0.5: expected 0.25, logged 0.75"
    assert "Step 18 is not among the divergences" in e.note and "none is drawn" in e.note
    uses = dict(zip(e.rows["field"], e.rows["use"]))
    assert uses["m.gate"] == OUTPUT_READ and uses["m.alpha"] == READ_NOW and uses["step"] == ""
    assert e.rows.set_index("field").loc["step", "t"] == "20"
    bare = failures(Verdict([CheckResult("m.rederive.gate", "fail", 1, 3, [3], "x", column="m.gate")], []))[0]
    with pytest.raises(ValidationError, match="no divergences"):
        explain(frame, bare, 3)


def test_a_bound_check_shows_its_rows_and_a_step_off_the_run_is_refused(planted):
    frame, _ = planted
    f = frame.copy()
    f.loc[f["step"] == 300, diag.SIGMA] = 0.0  # below the envelope: envelope_floor fails
    vd = verdict(f)
    item = find_item(vd, "envelope_floor")
    e = explain(f, item, 300)
    assert e.source == "bound" and e.formula is None and e.replay is None and "recomputes no formula" in e.note
    assert e.rows["field"].iloc[0] == diag.SIGMA and e.rows["use"].iloc[0] == "checked"
    assert e.rows.set_index("field").loc[diag.SIGMA, "t"] == "0"
    with pytest.raises(ValidationError) as err:
        explain(f, item, 10 ** 7)
    assert err.value.value == 10 ** 7


def test_markers_name_their_item_and_run_for_a_click(planted):
    from regime_dash.figures.signals import signal_panels
    from regime_dash.figures.overlay import overlay

    frame, _ = planted
    fig = overlay(signal_panels({"planted": frame}), {"planted": verdict(frame)})
    (marker,) = [t for t in fig.data if t.name == "verdict:rederive.popart_mean"]
    assert marker.meta == {"verdict": "rederive.popart_mean", "run": "planted"} and STEP in list(marker.x)


def test_the_replay_figure_draws_both_lines_and_the_split(planted):
    from regime_dash.figures.overlay import provenance_figure

    frame, _ = planted
    e = explain(frame, find_item(verdict(frame), "rederive.popart_mean"), STEP)
    fig = provenance_figure(e.replay, e.step, e.split_step, diag.POPART_MEAN)
    logged, replayed, ring = fig["data"]
    assert (logged["name"], replayed["name"]) == ("logged", "replayed")
    assert np.array_equal(logged["y"], e.replay["logged"].to_numpy(np.float64), equal_nan=True)
    assert np.array_equal(replayed["y"], e.replay["replayed"].to_numpy(np.float64), equal_nan=True)
    assert ring["x"] == [STEP] and ring["y"] == [e.logged]
    (split,) = fig["layout"]["shapes"]
    assert split["x0"] == split["x1"] == STEP and fig["layout"]["annotations"][0]["text"] == f"split at {STEP}"
    assert "shapes" not in provenance_figure(e.replay, e.step, None, diag.POPART_MEAN)["layout"]
