"""regime_dash.runs.sensitivity, its CLI, its figures and its benchmark, on Run #8's trap."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from regime_dash import RegimeConfig, replay
from regime_dash.sources import scenarios
from regime_dash.analysis.findings import find
from regime_dash.cli import main
from regime_dash.core.config import SWITCHES, field_names
from regime_dash.engine.summary import METRICS, summarize_frame
from regime_dash.errors import ConfigError, ValidationError
from regime_dash.runs.sensitivity import explain, field_values, format_value, sensitivity

F2_OFF = RegimeConfig(resurrection=False)


@pytest.fixture(scope="module")
def trap():
    return scenarios.make("kelly_trap_run8")


@pytest.fixture(scope="module")
def on(trap):
    """Resurrection on (the spec's defaults): the dead zone cycles, the timeout cannot fire."""
    return sensitivity(trap)


@pytest.fixture(scope="module")
def off(trap):
    return sensitivity(trap, F2_OFF)


# ---- the values swept ----------------------------------------------------------------------
def test_field_values_cover_the_slider_domain_and_the_base():
    base = RegimeConfig()
    for name in field_names():
        values = field_values(name, base)
        if name in SWITCHES:
            assert values == [False, True]
            continue
        spec = next(s for s in RegimeConfig.field_specs() if s.name == name)
        lo, hi, step = spec.lo, spec.hi, spec.step
        assert values[0] == lo and values[-1] == hi, name
        assert getattr(base, name) in values, name
        assert values == sorted(set(values)), name
        if step >= 1:
            assert all(v == round(v) for v in values), name
    # popart_alpha spans five decades: log spacing, so most values sit below a tenth of the top
    pa = field_values("popart_alpha", base)
    assert sum(v < 0.01 for v in pa) >= len(pa) // 2
    assert len(field_values("max_duration", base, points=3)) == 4  # 0, 5000, 10000 and the base 1000
    with pytest.raises(ValidationError, match="points must be an int >= 2, got 1"):
        field_values("max_duration", base, points=1)
    with pytest.raises(ConfigError, match="'bogus'"):
        field_values("bogus", base)


# ---- the acceptance lines ---------------------------------------------------------------------
def test_max_duration_has_no_effect_under_resurrection_and_a_finding_says_why(on):
    assert "max_duration" in on.no_effect_fields
    assert on.moves("max_duration") == {}
    (entry,) = [n for n in on.no_effect if n.field == "max_duration"]
    # only max_duration = 0 (a timeout on the first dead-zone step) moves anything, and says so
    assert entry.except_at == 0.0
    assert entry.edge_deltas["timeout_steps"] > 0
    assert [f["id"] for f in entry.findings] == ["timeout_unreachable"]
    assert entry.findings[0]["evidence"]["max_DURATION"] <= 1
    assert "timeout_unreachable" in entry.explanation() and "max_duration=0" in entry.explanation()
    assert "max_duration" not in [f for f, _ in on.ranking]


def test_max_duration_moves_the_timeout_metrics_without_resurrection(off):
    assert "max_duration" not in off.no_effect_fields
    moved = off.moves("max_duration")
    assert {"timeouts", "timeout_steps"} <= set(moved)
    assert "max_duration" in [f for f, _ in off.ranking]
    # no finding claims the timeout is unreachable when it fires
    assert all(f["id"] != "timeout_unreachable" for f in off.findings)


def test_effects_are_the_replays_of_the_extreme_configs(trap, off):
    e = off.effects.set_index(["field", "metric"])
    for name, metric in (("max_duration", "timeout_steps"), ("resurrection", "dead_zone_steps"),
                         ("envelope_decay_alpha", "floor_active_steps")):
        row = e.loc[(name, metric)]
        for value, want in ((row["at_low"], row["low"]), (row["at_high"], row["high"])):
            got = summarize_frame(replay(trap, F2_OFF.replace(**{name: value}), engine="fast"))[metric]
            assert got == want, (name, metric, value)
        assert row["span"] == row["high"] - row["low"] > 0
    assert e.loc[("max_duration", "timeout_steps"), "base"] == \
        summarize_frame(replay(trap, F2_OFF, engine="fast"))["timeout_steps"]


def test_shares_and_ranking(on):
    assert on.effects["share"].between(0, 1).all()
    moving = on.effects[~on.effects["field"].isin(on.no_effect_fields)]
    for metric, rows in moving.groupby("metric"):
        if rows["span"].max() > 0:
            assert rows["share"].max() == 1.0, metric
            top = rows.loc[rows["share"].idxmax()]
            assert (rows["share"] == rows["span"] / top["span"]).all(), metric
    # max_duration = 0 moves timeout_steps further than anything, but a no-effect field scores nothing
    quiet = on.effects[on.effects["field"] == "max_duration"].set_index("metric")
    assert quiet.loc["timeout_steps", "span"] > 0 and (quiet["share"] == 0).all()
    scores = [s for _, s in on.ranking]
    assert scores == sorted(scores, reverse=True)
    assert on.ranking[0][0] == "resurrection"  # F2 off undoes the whole trap scenario
    ranked = {f for f, _ in on.ranking}
    assert ranked.isdisjoint(on.no_effect_fields)
    assert ranked | set(on.no_effect_fields) == set(field_names())


def test_a_field_that_never_moves_anything_is_no_effect_without_an_edge(on):
    # Run #8 has no fold boundary, so the v9 transition never starts
    (entry,) = [n for n in on.no_effect if n.field == "transition_steps"]
    assert entry.except_at is None and entry.edge_deltas == {}
    sweep = on.field_sweep("transition_steps")
    assert len(sweep) > 2
    assert (sweep[list(METRICS)].nunique() == 1).all()


def test_pairs_of_the_top_fields_and_their_interaction(trap):
    r = sensitivity(trap, F2_OFF, fields=["resurrection", "max_duration", "transition_steps"],
                    pair_fields=2, pair_points=4)
    assert [f for f, _ in r.ranking] == ["resurrection", "max_duration"]
    sizes = r.pair_table.groupby(["field_a", "field_b"]).size()
    assert sizes.to_dict() == {("resurrection", "max_duration"): 2 * 4}
    # F2 on removes every timeout that max_duration sets up: the two do not add up
    pair = r.pairs.set_index("metric")
    assert pair.loc["timeout_steps", "interaction"] > 0
    grid = r.pair_table.set_index(["resurrection", "max_duration"])["timeout_steps"]
    assert grid.loc[(True, 1000.0)] == 0 and grid.loc[(False, 1000.0)] > 0
    assert 1000.0 in set(r.pair_table["max_duration"])  # the base value is always in the grid
    assert pair.loc["sigma_max", "interaction"] == 0  # neither touches σ


def test_values_the_config_rejects_are_skipped_with_the_reason(on):
    eps = [(v, m) for f, v, m in on.skipped if f == "eps_min"]
    assert eps and all(v > 0.5 for v, _ in eps)
    assert all(f"eps_min={v!r}" in m and "eps_max=0.5" in m for v, m in eps)
    assert not (on.oat["eps_min"] > on.oat["eps_max"]).any()


def test_bad_arguments_raise_our_errors(trap):
    with pytest.raises(ConfigError, match="unknown config field"):
        sensitivity(trap, fields=["max_duration", "bogus"])
    with pytest.raises(ConfigError, match="base must be a RegimeConfig"):
        sensitivity(trap, {"max_duration": 10})
    with pytest.raises(ValidationError, match="pair_points must be an int >= 2"):
        sensitivity(trap, pair_points=1)
    with pytest.raises(ValidationError, match="unknown config field 'nope'"):
        sensitivity(trap, fields=["max_duration"], pair_fields=0).field_sweep("nope")


def test_progress_is_monotone_and_ends_at_one(trap):
    seen = []
    sensitivity(trap, fields=["max_duration", "envelope"], progress=lambda f, text: seen.append((f, text)))
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[0] == 0.0 and fractions[-1] == 1.0
    assert all(isinstance(t, str) and t for _, t in seen)


def test_to_dict_is_plain_json(on):
    doc = json.loads(json.dumps(on.to_dict(), allow_nan=False))
    assert doc["metrics"] == list(METRICS)
    assert set(doc["fields"]) == set(field_names())
    assert doc["fields"]["max_duration"]["moves"] == {}
    assert doc["fields"]["resurrection"]["values"] == [False, True]
    assert [n["field"] for n in doc["no_effect"]] == on.no_effect_fields
    assert doc["replays"] == len(on.oat) + len(on.pair_table)
    assert {p["field_a"] for p in doc["pairs"]} <= {f for f, _ in on.ranking}


def test_explain_matches_findings_by_their_fields(trap):
    frame = replay(trap, RegimeConfig(), engine="fast")
    found = find(frame)
    assert [f.id for f in found if "max_duration" in f.fields] == ["timeout_unreachable"]
    why = explain(["max_duration", "eps_max"], found)
    assert [d["id"] for d in why["max_duration"]] == ["timeout_unreachable"]
    assert why["eps_max"] == ()


def test_format_value():
    assert format_value(True) == "true" and format_value(np.bool_(False)) == "false"
    assert format_value(1000.0) == "1000" and format_value((0.6, 0.5)) == "(0.6, 0.5)"


# ---- CLI -------------------------------------------------------------------------------
def test_cli_json_acceptance(capsys):
    assert main(["sensitivity", "--scenario", "kelly_trap_run8", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (entry,) = [n for n in doc["no_effect"] if n["field"] == "max_duration"]
    assert [f["id"] for f in entry["findings"]] == ["timeout_unreachable"]
    assert main(["sensitivity", "--scenario", "kelly_trap_run8", "--set", "resurrection=false", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "max_duration" not in [n["field"] for n in doc["no_effect"]]
    assert {"timeouts", "timeout_steps"} <= set(doc["fields"]["max_duration"]["moves"])


def test_cli_text_report(capsys):
    assert main(["sensitivity", "--scenario", "kelly_trap_run8", "--fields", "max_duration,resurrection,eps_min",
                 "--points", "5", "--pairs", "2"]) == 0
    out = capsys.readouterr().out
    assert "sensitivity of kelly_trap_run8 (3000 steps × 128 accounts), base: the spec's defaults" in out
    assert "no effect here:\n  max_duration" in out and "timeout_unreachable" in out
    assert "resurrection × eps_min" in out
    assert "eps_min=0.75: eps_min=0.75 is greater than eps_max=0.5" in out


def test_cli_stream_and_simulate_sources(tmp_path, capsys):
    path = tmp_path / "s.npz"
    scenarios.make("tail_shock", steps=300, accounts=16).save(path)
    assert main(["sensitivity", "--stream", str(path), "--fields", "tail_sigma_threshold", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["steps"] == 300 and doc["accounts"] == 16
    assert "tail_events" in doc["fields"]["tail_sigma_threshold"]["moves"]
    assert main(["sensitivity", "--simulate", "calm", "--steps", "200", "--accounts", "8",
                 "--fields", "envelope", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["steps"] == 200 and doc["accounts"] == 8


@pytest.mark.parametrize("argv, message", [
    (["--set", "eps_min=0.9"], "eps_min=0.9 is greater than eps_max=0.5"),
    (["--set", "max_duration=-5"], "max_duration=-5.0 must be a whole number"),
    (["--fields", "bogus"], "unknown config field(s) ['bogus']"),
    (["--fields", " , "], "--fields ' , ' names no field"),
    (["--points", "1"], "points must be an int >= 2, got 1"),
])
def test_cli_bad_input_exits_2_with_a_message(argv, message, capsys):
    assert main(["sensitivity", "--scenario", "kelly_trap_run8", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err


# ---- figures ---------------------------------------------------------------------------
def test_tornado_bars_span_low_to_high_from_the_base(off):
    figures = pytest.importorskip("regime_dash.figures.sensitivity")
    fig = figures.tornado(off.effects, "timeout_steps")
    (bar,) = fig.data
    rows = off.effects[(off.effects["metric"] == "timeout_steps") & (off.effects["span"] > 0)]
    assert list(bar.y) == list(rows.sort_values("span", kind="stable")["field"])
    assert list(bar.customdata) == list(bar.y)
    by = rows.set_index("field")
    for name, width, start in zip(bar.y, bar.x, bar.base):
        assert width == by.loc[name, "high"] - by.loc[name, "low"]
        assert start == by.loc[name, "low"] - by.loc[name, "base"]
    assert "max_duration" in bar.y
    assert "max_duration" not in figures.tornado(off.effects, "timeout_steps", exclude=["max_duration"]).data[0].y
    with pytest.raises(ValidationError, match="no column 'span'"):
        figures.tornado(off.effects.drop(columns="span"), "timeout_steps")


def test_field_sweep_draws_one_panel_per_metric(on):
    figures = pytest.importorskip("regime_dash.figures.sensitivity")
    table = on.field_sweep("max_duration")
    fig = figures.field_sweep(table, "max_duration", ["timeout_steps", "dead_zone_steps"])
    assert len(fig.data) == 2
    np.testing.assert_array_equal(fig.data[0].x, np.sort(table["max_duration"].to_numpy()))
    assert fig.data[0].y[0] > 0 and set(fig.data[0].y[1:]) == {0.0}  # only max_duration = 0 times out
    fig = figures.field_sweep(on.field_sweep("resurrection"), "resurrection", ["timeout_steps"])
    assert list(fig.data[0].x) == ["false", "true"]
    with pytest.raises(ValidationError, match="no metric"):
        figures.field_sweep(table, "max_duration", [])


# ---- benchmark -------------------------------------------------------------------------
def test_bench_sensitivity_reports_time_and_ratio(tmp_path, capsys):
    from regime_dash.benchmarks import sensitivity as bench

    out = tmp_path / "b.json"
    assert main(["bench", "sensitivity", "--repeats", "1", "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["steps"] == 3000 and r["accounts"] == 128 and r["engine"] == "fast-cpu"
    assert len(r["sensitivity_runs"]) == len(r["single_replay_runs"]) == 1
    assert r["ratio_vs_single_replay"] == pytest.approx(r["sensitivity_s"] / r["single_replay_s"])
    assert r["met"] == (r["sensitivity_s"] <= bench.TARGET_S)
    assert "max_duration" in r["no_effect"]
    assert "ratio sensitivity / single replay" in capsys.readouterr().out
    with pytest.raises(ValidationError, match="repeats must be an int >= 1"):
        bench.run(repeats=0)


def test_oat_table_marks_the_varied_field(on):
    assert pd.isna(on.oat["field"].iloc[0])
    base = RegimeConfig().as_dict()
    for row in on.oat.iloc[1:].to_dict("records"):
        differs = [n for n in field_names() if row[n] != base[n]]
        assert differs == [row["field"]], row["field"]
