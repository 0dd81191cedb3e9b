"""Pearl C module: per-block engagement counts, the rate deficit and its EMA, kernel parity."""
from __future__ import annotations

import numpy as np
import pytest

from regime_dash.errors import ConfigError, StreamError
from regime_dash.modules import MODULES
from regime_dash.modules.pearl_c import PearlCConfig, PearlCStream
from regime_dash.modules.pearl_c import twin
from regime_dash.modules.pearl_c.replay import COL, block_column
from tests.helpers import by_id

M = MODULES["pearl_c"]
F = np.float32
SIZES = (1, 31, 1500)


def test_per_block_counts_follow_the_grid_stride_ownership():
    u = np.zeros((1, 10), np.float32)
    u[0, [1, 5, 8, 9]] = 2.0  # grid of 2 blocks × 4 threads: 8 → thread 0, 9 → thread 1 (block 0)
    u[0, 3] = 1.0  # exactly at the clamp: not engaged (strict >)
    buf = np.full(6, -7, np.int32)
    twin.engagement_count(u, 1.0, 2, 4, buf, 3)
    assert buf.tolist() == [-7, -7, -7, 3, 1, -7]


def test_disabled_offset_writes_nothing():
    buf = np.full(4, -7, np.int32)
    twin.engagement_count(np.full((1, 8), 5.0, np.float32), 1.0, 2, 4, buf, twin.OFFSET_DISABLED)
    assert (buf == -7).all()


def test_rate_and_deficit_match_a_direct_count():
    stream = M.demo_stream(seed=1, steps=120)
    frame = M.replay(stream)
    direct = (np.abs(stream.updates) > F(1.0)).sum(axis=1)
    assert frame[COL.count].tolist() == direct.tolist()
    np.testing.assert_array_equal(frame[COL.rate].to_numpy(), direct.astype(np.float32) / F(4096))
    np.testing.assert_array_equal(frame[COL.deficit].to_numpy(), frame[COL.rate].to_numpy() - F(0.01))
    blocks = [block_column(b) for b in range(16)]
    assert (frame[blocks].sum(axis=1).to_numpy() == direct).all()


def test_demo_replay_passes_every_check_and_crosses_the_target():
    frame = M.replay(M.demo_stream(seed=0))
    assert all(r.status == "pass" for r in M.invariants(frame))
    ema = frame[COL.ema].to_numpy()
    assert (ema < 0).any() and (ema > 0).any()  # below and above the 1% target
    assert frame[COL.bump].any() and not frame[COL.bump].all()


def test_first_observation_at_start_and_after_a_fold_boundary():
    stream = M.demo_stream(seed=2, steps=200)
    frame = M.replay(stream)
    b = int(np.flatnonzero(stream.boundary)[0])
    for i in (0, b):
        assert frame[COL.ema][i] == frame[COL.deficit][i]
    assert frame[COL.ema][b + 1] != frame[COL.deficit][b + 1]


def test_tracking_off_reads_a_zero_rate():
    frame = M.replay(M.demo_stream(steps=50), PearlCConfig(tracking=False))
    assert (frame[COL.count] == 0).all()
    assert (frame[COL.deficit] == F(0.0) - F(0.01)).all()


def test_a_lower_clamp_engages_more():
    stream = M.demo_stream(steps=60)
    hi = M.replay(stream, PearlCConfig(clamp=1.0))[COL.rate].mean()
    lo = M.replay(stream, PearlCConfig(clamp=0.5))[COL.rate].mean()
    assert lo > 5 * hi


def test_invariants_catch_corrupted_rows():
    frame = M.replay(M.demo_stream(steps=100))
    bad = frame.copy()
    bad.loc[40, COL.deficit] = bad.loc[40, COL.deficit] + F(0.001)
    bad.loc[0, COL.ema] = F(0.5)
    res = by_id(M.invariants(bad))
    assert res["pearl_c.deficit_definition"].steps == [40]
    assert res["pearl_c.first_observation"].steps == [0]
    assert res["pearl_c.ema_within_observations"].status == "fail"


def test_config_and_stream_errors_name_the_value():
    with pytest.raises(ConfigError, match="block=96"):
        PearlCConfig(block=96)
    with pytest.raises(ConfigError, match="clamp"):
        PearlCConfig(clamp=float("inf"))
    with pytest.raises(StreamError, match="inf"):
        PearlCStream.make(updates=np.array([[0.0, np.inf]]))
    with pytest.raises(StreamError, match="rank 2"):
        PearlCStream.make(updates=np.zeros(5))


def test_figures():
    figs = M.figures(M.replay(M.demo_stream(steps=80)))
    assert len(figs) == 3 and len(figs[2].data) == 1 and figs[2].data[0].z.shape[0] == 16
    # below each plot: its x tick labels, then its x title (about 50 px; at 30 the title sat on a tick)
    assert all(f.layout.xaxis.title.text == "step" and f.layout.margin.b >= 50 for f in figs)


@pytest.mark.gpu
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("block,blocks", [(256, 0), (32, 0), (32, 2)])
def test_engagement_kernel_parity(n, block, blocks):
    from regime_dash.modules.pearl_c.cuda import engagement_count

    rng = np.random.default_rng(n + block + blocks)
    updates = rng.normal(0, 0.5, (5, n)).astype(np.float32)
    updates[:, ::7] = 1.0  # at the clamp
    grid = blocks or -(-n // block)
    for offset in (0, 5, twin.OFFSET_DISABLED):
        length = 5 + 5 * grid
        want = np.zeros(length, np.int32)
        twin.engagement_count(updates, 1.0, grid, block, want, offset)
        got = engagement_count(updates, 1.0, grid, block, length, offset)
        np.testing.assert_array_equal(got, want)


@pytest.mark.gpu
def test_replay_cuda_equals_reference():
    stream = M.demo_stream(seed=5, steps=150)
    a, b = M.replay(stream), M.replay(stream, engine="cuda")
    for col in a.columns:
        np.testing.assert_array_equal(a[col].to_numpy(), b[col].to_numpy(), err_msg=col)
