"""The closed-loop live run: the model, determinism, the trap and the escape, injections."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from regime_dash import RegimeConfig, replay
from regime_dash.engine import ENGINES, backend, engine_status, initial_isv
from regime_dash.engine.steppers import BackendStepper, ReferenceStepper
from regime_dash.errors import ValidationError
from regime_dash.sources.simulator import (PRESETS, Draws, Market, Schedule, Simulator, ema_over, kelly_edge, simulate,
                                   account_rng)
from regime_dash.core.slots import DEFAULT_LAYOUT

KELLY = "risk_stack.kelly.fraction"
FLAT = "risk_stack.positions.flat_count"
FLAG = "risk_stack.regime.dead_zone.flag"
T, B = 1500, 32  # adverse_regime: adverse from step 150, favourable again from step 750


def _absorbed_from(sim: Simulator) -> int:
    """First step from which kelly_f = 0, every account flat and no close, to the end (T if never)."""
    f, m = sim.frame(), sim.market_frame()
    absorbed = (f[KELLY].to_numpy() == 0) & (f[FLAT].to_numpy() == sim.accounts) & (m.closes.to_numpy() == 0)
    out = np.flatnonzero(~absorbed)
    return int(out[-1]) + 1 if len(out) else 0


@pytest.fixture(scope="module")
def trapped():
    return simulate("adverse_regime", steps=T, accounts=B, seed=1, config=RegimeConfig(resurrection=False))


@pytest.fixture(scope="module")
def rescued():
    return simulate("adverse_regime", steps=T, accounts=B, seed=1)


def test_without_resurrection_the_adverse_run_is_absorbed_and_stays(trapped):
    t_star = _absorbed_from(trapped)
    assert t_star < T // 2  # reached during the adverse stretch ...
    assert T - t_star > T // 2  # ... and held through the whole favourable half that follows
    f = trapped.frame()
    assert (f[FLAG].iloc[t_star + 1:] == 1).all()
    assert f["risk_stack.regime.dead_zone.timeout_flag"].iloc[-1] == 1
    assert (trapped.market_frame().p_true.iloc[T // 2:] == 0.62).all()  # the market did turn good


def test_with_resurrection_the_run_leaves_the_dead_zone(rescued, trapped):
    f, m = rescued.frame(), rescued.market_frame()
    assert _absorbed_from(rescued) == T  # never absorbed
    entered = np.flatnonzero(f[FLAG].to_numpy() == 1)
    assert len(entered) > 0  # it did fall into the dead zone ...
    assert (f[KELLY].iloc[entered] > 0).all()  # ... and kelly_f was lifted to ε there
    assert (f[KELLY].iloc[-T // 10:] > 0).mean() > 0.9  # trading is back at the end
    assert m.closes.iloc[-T // 10:].sum() > 0
    assert m.cum_pnl.iloc[-1] > trapped.market_frame().cum_pnl.iloc[-1]


@pytest.mark.parametrize("change, trapped_after", [
    ({"max_duration": 0.0}, True),  # the timeout fires at once: the trap is back despite resurrection
    ({"eps_min": 0.25, "eps_max": 0.25}, False),  # smaller probes: still escapes, different path
])
def test_config_fields_change_the_outcome(rescued, change, trapped_after):
    sim = simulate("adverse_regime", steps=T, accounts=B, seed=1, config=RegimeConfig(**change))
    assert (_absorbed_from(sim) < T) == trapped_after
    assert not sim.frame().equals(rescued.frame())
    assert sim.market_frame().cum_pnl.iloc[-1] != rescued.market_frame().cum_pnl.iloc[-1]


def test_same_seed_same_run_other_seed_other_run():
    a = simulate("calm", steps=200, accounts=16, seed=9)
    b = simulate("calm", steps=200, accounts=16, seed=9)
    c = simulate("calm", steps=200, accounts=16, seed=10)
    pd.testing.assert_frame_equal(a.frame(), b.frame())
    pd.testing.assert_frame_equal(a.market_frame(), b.market_frame())
    assert not np.array_equal(a.stream().rewards, c.stream().rewards)


def test_rng_is_counter_based():
    x = account_rng(5, 100, 3).random(4)
    g = account_rng(5, 99, 3)
    g.random(10_000)  # however much step 99 draws ...
    account_rng(5, 100, 2).random(10_000)  # ... or another account of step 100 ...
    assert np.array_equal(account_rng(5, 100, 3).random(4), x)  # ... this one draws the same
    assert not np.array_equal(account_rng(5, 101, 3).random(4), x)
    assert not np.array_equal(account_rng(5, 100, 4).random(4), x)
    assert not np.array_equal(account_rng(6, 100, 3).random(4), x)
    d = Draws.of(5, 100, 8)
    assert np.array_equal(d.close, Draws.of(5, 100, 8).close) and d.close.shape == (8,)
    assert np.array_equal(Draws.of(5, 100, 3).close, d.close[:3])  # an account's draws do not depend on b


def test_the_closed_loop_is_its_own_stream_replayed(rescued):
    """Replaying the inputs the live run fed the pipeline gives its frame back, column for column."""
    frame = rescued.frame()
    again = replay(rescued.stream(), rescued.config, engine="reference")
    assert list(frame.columns) == list(again.columns)
    pd.testing.assert_frame_equal(frame, again)


def test_backend_stepper_matches_the_direct_reference_stepper():
    cfg = RegimeConfig(resurrection=False)
    isv0, boot = initial_isv(cfg, None, DEFAULT_LAYOUT)
    kw = dict(accounts=16, seed=2, config=cfg, schedule=PRESETS["adverse_regime"].schedule(300))
    a = Simulator(engine=ReferenceStepper(isv0, boot, DEFAULT_LAYOUT), **kw)
    b = Simulator(engine=BackendStepper("reference", isv0, boot, DEFAULT_LAYOUT), **kw)
    a.step(300)
    b.step(300)
    pd.testing.assert_frame_equal(a.frame(), b.frame())
    assert np.array_equal(a.isv, b.isv)


def test_a_used_step_engine_is_refused_naming_the_steps_it_ran():
    isv0, boot = initial_isv(RegimeConfig(), None, DEFAULT_LAYOUT)
    for stepper in (ReferenceStepper(isv0, boot, DEFAULT_LAYOUT), BackendStepper("reference", isv0, boot,
                                                                                  DEFAULT_LAYOUT)):
        first = Simulator(accounts=8, seed=1, engine=stepper)
        first.step(3)
        with pytest.raises(ValidationError, match="already run 3 step.*fresh") as info:
            Simulator(accounts=8, seed=1, engine=stepper)
        assert (info.value.field, info.value.value) == ("engine", 3)
        assert len(first.frame()) == 3  # the first simulator's frame is still whole
    with pytest.raises(ValidationError, match="StepEngine, got int") as info:
        Simulator(engine=42)
    assert info.value.field == "engine"


def test_backend_stepper_dispatches_through_the_engine_package():
    isv0, boot = initial_isv(RegimeConfig(), None, DEFAULT_LAYOUT)
    assert type(backend("reference")) is ENGINES["reference"]
    assert type(BackendStepper("reference", isv0, boot, DEFAULT_LAYOUT).backend) is ENGINES["reference"]
    with pytest.raises(ValidationError, match="'warp-drive'"):
        BackendStepper("warp-drive", isv0, boot, DEFAULT_LAYOUT)


def test_positions_are_sized_by_the_previous_kelly_f():
    sim = simulate("adverse_regime", steps=400, accounts=16, seed=4)
    lots, kelly = sim.stream().lots, sim.frame()[KELLY].to_numpy()
    assert (lots[0][lots[0] > 0] == 4).all()  # kelly_f bootstraps to 1.0: ⌈4·1.0⌉
    opened = 0
    for t in range(1, len(lots)):
        new = (lots[t - 1] == 0) & (lots[t] > 0)
        if new.any():
            assert kelly[t - 1] > 0
            assert (lots[t][new] == math.ceil(4 * float(kelly[t - 1]))).all()
            opened += 1
        if kelly[t - 1] == 0:
            assert not new.any()
    assert opened > 10


def test_rewards_edge_and_worst_follow_the_model():
    sim = simulate("calm", steps=300, accounts=16, seed=3)
    s, m = sim.stream(), sim.market_frame()
    np.testing.assert_allclose(s.rewards.astype(np.float64).sum(axis=1), m.pnl * 0.003, rtol=1e-5, atol=1e-3)
    assert ((s.rewards != 0).sum(axis=1) == m.closes).all()  # only closes are rewarded
    assert (np.diff(s.session_pnl_worst) <= 0).all()  # a running worst, no boundary here
    assert s.session_pnl_worst.min() < 0
    st = sim.state
    assert s.kelly_analytic[-1] == np.float32(kelly_edge(st.p_ema, st.w_ema, st.l_ema))


def test_ema_over_is_the_sequential_update():
    xs = np.array([1.0, 0.0, 1.0, 1.0, 0.0])
    e = 0.3
    for x in xs:
        e = 0.9 * e + 0.1 * x
    assert ema_over(0.3, xs, 0.1) == pytest.approx(e, rel=1e-12)
    assert ema_over(0.3, np.array([]), 0.1) == 0.3
    assert kelly_edge(0.5, 1.0, 1.0) == 0.0 and kelly_edge(0.6, 2.0, 1.0) == pytest.approx(0.4)


def test_drawdown_limit_starts_a_cooldown_that_blocks_opens():
    sim = Simulator(accounts=16, seed=0, market=Market(drawdown_limit=3000.0, cooldown_steps=40),
                    schedule=Schedule(((0, 0.45),)))
    sim.step(300)
    s = sim.stream()
    cool = s.cooldown
    assert cool.max() == 40
    started = np.flatnonzero(np.diff(cool) > 0) + 1
    assert len(started) > 0
    for t in range(1, len(cool)):
        if cool[t - 1] > 1:  # still cooling at the start of step t
            assert not ((s.lots[t - 1] == 0) & (s.lots[t] > 0)).any()


def test_injected_tail_shock():
    kw = dict(accounts=32, seed=1, schedule=PRESETS["calm"].schedule(100), market=PRESETS["calm"].market)
    plain, shocked = Simulator(**kw), Simulator(**kw)
    plain.step(61)
    shocked.step(60)
    shocked.inject_tail_shock(account=5)
    shocked.step(1)
    a, b = plain.stream().rewards, shocked.stream().rewards
    assert np.array_equal(a[:60], b[:60])  # same draws up to the shock (counter-based RNG)
    diff = b[60].astype(np.float64) - a[60]
    assert diff[5] == pytest.approx(-6484.0 * 0.003, abs=1e-3)  # Run #8's −19.45 on account 5 ...
    assert (np.delete(diff, 5) == 0).all()  # ... and nowhere else
    sigma = shocked.frame()["risk_stack.popart.sigma"].to_numpy()
    assert sigma[60] == np.abs(b[60]).max() and sigma[60] > 19.0 > sigma[59]  # the envelope floor
    assert shocked.market_frame().shock.tolist() == [False] * 60 + [True]


def test_injected_force_flat_and_boundary():
    sim = Simulator(accounts=32, seed=2, config=RegimeConfig(transition_steps=50))
    sim.step(40)
    held = sim.stream().lots[-1] > 0
    assert held.any()
    sim.force_flat()
    sim.step(1)
    assert (sim.stream().lots[-1][held] == 0).all()  # every open position closed
    assert sim.market_frame().closes.iloc[-1] == held.sum()
    sim.cross_boundary()
    sim.step(2)
    f = sim.frame()
    assert f.phase.iloc[40] == "train" and f.phase.iloc[41] == "eval"
    assert f["risk_stack.regime.transition.remaining"].iloc[41] == 49  # reset_session_state ran
    assert sim.stream().boundary.tolist().count(True) == 1
    assert (sim.state.session_worst <= 0).all() and sim.stream().session_pnl_worst[41] >= sim.stream().session_pnl_worst[40]


def test_frame_has_the_replay_columns_and_steps_incrementally():
    sim = Simulator(accounts=8, seed=0)
    assert len(sim.frame()) == 0
    sim.step(3)
    sim.step(2)
    f = sim.frame()
    assert f.step.tolist() == [0, 1, 2, 3, 4]
    from regime_dash import Stream
    ref = replay(Stream.make(rewards=np.zeros((1, 8), np.float32), lots=np.zeros((1, 8), np.int32)))
    assert list(f.columns) == list(ref.columns)
    assert f.attrs["engine"] == "reference"
    lean = Simulator(accounts=8, seed=0, keep_stream=False)
    lean.step(5)
    pd.testing.assert_frame_equal(lean.frame(), f)
    with pytest.raises(ValidationError, match="keep_stream"):
        lean.stream()


def test_bad_inputs_raise_named_errors():
    with pytest.raises(ValidationError, match="accounts"):
        Simulator(accounts=0)
    with pytest.raises(ValidationError, match="seed"):
        Simulator(seed=-3)
    with pytest.raises(ValidationError, match="hazard=2"):
        Market(hazard=2)
    with pytest.raises(ValidationError, match="step 0"):
        Schedule(((5, 0.5),))
    with pytest.raises(ValidationError, match="1.5"):
        Schedule(((0, 1.5),))
    with pytest.raises(ValidationError, match="'nope'"):
        simulate("nope")
    with pytest.raises(ValidationError, match="account 99"):
        Simulator(accounts=4).inject_tail_shock(account=99)
    with pytest.raises(ValidationError, match="engine"):
        Simulator(engine="warp-drive")


@pytest.mark.gpu
def test_cuda_live_run_matches_reference():
    if engine_status().get("cuda") is not None:
        pytest.skip(f"cuda engine unavailable: {engine_status()['cuda']}")
    kw = dict(steps=200, accounts=64, seed=3)
    ref = simulate("adverse_regime", engine="reference", **kw)
    gpu = simulate("adverse_regime", engine="cuda", **kw)
    assert gpu.frame().attrs["engine"] == "cuda"
    pd.testing.assert_frame_equal(ref.frame(), gpu.frame())
    pd.testing.assert_frame_equal(ref.market_frame(), gpu.market_frame())
