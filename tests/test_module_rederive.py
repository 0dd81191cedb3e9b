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


def assert_clean(module, seed, steps, configs, n_checks):
    """Every re-derivation check of ``module`` passes on its demo under each config."""
    for cfg in configs:
        frame = module.replay(module.demo_stream(seed, steps), module.config_type(**cfg))
        res = [r for r in module.invariants(frame) if ".rederive." in r.id]
        assert len(res) == n_checks and all(r.status == "pass" for r in res), (cfg, [(r.id, r.detail) for r in res])


def coverage_by_field(module, coverage, steps):
    """``coverage``'s entries on a demo frame by field, once it is seen to list every logged field in order."""
    frame = module.replay(module.demo_stream(steps=steps))
    cov = {c["field"]: c for c in coverage(frame)}
    assert list(cov) == [c for c in frame.columns if c not in ("step", "fold", "phase")]
    assert not [c for c in cov.values() if "does not know" in " ".join(c["needs"])]
    assert {i for c in cov.values() for i in c["checks"]} <= set(module.check_ids)
    return frame, cov


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
    assert_clean(SP14, seed, steps, SP14_CONFIGS, 9)


def test_sp14_coverage_names_every_logged_field():
    from regime_dash.modules.sp14_alpha_grad_gate import coverage

    frame, cov = coverage_by_field(SP14, coverage, 20)
    assert cov["sp14.gate1.value"]["status"] == "rederived" and cov["sp14.inputs.var_aux"]["status"] == "input"
    assert {r.id for r in SP14.invariants(frame) if ".rederive." in r.id} <= {i for c in cov.values() for i in c["checks"]}


def faulty_twin(twin, where, edits):
    """A copy of a module's ``twin`` with ``edits`` made in it, or (``where == "f32"``) in the shared
    ``f32.pearls_ad_update`` it calls."""
    from regime_dash.modules import f32

    if where == "f32":
        return copy_of(twin, pearls_ad_update=copy_of(f32, edits).pearls_ad_update)
    return copy_of(twin, edits)


# ---- Pearl C ------------------------------------------------------------------------------------
PEARL = MODULES["pearl_c"]


def pearl_faulty_frame(stream, config, where, edits):
    """Replay Pearl C with one formula changed in a copy of ``where`` (``twin``, ``f32`` or ``config``)."""
    from regime_dash.modules.pearl_c import config as config_mod
    from regime_dash.modules.pearl_c import replay, twin

    if where == "config":
        config = copy_of(config_mod, edits).PearlCConfig(**config.as_dict())
        return copy_of(replay).run(stream, config, "reference")
    return copy_of(replay, twin=faulty_twin(twin, where, edits)).run(stream, config, "reference")


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
    assert_clean(PEARL, seed, steps, ({}, {"clamp": 0.5, "block": 64}, {"tracking": False}, {"alpha_min": 0.2},
                                      {"block": 32}), 14)


def test_pearl_c_coverage_and_the_skip_without_block_columns():
    from regime_dash.modules.pearl_c import coverage

    frame, cov = coverage_by_field(PEARL, coverage, 30)
    assert cov["pearl_c.block.000"]["status"] == "not checkable" and "update" in cov["pearl_c.block.000"]["needs"][0]
    assert cov["pearl_c.engage.count"]["status"] == "rederived"
    assert cov["pearl_c.engage.n_params"]["status"] == "input"
    bare = frame.drop(columns=[c for c in frame.columns if c.startswith("pearl_c.block.")])
    res = by_id(PEARL.invariants(bare))["pearl_c.rederive.count"]
    assert res.status == "skip" and "per-block counts" in res.detail


# ---- SP18 ---------------------------------------------------------------------------------------
SP18 = MODULES["sp18_hold"]


def sp18_faulty_frame(stream, config, where, edits):
    """Replay SP18 with one formula changed in a copy of ``where`` (``replay``, ``twin`` or ``f32``)."""
    from regime_dash.modules.sp18_hold import replay, twin

    if where == "replay":
        return copy_of(replay, edits).run(stream, config, "reference")
    return copy_of(replay, twin=faulty_twin(twin, where, edits)).run(stream, config, "reference")


