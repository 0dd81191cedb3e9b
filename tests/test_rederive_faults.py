"""Fault injection: one wrong line in a copy of a reference step function is caught at its first step.

Each fault edits one line of a copy of ``regime_dash/engine/reference.py`` (executed in a
fresh module; the real one is never touched), replays a scenario through the copy and
writes its diag frame, as a trainer with that bug would. The re-derivation must fail
the formula's own check at the first step where the faulty run logged something the
correct formula would not have written, and (isolation) no other re-derivation check
may fail, except where a fault also moves a value the diag does not log (named below).
A second family perturbs one logged value of a correct diag.
"""
from __future__ import annotations

import inspect
import types

import numpy as np
import pytest

from regime_dash.diag import catalogue as diag
from regime_dash.sources import scenarios
from regime_dash.analysis.rederive import rederive
from regime_dash.core.config import RegimeConfig
from regime_dash.engine import initial_isv, input_columns, reference, snapshot_indices
from regime_dash.core.slots import DEFAULT_LAYOUT

STEPS = 3000


def faulty_reference(old: str, new: str) -> types.ModuleType:
    """A copy of the reference engine with the one line ``old`` replaced by ``new``."""
    src = inspect.getsource(reference)
    assert src.count(old) == 1, f"the line to break must occur once: {old!r}"
    mod = types.ModuleType("faulty_reference")
    exec(compile(src.replace(old, new), "<faulty reference>", "exec"), mod.__dict__)
    return mod


def replay_with(mod, stream, config: RegimeConfig):
    isv0, boot = initial_isv(config, None, DEFAULT_LAYOUT)
    snap, flat, _, _, _ = mod.run(stream, isv0, boot, DEFAULT_LAYOUT, snapshot_indices(DEFAULT_LAYOUT))
    frame = diag.frame_from_snapshot(snap, flat, stream.accounts, stream.step, stream.boundary, config)
    for col, values in input_columns(stream).items():
        frame[col] = values
    return frame


