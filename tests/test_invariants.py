"""Spec invariants and success criteria: clean replays pass, planted violations are caught.

Clean frames come from the reference engine over streams built here (boundaries,
tail shocks, dead zones with the resurrection on/off cycle, timeouts, envelope
floors, steps that do not start at 0). Each planted-violation test changes one
value of a clean frame and asserts the check fails with that exact first step.
The other test files import :func:`rich_frame` and :func:`timeout_frame`.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd
import pytest

from regime_dash import RegimeConfig, Stream, replay
from regime_dash.analysis import CHECK_IDS, CheckOptions, run_checks
from regime_dash.analysis import view as v
from regime_dash.errors import ValidationError

BOUNDARIES = (600, 1200, 1800)
STEP0 = 10_000
TRANSITION_STEPS = 120


@lru_cache(maxsize=None)
def rich_stream(seed: int = 7) -> Stream:
    """Boundaries, session-pnl shocks, big single-account rewards, three dead zones, a cooldown."""
    T, b = 2400, 16
    rng = np.random.default_rng(seed)
    rewards = rng.normal(0, 0.5, size=(T, b)).astype(np.float32)
    lots = rng.integers(1, 4, size=(T, b)).astype(np.int32)
    kelly = np.full(T, 0.3, np.float32)
    cooldown = np.zeros(T, np.float32)
    boundary = np.zeros(T, bool)
    boundary[list(BOUNDARIES)] = True
    worst = np.empty(T, np.float32)
    edges = [0, *BOUNDARIES, T]
    for a, e in zip(edges, edges[1:]):  # each session's worst pnl restarts at a boundary
        worst[a:e] = np.minimum.accumulate(np.cumsum(rng.normal(-0.05, 1.0, e - a)))
        worst[a:a + 20] = 0.0  # nobody has lost yet: the Welford update is skipped
    for t in (300, 950, 1500, 2100):  # session-pnl shocks: tail events
        end = next(e for e in edges if e > t)
        worst[t:end] -= 60.0
    for t in (450, 1100, 2200):  # one account's big reward: the F4 envelope lifts σ
        rewards[t, rng.integers(b)] = -25.0
    # no edge and every account flat; each shorter than the 200-step trap limit, so that a clean
    # frame with resurrection on (dead zones cycling, accounts kept flat by the stream) has no trap
    for a, n in ((200, 60), (700, 150), (1400, 190)):
        kelly[a:a + n] = -0.2
        lots[a:a + n] = 0
    lots[1000:1010] = 0  # flat and no edge, but cooling down: no dead zone
    kelly[1000:1010] = -0.2
    cooldown[1000:1010] = 3.0
    return Stream.make(rewards=rewards, lots=lots, kelly_analytic=kelly, cooldown=cooldown,
                       session_pnl_worst=worst, boundary=boundary, tau_action=rng.uniform(0, 0.3, T),
                       step=np.arange(T) + STEP0)


def rich_config(resurrection: bool = True, max_duration: float = 1000.0) -> RegimeConfig:
    return RegimeConfig(resurrection=resurrection, max_duration=max_duration,
                        transition_steps=TRANSITION_STEPS, transition_decay_steps=40)


@lru_cache(maxsize=None)
def _rich(resurrection: bool, max_duration: float, seed: int) -> pd.DataFrame:
    return replay(rich_stream(seed), rich_config(resurrection, max_duration))


def rich_frame(seed: int = 7) -> pd.DataFrame:
    """Resurrection on: boundaries, tails, envelope floors, three dead zones of on/off cycles."""
    return _rich(True, 1000.0, seed).copy()


def timeout_frame(seed: int = 7) -> pd.DataFrame:
    """Resurrection off, max_duration 80: the two longer dead zones time out."""
    return _rich(False, 80.0, seed).copy()


def statuses(frame: pd.DataFrame, **opts) -> dict[str, str]:
    return {r.id: r.status for r in run_checks(frame, options=CheckOptions(**opts) if opts else None)}


def result(frame: pd.DataFrame, check_id: str, **opts):
    (res,) = run_checks(frame, [check_id], CheckOptions(**opts) if opts else None)
    return res


def row_where(frame: pd.DataFrame, mask, after: int = 1) -> int:
    """First row index >= ``after`` where ``mask`` holds and that is no boundary (or next to one)."""
    vw = v.view(frame)
    ok = np.asarray(mask, bool) & vw.checked
    ok[:after] = False
    ok[:-1] &= ~vw.boundary[1:]
    idx = np.flatnonzero(ok)
    assert len(idx), "the clean frame has no row of the kind the test needs"
    return int(idx[0])


def col(frame, name):
    return frame[name].to_numpy()


# ---- clean frames pass -------------------------------------------------------------------
@pytest.mark.parametrize("make", [rich_frame, timeout_frame], ids=["resurrection", "timeout"])
def test_clean_replay_passes_every_check_it_can_run(make):
    frame = make()
    res = {r.id: r for r in run_checks(frame)}
    assert set(res) == set(CHECK_IDS)
    failed = {i: r.detail for i, r in res.items() if r.status == "fail"}
    assert not failed
    skipped = {i for i, r in res.items() if r.status == "skip"}
    # a replay frame has every diag field; only the criteria needing non-diag data skip
    assert skipped == {"eval_pnl_baseline", "throughput"}
    assert res["eval_pnl_baseline"].detail == "missing field(s): eval.pnl"


def test_clean_replay_passes_on_every_engine(engine):
    """The same stream through each replay engine: no engine's numerics trip a check."""
    for cfg in (rich_config(), rich_config(resurrection=False, max_duration=80.0)):
        frame = replay(rich_stream(), cfg, engine=engine)
        failed = {r.id: r.detail for r in run_checks(frame) if r.status == "fail"}
        assert not failed, (engine, failed)


