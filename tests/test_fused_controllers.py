"""The fused controller path (``rl_fused_controllers``) against the single controllers.

The spec's launch-order step 8 "mirrors single-controller behavior": with both
mirror switches on, the fused path is the single path bit for bit, on every
engine, scenario and batch size. A mirror switch off is a fused copy that never
got the F2 or F5 block: the paths part at the first step the single path
overrides kelly_f (F2) or boosts τ_min (F5), which the finding
``fused_mirror_drift`` names.

CPU tests compare the reference with the fast engine on the CPU; the ``gpu``
tests (the per-step cuda engine, graph or not, and the fast engine on the GPU)
skip where there is no CUDA device.
"""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import regime_dash as rd
from regime_dash.diag import catalogue as diag
from regime_dash.sources import scenarios
from regime_dash.analysis import verdict
from regime_dash.analysis.findings import fused_mirror_drift
from regime_dash.analysis.rederive import rederive
from regime_dash.core.config import MIRROR_SWITCHES, RegimeConfig
from regime_dash.analysis.mirror_drift import needs_single_twin, single_twin
from regime_dash.errors import ValidationError
from tests.helpers import col, stream

SIZES = (1, 31, 1500)
#: The recorded stream holds 64 accounts; larger sizes are not in it.
RECORDED_ACCOUNTS = 64
#: The configs the paths are compared under: the spec's, F2/F5 off, and each mirror off.
CONFIGS = {"spec": RegimeConfig(), "features_off": RegimeConfig(resurrection=False, tau_boost=False),
           "layer4_off": RegimeConfig(fused_mirror_resurrection=False),
           "layer2_off": RegimeConfig(fused_mirror_tau_boost=False)}


def scenario_stream(name: str, b: int) -> rd.Stream:
    if name == "recorded" and b > RECORDED_ACCOUNTS:
        pytest.skip(f"the recorded stream has {RECORDED_ACCOUNTS} accounts, not {b}")
    return scenarios.make(name, accounts=b)


def assert_frames_bit_equal(got, want, what: str, config: bool = True) -> None:
    """Every column of ``want`` in ``got``, float32 compared by their bits (the path column aside;
    the config columns too unless ``config``)."""
    for c in want.columns:
        if c == diag.FUSED_COLUMN or not config and c.startswith(diag.P + "config."):
            continue
        a, b = got[c].to_numpy(), want[c].to_numpy()
        if a.dtype == np.float32:
            bad = np.flatnonzero(a.view(np.uint32) != b.view(np.uint32))
        else:
            bad = np.flatnonzero(a != b)
        assert not len(bad), f"{what}: {c} differs first at row {bad[0]} ({a[bad[0]]!r} vs {b[bad[0]]!r})"


def expected_first_drift(single, mirror: str) -> int | None:
    """The first step the single path runs the block the mirror guards, from the single frame alone:
    an F2 override (kelly_f = ε_live where the analytic value differs) or an F5 boost (τ_min_eff ≠ τ_min)."""
    if mirror == "fused_mirror_resurrection":
        hit = ((col(single, "kelly.fraction") == col(single, "regime.kelly_eps_recovery.live"))
               & (col(single, "kelly.fraction") != col(single, "kelly.analytic")))
    else:
        hit = col(single, "iqn.tau_min_effective") != col(single, "iqn.tau_min")
    return int(single["step"].to_numpy()[np.argmax(hit)]) if hit.any() else None


