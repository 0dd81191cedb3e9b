"""SP18 module: D-leg tests T1, T3, T4, T5, B-leg tests T8, T10, the TD(λ) kernel, and GPU parity (T2, T9)."""
from __future__ import annotations

import numpy as np
import pytest

from regime_dash.errors import ConfigError, StreamError
from regime_dash.modules import MODULES
from regime_dash.modules.f32 import pearls_ad_update
from regime_dash.modules.sp18_hold import Sp18Config, Sp18Stream
from regime_dash.modules.sp18_hold import slots as S
from regime_dash.modules.sp18_hold import twin
from regime_dash.modules.sp18_hold.demo import bar_stream
from regime_dash.modules.sp18_hold.replay import COL
from regime_dash.core.slots import SlotLayout
from tests.helpers import by_id

M = MODULES["sp18_hold"]
F = np.float32
SIZES = (1, 31, 1500)


def fresh_isv():
    return SlotLayout(S.SLOTS).bootstrap_vector()


# ---- D-leg ---------------------------------------------------------------------------------
def test_t1_hold_opportunity_cost_signs_bounds_and_zero_off_hold():
    cost = twin.compute_sp18_hold_opportunity_cost
    up = cost(S.DIR_HOLD, 0.005, 0.0001, 3, F(5.0), F(-10.0), F(1.0))
    down = cost(S.DIR_HOLD, -0.005, 0.0001, 3, F(5.0), F(-10.0), F(1.0))
    assert -10.0 <= up < 0.0 and up == F(-10.0)  # −2 × 50 = −100, capped at NEG
    assert 0.0 < down <= 5.0 and down == F(5.0)
    assert cost(S.DIR_HOLD, 0.0001, 0.001, 0, F(5.0), F(-10.0), F(1.0)) == F(-2.0) * (F(0.0001) / F(0.001))
    for d in (S.DIR_SHORT, S.DIR_LONG, S.DIR_FLAT):
        out = cost(d, 0.005, 0.0001, 3, F(5.0), F(-10.0), F(1.0))
        assert out == 0.0 and not np.signbit(out)


def test_opportunity_cost_batch_equals_the_scalar_function(rng):
    n = 500
    d = rng.integers(0, 4, n).astype(np.int32)
    ret = rng.normal(0, 0.003, n).astype(np.float32)
    vol = rng.uniform(1e-4, 3e-3, n).astype(np.float32)
    isv = fresh_isv()
    isv[S.POS], isv[S.NEG] = F(2.5), F(-5.0)
    batch = twin.hold_opportunity_cost_batch(d, ret, vol, np.zeros(n, np.int32), isv, F(0.7))
    one = [twin.compute_sp18_hold_opportunity_cost(int(d[i]), ret[i], vol[i], 0, F(2.5), F(-5.0), F(0.7))
           for i in range(n)]
    np.testing.assert_array_equal(batch.view(np.int32), np.array(one, np.float32).view(np.int32))


def test_caps_fall_back_to_the_sentinels_while_unset():
    isv = fresh_isv()
    isv[S.POS], isv[S.NEG] = F(0.0), F(0.0)
    assert twin.effective_caps(isv) == (F(5.0), F(-10.0))


def test_t5_cap_producer_drives_483_and_484(rng):
    step_ret = rng.normal(0, 0.01, 100).astype(np.float32)
    isv = fresh_isv()
    assert twin.hold_reward_cap_update(isv, step_ret, np.ones(100, np.int32), *Sp18Config().cap_params())
    p99 = np.sort(np.abs(step_ret))[98]  # nearest rank: ceil(0.99 · 100) = 99th smallest
    assert isv[S.POS] == F(p99) * F(1.5)  # first observation: the sentinel gives way at once
    assert isv[S.POS] == pytest.approx(np.percentile(np.abs(step_ret), 99) * 1.5, rel=0.02)
    assert isv[S.NEG] == F(-2.0) * isv[S.POS]
    assert 0.01 <= isv[S.POS] <= 5.0
    assert isv[S.IDX["HRC_SAMPLE_COUNT_INDEX"]] == 1.0


