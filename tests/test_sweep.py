"""regime_dash.runs.sweeps: one row per config, equal to the single replay's summary, memory bounded."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pandas as pd
import pytest

import regime_dash
from regime_dash import RegimeConfig
from regime_dash.core.config import field_names
from regime_dash.engine import initial_isv, replay, summary
from regime_dash.errors import ConfigError, StreamError, ValidationError
from regime_dash.core.slots import DEFAULT_LAYOUT
from regime_dash.runs.sweeps import CPU_CHUNK, expand_configs, initial_rows, sweep
from test_fast_engine import regime_stream

GRID = {"resurrection": [True, False], "max_duration": [15, 400], "eps_min": [0.0, 0.05],
        "envelope": [True, False]}


@pytest.fixture(scope="module")
def stream():
    return regime_stream(np.random.default_rng(5), 260, 23, v_pred=False)


def test_package_exports_sweep():
    import regime_dash.runs.sweeps  # loading the module leaves the package's name the function

    assert regime_dash.sweep is sweep and callable(regime_dash.sweep)


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


# ---- a grid is columns -------------------------------------------------------------------
def test_grid_columns_are_the_product_in_order_and_slice_by_index():
    import itertools

    from regime_dash.runs.sweeps import ConfigGrid

    grid = {"max_duration": [10, 20, 30], "envelope": [True, False], "eps_min": [0.0, 0.1]}
    g = ConfigGrid.of(grid, RegimeConfig(tau_min=0.2))
    cols = g.columns()
    assert list(cols) == field_names() and len(g) == 12
    want = list(itertools.product(*grid.values()))
    assert list(zip(cols["max_duration"], cols["envelope"], cols["eps_min"])) == want
    assert cols["envelope"].dtype == np.bool_ and cols["max_duration"].dtype == np.float64
    assert set(cols["tau_min"]) == {0.2}
    part = g.columns(5, 9)
    for name in field_names():
        np.testing.assert_array_equal(part[name], cols[name][5:9])
    # NumPy arrays are columns too
    h = ConfigGrid.of({"max_duration": np.arange(10, 40, 10), "eps_min": np.array([0.0, 0.1])})
    np.testing.assert_array_equal(h.columns()["max_duration"], [10, 10, 20, 20, 30, 30])


def test_grid_table_equals_the_table_of_its_expanded_list(stream):
    grid = {"max_duration": [15, 400], "eps_min": [0.0, 0.05], "resurrection": [True, False],
            "tail_on_deviation": [False, True]}
    by_grid = sweep(stream, grid, device="cpu", keep=[1, 14])
    by_list = sweep(stream, expand_configs(grid), device="cpu", keep=[1, 14])
    pd.testing.assert_frame_equal(by_grid.table, by_list.table, check_exact=True)
    for k in (1, 14):
        pd.testing.assert_frame_equal(by_grid.trajectories[k], by_list.trajectories[k], check_exact=True)
    assert by_grid.table["tail_events"].nunique() > 1 or by_grid.table["timeouts"].nunique() > 1


def test_a_grid_sweep_builds_no_config_object_per_scenario(stream, monkeypatch):
    from regime_dash.core import config

    built = []
    real = config.RegimeConfig.__post_init__
    monkeypatch.setattr(config.RegimeConfig, "__post_init__", lambda self: (built.append(1), real(self)))
    grid = {"max_duration": list(range(10, 330, 10)), "eps_min": [k / 100 for k in range(32)]}
    result = sweep(stream.slice(0, 40), grid, device="cpu")
    assert len(result.table) == 1024
    assert len(built) < 8, f"{len(built)} RegimeConfig objects for a 1,024-config grid"


def test_grid_values_are_checked_once_per_axis_and_across_fields():
    from regime_dash.runs.sweeps import ConfigGrid

    with pytest.raises(ConfigError, match=r"max_duration=True .*finite number") as err:
        ConfigGrid.of({"max_duration": [10, True]})
    assert err.value.field == "max_duration" and err.value.value is True
    with pytest.raises(ConfigError, match="kelly_cap=nan"):
        ConfigGrid.of({"kelly_cap": [1.0, float("nan")]})
    with pytest.raises(ConfigError, match="envelope=2"):
        ConfigGrid.of({"envelope": [True, 2]})
    with pytest.raises(ConfigError, match="max_duration=2.5 must be a whole number"):
        ConfigGrid.of({"max_duration": [1, 2.5]})
    # a combination across two axes: (eps_min 0.6, eps_max 0.5) is in the product
    with pytest.raises(ConfigError, match="eps_min=0.6 is greater than eps_max=0.5") as err:
        ConfigGrid.of({"eps_min": [0.1, 0.6], "eps_max": [0.5, 0.9]})
    assert err.value.field == "eps_min" and err.value.value == (0.6, 0.5)
    # valid only with the grid's own eps_max, not the base's 0.5: the product decides
    assert len(ConfigGrid.of({"eps_min": [0.6], "eps_max": [0.9, 1.0]})) == 2
    # the same verdicts as the per-object constructor
    with pytest.raises(ConfigError, match="eps_min=0.6"):
        expand_configs({"eps_min": [0.6]})


def test_config_slot_values_equal_to_isv_config_by_config():
    from regime_dash.runs.sweeps import ConfigGrid, config_slot_values

    grid = ConfigGrid.of({"eps_max": [0.5, 0.7], "safety_frac_normal": [0.3, 0.5], "tau_min": [0.1, 0.2]})
    slots, values = config_slot_values(grid.columns())
    for k, config in enumerate(grid.configs()):
        want = config.to_isv()
        np.testing.assert_array_equal(values[k], np.array([want[s] for s in slots], dtype=np.float32))


@pytest.mark.gpu
def test_gpu_grid_sweep_equals_the_list_sweep(stream):
    grid = {**GRID, "tail_on_deviation": [False, True]}
    by_grid = sweep(stream, grid, device="gpu", keep=[5])
    by_list = sweep(stream, expand_configs(grid), device="gpu", keep=[5])
    assert by_grid.engine == "fast-gpu"
    pd.testing.assert_frame_equal(by_grid.table, by_list.table, check_exact=True)
    pd.testing.assert_frame_equal(by_grid.trajectories[5], by_list.trajectories[5], check_exact=True)


def _two_gpus_reason() -> str | None:
    from regime_dash.runs import scheduler as distributed

    n = distributed.gpu_count()
    return None if n >= 2 else f"needs two GPUs, {n} here"


@pytest.mark.gpu
@pytest.mark.parametrize("threads, chunk_steps, devices", [
    (1, 7, None), (3, 7, None), (None, 1000, None),
    (2, 7, [0, 0]),       # two step ranges, each with its own threads and arrays (on one GPU here)
    (1, 500, [0, 0, 0]),  # three chunks over three ranges: one each
    (1, 1000, [0, 0, 0]),  # two chunks over three ranges: the last one idle
    (None, 7, "all")])    # every GPU of the machine
def test_staged_phase1_is_the_same_bits_as_phase1(threads, chunk_steps, devices):
    from regime_dash.runs import scheduler as distributed
    from regime_dash.engine import fast, fast_gpu, staged_phase1

    if devices == "all":
        devices = list(range(distributed.gpu_count()))
    s = regime_stream(np.random.default_rng(11), 1003, 37, v_pred=False)
    want = fast.step_stats(s)
    for got in (staged_phase1.step_stats(s, threads=threads, chunk_bytes=chunk_steps * 37 * 4, devices=devices),
                fast_gpu.step_stats(s)):
        np.testing.assert_array_equal(got.sums.view(np.int32), want.sums.view(np.int32))
        np.testing.assert_array_equal(got.flat, want.flat)
    assert want.flat.max() > 0 and np.abs(want.sums).max() > 0


@pytest.mark.gpu
@pytest.mark.parametrize("chunk_steps, devices", [(7, None), (1000, None), (7, [0, 0]), (500, [0, 0, 0]),
                                                  (7, "all")])
def test_a_pinned_stream_goes_straight_over_the_link_with_the_same_bits(chunk_steps, devices):
    from regime_dash.runs import scheduler as distributed
    from regime_dash.engine import fast, loader, staged_phase1

    cp = loader.cupy_module()
    if devices == "all":
        devices = list(range(distributed.gpu_count()))
    s = regime_stream(np.random.default_rng(12), 1003, 37, v_pred=False)
    p = staged_phase1.pinned(s)
    assert staged_phase1._is_pinned(cp, p.rewards) and staged_phase1._is_pinned(cp, p.lots)
    assert not staged_phase1._is_pinned(cp, s.rewards)
    np.testing.assert_array_equal(p.rewards, s.rewards)
    np.testing.assert_array_equal(p.lots, s.lots)
    want = fast.step_stats(s)
    got = staged_phase1.step_stats(p, chunk_bytes=chunk_steps * 37 * 4, devices=devices)
    np.testing.assert_array_equal(got.sums.view(np.int32), want.sums.view(np.int32))
    np.testing.assert_array_equal(got.flat, want.flat)


@pytest.mark.gpu
def test_a_sweep_of_a_pinned_stream_is_the_same_table():
    from regime_dash.engine import staged_phase1

    s = regime_stream(np.random.default_rng(13), 400, 16, v_pred=False)
    grid = {"max_duration": [50.0, 200.0, 800.0], "eps_min": [0.01, 0.05]}
    want = sweep(s, grid, engine="fast", device="gpu").table
    got = sweep(staged_phase1.pinned(s), grid, engine="fast", device="gpu").table
    pd.testing.assert_frame_equal(got, want, check_exact=True)


def test_phase1_pieces_cover_the_steps_in_order_and_grow():
    from regime_dash.runs.sweeps import PHASE1_FIRST_PIECE, PHASE1_PIECE_GROWTH, phase1_pieces

    assert phase1_pieces(1) == [(0, 1)]
    assert phase1_pieces(2 * PHASE1_FIRST_PIECE - 1) == [(0, 2 * PHASE1_FIRST_PIECE - 1)]
    for steps in (2 * PHASE1_FIRST_PIECE, 400_000, 800_000, 10_000_000):
        pieces = phase1_pieces(steps)
        assert pieces[0][0] == 0 and pieces[-1][1] == steps and len(pieces) > 1
        assert all(a < z for a, z in pieces) and all(p[1] == q[0] for p, q in zip(pieces, pieces[1:]))
        sizes = [z - a for a, z in pieces]
        assert sizes[0] == max(PHASE1_FIRST_PIECE, steps // 64)
        assert all(q >= PHASE1_PIECE_GROWTH * p for p, q in zip(sizes[:-2], sizes[1:-1]))
        assert len(pieces) <= 8  # a few launches and publishes, whatever T


@pytest.mark.gpu
@pytest.mark.parametrize("first", [7, 100])
def test_a_gpu_sweep_with_phase1_in_pieces_is_the_same_table(stream, monkeypatch, first):
    import importlib

    sweep_module = importlib.import_module("regime_dash.engine.sweep_shards")  # where the pieces are cut
    grid = {"max_duration": [15, 60, 400], "eps_min": [0.0, 0.05, 0.2], "resurrection": [True, False]}
    want = sweep(stream, grid, engine="fast", device="cpu", keep=[0, 17])
    monkeypatch.setattr(sweep_module, "PHASE1_FIRST_PIECE", first)
    assert len(sweep_module.phase1_pieces(stream.steps)) > 1
    got = sweep(stream, grid, engine="fast", device="gpu", keep=[0, 17])
    pd.testing.assert_frame_equal(got.table, want.table, check_exact=True)
    for k in (0, 17):
        pd.testing.assert_frame_equal(got.trajectories[k], want.trajectories[k], check_exact=True)


def test_pinning_a_stream_without_a_gpu_says_why():
    from regime_dash.engine import loader, staged_phase1
    from regime_dash.errors import EngineUnavailable

    if loader.available() is None:
        pytest.skip("a CUDA device is here: pinning works (the GPU tests above check it)")
    s = regime_stream(np.random.default_rng(13), 20, 4, v_pred=False)
    with pytest.raises(EngineUnavailable, match="cannot run here"):
        staged_phase1.pinned(s)


@pytest.mark.gpu
def test_staged_phase1_names_a_device_that_is_not_here():
    from regime_dash.runs import scheduler as distributed
    from regime_dash.engine import staged_phase1

    s = regime_stream(np.random.default_rng(11), 50, 8, v_pred=False)
    n = distributed.gpu_count()
    for bad in ([n], [], [0, -1], ["0"], [True], "0"):
        with pytest.raises(ValidationError, match="phase 1 devices") as info:
            staged_phase1.step_stats(s, devices=bad)
        assert info.value.value == bad


@pytest.mark.gpu
def test_gpu_sweep_over_a_cluster_of_this_hosts_gpus_equals_in_process(stream, monkeypatch):
    reason = _two_gpus_reason()
    if reason is not None:
        pytest.skip(reason)
    pytest.importorskip("distributed", reason="dask.distributed is in requirements-test.txt; not installed here")
    import distributed as dd

    from regime_dash.runs import scheduler as distributed

    grid = {"max_duration": [15, 60, 400, 900], "eps_min": [0.0, 0.05, 0.2, 0.3], "resurrection": [True, False]}
    local = sweep(stream, grid, device="gpu", keep=[0, 9, 31])
    import importlib

    monkeypatch.setattr(importlib.import_module("regime_dash.engine.sweep_shards"), "PHASE1_FIRST_PIECE", 20)  # 3 pieces
    with distributed.local_cluster() as cluster, dd.Client(cluster) as client:
        client.wait_for_workers(2, timeout=120)
        workers = distributed.worker_count(client)
        assert distributed.local_gpus(client) == min(workers, distributed.gpu_count()) >= 2
        seen = []
        remote = sweep(stream, grid, device="gpu", keep=[0, 9, 31], scheduler=client,
                       progress=lambda d, t: seen.append((d, t)))
    assert seen == [(k, workers) for k in range(1, workers + 1)]
    assert remote.engine == local.engine == "fast-gpu"
    pd.testing.assert_frame_equal(remote.table, local.table, check_exact=True)
    for k in (0, 9, 31):
        pd.testing.assert_frame_equal(remote.trajectories[k], local.trajectories[k], check_exact=True)
    assert len(local.table[list(summary.METRICS)].drop_duplicates()) > 1


def test_a_bad_grid_names_the_first_failing_config_as_building_them_one_by_one_would():
    import itertools

    from regime_dash.runs.sweeps import ConfigGrid

    def one_by_one(grid):
        for combo in itertools.product(*grid.values()):
            swept = dict(zip(grid, combo))
            try:
                RegimeConfig(**swept)
            except ConfigError as exc:
                at = ", ".join(f"{k}={v!r}" for k, v in swept.items())
                return f"sweep value {at} is not a valid config: {exc}"
        return None

    rng = np.random.default_rng(8)
    pool = {"eps_min": [0.0, 0.3, 0.6, 1.2], "eps_max": [0.2, 0.5, 0.9], "max_duration": [10, -1, 2.5, 400],
            "popart_alpha": [0.001, 0.0, 1.0], "tau_boost_factor": [0.5, 1.5], "envelope": [True, False]}
    failures = 0
    for trial in range(200):
        names = list(rng.choice(list(pool), size=int(rng.integers(1, 4)), replace=False))
        grid = {n: list(rng.choice(pool[n], size=int(rng.integers(1, 4)))) for n in names}
        grid = {n: [v.item() if hasattr(v, "item") else v for v in vals] for n, vals in grid.items()}
        want = one_by_one(grid)
        try:
            ConfigGrid.of(grid)
            got = None
        except ConfigError as exc:
            got = str(exc)
        assert got == want, grid
        failures += want is not None
    assert 20 < failures < 190  # both outcomes were exercised


def test_packed_metrics_come_back_bit_for_bit():
    from regime_dash.engine import metric_pack

    rng = np.random.default_rng(2)
    metrics = np.stack([rng.integers(0, 25_000, 500).astype(np.float64),        # a count past int8
                        rng.integers(0, 9, 500).astype(np.float64),             # a small count
                        rng.standard_normal(500).astype(np.float32).astype(np.float64),  # a float32 value
                        rng.standard_normal(500),                                # a float64 mean
                        np.full(500, np.nan),                                    # one value for every config
                        np.r_[rng.integers(0, 9, 499), 2.0 ** 40].astype(np.float64),  # past int32
                        np.r_[0.0, -0.0, rng.integers(0, 9, 498)].astype(np.float64),  # -0.0: not an int
                        np.r_[np.full(499, 3.0), -3.0],                          # all but one equal
                        np.r_[0.0, np.full(499, -0.0)]])                         # equal, but not the same bits
    packed = metric_pack.pack(np, metrics)
    assert [c.dtype for c in packed] == [np.int16, np.int8, np.float32, np.float64, np.float64, np.float32,
                                         np.float32, np.int8, np.float32]
    assert [c.ndim for c in packed] == [1, 1, 1, 1, 0, 1, 1, 1, 1]
    assert np.signbit(packed[6][1]) and not np.signbit(packed[6][0])
    back = np.full((metrics.shape[0], 700), 7.0)
    metric_pack.fill(back, 200, 700, packed)
    np.testing.assert_array_equal(back[:, 200:].view(np.int64), metrics.view(np.int64))
    assert (back[:, :200] == 7.0).all()
    assert sum(c.nbytes for c in packed) < metrics.nbytes / 2


def test_a_grid_shard_plans_its_rows_from_its_varying_axes_alone():
    from regime_dash.engine.config_grid import SlotPlan
    from regime_dash.runs.sweeps import ConfigGrid

    isv = {"RL_KELLY_FRACTION_INDEX": 0.0, "RL_IQN_TAU_MIN_EFFECTIVE_INDEX": 0.3}
    grid = ConfigGrid.of({"eps_max": [0.6, 0.8], "tau_min": [0.2], "envelope": [True, False],
                          "max_duration": [5, 50, 500]}, RegimeConfig(kelly_cap=2.0))
    # each config's own rows, from the per-config path (not from the plan under test)
    want = tuple(np.stack(rows) for rows in zip(*(initial_isv(c, isv, DEFAULT_LAYOUT) for c in grid.configs())))
    for start, stop in ((0, 12), (3, 10)):
        cols = grid.varying_columns(start, stop)
        assert np.ndim(cols["tau_min"]) == 0 and np.ndim(cols["kelly_cap"]) == 0 and len(cols["envelope"]) == stop - start
        plan = SlotPlan.of(cols, stop - start, isv, DEFAULT_LAYOUT)
        assert len(plan.slots) == 4  # max_duration, eps_max and the live ε it bootstraps, envelope
        got = plan.rows(0, stop - start, isv, DEFAULT_LAYOUT)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.view(np.int32), w[start:stop].view(np.int32))


def test_a_slot_plan_tells_minus_zero_from_zero():
    from regime_dash.engine.config_grid import SlotPlan

    configs = [RegimeConfig(eps_min=0.0), RegimeConfig(eps_min=-0.0)]
    cols = {n: np.array([getattr(c, n) for c in configs]) for n in field_names()}
    plan = SlotPlan.of(cols, 2, None, DEFAULT_LAYOUT)
    got = plan.rows(0, 2, None, DEFAULT_LAYOUT)
    for k, c in enumerate(configs):
        for g, w in zip(got, initial_isv(c, None, DEFAULT_LAYOUT)):
            np.testing.assert_array_equal(g[k].view(np.int32), w.view(np.int32))


def test_bad_base_and_keep_get_our_errors_naming_them(stream):
    from regime_dash.runs.sweeps import ConfigGrid

    with pytest.raises(ConfigError, match="base must be a RegimeConfig, got str 'x'") as err:
        ConfigGrid.of({"eps_min": [0.1]}, "x")
    assert err.value.field == "base"
    with pytest.raises(ValidationError, match="keep must be a sequence of config indices, got int 3") as err:
        sweep(stream, {"eps_min": [0.1, 0.2]}, device="cpu", keep=3)
    assert err.value.field == "keep" and err.value.value == 3


def test_a_one_config_grid_sweeps(stream):
    one = sweep(stream, {"max_duration": 40}, device="cpu")
    assert len(one.table) == 1
    pd.testing.assert_frame_equal(one.table, sweep(stream, [RegimeConfig(max_duration=40)], device="cpu").table,
                                  check_exact=True)