# ---- the two paths agree, bit for bit ----------------------------------------------------------
@pytest.mark.parametrize("b", SIZES)
@pytest.mark.parametrize("name", sorted(scenarios.SCENARIOS))
def test_fused_path_is_the_single_path_bit_for_bit_reference_and_fast_cpu(name, b):
    s = scenario_stream(name, b)
    want = rd.replay_trajectory(s, engine="reference")
    fused = rd.replay_trajectory(s, engine="reference", controllers="fused")
    assert diag.FUSED_COLUMN not in want.frame and (fused.frame[diag.FUSED_COLUMN] == 1).all()
    assert_frames_bit_equal(fused.frame, want.frame, f"{name} b={b} reference fused")
    assert np.array_equal(fused.rewards_normalized.view(np.uint32), want.rewards_normalized.view(np.uint32))
    for controllers in ("single", "fused"):
        got = rd.replay_trajectory(s, engine="fast", device="cpu", controllers=controllers)
        assert_frames_bit_equal(got.frame, want.frame, f"{name} b={b} fast cpu {controllers}")
        assert np.array_equal(got.isv.view(np.uint32), want.isv.view(np.uint32))


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("name", sorted(scenarios.SCENARIOS))
def test_fast_cpu_replays_each_path_and_mirror_switch_as_the_reference(name, config):
    s = scenario_stream(name, 31)
    for controllers in ("single", "fused"):
        want = rd.replay(s, CONFIGS[config], engine="reference", controllers=controllers)
        got = rd.replay(s, CONFIGS[config], engine="fast", device="cpu", controllers=controllers)
        assert list(got.columns) == list(want.columns)
        assert_frames_bit_equal(got, want, f"{name} {config} {controllers}")


def _device_engines():
    return [("cuda", {"graph": False}), ("cuda", {"graph": True}), ("fast", {"device": "gpu"})]


@pytest.mark.gpu
@pytest.mark.parametrize("b", SIZES)
@pytest.mark.parametrize("name", sorted(scenarios.SCENARIOS))
def test_fused_path_is_the_single_path_bit_for_bit_on_the_gpu(name, b):
    s = scenario_stream(name, b)
    for config in ("spec", "layer4_off", "layer2_off"):
        for controllers in ("single", "fused"):
            want = rd.replay_trajectory(s, CONFIGS[config], engine="reference", controllers=controllers)
            for engine, options in _device_engines():
                got = rd.replay_trajectory(s, CONFIGS[config], engine=engine, controllers=controllers, **options)
                what = f"{name} b={b} {config} {engine} {options} {controllers}"
                assert_frames_bit_equal(got.frame, want.frame, what)
                assert np.array_equal(got.rewards_normalized.view(np.uint32),
                                      want.rewards_normalized.view(np.uint32)), what
                assert np.array_equal(got.isv.view(np.uint32), want.isv.view(np.uint32)), what


# ---- a mirror switched off breaks parity where the single path first uses the block -------------
@pytest.mark.parametrize("mirror", MIRROR_SWITCHES)
@pytest.mark.parametrize("name", sorted(scenarios.SCENARIOS))
def test_a_mirror_off_parts_the_paths_at_the_first_step_the_single_path_uses_the_block(name, mirror):
    s = scenario_stream(name, 31)
    cfg = RegimeConfig(**{mirror: False})
    assert needs_single_twin(cfg, "fused") and not needs_single_twin(cfg, "single")
    fused = rd.replay(s, cfg, controllers="fused")
    single, found = single_twin(fused, s, cfg)
    assert_frames_bit_equal(single, rd.replay(s), f"{name}: the switch means nothing on the single path",
                            config=False)
    expect = expected_first_drift(single, mirror)
    if expect is None:  # the single path never used the block here: nothing parts
        assert found == []
        return
    (f,) = found
    assert f.id == "fused_mirror_drift" and f.severity == "fail"
    assert f.steps == [expect] and f.evidence["first_step"] == expect
    assert f.evidence["mirrors_off"] == [mirror] and f.fields == (mirror,)
    rows = fused["step"].to_numpy() < expect
    assert_frames_bit_equal(fused[rows], single[rows], f"{name}: before step {expect}")
    changed = "kelly.fraction" if mirror == "fused_mirror_resurrection" else "iqn.tau_min_effective"
    assert f"{diag.P}{changed}" in f.evidence["columns_at_first_step"]


def test_scenarios_exercise_both_mirrors():
    # the test above asserts a drift only where the single path uses the block: make sure some do
    s = scenarios.make("kelly_trap_run8", accounts=31)
    single = rd.replay(s)
    assert expected_first_drift(single, "fused_mirror_resurrection") is not None
    assert expected_first_drift(single, "fused_mirror_tau_boost") is not None


