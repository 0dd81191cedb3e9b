"""The typed engine interface: a Backend class per engine, ReplayOptions, prepare(stream).replay / .sweep.

Every backend that runs here gives, through ``prepare(...).replay(config)``, the frame
``regime_dash.replay`` gives, bit for bit, over awkward sizes; a prepared sweep's rows are the
summaries of its per-config replays; a bad option is our ValidationError naming it; nothing the
caller hands in is changed.
"""
from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from regime_dash import RegimeConfig, replay, replay_trajectory
from regime_dash.engine import (ENGINES, Backend, BackendOutput, Prepared, ReplayOptions, StartState, engine_status,
                                prepare, summary)
from regime_dash.errors import StreamError, ValidationError
from test_fast_engine import CONFIGS, assert_bits_equal, assert_frames_bit_equal, regime_stream

STATUS = engine_status()


def _fast_gpu_here() -> bool:
    from regime_dash.engine import fast_gpu

    return fast_gpu.available() is None


def _here() -> list:
    out = [pytest.param("reference", "auto", id="reference")]
    if STATUS["fast"] is None:
        out.append(pytest.param("fast", "cpu", id="fast-cpu"))
        if _fast_gpu_here():
            out.append(pytest.param("fast", "gpu", id="fast-gpu"))
    if STATUS["cuda"] is None:
        out.append(pytest.param("cuda", "auto", id="cuda"))
    return out


def _assert_frames_bitwise(a: pd.DataFrame, b: pd.DataFrame, attrs: bool = True) -> None:
    assert list(a.columns) == list(b.columns)
    assert_frames_bit_equal(a, b)
    if attrs:
        assert a.attrs == b.attrs


@pytest.mark.parametrize("engine, device", _here())
@pytest.mark.parametrize("steps, accounts", [(3, 1), (7, 3), (97, 33), (263, 257)])
def test_every_backend_gives_replays_frame_through_prepare(engine, device, steps, accounts):
    stream = regime_stream(np.random.default_rng(steps * 1000 + accounts), steps, accounts)
    config = CONFIGS[1]
    prepared = prepare(stream, engine, ReplayOptions(device=device, log_inputs=True))
    assert isinstance(prepared, Prepared) and prepared.engine == engine
    got = prepared.replay(config)
    want = replay(stream, config, engine=engine, log_inputs=True,
                  **({"device": device} if engine == "fast" else {}))
    _assert_frames_bitwise(got.frame, want)
    _assert_frames_bitwise(got.frame, replay(stream, config, engine="reference", log_inputs=True), attrs=False)
    # the full trajectory: the normalize pass's outputs are the reference's, bit for bit
    ref = replay_trajectory(stream, config, engine="reference")
    assert_bits_equal(got.rewards_normalized, ref.rewards_normalized, "rewards_normalized")
    assert_bits_equal(got.v_pred_corrected, ref.v_pred_corrected, "v_pred_corrected")
    assert_bits_equal(got.isv, ref.isv, "isv")


@pytest.mark.parametrize("engine, device", _here())
def test_one_prepared_stream_replays_every_config_as_a_fresh_replay(engine, device):
    stream = regime_stream(np.random.default_rng(3), 150, 9)
    prepared = prepare(stream, engine, ReplayOptions(device=device, normalized=False))
    for config in CONFIGS:  # phase 1 held once, every config replayed from it
        fresh = replay(stream, config, engine=engine, **({"device": device} if engine == "fast" else {}))
        _assert_frames_bitwise(prepared.replay(config).frame, fresh)
    if engine == "fast" and device == "cpu":
        assert prepared.held_phase1() is not None
    assert prepared.replay(CONFIGS[0]).rewards_normalized is None  # the pass left out, as the options say


@pytest.mark.parametrize("engine, device", _here())
def test_a_prepared_sweep_is_its_per_config_replays(engine, device):
    stream = regime_stream(np.random.default_rng(11), 120, 5, v_pred=False)
    grid = {"max_duration": [15, 400], "resurrection": [True, False], "eps_min": [0.0, 0.05]}
    prepared = prepare(stream, engine, ReplayOptions(device=device))
    result = prepared.sweep(grid, keep=[0, 5])
    assert len(result.table) == 8
    for k, config in enumerate(result.configs):
        frame = prepared.replay(config).frame
        assert {m: result.table.loc[k, m] for m in summary.METRICS} == summary.summarize_frame(frame), k
        if k in (0, 5):
            _assert_frames_bitwise(result.trajectories[k], frame, attrs=False)