def test_cap_producer_ignores_non_closes_and_needs_a_close():
    isv = fresh_isv()
    before = isv.copy()
    assert not twin.hold_reward_cap_update(isv, np.ones(10, np.float32), np.zeros(10, np.int32),
                                           *Sp18Config().cap_params())
    np.testing.assert_array_equal(isv, before)
    ret = np.array([0.1, 100.0, 0.2], np.float32)
    twin.hold_reward_cap_update(isv, ret, np.array([1, 0, 1], np.int32), *Sp18Config().cap_params())
    assert isv[S.POS] == F(0.2) * F(1.5)  # the 100.0 was not a Long/Short close


def test_cap_bounds_clamp_pos_and_neg_follows():
    cfg = Sp18Config()
    isv = fresh_isv()
    twin.hold_reward_cap_update(isv, np.full(5, 40.0, np.float32), np.ones(5, np.int32), *cfg.cap_params())
    assert isv[S.POS] == F(5.0) and isv[S.NEG] == F(-10.0)
    assert isv[S.EMA] == F(60.0)  # the EMA keeps the unclamped observation
    isv = fresh_isv()
    twin.hold_reward_cap_update(isv, np.full(5, 1e-5, np.float32), np.ones(5, np.int32), *cfg.cap_params())
    assert isv[S.POS] == F(0.01) and isv[S.NEG] == F(-0.02)


def test_pearls_ad_alpha_smooths_noise_and_tracks_a_moving_level(rng):
    noise = np.zeros(8, np.float32)
    for x in rng.normal(1.0, 0.1, 400):
        pearls_ad_update(noise, x, 0.01, 0.5)
    trend = np.zeros(8, np.float32)
    for x in np.linspace(0, 10, 400) + rng.normal(0, 0.01, 400):
        pearls_ad_update(trend, x, 0.01, 0.5)
    assert noise[1] < 0.1 and trend[1] == F(0.5)
    assert abs(noise[0] - 1.0) < 0.05 and trend[0] > 9.0


def test_t3_uniform_edge_market_hold_reward_mean_near_zero_with_width():
    stream = bar_stream(3, 2400, dist="uniform", scale=0.005, hold_share=0.5)
    frame = M.replay(stream)
    hold = frame.loc[frame[COL.action] == S.DIR_HOLD, COL.hold_opp].to_numpy()
    assert len(hold) >= 1000
    hold = hold[:1000]
    assert hold.var() > 0.001
    assert abs(hold.mean()) < 0.1 * hold.std()


def test_t4_positive_edge_market_hold_pays_and_long_beats_hold():
    stream = bar_stream(4, 2000, mean=0.001, scale=0.002, hold_share=0.5)
    frame = M.replay(stream)
    act = frame[COL.action].to_numpy()
    hold = frame[COL.hold_opp].to_numpy()[act == S.DIR_HOLD][:1000]
    assert hold.mean() < 0
    longs = act == S.DIR_LONG
    assert (frame[COL.long].to_numpy()[longs] - frame[COL.hold_opp].to_numpy()[longs]).mean() > 0


def test_hold_width_gate_passes_by_default_and_fails_when_shaping_shrinks_hold():
    stream = bar_stream(5, 1500, mean=0.0, scale=0.002, hold_share=0.4)
    assert by_id(M.invariants(M.replay(stream)))["sp18.hold_width_match"].status == "pass"
    narrow = by_id(M.invariants(M.replay(stream, Sp18Config(shaping_scale=0.05))))["sp18.hold_width_match"]
    assert narrow.status == "fail" and narrow.violations == 1