SP18_FAULTS = {
    "hold_cost_sign": ("twin", [("np.maximum(MINUS_TWO * vol_norm, neg)", "np.maximum(-MINUS_TWO * vol_norm, neg)")],
                       {"hold_opp": "reward.hold_opp", "hold_opp_chosen": "reward.hold_opp_chosen"}),
    "cap_obs_without_safety": ("twin", [("return p99_nearest_rank(closes) * F32(safety_factor)",
                                         "return p99_nearest_rank(closes)")], {"cap_obs": "cap.obs"}),
    "p99_rank_one_low": ("twin", [("k = (99 * n + 99) // 100 - 1", "k = (99 * n) // 100 - 1")], {"cap_obs": "cap.obs"}),
    "pos_clamped_at_half_its_max": ("twin", [("return clampf(ema, F32(pos_min), F32(pos_max))",
                                              "return clampf(ema, F32(pos_min), F32(pos_max) * F32(0.5))")],
                                    {"cap_pos": "cap.pos"}),
    "neg_not_mirrored": ("twin", [("return -F32(neg_ratio) * pos", "return -pos")], {"cap_neg": "cap.neg"}),
    "td_trace_decays_by_gamma_not_gamma_lambda": ("twin", [("(ONE - lam) * q[e, kk] + lam * g[live]",
                                                            "(ONE - lam) * q[e, kk] + g[live]")],
                                                  {"return_defect": "td.return_defect", "return_fixed": "td.return_fixed"}),
    "cap_ema_weights_swapped": ("f32", [("return ema + alpha * (obs - ema)", "return obs + alpha * (ema - obs)")],
                                {"cap_ema": "cap.ema"}),
    "cap_alpha_noise_not_halved": ("f32", [("noise = var_diff * F32(0.5)", "noise = var_diff")],
                                   {"cap_alpha": "cap.alpha"}),
    "cap_count_by_two": ("f32", [("return count + ONE", "return count + F32(2.0)")], {"cap_count": "cap.count"}),
    "cap_welford_mean": ("f32", [("return mean + d / count", "return mean + d / (count + ONE)")],
                         {"cap_obs_mean": "cap.obs_mean", "cap_diff_mean": "cap.diff_mean"}),
    "cap_welford_m2": ("f32", [("return m2 + d * (x - mean)", "return m2 + d * (x - mean_before)")],
                       {"cap_obs_m2": "cap.obs_m2", "cap_diff_m2": "cap.diff_m2"}),
    "vol_norm_multiplies": ("replay", [("(ret.astype(np.float32) / np.maximum(", "(ret.astype(np.float32) * np.maximum(")],
                            {"vol_norm_return": "bar.vol_norm_return"}),
    "position_floor_shrunk": ("replay", [("np.clip(x, np.float32(neg_cap), np.float32(pos_cap))",
                                          "np.clip(x, np.float32(neg_cap) * np.float32(0.1), np.float32(pos_cap))")],
                              {"long": "reward.long", "short": "reward.short"}),
    "chosen_long_pays_short": ("replay", [("np.where(action == S.DIR_LONG, r_long,", "np.where(action == S.DIR_LONG, r_short,")],
                               {"chosen": "reward.chosen"}),
    "last_bar_not_done": ("replay", [("dones[-1] = 1.0", "dones[-1] = 0.0")], {"done": "td.done"}),
    "td_error_signed_sum": ("replay", [("np.abs(returns - taken)", "np.abs(returns + taken)")],
                            {"abs_err_defect": "td.abs_err_defect", "abs_err_fixed": "td.abs_err_fixed"}),
}


@pytest.mark.parametrize("fault", list(SP18_FAULTS))
def test_sp18_each_wrong_formula_is_caught_at_its_first_step_and_alone(fault):
    where, edits, outputs = SP18_FAULTS[fault]
    stream = SP18.demo_stream(seed=1, steps=1200)
    config = SP18.config_type(cap_update_every=40)
    good = SP18.replay(stream, config)
    assert not rederive_failures(SP18, good)
    bad = sp18_faulty_frame(stream, config, where, edits)
    assert_caught(SP18, good, bad, {f"sp18.rederive.{o}": "sp18." + c for o, c in outputs.items()})


