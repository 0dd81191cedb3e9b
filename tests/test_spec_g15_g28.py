"""The spec's synthetic harness tests G15–G28, run against every replay engine on both controller paths.

Each test writes ISV state (as ``isv`` overrides after bootstrap), feeds a tiny
stream and reads the slots back from the replay frame, as the spec's
``g15_dead_zone_flag_fires_on_composite`` fixture does with rl_isv_write /
rl_isv_read. Each runs on the single controllers and on ``rl_fused_controllers``
(``controllers``), which mirrors them: the spec's G17/G21 (F2) and G24/G25 (F5) hold on both.
"""
from __future__ import annotations

import numpy as np
import pytest

import regime_dash as rd
from tests.helpers import col, stream

F = np.float32

# A prepared tail: enough Welford history (count >= 10) with σ = 1 and the
# previous worst at 0, so a step whose worst drops to -10 is a 10σ tail event.
TAIL_READY = {
    "RL_REGIME_SESSION_PNL_VAR_COUNT_INDEX": 20.0,
    "RL_REGIME_SESSION_PNL_VAR_M2_INDEX": 19.0,
    "RL_REGIME_SESSION_PNL_VARIANCE_EMA_INDEX": 1.0,
    "RL_REGIME_SESSION_PNL_VAR_MEAN_INDEX": 0.0,
    "RL_REGIME_PREV_WORST_PNL_INDEX": 0.0,
}
DEAD = {"RL_KELLY_FRACTION_INDEX": 0.0, "RL_COOLDOWN_REMAINING_STEPS_INDEX": 0.0}


@pytest.fixture(params=["single", "fused"])
def controllers(request) -> str:
    """The risk-stack path: the single controller kernels, or rl_fused_controllers."""
    return request.param


def test_g15_dead_zone_flag_fires_on_composite(engine, controllers):
    f = rd.replay(stream(1, 4), engine=engine, controllers=controllers, isv=DEAD)
    assert col(f, "regime.dead_zone.flag")[0] == 1.0
    assert col(f, "regime.dead_zone.duration")[0] == 1.0


@pytest.mark.parametrize("case", ["kelly_positive", "one_open", "cooldown"])
def test_g16_dead_zone_flag_clear_when_any_condition_fails(engine, controllers, case):
    isv = dict(DEAD)
    lots = np.zeros((1, 4), np.int32)
    cooldown = 0.0
    if case == "kelly_positive":
        isv["RL_KELLY_FRACTION_INDEX"] = 0.01
    elif case == "one_open":
        lots[0, 3] = 1
    else:
        cooldown = 5.0
    f = rd.replay(stream(1, 4, lots=lots, cooldown=cooldown), engine=engine, controllers=controllers, isv=isv)
    assert col(f, "regime.dead_zone.flag")[0] == 0.0
    assert col(f, "regime.dead_zone.duration")[0] == 0.0


def test_g17_resurrection_sets_kelly_to_eps_live(engine, controllers):
    # negative edge: the analytic Kelly is 0, the override lifts it to ε_live
    f = rd.replay(stream(1, 4, kelly_analytic=-0.3), engine=engine, controllers=controllers, isv=DEAD)
    assert col(f, "kelly.analytic")[0] == 0.0
    assert col(f, "kelly.fraction")[0] == col(f, "regime.kelly_eps_recovery.live")[0]
    assert col(f, "kelly.fraction")[0] == F(0.5)  # recency sentinel → factor 1 → ε_max


def test_g18_kelly_holds_analytic_without_flag(engine, controllers):
    f = rd.replay(stream(1, 4, kelly_analytic=0.4), engine=engine, controllers=controllers,
                  isv={"RL_KELLY_FRACTION_INDEX": 0.3})
    assert col(f, "regime.dead_zone.flag")[0] == 0.0
    assert col(f, "kelly.fraction")[0] == F(0.5) * F(0.4)
    assert col(f, "kelly.fraction")[0] == col(f, "kelly.analytic")[0]


def test_g19_eps_live_ramps_linearly_from_min_to_max(engine, controllers):
    steps = 130
    f = rd.replay(stream(steps, 4, session_pnl_worst=-10.0, lots=np.ones((steps, 4), np.int32)),
                  engine=engine, controllers=controllers, isv=TAIL_READY)
    recency = col(f, "regime.tail.recency")
    live = col(f, "regime.kelly_eps_recovery.live")
    factor = col(f, "regime.kelly_eps_recovery.factor")
    assert recency[0] == 0.0 and live[0] == F(0.05)  # T = 0: ε_min
    np.testing.assert_array_equal(recency, np.arange(steps, dtype=np.float32))
    expect_factor = np.minimum(F(1), recency / F(100)).astype(np.float32)
    np.testing.assert_array_equal(factor, expect_factor)
    expect_live = (F(0.05) + (F(0.5) - F(0.05)) * expect_factor).astype(np.float32)
    np.testing.assert_array_equal(live, expect_live)
    assert live[50] == F(0.05) + F(0.45) * F(0.5)  # halfway
    assert (live[100:] == F(0.5)).all()  # T ≥ N_recovery: ε_max


def test_g20_timeout_fires_when_duration_exceeds_max(engine, controllers):
    cfg = rd.RegimeConfig(max_duration=5, resurrection=False)
    f = rd.replay(stream(10, 4, kelly_analytic=-1.0), cfg, engine=engine, controllers=controllers, isv=DEAD)
    duration = col(f, "regime.dead_zone.duration")
    timeout = col(f, "regime.dead_zone.timeout_flag")
    np.testing.assert_array_equal(duration, np.arange(1, 11, dtype=np.float32))
    np.testing.assert_array_equal(timeout, (duration > 5).astype(np.float32))
    assert timeout[4] == 0.0 and timeout[5] == 1.0


