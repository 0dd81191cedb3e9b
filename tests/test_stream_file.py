"""A stream file read block by block: its phase 1 and per-step fields, and a replay from them, equal the
whole stream's bit for bit; the file's problems are refused as :func:`load` refuses them."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from regime_dash.sources import scenarios
from regime_dash.core.config import RegimeConfig
from regime_dash.engine import fast, file_phase1, replay, replay_trajectory
from regime_dash.errors import StreamError
from regime_dash.core.streams import STEP_FIELDS, Stream, StepStream, StreamFile, load


def _awkward(rng, t: int, b: int, v_pred: bool = False) -> Stream:
    rewards = rng.normal(size=(t, b)).astype(np.float32) * np.float32(3)
    rewards[::5, :] = 0.0
    rewards[1::7, 0] = -0.0
    rewards[2::11, -1] = np.float32(1e30)
    return Stream.make(rewards=rewards, lots=rng.integers(0, 2, (t, b)), kelly_analytic=rng.normal(size=t),
                       boundary=np.arange(t) % 97 == 3, tau_action=rng.random(t),
                       v_pred=rng.normal(size=(t, b)) if v_pred else None)


def _same_stats(a, b) -> None:
    assert np.array_equal(a.sums.view(np.uint32), b.sums.view(np.uint32))
    assert np.array_equal(a.flat, b.flat)


@pytest.mark.parametrize("suffix", [".npz", ".parquet"])
@pytest.mark.parametrize("t, b, rows", [(1, 1, None), (5, 3, 2), (257, 33, 1), (1031, 300, 1024), (2049, 7, 77),
                                        (3000, 513, None), (100, 257, 1000)])
def test_blockwise_phase1_is_step_stats(tmp_path, rng, suffix, t, b, rows):
    stream = _awkward(rng, t, b, v_pred=t % 2 == 1)
    steps, stats = file_phase1.read(stream.save(tmp_path / f"s{suffix}"), rows=rows)
    _same_stats(stats, fast.step_stats(stream))
    assert steps.accounts == b and steps.steps == t
    for name in STEP_FIELDS:
        got, want = getattr(steps, name), getattr(stream, name)
        assert got.dtype == want.dtype and np.array_equal(got, want), name


@pytest.mark.parametrize("t, b, rows", [(10, 4, 3), (4096, 64, 1000)])
def test_step_stats_blocks_any_split(rng, t, b, rows):
    stream = _awkward(rng, t, b)
    blocks = [(a, stream.rewards[a:a + rows], stream.lots[a:a + rows]) for a in range(0, t, rows)]
    _same_stats(fast.step_stats_blocks(blocks, t), fast.step_stats(stream))
    with pytest.raises(Exception, match="does not follow|cover"):
        fast.step_stats_blocks(blocks[1:], t)
    with pytest.raises(Exception, match="cover"):
        fast.step_stats_blocks(blocks[:-1], t)


@pytest.mark.parametrize("controllers", ["single", "fused"])
def test_replay_of_the_light_inputs_is_the_full_replay(tmp_path, controllers):
    stream = scenarios.make("kelly_trap_run8", steps=2500, accounts=37)
    steps, stats = file_phase1.read(stream.save(tmp_path / "s.npz"), rows=300)
    for config in (RegimeConfig(), RegimeConfig(max_duration=300, eps_min=0.07)):
        full = replay(stream, config, engine="fast", device="cpu", controllers=controllers)
        light = replay(steps, config, engine="fast", device="cpu", stats=stats, controllers=controllers)
        pd.testing.assert_frame_equal(light, full, check_exact=True)
        logged = replay(steps, config, engine="fast", device="cpu", stats=stats, log_inputs=True)
        pd.testing.assert_frame_equal(logged, replay(stream, config, engine="fast", device="cpu", log_inputs=True),
                                      check_exact=True)


@pytest.mark.gpu
def test_gpu_replay_of_the_light_inputs_is_the_full_replay(tmp_path):
    stream = scenarios.make("kelly_trap_run8", steps=2500, accounts=37)
    steps, stats = file_phase1.read(stream.save(tmp_path / "s.npz"), rows=300)
    config = RegimeConfig(max_duration=300)
    full = replay(stream, config, engine="fast", device="cpu")
    pd.testing.assert_frame_equal(replay(steps, config, engine="fast", device="gpu", stats=stats), full,
                                  check_exact=True)


def test_a_step_stream_replays_only_where_no_batch_is_read(rng):
    stream = _awkward(rng, 50, 4)
    steps, stats = stream.per_step(), fast.step_stats(stream)
    for kw in ({"engine": "reference"}, {"engine": "fast"}, {"engine": "fast", "stats": stats, "normalized": True}):
        with pytest.raises(StreamError, match="StepStream"):
            replay_trajectory(steps, **kw)
    with pytest.raises(Exception, match="stats cover"):
        replay(steps, engine="fast", device="cpu", stats=fast.step_stats(stream.slice(0, 49)))
    with pytest.raises(StreamError, match="accounts"):
        StepStream(**{n: getattr(stream, n) for n in STEP_FIELDS}, accounts=0)


def _bad(tmp_path, rng, suffix, field, index, value):
    stream = _awkward(rng, 400, 6)
    arrays = stream.arrays()
    arrays[field] = arrays[field].copy()
    arrays[field][index] = value
    path = tmp_path / f"bad{suffix}"
    if suffix == ".npz":
        np.savez_compressed(path, **arrays)
    else:
        object.__setattr__(stream, field, arrays[field])  # past validation: the file holds the bad value
        stream.save(path)
    return path


@pytest.mark.parametrize("suffix", [".npz", ".parquet"])
@pytest.mark.parametrize("field, index, value, words", [
    ("rewards", (301, 2), np.nan, "rewards holds a non-finite value nan at step index 301, account 2"),
    ("lots", (399, 5), -1, "lots must be >= 0; at step index 399, account 5 it holds -1"),
    ("step", 10, 9, "step must increase strictly"),
])
def test_a_bad_file_is_refused_as_load_refuses_it(tmp_path, rng, suffix, field, index, value, words):
    path = _bad(tmp_path, rng, suffix, field, index, value)
    with pytest.raises(StreamError, match=words.replace("(", r"\(")):
        load(path)
    with pytest.raises(StreamError, match=words.replace("(", r"\(")):
        file_phase1.read(path, rows=64)


def test_a_file_of_mismatched_widths_or_no_rows_is_refused(tmp_path, rng):
    s = _awkward(rng, 20, 3)
    arrays = s.arrays()
    np.savez(tmp_path / "w.npz", **{**arrays, "lots": np.zeros((20, 4), np.int32)})
    with pytest.raises(StreamError, match="lots has 4 accounts"):
        StreamFile(tmp_path / "w.npz")
    np.savez(tmp_path / "e.npz", **{k: v[:0] for k, v in arrays.items()})
    with pytest.raises(StreamError, match="T = 0"):
        StreamFile(tmp_path / "e.npz")
    np.savez(tmp_path / "m.npz", **{k: v for k, v in arrays.items() if k != "tau_action"})
    with pytest.raises(StreamError, match="missing"):
        StreamFile(tmp_path / "m.npz")


def test_a_fortran_ordered_member_reads_the_same(tmp_path, rng):
    s = _awkward(rng, 300, 9)
    arrays = s.arrays()
    np.savez(tmp_path / "f.npz", **{**arrays, "rewards": np.asfortranarray(arrays["rewards"])})
    _, stats = file_phase1.read(tmp_path / "f.npz", rows=64)
    _same_stats(stats, fast.step_stats(s))
