"""Scenario presets: each preset's docstring claim, determinism, the sample stream."""
from __future__ import annotations

import numpy as np
import pytest

from regime_dash import RegimeConfig, replay
from regime_dash.diag import catalogue as diag
from regime_dash.sources import samples
from regime_dash.sources import scenarios
from regime_dash.core import streams
from regime_dash.errors import StreamError, ValidationError
from regime_dash.sources.scenarios import RUN8_TRAP_STEPS, SCENARIOS
from regime_dash.store.run_store import RunStore

SYNTHETIC = [n for n in SCENARIOS if n != "recorded"]
KELLY = "risk_stack.kelly.fraction"
FLAG = "risk_stack.regime.dead_zone.flag"


def _longest_run(mask: np.ndarray) -> int:
    best = cur = 0
    for v in mask:
        cur = cur + 1 if v else 0
        best = max(best, cur)
    return best


def _same(a: streams.Stream, b: streams.Stream) -> bool:
    return all(np.array_equal(x, b.arrays()[k]) for k, x in a.arrays().items())


@pytest.mark.parametrize("name", SYNTHETIC)
def test_preset_is_deterministic_under_its_seed(name):
    steps, accounts = (RUN8_TRAP_STEPS + 200, 16) if name == "kelly_trap_run8" else (300, 16)
    a = scenarios.make(name, seed=3, steps=steps, accounts=accounts)
    b = scenarios.make(name, seed=3, steps=steps, accounts=accounts)
    c = scenarios.make(name, seed=4, steps=steps, accounts=accounts)
    assert (a.steps, a.accounts) == (steps, accounts)
    assert _same(a, b)
    assert not np.array_equal(a.rewards, c.rewards)


def test_calm_never_reaches_the_dead_zone():
    s = scenarios.calm(seed=1, steps=400, accounts=32)
    assert (s.kelly_analytic > 0).all()
    assert ((s.lots == 0).sum(axis=1) < s.accounts).all()
    assert not s.boundary.any() and (s.cooldown == 0).all()
    f = replay(s)
    assert (f[FLAG] == 0).all()
    assert (f[KELLY] > 0).all()


def test_tail_shock_is_theorem_6():
    s = scenarios.tail_shock(seed=2, steps=200, accounts=256)
    t = 100
    row = s.rewards[t]
    assert row.min() == np.float32(-19.45)
    assert np.count_nonzero(row == np.float32(-19.45)) == 1
    others = np.delete(row, np.argmin(row))
    assert np.abs(others).max() < 0.1  # the others sit near 0
    assert np.abs(np.delete(s.rewards, t, axis=0)).max() < 0.1  # and no other step has a tail
    f = replay(s)
    sigma = f["risk_stack.popart.sigma"].to_numpy()
    assert sigma[t] == np.float32(19.45)  # the envelope captures the tail in one step
    assert sigma[t - 1] < 1.5
    assert f["risk_stack.regime.tail.recency"].iloc[t] == 0  # the observer sees it in Δworst
    plain = replay(s, RegimeConfig(envelope=False))["risk_stack.popart.sigma"].to_numpy()
    assert abs(plain[t] / plain[t - 1] - 1) < 0.01  # batch variance alone barely moves


def test_kelly_trap_run8_story():
    s = scenarios.kelly_trap_run8(seed=0, steps=2300, accounts=48)
    T = s.steps
    t_trap = T - RUN8_TRAP_STEPS
    edge, lots = s.kelly_analytic, s.lots
    t_zero = int(np.flatnonzero(edge > 0)[-1]) + 1  # the edge is <= 0 from here to the end
    open_accounts = (lots > 0).sum(axis=1)
    assert t_zero < t_trap
    assert open_accounts[t_zero] > 0  # positions are still open when kelly_f goes to 0 ...
    assert not (np.diff(lots[t_zero:], axis=0) > 0).any()  # ... nobody opens again ...
    assert open_accounts[t_trap - 1] == 0  # ... and they drain to 0 before the trap
    assert (lots[t_trap:] == 0).all() and (s.rewards[t_trap:] == 0).all()  # 1,737 steps, no close
    assert (edge[t_trap:] == edge[t_trap]).all() and (s.session_pnl_worst[t_trap:] == s.session_pnl_worst[t_trap]).all()

    f = replay(s, RegimeConfig(resurrection=False))
    assert (f[KELLY].iloc[t_zero:] == 0).all()
    assert (f[FLAG].iloc[t_trap:] == 1).all()
    dur = f["risk_stack.regime.dead_zone.duration"].to_numpy()
    assert dur[-1] >= RUN8_TRAP_STEPS
    timeout = f["risk_stack.regime.dead_zone.timeout_flag"].to_numpy()
    assert ((timeout == 1) == (dur > 1000)).all()
    # open loop, the fix fires on the same stream: kelly_f is lifted every other step
    fixed = replay(s, RegimeConfig(resurrection=True))
    assert (fixed[KELLY].iloc[t_trap:] > 0).sum() >= RUN8_TRAP_STEPS // 2 - 1


