"""The repair search (``regime_dash.runs.repair``, ``regime_dash.modules.repair``, ``repair`` on the CLI).

Every candidate called passing is replayed again here, from scratch, and judged by the
verdict ``check`` gives: it must fail nothing. Run #8 is repaired on a short stream; a
re-derivation failure is refused as one config cannot help; a domain with no passing
config says so and shows the closest; a seed gives the same table; bad ``--fields`` and
``--set`` values are errors naming the value.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from regime_dash.analysis.verdict import verdict
from regime_dash.cli import main
from regime_dash.core.config import RegimeConfig
from regime_dash.diag import catalogue as diag
from regime_dash.engine import replay
from regime_dash.errors import ConfigError, ValidationError
from regime_dash.runs.repair import failures as repair_failures
from regime_dash.runs.repair import flow, logged_config, repair, repair_run
from regime_dash.runs.repair.space import Axis, SearchSpace, parse_fields, parse_held
from regime_dash.sources import scenarios

#: Run #8 at its shortest (the trap is 1,737 steps): a few thousand steps, few accounts.
STEPS, ACCOUNTS = 2000, 8


@pytest.fixture(scope="module")
def run8():
    return scenarios.make("kelly_trap_run8", steps=STEPS, accounts=ACCOUNTS)


@pytest.fixture(scope="module")
def repaired(run8):
    return repair(run8, trials=32, batch=16, seed=3, top=3, verify=3)


def _fresh_verdict(stream, config):
    """A replay made here, on the reference engine, and its verdict: independent of the search's own."""
    return verdict(replay(stream, config, engine="reference"))


# ---- Run #8 ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_run8_gets_a_verified_passing_config(repaired):
    assert repaired.status == "passing", repaired.message
    best = repaired.candidates[0]
    assert best.passing and best.verified and best.engine == "reference"
    assert repaired.before["criterion.kelly_trap"] == "fail" and best.after["criterion.kelly_trap"] == "pass"
    assert {f.id for f in repaired.failures} == {"kelly_trap", "timeout_unreachable"}
    assert all(f.cause == repair_failures.CONFIG for f in repaired.failures)
    assert repaired.exit_code == 0
    assert len(repaired.candidates) >= 3


@pytest.mark.slow
def test_every_candidate_called_passing_passes_check_after_a_fresh_replay(run8, repaired):
    passing = [c for c in repaired.candidates if c.passing]
    assert passing
    for c in passing:
        judged = _fresh_verdict(run8, c.config)
        assert judged.ok, (c.changes_text(), [x.id for x in judged.failed])
    # and a candidate not called passing either failed its full replay or was never replayed
    for c in repaired.candidates:
        assert c.passing == (c.verified and not c.failures)


@pytest.mark.slow
def test_candidates_are_ranked_passing_first_and_nearest_first(repaired):
    passing = [c for c in repaired.candidates if c.passing]
    assert repaired.candidates[:len(passing)] == passing
    assert passing[0].distance == min(c.distance for c in passing)
    # the base config (the failure itself) is no candidate
    assert all(c.changes for c in repaired.candidates)


@pytest.mark.slow
def test_the_screen_leaves_out_fields_that_move_nothing(repaired):
    assert "fused_mirror_tau_boost" in repaired.screened_out  # read by the fused path only
    assert "fused_mirror_tau_boost" not in repaired.space.names
    assert "resurrection" in repaired.space.names


@pytest.mark.slow
def test_a_failure_no_sweep_metric_predicts_is_judged_by_full_replays(run8, monkeypatch):
    from regime_dash.runs.repair import targets

    monkeypatch.setattr(targets, "PREDICTORS", {})
    result = repair(run8, fields=["resurrection", "duration_across_cycles"], trials=4, batch=4, seed=0, top=2,
                    verify=0)
    assert result.unpredicted == ["kelly_trap", "timeout_unreachable"] and result.targets == []
    assert result.engine == "reference" and result.status == "passing"
    assert all(c.verified for c in result.candidates)  # verify=0: every evaluation was already a full replay


# ---- honest answers -------------------------------------------------------------------------
def _corrupted_sigma_frame():
    frame = replay(scenarios.make("tail_shock", steps=400, accounts=8), RegimeConfig(), engine="reference")
    frame.loc[200, diag.SIGMA] = frame.loc[200, diag.SIGMA] * 1.5  # a logged output the formula does not give
    return frame


def test_a_rederivation_failure_is_refused_as_config_cannot_help():
    result = repair_run(_corrupted_sigma_frame())
    assert result.status == "config_cannot_help"
    assert "rederive.sigma" in result.message and "kernel or logging fault" in result.message
    assert [f.cause for f in result.failures if f.id == "rederive.sigma"] == [repair_failures.FAULT]
    assert result.candidates == [] and result.searched == 0
    assert result.exit_code == 1


