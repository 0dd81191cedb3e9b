"""The live step engines: the GPU stepper (one CUDA graph launch a step, or a block) is bit-identical
to the reference stepper; every stepper keeps its own trajectory and steps blocks of known inputs."""
from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

from regime_dash import RegimeConfig
from regime_dash.sources import scenarios
from regime_dash.benchmarks import live_step
from regime_dash.cli import main
from regime_dash.engine import engine_status, initial_isv
from regime_dash.engine.gpu_stepper import (MAX_GRAPH_STEPS, GpuStepper, available, block_plan, default_rows,
                                            fastest_live_engine)
from regime_dash.engine.stepper_choice import live_engine, make_stepper
from regime_dash.engine.steppers import KELLY_COL, BackendStepper, ReferenceStepper, block_inputs
from regime_dash.errors import ValidationError
from regime_dash.runs.live import LiveRun
from regime_dash.sources.simulator import PRESETS, Simulator
from regime_dash.core.slots import DEFAULT_LAYOUT

NO_GPU = available()


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(a.view(np.int32), b.view(np.int32))


def _assert_frames_identical(a: pd.DataFrame, b: pd.DataFrame) -> None:
    assert list(a.columns) == list(b.columns)
    for col in b.columns:
        x, y = a[col].to_numpy(), b[col].to_numpy()
        if x.dtype.kind == "f":
            assert np.array_equal(x.view(np.int32 if x.dtype == np.float32 else np.int64),
                                  y.view(np.int32 if y.dtype == np.float32 else np.int64)), col
        else:
            assert np.array_equal(x, y), col


# ---- every stepper (CPU) -------------------------------------------------------------------
def test_auto_is_reference_without_a_gpu():
    if NO_GPU is None:
        pytest.skip("a GPU is here: test_auto_picks_the_measured_faster_stepper covers auto")
    assert live_engine("auto") == "reference"
    isv0, boot = initial_isv(RegimeConfig(), None, DEFAULT_LAYOUT)
    assert fastest_live_engine(isv0, boot, DEFAULT_LAYOUT, 16) == "reference"
    assert isinstance(make_stepper("auto", isv0, boot, DEFAULT_LAYOUT, 16), ReferenceStepper)


def _stream(steps: int = 240, accounts: int = 16):
    return scenarios.make("fold_boundary", steps=steps, accounts=accounts, seed=5)


def _step_by_step(stepper, stream) -> list[float]:
    return [stepper.step(stream.rewards[t], stream.lots[t], block_inputs(stream, t)) for t in range(stream.steps)]


@pytest.mark.parametrize("make", [lambda i, b: ReferenceStepper(i, b, DEFAULT_LAYOUT),
                                  lambda i, b: BackendStepper("reference", i, b, DEFAULT_LAYOUT)],
                         ids=["reference", "backend"])
def test_blocks_and_single_steps_give_the_same_trajectory(make):
    stream = _stream()
    isv0, boot = initial_isv(RegimeConfig(max_duration=60.0), None, DEFAULT_LAYOUT)
    one = make(isv0, boot)
    kelly = _step_by_step(one, stream)
    blocks = make(isv0, boot)
    for start, stop in ((0, 1), (1, 21), (21, 100), (100, 240)):
        blocks.steps(stream.slice(start, stop))
    snap, flat = one.trajectory()
    assert snap.shape == (240, snap.shape[1]) and flat.shape == (240,)
    assert [float(k) for k in snap[:, KELLY_COL]] == kelly  # step() returned each step's kelly_f
    got_snap, got_flat = blocks.trajectory()
    assert _same_bits(got_snap, snap) and np.array_equal(got_flat, flat)
    assert _same_bits(blocks.isv, one.isv)
    assert np.array_equal(flat, (stream.lots == 0).sum(axis=1))


