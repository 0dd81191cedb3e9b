"""Episodes, events, summary, the alias table, and every scenario/simulator replay passing every check."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from regime_dash import RegimeConfig, replay
from regime_dash.sources import scenarios
from regime_dash.sources import simulator
from regime_dash.diag.aliases import ALIASES, canonical_frame, parse_alias_json, resolve_columns
from regime_dash.analysis import (boundaries, dead_zone_episodes, diagnose, find_all, floor_spans,
                                  run_checks, summary, tail_events, timeouts, transitions)
from regime_dash.analysis import view as v
from regime_dash.errors import ValidationError
from test_invariants import BOUNDARIES, STEP0, TRANSITION_STEPS, rich_frame, timeout_frame

#: Where the builder in test_invariants puts its dead zones: (first stream row, rows).
DEAD_ZONES = ((200, 60), (700, 150), (1400, 190))


def failures(frame, skip=()):
    return {r.id: r.detail for r in run_checks(frame) if r.status == "fail" and r.id not in skip}


# ---- every scenario and the simulator pass every check ----------------------------------------
def _scenario_steps(name):
    return {"kelly_trap_run8": 1940, "recorded": None}.get(name, 400)


@pytest.mark.parametrize("name", sorted(scenarios.SCENARIOS))
def test_every_scenario_replay_passes_every_check(name):
    if name == "recorded" and not scenarios.SAMPLE_STREAM.exists():
        pytest.skip("the recorded sample stream is not in data/samples/ in this checkout")
    stream = scenarios.make(name, steps=_scenario_steps(name), accounts=None if name == "recorded" else 16)
    frame = replay(stream)
    if name == "kelly_trap_run8":  # F2 on: the dead zone cycles with every account flat, a trap (issue 12)
        assert "kelly_trap" in failures(frame)
        assert failures(frame, skip=("kelly_trap",)) == {}
    else:
        assert failures(frame) == {}
    # without resurrection the invariants still hold; only criterion 1 may (rightly) fail
    assert failures(replay(stream, RegimeConfig(resurrection=False)), skip=("kelly_trap",)) == {}


@pytest.mark.parametrize("name", sorted(simulator.PRESETS))
def test_every_simulator_preset_passes_every_check(name):
    frame = simulator.simulate(name, steps=600, accounts=16).frame()
    assert failures(frame) == {}


def test_kelly_trap_scenario_without_resurrection_times_out_and_is_excused():
    stream = scenarios.make("kelly_trap_run8", steps=2000, accounts=16)
    frame = replay(stream, RegimeConfig(resurrection=False, max_duration=300))
    eps = dead_zone_episodes(frame)
    assert eps["timed_out"].any() and (eps.loc[eps["timed_out"], "ended"] == "timeout").all()
    assert failures(frame) == {}
    (to,) = timeouts(frame).itertuples()
    assert to.duration == 301 and to.max_duration == 300


# ---- dead-zone episodes --------------------------------------------------------------------
def test_resurrection_cycles_merge_into_one_episode_per_dead_zone():
    eps = dead_zone_episodes(rich_frame())
    assert len(eps) == len(DEAD_ZONES)
    for e, (a, n) in zip(eps.itertuples(), DEAD_ZONES):
        # the observer reads the prior kelly_f: the flag first rises one row after the zone
        # starts, then resurrection makes it 1, 0, 1, 0, ... until an account opens again
        assert e.start == STEP0 + a + 1
        assert e.end == STEP0 + a + n - 1 - (n % 2 == 1)
        assert e.cycles == e.on_steps == (e.end - e.start) // 2 + 1
        assert e.steps == e.end - e.start + 1
        assert e.max_duration == 1 and e.ended == "exit" and not e.timed_out
    assert list(eps["phase"]) == ["train", "eval", "train"]
    assert list(eps["fold"]) == [0, 0, 1]


def test_without_merging_each_cycle_is_its_own_episode():
    f = rich_frame()
    eps = dead_zone_episodes(f, merge_gap=0)
    assert len(eps) == int((f[v.FLAG] == 1).sum()) and (eps["cycles"] == 1).all()


def test_timeouts_and_episode_end_reasons_without_resurrection():
    g = timeout_frame()
    eps = dead_zone_episodes(g)
    assert list(eps["ended"]) == ["exit", "timeout", "timeout"]
    assert list(eps["cycles"]) == [1, 1, 1]
    assert list(eps["on_steps"]) == [n - 1 for _, n in DEAD_ZONES]
    to = timeouts(g)
    # duration starts at 1 one row after the zone starts; the flag fires at duration 81 > 80
    assert list(to["step"]) == [STEP0 + a + 1 + 80 for a, n in DEAD_ZONES if n - 1 > 80]
    assert (to["duration"] == 81).all() and (to["max_duration"] == 80).all()


def test_an_episode_still_open_at_the_end_of_the_run_ends_there():
    f = rich_frame()
    a, n = DEAD_ZONES[2]
    cut = f.iloc[: a + 101]  # the run stops inside the third dead zone
    last = dead_zone_episodes(cut).iloc[-1]
    assert last["ended"] == "end_of_run" and last["start"] == STEP0 + a + 1


def test_episode_finder_names_missing_fields_and_checks_merge_gap():
    with pytest.raises(ValidationError, match="dead_zone.flag"):
        dead_zone_episodes(rich_frame().drop(columns=[v.FLAG]))
    with pytest.raises(ValidationError, match="-1"):
        dead_zone_episodes(rich_frame(), merge_gap=-1)


# ---- events ----------------------------------------------------------------------------------
def test_tail_events_report_the_shocks_with_their_size_and_sigma():
    f = rich_frame()
    tails = tail_events(f)
    assert len(tails) == int((f[v.RECENCY] == 0).sum())
    shocks = [STEP0 + t for t in (300, 950, 1500, 2100)]
    assert set(shocks) <= set(tails["step"])
    big = tails.set_index("step").loc[shocks]
    assert np.allclose(big["abs_dworst"], 60.0, atol=5.0)
    # the definition of a tail: |Δworst| > threshold·σ, where Δworst is known
    known = tails["abs_dworst"].notna()
    assert known.all()
    assert (tails.loc[known, "abs_dworst"] > tails.loc[known, "threshold"]).all()
    assert (tails["ratio"] > 3.0).all()


def test_floor_spans_start_at_the_shock_and_vanish_without_f4():
    stream = scenarios.make("tail_shock", steps=400, accounts=64)
    t_shock = int(stream.step[400 // 2])
    spans = floor_spans(replay(stream))
    assert len(spans) == 1 and spans["start"].iloc[0] == t_shock
    assert spans["peak_envelope"].iloc[0] == pytest.approx(19.45, rel=1e-6)
    assert spans["ema_sigma"].iloc[0] < 1.5
    assert len(floor_spans(replay(stream, RegimeConfig(envelope=False)))) == 0


def test_transitions_ramp_from_each_boundary_and_a_cut_ramp_is_incomplete():
    f = rich_frame()
    tr = transitions(f)
    assert list(tr["start"]) == [STEP0 + b for b in BOUNDARIES]
    assert (tr["start_value"] == TRANSITION_STEPS - 1).all() and (tr["steps"] == TRANSITION_STEPS).all()
    assert (tr["end_value"] == -1).all() and tr["completed"].all()
    cut = transitions(f.iloc[: BOUNDARIES[0] + 50])
    assert len(cut) == 1 and not cut["completed"].iloc[0] and cut["end_value"].iloc[0] == TRANSITION_STEPS - 50


def test_boundaries_table_gives_steps_and_reasons():
    b = boundaries(rich_frame())
    assert list(b["step"]) == [STEP0 + x for x in BOUNDARIES]
    assert all({"phase", "recency_sentinel", "transition_restart"} <= set(r.split(",")) for r in b["reasons"])
    assert "fold" in b["reasons"].iloc[1] and "fold" not in b["reasons"].iloc[0]


def test_summary_counts_match_the_frame():
    f = rich_frame()
    s = summary(f)
    assert s["rows"] == len(f) and s["first_step"] == STEP0 and s["boundaries"] == len(BOUNDARIES)
    assert s["dead_zone_steps"] == int((f[v.FLAG] == 1).sum()) and s["dead_zone_episodes"] == 3
    assert s["tail_events"] == len(tail_events(f)) and s["timeouts"] == 0
    assert s["kelly_min"] == 0.0 and s["kelly_mean"] == pytest.approx(float(f[v.KELLY].astype(float).mean()))
    assert s["sigma_max"] == pytest.approx(25.0) and s["longest_duration"] == 1.0
    assert 0 < s["floor_active_steps"] <= len(f)
    assert summary(timeout_frame())["longest_duration"] == DEAD_ZONES[2][1] - 1
    bare = summary(f[["step", v.KELLY]])
    assert bare["dead_zone_steps"] is None and bare["timeouts"] is None and bare["kelly_min"] == 0.0


def test_find_all_skips_finders_whose_fields_are_missing():
    episodes, events, skipped = find_all(rich_frame().drop(columns=[v.RECENCY, v.TIMEOUT]))
    assert "dead_zone" in episodes and "transitions" in events
    assert "tail.recency" in skipped["tail"] and "timeout_flag" in skipped["timeouts"]


def test_report_to_dict_is_plain_json():
    import json

    doc = diagnose(timeout_frame()).to_dict()
    text = json.dumps(doc, allow_nan=False)
    back = json.loads(text)
    assert [c["id"] for c in back["checks"]][:3] == ["flag_binary", "flat_count_range", "dead_zone_duration"]
    fields = {e["field"]: e for e in back["coverage"]["fields"]}
    assert set(fields) == set(timeout_frame().columns) - {"step", "fold", "phase"}
    assert fields[v.DURATION]["status"] == "rederived" and "rederive.duration" in fields[v.DURATION]["checks"]
    assert set(back["checks"][0]) == {"id", "status", "violations", "first_step", "steps", "spans", "column",
                                      "detail", "evidence"}
    assert {"status", "counts", "first_failure", "findings"} <= set(back)
    assert len(back["episodes"]["dead_zone"]) == 3 and len(back["events"]["timeouts"]) == 2


# ---- aliases -------------------------------------------------------------------------------
def _renamed(frame, strip=True):
    """Columns as another trainer might write them: no ``risk_stack.`` prefix, ``kelly_f``, old v9 name."""
    ren = {c: c[len("risk_stack."):] for c in frame.columns if strip and c.startswith("risk_stack.")}
    ren[v.KELLY] = "kelly_f"
    ren[v.REMAINING] = "risk_stack.eval_warmup.remaining"
    ren["step"] = "global_step"
    return frame.rename(columns=ren)


def test_alias_table_restores_canonical_names_and_checks_agree():
    f = rich_frame()
    odd = _renamed(f)
    assert v.FLAG not in odd.columns
    assert {r.id: r.status for r in run_checks(odd)}["dead_zone_duration"] == "skip"
    back = canonical_frame(odd)
    assert set(back.columns) == set(f.columns)
    assert back.attrs["aliases_applied"]["kelly_f"] == v.KELLY
    assert back.attrs["aliases_applied"]["risk_stack.eval_warmup.remaining"] == v.REMAINING
    assert {r.id: r.status for r in run_checks(back)} == {r.id: r.status for r in run_checks(f)}


def test_slot_names_are_aliases_too():
    f = rich_frame()[["step", v.FLAG, v.DURATION]].rename(
        columns={v.FLAG: "RL_REGIME_DEAD_ZONE_FLAG_INDEX", v.DURATION: "dead_zone_duration"})
    assert list(canonical_frame(f).columns) == ["step", v.FLAG, v.DURATION]


def test_canonical_column_present_is_never_replaced():
    f = pd.DataFrame({"step": [0, 1], v.KELLY: [0.5, 0.5], "kelly_f": [9.0, 9.0]})
    out = canonical_frame(f)
    assert list(out[v.KELLY]) == [0.5, 0.5] and "kelly_f" in out.columns


def test_user_aliases_extend_and_take_precedence():
    f = pd.DataFrame({"step": [0, 1], "dz": [0.0, 1.0], "dead_zone_flag": [1.0, 1.0], "my.signal": [1, 2]})
    out = canonical_frame(f, {v.FLAG: "dz", "custom.signal": ["nope", "my.signal"]})
    assert list(out[v.FLAG]) == [0.0, 1.0] and "dead_zone_flag" in out.columns
    assert list(out["custom.signal"]) == [1, 2]
    assert resolve_columns(["kelly_f"]) == {"kelly_f": v.KELLY}
    assert all(c not in alts for c, alts in ALIASES.items())


@pytest.mark.parametrize("bad", [{v.FLAG: 3}, {v.FLAG: ["ok", ""]}, {"": "x"}])
def test_bad_user_aliases_raise_naming_the_value(bad):
    with pytest.raises(ValidationError) as exc:
        canonical_frame(pd.DataFrame({"step": [0]}), bad)
    assert repr(list(bad.values())[0]) in str(exc.value) or "''" in str(exc.value)


def test_alias_json_file():
    assert parse_alias_json('{"risk_stack.popart.sigma": ["sig", "s"]}') == {"risk_stack.popart.sigma": ("sig", "s")}
    with pytest.raises(ValidationError, match="not JSON"):
        parse_alias_json("{nope")
    with pytest.raises(ValidationError, match="list"):
        parse_alias_json('["a"]')