def test_demo_replay_passes_every_check():
    res = M.invariants(M.replay(M.demo_stream(seed=2, steps=1200)))
    assert {r.id for r in res} >= {"sp18.cap_bounds", "sp18.td_error_ratio"}
    assert all(r.status == "pass" for r in res), [r for r in res if r.status != "pass"]


def test_invariants_catch_corrupted_rows():
    frame = M.replay(M.demo_stream(seed=2, steps=600))
    bad = frame.copy()
    bad.attrs = dict(frame.attrs)
    bad.loc[77, COL.neg] = bad.loc[77, COL.neg] * F(1.01)
    i_long = int(np.flatnonzero(frame[COL.action].to_numpy() == S.DIR_LONG)[3])
    bad.loc[i_long, COL.hold_chosen] = F(0.25)
    res = by_id(M.invariants(bad))
    assert res["sp18.cap_neg_ratio"].status == "fail"
    assert res["sp18.cap_neg_ratio"].first_step == int(frame["step"][77])
    assert res["sp18.hold_only_on_hold"].steps == [int(frame["step"][i_long])]


def test_fold_boundary_resets_the_caps_to_the_sentinels():
    stream = M.demo_stream(seed=1, steps=800)
    frame = M.replay(stream)
    b = int(np.flatnonzero(stream.boundary)[0])
    assert frame[COL.pos][b - 1] != F(5.0)
    assert frame[COL.pos][b] == F(5.0) and frame[COL.neg][b] == F(-10.0)


# ---- B-leg ---------------------------------------------------------------------------------
def test_t8_per_branch_ddqn_bootstrap_by_hand():
    on = np.zeros((1, 13), np.float32)
    tg = np.arange(13, dtype=np.float32)[None, :] * F(10.0)
    on[0, 2] = 5.0  # dir argmax 2
    on[0, 4] = on[0, 6] = 3.0  # mag tie: lowest index 4
    on[0, 9] = 1.0  # ord argmax 9
    on[0, 10:13] = -1.0  # urg all tied: 10
    assert twin.ddqn_branch_bootstrap(on, tg)[0] == F(20.0 + 40.0 + 90.0 + 100.0)


def test_t8_matches_brute_force_argmax(rng):
    on = np.round(rng.normal(size=(400, 13)), 1).astype(np.float32)  # rounding makes ties
    tg = rng.normal(size=(400, 13)).astype(np.float32)
    want = np.zeros(400, np.float32)
    for start, end in S.BRANCHES:  # np.argmax takes the first maximum too
        want = want + tg[np.arange(400), start + np.argmax(on[:, start:end], axis=1)]
    np.testing.assert_array_equal(twin.ddqn_branch_bootstrap(on, tg), want)


def test_td_lambda_one_step_and_full_trace():
    r = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    d = np.array([0, 0, 0, 1], np.float32)
    q = np.array([10.0, 20.0, 30.0, 40.0], np.float32)
    one, _ = twin.td_lambda(r, d, q, 1, 4, 0.9, 0.0, 1)
    np.testing.assert_allclose(one, [1 + 0.9 * 10, 2 + 0.9 * 20, 3 + 0.9 * 30, 4.0], rtol=1e-6)
    mc, dd = twin.td_lambda(r, d, np.zeros(4, np.float32), 1, 4, 0.5, 1.0, 10)
    np.testing.assert_allclose(mc, [1 + 0.5 * 2 + 0.25 * 3 + 0.125 * 4, 2 + 0.5 * 3 + 0.25 * 4, 3 + 0.5 * 4, 4],
                               rtol=1e-6)
    assert dd.tolist() == [1.0, 1.0, 1.0, 1.0]


