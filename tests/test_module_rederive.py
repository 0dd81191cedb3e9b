"""Module re-derivation: every re-derived formula of SP14, SP18 and Pearl C caught at its first wrong step.

Fault injection runs a COPY of the module's source with one formula changed (the
source text is edited and executed in a fresh module object; the real module is
never touched), replays with it, and checks that the re-derivation flags that
formula's outputs from the first row where the faulty replay leaves the correct
one, and nothing else. A perturbed logged value is flagged at its step and field
alone. The demos and other correct runs give no re-derivation failure.
"""
from __future__ import annotations

import inspect
import sys
import types

import numpy as np
import pytest

from regime_dash.analysis.invariants import CheckOptions
from regime_dash.modules import MODULES
from tests.helpers import by_id


def copy_of(module, edits=(), **names) -> types.ModuleType:
    """A fresh module object running ``module``'s source with each ``(old, new)`` edit made (each ``old``
    found exactly once), then ``names`` bound in it (functions look their globals up when called)."""
    src = inspect.getsource(module)
    for old, new in edits:
        assert src.count(old) == 1, f"{old!r} occurs {src.count(old)} times in {module.__name__}"
        src = src.replace(old, new)
    copy = types.ModuleType(module.__name__ + "__faulty_copy")
    sys.modules[copy.__name__] = copy  # dataclasses look their module up while the class is made
    try:
        exec(compile(src, f"<copy of {module.__name__}>", "exec"), copy.__dict__)
    finally:
        del sys.modules[copy.__name__]
    for k, v in names.items():
        assert hasattr(copy, k), k
        setattr(copy, k, v)
    return copy


def rederive_failures(module, frame, options=None) -> dict:
    return {r.id: r for r in module.invariants(frame, options) if ".rederive." in r.id and r.status == "fail"}


def first_differing_step(good, bad, column):
    a, b = good[column].to_numpy(np.float64), bad[column].to_numpy(np.float64)
    differ = ~((a == b) | (np.isnan(a) & np.isnan(b)))
    assert differ.any(), f"the perturbation left {column} unchanged: pick a stream that exercises it"
    i = int(np.flatnonzero(differ)[0])
    return i, int(good["step"].iloc[i])


def assert_caught(module, good, bad, expect: dict[str, str]):
    """``expect`` maps each check id that must fail to its column; no other re-derivation check fails."""
    failed = rederive_failures(module, bad)
    assert set(failed) == set(expect), {k: v.detail for k, v in failed.items()}
    for cid, column in expect.items():
        i, step = first_differing_step(good, bad, column)
        res = failed[cid]
        assert res.first_step == step, (cid, res.first_step, step)
        first = res.evidence["divergences"][0]
        assert first["step"] == step
        assert first["logged"] == float(bad[column].iloc[i])
        assert first["expected"] == float(good[column].iloc[i])  # the correct replay's value, exactly
        assert first["inputs"] and set(res.evidence) >= {"formula", "kernel", "compared", "tolerance_ulps"}
        assert res.spans and res.spans[0][0] == step


def corrupt(frame, column, row, value):
    out = frame.copy()
    out.attrs = dict(frame.attrs)
    v = out[column].to_numpy().copy()
    v[row] = value
    out[column] = v
    return out


# ---- SP14 ---------------------------------------------------------------------------------------
SP14 = MODULES["sp14_alpha_grad_gate"]


def sp14_faulty_frame(stream, config, edits):
    from regime_dash.modules.sp14_alpha_grad_gate import replay, twin

    bad_twin = copy_of(twin, edits)
    return copy_of(replay, replay_twin=bad_twin.replay_twin).run(stream, config, "reference")


