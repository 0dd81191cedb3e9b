"""regime_dash.sweep: one row per config, equal to the single replay's summary, memory bounded."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pandas as pd
import pytest

import regime_dash
from regime_dash import RegimeConfig
from regime_dash.config import field_names
from regime_dash.engine import initial_isv, replay, summary
from regime_dash.errors import ConfigError, StreamError, ValidationError
from regime_dash.slots import DEFAULT_LAYOUT
from regime_dash.sweep import CPU_CHUNK, expand_configs, initial_rows, sweep
from test_fast_engine import regime_stream

GRID = {"resurrection": [True, False], "max_duration": [15, 400], "eps_min": [0.0, 0.05],
        "envelope": [True, False]}


@pytest.fixture(scope="module")
def stream():
    return regime_stream(np.random.default_rng(5), 260, 23, v_pred=False)


def test_package_exports_sweep():
    assert regime_dash.sweep is sweep


def test_grid_expands_in_product_order():
    configs = expand_configs({"max_duration": [10, 20, 30], "envelope": [True, False]})
    assert [(c.max_duration, c.envelope) for c in configs] == [
        (10, True), (10, False), (20, True), (20, False), (30, True), (30, False)]
    assert all(c.eps_min == RegimeConfig().eps_min for c in configs)
    base = RegimeConfig(eps_min=0.01)
    assert {c.eps_min for c in expand_configs({"max_duration": 7}, base)} == {0.01}


def test_grid_errors_name_the_bad_field_or_value():
    with pytest.raises(ConfigError, match="'bogus'.*valid fields: max_duration"):
        expand_configs({"bogus": [1]})
    with pytest.raises(ConfigError, match="'eps_min' has no values"):
        expand_configs({"eps_min": []})
    with pytest.raises(ConfigError, match="eps_min=2.0"):
        expand_configs({"eps_min": [0.1, 2.0]})
    with pytest.raises(ConfigError, match=r"configs\[1\] is a dict"):
        expand_configs([RegimeConfig(), {"eps_min": 0.1}])


def test_each_row_equals_its_single_replay(stream):
    result = sweep(stream, GRID, engine="fast", device="cpu", keep=[0, 9, 15])
    configs = expand_configs(GRID)
    assert len(result.table) == len(configs) == 16
    assert result.engine == "fast-cpu"
    assert list(result.table.columns) == field_names() + list(summary.METRICS)
    assert result.configs == configs
    for k, config in enumerate(configs):
        frame = replay(stream, config, engine="reference")
        want = summary.summarize_frame(frame)
        got = {m: result.table.loc[k, m] for m in summary.METRICS}
        assert got == want, f"config {k}: {config}"
        if k in result.trajectories:
            pd.testing.assert_frame_equal(result.trajectories[k], frame, check_exact=True)
    assert sorted(result.trajectories) == [0, 9, 15]
    # the grid does make the metrics differ, so equality above is not vacuous
    assert result.table["timeouts"].nunique() > 1
    assert result.table["floor_active_steps"].nunique() > 1
    assert result.table["longest_dead_zone"].max() > 15


def test_reference_engine_sweep_and_chunking_give_the_same_table(stream):
    configs = expand_configs({"max_duration": [15, 400], "eps_min": [0.0, 0.05]}, RegimeConfig(resurrection=False))
    seen = []
    fast = sweep(stream, configs, engine="fast", device="cpu", chunk_size=3,
                 progress=lambda done, total: seen.append((done, total)))
    assert seen == [(3, 4), (4, 4)]
    slow = sweep(stream, configs, engine="reference", keep=[1])
    assert slow.engine == "reference"
    pd.testing.assert_frame_equal(fast.table, slow.table, check_exact=True)
    pd.testing.assert_frame_equal(slow.trajectories[1], replay(stream, configs[1]), check_exact=True)


def test_isv_overrides_apply_to_every_config(stream):
    isv = {"RL_KELLY_FRACTION_INDEX": 0.0, "RL_REGIME_DEAD_ZONE_MAX_DURATION_INDEX": 3.0}
    configs = expand_configs({"max_duration": [15, 400]})
    isv0s, boots = initial_rows(configs, isv, DEFAULT_LAYOUT)
    for k, c in enumerate(configs):
        isv0, boot = initial_isv(c, isv, DEFAULT_LAYOUT)
        np.testing.assert_array_equal(isv0s[k].view(np.int32), isv0.view(np.int32))
        np.testing.assert_array_equal(boots[k].view(np.int32), boot.view(np.int32))
    result = sweep(stream, configs, device="cpu", isv=isv)
    for k, c in enumerate(configs):
        want = summary.summarize_frame(replay(stream, c, isv=isv))
        assert {m: result.table.loc[k, m] for m in summary.METRICS} == want


def test_bad_arguments_raise_our_errors(stream):
    with pytest.raises(ValidationError, match="keep index 4"):
        sweep(stream, [RegimeConfig()] * 2, keep=[4])
    with pytest.raises(ValidationError, match="'warp'"):
        sweep(stream, [RegimeConfig()], engine="warp")
    with pytest.raises(ValidationError, match="device='cpu' applies to engine 'fast' only"):
        sweep(stream, [RegimeConfig()], engine="reference", device="cpu")
    with pytest.raises(ValidationError, match="chunk_size"):
        sweep(stream, [RegimeConfig()], chunk_size=0)
    with pytest.raises(ConfigError, match="no configs"):
        sweep(stream, [])
    with pytest.raises(StreamError, match="ndarray"):
        sweep(np.zeros((3, 3)), [RegimeConfig()])


def _peak_bytes(stream, grid) -> tuple[int, pd.DataFrame]:
    tracemalloc.start()
    try:
        table = sweep(stream, grid, device="cpu").table
        return tracemalloc.get_traced_memory()[1], table
    finally:
        tracemalloc.stop()


@pytest.mark.slow
def test_memory_stays_bounded_for_16384_configs():
    # S = 16,384 configs: the peak must not grow with T (no [S, T, n] array), and
    # stays near one chunk of initial-state rows plus the O(S) table.
    grid = {"max_duration": list(range(1, 129)), "eps_min": [i / 256 for i in range(128)]}
    n_scen = 128 * 128
    short = regime_stream(np.random.default_rng(9), 20, 4, v_pred=False)
    long = regime_stream(np.random.default_rng(9), 200, 4, v_pred=False)
    sweep(short, {"max_duration": [1]}, device="cpu")  # load the compiled kernels outside the trace
    peak_short, table = _peak_bytes(short, grid)
    peak_long, table_long = _peak_bytes(long, grid)
    assert len(table) == len(table_long) == n_scen
    assert list(table["max_duration"][:3]) == [1.0, 1.0, 1.0] and table["eps_min"][128] == 0.0
    trajectories_long = n_scen * long.steps * len(summary.METRICS) * 4  # < the [S, T, 33] snapshot
    assert peak_long < peak_short + 8 * 2 ** 20, (peak_short, peak_long)
    assert peak_long < trajectories_long / 2, (peak_long, trajectories_long)
    chunk_rows = 2 * CPU_CHUNK * DEFAULT_LAYOUT.size * 4
    assert peak_long < chunk_rows + 96 * 2 ** 20, f"peak {peak_long / 2**20:.0f} MiB"
    # a longer stream gives timeouts where the max duration is short
    assert table_long["timeouts"].iloc[0] >= table["timeouts"].iloc[0]


@pytest.mark.gpu
def test_gpu_sweep_equals_cpu_sweep(stream):
    cpu = sweep(stream, GRID, device="cpu", keep=[3, 12])
    gpu = sweep(stream, GRID, device="gpu", keep=[3, 12])
    assert gpu.engine == "fast-gpu"
    pd.testing.assert_frame_equal(gpu.table, cpu.table, check_exact=True)
    for k in (3, 12):
        pd.testing.assert_frame_equal(gpu.trajectories[k], cpu.trajectories[k], check_exact=True)
