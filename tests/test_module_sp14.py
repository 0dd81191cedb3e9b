"""SP14 α-grad gate module: the commit note's two tests, the known limitation, validation, kernel parity."""
from __future__ import annotations

import numpy as np
import pytest

from regime_dash.errors import ConfigError, StreamError
from regime_dash.modules import MODULES, full_layout, orphan_slots
from regime_dash.modules.f32 import exp_f32, sigmoid_f32
from regime_dash.modules.sp14_alpha_grad_gate import Sp14Config, Sp14Stream
from regime_dash.modules.sp14_alpha_grad_gate import slots as S
from regime_dash.modules.sp14_alpha_grad_gate.replay import COLUMNS as C
from regime_dash.modules.sp14_alpha_grad_gate.replay import initial_isv, reset_plan
from regime_dash.modules.sp14_alpha_grad_gate.twin import alpha_grad_gate_step, replay_twin
from tests.helpers import by_id

M = MODULES["sp14_alpha_grad_gate"]


def stream_of(aux, q_dis=0.2, warmup=1.0, **kw):
    aux = np.asarray(aux, dtype=np.float32)
    t = len(aux)
    return Sp14Stream.make(aux_dir_acc=aux, q_disagreement=np.full(t, q_dis, np.float32),
                           warmup_gate=np.full(t, warmup, np.float32), **kw)


def test_schmitt_hysteresis_four_step_trajectory():
    # The note's alpha_grad_schmitt_hysteresis: closed at 0.55 (< open 0.58), opens at 0.60,
    # stays open at 0.54 (inside [0.52, 0.58]), closes at 0.50 (< close 0.52).
    frame = M.replay(stream_of([0.55, 0.60, 0.54, 0.50]))
    assert frame[C["gate1_state"]].tolist() == [0.0, 1.0, 1.0, 0.0]
    raw = frame[C["alpha_raw"]].to_numpy()
    assert raw[0] == 0.0 and raw[3] == 0.0
    assert raw[1] > 0.5 and raw[2] > 0.0  # open: gate1 = sigmoid(k·(aux − target)) passes
    assert raw[2] < raw[1]  # 0.54 is below the target: Gate 1's sigmoid is under one half


def test_adaptive_beta_twenty_oscillations_grows_and_stays_bounded():
    # The note's alpha_grad_adaptive_beta: a 20-oscillation regime across the band.
    aux = np.tile([0.50, 0.62], 20)
    frame = M.replay(stream_of(aux))
    beta = frame[C["beta"]].to_numpy()
    assert frame[C["gate1_state"]].tolist() == [0.0, 1.0] * 20  # the gate really toggles 40 times
    assert beta.max() <= np.float32(0.95)
    assert beta.min() >= np.float32(0.5)
    assert beta[-1] > np.float32(0.5)
    assert beta[-1] > beta[0]


def test_beta_ceiling_binds_exactly_at_beta_max():
    cfg = Sp14Config(variance_ref_beta=1e-4)
    frame = M.replay(stream_of(np.tile([0.50, 0.62], 20)), cfg)
    beta = frame[C["beta"]].to_numpy()
    assert (beta == np.float32(0.95)).any()
    assert beta.max() == np.float32(0.95)


def test_steady_open_gate_keeps_beta_at_base_once_converged():
    frame = M.replay(stream_of(np.full(400, 0.62, np.float32)))
    beta = frame[C["beta"]].to_numpy()
    smooth = frame[C["alpha_smoothed"]].to_numpy()
    raw = frame[C["alpha_raw"]].to_numpy()
    assert beta.max() > np.float32(0.6)  # the opening jump raised β ...
    assert np.float32(0.5) <= beta[-1] < np.float32(0.5001)  # ... and the decayed variance lets it fall back
    assert abs(smooth[-1] - raw[-1]) < 1e-5


def test_slot_388_has_consumers_but_no_producer():
    rec = next(s for s in S.SLOTS if s.index == 388)
    assert rec.name == "AUX_DIR_ACC_VARIANCE_EMA_INDEX"
    assert rec.producer == "" and rec.consumers
    assert orphan_slots(M.slots) == ["AUX_DIR_ACC_VARIANCE_EMA_INDEX"]
    assert "AUX_DIR_ACC_VARIANCE_EMA_INDEX" in orphan_slots(full_layout().table())


def test_known_limitation_pins_k_aux_and_the_check_says_so():
    stream = M.demo_stream(seed=3, steps=400)
    frame = M.replay(stream)
    assert (frame[C["k_aux"]] == np.float32(20.0)).all()
    res = by_id(M.invariants(frame))["sp14.var_aux_producer"]
    assert res.status == "fail" and "388" in res.detail
    fixed = M.replay(stream, Sp14Config(var_aux_producer=True))
    assert fixed[C["k_aux"]].nunique() > 10 and (fixed[C["k_aux"]] < 20.0).any()
    assert by_id(M.invariants(fixed))["sp14.var_aux_producer"].status == "pass"


