"""The spec's numeric claims: Theorem 6's worked example, the envelope half-life,
Theorem 1's cycle, the γ boundary fix and the Welford count gate."""
from __future__ import annotations

import numpy as np

import regime_dash as rd
from regime_dash.core.slots import DEFAULT_LAYOUT, SlotLayout
from tests.helpers import col, stream

F = np.float32


def test_theorem6_worked_example(engine):
    # Run #8 step 7377: one account at -19.45 among 1023 zeros, old var 5.4
    rewards = np.zeros((1, 1024), np.float32)
    rewards[0, 0] = -19.45
    f = rd.replay(stream(1, 1024, rewards=rewards), engine=engine,
                  isv={"POPART_VAR_INDEX": 5.4, "POPART_SIGMA_INDEX": float(np.sqrt(F(5.4)))})
    var = col(f, "popart.var")[0]
    # the spec: batch_var = 378.3/1024 − 0.019² ≈ 0.369; new_var = 0.999·5.4 + 0.001·0.369 = 5.395
    batch_mean = F(-19.45) / F(1024)
    batch_var = F(-19.45) * F(-19.45) / F(1024) - batch_mean * batch_mean
    assert abs(float(batch_var) - 0.369) < 5e-4
    assert var == F(0.999) * F(5.4) + F(0.001) * batch_var
    assert abs(float(var) - 5.395) < 5e-4
    # Δσ from the EMA alone is ~0 (the blindness) ...
    assert abs(np.sqrt(var) - np.sqrt(F(5.4))) / np.sqrt(F(5.4)) < 0.001
    # ... but σ_eff = max(σ, envelope) = 19.45
    assert col(f, "popart.sigma")[0] == F(19.45)


def test_envelope_half_life_is_about_69_steps_at_alpha_001(engine):
    steps = 250
    rewards = np.zeros((steps, 8), np.float32)
    rewards[0, 0] = 1.0
    f = rd.replay(stream(steps, 8, rewards=rewards), engine=engine)
    env = col(f, "regime.popart_envelope.max_abs_reward_ema").astype(np.float64)
    half = int(np.argmax(env < 0.5))
    assert half == 69
    assert np.log(0.5) / np.log(1 - 0.01) == __import__("pytest").approx(68.97, abs=0.01)
    # "returns to baseline within ~3 half-lives (~200 steps)"
    assert env[3 * 69] < 0.13


def _closed_loop_lots(engine: str, steps: int, accounts: int, **fields):
    """Lots that follow the replay's own kelly_f: every account opens (and holds one lot)
    on the steps after kelly_f > 0, flat otherwise. Iterated to a fixed point."""
    lots = np.zeros((steps, accounts), np.int32)
    for _ in range(steps + 1):
        f = rd.replay(stream(steps, accounts, lots=lots, **fields), engine=engine)
        kelly = col(f, "kelly.fraction")
        want = np.zeros_like(lots)
        want[1:] = (kelly[:-1] > 0)[:, None]
        if np.array_equal(want, lots):
            return lots, f
        lots = want
    raise AssertionError("closed loop did not settle")


def test_theorem1_cycle_dead_zone_then_eps_then_exit(engine):
    # The edge is negative for good: analytic Kelly is 0 at every step.
    lots, f = _closed_loop_lots(engine, 12, 16, kelly_analytic=-0.5)
    flag = col(f, "regime.dead_zone.flag")
    kelly = col(f, "kelly.fraction")
    analytic = col(f, "kelly.analytic")
    assert (analytic == 0).all()
    # step 0 reads the bootstrap kelly_f = 1: no spurious detection at training start
    assert flag[0] == 0.0
    # step 1: kelly_f(0) = 0 and all flat → dead zone; Kelly overridden with ε
    assert flag[1] == 1.0 and kelly[1] == col(f, "regime.kelly_eps_recovery.live")[1] > 0
    # step 2: accounts opened on ε → the dead zone exits, analytic Kelly returns (0)
    assert lots[2].all() and flag[2] == 0.0 and kelly[2] == 0.0
    # the cycle repeats: on/off, never a monotone climb toward MAX_DURATION
    assert col(f, "regime.dead_zone.duration").max() == 1.0
    assert flag[1::2].all() and not flag[2::2].any()