SP14_FAULTS = {
    "k_steepness_multiplies_the_variance": ([("k_base / (ONE + var / var_ref)", "k_base / (ONE + var * var_ref)")],
                                            {"k_aux": "k_aux", "k_q": "k_q"}),
    "schmitt_opens_without_hysteresis": ([("open_th = target + hysteresis", "open_th = target")],
                                         {"gate1_state": "gate1_state"}),
    "gate1_sign": ([("k_aux * (aux - target)", "k_aux * (target - aux)")], {"gate1": "gate1"}),
    "gate2_sign": ([("k_q * (HALF - q_dis)", "k_q * (q_dis - HALF)")], {"gate2": "gate2"}),
    "alpha_raw_drops_warmup": ([("return gate1 * gate2 * F32(warmup_gate)", "return gate1 * gate2")],
                               {"alpha_raw": "alpha_raw"}),
    "variance_ema_forgets_no_old_weight": ([("(ONE - var_ema_alpha) * var_alpha", "var_alpha")],
                                           {"var_alpha": "var_alpha"}),
    "beta_ignores_its_reference": ([("beta_base * (ONE + var_alpha / var_ref_beta)", "beta_base * (ONE + var_alpha)")],
                                   {"beta": "beta"}),
    "smoothing_weights_swapped": ([("beta * alpha_prev + (ONE - beta) * raw", "beta * raw + (ONE - beta) * alpha_prev")],
                                  {"alpha_smoothed": "alpha_smoothed"}),
}


@pytest.mark.parametrize("fault", list(SP14_FAULTS))
def test_sp14_each_wrong_formula_is_caught_at_its_first_step_and_alone(fault):
    from regime_dash.modules.sp14_alpha_grad_gate.replay import COLUMNS as C

    edits, outputs = SP14_FAULTS[fault]
    stream = SP14.demo_stream(seed=1, steps=900)
    config = SP14.config_type(var_aux_producer=True)  # var_aux moves, so k_aux's formula is exercised
    good = SP14.replay(stream, config)
    assert not rederive_failures(SP14, good)
    bad = sp14_faulty_frame(stream, config, edits)
    assert_caught(SP14, good, bad, {f"sp14.rederive.{o}": C[c] for o, c in outputs.items()})


def test_sp14_the_gate1_sign_fault_passes_every_bounds_check_but_not_the_rederivation():
    stream = SP14.demo_stream(seed=0, steps=1500)
    bad = sp14_faulty_frame(stream, SP14.config_type(), SP14_FAULTS["gate1_sign"][0])
    res = by_id(SP14.invariants(bad))
    assert all(res[i].status == "pass" for i in ("sp14.alpha_raw_bounded", "sp14.k_floor", "sp14.beta_bounds",
                                                 "sp14.schmitt_hysteresis", "sp14.rate_limiter"))
    assert res["sp14.rederive.gate1"].status == "fail"
    assert "sigmoid" in res["sp14.rederive.gate1"].detail


@pytest.mark.parametrize("name", ["k_aux", "k_q", "gate1_state", "gate1", "gate2", "alpha_raw", "var_alpha",
                                  "beta", "alpha_smoothed"])
def test_sp14_one_perturbed_logged_value_is_flagged_at_its_step_and_field_alone(name):
    from regime_dash.modules.sp14_alpha_grad_gate.replay import COLUMNS as C

    good = SP14.replay(SP14.demo_stream(seed=2, steps=600), SP14.config_type(var_aux_producer=True))
    row = 321
    v = np.float32(good[C[name]].iloc[row])
    bad = corrupt(good, C[name], row, np.float32(1.0) - v if name == "gate1_state" else np.nextafter(v, np.float32(9)))
    failed = rederive_failures(SP14, bad)
    assert list(failed) == [f"sp14.rederive.{name}"]
    assert failed[f"sp14.rederive.{name}"].steps == [int(good["step"].iloc[row])]


def test_sp14_a_missing_constant_is_a_skip_that_names_it():
    frame = SP14.replay(SP14.demo_stream(seed=0, steps=50)).drop(columns=["sp14.config.var_ema_alpha"])
    frame.attrs = {}
    res = by_id(SP14.invariants(frame))["sp14.rederive.var_alpha"]
    assert res.status == "skip" and "sp14.config.var_ema_alpha" in res.detail


def test_sp14_ulps_loosen_only_the_multiply_add_formulas():
    from regime_dash.modules.sp14_alpha_grad_gate.replay import COLUMNS as C

    good = SP14.replay(SP14.demo_stream(seed=2, steps=300))
    for name, fma in (("alpha_smoothed", True), ("beta", False)):
        v = np.float32(good[C[name]].iloc[100])
        bad = corrupt(good, C[name], 100, np.nextafter(v, np.float32(9)))
        loose = rederive_failures(SP14, bad, CheckOptions(rederive_ulps=1))
        assert (f"sp14.rederive.{name}" in loose) is not fma


