"""The reference's block reduction is the GPU's: checked against a lane-by-lane simulation."""
from __future__ import annotations

import numpy as np
import pytest

from regime_dash.engine.reference import block_reduce_stats


def _simulate_block(r: np.ndarray):
    """256 threads, warp shuffle-down, first-warp reduction, one float32 op at a time."""
    f = np.float32
    local = [[f(0), f(0), f(0)] for _ in range(256)]
    for tid in range(256):
        for i in range(tid, len(r), 256):
            x = r[i]
            local[tid][0] = f(local[tid][0] + x)
            local[tid][1] = f(local[tid][1] + f(x * x))
            local[tid][2] = max(local[tid][2], abs(x))

    def warp(vals, op):
        vals = list(vals)
        off = 16
        while off:
            vals = [op(vals[l], vals[l + off] if l + off < 32 else vals[l]) for l in range(32)]
            off //= 2
        return vals[0]

    add = lambda a, b: f(a + b)
    out = []
    for k, op in ((0, add), (1, add), (2, max)):
        partials = [warp([local[w * 32 + l][k] for l in range(32)], op) for w in range(8)]
        out.append(warp(partials + [f(0)] * 24, op))
    return out


@pytest.mark.parametrize("b", [1, 31, 257, 1500])
def test_block_reduce_matches_lane_simulation(b):
    r = np.random.default_rng(b).normal(0, 3, b).astype(np.float32)
    got = block_reduce_stats(r)
    want = _simulate_block(r)
    assert [np.float32(g) for g in got] == want


def test_reduction_order_differs_from_a_naive_sum():
    # the emulation matters: a plain left-to-right sum gives another float32 result
    r = np.random.default_rng(0).normal(0, 1e3, 1500).astype(np.float32)
    naive = np.float32(0)
    for x in r:
        naive = np.float32(naive + x)
    assert block_reduce_stats(r)[0] != naive
