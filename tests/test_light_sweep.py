"""Sweeps and the sensitivity analysis from a stream file's light inputs (its per-step fields and phase 1)
equal those of the whole stream bit for bit; a light stream that reaches what reads the [T, b] arrays is
refused with a StreamError."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from regime_dash import RegimeConfig
from regime_dash.sources import scenarios
from regime_dash.engine import fast, file_phase1
from regime_dash.errors import StreamError, ValidationError
from regime_dash.runs.sensitivity import sensitivity
from regime_dash.runs.sweeps import expand_configs, sweep

GRIDS = [
    {"resurrection": [True, False], "max_duration": [15, 400], "eps_min": [0.0, 0.05]},
    {"n_recovery": [1, 50, 900], "envelope": [True, False], "tail_sigma_threshold": [1.5, 4.0]},
]


@pytest.fixture(scope="module")
def trap():
    return scenarios.make("kelly_trap_run8", steps=2100, accounts=29)


@pytest.fixture(scope="module", params=[".npz", ".parquet"])
def light(request, trap, tmp_path_factory):
    """``(per-step fields, phase 1)`` of ``trap`` saved as a file of either type, read block by block."""
    path = trap.save(tmp_path_factory.mktemp("light") / f"s{request.param}")
    return file_phase1.read(path, rows=256)


def _same_sweep(got, want) -> None:
    pd.testing.assert_frame_equal(got.table, want.table, check_exact=True)
    assert got.table.attrs == want.table.attrs and got.engine == want.engine
    assert sorted(got.trajectories) == sorted(want.trajectories)
    for k, frame in want.trajectories.items():
        pd.testing.assert_frame_equal(got.trajectories[k], frame, check_exact=True)


@pytest.mark.parametrize("grid", GRIDS)
def test_a_sweep_from_the_light_inputs_is_the_whole_streams(trap, light, grid):
    steps, stats = light
    want = sweep(trap, grid, engine="fast", device="cpu", keep=[0, 5])
    _same_sweep(sweep(steps, grid, engine="fast", device="cpu", keep=[0, 5], stats=stats), want)
    # in small chunks, and over the grid's configs as a list: the same table
    _same_sweep(sweep(steps, expand_configs(grid), engine="fast", device="cpu", keep=[0, 5], stats=stats,
                      chunk_size=3), want)
    # a whole stream given its phase 1 sweeps as without it
    _same_sweep(sweep(trap, grid, engine="fast", device="cpu", keep=[0, 5], stats=stats), want)
    assert len({tuple(r) for r in want.table[["dead_zone_steps", "timeout_steps", "kelly_mean"]]
                .itertuples(index=False)}) > 1  # the grid moves something


def test_a_sensitivity_from_the_light_inputs_is_the_whole_streams(trap, light):
    steps, stats = light
    kw = dict(fields=["max_duration", "eps_min", "n_recovery", "envelope", "resurrection"], points=4,
              pair_fields=2, pair_points=3, engine="fast", device="cpu")
    for base in (RegimeConfig(), RegimeConfig(resurrection=False)):
        want = sensitivity(trap, base, **kw)
        got = sensitivity(steps, base, stats=stats, **kw)
        for name in ("oat", "effects", "pairs", "pair_table"):
            pd.testing.assert_frame_equal(getattr(got, name), getattr(want, name), check_exact=True)
        assert got.ranking == want.ranking and got.no_effect == want.no_effect
        assert got.findings == want.findings and got.skipped == want.skipped
        assert (got.steps, got.accounts, got.engine) == (want.steps, want.accounts, want.engine)
        assert len(want.pair_table) and want.ranking


def test_a_light_stream_is_refused_where_the_batch_is_read(trap):
    steps, stats = trap.per_step(), fast.step_stats(trap)
    grid = {"max_duration": [15, 400]}
    for engine in ("reference", "cuda"):
        with pytest.raises(StreamError, match=f"StepStream.*engine '{engine}'.*whole stream"):
            sweep(steps, grid, engine=engine, stats=stats)
        with pytest.raises(StreamError, match="StepStream"):
            sweep(steps, grid, engine=engine)
    with pytest.raises(StreamError, match=r"StepStream.*phase 1 \(stats=\)"):
        sweep(steps, grid, engine="fast", device="cpu")
    with pytest.raises(StreamError, match="StepStream"):
        sensitivity(steps, fields=["max_duration"], points=2, engine="reference", stats=stats)
    with pytest.raises(StreamError, match=r"StepStream.*phase 1 \(stats=\)"):
        sensitivity(steps, fields=["max_duration"], points=2, engine="fast", device="cpu")
    boot = np.zeros((1, 4), np.float32)
    with pytest.raises(StreamError, match=r"StepStream.*phase 1 \(stats=\)"):
        fast.sweep_cpu(steps, boot, boot, None, [])


def test_a_phase_1_that_is_not_the_streams_is_refused(trap):
    stats = fast.step_stats(trap)
    short = fast.step_stats(trap.slice(0, trap.steps - 1))
    grid = {"max_duration": [15, 400]}
    with pytest.raises(ValidationError, match="stats cover .* the stream has 2100 steps"):
        sweep(trap.per_step(), grid, engine="fast", device="cpu", stats=short)
    with pytest.raises(ValidationError, match="stats cover"):
        sweep(trap, grid, engine="fast", device="cpu", stats=short)
    with pytest.raises(ValidationError, match="StepStats"):
        sweep(trap, grid, engine="fast", device="cpu", stats=(stats.sums, stats.flat))
    with pytest.raises(ValidationError, match="applies to engine 'fast' only"):
        sweep(trap, grid, engine="reference", stats=stats)


@pytest.mark.gpu
@pytest.mark.parametrize("grid", GRIDS)
def test_a_gpu_sweep_from_the_light_inputs_is_the_whole_streams(trap, light, grid):
    steps, stats = light
    want = sweep(trap, grid, engine="fast", device="cpu", keep=[0, 5])
    got = sweep(steps, grid, engine="fast", device="gpu", keep=[0, 5], stats=stats)
    pd.testing.assert_frame_equal(got.table, want.table, check_exact=True)
    for k, frame in want.trajectories.items():
        pd.testing.assert_frame_equal(got.trajectories[k], frame, check_exact=True)
    _same_sweep(sweep(steps, grid, engine="fast", device="gpu", keep=[0, 5], stats=stats, chunk_size=3), got)


@pytest.mark.gpu
def test_a_gpu_sensitivity_from_the_light_inputs_is_the_whole_streams(trap, light):
    steps, stats = light
    kw = dict(fields=["max_duration", "eps_min", "resurrection"], points=4, pair_fields=2, pair_points=3)
    want = sensitivity(trap, engine="fast", device="cpu", **kw)
    got = sensitivity(steps, engine="fast", device="gpu", stats=stats, **kw)
    for name in ("oat", "effects", "pairs", "pair_table"):
        pd.testing.assert_frame_equal(getattr(got, name),
                                      getattr(want, name), check_exact=True)
    assert got.ranking == want.ranking and got.no_effect == want.no_effect