# ---- no false positives -------------------------------------------------------------------------
SP14_CONFIGS = [{}, {"var_aux_producer": True}, {"warmup_steps": 0, "hysteresis": 0.0},
                {"variance_ref_beta": 1e-4, "k_base_aux": 35.0}]


@pytest.mark.parametrize("seed,steps", [(0, None), (1, 257), (5, 3000)])
def test_sp14_correct_runs_give_no_rederivation_failure(seed, steps):
    for cfg in SP14_CONFIGS:
        frame = SP14.replay(SP14.demo_stream(seed, steps), SP14.config_type(**cfg))
        res = [r for r in SP14.invariants(frame) if ".rederive." in r.id]
        assert len(res) == 9 and all(r.status == "pass" for r in res), [(r.id, r.detail) for r in res]


def test_sp14_coverage_names_every_logged_field():
    from regime_dash.modules.sp14_alpha_grad_gate import coverage

    frame = SP14.replay(SP14.demo_stream(steps=20))
    cov = coverage(frame)
    assert [c["field"] for c in cov] == [c for c in frame.columns if c not in ("step", "fold", "phase")]
    status = {c["field"]: c["status"] for c in cov}
    assert status["sp14.gate1.value"] == "rederived" and status["sp14.inputs.var_aux"] == "input"
    ids = {i for c in cov for i in c["checks"]}
    assert ids <= set(SP14.check_ids)
    assert {r.id for r in SP14.invariants(frame) if ".rederive." in r.id} <= ids


# ---- Pearl C ------------------------------------------------------------------------------------
PEARL = MODULES["pearl_c"]


def pearl_faulty_frame(stream, config, where, edits):
    """Replay Pearl C with one formula changed in a copy of ``where`` (``twin``, ``f32`` or ``config``)."""
    from regime_dash.modules import f32
    from regime_dash.modules.pearl_c import config as config_mod
    from regime_dash.modules.pearl_c import replay, twin

    if where == "config":
        config = copy_of(config_mod, edits).PearlCConfig(**config.as_dict())
        return copy_of(replay).run(stream, config, "reference")
    if where == "f32":
        bad_twin = copy_of(twin, pearls_ad_update=copy_of(f32, edits).pearls_ad_update)
    else:
        bad_twin = copy_of(twin, edits)
    return copy_of(replay, twin=bad_twin).run(stream, config, "reference")


PEARL_FAULTS = {
    "count_drops_a_block": ("twin", [("np.sum(per_block_counts, dtype=np.int64)", "np.sum(per_block_counts[1:], dtype=np.int64)")],
                            {"count": "engage.count"}),
    "block_max_is_the_min": ("twin", [(".max(axis=-1)", ".min(axis=-1)")], {"block_max": "engage.block_max"}),
    "grid_rounds_up_always": ("config", [("max(1, -(-n // block))", "max(1, n // block + 1)")],
                              {"blocks": "engage.blocks"}),
    "rate_over_n_plus_one": ("twin", [("F32(total) / F32(n_params)", "F32(total) / F32(n_params + 1)")],
                             {"rate": "rate"}),
    "deficit_sign": ("twin", [("return rate - TARGET_RATE", "return TARGET_RATE - rate")],
                     {"rate_deficit": "rate_deficit"}),
    "bump_on_negative_ema": ("twin", [("return ema > 0", "return ema < 0")], {"force_bump": "force_bump"}),
    "count_steps_by_two": ("f32", [("return count + ONE", "return count + F32(2.0)")], {"ad_count": "ad.count"}),
    "welford_mean_over_count_plus_one": ("f32", [("return mean + d / count", "return mean + d / (count + ONE)")],
                                         {"ad_obs_mean": "ad.obs_mean", "ad_diff_mean": "ad.diff_mean"}),
    "welford_m2_about_the_old_mean": ("f32", [("return m2 + d * (x - mean)", "return m2 + d * (x - mean_before)")],
                                      {"ad_obs_m2": "ad.obs_m2", "ad_diff_m2": "ad.diff_m2"}),
    "difference_reversed": ("f32", [("diff = obs - prev\n    nd = count - ONE", "diff = prev - obs\n    nd = count - ONE")],
                            {"ad_diff_mean": "ad.diff_mean"}),
    "noise_not_halved": ("f32", [("noise = var_diff * F32(0.5)", "noise = var_diff")], {"ema_alpha": "ema_alpha"}),
    "ema_weights_swapped": ("f32", [("return ema + alpha * (obs - ema)", "return obs + alpha * (ema - obs)")],
                            {"rate_deficit_ema": "rate_deficit_ema"}),
    "prev_obs_halved": ("f32", [("return F32(obs)\n", "return F32(obs) * F32(0.5)\n")],
                        {"ad_prev_obs": "ad.prev_obs"}),
}


