"""Cluster runs as they really are: resumes, several writers, runtime config changes and step anomalies,
each named at its row in ``check --json`` with its evidence (regime_dash.analysis.structure).

Every file is cut from real replays the way a cluster job writes it (tests/cluster_runs.py): a trainer
that checkpoints its ISV every K steps, is preempted and resumes with its ISV restored or not; ranks
writing one file line by line or a buffer at a time; a live run whose config an operator changes; a
step counter that slips. Each file is otherwise correct to the bit.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from cluster_runs import Job, interleaved, preempted, slipped
from regime_dash import RegimeConfig
from regime_dash.analysis import diagnose, verdict
from regime_dash.analysis.structure import analyse
from regime_dash.cli import main
from regime_dash.diag import catalogue as diag
from regime_dash.diag.catalogue import write_jsonl
from regime_dash.engine.rederive import OUTPUTS


@pytest.fixture(scope="module")
def job():
    return Job.of("tail_shock", steps=1500, accounts=32)


def check_json(tmp_path, capsys, frame, *args, name="run.jsonl"):
    path = write_jsonl(frame, tmp_path / name)
    rc = main(["check", str(path), "--json", *args])
    return rc, json.loads(capsys.readouterr().out)


def found(doc, fid):
    return [f for f in doc["findings"] if f["id"] == fid]


def outcome(doc):
    """Every check's (id, status, violations, first step, steps) and every finding but the structure's."""
    checks = [(c["id"], c["status"], c["violations"], c["first_step"], c["steps"]) for c in doc["checks"]]
    findings = [(f["id"], f["severity"], f["steps"]) for f in doc["findings"] if not f["id"].startswith("structure.")]
    return checks, findings


# ---- resumes -----------------------------------------------------------------------------------
@pytest.mark.parametrize("every,preempted_after", [(100, 760), (500, 1230), (250, 250 + 249)])
def test_a_clean_resume_passes_is_named_and_is_judged_as_the_uninterrupted_run(job, tmp_path, capsys, every,
                                                                               preempted_after):
    frame, ckpt = preempted(job, every, preempted_after, restore=True)
    relogged = preempted_after - ckpt
    rc, doc = check_json(tmp_path, capsys, frame)
    (res,) = found(doc, "structure.resume")
    assert rc == 0 and res["severity"] == "info" and res["steps"] == [ckpt + 1]
    assert (f"resumed at step {preempted_after:,} from the checkpoint of step {ckpt:,}; {relogged} rows re-logged "
            "identically") in res["message"]
    ev = res["evidence"]
    assert ev["identical"] and ev["relogged"] == relogged and ev["line"] == preempted_after + 2
    assert doc["summary"]["segments"] == 2 and doc["summary"]["rows"] == len(job.frame)
    _, whole = check_json(tmp_path, capsys, job.frame, name="whole.jsonl")
    assert outcome(doc) == outcome(whole)  # the re-logged rows are judged once: the run itself


def test_a_resume_whose_slots_were_not_restored_fails_at_the_resumed_row_naming_the_slots(job, tmp_path, capsys):
    frame, ckpt = preempted(job, 100, 760, restore=False)
    rc, doc = check_json(tmp_path, capsys, frame)
    (res,) = found(doc, "structure.resume")
    assert rc == 1 and res["severity"] == "fail" and res["steps"] == [ckpt + 1]
    ev = res["evidence"]
    assert ev["continued"] is False and ev["checkpoint_step"] == ckpt and ev["bootstrap"] is True
    logged = job.frame.set_index("step")
    slots = {s["output"]: s for s in ev["slots"]}
    # the state the spec keeps across steps, each back at its bootstrap
    assert {"welford_count", "recency", "envelope", "popart_mean", "popart_var"} <= set(slots)
    for s in ev["slots"]:
        assert s["before"] == pytest.approx(float(logged.loc[ckpt, s["column"]]), rel=0, abs=0)
        assert s["after"] != s["expected"] and s["matches_bootstrap"]
    assert slots["welford_count"]["after"] == 1.0 and slots["recency"]["bootstrap"] == 1e6
    assert f"state did not continue at step {ckpt + 1:,}" in res["message"] and "welford_count" in res["message"]
    # blamed once: the resumed job is judged as the fresh start it is, from the bootstrap
    assert [c["id"] for c in doc["checks"] if c["status"] == "fail"] == []
    assert doc["first_failure"] is None and doc["status"] == "fail"


def test_a_resume_that_restored_its_state_but_re_logged_other_rows_fails_at_the_resumed_row(tmp_path, capsys):
    job = Job.of("calm", steps=1200, accounts=16)
    frame, ckpt = preempted(job, 200, 650, restore=True)
    k = int(np.flatnonzero(frame["step"].to_numpy() == 630)[1])  # the second copy: the rerun saw another batch
    col = diag.INPUT_COLUMNS["batch_sum"]
    frame.loc[k, col] = np.float32(frame.loc[k, col] * np.float32(1.5))
    rc, doc = check_json(tmp_path, capsys, frame)
    (res,) = found(doc, "structure.resume")
    assert res["severity"] == "fail" and res["steps"] == [ckpt + 1]
    assert res["evidence"]["continued"] is True
    assert res["evidence"]["first_difference"] == {"step": 630, "columns": [col]}


def test_several_resumes_each_named(tmp_path, capsys):
    job = Job.of("fold_boundary", steps=2400, accounts=16, seed=2)
    first = job.frame[job.frame["step"] <= 1000]  # checkpoints every 300 steps: preempted after 1000, then 1800
    second = job.resumed_rows(900, restore=True)
    frame = pd.concat([first, second[second["step"] <= 1800], job.resumed_rows(1500, restore=True)],
                      ignore_index=True)
    rc, doc = check_json(tmp_path, capsys, frame)
    res = found(doc, "structure.resume")
    assert rc == 0 and [f["steps"][0] for f in res] == [901, 1501] and doc["summary"]["segments"] == 3
    assert [f["evidence"]["relogged"] for f in res] == [100, 300] and all(f["severity"] == "info" for f in res)
    _, whole = check_json(tmp_path, capsys, job.frame, name="whole.jsonl")
    assert outcome(doc) == outcome(whole)


# ---- writers -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def two_ranks():
    return Job.of("tail_shock", steps=800, accounts=32, seed=0), Job.of("tail_shock", steps=800, accounts=32, seed=7)


@pytest.mark.parametrize("block", [1, 37])
def test_two_writers_interleaved_without_a_field_are_named_at_the_first_step_logged_twice(two_ranks, tmp_path,
                                                                                           capsys, block):
    a, b = two_ranks
    frame = interleaved(a.frame.iloc[50:], b.frame.iloc[50:], block)  # both logging from step 50
    rc, doc = check_json(tmp_path, capsys, frame)
    (w,) = found(doc, "structure.writers")
    assert rc == 1 and w["severity"] == "fail" and w["steps"] == [50]
    assert w["message"].startswith("Two or more writers interleaved from step 50")
    assert w["evidence"]["line"] == block + 1 and not found(doc, "structure.resume")
    rc, doc = check_json(tmp_path, capsys, frame, "--split-writers")
    assert rc == 0 and [r["rows"] for r in doc["writers"]] == [750, 750]
    assert doc["structure"]["writer_field"] == "content"


def test_writers_split_by_a_rank_field_each_judged_as_its_own_run(two_ranks, tmp_path, capsys):
    a, b = two_ranks
    bad = b.frame.copy()
    bad.loc[300, diag.POPART_MEAN] = np.float32(bad.loc[300, diag.POPART_MEAN] * np.float32(2))
    frame = interleaved(a.frame, bad, 5, rank="rank")
    rc, doc = check_json(tmp_path, capsys, frame)
    assert rc == 1  # rank 1 fails
    assert [(r["writer"], r["rows"], r["status"] == "fail") for r in doc["writers"]] == [("0", 800, False),
                                                                                          ("1", 800, True)]
    assert doc["writers"][1]["first_failure"] == {"id": "rederive.popart_mean", "step": 300}
    (w,) = found(doc, "structure.writers")
    assert w["severity"] == "info" and w["evidence"]["by"] == "rank" and w["evidence"]["judged"] == "0"
    assert outcome(doc) == outcome(check_json(tmp_path, capsys, a.frame, name="a.jsonl")[1])
    rc, one = check_json(tmp_path, capsys, frame, "--writer", "1")
    assert rc == 1 and outcome(one) == outcome(check_json(tmp_path, capsys, bad, name="b.jsonl")[1])
    path = write_jsonl(frame, tmp_path / "ranks.jsonl")
    assert main(["check", str(path), "--writer", "9"]) == 2
    assert "no writer '9'" in capsys.readouterr().err


# ---- runtime config changes --------------------------------------------------------------------
def live_frame(change_at: int, **config):
    from regime_dash.runs.live import LiveRun
    from regime_dash.sources import scenarios

    run = LiveRun.of_stream(scenarios.make("tail_shock", steps=1500, accounts=16), RegimeConfig())
    run.step(change_at)
    if config:
        run.set_config(RegimeConfig(**config))
    run.step(1500 - change_at)
    return run.frame()


@pytest.mark.parametrize("field,new", [("eps_max", 0.4), ("tau_boost_factor", 2.0), ("resurrection", False)])
def test_a_runtime_config_change_the_kernels_followed_passes_re_derivation_and_is_named(tmp_path, capsys, field,
                                                                                          new):
    frame = live_frame(600, **{field: new})
    rc, doc = check_json(tmp_path, capsys, frame)
    (c,) = found(doc, "structure.config_change")
    assert c["severity"] == "info" and c["steps"] == [600] and c["evidence"]["followed"] is True
    assert "The kernels followed it" in c["message"]
    (ch,) = c["evidence"]["changes"]
    assert ch["field"] == field and ch["new"] == pytest.approx(float(np.float32(new)))
    assert ch["old"] == pytest.approx(float(np.float32(getattr(RegimeConfig(), field))))
    assert all(x["status"] != "fail" for x in doc["checks"] if x["id"].startswith("rederive."))


@pytest.mark.parametrize("field,new,check_id", [("eps_max", 0.4, "rederive.live"),
                                                ("tau_boost_factor", 2.0, "rederive.tau_min_effective")])
def test_a_logged_config_the_kernels_did_not_follow_fails_at_its_first_row(tmp_path, capsys, field, new, check_id):
    frame = live_frame(600)
    col = diag.LOGGED_CONFIG[field]
    row = int(np.flatnonzero(frame["step"].to_numpy() == 600)[0])
    frame.loc[row:, col] = np.float32(new)  # logged, while the kernels ran the old value
    rc, doc = check_json(tmp_path, capsys, frame)
    (c,) = found(doc, "structure.config_change")
    rederived = next(x for x in doc["checks"] if x["id"] == check_id)
    assert rc == 1 and rederived["status"] == "fail" and rederived["first_step"] == 600
    assert c["severity"] == "fail" and c["steps"] == [600] and c["evidence"]["failing"] == {check_id: 600}


def test_a_config_change_at_a_fold_boundary_is_named_as_such():
    from regime_dash.runs.live import LiveRun
    from regime_dash.sources import scenarios

    run = LiveRun.of_stream(scenarios.make("tail_shock", steps=1200, accounts=16), RegimeConfig())
    run.step(500)
    run.cross_boundary()
    run.set_config(RegimeConfig(eps_min=0.1))
    run.step(700)
    (c,) = [f for f in verdict(run.frame()).findings if f.id == "structure.config_change"]
    assert c.evidence["where"] == "at a fold boundary" and "(at a fold boundary)" in c.message and c.steps == [500]


# ---- step anomalies --------------------------------------------------------------------------------
def test_a_step_counter_that_repeats_a_step_and_later_skips_one_is_named_at_the_repeat(job, tmp_path, capsys):
    frame = slipped(job.frame, 400, 100)
    rc, doc = check_json(tmp_path, capsys, frame)
    (s,) = found(doc, "structure.step_repeat")
    assert s["severity"] == "warn" and s["steps"] == [400] and s["spans"] == [[400, 500]]
    assert s["evidence"]["skipped"] == 500 and s["evidence"]["rows_between"] == 100
    assert "labelled one step low" in s["message"]
    assert not found(doc, "structure.step_skip") and not found(doc, "structure.resume")
    assert rc == 0 and [c["id"] for c in doc["checks"] if c["status"] == "fail"] == []


def test_a_step_going_back_without_a_resume(job, tmp_path, capsys):
    frame = job.frame.copy()
    step = frame["step"].to_numpy().copy()
    step[900:] -= 20  # the counter jumps back; the state goes on
    frame["step"] = step
    rc, doc = check_json(tmp_path, capsys, frame)
    (s,) = found(doc, "structure.step_back")
    assert s["steps"] == [880] and s["evidence"]["previous_step"] == 899 and not found(doc, "structure.resume")


@pytest.mark.parametrize("every", [97, 250])
def test_steps_not_logged_and_a_field_missing_on_some_lines_are_named_with_a_count_and_a_pattern(
        job, tmp_path, capsys, every):
    frame = job.frame.drop(index=[333, 334, 1001]).reset_index(drop=True)
    path = write_jsonl(frame, tmp_path / "gaps.jsonl")
    lines = path.read_text().splitlines()
    for i in range(every - 1, len(lines), every):
        rec = json.loads(lines[i])
        del rec["risk_stack"]["regime"]["tail"]["recency"]
        lines[i] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n")
    main(["check", str(path), "--json"])
    doc = json.loads(capsys.readouterr().out)
    (gap,) = found(doc, "structure.step_skip")
    assert gap["severity"] == "warn" and gap["steps"] == [335, 1002] and gap["evidence"]["missing_steps"] == 3
    (miss,) = found(doc, "structure.field_missing")
    n = len(range(every - 1, len(lines), every))
    assert miss["evidence"]["lines"] == n and miss["evidence"]["first_line"] == every
    assert f"every {every}th line from line {every}" in miss["message"] and miss["column"] == diag.RECENCY


def test_a_diag_logged_every_k_steps_is_a_sampled_run(job):
    (gap,) = [f for f in verdict(job.frame.iloc[::10].reset_index(drop=True)).findings
              if f.id.startswith("structure.")]
    assert gap.id == "structure.step_skip" and gap.severity == "info" and gap.evidence["every"] == 10


# ---- coverage, the store, ingest, the incremental verdict ------------------------------------------
def test_coverage_says_which_structure_checks_ran_and_why_any_did_not(job, tmp_path, capsys):
    _, doc = check_json(tmp_path, capsys, job.frame)
    cov = doc["coverage"]["structure"]
    assert set(cov) == {"segments", "writers", "config_continuity", "step_continuity", "fields"}
    assert all(c["ran"] for c in cov.values())
    bare = job.frame[["step", diag.KELLY, diag.FLAG]]
    st = analyse(bare)
    assert st.coverage["config_continuity"] == {"ran": False, "why": "no config column logged",
                                                 "detail": "0 config column(s) compared across rows"}
    assert st.coverage["fields"]["ran"] is False and "NaN" in st.coverage["fields"]["why"]


def test_a_stored_run_is_read_in_the_files_order(job, tmp_path, capsys):
    frame, ckpt = preempted(job, 100, 760, restore=False)
    path = write_jsonl(frame, tmp_path / "resumed.jsonl")
    store = str(tmp_path / "store")
    assert main(["ingest", str(path), "--store", store, "--name", "resumed", "--json"]) == 0
    (ing,) = json.loads(capsys.readouterr().out)
    assert ing["rows"] == len(frame)  # every line kept
    assert ing["structure"]["goes_back"] == 1 and ing["structure"]["first"]["line"] == 762
    main(["check", "resumed", "--store", store, "--json"])
    stored = json.loads(capsys.readouterr().out)
    main(["check", str(path), "--json"])
    direct = json.loads(capsys.readouterr().out)
    assert stored["findings"] == direct["findings"] and outcome(stored) == outcome(direct)
    from regime_dash.runs.run_table import table
    from regime_dash.store.open import open_store

    (row,) = table(open_store(store))
    assert row["summary"]["segments"] == 2 and row["summary"]["writers"] == 1


def test_the_incremental_verdict_of_a_resumed_run_equals_the_full_one(job):
    from test_incremental import assert_equal_at_cuts

    frame, ckpt = preempted(job, 100, 760, restore=False)
    inc = assert_equal_at_cuts(frame, (300, 761, 762, 790, 900))
    assert any(f.id == "structure.resume" and f.severity == "fail" for f in inc.current.findings)
    clean, _ = preempted(job, 100, 760, restore=True)
    assert_equal_at_cuts(clean, (300, 761, 770, 830, 1000))
    assert_equal_at_cuts(live_frame(600, eps_max=0.4), (100, 599, 600, 601, 1200))


def test_each_divergent_slot_is_one_the_re_derivation_knows(job):
    frame, _ = preempted(job, 100, 760, restore=False)
    (res,) = [f for f in diagnose(frame).findings if f.id == "structure.resume"]
    slots = dict(OUTPUTS)
    assert all(slots[s["output"]] == s["slot"] for s in res.evidence["slots"])


# ---- no false positives ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["calm", "tail_shock", "kelly_trap_run8", "fold_boundary", "adverse_regime",
                                  "recorded"])
def test_a_clean_replay_of_every_preset_has_no_structure_finding(name):
    import regime_dash as rd
    from regime_dash.sources import scenarios

    frame = rd.replay(scenarios.make(name), rd.RegimeConfig(), engine="fast", log_inputs=True)
    st = analyse(frame)
    assert st.findings == [] and st.summary() == {"segments": 1, "resumes": 0, "writers": 1}
    assert st.view.n == len(frame) and st.view.breaks is None and st.view.starts is None


def test_the_committed_sample_has_no_structure_finding(capsys):
    from pathlib import Path

    sample = Path(__file__).resolve().parent.parent / "data" / "samples" / "diag.jsonl"
    main(["check", str(sample), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert not [f for f in doc["findings"] if f["id"].startswith("structure.")]
    assert all(c["ran"] for c in doc["coverage"]["structure"].values())


def test_places_in_words():
    from regime_dash.analysis.structure.lines import ordinal, pattern

    assert [ordinal(k) for k in (1, 2, 3, 4, 11, 12, 13, 21, 22, 500)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "500th"]
    assert pattern(np.array([500, 1000, 1500])) == "every 500th line from line 500 (3 lines)"
    assert pattern(np.array([40, 41, 42])) == "lines 40–42"
    assert pattern(np.array([7])) == "line 7"
    assert pattern(np.array([3, 10, 90]), "step") == "3 steps from step 3 to step 90"