def test_g21_no_resurrection_after_timeout(engine, controllers):
    isv = dict(DEAD, RL_REGIME_DEAD_ZONE_DURATION_INDEX=1000.0)  # this step makes it 1001 > 1000
    f = rd.replay(stream(1, 4, kelly_analytic=-1.0), engine=engine, controllers=controllers, isv=isv)
    assert col(f, "regime.dead_zone.flag")[0] == 1.0
    assert col(f, "regime.dead_zone.timeout_flag")[0] == 1.0
    assert col(f, "kelly.fraction")[0] == 0.0


def test_g22_tail_event_resets_recency(engine, controllers):
    f = rd.replay(stream(3, 4, session_pnl_worst=np.array([-10.0, -10.0, -10.0]),
                         lots=np.ones((3, 4), np.int32)),
                  engine=engine, controllers=controllers, isv=dict(TAIL_READY, RL_REGIME_TAIL_EVENT_RECENCY_INDEX=42.0))
    np.testing.assert_array_equal(col(f, "regime.tail.recency"), [0.0, 1.0, 2.0])


def test_g23_welford_count_below_10_gates_tail_detection(engine, controllers):
    isv = dict(TAIL_READY, RL_REGIME_SESSION_PNL_VAR_COUNT_INDEX=5.0,
               RL_REGIME_TAIL_EVENT_RECENCY_INDEX=42.0)
    f = rd.replay(stream(1, 4, session_pnl_worst=-10.0, lots=np.ones((1, 4), np.int32)),
                  engine=engine, controllers=controllers, isv=isv)
    assert col(f, "regime.tail.welford_count")[0] == 6.0  # still < 10 after this update
    assert col(f, "regime.tail.recency")[0] == 43.0  # a 10σ move, yet no tail event


def test_g24_tau_min_boosted_while_tail_is_recent(engine, controllers):
    f = rd.replay(stream(1, 4, session_pnl_worst=-10.0, tau_action=0.05, lots=np.ones((1, 4), np.int32)),
                  engine=engine, controllers=controllers, isv=TAIL_READY)
    assert col(f, "regime.tail.recency")[0] == 0.0
    assert col(f, "iqn.tau_min_effective")[0] == F(0.1) * F(1.5)
    assert col(f, "iqn.tau_action")[0] == F(0.1) * F(1.5)


def test_g25_tau_min_unchanged_once_window_passed(engine, controllers):
    f = rd.replay(stream(1, 4, tau_action=0.05, lots=np.ones((1, 4), np.int32)), engine=engine, controllers=controllers,
                  isv={"RL_REGIME_TAIL_EVENT_RECENCY_INDEX": 99.0})  # becomes 100 = window
    assert col(f, "regime.tail.recency")[0] == 100.0
    assert col(f, "iqn.tau_min_effective")[0] == F(0.1)
    assert col(f, "iqn.tau_action")[0] == F(0.1)


def test_g26_single_account_spike_lifts_sigma_in_one_step(engine, controllers):
    b = 1024
    rewards = np.random.default_rng(26).normal(0, 0.01, (2, b)).astype(np.float32)
    rewards[1, 7] = -100.0
    f = rd.replay(stream(2, b, rewards=rewards), engine=engine, controllers=controllers)
    sigma = col(f, "popart.sigma")
    assert sigma[0] < 2.0
    assert sigma[1] >= 100.0
    assert col(f, "regime.popart_envelope.max_abs_reward_ema")[1] == F(100.0)


def test_g27_envelope_decays_with_69_step_half_life(engine, controllers):
    steps = 120
    rewards = np.zeros((steps, 64), np.float32)
    rewards[0, 3] = -100.0
    f = rd.replay(stream(steps, 64, rewards=rewards), engine=engine, controllers=controllers)
    env = col(f, "regime.popart_envelope.max_abs_reward_ema")
    assert env[0] == F(100)
    # (1 - 0.01)^k: above half at k = 68, below at k = 69
    assert env[68] > 50.0 > env[69]
    np.testing.assert_allclose(env[1:], 100.0 * 0.99 ** np.arange(1, steps), rtol=1e-5)


def test_g28_v_correct_keeps_denormalized_value_across_the_spike(engine, controllers):
    b = 256
    rng = np.random.default_rng(28)
    rewards = rng.normal(0, 0.5, (3, b)).astype(np.float32)
    rewards[1, 11] = -60.0
    v_pred = rng.normal(0, 1, (3, b)).astype(np.float32)
    traj = rd.replay_trajectory(stream(3, b, rewards=rewards, v_pred=v_pred), engine=engine, controllers=controllers)
    f = traj.frame
    sigma, mean = col(f, "popart.sigma"), col(f, "popart.mean")
    s_old = np.concatenate([[1.0], sigma[:-1]])
    m_old = np.concatenate([[0.0], mean[:-1]])
    before = v_pred * s_old[:, None] + m_old[:, None]
    after = traj.v_pred_corrected * sigma[:, None] + mean[:, None]
    assert sigma[1] / s_old[1] > 10  # the spike step changes σ by an order of magnitude
    np.testing.assert_allclose(after, before, rtol=1e-5, atol=1e-5)
    # the V loss in the new normalization stays on the scale of the old one
    assert np.abs(traj.v_pred_corrected[1]).max() <= np.abs(v_pred[1]).max() + 1e-3