# (id, old line, new line, scenario[:seed], config, check that must fail, other checks that may fail too)
FAULTS = [
    ("flag_off_by_one_flat", "dead_zone = 1 if (kelly == F0 and flat_count == b_size and cooldown == F0) else 0",
     "dead_zone = 1 if (kelly == F0 and flat_count >= b_size - 1 and cooldown == F0) else 0",
     "kelly_trap_run8:3", {}, "flag", ()),  # a seed whose book drains to one open account before the trap
    ("duration_counts_two", "    if dead_zone:\n        duration += F1",
     "    if dead_zone:\n        duration += F1 + F1", "kelly_trap_run8", {}, "duration", ()),
    ("timeout_at_equal", "timeout = 1 if duration > max_dur else 0", "timeout = 1 if duration >= max_dur else 0",
     "kelly_trap_run8", {"resurrection": False, "max_duration": 100.0}, "timeout", ()),
    ("welford_counts_two", "        count += F1\n", "        count += F1 + F1\n", "calm", {}, "welford_count",
     ("variance",)),  # the unlogged Welford mean and M2 follow the count
    ("population_variance", "variance = m2 / (count - F1) if count > F1 else F0",
     "variance = m2 / count if count > F1 else F0", "calm", {}, "variance", ()),
    ("tail_test_drops_sigma", "is_tail = sufficient_count and sigma > F0 and abs(dev) > sigma_thr * sigma",
     "is_tail = sufficient_count and sigma > F0 and abs(dev) > sigma_thr", "calm", {}, "recency", ()),
    ("factor_off_by_one", "recovery_factor = fminf(F1, recency / fmaxf(n_recovery, F1))",
     "recovery_factor = fminf(F1, recency / fmaxf(n_recovery + F1, F1))", "calm", {}, "factor", ()),
    ("eps_live_drops_min", "eps_live = eps_min + (eps_max - eps_min) * recovery_factor",
     "eps_live = eps_min + eps_max * recovery_factor", "calm", {}, "live", ()),
    # the F5 block lives in iqn_tau_boosted, which iqn_tau_min_effective runs with the F5 switch
    ("tau_boost_at_equal", "if boost_on and recency < tail_window:",
     "if boost_on and recency <= tail_window:", "calm", {}, "tau_min_effective", ()),
    ("tau_clamp_min", "fmaxf(isv[ix[RL_IQN_TAU_ACTION_INPUT_INDEX]], tau_min_eff)",
     "fminf(isv[ix[RL_IQN_TAU_ACTION_INPUT_INDEX]], tau_min_eff)", "calm", {}, "tau_action", ()),
    ("analytic_drops_safety", "f = fminf(fmaxf(safety * edge, F0), cap)", "f = fminf(fmaxf(edge, F0), cap)",
     "calm", {}, "analytic", ()),
    ("resurrection_ignores_timeout",
     "if isv[ix[RL_REGIME_FEATURE_RESURRECTION_INDEX]] != F0 and dead_zone and not timeout:",
     "if isv[ix[RL_REGIME_FEATURE_RESURRECTION_INDEX]] != F0 and dead_zone:", "kelly_trap_run8",
     {"max_duration": 0.0}, "kelly", ()),
    ("countdown_rearmed", "        r = -F1\n", "        r = isv[ix[RL_REGIME_TRANSITION_STEPS_CONFIG_INDEX]]\n",
     "fold_boundary", {}, "remaining", ()),
    ("v9_ramp_reversed", "isv[ix[RL_KELLY_SAFETY_FRAC_INDEX]] = normal + (defensive - normal) * w",
     "isv[ix[RL_KELLY_SAFETY_FRAC_INDEX]] = defensive + (normal - defensive) * w", "fold_boundary", {},
     "safety_frac", ()),
    ("popart_mean_drops_alpha", "new_mean = keep * old_mean + alpha * batch_mean",
     "new_mean = keep * old_mean + batch_mean", "tail_shock", {}, "popart_mean", ()),
    ("popart_var_uncentred", "batch_var = v_ssq / b - batch_mean * batch_mean", "batch_var = v_ssq / b",
     "tail_shock", {}, "popart_var", ()),
    ("envelope_decays_to_zero",
     "max_r_ema = (F1 - decay_alpha) * max_r_ema + decay_alpha * max_r_this_step  # slow decay",
     "max_r_ema = (F1 - decay_alpha) * max_r_ema  # slow decay", "tail_shock", {}, "envelope", ()),
    ("sigma_only_at_a_new_peak", "    isv[ix[POPART_SIGMA_INDEX]] = new_sigma\n    return new_sigma",
     "    if new_sigma == isv[ix[RL_POPART_MAX_ABS_REWARD_EMA_INDEX]] and new_sigma > isv[ix[POPART_SIGMA_INDEX]]:\n"
     "        isv[ix[POPART_SIGMA_INDEX]] = new_sigma\n    return new_sigma", "tail_shock", {}, "sigma", ()),
    ("reset_forgets_rebootstrap", "            isv[i] = boot[i]", "            isv[i] = F0", "fold_boundary", {},
     "recency", ()),
    ("reset_forgets_align", "            isv[i] = isv[r_src[k]]", "            pass", "fold_boundary", {},
     # the reset's aligns also set the previous worst (so Δworst at the boundary is a spurious jump, the
     # spec's "Issue γ") and the defensive safety fraction: each output that reads those is wrong too,
     # from the boundary step on
     "remaining", ("safety_frac", "welford_count", "variance", "recency", "analytic")),
]


@pytest.fixture(scope="module")
def clean_frames():
    out = {}
    for name in {f[3] for f in FAULTS}:
        for cfg in {tuple(sorted(f[4].items())) for f in FAULTS if f[3] == name}:
            scenario, _, seed = name.partition(":")
            stream = scenarios.make(scenario, steps=STEPS, seed=int(seed or 0))
            out[name, cfg] = (stream, replay_with(reference, stream, RegimeConfig(**dict(cfg))))
    return out


def failed(frame):
    return {r.id[len("rederive."):]: r for r in rederive(frame).results if r.status == "fail"}