def test_kelly_trap_run8_needs_room_for_the_trap():
    with pytest.raises(ValidationError, match="1000"):
        scenarios.kelly_trap_run8(steps=1000)


def test_fold_boundary_switches_train_to_eval():
    s = scenarios.fold_boundary(seed=5, steps=600, accounts=32)
    t_b = 300
    assert np.flatnonzero(s.boundary).tolist() == [t_b]
    pnl = s.rewards[t_b].astype(np.float64) / 0.003
    assert s.session_pnl_worst[t_b] == pytest.approx(min(0.0, pnl.min()), rel=1e-5, abs=1e-3)
    assert s.session_pnl_worst[t_b - 1] < s.session_pnl_worst[t_b] - 100  # the session restarted
    f = replay(s, RegimeConfig(transition_steps=200))
    assert set(f.phase.iloc[:t_b]) == {"train"} and set(f.phase.iloc[t_b:]) == {"eval"}
    rem = f["risk_stack.regime.transition.remaining"].to_numpy()
    assert rem[t_b - 1] == -1 and rem[t_b] == 199 and rem[t_b + 199] == 0 and rem[t_b + 200] == -1
    assert f["risk_stack.regime.tail.recency"].iloc[t_b] == np.float32(1e6 + 1)  # no false tail (γ)
    assert f["risk_stack.regime.popart_envelope.max_abs_reward_ema"].iloc[t_b] == np.abs(s.rewards[t_b]).max()


def test_adverse_regime_keeps_the_edge_negative_for_a_long_stretch():
    s = scenarios.adverse_regime(seed=0, steps=3000, accounts=64)
    assert _longest_run(s.kelly_analytic <= 0) >= 0.1 * s.steps
    assert ((s.lots > 0).sum(axis=1) > 0).all()  # in-flight positions keep closing
    assert s.kelly_analytic[-1] > 0  # and lift the edge back
    f = replay(s)
    assert (f[FLAG] == 0).all()
    assert _longest_run(f[KELLY].to_numpy() == 0) >= 0.1 * s.steps


def test_recorded_loads_the_committed_sample_and_slices():
    full = scenarios.recorded()
    assert (full.steps, full.accounts) == (samples.STEPS, samples.ACCOUNTS)
    part = scenarios.recorded(steps=100, accounts=8)
    assert (part.steps, part.accounts) == (100, 8)
    assert np.array_equal(part.rewards, full.rewards[:100, :8])
    with pytest.raises(ValidationError, match="asked for"):
        scenarios.recorded(steps=full.steps + 1)
    with pytest.raises(StreamError, match="does not exist"):
        scenarios.recorded(path="no/such/stream.npz")


def test_committed_samples_are_what_samples_py_makes(tmp_path):
    for p in (samples.SAMPLE_DIR / samples.STREAM_NAME, samples.SAMPLE_DIR / samples.DIAG_NAME):
        assert p.stat().st_size < 2 * 1024 * 1024
    stream_path, diag_path = samples.write_samples(tmp_path)
    assert _same(streams.load(stream_path), scenarios.recorded())
    assert diag_path.read_bytes() == (samples.SAMPLE_DIR / samples.DIAG_NAME).read_bytes()
    frame = diag.read_jsonl(diag_path)
    assert frame[FLAG].sum() > 0  # the sample shows the dead zone and the escape
    assert (frame[KELLY].iloc[-100:] > 0).all()
    result = RunStore(tmp_path / "store").ingest(samples.SAMPLE_DIR / samples.DIAG_NAME)
    assert result.rows == samples.STEPS and result.rejected == []  # ingests like a cluster file


def test_unknown_preset_and_bad_sizes_are_named():
    with pytest.raises(ValidationError, match="'nope'"):
        scenarios.make("nope")
    with pytest.raises(ValidationError, match="accounts"):
        scenarios.calm(accounts=0)
    with pytest.raises(ValidationError, match="seed"):
        scenarios.calm(seed=-1)
    assert all(scenarios.describe(n) for n in SCENARIOS)


def test_the_recorded_stream_cut_to_fewer_accounts_is_c_contiguous():
    s = scenarios.recorded(accounts=31)
    assert all(a.flags.c_contiguous for a in s.arrays().values())