def test_demo_replay_passes_every_other_invariant():
    frame = M.replay(M.demo_stream(seed=1, steps=600))
    res = by_id(M.invariants(frame))
    for cid in ("sp14.alpha_raw_bounded", "sp14.k_floor", "sp14.beta_bounds", "sp14.schmitt_hysteresis",
                "sp14.rate_limiter"):
        assert res[cid].status == "pass", res[cid]


def test_invariants_catch_corrupted_rows():
    frame = M.replay(M.demo_stream(seed=2, steps=300))
    bad = frame.copy()
    bad.attrs = dict(frame.attrs)
    bad.loc[123, C["beta"]] = np.float32(0.97)
    state = bad[C["gate1_state"]].to_numpy().copy()
    state[200] = 1.0 - state[200]
    bad[C["gate1_state"]] = state
    res = by_id(M.invariants(bad))
    assert res["sp14.beta_bounds"].status == "fail"
    assert res["sp14.beta_bounds"].first_step == int(frame["step"][123])
    assert res["sp14.schmitt_hysteresis"].status == "fail"
    assert int(frame["step"][200]) in res["sp14.schmitt_hysteresis"].steps
    assert res["sp14.rate_limiter"].status == "pass"


def test_rate_limiter_check_catches_a_jump():
    frame = M.replay(M.demo_stream(seed=2, steps=300))
    bad = frame.copy()
    bad.attrs = dict(frame.attrs)
    bad.loc[150, C["alpha_smoothed"]] = bad.loc[150, C["alpha_smoothed"]] + np.float32(0.05)
    res = by_id(M.invariants(bad))["sp14.rate_limiter"]
    assert res.status == "fail" and res.first_step == int(frame["step"][150])


def test_invariants_skip_without_their_columns():
    frame = M.replay(stream_of([0.5, 0.6])).drop(columns=[C["k_aux"]])
    assert by_id(M.invariants(frame))["sp14.k_floor"].status == "skip"


def test_fold_boundary_resets_the_gate():
    aux = [0.62, 0.62, 0.56, 0.56]
    frame = M.replay(stream_of(aux, boundary=[False, False, True, False]))
    assert frame[C["gate1_state"]].tolist() == [1.0, 1.0, 0.0, 0.0]  # 0.56 would have kept it open
    assert frame["fold"].tolist() == [0, 0, 0, 0]  # fold 0: its train segment, then its eval
    assert frame["phase"].tolist() == ["train", "train", "eval", "eval"]


def test_module_fold_and_phase_mean_what_the_core_diag_says():
    import regime_dash as rd
    from regime_dash.modules.base import fold_starts

    boundary = [False, False, True, False, True, False, True, False]
    frame = M.replay(stream_of([0.62, 0.56, 0.56, 0.62, 0.56, 0.62, 0.56, 0.56], boundary=boundary))
    core = rd.replay(rd.Stream.make(rewards=np.zeros((8, 2)), lots=np.zeros((8, 2)), boundary=boundary))
    assert frame["fold"].tolist() == core["fold"].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert frame["phase"].tolist() == core["phase"].tolist()
    # every boundary resets the state, the train→eval one inside a fold too (0.56 keeps an open gate open)
    assert np.flatnonzero(fold_starts(frame)).tolist() == [0, 2, 4, 6]
    assert frame[C["gate1_state"]].tolist() == [1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0]
    res = by_id(M.invariants(frame))  # the checks that reset at fold starts see every reset
    assert res["sp14.schmitt_hysteresis"].status == res["sp14.rate_limiter"].status == "pass"


def test_warmup_model_ramps_the_gate():
    frame = M.replay(Sp14Stream.make(aux_dir_acc=np.full(20, 0.62, np.float32),
                                     q_disagreement=np.full(20, 0.2, np.float32)), Sp14Config(warmup_steps=10))
    warm = frame[C["warmup_gate"]].to_numpy()
    np.testing.assert_allclose(warm[:10], (np.arange(10) + 1) / 10, rtol=1e-6)
    assert (warm[10:] == 1.0).all()


def test_exp_and_sigmoid_are_accurate_and_saturate():
    xs = np.linspace(-30, 30, 2001).astype(np.float32)
    ours = np.array([exp_f32(x) for x in xs], dtype=np.float32)
    ulps = np.abs(ours.view(np.int32).astype(np.int64) - np.exp(xs).view(np.int32).astype(np.int64))
    assert ulps.max() <= 4
    assert sigmoid_f32(1e6) == np.float32(1.0) and sigmoid_f32(30.0) == sigmoid_f32(1e6)
    assert sigmoid_f32(-1e6) == sigmoid_f32(-30.0) > 0