def test_clean_frame_really_exercises_the_rules():
    """The clean frames contain what the checks are about (else 'pass' would be vacuous)."""
    f, g = rich_frame(), timeout_frame()
    assert (col(f, v.RECENCY) == 0).sum() >= 4  # tail events
    assert ((col(f, v.FLAG) == 1) & (col(f, v.DURATION) == 1)).sum() > 100  # resurrection cycles
    assert (col(g, v.TIMEOUT) == 1).any() and col(g, v.DURATION).max() > 150
    assert ((col(f, v.FACTOR) > 0) & (col(f, v.FACTOR) < 1)).sum() > 100  # the ε ramp
    rem = col(f, v.REMAINING)
    assert rem.max() == TRANSITION_STEPS - 1 and (rem == 0).sum() == len(BOUNDARIES)
    assert (col(f, v.SIGMA) == col(f, v.ENVELOPE)).sum() > 100  # the floor is active
    assert (np.diff(col(f, v.COUNT)) == 0).any() and (np.diff(col(f, v.COUNT)) == 1).any()


def test_boundaries_are_detected_at_the_stream_boundaries_and_are_not_violations():
    f = rich_frame()
    vw = v.view(f)
    assert list(vw.steps_at(vw.boundary)) == [STEP0 + b for b in BOUNDARIES]
    # without fold/phase the sentinel resets alone find them
    bare = f.drop(columns=["fold", "phase"])
    vb = v.view(bare)
    assert list(vb.steps_at(vb.boundary)) == [STEP0 + b for b in BOUNDARIES]
    assert "fail" not in statuses(bare).values()


def test_sampled_logging_with_step_gaps_is_not_a_violation():
    for frame in (rich_frame().iloc[::3], timeout_frame().iloc[::7], rich_frame().iloc[np.r_[0:500, 900:2400]]):
        assert "fail" not in statuses(frame).values()


def test_row_order_does_not_matter():
    f = rich_frame()
    assert statuses(f.iloc[::-1]) == statuses(f)


# ---- planted violations --------------------------------------------------------------------
def plant(frame, row, column, value):
    out = frame.copy()
    out.loc[row, column] = np.float32(value)
    return out


def assert_caught(frame, check_id, row, **opts):
    res = result(frame, check_id, **opts)
    step = int(frame["step"].iloc[row])
    assert res.status == "fail", res.detail
    assert res.first_step == step, (res.first_step, step, res.detail)
    assert res.steps[0] == step and len(res.steps) == min(res.violations, 20)
    assert str(step) in res.detail
    return res