@pytest.mark.parametrize("controllers", ["single", "fused"])
def test_g17_resurrection_mirror_off_keeps_the_analytic_zero(engine, controllers):
    # the G17 inputs: negative edge in the dead zone; the fused copy without F2 leaves kelly_f at 0
    isv = {"RL_KELLY_FRACTION_INDEX": 0.0, "RL_COOLDOWN_REMAINING_STEPS_INDEX": 0.0}
    cfg = RegimeConfig(fused_mirror_resurrection=False)
    f = rd.replay(stream(1, 4, kelly_analytic=-0.3), cfg, engine=engine, isv=isv, controllers=controllers)
    assert col(f, "regime.dead_zone.flag")[0] == 1.0
    want = np.float32(0.0) if controllers == "fused" else np.float32(0.5)  # single: ε_max, as G17
    assert col(f, "kelly.fraction")[0] == want


@pytest.mark.parametrize("controllers", ["single", "fused"])
def test_g24_tau_boost_mirror_off_leaves_tau_min_unboosted(engine, controllers):
    tail = {"RL_REGIME_SESSION_PNL_VAR_COUNT_INDEX": 20.0, "RL_REGIME_SESSION_PNL_VAR_M2_INDEX": 19.0,
            "RL_REGIME_SESSION_PNL_VARIANCE_EMA_INDEX": 1.0}
    cfg = RegimeConfig(fused_mirror_tau_boost=False)
    f = rd.replay(stream(1, 4, session_pnl_worst=-10.0, tau_action=0.05, lots=np.ones((1, 4), np.int32)), cfg,
                  engine=engine, isv=tail, controllers=controllers)
    assert col(f, "regime.tail.recency")[0] == 0.0
    boosted = np.float32(0.1) * np.float32(1.5)
    assert col(f, "iqn.tau_min_effective")[0] == (np.float32(0.1) if controllers == "fused" else boosted)


# ---- the checks and the finding see the consequence -----------------------------------------------
@pytest.mark.slow  # replays and a check of each: ~1.6 s of CPU
def test_checks_show_the_untaken_resurrection_and_the_unboosted_tau():
    s = scenarios.make("kelly_trap_run8")
    for mirror, check in (("fused_mirror_resurrection", "kelly_resurrection"), ("fused_mirror_tau_boost", "tau_boost")):
        cfg = RegimeConfig(**{mirror: False})
        fused, single = rd.replay(s, cfg, controllers="fused"), rd.replay(s, cfg)
        alone = {c.id: c for c in verdict(fused).checks}
        assert alone[check].status == "fail"
        assert alone[check].first_step == expected_first_drift(single, mirror)
        assert {c.id: c.status for c in verdict(single).checks}[check] == "pass"
        paired = verdict(fused, single=single)
        assert [f.id for f in paired.findings if f.id == "fused_mirror_drift"] == ["fused_mirror_drift"]
    # mirrors on: the pair agrees, no finding
    assert not [f for f in verdict(rd.replay(s, controllers="fused"), single=rd.replay(s)).findings
                if f.id == "fused_mirror_drift"]


#: The re-derivation check each mirror's block answers to (the single kernels' function, the spec's code).
REDERIVED = {"fused_mirror_resurrection": "rederive.kelly", "fused_mirror_tau_boost": "rederive.tau_min_effective"}


def scenario_steps(name: str, steps: int = 3000) -> rd.Stream:
    return scenarios.make(name, steps=None if name == "recorded" else steps)


@pytest.mark.parametrize("name,mirror", [("kelly_trap_run8", "fused_mirror_resurrection"),
                                         ("recorded", "fused_mirror_resurrection"),
                                         ("kelly_trap_run8", "fused_mirror_tau_boost"),
                                         ("tail_shock", "fused_mirror_tau_boost")])
def test_a_mirror_off_fails_the_rederivation_at_the_first_step_the_paths_part(name, mirror):
    # the re-derivation recomputes each output with the single kernels' functions from the logged
    # state, switches and inputs: the fused copy without the block is wrong exactly where it parts
    s = scenario_steps(name)
    cfg = RegimeConfig(**{mirror: False})
    fused = rd.replay(s, cfg, controllers="fused", log_inputs=True)
    assert fused[diag.CONFIG_COLUMNS[mirror]].eq(0).all()  # the mirror switch is a config column
    single, (drift,) = single_twin(fused, s, cfg, log_inputs=True)
    first = expected_first_drift(single, mirror)
    assert first is not None and drift.steps == [first]
    failed = {r.id: r for r in rederive(fused).results if r.status == "fail"}
    assert REDERIVED[mirror] in failed, sorted(failed)
    assert failed[REDERIVED[mirror]].first_step == first
    assert all(r.first_step >= first for r in failed.values())
    assert [r.id for r in rederive(single).results if r.status == "fail"] == []


