"""Findings (where the spec's promises do not hold in a run) and the one verdict that carries them."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from regime_dash.analysis import CheckOptions, Finding, find, verdict
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


def test_timeout_unreachable_warns_when_the_cycling_is_longer_than_the_trap_limit_only():
    f = find(dead_zone_frame(cycling=True, length=400))[0]
    assert f.severity == "warn" and f.spans == [(100, 498)]
    assert find(dead_zone_frame(cycling=True, length=400), CheckOptions(trap_steps=500)) == []


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
    from regime_dash import RegimeConfig, replay, scenarios

    stream = scenarios.make("kelly_trap_run8", steps=1940, accounts=16)
    return {on: replay(stream, RegimeConfig(resurrection=on)) for on in (True, False)}


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


# ---- the other findings -------------------------------------------------------------------------
def test_tail_on_drift_fires_on_consecutive_tail_events():
    rec = np.arange(300, dtype=np.float32)
    rec[100:140] = 0.0  # 40 tails in a row: a drift
    rec[200] = 0.0  # one shock: not a drift
    frame = pd.DataFrame({"step": np.arange(300), v.RECENCY: rec})
    (f,) = find(frame)
    assert f.id == "tail_on_drift" and f.spans == [(100, 139)] and f.evidence["longest"] == 40
    assert find(frame.assign(**{v.RECENCY: np.arange(300, dtype=np.float32)})) == []


def test_tail_at_boundary_fires_on_a_tail_right_after_a_reset():
    n = 200
    frame = pd.DataFrame({"step": np.arange(n), "fold": np.r_[np.zeros(100), np.ones(100)].astype(int),
                          v.RECENCY: np.r_[np.arange(100), np.arange(100)].astype(np.float32) + 5})
    assert find(frame) == []
    frame.loc[100, v.RECENCY] = 0.0
    (f,) = find(frame)
    assert f.id == "tail_at_boundary" and f.steps == [100]


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


def test_tau_unclamped_when_the_boost_lifts_tau_over_one():
    frame = pd.DataFrame({"step": np.arange(10), v.TAU_MIN_EFF: np.r_[np.full(5, 0.8), np.full(5, 1.2)].astype(np.float32)})
    (f,) = find(frame)
    assert f.id == "tau_unclamped" and f.steps[0] == 5 and f.spans == [(5, 9)]


def test_flat_sweep_note_names_the_finding_that_explains_it():
    from regime_dash.analysis.verdict import flat_sweep_note

    judged = verdict(dead_zone_frame(cycling=True))
    note = flat_sweep_note([0.0, 0.0, 0.0], ["max_duration"], judged)
    assert note.startswith("A flat line") and "timeout_unreachable" in note
    assert flat_sweep_note([0.0, 1.0], ["max_duration"], judged) is None
    assert "timeout_unreachable" not in flat_sweep_note([2.0, 2.0], ["eps_min"], judged)