def test_reconfigure_keeps_the_trajectory_and_swaps_the_state():
    stream = _stream(60)
    isv0, boot = initial_isv(RegimeConfig(), None, DEFAULT_LAYOUT)
    s = ReferenceStepper(isv0, boot, DEFAULT_LAYOUT)
    s.steps(stream.slice(0, 30))
    isv1, boot1 = initial_isv(RegimeConfig(max_duration=7.0), None, DEFAULT_LAYOUT)
    s.reconfigure(isv1, boot1)
    assert _same_bits(s.isv, isv1) and len(s.trajectory()[1]) == 30
    s.steps(stream.slice(30, 60))
    fresh = ReferenceStepper(isv1, boot1, DEFAULT_LAYOUT)
    fresh.steps(stream.slice(30, 60))
    assert _same_bits(s.trajectory()[0][30:], fresh.trajectory()[0])


def test_bad_blocks_and_sizes_raise_named_errors():
    isv0, boot = initial_isv(RegimeConfig(), None, DEFAULT_LAYOUT)
    with pytest.raises(ValidationError, match="list"):
        ReferenceStepper(isv0, boot, DEFAULT_LAYOUT).steps([1, 2])
    with pytest.raises(ValidationError, match="rows must be an int >= 1, got 0"):
        GpuStepper(isv0, boot, DEFAULT_LAYOUT, 16, rows=0)
    with pytest.raises(ValidationError, match="accounts must be an int >= 1, got 0"):
        GpuStepper(isv0, boot, DEFAULT_LAYOUT, 0)
    assert default_rows(1_024) == 1_024 and default_rows(1) == 4_096 and default_rows(1 << 24) == 1


# ---- the GPU stepper ----------------------------------------------------------------------------
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
    _assert_frames_identical(gpu.frame(), ref.frame())
    assert _same_bits(gpu.isv, ref.isv)
    pd.testing.assert_frame_equal(gpu.market_frame(), ref.market_frame(), check_exact=True)


@pytest.mark.gpu
def test_the_ring_wraps_without_losing_a_step():
    """A 50-row ring over 600 closed-loop steps: the rows are kept as blocks and the counter starts over."""
    config = RegimeConfig(max_duration=150.0)
    isv0, boot = initial_isv(config, None, DEFAULT_LAYOUT)
    ref = _run("adverse_regime", "reference", 600, 48, config)
    gpu = _run("adverse_regime", GpuStepper(isv0, boot, DEFAULT_LAYOUT, 48, rows=50), 600, 48, config)
    _assert_frames_identical(gpu.frame(), ref.frame())
    assert _same_bits(gpu.isv, ref.isv)


@pytest.mark.gpu
def test_gpu_blocks_across_the_ring_and_graph_lengths_match_single_reference_steps():
    stream = _stream(400, 40)
    isv0, boot = initial_isv(RegimeConfig(max_duration=60.0), None, DEFAULT_LAYOUT)
    ref = ReferenceStepper(isv0, boot, DEFAULT_LAYOUT)
    kelly = _step_by_step(ref, stream)
    gpu = GpuStepper(isv0, boot, DEFAULT_LAYOUT, 40, rows=37, events=True)
    got = [gpu.step(stream.rewards[0], stream.lots[0], block_inputs(stream, 0))]
    for start, stop in ((1, 21), (21, 41), (41, 200), (200, 201), (201, 399)):  # 159 > 64 steps: several graphs
        gpu.steps(stream.slice(start, stop))
    got.append(gpu.step(stream.rewards[399], stream.lots[399], block_inputs(stream, 399)))
    assert got == [kelly[0], kelly[399]]
    snap, flat = gpu.trajectory()
    want_snap, want_flat = ref.trajectory()
    assert _same_bits(snap, want_snap) and np.array_equal(flat, want_flat)
    assert _same_bits(gpu.isv, ref.isv)
    assert len(gpu.event_ms) >= 9 and all(ms > 0 for ms in gpu.event_ms)