def test_the_clean_runs_rederive_without_a_failure(clean_frames):
    for key, (_, frame) in clean_frames.items():
        assert failed(frame) == {}, key
        assert all(r.status == "pass" for r in rederive(frame).results), key


@pytest.mark.parametrize("fault", FAULTS, ids=[f[0] for f in FAULTS])
def test_a_wrong_line_is_caught_at_its_first_step_and_nowhere_else(fault, clean_frames):
    _, old, new, scenario, cfg, output, also = fault
    stream, clean = clean_frames[scenario, tuple(sorted(cfg.items()))]
    bad = replay_with(faulty_reference(old, new), stream, RegimeConfig(**cfg))
    col = {"flag": diag.FLAG, "duration": diag.DURATION, "timeout": diag.TIMEOUT, "welford_count": diag.COUNT,
           "variance": diag.VARIANCE, "recency": diag.RECENCY, "factor": diag.FACTOR, "live": diag.LIVE,
           "tau_min_effective": diag.TAU_MIN_EFF, "tau_action": diag.TAU_ACTION, "analytic": diag.KELLY_ANALYTIC,
           "kelly": diag.KELLY, "remaining": diag.REMAINING, "safety_frac": diag.SAFETY_FRAC,
           "popart_mean": diag.POPART_MEAN, "popart_var": diag.POPART_VAR, "envelope": diag.ENVELOPE,
           "sigma": diag.SIGMA}[output]
    differs = bad[col].to_numpy() != clean[col].to_numpy()
    assert differs.any(), "the fault must show in this scenario"
    first = int(bad["step"].to_numpy()[np.flatnonzero(differs)[0]])
    found = failed(bad)
    assert output in found, f"{output} not caught; failed: {sorted(found)}"
    res = found[output]
    assert res.first_step == first
    div = res.evidence["divergences"][0]
    assert div["step"] == first and div["logged"] == pytest.approx(float(bad[col].to_numpy()[differs][0]))
    assert res.evidence["formula"] and div["inputs"]
    assert set(found) - {output} <= set(also), f"cascaded into {sorted(set(found) - {output})}"
    assert all(r.first_step >= first for r in found.values())


# outputs no other formula of the same step reads (a perturbed ε_live would also make the logged kelly_f,
# which copied the real one, disagree with it: the data cannot tell which of the two is wrong)
@pytest.mark.parametrize("column,output", [(diag.SIGMA, "sigma"), (diag.TAU_ACTION, "tau_action"),
                                           (diag.KELLY, "kelly")])
def test_one_perturbed_output_is_flagged_at_exactly_that_step_and_field(column, output, clean_frames):
    _, frame = clean_frames["kelly_trap_run8", ()]
    bad = frame.copy()
    row = int(np.flatnonzero((frame[diag.KELLY].to_numpy() > 0) & (np.arange(len(frame)) > 1700))[0])
    bad.loc[row, column] = np.float32(bad.loc[row, column]) + np.float32(0.125)
    found = failed(bad)
    assert list(found) == [output]
    assert found[output].steps == [int(frame["step"][row])] and found[output].violations == 1


def test_one_perturbed_state_value_is_flagged_first_at_its_step(clean_frames):
    _, frame = clean_frames["kelly_trap_run8", ()]
    bad = frame.copy()
    bad.loc[2000, diag.RECENCY] += 5
    found = failed(bad)
    assert list(found) == ["recency"]
    # the next row, derived from the logged (perturbed) value, cannot agree either
    assert found["recency"].spans == [(int(frame["step"][2000]), int(frame["step"][2001]))]


def test_the_python_and_the_compiled_loop_agree(clean_frames):
    stream, frame = clean_frames["kelly_trap_run8", ()]
    bad = replay_with(faulty_reference(*FAULTS[1][1:3]), stream, RegimeConfig())
    a, b = rederive(bad, compiled=False), rederive(bad, compiled=True)
    for k in a.expected:
        np.testing.assert_array_equal(a.expected[k], b.expected[k])
    assert [r.to_dict() for r in a.results] == [r.to_dict() for r in b.results]