@pytest.mark.parametrize("name", sorted(scenarios.SCENARIOS))
def test_a_fused_run_with_both_mirrors_on_rederives_with_no_failure(name):
    fused = rd.replay(scenario_steps(name), controllers="fused", log_inputs=True)
    res = rederive(fused).results
    assert [(r.id, r.detail) for r in res if r.status == "fail"] == []
    assert sum(r.status == "pass" for r in res) == len(res)


def test_fused_mirror_drift_needs_a_fused_and_a_single_frame():
    s = stream(3, 4)
    fused, single = rd.replay(s, controllers="fused"), rd.replay(s)
    assert fused_mirror_drift(fused, single) == []
    with pytest.raises(ValidationError, match="fused frame does not say") as e:
        fused_mirror_drift(single, single)
    assert e.value.field == "fused"
    with pytest.raises(ValidationError, match="single frame says") as e:
        fused_mirror_drift(fused, fused)
    assert e.value.field == "single"


@pytest.mark.parametrize("bad", ["Fused", "", None, 1])
def test_an_unknown_controller_path_is_rejected_naming_it(bad):
    with pytest.raises(ValidationError, match="controllers must be one of") as e:
        rd.replay(stream(1, 4), controllers=bad)
    assert e.value.field == "controllers" and e.value.value == bad


# ---- the CLI ----------------------------------------------------------------------------------------
def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "regime_dash", *args], capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow  # CLI subprocesses: ~3.6 s of CPU
def test_cli_replay_fused_with_a_mirror_off_and_check_with_its_single_twin(tmp_path):
    fused, single = tmp_path / "fused.jsonl", tmp_path / "single.jsonl"
    run = _cli("replay", "--scenario", "kelly_trap_run8", "--engine", "reference", "--controllers", "fused",
               "--set", "fused_mirror_resurrection=false", "--out", str(fused), "--single-out", str(single))
    assert run.returncode == 0, run.stderr
    want = expected_first_drift(rd.replay(scenarios.make("kelly_trap_run8")), "fused_mirror_resurrection")
    assert f"FAIL  fused_mirror_drift (step {want})" in run.stderr
    check = _cli("check", str(fused), "--single", str(single), "--json")
    assert check.returncode == 1, check.stderr
    doc = json.loads(check.stdout)
    (drift,) = [f for f in doc["findings"] if f["id"] == "fused_mirror_drift"]
    assert drift["steps"] == [want] and drift["evidence"]["mirrors_off"] == ["fused_mirror_resurrection"]
    assert {c["id"]: c["status"] for c in doc["checks"]}["kelly_resurrection"] == "fail"
    alone = json.loads(_cli("check", str(fused), "--json").stdout)
    assert "fused_mirror_drift" in alone["skipped"] and not any(f["id"] == "fused_mirror_drift"
                                                                for f in alone["findings"])


@pytest.mark.slow  # a CLI subprocess: ~1.5 s of CPU
def test_cli_replay_fused_with_mirrors_on_says_the_paths_agree(tmp_path):
    out = tmp_path / "f.parquet"
    run = _cli("replay", "--scenario", "tail_shock", "--steps", "200", "--accounts", "31", "--engine", "reference",
               "--controllers", "fused", "--out", str(out), "--single-out", str(tmp_path / "s.parquet"))
    assert run.returncode == 0, run.stderr
    assert "fused_mirror_drift: none" in run.stderr and "controllers fused" in run.stderr
    bad = _cli("replay", "--scenario", "calm", "--single-out", str(tmp_path / "x.jsonl"), "--out",
               str(tmp_path / "y.jsonl"))
    assert bad.returncode == 2 and "--single-out needs --controllers fused" in bad.stderr