# One planted cell, one check that must name its step: (id, clean frame, check, row of the
# frame, column planted, value planted at that row, violations expected (None: any), detail).
PLANTED = [
    ("flag_binary_half_flag", rich_frame, "flag_binary",
     lambda f: row_where(f, col(f, v.FLAG) == 1), v.FLAG, lambda f, k: 0.5, 1, ""),
    ("flag_binary_non_binary_timeout_flag", timeout_frame, "flag_binary",
     lambda f: row_where(f, col(f, v.TIMEOUT) == 1), v.TIMEOUT, lambda f, k: 2.0, 1, ""),
    ("dead_zone_duration_skipped_count", timeout_frame, "dead_zone_duration",
     lambda f: row_where(f, col(f, v.DURATION) > 5), v.DURATION, lambda f, k: col(f, v.DURATION)[k] + 1, None, ""),
    ("dead_zone_duration_count_outside_the_dead_zone", rich_frame, "dead_zone_duration",
     lambda f: row_where(f, col(f, v.FLAG) == 0, after=50), v.DURATION, lambda f, k: 3.0, 1, ""),
    ("timeout_flag_early_timeout", timeout_frame, "timeout_flag",
     lambda f: row_where(f, (col(f, v.DURATION) > 0) & (col(f, v.DURATION) < 80)), v.TIMEOUT, lambda f, k: 1.0, 1, ""),
    ("timeout_flag_missing_timeout", timeout_frame, "timeout_flag",
     lambda f: row_where(f, col(f, v.TIMEOUT) == 1), v.TIMEOUT, lambda f, k: 0.0, 1, ""),
    ("recovery_factor_formula_small_error", rich_frame, "recovery_factor_formula",
     lambda f: row_where(f, (col(f, v.FACTOR) > 0.1) & (col(f, v.FACTOR) < 0.9)), v.FACTOR,
     lambda f, k: col(f, v.FACTOR)[k] + 1e-4, 1, ""),
    ("eps_live_formula_wrong_live", rich_frame, "eps_live_formula",
     lambda f: row_where(f, col(f, v.FACTOR) < 0.5), v.LIVE, lambda f, k: col(f, v.LIVE)[k] + 1e-3, 1, ""),
    ("tail_recency_skipped_count", rich_frame, "tail_recency",
     lambda f: row_where(f, (col(f, v.RECENCY) > 3) & (col(f, v.RECENCY) < 1e5)), v.RECENCY,
     lambda f, k: col(f, v.RECENCY)[k] + 1, None, "not 0 and not previous+1"),
    ("tail_recency_tail_before_the_welford_gate", rich_frame, "tail_recency",
     lambda f: row_where(f, col(f, v.COUNT) < 10), v.RECENCY, lambda f, k: 0.0, None, "welford_count < 10"),
    ("welford_count_monotone_drop", rich_frame, "welford_count_monotone",
     lambda f: row_where(f, col(f, v.COUNT) > 50), v.COUNT, lambda f, k: col(f, v.COUNT)[k] - 2, None, ""),
    # the spec keeps the Welford state across boundaries; a reset there is not excused
    ("welford_count_reset_at_a_boundary", rich_frame, "welford_count_monotone",
     lambda f: int(np.flatnonzero(col(f, "step") == STEP0 + BOUNDARIES[0])[0]), v.COUNT, lambda f, k: 1.0, None, ""),
    ("finite_regime_fields_inf", rich_frame, "finite_regime_fields",
     lambda f: row_where(f, col(f, v.VARIANCE) > 0), v.VARIANCE, lambda f, k: np.inf, 1, ""),
    ("envelope_floor_sigma_below_the_envelope", rich_frame, "envelope_floor",
     lambda f: row_where(f, col(f, v.ENVELOPE) > 2), v.SIGMA, lambda f, k: col(f, v.ENVELOPE)[k] * np.float32(0.999),
     1, ""),
    ("transition_ramp_stalled_countdown", rich_frame, "transition_ramp",
     lambda f: row_where(f, (col(f, v.REMAINING) > 10) & (col(f, v.REMAINING) < 100)), v.REMAINING,
     lambda f, k: col(f, v.REMAINING)[k] + 1, None, ""),
    ("transition_ramp_never_goes_idle", rich_frame, "transition_ramp",  # the ramp's end: 0 then -1
     lambda f: row_where(f, (col(f, v.REMAINING) == -1) & (np.r_[np.nan, col(f, v.REMAINING)[:-1]] == 0), after=800),
     v.REMAINING, lambda f, k: 0.0, None, ""),
]


@pytest.mark.parametrize("make, check_id, row, column, value, violations, detail",
                         [case[1:] for case in PLANTED], ids=[case[0] for case in PLANTED])
def test_a_planted_cell_is_caught_at_its_step(make, check_id, row, column, value, violations, detail):
    f = make()
    k = row(f)
    res = assert_caught(plant(f, k, column, value(f, k)), check_id, k)
    assert violations is None or res.violations == violations
    assert detail in res.detail


def test_recovery_factor_formula_tolerates_a_few_ulps_only():
    f = rich_frame()
    k = row_where(f, (col(f, v.FACTOR) > 0.5) & (col(f, v.FACTOR) < 0.9))
    x = col(f, v.FACTOR)[k]
    two_ulps = np.nextafter(np.nextafter(x, np.float32(2)), np.float32(2))
    assert result(plant(f, k, v.FACTOR, two_ulps), "recovery_factor_formula").status == "pass"
    far = x + np.float32(64) * np.spacing(x)
    assert result(plant(f, k, v.FACTOR, far), "recovery_factor_formula").status == "fail"


@pytest.mark.parametrize("field", [v.FACTOR, v.FLAG, v.DURATION, v.RECENCY, v.REMAINING, v.COUNT, v.ENVELOPE,
                                   v.LIVE])
def test_finite_regime_fields_catches_one_nan(field):
    f = rich_frame()
    k = row_where(f, (col(f, v.FACTOR) < 1) & (col(f, v.FLAG) == 1))
    bad = plant(f, k, field, np.nan)
    res = assert_caught(bad, "finite_regime_fields", k)
    assert res.violations == 1 and field[len(v.R):] in res.detail
    # the NaN is blamed once, not by every formula that reads it
    others = {r.id: r.status for r in run_checks(bad) if r.id != "finite_regime_fields"}
    assert "fail" not in others.values()


def test_kelly_trap_catches_a_planted_trap_and_reports_its_span():
    f = rich_frame()
    a = 1900  # kelly_f > 0 and accounts open here in the clean frame
    assert col(f, v.KELLY)[a - 1] > 0 and col(f, v.KELLY)[a + 201] > 0
    bad = f.copy()
    bad.loc[a:a + 200, v.KELLY] = np.float32(0)
    bad.loc[a:a + 200, v.FLAT] = bad.loc[a:a + 200, v.B_SIZE]
    res = assert_caught(bad, "kelly_trap", a)  # reported at the trap's start, not where it crossed the limit
    assert res.violations == 1 and res.spans == [(STEP0 + a, STEP0 + a + 200)]
    assert res.evidence["traps"] == [[STEP0 + a, STEP0 + a + 200, 201]] and res.column == v.KELLY
    # exactly 200 steps is allowed
    ok = f.copy()
    ok.loc[a:a + 199, v.KELLY] = np.float32(0)
    ok.loc[a:a + 199, v.FLAT] = ok.loc[a:a + 199, v.B_SIZE]
    assert result(ok, "kelly_trap").status == "pass"


def test_kelly_trap_keeps_resurrection_cycles_inside_one_trap():
    """With F2 on the dead zone cycles (kelly_f 0/ε, flag and DURATION 0/1) while every account stays
    flat: one trap per dead zone, not hundreds of one-step stretches under the limit."""
    f = rich_frame()
    a, n = 1400, 190
    kel = col(f, v.KELLY)[a:a + n]
    assert (kel == 0).any() and (kel > 0).any()  # it really cycles
    res = result(f, "kelly_trap", trap_steps=100)
    assert res.status == "fail" and res.violations == 2
    # the two dead zones longer than 100 steps, whole: exactly the stream rows where no account is open
    assert res.spans == [(STEP0 + 700, STEP0 + 849), (STEP0 + a, STEP0 + a + n - 1)]
    assert res.first_step == STEP0 + 700


def test_kelly_trap_is_excused_by_an_observed_timeout_and_not_without_it():
    g = timeout_frame()
    res = result(g, "kelly_trap", trap_steps=60)
    assert res.status == "pass" and len(res.evidence["excused_by_timeout"]) == 2  # both long stretches timed out
    no_timeout = g.drop(columns=[v.TIMEOUT])
    res = result(no_timeout, "kelly_trap", trap_steps=60)
    assert res.status == "fail" and res.violations == 2 and "timeout_flag missing" in res.detail