def test_theorem1_trap_without_resurrection(engine):
    f = rd.replay(stream(12, 16, kelly_analytic=-0.5), rd.RegimeConfig(resurrection=False), engine=engine)
    # absorbing: kelly 0, all flat, the duration only grows
    np.testing.assert_array_equal(col(f, "regime.dead_zone.duration"), np.arange(12, dtype=np.float32))
    assert (col(f, "kelly.fraction") == 0).all()


def _fold_stream():
    # worst drifts down by |N(0, 10)| per step through training (≈ -320 by step 39),
    # then the session reset at the boundary brings it back to 0 and it drifts again
    steps = 60
    drops = np.abs(np.random.default_rng(7).normal(0, 10, steps)).astype(np.float32)
    worst = np.empty(steps, np.float32)
    worst[:40] = -np.cumsum(drops[:40])
    worst[40:] = np.concatenate([[0.0], -np.cumsum(drops[41:])])
    boundary = np.zeros(steps, bool)
    boundary[40] = True
    return stream(steps, 4, session_pnl_worst=worst, boundary=boundary, lots=np.ones((steps, 4), np.int32))


def test_gamma_fix_no_spurious_tail_at_boundary(engine):
    s = _fold_stream()
    f = rd.replay(s, engine=engine)
    recency = col(f, "regime.tail.recency")
    # |Δworst| = |0 − (−320)| would be a ~40σ tail; aligned, Δ = 0: re-bootstrapped, then +1
    assert recency[40] == F(1e6) + 1
    assert col(f, "regime.transition.remaining")[40] == F(499)  # the v9 ramp armed at the same reset
    # the Welford state is kept across the boundary: worst and the aligned previous worst are
    # both 0 there, so the spec skips that update, and the count goes on from where it was
    count = col(f, "regime.tail.welford_count")
    assert count[39] == 40 and count[40] == 40 and count[41] == 41


def test_gamma_fix_is_what_prevents_the_tail():
    # the same fold with PREV_WORST_PNL kept (v2's bug) fires a tail at the boundary
    v2 = SlotLayout(tuple(
        s if s.name != "RL_REGIME_PREV_WORST_PNL_INDEX" else
        __import__("dataclasses").replace(s, policy="keep", align_to=None)
        for s in DEFAULT_LAYOUT))
    f = rd.replay(_fold_stream(), layout=v2)
    assert col(f, "regime.tail.recency")[40] == 0.0


def test_welford_count_below_10_gates_tail_detection():
    # the same kind of jump is gated at count 9 and detected at count 15
    worst = np.array([-1, -2, -3, -4, -5, -6, -7, -8, -1000,
                      -1001, -1002, -1003, -1004, -1005, -2005], np.float32)
    steps = len(worst)
    cfg = rd.RegimeConfig(tail_sigma_threshold=2.0)
    f = rd.replay(stream(steps, 4, session_pnl_worst=worst, lots=np.ones((steps, 4), np.int32)), cfg)
    count = col(f, "regime.tail.welford_count")
    recency = col(f, "regime.tail.recency")
    var = col(f, "regime.tail.session_pnl_variance_ema")
    dx = np.diff(np.concatenate([[F(0)], worst])).astype(np.float32)
    would_be_tail = (var > 0) & (np.abs(dx) > F(2.0) * np.sqrt(var))
    np.testing.assert_array_equal(count, np.arange(1, steps + 1, dtype=np.float32))
    assert would_be_tail[8] and count[8] == 9 and recency[8] != 0  # gated
    assert would_be_tail[14] and count[14] == 15 and recency[14] == 0  # detected
    assert (recency[:14] != 0).all()