@pytest.mark.gpu
def test_a_gpu_live_stream_in_ticks_with_injections_and_a_config_change_is_the_reference_one():
    stream = scenarios.make("tail_shock", steps=300, accounts=32, seed=3)
    runs = {e: LiveRun.of_stream(stream, RegimeConfig(max_duration=120.0), engine=e) for e in ("reference", "cuda")}
    assert isinstance(runs["cuda"].engine, GpuStepper)
    for run in runs.values():
        run.step(100)
        run.inject_tail_shock()
        run.step(20)
        run.set_config(RegimeConfig(max_duration=40.0, resurrection=False))
        run.force_flat()
        run.step(20)
        run.cross_boundary()
        while not run.done:
            run.step(20)
    _assert_frames_identical(runs["cuda"].frame(), runs["reference"].frame())
    assert _same_bits(runs["cuda"].isv, runs["reference"].isv)
    assert runs["cuda"].status() == runs["reference"].status()


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
    run = LiveRun.of_stream(scenarios.make("tail_shock", steps=40, accounts=1024, seed=1), engine="auto")
    assert run.engine.name == chosen and isinstance(run.engine, GpuStepper) == (chosen == "cuda")


def test_block_plan_splits_where_the_ring_wraps_and_at_the_graph_limit():
    assert block_plan(1_020, 1_024, 20) == [(1_020, 4), (0, 16)]  # the wrap splits a tick
    assert block_plan(1_024, 1_024, 20) == [(0, 20)]               # a full ring is emptied first
    assert block_plan(0, 40, 20) == [(0, 20)]
    for row, rows, total in ((0, 37, 159), (21, 37, 400), (5, 4_096, 200), (0, 1, 3)):
        plan = block_plan(row, rows, total)
        assert sum(k for _, k in plan) == total
        assert all(1 <= k <= MAX_GRAPH_STEPS and r + k <= rows for r, k in plan)
        assert all(b == (a + ka) % rows for (a, ka), (b, _) in zip(plan, plan[1:]))  # consecutive, wrapping to 0
    assert block_plan(0, 37, 159)[:2] == [(0, 37), (0, 37)]


def test_the_bench_block_row_launches_graphs_of_one_tick_only():
    """The default ring at b = 1,024 (1,024 rows) splits ticks of 20 into k = 4, 16, 8, 12 where it
    wraps, each a graph capture inside a timed call; the bench's ring holds whole ticks instead."""
    tick = live_step.TICK
    assert live_step.graph_lengths(default_rows(1_024), 200) == [4, 8, 12, 16, 20]
    for b in (1_024, 64, 5, 3_000, 1 << 20):
        rows = live_step.tick_rows(b)
        assert rows % tick == 0 and tick <= rows <= default_rows(b) + tick
        assert live_step.graph_lengths(rows, 3 * rows // tick + 7) == [tick]


def test_the_live_bench_rows_time_each_stepper_and_judge_the_target(tmp_path, capsys):
    out = live_step.run((6,), steps=12)
    (m,) = out["per_accounts"]
    assert m["accounts"] == 6 and m["steps"] == 12
    ref = m["rows"]["reference step"]
    assert ref["calls"] == 12 and 0 < ref["median_us"] <= ref["p90_us"]
    assert m["rows"]["market model"]["calls"] == 12 and m["rows"]["simulator reference"]["mean_us"] > 0
    if NO_GPU is not None:
        assert m["rows"]["gpu step"]["status"].startswith("unavailable")
    else:
        assert m["rows"]["gpu step"]["device_us"] > 0 and m["gpu_vs_reference_step"] > 0
        block = m["rows"][f"gpu block of {live_step.TICK}"]
        assert block["ring_rows"] % live_step.TICK == 0 and block["graph_lengths"] == [live_step.TICK]
    assert out["target"]["met"] is None  # b = 1,024 was not measured: no verdict
    assert live_step.format_lines(out)[-1].endswith("not measured (no GPU step at b = 1,024)")
    path = tmp_path / "live.json"
    assert main(["bench", "engines", "--live-only", "--live-accounts", "5", "--live-steps", "4",
                 "--json", str(path)]) == 0
    text = capsys.readouterr().out
    assert "reference step" in text and "target <= 100 µs" in text and "replay engines" not in text
    import json

    assert json.loads(path.read_text())["live"]["per_accounts"][0]["accounts"] == 5