def test_td_lambda_trace_stops_at_done_and_at_max_trace():
    r = np.array([1.0, 1.0, 100.0, 1.0], np.float32)
    d = np.array([0, 1, 0, 0], np.float32)
    g, dd = twin.td_lambda(r, d, np.zeros(4, np.float32), 1, 4, 1.0, 1.0, 10)
    assert g[0] == 2.0 and dd[0] == 1.0  # the 100 after the done does not leak back
    g2, dd2 = twin.td_lambda(r, np.zeros(4, np.float32), np.full(4, 7.0, np.float32), 1, 4, 1.0, 1.0, 2)
    assert g2[0] == 1.0 + 1.0 + 7.0 and dd2[0] == 0.0  # two steps (r0, r1), then q_next of step 1


def _td_lambda_per_sample(r, d, q, t_len, gamma, lam, max_trace):
    """The kernel's thread body, one sample at a time (one env)."""
    gamma, lam, one = F(gamma), F(lam), F(1.0)
    out = np.empty(t_len, np.float32)
    for t in range(t_len):
        end = min(t + max_trace, t_len) - 1
        for k in range(t, end + 1):
            if d[k] > F(0.5):
                end = k
                break
        g = r[end] + gamma * (one - d[end]) * q[end]
        for k in range(end - 1, t - 1, -1):
            g = r[k] + gamma * (one - d[k]) * ((one - lam) * q[k] + lam * g)
        out[t] = g
    return out


@pytest.mark.parametrize("t_len,max_trace", [(1, 10), (31, 1), (400, 10), (300, 64)])
def test_td_lambda_twin_equals_the_per_sample_loop_bit_for_bit(t_len, max_trace, rng):
    r, q = rng.normal(size=(2, t_len)).astype(np.float32)
    d = (rng.random(t_len) < 0.05).astype(np.float32)
    got, _ = twin.td_lambda(r, d, q, 1, t_len, 0.95, 0.9, max_trace)
    np.testing.assert_array_equal(got.view(np.int32), _td_lambda_per_sample(r, d, q, t_len, 0.95, 0.9,
                                                                           max_trace).view(np.int32))


def test_t10_td_error_ratio_on_a_100_step_rollout():
    frame = M.replay(M.demo_stream(seed=0, steps=100))
    pre, post = frame[COL.err_defect].mean(), frame[COL.err_fixed].mean()
    assert 0.5 <= post / pre <= 5.0
    assert not np.array_equal(frame[COL.ret_defect], frame[COL.ret_fixed])
    assert by_id(M.invariants(frame))["sp18.td_error_ratio"].status == "pass"


def test_td_ratio_gate_fails_when_the_bootstrap_blows_up():
    frame = M.replay(M.demo_stream(seed=0, steps=300), Sp18Config(target_lag=5.0, q_scale=100.0, gamma=1.0,
                                                                  td_lambda=0.0))
    ok = by_id(M.invariants(frame))["sp18.td_error_ratio"]
    assert ok.status == "pass" and float(ok.detail.split("= ")[1].split(",")[0]) > 3.0  # near the edge
    blown = frame.copy()
    blown[COL.err_fixed] = blown[COL.err_fixed] * F(2.0)
    res = by_id(M.invariants(blown))["sp18.td_error_ratio"]
    assert res.status == "fail" and res.first_step == int(frame["step"].iloc[-1])


# ---- validation ----------------------------------------------------------------------------
def test_config_and_stream_errors_name_the_value():
    with pytest.raises(ConfigError, match="pos_min=6"):
        Sp18Config(pos_min=6.0, pos_max=5.0)
    with pytest.raises(ConfigError, match="max_trace=0"):
        Sp18Config(max_trace=0)
    with pytest.raises(StreamError, match="4"):
        Sp18Stream.make(next_log_return=np.zeros(3), vol_proxy=np.ones(3), action_dir=[0, 4, 1])
    with pytest.raises(StreamError, match="1.5"):
        Sp18Stream.make(next_log_return=np.zeros(3), vol_proxy=np.ones(3), action_dir=[0, 1.5, 1])
    with pytest.raises(StreamError, match="-0.1"):
        Sp18Stream.make(next_log_return=np.zeros(2), vol_proxy=[0.1, -0.1], action_dir=[0, 1])


def test_figures_draw_the_four_panels():
    figs = M.figures(M.replay(M.demo_stream(steps=300)))
    assert len(figs) == 4 and len(figs[0].data) == 2 and len(figs[2].data) == 2


# ---- GPU parity (T2, T9 and the producers) ------------------------------------------------
gpu = pytest.mark.gpu


@gpu
@pytest.mark.parametrize("n", SIZES)
def test_t2_opportunity_cost_kernel_parity(n):
    from regime_dash.modules.sp18_hold import cuda

    rng = np.random.default_rng(n)
    d = rng.integers(0, 4, n).astype(np.int32)
    ret = rng.normal(0, 0.003, n).astype(np.float32)
    vol = rng.choice([1e-4, 1e-3, 0.0], n).astype(np.float32)
    bars = rng.integers(0, 9, n).astype(np.int32)
    for pos, neg in ((0.0, 0.0), (2.5, -5.0)):
        isv = fresh_isv()
        isv[S.POS], isv[S.NEG] = F(pos), F(neg)
        want = twin.hold_opportunity_cost_batch(d, ret, vol, bars, isv, F(0.8), F(1e-8))
        got = cuda.hold_opportunity_cost(d, ret, vol, bars, isv, F(0.8), F(1e-8))
        np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))


@gpu
@pytest.mark.parametrize("n", SIZES)
def test_cap_update_kernel_parity(n):
    from regime_dash.modules.sp18_hold import cuda

    rng = np.random.default_rng(100 + n)
    cfg = Sp18Config()
    isv = fresh_isv()
    for trial in range(6):
        ret = rng.normal(0, rng.choice([0.01, 1.0, 3.0]), n).astype(np.float32)
        ret[rng.random(n) < 0.2] = ret[0]  # repeated values: rank ties
        mask = (rng.random(n) < 0.7).astype(np.int32)
        mask[0] = 1
        want = isv.copy()
        twin.hold_reward_cap_update(want, ret, mask, *cfg.cap_params())
        got = cuda.hold_reward_cap_update(isv, ret, mask, cfg.cap_params())
        np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))
        isv = want


@gpu
@pytest.mark.parametrize("n", SIZES)
def test_t9_ddqn_kernel_parity(n):
    from regime_dash.modules.sp18_hold import cuda

    rng = np.random.default_rng(200 + n)
    on = np.round(rng.normal(size=(n, 13)), 1).astype(np.float32)
    tg = rng.normal(size=(n, 13)).astype(np.float32)
    np.testing.assert_array_equal(cuda.ddqn_branch_bootstrap(on, tg).view(np.int32),
                                  twin.ddqn_branch_bootstrap(on, tg).view(np.int32))


@gpu
@pytest.mark.parametrize("n", SIZES)
def test_td_lambda_kernel_parity(n):
    from regime_dash.modules.sp18_hold import cuda

    rng = np.random.default_rng(300 + n)
    r = rng.normal(size=n).astype(np.float32)
    q = rng.normal(size=n).astype(np.float32)
    d = (rng.random(n) < 0.05).astype(np.float32)
    for n_envs in {1, n if n % 3 else 3} if n > 1 else {1}:
        t_len = n // n_envs
        k = n_envs * t_len
        want = twin.td_lambda(r[:k], d[:k], q[:k], n_envs, t_len, 0.95, 0.9, 10)
        got = cuda.td_lambda(r[:k], d[:k], q[:k], n_envs, t_len, 0.95, 0.9, 10)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.view(np.int32), b.view(np.int32))


@gpu
def test_full_replay_cuda_equals_reference():
    stream = M.demo_stream(seed=4, steps=700)
    a = M.replay(stream, engine="reference")
    b = M.replay(stream, engine="cuda")
    for col in a.columns:
        np.testing.assert_array_equal(a[col].to_numpy(), b[col].to_numpy(), err_msg=col)
