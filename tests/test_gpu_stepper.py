"""The GPU live stepper: one CUDA graph launch a step, bit-identical to the reference stepper."""
from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

from regime_dash import RegimeConfig
from regime_dash.engine import engine_status, initial_isv
from regime_dash.engine.gpu_stepper import GpuStepper, available, fastest_live_engine
from regime_dash.engine.steppers import ReferenceStepper, live_engine
from regime_dash.simulator import PRESETS, Simulator
from regime_dash.slots import DEFAULT_LAYOUT

NO_GPU = available()


def test_auto_is_reference_without_a_gpu():
    if NO_GPU is None:
        pytest.skip("a GPU is here: test_auto_picks_the_measured_faster_stepper covers auto")
    assert live_engine("auto") == "reference"
    isv0, boot = initial_isv(RegimeConfig(), None, DEFAULT_LAYOUT)
    assert fastest_live_engine(isv0, boot, DEFAULT_LAYOUT, 16) == "reference"


def _run(preset: str, engine, steps: int, accounts: int, config: RegimeConfig) -> Simulator:
    p = PRESETS[preset]
    sim = Simulator(accounts=accounts, seed=3, config=config, market=p.market, schedule=p.schedule(steps),
                    engine=engine)
    sim.step(steps)
    return sim


@pytest.mark.gpu
@pytest.mark.parametrize("preset", ["adverse_regime", "tail_shock", "fold_boundary"])
def test_gpu_stepper_is_bit_identical_to_the_reference_stepper(preset):
    config = RegimeConfig(max_duration=150.0)
    ref = _run(preset, "reference", 600, 48, config)
    gpu = _run(preset, "cuda", 600, 48, config)
    assert isinstance(gpu.engine, GpuStepper)
    a, b = gpu.frame(), ref.frame()
    assert list(a.columns) == list(b.columns)
    for col in b.columns:
        x, y = a[col].to_numpy(), b[col].to_numpy()
        if x.dtype.kind == "f":
            assert np.array_equal(x.view(np.int32 if x.dtype == np.float32 else np.int64),
                                  y.view(np.int32 if y.dtype == np.float32 else np.int64)), col
        else:
            assert np.array_equal(x, y), col
    assert np.array_equal(gpu.isv.view(np.int32), ref.isv.view(np.int32))
    pd.testing.assert_frame_equal(gpu.market_frame(), ref.market_frame(), check_exact=True)


@pytest.mark.gpu
def test_auto_picks_the_measured_faster_stepper(capsys):
    isv0, boot = initial_isv(RegimeConfig(), None, DEFAULT_LAYOUT)
    per_step = {}
    for name, stepper in (("cuda", GpuStepper(isv0, boot, DEFAULT_LAYOUT, 1024)),
                          ("reference", ReferenceStepper(isv0, boot, DEFAULT_LAYOUT))):
        sim = Simulator(accounts=1024, seed=1, engine=stepper)
        sim.step(5)
        t0 = time.perf_counter()
        sim.step(200)
        per_step[name] = (time.perf_counter() - t0) / 200
    with capsys.disabled():
        print(f"\nlive step at b = 1024 (market included): gpu {per_step['cuda'] * 1e6:.0f} µs, "
              f"reference {per_step['reference'] * 1e6:.0f} µs")
    from regime_dash.engine import gpu_stepper

    chosen = live_engine("auto", accounts=1024)
    timings = gpu_stepper.TIMINGS[(DEFAULT_LAYOUT.fingerprint_hex(), 1024)]
    assert chosen == min(timings, key=timings.get)  # the measured faster one
    assert engine_status()["cuda"] is None