@pytest.mark.parametrize("fault", ["hold_cost_sign", "td_trace_decays_by_gamma_not_gamma_lambda"])
def test_sp18_faults_that_pass_every_old_check_fail_the_rederivation(fault):
    where, edits, outputs = SP18_FAULTS[fault]
    stream = SP18.demo_stream(seed=0)
    bad = sp18_faulty_frame(stream, SP18.config_type(), where, edits)
    res = by_id(SP18.invariants(bad))
    old = [i for i in SP18.check_ids if ".rederive." not in i and res[i].status == "fail"]
    assert not old or fault == "hold_cost_sign"  # a Hold sign may also break the width gate; the bounds hold
    assert res["sp18.hold_reward_bounds"].status == "pass"
    assert all(res[f"sp18.rederive.{o}"].status == "fail" for o in outputs)


SP18_CORRUPT = ["bar.vol_norm_return", "reward.hold_opp", "reward.hold_opp_chosen", "reward.long", "reward.short",
                "reward.chosen", "cap.pos", "cap.neg", "td.done", "td.return_defect", "td.return_fixed",
                "td.abs_err_defect", "td.abs_err_fixed"]
SP18_CAP_STATE = ["cap.obs", "cap.count", "cap.obs_mean", "cap.obs_m2", "cap.diff_mean", "cap.diff_m2", "cap.alpha",
                  "cap.ema", "cap.updated"]


@pytest.mark.parametrize("column,row", [(c, 517) for c in SP18_CORRUPT + SP18_CAP_STATE]
                         + [(c, 559) for c in SP18_CAP_STATE])  # 517 inside a window, 559 the end of one
def test_sp18_one_perturbed_logged_value_is_flagged_at_its_step_and_field_alone(column, row):
    from regime_dash.modules.sp18_hold.rederive import FORMULAS

    good = SP18.replay(SP18.demo_stream(seed=2, steps=1000), SP18.config_type(cap_update_every=40))
    col = "sp18." + column
    v = good[col].iloc[row]
    new = (not v) if good[col].dtype == bool else (1.0 - v if column == "td.done"
                                                   else np.nextafter(np.float32(v), np.float32(9)) * np.float32(1.01))
    failed = rederive_failures(SP18, corrupt(good, col, row, new))
    cid = next(f.check_id("sp18.") for f in FORMULAS if f.column == col)
    assert list(failed) == [cid], {k: v.detail for k, v in failed.items()}
    assert failed[cid].steps == [int(good["step"].iloc[row])]


@pytest.mark.parametrize("seed,steps", [(0, None), (3, 211), (4, 12000)])
def test_sp18_correct_runs_give_no_rederivation_failure(seed, steps):
    assert_clean(SP18, seed, steps, ({}, {"cap_update_every": 7}, {"pos_min": 0.0, "safety_factor": 3.0},
                                     {"td_lambda": 0.5, "max_trace": 30, "gamma": 0.99}, {"cap_update_every": 1}), 22)


def test_sp18_coverage_names_the_q_tables_and_every_field():
    from regime_dash.modules.sp18_hold import coverage

    _frame, cov = coverage_by_field(SP18, coverage, 50)
    assert cov["sp18.td.q_next_target"]["status"] == "not checkable"
    assert "Q tables" in cov["sp18.td.q_taken"]["needs"][0]
    assert cov["sp18.td.return_fixed"]["status"] == "rederived"
    assert {c["status"] for c in cov.values()} == {"rederived", "input", "not checkable"}


def test_sp18_a_frame_without_the_cadence_skips_naming_it():
    frame = SP18.replay(SP18.demo_stream(steps=50)).drop(columns=["sp18.config.cap_update_every"])
    frame.attrs = {}
    res = by_id(SP18.invariants(frame))
    assert res["sp18.rederive.cap_pos"].status == "skip"
    assert "sp18.config.cap_update_every" in res["sp18.rederive.cap_pos"].detail