def test_config_errors_name_the_value():
    with pytest.raises(ConfigError, match="0.99"):
        Sp14Config(beta_base=0.99, beta_max=0.95)
    with pytest.raises(ConfigError, match="hysteresis=-1"):
        Sp14Config(hysteresis=-1.0)
    with pytest.raises(ConfigError, match="nope"):
        Sp14Config().replace(nope=1)
    with pytest.raises(ConfigError, match="warmup_steps=2.5"):
        Sp14Config(warmup_steps=2.5)
    assert Sp14Config().with_settings(["target=0.6", "var_aux_producer=true"]).var_aux_producer is True
    specs = {s.name: s for s in Sp14Config.field_specs()}
    assert specs["k_base_aux"].model and not specs["beta_max"].model
    assert specs["var_aux_producer"].kind == "bool" and specs["warmup_steps"].kind == "int"


def test_stream_errors_name_the_value():
    with pytest.raises(StreamError, match="1.5"):
        stream_of([0.5, 1.5])
    with pytest.raises(StreamError, match="nan"):
        stream_of([0.5, float("nan")])
    with pytest.raises(StreamError, match="steps"):
        Sp14Stream.make(aux_dir_acc=np.full(3, 0.5), q_disagreement=np.full(4, 0.5))
    with pytest.raises(StreamError, match="step must increase"):
        stream_of([0.5, 0.5], step=[3, 3])


def test_figures_draw_every_panel_and_the_baseline():
    frame = M.replay(M.demo_stream(steps=200))
    figs = M.figures(frame)
    assert len(figs) == 3 and all(len(f.data) >= 3 for f in figs)
    with_base = M.figures(frame, baseline=M.replay(M.demo_stream(steps=200), Sp14Config(target=0.6)))
    assert sum(len(f.data) for f in with_base) > sum(len(f.data) for f in figs)


# ---- parity with the kernel -------------------------------------------------------------
def random_stream(rng, t_steps=300):
    aux = np.clip(0.55 + rng.normal(0, 0.05, t_steps), 0, 1).astype(np.float32)
    aux[rng.random(t_steps) < 0.1] = np.float32(0.58)  # exactly at the open threshold's float
    q_dis = rng.uniform(0, 1, t_steps).astype(np.float32)
    var_q = rng.uniform(0, 0.05, t_steps).astype(np.float32)
    boundary = rng.random(t_steps) < 0.02
    return aux, q_dis, var_q, boundary


@pytest.mark.gpu
@pytest.mark.parametrize("with_var_aux", [False, True])
def test_replay_kernel_matches_twin_bit_for_bit(with_var_aux):
    from regime_dash.modules.sp14_alpha_grad_gate.cuda import replay_kernel

    rng = np.random.default_rng(7 + with_var_aux)
    aux, q_dis, var_q, boundary = random_stream(rng)
    var_aux = rng.uniform(0, 0.05, len(aux)).astype(np.float32) if with_var_aux else None
    warm = rng.uniform(0, 1, len(aux)).astype(np.float32)
    idx, val = reset_plan()
    params = Sp14Config(k_base_aux=35.0, variance_ref_beta=0.002).params()
    isv_twin = initial_isv()
    snap_twin = replay_twin(isv_twin, aux, q_dis, var_q, var_aux, warm, boundary, idx, val, params)
    snap_gpu, isv_gpu = replay_kernel(initial_isv(), aux, q_dis, var_q, var_aux, warm, boundary, idx, val, params)
    np.testing.assert_array_equal(snap_gpu.view(np.int32), snap_twin.view(np.int32))
    np.testing.assert_array_equal(isv_gpu.view(np.int32), isv_twin.view(np.int32))
    assert len(np.unique(snap_twin[:, 9])) == 2  # both gate states were visited


@pytest.mark.gpu
def test_per_step_kernel_matches_twin_on_random_states():
    from regime_dash.modules.sp14_alpha_grad_gate.cuda import step_kernel

    rng = np.random.default_rng(11)
    params = Sp14Config().params()
    for _ in range(40):
        isv = initial_isv()
        for i, v in ((S.AUX, rng.uniform(0.4, 0.7)), (S.Q_DIS, rng.uniform(0, 1)), (S.VAR_AUX, rng.uniform(0, .1)),
                     (S.VAR_Q, rng.uniform(0, .1)), (S.VAR_ALPHA, rng.uniform(0, .1)),
                     (S.GATE1, rng.choice([0.0, 1.0])), (S.SMOOTHED, rng.uniform(0, 1))):
            isv[i] = np.float32(v)
        warm = np.float32(rng.uniform(0, 1))
        want = isv.copy()
        alpha_grad_gate_step(want, warm, params)
        got = step_kernel(isv, warm, params)
        np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))
