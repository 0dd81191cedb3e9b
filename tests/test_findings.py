"""Findings (where the spec's promises do not hold in a run) and the one verdict that carries them."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from regime_dash.analysis import CheckOptions, Finding, find, verdict
from regime_dash.diag import catalogue as diag
from regime_dash.analysis import view as v


def dead_zone_frame(cycling: bool, start: int = 100, length: int = 1300, steps: int = 1600,
                    max_duration: float = 1000.0) -> pd.DataFrame:
    """A dead zone over ``[start, start+length)``: flag 1/0 cycles (F2 on) or one stretch (F2 off)."""
    flag = np.zeros(steps, np.float32)
    if cycling:
        flag[start:start + length:2] = 1.0  # resurrection: on, off, on, ...
    else:
        flag[start:start + length] = 1.0
    dur = np.zeros(steps, np.float32)
    for i in range(1, steps):
        dur[i] = dur[i - 1] + 1 if flag[i] == 1 else 0
    return pd.DataFrame({"step": np.arange(steps, dtype=np.int64), v.FLAG: flag, v.DURATION: dur,
                         v.TIMEOUT: (dur > max_duration).astype(np.float32),
                         v.MAX_DURATION: np.full(steps, max_duration, np.float32)})


def test_timeout_unreachable_on_a_cycling_dead_zone_longer_than_max_duration():
    found = find(dead_zone_frame(cycling=True))
    assert [f.id for f in found] == ["timeout_unreachable"]
    f = found[0]
    assert f.severity == "fail" and f.spans == [(100, 1398)] and f.steps == [100]
    assert f.evidence["cycles"] == 650 and f.evidence["max_DURATION"] == 1.0 and f.evidence["max_duration"] == 1000.0
    assert f.column == v.DURATION and f.fields == ("max_duration",)
    assert "Theorem 3" in f.message and "1000" in f.message
    doc = f.to_dict()
    assert json.loads(json.dumps(doc)) == doc and doc["spans"] == [[100, 1398]]


def test_timeout_unreachable_is_info_when_the_cycling_dead_zone_ended_within_max_duration():
    # longer than the trap limit, shorter than max_duration, and over: Theorem 3's bound held
    f = find(dead_zone_frame(cycling=True, length=400))[0]
    assert f.severity == "info" and f.spans == [(100, 498)] and "bound held" in f.message
    assert find(dead_zone_frame(cycling=True, length=400), CheckOptions(trap_steps=500)) == []


def test_timeout_unreachable_warns_when_the_run_ends_inside_the_cycling_dead_zone():
    # still cycling at the last row, 400 steps in, max_duration 1000: the data cannot tell
    f = find(dead_zone_frame(cycling=True, length=400, steps=500))[0]
    assert f.severity == "warn" and f.spans == [(100, 498)] and "cannot tell" in f.message
    # the same open dead zone past max_duration: the bound broke inside the run
    assert find(dead_zone_frame(cycling=True, length=400, steps=500, max_duration=300.0))[0].severity == "fail"


def test_no_timeout_unreachable_when_the_dead_zone_does_not_cycle():
    frame = dead_zone_frame(cycling=False)
    assert frame[v.TIMEOUT].max() == 1  # it timed out: the safety net worked
    assert find(frame) == []


def test_verdict_carries_checks_and_findings_and_fails_on_a_fail_finding():
    frame = dead_zone_frame(cycling=True)
    out = verdict(frame)
    assert isinstance(out.findings[0], Finding)
    assert {c.id for c in out.checks} >= {"dead_zone_duration", "timeout_flag"}
    assert out.counts["fail"] == 0 and out.status == "fail" and out.exit_code == 1
    assert out.first_failure is None
    doc = out.to_dict()
    assert doc["status"] == "fail" and doc["findings"][0]["id"] == "timeout_unreachable"
    calm = verdict(dead_zone_frame(cycling=False))
    assert calm.status == "pass" and calm.exit_code == 0 and calm.findings == []


def test_verdict_first_failure_is_the_earliest_failed_check():
    frame = dead_zone_frame(cycling=False)
    frame.loc[700, v.DURATION] = 3.0  # duration counting broken at step 700
    frame.loc[50, v.TIMEOUT] = 1.0  # and an early timeout at step 50
    out = verdict(frame)
    assert {c.id for c in out.failed} >= {"dead_zone_duration", "timeout_flag"}
    assert out.first_failure.id == "timeout_flag" and out.first_failure.first_step == 50


def test_verdict_only_runs_the_ids_asked_for_and_rejects_unknown_ones():
    from regime_dash.errors import ValidationError

    out = verdict(dead_zone_frame(cycling=False), ids=["timeout_flag"])
    assert [c.id for c in out.checks] == ["timeout_flag"]
    with pytest.raises(ValidationError, match="no_such_check"):
        verdict(dead_zone_frame(cycling=False), ids=["no_such_check"])


# ---- kelly_trap_run8: the README's own replay, with F2 on and off ---------------------------------
@pytest.fixture(scope="module")
def run8():
    from regime_dash import RegimeConfig, replay
    from regime_dash.sources import scenarios

    stream = scenarios.make("kelly_trap_run8", steps=1940, accounts=16)
    out = {on: replay(stream, RegimeConfig(resurrection=on)) for on in (True, False)}
    out["across"] = replay(stream, RegimeConfig(duration_across_cycles=True))  # F2 on, the model switch on
    return out


def test_run8_with_resurrection_cycles_and_the_timeout_cannot_fire(run8):
    out = verdict(run8[True])
    (f,) = [f for f in out.findings if f.id == "timeout_unreachable"]
    assert f.severity == "fail" and f.evidence["max_DURATION"] == 1.0 and f.evidence["max_duration"] == 1000.0
    assert f.evidence["cycles"] > 500 and f.evidence["steps"] > 1000
    (trap,) = [c for c in out.checks if c.id == "kelly_trap"]
    (a, b), (fa, fb) = trap.spans[0], f.evidence["span"]
    # the trap is the cycling dead zone (its last kelly_f = 0 row follows the last flagged one)
    assert trap.status == "fail" and len(trap.spans) == 1 and a == fa and b - fb in (0, 1)
    assert trap.first_step == trap.spans[0][0] and out.exit_code == 1


def test_run8_without_resurrection_times_out_and_has_no_timeout_finding(run8):
    out = verdict(run8[False])
    assert "timeout_unreachable" not in {f.id for f in out.findings}
    (trap,) = [c for c in out.checks if c.id == "kelly_trap"]
    assert trap.status == "pass" and trap.evidence["excused_by_timeout"] and "excused" in trap.detail
    assert out.exit_code == 0


def test_run8_with_duration_across_cycles_times_out_at_max_duration_and_the_trap_is_excused(run8):
    frame = run8["across"]
    flag, dur, to = (frame[c].to_numpy() for c in (v.FLAG, v.DURATION, v.TIMEOUT))
    start, first = int(np.argmax(flag == 1)), int(np.argmax(to == 1))
    assert to.any() and run8[True][v.TIMEOUT].max() == 0  # the switch, not the scenario, makes it fire
    # DURATION counted every step of the cycling dead zone: it fires on its (max_duration + 1)-th step
    assert dur[first] == 1001.0 and first - start + 1 == 1001
    assert (flag[start:first] == 0).sum() > 400  # F2 kept cycling the flag all along
    assert frame[diag.SWITCH_COLUMNS["duration_across_cycles"]].eq(1).all()
    out = verdict(frame)
    assert "timeout_unreachable" not in {f.id for f in out.findings}
    checks = {c.id: c for c in out.checks}
    assert checks["kelly_trap"].status == "pass" and checks["kelly_trap"].evidence["excused_by_timeout"]
    # the invariants follow the switch column: DURATION counted across the flag-off rows passes
    assert checks["dead_zone_duration"].status == "pass" and "duration_across_cycles" in checks["dead_zone_duration"].detail
    assert checks["timeout_flag"].status == "pass" and checks["kelly_resurrection"].status == "pass"
    assert out.exit_code == 0


def test_dead_zone_duration_follows_the_model_switch_column(run8):
    from regime_dash.analysis import run_checks

    def status(frame):
        (c,) = run_checks(frame, ids=["dead_zone_duration"])
        return c.status

    spec, across = run8[True], run8["across"]
    col = diag.SWITCH_COLUMNS["duration_across_cycles"]
    # the spec's file claiming the switch ran: its DURATION resets where the model counts on
    assert status(spec) == "pass" and status(spec.assign(**{col: np.float32(1)})) == "fail"
    # the model's file without its switch column: the spec's rule fails it
    assert status(across) == "pass" and status(across.drop(columns=[col])) == "fail"


def test_timeout_unreachable_is_not_claimed_where_duration_was_carried_across_cycles():
    frame = dead_zone_frame(cycling=True, length=400)  # shorter than max_duration: nothing timed out
    assert [f.id for f in find(frame)] == ["timeout_unreachable"]
    carried = frame.copy()
    on = carried[v.FLAG].to_numpy()
    dur = np.zeros(len(on), np.float32)
    for i in range(100, 499):
        dur[i] = dur[i - 1] + 1  # the model's DURATION: the episode's length in steps
    carried[v.DURATION] = dur
    assert find(carried) == []  # the rows show DURATION carried: the timeout was reachable
    assert find(frame.assign(**{diag.SWITCH_COLUMNS["duration_across_cycles"]: np.float32(1)})) == []


# ---- tail_on_drift and the model switch tail_on_deviation ---------------------------------------
def drift_stream(steps: int = 600, accounts: int = 8):
    """A steady drift: the session worst falls by 0.05 a step (after the Welford bootstrap), no shock."""
    from regime_dash import Stream

    rng = np.random.default_rng(0)
    worst = (-0.05 * np.arange(steps)).astype(np.float32)
    worst[:5] = 0.0
    return Stream.make(rewards=(rng.standard_normal((steps, accounts)) * 0.3).astype(np.float32),
                       lots=np.ones((steps, accounts), np.int32), kelly_analytic=np.full(steps, 0.1, np.float32),
                       session_pnl_worst=worst)


def test_steady_drift_is_a_tail_every_step_unless_the_tail_test_is_on_the_deviation():
    from regime_dash import RegimeConfig, replay

    stream = drift_stream()
    literal, deviation = (replay(stream, RegimeConfig(tail_on_deviation=on)) for on in (False, True))
    tails = {name: int((f[v.RECENCY] == 0).sum()) for name, f in (("literal", literal), ("deviation", deviation))}
    assert tails["literal"] > 400 and tails["deviation"] < tails["literal"] // 20
    (f,) = [x for x in find(literal) if x.id == "tail_on_drift"]
    assert f.evidence["longest"] > 100 and "tail_on_deviation" in f.message
    assert "tail_on_drift" not in {x.id for x in find(deviation)}
    # ε recovers and τ is no longer boosted on a drift with the switch on
    assert deviation[v.LIVE].iloc[-1] > literal[v.LIVE].iloc[-1]


def test_tail_on_drift_counts_only_rows_that_ran_the_literal_test():
    rec = np.arange(300, dtype=np.float32)
    rec[100:140] = 0.0
    frame = pd.DataFrame({"step": np.arange(300), v.RECENCY: rec})
    col = diag.SWITCH_COLUMNS["tail_on_deviation"]
    assert [f.id for f in find(frame.assign(**{col: np.float32(0)}))] == ["tail_on_drift"]
    assert find(frame.assign(**{col: np.float32(1)})) == []


# ---- the other findings -------------------------------------------------------------------------
def test_tail_on_drift_fires_on_consecutive_tail_events():
    rec = np.arange(300, dtype=np.float32)
    rec[100:140] = 0.0  # 40 tails in a row: a drift
    rec[200] = 0.0  # one shock: not a drift
    frame = pd.DataFrame({"step": np.arange(300), v.RECENCY: rec})
    (f,) = find(frame)
    assert f.id == "tail_on_drift" and f.spans == [(100, 139)] and f.evidence["longest"] == 40
    assert f.severity == "info"  # the spec's own test, as its code and G22 write it
    assert find(frame.assign(**{v.RECENCY: np.arange(300, dtype=np.float32)})) == []


def test_tail_at_boundary_fires_on_a_tail_right_after_a_reset():
    n = 200
    frame = pd.DataFrame({"step": np.arange(n), "fold": np.r_[np.zeros(100), np.ones(100)].astype(int),
                          v.RECENCY: np.r_[np.arange(100), np.arange(100)].astype(np.float32) + 5})
    assert find(frame) == []
    frame.loc[100, v.RECENCY] = 0.0
    (f,) = find(frame)
    assert f.id == "tail_at_boundary" and f.steps == [100]
    assert f.severity == "warn"  # PREV_WORST_PNL is not in the diag: a real shock looks alike


def test_envelope_decay_horizon_states_three_half_lives():
    n = 600
    env = np.full(n, 1.0)
    env[100:] = 1.0 + 40.0 * (0.99 ** np.arange(n - 100))
    frame = pd.DataFrame({"step": np.arange(n), v.ENVELOPE: env.astype(np.float32),
                          v.DECAY_ALPHA: np.full(n, 0.01, np.float32)})
    (f,) = find(frame)
    assert f.id == "envelope_decay_horizon" and f.severity == "info"
    assert round(f.evidence["half_life"]) == 69 and round(f.evidence["three_half_lives"]) == 207
    assert f.evidence["measured_steps"] == 207 and "500" in f.message


def envelope_frame(rate: float, n: int = 900, peak: int = 100, alpha: float = 0.01, batch_max: bool = False):
    """A resting envelope of 1.0 captured to 41 at ``peak``, then the kernel's decay line
    ``(1 − rate)·ema + rate·max|r|`` in float32 with every batch max at 1.0; the file logs ``alpha``."""
    env = np.ones(n, np.float32)
    env[peak] = 41.0
    r, one = np.float32(rate), np.float32(1.0)
    for i in range(peak + 1, n):
        env[i] = (one - r) * env[i - 1] + r * one
    frame = pd.DataFrame({"step": np.arange(n), v.ENVELOPE: env, v.DECAY_ALPHA: np.full(n, alpha, np.float32)})
    if batch_max:
        frame[diag.INPUT_COLUMNS["batch_max_abs"]] = np.ones(n, np.float32)
    return frame


def test_envelope_decay_horizon_is_info_at_its_configured_rate_with_or_without_the_batch_max():
    for logged in (False, True):
        (f,) = find(envelope_frame(0.01, batch_max=logged))
        assert f.severity == "info" and f.evidence["measured_steps"] in (206, 207), (logged, f)
        assert "divergent_steps" not in f.evidence


def test_envelope_that_falls_faster_than_its_rate_fails_at_its_first_step():
    (f,) = find(envelope_frame(0.05))  # the file says 0.01, the envelope loses 5% a step
    assert f.severity == "fail" and f.evidence["step"] == 101 and "faster than any batch allows" in f.message
    assert f.evidence["divergent_steps"] > 30


def test_envelope_that_decays_too_slowly_warns_without_the_batch_max_and_fails_with_it():
    slow = envelope_frame(0.004)  # 2.5 times slower than the logged 0.01
    (f,) = find(slow)
    assert f.severity == "warn" and f.evidence["measured_steps"] > 1.5 * f.evidence["three_half_lives"]
    assert "batch_max_abs" in f.message
    (f,) = find(envelope_frame(0.004, batch_max=True))
    assert f.severity == "fail" and f.evidence["step"] == 101 and "does not decay at its configured rate" in f.message
    assert f.evidence["expected"] == pytest.approx(0.99 * 41 + 0.01) and f.evidence["logged"] == pytest.approx(0.996 * 41 + 0.004)
    # never decayed inside the run, no batch max: the data cannot tell
    assert find(envelope_frame(0.004, n=300))[0].severity == "warn"


def test_envelope_decay_of_a_replay_logging_its_inputs_is_info_and_one_changed_value_fails_there():
    from regime_dash import RegimeConfig, replay
    from regime_dash.sources import scenarios

    frame = replay(scenarios.make("tail_shock", steps=1000), RegimeConfig(), log_inputs=True)
    (f,) = [x for x in find(frame) if x.id == "envelope_decay_horizon"]
    assert f.severity == "info" and "logged batch max" in f.message
    at = f.evidence["peak_step"] + 40
    row = int(np.flatnonzero(frame["step"].to_numpy() == at)[0])
    bent = frame.copy()
    bent.loc[row, v.ENVELOPE] = np.float32(bent.loc[row, v.ENVELOPE] * np.float32(1.001))
    (g,) = [x for x in find(bent) if x.id == "envelope_decay_horizon"]
    assert g.severity == "fail" and g.evidence["step"] == at


def test_tau_unclamped_when_the_boost_lifts_tau_over_one():
    frame = pd.DataFrame({"step": np.arange(10), v.TAU_MIN_EFF: np.r_[np.full(5, 0.8), np.full(5, 1.2)].astype(np.float32)})
    (f,) = find(frame)
    assert f.id == "tau_unclamped" and f.steps[0] == 5 and f.spans == [(5, 9)]
    assert f.severity == "warn"  # a later clamp in the trainer is not in the diag


def test_flat_sweep_note_names_the_finding_that_explains_it():
    from regime_dash.analysis.verdict import flat_sweep_note

    judged = verdict(dead_zone_frame(cycling=True))
    note = flat_sweep_note([0.0, 0.0, 0.0], ["max_duration"], judged)
    assert note.startswith("A flat line") and "timeout_unreachable" in note
    assert flat_sweep_note([0.0, 1.0], ["max_duration"], judged) is None
    assert "timeout_unreachable" not in flat_sweep_note([2.0, 2.0], ["eps_min"], judged)
