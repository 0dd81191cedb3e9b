"""engine.summary: the whole-column summary equals the step-by-step fold (the sweep kernels' definition) bit for bit."""
from __future__ import annotations

import math

import numpy as np
import pytest

from regime_dash.engine import summary


def awkward_snapshot(steps: int, seed: int) -> np.ndarray:
    """Random float32 snapshot rows with zeros, NaNs, infinities, σ = envelope ties and timeout runs."""
    rng = np.random.default_rng(seed)
    snap = rng.standard_normal((steps, len(summary.diag.SNAPSHOT_COLUMNS))).astype(np.float32)
    snap[rng.random(snap.shape) < 0.2] = 0.0
    snap[rng.random(snap.shape) < 0.04] = np.nan
    snap[rng.random(snap.shape) < 0.02] = np.inf
    snap[rng.random(snap.shape) < 0.02] = -np.inf
    tie = rng.random(steps) < 0.5
    snap[tie, summary.POS_ENVELOPE] = snap[tie, summary.POS_SIGMA]
    snap[:, summary.POS_TIMEOUT] = (np.sin(np.arange(steps) / 3.0) > 0.5).astype(np.float32)
    return snap


def identical(a: dict[str, float], b: dict[str, float]) -> bool:
    return a.keys() == b.keys() and all(
        (math.isnan(a[k]) and math.isnan(b[k])) or np.float64(a[k]).tobytes() == np.float64(b[k]).tobytes()
        for k in a)


@pytest.mark.parametrize("steps", [0, 1, 2, 3, 7, 31, 1000, 4097])
def test_the_column_summary_equals_the_fold_bit_for_bit(steps):
    for seed in range(3):
        snap = awkward_snapshot(steps, seed)
        with np.errstate(invalid="ignore"):
            by_fold = summary.summarize_snapshot_by_fold(snap)
        assert identical(summary.summarize_snapshot(snap), by_fold), (steps, seed)


def test_a_finite_run_is_summed_in_step_order():
    # values whose sum depends on the order of additions: pairwise summation would give another last bit
    kelly = np.array([1e8, 1.0, -1e8, 1e-3] * 250, np.float32)
    snap = np.zeros((kelly.size, len(summary.diag.SNAPSHOT_COLUMNS)), np.float32)
    snap[:, summary.POS_KELLY] = kelly
    total = 0.0
    for k in kelly:
        total += float(k)
    assert summary.summarize_snapshot(snap)["kelly_mean"] == total / kelly.size