def test_the_fast_engine_computes_phase_1_once_per_prepared_stream(monkeypatch):
    from regime_dash.engine import fast

    calls = []
    real = fast.step_stats
    monkeypatch.setattr(fast, "step_stats", lambda s: calls.append(1) or real(s))
    stream = regime_stream(np.random.default_rng(2), 80, 6, v_pred=False)
    prepared = prepare(stream, "fast", ReplayOptions(device="cpu", normalized=False))
    for config in CONFIGS[:3]:
        prepared.replay(config)
    prepared.sweep({"max_duration": [5, 50]})
    fused = prepared.with_options(controllers="fused")  # the other path shares it
    fused.replay(RegimeConfig(fused_mirror_tau_boost=False))
    assert len(calls) == 1 and fused.held_phase1() is prepared.held_phase1()


@pytest.mark.parametrize("make, field, value", [
    (lambda: ReplayOptions(device="tpu"), "device", "tpu"),
    (lambda: ReplayOptions(graph="yes"), "graph", "yes"),
    (lambda: ReplayOptions(normalized=1), "normalized", 1),
    (lambda: ReplayOptions(controllers="dual"), "controllers", "dual"),
    (lambda: ReplayOptions.of(warp=9), "warp", 9),
])
def test_a_bad_option_is_a_validation_error_naming_it(make, field, value):
    with pytest.raises(ValidationError, match=repr(value)) as err:
        make()
    assert (err.value.field, err.value.value) == (field, value)


def test_an_option_an_engine_does_not_take_is_refused_naming_it():
    stream = regime_stream(np.random.default_rng(4), 10, 2)
    with pytest.raises(ValidationError, match="device='cpu' applies to engine 'fast' only, not 'reference'") as err:
        prepare(stream, "reference", ReplayOptions(device="cpu"))
    assert (err.value.field, err.value.value) == ("device", "cpu")
    with pytest.raises(ValidationError, match="graph=True applies to engine 'cuda' only, not 'fast'"):
        prepare(stream, "fast", ReplayOptions(graph=True))
    with pytest.raises(ValidationError, match="unknown replay option.*warp=1") as err:
        replay(stream, engine="reference", warp=1)
    assert err.value.field == "warp"
    with pytest.raises(ValidationError, match="options must be a ReplayOptions, got dict") as err:
        prepare(stream, "reference", {"device": "cpu"})
    assert err.value.field == "options"
    with pytest.raises(ValidationError, match="unknown engine 'warp'"):
        prepare(stream, "warp")
    with pytest.raises(StreamError, match="StepStream.*'reference'"):
        prepare(stream.per_step(), "reference")


def test_the_callers_options_are_never_changed():
    from regime_dash.engine import fast

    stream = regime_stream(np.random.default_rng(5), 60, 4)
    given = {"device": "cpu"}
    replay(stream, engine="fast", log_inputs=True, **given)
    replay_trajectory(stream, engine="fast", log_inputs=True, **given)
    assert given == {"device": "cpu"}
    options = ReplayOptions(device="cpu", log_inputs=True)
    before = dataclasses.asdict(options)
    prepared = prepare(stream, "fast", options)
    prepared.replay()
    other = prepared.with_options(controllers="fused", normalized=False)
    assert dataclasses.asdict(options) == before and prepared.options is options
    assert other.options == options.replace(controllers="fused", normalized=False) and other.options is not options
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.device = "gpu"  # type: ignore[misc]
    stats = fast.step_stats(stream)
    sums, flat = stats.sums.copy(), stats.flat.copy()
    prepare(stream.per_step(), "fast", ReplayOptions(device="cpu", normalized=False), stats=stats).replay()
    assert np.array_equal(stats.sums, sums) and np.array_equal(stats.flat, flat)


def test_each_engine_is_a_backend_class_of_the_registry():
    assert list(ENGINES) == ["reference", "cuda", "fast"]
    for name, cls in ENGINES.items():
        backend = cls()
        assert isinstance(backend, Backend) and backend.name == name
    stream = regime_stream(np.random.default_rng(6), 30, 3)
    start = StartState.of(RegimeConfig(), None, prepare(stream, "reference").layout)
    out = ENGINES["reference"]().run(stream, start, ReplayOptions())
    assert isinstance(out, BackendOutput) and out.snapshot.shape[0] == 30 and out.rewards_normalized.shape == (30, 3)


def test_the_interface_loads_neither_numba_nor_cupy():
    code = ("import sys\nfrom regime_dash.engine import ReplayOptions, ENGINES, prepare, backend\n"
            "ReplayOptions(device='cpu'); backend('reference')\n"
            "print(' '.join(m for m in ('numba', 'cupy', 'regime_dash.engine.fast') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == []
