"""The per-step CUDA engine against the reference, bit for bit, and its input checks.

Random streams (T >= 2000) visit every branch: dead-zone stretches (all flat,
negative edge), per-account reward tail shocks, Δworst tail events, cooldowns,
and boundaries (the first step included). Every diag column is compared as an
int32 view of its float32 bits, flags and counters included; so are the
normalized rewards, the corrected V_pred and the final ISV. Kernels compile
with ``--fmad=false``, so no field needs an ulp bound.
"""
from __future__ import annotations

import numpy as np
import pytest

from regime_dash.diag import catalogue as diag
from regime_dash.core.config import RegimeConfig
from regime_dash.engine import cuda as cuda_engine
from regime_dash.engine import initial_isv, replay_trajectory, snapshot_indices
from regime_dash.engine.summary import summarize_frame
from regime_dash.errors import EngineUnavailable, StreamError, ValidationError
from regime_dash.core.slots import DEFAULT_LAYOUT
from regime_dash.core.streams import Stream

T_STEPS = 2000
SIZES = (1, 31, 256, 1024, 1500)
#: The what-if variants: the default config (resurrection on: dead zones last one
#: step), resurrection off with a short max duration (timeouts fire), the F4/F5
#: switches off, and the model switches on with F2 (DURATION counts across the
#: resurrection cycles, so timeouts fire; the tail test on the deviation).
VARIANTS = {
    "default": (RegimeConfig(), {}),
    "timeouts": (RegimeConfig(resurrection=False, max_duration=60.0), {}),
    "f4_f5_off": (RegimeConfig(envelope=False, tau_boost=False),
                  {"RL_REGIME_TAIL_EVENT_RECENCY_INDEX": 0.0}),
    "model_switches": (RegimeConfig(tail_on_deviation=True, duration_across_cycles=True, max_duration=60.0), {}),
}


