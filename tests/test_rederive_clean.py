"""No false positives: correct runs the project generates re-derive with zero failures.

Every scenario, several seeds and lengths, a fold boundary with the v9 transition,
F2 on and off, the model switches, a run longer than 10,000 steps, the closed-loop
simulator, a diag written to JSON and read back, and the other engines.
"""
from __future__ import annotations

import numpy as np
import pytest

import regime_dash as rd
from regime_dash.diag import catalogue as diag
from regime_dash.sources import scenarios
from regime_dash.analysis.rederive import rederive
from regime_dash.analysis.rederive_formulas import FORMULAS
from regime_dash.core.config import RegimeConfig
from regime_dash.sources.simulator import simulate

ALL = {f.check_id for f in FORMULAS}

RUNS = [  # (scenario, seed, steps, config)
    ("calm", 0, 3000, {}), ("calm", 1, 1500, {}), ("calm", 2, 4500, {"tail_sigma_threshold": 2.0}),
    ("tail_shock", 0, 3000, {}), ("tail_shock", 3, 2000, {"envelope": False}),
    ("tail_shock", 4, 2500, {"envelope_decay_alpha": 0.05}),
    ("kelly_trap_run8", 0, 3000, {}), ("kelly_trap_run8", 1, 3000, {"resurrection": False}),
    ("kelly_trap_run8", 2, 3000, {"resurrection": False, "max_duration": 150.0}),
    ("kelly_trap_run8", 0, 3000, {"duration_across_cycles": True, "max_duration": 300.0}),
    ("kelly_trap_run8", 5, 2000, {"tau_boost": False, "eps_min": 0.1}),
    ("fold_boundary", 0, 3000, {}), ("fold_boundary", 1, 5000, {"transition_steps": 800.0}),
    ("fold_boundary", 2, 3000, {"tail_on_deviation": True}),
    ("adverse_regime", 0, 3000, {}), ("adverse_regime", 6, 2000, {"n_recovery": 40.0}),
    ("recorded", 0, None, {}),
]


def _passes(frame, allowed_skips=()):
    res = rederive(frame).results
    failed = [(r.id, r.detail) for r in res if r.status == "fail"]
    assert failed == []
    skipped = {r.id for r in res if r.status == "skip"}
    assert skipped <= set(allowed_skips), sorted(skipped)
    return res


@pytest.mark.parametrize("name,seed,steps,cfg", RUNS, ids=[f"{r[0]}-{r[1]}-{r[2]}-{len(r[3])}" for r in RUNS])
def test_a_correct_run_has_no_rederivation_failure(name, seed, steps, cfg):
    stream = scenarios.make(name, seed=seed, steps=steps)
    frame = rd.replay(stream, RegimeConfig(**cfg), engine="reference", log_inputs=True)
    res = _passes(frame)
    assert all(r.evidence["compared"] >= len(frame) - 1 for r in res if r.id != "rederive.variance")


def test_a_long_run_over_ten_thousand_steps_on_the_fast_engine_compiled():
    stream = scenarios.make("fold_boundary", seed=7, steps=12_000)
    frame = rd.replay(stream, engine="fast", log_inputs=True, device="cpu")
    assert stream.boundary.any() and (frame[diag.REMAINING] >= 0).any()
    res = rederive(frame, compiled=True).results
    assert [r.id for r in res if r.status != "pass"] == []
    assert min(r.evidence["compared"] for r in res) >= 11_000


def test_a_diag_written_to_json_and_read_back_rederives_exactly(tmp_path):
    stream = scenarios.make("kelly_trap_run8", seed=3, steps=2500)
    frame = rd.replay(stream, engine="reference", log_inputs=True)
    path = diag.write_jsonl(frame, tmp_path / "run.jsonl")
    back = diag.read_jsonl(path)
    _passes(back)


def test_a_trainer_diag_without_inputs_skips_what_it_cannot_recompute_and_names_the_input():
    stream = scenarios.make("tail_shock", steps=2000)
    frame = rd.replay(stream, engine="reference")  # no inputs logged, as a trainer's diag
    res = {r.id: r for r in rederive(frame).results}
    need_inputs = {"rederive.popart_mean", "rederive.popart_var", "rederive.envelope", "rederive.tau_action",
                   "rederive.analytic"}
    assert {i for i, r in res.items() if r.status == "skip"} == need_inputs
    assert res["rederive.envelope"].missing == [diag.INPUT_COLUMNS["batch_max_abs"]]
    assert all(res[i].status == "pass" for i in ALL - need_inputs)