def test_kelly_trap_fires_on_a_real_trap_without_resurrection():
    """A live run with F2 off, where a boundary keeps resetting the duration: a true trap."""
    from regime_dash.sources import simulator

    frame = simulator.simulate("fold_boundary", steps=1000, accounts=16,
                               config=RegimeConfig(resurrection=False)).frame()
    res = result(frame, "kelly_trap")
    assert res.status == "fail"
    k = int(np.flatnonzero(col(frame, "step") == res.first_step)[0])
    assert (col(frame, v.KELLY)[k:k + 201] == 0).all()
    assert col(frame, v.KELLY)[k - 1] > 0 or col(frame, v.FLAT)[k - 1] < col(frame, v.B_SIZE)[k - 1]


def test_envelope_tracking_catches_an_envelope_that_drops_too_fast():
    f = rich_frame()
    env = col(f, v.ENVELOPE)
    k = row_where(f, (env > 2) & (np.r_[0, env[:-1]] > 2))
    bad = plant(f, k, v.ENVELOPE, env[k - 1] * np.float32(0.9))
    assert assert_caught(bad, "envelope_tracking", k).violations == 1


def test_eval_pnl_baseline_checks_each_folds_final_eval_pnl():
    f = rich_frame()
    f["eval.pnl"] = np.where(f["phase"] == "eval", -100_000.0, np.nan)
    assert result(f, "eval_pnl_baseline").status == "pass"
    last_eval = int(np.flatnonzero(f["phase"].to_numpy() == "eval")[-1])
    bad = f.copy()
    bad.loc[last_eval, "eval.pnl"] = -600_000.0
    assert assert_caught(bad, "eval_pnl_baseline", last_eval).violations == 1


def test_throughput_fails_in_the_slow_window_only():
    f = rich_frame()
    wall = (col(f, "step") - STEP0) / 6.0
    wall[1000:] += 30.0  # a stall between rows 999 and 1000
    f["wall_time"] = wall
    assert result(f, "throughput").status == "skip"  # no baseline given
    res = result(f, "throughput", baseline_sps=6.0, throughput_window=200)
    assert res.status == "fail" and res.violations == 1
    assert res.first_step == STEP0 + 1000  # the end of the window holding the stall
    assert result(f.iloc[:1000], "throughput", baseline_sps=6.0, throughput_window=200).status == "pass"


# ---- skips and bad input ---------------------------------------------------------------------
def test_missing_fields_skip_and_name_them():
    f = rich_frame().drop(columns=[v.TIMEOUT, v.RECENCY])
    res = {r.id: r for r in run_checks(f)}
    assert res["timeout_flag"].status == "skip" and v.TIMEOUT in res["timeout_flag"].detail
    assert res["tail_recency"].status == "skip" and res["tail_recency"].missing == [v.RECENCY]
    assert res["recovery_factor_formula"].status == "skip"
    assert res["dead_zone_duration"].status == "pass"


def test_no_regime_fields_skips_the_finite_check():
    f = rich_frame()[["step", v.KELLY, v.FLAT, v.B_SIZE]]
    res = {r.id: r for r in run_checks(f)}
    assert res["finite_regime_fields"].status == "skip"
    assert res["kelly_trap"].status == "pass"


def test_unknown_check_id_and_bad_options_raise():
    with pytest.raises(ValidationError, match="no_such_check"):
        run_checks(rich_frame(), ["no_such_check"])
    with pytest.raises(ValidationError, match="-3"):
        CheckOptions(trap_steps=-3)
    with pytest.raises(ValidationError, match="nan"):
        CheckOptions(baseline_sps=float("nan"))


def test_steps_list_is_capped_at_20():
    f = rich_frame()
    bad = f.copy()
    bad[v.FLAG] = np.float32(0.5)
    res = result(bad, "flag_binary")
    assert res.violations == len(f) and len(res.steps) == 20 and res.steps[0] == STEP0


def test_a_restart_that_logs_steps_again_is_not_a_violation():
    """A trainer restarted from a checkpoint repeats steps; the rows before it say nothing of them."""
    f = rich_frame()
    again = pd.concat([f.iloc[:900], f.iloc[700:]], ignore_index=True)  # steps 700..899 logged twice
    assert "fail" not in statuses(again).values()
    # a real violation after the restart is still caught at its step
    k = 900 + 400  # stream row 1100
    bad = plant(again, k, v.RECENCY, again.loc[k, v.RECENCY] + 7)
    assert result(bad, "tail_recency").first_step == STEP0 + 1100