def random_stream(rng: np.random.Generator, t_steps: int, b: int, *, v_pred: bool = True) -> Stream:
    """A stream that visits every branch: dead zones, tail shocks, Δworst tails, boundaries."""
    rewards = (rng.standard_normal((t_steps, b)) * 0.5).astype(np.float32)
    lots = rng.integers(0, 3, size=(t_steps, b)).astype(np.int32)
    kelly = rng.normal(0.2, 0.3, t_steps).astype(np.float32)
    cooldown = np.where(rng.random(t_steps) < 0.05, rng.integers(1, 5, t_steps), 0).astype(np.float32)
    for start in rng.integers(0, t_steps, size=max(2, t_steps // 300)):
        n = int(rng.integers(20, 200))  # a dead-zone stretch: all flat, no edge, no cooldown
        lots[start:start + n] = 0
        kelly[start:start + n] = -0.5
        cooldown[start:start + n] = 0.0
        rewards[start:start + n] = 0.0
    for t in rng.integers(0, t_steps, size=max(2, t_steps // 100)):
        rewards[t, rng.integers(0, b)] = np.float32(rng.choice([-100.0, 60.0, -19.45]))
    worst = np.cumsum(rng.normal(0, 1.0, t_steps)).astype(np.float32)
    for t in rng.integers(0, t_steps, size=max(2, t_steps // 150)):
        worst[t:] -= np.float32(rng.uniform(20, 80))  # Δworst tail events
    tau = rng.uniform(0.0, 0.3, t_steps).astype(np.float32)
    boundary = np.zeros(t_steps, dtype=bool)
    boundary[rng.integers(1, t_steps, size=3)] = True
    boundary[0] = True
    worst[boundary] = 0.0  # the session resets at a boundary
    vp = (rng.standard_normal((t_steps, b)) * 2).astype(np.float32) if v_pred else None
    return Stream.make(rewards=rewards, lots=lots, kelly_analytic=kelly, cooldown=cooldown,
                       session_pnl_worst=worst, tau_action=tau, boundary=boundary, v_pred=vp)


def assert_same_trajectory(got, want):
    """Every diag column, the flat count, normalized rewards, V_pred and the final ISV, bitwise."""
    for col in diag.SNAPSHOT_COLUMNS:
        g = got.frame[col].to_numpy(np.float32).view(np.int32)
        w = want.frame[col].to_numpy(np.float32).view(np.int32)
        bad = np.flatnonzero(g != w)
        assert bad.size == 0, (f"{col}: {bad.size} steps differ, first at step {int(bad[0])}: "
                               f"got {got.frame[col].iloc[bad[0]]!r}, want {want.frame[col].iloc[bad[0]]!r}")
    assert np.array_equal(got.frame[diag.FLAT_COUNT], want.frame[diag.FLAT_COUNT])
    assert np.array_equal(got.rewards_normalized.view(np.int32), want.rewards_normalized.view(np.int32))
    if want.v_pred_corrected is None:
        assert got.v_pred_corrected is None
    else:
        assert np.array_equal(got.v_pred_corrected.view(np.int32), want.v_pred_corrected.view(np.int32))
    assert np.array_equal(got.isv.view(np.int32), want.isv.view(np.int32))


@pytest.fixture(scope="module")
def reference_runs():
    """Reference trajectories, computed once per (b, variant)."""
    cache = {}

    def get(b, variant):
        if (b, variant) not in cache:
            stream = random_stream(np.random.default_rng(1000 + b), T_STEPS, b)
            cfg, isv = VARIANTS[variant]
            cache[(b, variant)] = (stream, replay_trajectory(stream, cfg, "reference", isv=isv))
        return cache[(b, variant)]
    return get


@pytest.mark.gpu
@pytest.mark.parametrize("graph", [False, True], ids=["launches", "graph"])
@pytest.mark.parametrize("b", SIZES)
def test_cuda_matches_reference_on_random_streams(reference_runs, b, graph):
    stream, want = reference_runs(b, "default")
    cfg, isv = VARIANTS["default"]
    got = replay_trajectory(stream, cfg, "cuda", isv=isv, graph=graph)
    assert got.engine == "cuda"
    assert_same_trajectory(got, want)
    s = summarize_frame(want.frame)  # the stream did exercise the branches compared
    assert s["dead_zone_steps"] > 0 and s["tail_events"] > 0 and s["tau_boost_steps"] > 0
    assert s["floor_active_steps"] > 0


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["timeouts", "f4_f5_off", "model_switches"])
@pytest.mark.parametrize("graph", [False, True], ids=["launches", "graph"])
def test_cuda_matches_reference_under_config_variants(reference_runs, variant, graph):
    stream, want = reference_runs(256, variant)
    cfg, isv = VARIANTS[variant]
    got = replay_trajectory(stream, cfg, "cuda", isv=isv, graph=graph)
    assert_same_trajectory(got, want)
    s = summarize_frame(want.frame)
    if variant in ("timeouts", "model_switches"):  # with F2 on, only the model switch lets a timeout fire
        assert s["timeouts"] > 0 and s["longest_dead_zone"] > 60
    else:
        assert s["floor_active_steps"] == 0 and s["tau_boost_steps"] == 0


@pytest.mark.gpu
def test_cuda_without_v_pred_and_with_a_step_offset():
    rng = np.random.default_rng(7)
    base = random_stream(rng, 2100, 31, v_pred=False)
    stream = Stream.make(**{**base.arrays(), "step": np.arange(2100, dtype=np.int64) * 3 + 500})
    want = replay_trajectory(stream, engine="reference")
    got = replay_trajectory(stream, engine="cuda", graph=True)
    assert got.v_pred_corrected is None
    assert_same_trajectory(got, want)
    assert np.array_equal(got.frame["step"], stream.step)


# ---- input validation: runs before anything touches cupy, so no device needed ----------
def _args(stream):
    isv0, boot = initial_isv(RegimeConfig(), None, DEFAULT_LAYOUT)
    return stream, isv0, boot, DEFAULT_LAYOUT, snapshot_indices(DEFAULT_LAYOUT)


def _small(rng=None):
    return random_stream(rng or np.random.default_rng(3), 8, 5)


def _tampered(field, value):
    s = _small()
    object.__setattr__(s, field, value)  # a stream changed after it was validated
    return s


@pytest.mark.parametrize("stream, field, shown", [
    (_tampered("rewards", np.zeros((8, 5), np.float64)), "rewards", "float64"),
    (_tampered("lots", np.zeros((8, 5), np.int64)), "lots", "int64"),
    (_tampered("lots", np.zeros((8, 4), np.int32)), "lots", "(8, 4)"),
    (_tampered("cooldown", np.zeros(7, np.float32)), "cooldown", "(7,)"),
    (_tampered("rewards", np.zeros((0, 5), np.float32)), "rewards", "T = 0"),
    (_tampered("rewards", np.zeros((8, 0), np.float32)), "rewards", "0 accounts"),
    (_tampered("v_pred", np.zeros((8, 5), np.float16)), "v_pred", "float16"),
], ids=["rewards-dtype", "lots-dtype", "lots-shape", "cooldown-shape", "T0", "b0", "v_pred-dtype"])
def test_bad_stream_arrays_raise_stream_error_naming_the_value(stream, field, shown):
    with pytest.raises(StreamError, match=field) as info:
        cuda_engine.run(*_args(stream))
    assert shown in str(info.value)
    assert info.value.field == field


def test_non_contiguous_rewards_are_rejected():
    rng = np.random.default_rng(4)
    wide = rng.standard_normal((8, 10)).astype(np.float32)
    s = Stream.make(rewards=wide[:, ::2], lots=np.zeros((8, 5), np.int32))
    assert not s.rewards.flags.c_contiguous
    with pytest.raises(StreamError, match="rewards must be C-contiguous") as info:
        cuda_engine.run(*_args(s))
    assert str(wide[:, ::2].strides) in str(info.value)


def test_bad_isv_and_snapshot_indices_raise_validation_error():
    stream, isv0, boot, layout, snap = _args(_small())
    with pytest.raises(ValidationError, match=r"isv0 must be float32 \[716\].*\(715,\)"):
        cuda_engine.run(stream, isv0[:-1], boot, layout, snap)
    with pytest.raises(ValidationError, match="boot must be float32.*float64"):
        cuda_engine.run(stream, isv0, boot.astype(np.float64), layout, snap)
    bad = snap.copy()
    bad[3] = 9999
    with pytest.raises(ValidationError, match=r"snap_idx\[3\] = 9999"):
        cuda_engine.run(stream, isv0, boot, layout, bad)


def test_graph_option_must_be_a_bool():
    with pytest.raises(ValidationError, match="graph must be True or False, got 'yes'"):
        cuda_engine.run(*_args(_small()), graph="yes")


def test_without_a_device_the_engine_raises_engine_unavailable():
    reason = cuda_engine.available()
    if reason is None:
        pytest.skip("a CUDA device is present here; this checks the device-less error")
    with pytest.raises(EngineUnavailable, match="cannot run here"):
        cuda_engine.run(*_args(_small()))