@pytest.mark.parametrize("preset", ["adverse_regime", "fold_boundary"])
def test_the_closed_loop_simulator_run_has_no_failure(preset):
    frame = simulate(preset, steps=3000, seed=0).frame()
    res = rederive(frame).results
    assert [r.id for r in res if r.status == "fail"] == []
    assert sum(r.status == "pass" for r in res) >= 10


def test_a_diag_that_starts_after_step_zero_checks_every_row_but_its_first():
    stream = scenarios.make("calm", steps=2000)
    frame = rd.replay(stream, engine="reference", log_inputs=True).iloc[500:].reset_index(drop=True)
    res = {r.id: r for r in rederive(frame).results}
    assert res["rederive.variance"].status == "skip" and "not logged" in res["rederive.variance"].detail
    assert all(r.status == "pass" for i, r in res.items() if i != "rederive.variance")
    assert res["rederive.duration"].evidence["compared"] == len(frame) - 1


def test_a_gap_in_the_steps_skips_the_row_after_it_only():
    stream = scenarios.make("calm", steps=2000)
    frame = rd.replay(stream, engine="reference", log_inputs=True)
    cut = frame.drop(index=range(1000, 1010)).reset_index(drop=True)
    res = {r.id: r for r in rederive(cut).results}
    assert all(r.status in ("pass", "skip") for r in res.values())
    assert res["rederive.recency"].evidence["compared"] == len(cut) - 1


@pytest.mark.gpu
@pytest.mark.parametrize("engine", ["cuda", "fast"])
@pytest.mark.parametrize("name", ["kelly_trap_run8", "fold_boundary", "tail_shock"])
def test_gpu_engines_runs_rederive_without_a_failure(engine, name):
    stream = scenarios.make(name, steps=3000)
    frame = rd.replay(stream, engine=engine, log_inputs=True, **({"device": "gpu"} if engine == "fast" else {}))
    _passes(frame)
    np.testing.assert_array_equal(frame[diag.SIGMA].to_numpy(),
                                  rd.replay(stream, engine="reference")[diag.SIGMA].to_numpy())


def test_the_loop_run_in_chunks_equals_one_pass_with_a_fault_across_chunk_edges(monkeypatch):
    from regime_dash.analysis import rederive as module

    stream = scenarios.make("fold_boundary", seed=1, steps=5000)
    frame = rd.replay(stream, engine="reference", log_inputs=True)
    frame.loc[2999, diag.RECENCY] += 3  # a divergence on a chunk's last row and its next row
    whole = rederive(frame, compiled=False)
    monkeypatch.setattr(module, "CHUNK_ROWS", 1000)
    parts = rederive(frame, compiled=False)
    assert [r.to_dict() for r in parts.results] == [r.to_dict() for r in whole.results]
    for k in whole.expected:
        np.testing.assert_array_equal(parts.expected[k], whole.expected[k])
    failed = {r.id: r for r in parts.results if r.status == "fail"}
    assert "rederive.recency" in failed and failed["rederive.recency"].first_step == int(frame["step"][2999])


def test_coverage_names_every_logged_field_and_what_an_unchecked_one_needs():
    from regime_dash.analysis import diagnose

    stream = scenarios.make("tail_shock", steps=1500)
    frame = rd.replay(stream, engine="reference")  # a trainer's diag: no inputs logged
    frame["eval.pnl_note"] = np.float32(0)  # a field of no formula
    fields = {e["field"]: e for e in diagnose(frame).to_dict()["coverage"]["fields"]}
    assert set(fields) == set(frame.columns) - {"step", "fold", "phase"}
    assert fields[diag.DURATION]["status"] == "rederived"
    assert fields[diag.ENVELOPE]["status"] == "bounded only"
    assert fields[diag.ENVELOPE]["needs"] == [diag.INPUT_COLUMNS["batch_max_abs"]]
    assert fields[diag.POPART_MEAN]["status"] == "not checkable"
    assert diag.INPUT_COLUMNS["batch_sum"] in fields[diag.POPART_MEAN]["needs"]
    assert fields[diag.FLAT_COUNT]["status"] == "bounded only" and "lots" in fields[diag.FLAT_COUNT]["needs"][0]
    assert fields[diag.COOLDOWN]["status"] == "input"
    assert fields["eval.pnl_note"]["status"] == "not checkable"