def test_rows_without_a_step_are_left_out_and_counted():
    f = rich_frame()
    f["step"] = f["step"].astype(float)
    f.loc[10, "step"] = np.nan
    vw = v.view(f)
    assert vw.n == len(f) - 1 and vw.rows_without_step == 1
    assert "fail" not in statuses(f).values()


def test_kelly_resurrection_catches_an_override_outside_the_dead_zone():
    f = rich_frame()
    k = row_where(f, (col(f, v.FLAG) == 0) & (col(f, v.KELLY_ANALYTIC) > 0))
    bad = plant(f, k, v.KELLY, col(f, v.LIVE)[k])
    assert assert_caught(bad, "kelly_resurrection", k).violations == 1


def test_kelly_resurrection_catches_a_missing_override_and_one_after_timeout():
    f = rich_frame()
    k = row_where(f, (col(f, v.FLAG) == 1) & (col(f, v.LIVE) > 0))
    bad = plant(f, k, v.KELLY, col(f, v.LIVE)[k] * np.float32(0.5))
    assert assert_caught(bad, "kelly_resurrection", k).violations == 1
    g = timeout_frame()
    j = row_where(g, col(g, v.TIMEOUT) == 1)
    assert assert_caught(plant(g, j, v.KELLY, col(g, v.LIVE)[j]), "kelly_resurrection", j).violations == 1


def test_tau_boost_catches_a_boost_without_a_recent_tail():
    f = rich_frame()
    k = row_where(f, col(f, v.RECENCY) >= col(f, v.BOOST_WINDOW))
    bad = plant(f, k, v.TAU_MIN_EFF, col(f, v.TAU_MIN)[k] * col(f, v.BOOST_FACTOR)[k])
    assert assert_caught(bad, "tau_boost", k).violations == 1


def test_tau_boost_catches_an_unclamped_tau_action():
    f = rich_frame()
    k = row_where(f, col(f, v.RECENCY) < col(f, v.BOOST_WINDOW))
    bad = plant(f, k, v.TAU_ACTION, col(f, v.TAU_MIN_EFF)[k] * np.float32(0.5))
    res = assert_caught(bad, "tau_boost", k)
    assert res.violations == 1 and "below tau_min_effective" in res.detail


def _boundary_row(frame, i=0):
    return int(np.flatnonzero(col(frame, "step") == STEP0 + BOUNDARIES[i])[0])


def test_boundary_reset_catches_a_recency_that_was_not_rebootstrapped():
    f = rich_frame()
    k = _boundary_row(f, 1)
    bad = plant(f, k, v.RECENCY, col(f, v.RECENCY)[k - 1] + 1)  # counting on as if no reset ran
    res = assert_caught(bad, "boundary_reset", k)
    assert res.violations == 1 and "re-bootstrapped" in res.detail


def test_boundary_reset_catches_a_transition_that_did_not_restart():
    f = rich_frame()
    k = _boundary_row(f, 2)
    res = assert_caught(plant(f, k, v.REMAINING, -1.0), "boundary_reset", k)
    assert res.violations == 1 and "transition remaining=-1" in res.detail


def test_boundary_reset_catches_a_duration_carried_over():
    g = timeout_frame()
    # the dead zone of stream rows 1400..1589 spans no boundary; make a boundary inherit one
    k = _boundary_row(g, 0)
    bad = plant(g, k, v.DURATION, 5.0)
    assert "duration=5 not cleared" in assert_caught(bad, "boundary_reset", k).detail


def test_boundary_reset_skips_without_phase_or_fold():
    (res,) = run_checks(rich_frame().drop(columns=["phase", "fold"]), ["boundary_reset"])
    assert res.status == "skip" and "phase or fold" in res.detail


def test_ulps_option_widens_the_formula_tolerance():
    f = rich_frame()
    k = row_where(f, (col(f, v.FACTOR) > 0.5) & (col(f, v.FACTOR) < 0.9))
    x = col(f, v.FACTOR)[k]
    rounded = plant(f, k, v.FACTOR, x + np.float32(16) * np.spacing(x))  # as a 6-digit log would
    assert result(rounded, "recovery_factor_formula").status == "fail"
    assert result(rounded, "recovery_factor_formula", ulps=64).status == "pass"
    with pytest.raises(ValidationError, match="ulps"):
        CheckOptions(ulps=-1)