def test_a_rederivation_failure_on_the_cli_names_it(tmp_path, capsys):
    path = tmp_path / "run.parquet"
    _corrupted_sigma_frame().to_parquet(path)
    assert main(["repair", str(path), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "config_cannot_help" and "rederive.sigma" in doc["message"]


def test_a_module_check_of_a_stored_run_points_at_the_module_search(sp14):
    m, stream = sp14
    result = repair_run(m.replay(stream, None, "reference"))
    assert result.status == "config_cannot_help" and "repair --module" in result.message
    assert [f.cause for f in result.failures if f.id == "sp14.var_aux_producer"] == [repair_failures.MODULE]


def test_a_stored_run_without_its_stream_asks_for_stream(run8):
    frame = replay(run8, RegimeConfig(), engine="fast")
    result = repair_run(frame)
    assert result.status == "needs_stream" and "--stream" in result.message
    assert {f.id for f in result.failures} == {"kelly_trap", "timeout_unreachable"}
    assert result.exit_code == 2


@pytest.mark.slow
def test_a_stored_run_with_its_stream_is_repaired_from_its_logged_config(run8, tmp_path, capsys):
    run = tmp_path / "run.parquet"
    replay(run8, RegimeConfig(eps_min=0.1), engine="fast").to_parquet(run)
    stream = run8.save(tmp_path / "stream.npz")
    assert main(["repair", str(run), "--json"]) == 2  # no stream: it asks for one
    assert json.loads(capsys.readouterr().out)["status"] == "needs_stream"
    argv = ["repair", str(run), "--stream", str(stream), "--fields", "max_duration,resurrection", "--trials", "6",
            "--batch", "6", "--top", "1", "--verify", "1", "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "passing" and doc["candidates"][0]["passing"]
    # the search started from the run's logged config: eps_min stays at the run's 0.1 (its float32)
    assert doc["candidates"][0]["config"]["eps_min"] == float(np.float32(0.1))
    assert "eps_min" not in doc["candidates"][0]["changes"]


def test_an_already_passing_config_has_nothing_to_repair(run8):
    result = repair(run8, RegimeConfig(resurrection=False))
    assert result.status == "already_passes" and result.candidates == []
    assert result.exit_code == 0


@pytest.mark.slow
def test_an_impossible_domain_says_none_passes_and_shows_the_closest(run8):
    # ε's ramp moves no timeout: no value of it clears the trap
    result = repair(run8, fields=["eps_min", "n_recovery"], trials=12, batch=6, seed=0, top=2, verify=2)
    assert result.status == "none_passes"
    assert "no config found in the searched domain passes" in result.message
    assert result.candidates and not any(c.passing for c in result.candidates)
    closest = result.candidates[0]
    assert closest.verified and "kelly_trap" in closest.failures
    assert closest.changes_text() in result.message
    assert result.exit_code == 1
    judged = _fresh_verdict(run8, closest.config)  # and it does fail
    assert not judged.ok


def test_logged_config_reads_the_run_config_back():
    config = RegimeConfig(max_duration=300, eps_min=0.1, resurrection=False)
    frame = replay(scenarios.make("calm", steps=50, accounts=4), config, engine="reference")
    got, unlogged = logged_config(frame)
    assert got.to_isv() == {k: float(np.float32(v)) for k, v in config.to_isv().items()}
    assert got.resurrection is False and unlogged == []


# ---- reproducible -----------------------------------------------------------------------------
@pytest.mark.slow
def test_the_same_seed_gives_the_same_table(run8):
    args = dict(fields=["max_duration", "eps_max", "resurrection"], trials=16, batch=8, top=3, verify=1)
    a, b = repair(run8, seed=11, **args), repair(run8, seed=11, **args)
    assert a.table().equals(b.table())
    assert [c.config for c in a.candidates] == [c.config for c in b.candidates]


@pytest.mark.slow
def test_the_cli_json_is_reproducible_with_a_seed(capsys):
    argv = ["repair", "--scenario", "kelly_trap_run8", "--steps", str(STEPS), "--accounts", str(ACCOUNTS),
            "--fields", "max_duration,resurrection", "--trials", "8", "--batch", "4", "--seed", "5",
            "--top", "1", "--verify", "1", "--json"]
    docs = []
    for _ in range(2):
        assert main(argv) == 0
        doc = json.loads(capsys.readouterr().out)
        doc.pop("seconds")
        docs.append(doc)
    assert docs[0] == docs[1]
    assert docs[0]["status"] == "passing" and docs[0]["candidates"][0]["passing"]


@pytest.mark.slow
def test_verifying_in_processes_gives_the_same_candidates(run8):
    args = dict(fields=["max_duration", "resurrection"], trials=8, batch=8, seed=1, top=2, verify=2)
    here, spawned = repair(run8, workers=1, **args), repair(run8, workers=2, **args)
    assert [(c.config, c.failures, dict(c.after)) for c in here.candidates] == \
        [(c.config, c.failures, dict(c.after)) for c in spawned.candidates]
    assert all(c.verified for c in spawned.candidates)


# ---- bad input --------------------------------------------------------------------------------
def test_bad_fields_are_errors_naming_the_value():
    specs = RegimeConfig.field_specs()
    with pytest.raises(ConfigError, match="'nope'") as exc:
        parse_fields("max_duration,nope", specs)
    assert exc.value.value == "nope"
    with pytest.raises(ConfigError, match="''"):
        parse_fields("max_duration,", specs)
    with pytest.raises(ConfigError, match="both searched"):
        SearchSpace.of(RegimeConfig(), ["eps_min"], {"eps_min": 0.1})


def test_bad_set_values_are_errors_naming_the_value():
    specs = RegimeConfig.field_specs()
    with pytest.raises(ConfigError, match="'abc'"):
        parse_held(["eps_min=abc"], specs)
    with pytest.raises(ConfigError, match="'bogus'"):
        parse_held(["bogus=1"], specs)
    with pytest.raises(ConfigError, match="eps_min=0.9"):  # a held value the config's rules reject
        SearchSpace.of(RegimeConfig(), None, {"eps_min": 0.9, "eps_max": 0.5})


def test_bad_budgets_are_errors_naming_the_value(run8):
    with pytest.raises(ValidationError, match="trials must be an int >= 1, got 0"):
        repair(run8, trials=0)
    with pytest.raises(ValidationError, match="'annealing'"):
        repair(run8, sampler="annealing")
    with pytest.raises(ValidationError, match="workers must be an int >= 1, got 0"):
        repair(run8, workers=0)


@pytest.mark.parametrize("argv, named", [
    (["--fields", "bogus"], "bogus"),
    (["--set", "eps_min=abc"], "abc"),
    (["--set", "eps_min"], "eps_min"),
])
def test_the_cli_names_a_bad_value(argv, named, capsys):
    assert main(["repair", "--scenario", "kelly_trap_run8", "--steps", str(STEPS), *argv]) == 2
    assert named in capsys.readouterr().err


def test_the_cli_needs_one_source(capsys):
    assert main(["repair"]) == 2
    assert "--stream" in capsys.readouterr().err
    assert main(["repair", "run-x", "--scenario", "calm"]) == 2
    assert "one of RUN" in capsys.readouterr().err


# ---- the space and its distance ---------------------------------------------------------------
def test_distance_is_each_change_over_its_domain_summed():
    space = SearchSpace.of(RegimeConfig())
    lo, hi, _ = RegimeConfig.domain("max_duration")
    moved = RegimeConfig(max_duration=0.0, resurrection=False)
    assert space.distance(moved) == pytest.approx(1000.0 / (hi - lo) + 1.0)
    # a log-scale domain (popart_alpha spans 1e-5 .. 1): the change in log units over the log width
    alpha = RegimeConfig(popart_alpha=0.01)
    assert space.distance(alpha) == pytest.approx(math.log(10) / math.log(1e5))
    assert space.changes(moved) == {"max_duration": (1000.0, 0.0), "resurrection": (True, False)}


def test_an_origin_outside_the_domain_widens_what_is_sampled():
    axis = Axis.of(next(s for s in RegimeConfig.field_specs() if s.name == "max_duration"), 20_000.0)
    assert (axis.lo, axis.hi) == (0.0, 10_000.0) and axis.high == 20_000.0
    assert axis.distance(20_000.0, 10_000.0) == pytest.approx(1.0)


def test_simpler_configs_drop_changes():
    assert flow.simpler({"a": 1}) == []
    assert flow.simpler({"a": 1, "b": 2}) == [{"a": 1}, {"b": 2}]
    assert {"b": 2, "c": 3} in flow.simpler({"a": 1, "b": 2, "c": 3})


# ---- the controller modules -------------------------------------------------------------------
@pytest.fixture(scope="module")
def sp14():
    from regime_dash.modules import get

    m = get("sp14_alpha_grad_gate")
    return m, m.demo_stream(0, 600)


@pytest.mark.slow
def test_a_module_demo_that_fails_its_checks_is_repaired_and_each_pass_rechecked(sp14):
    from regime_dash.modules.repair import repair_module

    m, stream = sp14
    result = repair_module(m, stream, trials=12, batch=6, seed=0, top=3)
    assert result.status == "passing", result.message
    assert "sp14.var_aux_producer" in {f.id for f in result.failures}
    assert result.candidates[0].changes == {"var_aux_producer": (False, True)}
    for c in result.candidates:
        assert c.verified
        if c.passing:
            assert verdict(m.replay(stream, c.config, "reference")).ok


@pytest.mark.slow
def test_a_module_search_is_reproducible_with_a_seed(sp14):
    from regime_dash.modules.repair import repair_module

    m, stream = sp14
    args = dict(fields=["target", "hysteresis", "var_aux_producer"], trials=10, batch=5, seed=2, top=3)
    assert repair_module(m, stream, **args).table().equals(repair_module(m, stream, **args).table())