@pytest.mark.parametrize("fault", list(PEARL_FAULTS))
def test_pearl_c_each_wrong_formula_is_caught_at_its_first_step_and_alone(fault):
    where, edits, outputs = PEARL_FAULTS[fault]
    stream = PEARL.demo_stream(seed=1, steps=300)
    config = PEARL.config_type()
    good = PEARL.replay(stream, config)
    assert not rederive_failures(PEARL, good)
    bad = pearl_faulty_frame(stream, config, where, edits)
    assert_caught(PEARL, good, bad, {f"pearl_c.rederive.{o}": "pearl_c." + c for o, c in outputs.items()})


def test_pearl_c_a_count_that_never_matches_its_blocks_passes_the_old_checks_but_not_the_rederivation():
    where, edits, _ = PEARL_FAULTS["count_drops_a_block"]
    bad = pearl_faulty_frame(PEARL.demo_stream(seed=0), PEARL.config_type(), where, edits)
    res = by_id(PEARL.invariants(bad))
    assert all(res[i].status == "pass" for i in PEARL.check_ids if ".rederive." not in i)
    assert res["pearl_c.rederive.count"].status == "fail"


@pytest.mark.parametrize("column", ["engage.count", "engage.block_max", "rate", "rate_deficit", "rate_deficit_ema",
                                    "ema_alpha", "ad.obs_mean", "ad.obs_m2", "ad.diff_mean", "ad.diff_m2",
                                    "ad.prev_obs", "ad.count"])
def test_pearl_c_one_perturbed_logged_value_is_flagged_at_its_step_and_field_alone(column):
    good = PEARL.replay(PEARL.demo_stream(seed=2, steps=200))
    col, row = "pearl_c." + column, 120
    v = good[col].iloc[row]
    new = v + 1 if np.issubdtype(good[col].dtype, np.integer) else np.nextafter(np.float32(v), np.float32(9))
    failed = rederive_failures(PEARL, corrupt(good, col, row, new))
    from regime_dash.modules.pearl_c.rederive import FORMULAS

    cid = next(f.check_id("pearl_c.") for f in FORMULAS if f.column == col)
    assert list(failed) == [cid]
    assert failed[cid].steps == [int(good["step"].iloc[row])]


@pytest.mark.parametrize("seed,steps", [(0, None), (3, 97), (4, 1200)])
def test_pearl_c_correct_runs_give_no_rederivation_failure(seed, steps):
    for cfg in ({}, {"clamp": 0.5, "block": 64}, {"tracking": False}, {"alpha_min": 0.2}, {"block": 32}):
        frame = PEARL.replay(PEARL.demo_stream(seed, steps), PEARL.config_type(**cfg))
        res = [r for r in PEARL.invariants(frame) if ".rederive." in r.id]
        assert len(res) == 14 and all(r.status == "pass" for r in res), [(r.id, r.detail) for r in res]


def test_pearl_c_coverage_and_the_skip_without_block_columns():
    from regime_dash.modules.pearl_c import coverage

    frame = PEARL.replay(PEARL.demo_stream(steps=30))
    cov = {c["field"]: c for c in coverage(frame)}
    assert list(cov) == [c for c in frame.columns if c not in ("step", "fold", "phase")]
    assert cov["pearl_c.block.000"]["status"] == "not checkable" and "update" in cov["pearl_c.block.000"]["needs"][0]
    assert cov["pearl_c.engage.count"]["status"] == "rederived"
    assert cov["pearl_c.engage.n_params"]["status"] == "input"
    assert not [c for c in cov.values() if "does not know" in " ".join(c["needs"])]
    bare = frame.drop(columns=[c for c in frame.columns if c.startswith("pearl_c.block.")])
    res = by_id(PEARL.invariants(bare))["pearl_c.rederive.count"]
    assert res.status == "skip" and "per-block counts" in res.detail
