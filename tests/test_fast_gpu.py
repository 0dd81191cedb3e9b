"""The fast GPU engine (phase 1 stats + per-scenario scan) against the reference, bit for bit.

``run`` is the backend contract: every output of a single replay is compared
bitwise with the reference. ``sweep_summaries`` runs many scenarios over one
phase 1; each scenario's float64 accumulators must equal the summary folded
from that scenario's reference replay, exactly, and kept scenarios return the
reference's snapshot.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from regime_dash.diag import catalogue as diag
from regime_dash.core.config import RegimeConfig
from regime_dash.engine import fast_gpu, initial_isv, reference, snapshot_indices, summary
from regime_dash.errors import StreamError, ValidationError
from regime_dash.core.slots import DEFAULT_LAYOUT as L
from test_cuda_engine import SIZES, T_STEPS, VARIANTS, random_stream


def _bits(a):
    return np.ascontiguousarray(a).view(np.int32)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["default", "timeouts", "model_switches"])
@pytest.mark.parametrize("b", SIZES)
def test_fast_gpu_run_matches_reference(b, variant):
    stream = random_stream(np.random.default_rng(2000 + b), T_STEPS, b)
    cfg, isv = VARIANTS[variant]
    isv0, boot = initial_isv(cfg, isv, L)
    snap_idx = snapshot_indices(L)
    want = reference.run(stream, isv0, boot, L, snap_idx)
    got = fast_gpu.run(stream, isv0, boot, L, snap_idx)
    names = ("snapshot", "flat count", "normalized rewards", "v_pred", "final isv")
    for name, g, w in zip(names, got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, name
        bad = np.flatnonzero(_bits(g).ravel() != _bits(w).ravel())
        assert bad.size == 0, f"{name}: {bad.size} values differ, first at flat index {int(bad[0])}"
    s = summary.summarize_snapshot(want[0])
    assert s["dead_zone_steps"] > 0 and s["tail_events"] > 0
    if variant in ("timeouts", "model_switches"):
        assert s["timeouts"] > 0


@pytest.mark.gpu
def test_fast_gpu_run_without_v_pred():
    stream = random_stream(np.random.default_rng(5), T_STEPS, 31, v_pred=False)
    isv0, boot = initial_isv(RegimeConfig(), None, L)
    snap_idx = snapshot_indices(L)
    want = reference.run(stream, isv0, boot, L, snap_idx)
    got = fast_gpu.run(stream, isv0, boot, L, snap_idx)
    assert got[3] is None
    for i in (0, 1, 2, 4):
        assert np.array_equal(_bits(got[i]), _bits(want[i]))


def _scenarios():
    """Six distinct configs (with the timeout, F4/F5-off and model-switch variants among them)."""
    configs = [
        (RegimeConfig(), None),
        (RegimeConfig(resurrection=False, max_duration=60.0), None),
        (RegimeConfig(envelope=False, tau_boost=False), None),
        (RegimeConfig(eps_min=0.0, eps_max=0.2, n_recovery=30.0, tail_sigma_threshold=2.0), None),
        (RegimeConfig(envelope_decay_alpha=0.2, popart_alpha=0.01), {"RL_KELLY_FRACTION_INDEX": 0.0}),
        (RegimeConfig(tail_on_deviation=True, duration_across_cycles=True, max_duration=60.0), None),
    ]
    return [initial_isv(cfg, isv, L) for cfg, isv in configs]


@pytest.mark.gpu
def test_sweep_accumulators_equal_each_scenarios_reference_summary():
    stream = random_stream(np.random.default_rng(11), T_STEPS, 64)
    rows = _scenarios()
    n_cfg = len(rows)
    n_scen = 133  # more than two scan blocks; scenario s runs config s % n_cfg
    isv0s = np.stack([rows[s % n_cfg][0] for s in range(n_scen)])
    boots = np.stack([rows[s % n_cfg][1] for s in range(n_scen)])
    keep = [0, 3, 132]
    acc, snaps = fast_gpu.sweep_summaries(stream, isv0s, boots, L, keep)
    assert acc.shape == (n_scen, summary.N_METRICS + 1) and acc.dtype == np.float64
    assert sorted(snaps) == keep

    snap_idx = snapshot_indices(L)
    want_acc, want_snap = [], []
    for isv0, boot in rows:
        snap = reference.run(stream, isv0, boot, L, snap_idx)[0]
        a = np.empty(summary.N_METRICS + 1)
        summary.init(a)
        for row in snap:
            summary.accumulate(a, row)
        want_acc.append(a)
        want_snap.append(snap)
    for s in range(n_scen):
        assert np.array_equal(acc[s], want_acc[s % n_cfg]), f"scenario {s}: {acc[s]} != {want_acc[s % n_cfg]}"
    for k in keep:
        assert snaps[k].shape == (T_STEPS, len(diag.SNAPSHOT_SLOTS))
        assert np.array_equal(_bits(snaps[k]), _bits(want_snap[k % n_cfg]))
    # the configs really differ, so equal rows are not an accident of identical inputs
    assert len({tuple(a) for a in want_acc}) == n_cfg


@pytest.mark.gpu
@pytest.mark.parametrize("t_steps", [2, 31, 32, 33, 97])
def test_warp_scan_of_several_scenarios_matches_each_reference(t_steps):
    # replay_scan_warp works in batches of 32 steps: T below, at and past a batch
    # edge; three scenarios (one block each), the middle one keeps no snapshot
    from regime_dash.engine import loader

    cp = loader.cupy_module()
    stream = random_stream(np.random.default_rng(300 + t_steps), t_steps, 40)
    rows = _scenarios()[:3]
    snap_idx = snapshot_indices(L)
    mod = loader.load_module(fast_gpu.FILES, L, loader.PARITY_OPTIONS)
    p1 = fast_gpu.DevicePhase1(cp, mod, stream, t_steps, 40)
    isv_d = cp.asarray(np.stack([r[0] for r in rows]))
    boot_d = cp.asarray(np.stack([r[1] for r in rows]))
    keep_slot = np.array([1, -1, 0], np.int32)
    snap = cp.asnumpy(fast_gpu._scan(cp, mod, p1, L, snap_idx, isv_d, boot_d, keep_slot, 2))
    final = cp.asnumpy(isv_d)
    for s, (isv0, boot) in enumerate(rows):
        want = reference.run(stream, isv0, boot, L, snap_idx)
        assert np.array_equal(_bits(final[s]), _bits(want[4])), f"scenario {s}: final isv"
        if keep_slot[s] >= 0:
            assert np.array_equal(_bits(snap[keep_slot[s]]), _bits(want[0])), f"scenario {s}"
    assert not np.array_equal(final[0], final[1])  # the scenarios really differ


# ---- validation: before any device work ---------------------------------------------
def test_sweep_rejects_rows_of_the_wrong_shape_or_dtype():
    stream = random_stream(np.random.default_rng(1), 8, 4)
    isv0, boot = initial_isv(RegimeConfig(), None, L)
    rows = np.stack([isv0, isv0])
    with pytest.raises(ValidationError, match=r"isv0s must be float32 \[S >= 1, 716\].*\(2, 715\)"):
        fast_gpu.sweep_summaries(stream, rows[:, :-1].copy(), np.stack([boot, boot]), L)
    with pytest.raises(ValidationError, match="boot_rows has 1 rows, isv0s has 2"):
        fast_gpu.sweep_summaries(stream, rows, boot[None, :], L)
    with pytest.raises(ValidationError, match="boot_rows must be float32.*float64"):
        fast_gpu.sweep_summaries(stream, rows, np.stack([boot, boot]).astype(np.float64), L)


def test_sweep_rejects_bad_keep_lists():
    stream = random_stream(np.random.default_rng(1), 8, 4)
    isv0, boot = initial_isv(RegimeConfig(), None, L)
    rows, boots = np.stack([isv0, isv0]), np.stack([boot, boot])
    with pytest.raises(ValidationError, match=r"keep holds scenario 2, outside \[0, 2\)"):
        fast_gpu.sweep_summaries(stream, rows, boots, L, keep=[2])
    with pytest.raises(ValidationError, match="keep names a scenario twice"):
        fast_gpu.sweep_summaries(stream, rows, boots, L, keep=[1, 1])


def test_fast_gpu_run_checks_the_stream_first():
    stream = random_stream(np.random.default_rng(1), 8, 4)
    object.__setattr__(stream, "rewards", stream.rewards.astype(np.float64))
    isv0, boot = initial_isv(RegimeConfig(), None, L)
    with pytest.raises(StreamError, match="rewards must have dtype float32, got float64"):
        fast_gpu.run(stream, isv0, boot, L, snapshot_indices(L))


def test_fast_gpu_run_needs_the_layouts_snapshot_slots():
    # the scan compiles the snapshot columns in, so another snap_idx is refused, not ignored
    stream = random_stream(np.random.default_rng(1), 8, 4)
    isv0, boot = initial_isv(RegimeConfig(), None, L)
    snap = snapshot_indices(L)[::-1].copy()
    with pytest.raises(ValidationError, match="snap_idx .* is not snapshot_indices"):
        fast_gpu.run(stream, isv0, boot, L, snap)


@pytest.mark.gpu
@pytest.mark.parametrize("b", [1, 7, 130])
def test_fast_gpu_run_with_the_hosts_phase1_is_the_same_bits(b):
    """Phase 1 given (the page's cached ``step_stats``) moves only [T]-sized inputs; with
    ``normalized=False`` Pass 3 is left out. Every returned array keeps the reference's bits, and
    the snapshot comes back column-major (the frame's columns without a host transpose)."""
    from regime_dash.engine import fast

    stream = random_stream(np.random.default_rng(4100 + b), T_STEPS, b)
    isv0, boot = initial_isv(*VARIANTS["timeouts"], L)
    snap_idx = snapshot_indices(L)
    want = reference.run(stream, isv0, boot, L, snap_idx)
    stats = fast.step_stats(stream)
    full = fast_gpu.run(stream, isv0, boot, L, snap_idx, stats=stats)
    lean = fast_gpu.run(stream, isv0, boot, L, snap_idx, stats=stats, normalized=False)
    assert lean[2] is None and lean[3] is None
    assert lean[0].flags.f_contiguous and full[0].flags.f_contiguous
    for got in (full, lean):
        for name, g, w in zip(("snapshot", "flat count", "normalized rewards", "v_pred", "final isv"), got, want):
            if g is None:
                continue
            assert g.shape == w.shape and g.dtype == w.dtype, name
            assert np.array_equal(_bits(g).ravel(), _bits(w).ravel()), name
    frame = diag.frame_from_snapshot(lean[0], lean[1], b, stream.step, stream.boundary, RegimeConfig())
    ref = diag.frame_from_snapshot(want[0], want[1], b, stream.step, stream.boundary, RegimeConfig())
    pd.testing.assert_frame_equal(frame, ref, check_exact=True)


@pytest.mark.gpu
@pytest.mark.parametrize("piece", [32, 96, 1024, 4096])
@pytest.mark.parametrize("normalized", [True, False])
def test_the_scan_in_pieces_copied_back_beside_it_is_the_same_bits(monkeypatch, piece, normalized):
    """The single replay's scan launched over pieces of steps (each piece's rows copied back while
    the next runs) gives the reference's bits: pieces shorter than a boundary's spacing, longer than
    the run, and ending inside a dead-zone stretch, with and without Pass 3 after them."""
    from regime_dash.engine import fast

    monkeypatch.setattr(fast_gpu, "SCAN_PIECE", piece)
    stream = random_stream(np.random.default_rng(4200 + piece), T_STEPS + 7, 33)
    isv0, boot = initial_isv(*VARIANTS["model_switches"], L)
    snap_idx = snapshot_indices(L)
    want = reference.run(stream, isv0, boot, L, snap_idx)
    for stats in (None, fast.step_stats(stream)):
        got = fast_gpu.run(stream, isv0, boot, L, snap_idx, stats=stats, normalized=normalized)
        assert got[0].flags.f_contiguous
        for name, g, w in zip(("snapshot", "flat count", "normalized rewards", "v_pred", "final isv"), got, want):
            if g is None:
                assert not normalized and name in ("normalized rewards", "v_pred"), name
                continue
            assert g.shape == w.shape and g.dtype == w.dtype, name
            assert np.array_equal(_bits(g).ravel(), _bits(w).ravel()), (name, piece)


@pytest.mark.gpu
def test_a_scan_piece_that_is_not_whole_batches_is_refused(monkeypatch):
    monkeypatch.setattr(fast_gpu, "SCAN_PIECE", 40)
    stream = random_stream(np.random.default_rng(1), 100, 2)
    isv0, boot = initial_isv(*VARIANTS["default"], L)
    with pytest.raises(ValidationError, match="scan piece 40"):
        fast_gpu.run(stream, isv0, boot, L, snapshot_indices(L))


@pytest.mark.gpu
def test_sweep_values_packed_on_the_device_are_the_host_finalized_metrics():
    from regime_dash.engine import fast, metric_pack

    stream = random_stream(np.random.default_rng(3), T_STEPS, 64)
    rows = _scenarios()
    boot = rows[0][1]
    slot_idx = np.array([L.index("RL_REGIME_DEAD_ZONE_MAX_DURATION_INDEX"),
                         L.index("RL_KELLY_EPS_RECOVERY_MIN_INDEX")], np.int32)
    values = np.stack([np.repeat(np.float32([20, 60, 400]), 70)[:200],
                       np.tile(np.float32([0.0, 0.01, 0.05, 0.2]), 50)], axis=1)
    stats = fast.step_stats(stream)
    args = (stream.per_step(), stats, stream.accounts, boot, boot, slot_idx, values,
            np.zeros(0, np.int32), L, [1, 150])
    acc, snaps = fast_gpu.sweep_values(*args)
    cols, snaps_packed = fast_gpu.sweep_values(*args, packed=True)
    want = metric_pack.finalize(np, acc, stream.steps)
    got = np.full_like(want, np.nan)
    metric_pack.fill(got, 0, want.shape[1], cols)
    np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))
    # the device packs as the host does
    assert [(c.dtype, c.ndim) for c in cols] == [(c.dtype, c.ndim) for c in metric_pack.pack(np, want)]
    assert sum(c.nbytes for c in cols) < want.nbytes / 2
    assert sorted(snaps_packed) == [1, 150]
    for k in (1, 150):
        np.testing.assert_array_equal(snaps_packed[k], snaps[k])
    assert len({tuple(r) for r in want.T}) > 1


def _pieces(stats, cuts):
    """``stats`` cut into ``(t0, t1, StepStats)`` pieces at ``cuts``."""
    from regime_dash.engine.step_stats import StepStats

    edges = [0, *cuts, stats.flat.shape[0]]
    return [(a, z, StepStats(stats.sums[a:z].copy(), stats.flat[a:z].copy())) for a, z in zip(edges, edges[1:])]


@pytest.mark.gpu
@pytest.mark.parametrize("cuts", [[1], [31], [1, 2, 1500], [T_STEPS - 1], list(range(100, T_STEPS, 100))])
def test_a_sweep_launched_piece_by_piece_is_the_same_bits_as_one_launch(cuts):
    from regime_dash.core.config import FIELD_SLOTS
    from regime_dash.engine import fast

    stream = random_stream(np.random.default_rng(12), T_STEPS, 31)
    stats = fast.step_stats(stream)
    isv0, boot = initial_isv(RegimeConfig(), None, L)
    fields = ("max_duration", "eps_min", "n_recovery")
    slot_idx = np.array([L.index(FIELD_SLOTS[f]) for f in fields], np.int32)
    rng = np.random.default_rng(3)
    values = np.stack([rng.choice([15.0, 60.0, 400.0], 133), rng.choice([0.0, 0.05, 0.2], 133),
                       rng.choice([5.0, 30.0, 200.0], 133)], axis=1).astype(np.float32)
    args = (stream, stream.accounts, isv0, boot, slot_idx, values, np.zeros(0, np.int32), L, [0, 7, 132])
    want_acc, want_snaps = fast_gpu.sweep_values(args[0], stats, *args[1:])
    got_acc, got_snaps = fast_gpu.sweep_values(args[0], iter(_pieces(stats, cuts)), *args[1:])
    assert np.array_equal(got_acc.view(np.int64), want_acc.view(np.int64))
    for k in (0, 7, 132):
        assert np.array_equal(_bits(got_snaps[k]), _bits(want_snaps[k]))
    assert len(np.unique(want_acc, axis=0)) > 1  # the scenarios really differ
    # pieces out of order, overlapping or short of T are refused, naming them
    for bad in (_pieces(stats, [5])[::-1], _pieces(stats, [5])[:1]):
        with pytest.raises(ValidationError, match="piece|pieces cover"):
            fast_gpu.sweep_values(args[0], iter(bad), *args[1:])


@pytest.mark.gpu
def test_staged_phase1_of_a_range_of_steps_is_that_range_of_the_whole():
    from regime_dash.engine import fast, staged_phase1

    stream = random_stream(np.random.default_rng(13), T_STEPS, 37)
    want = fast.step_stats(stream)
    pinned = staged_phase1.pinned(stream)
    for s in (stream, pinned):
        for a, z in ((0, 1), (1, 32), (31, 1531), (T_STEPS - 1, T_STEPS)):
            got = staged_phase1.step_stats(s, steps=(a, z), chunk_bytes=7 * 37 * 4)
            assert np.array_equal(_bits(got.sums), _bits(want.sums[a:z]))
            assert np.array_equal(got.flat, want.flat[a:z])
    for bad in ((5, 5), (-1, 3), (0, T_STEPS + 1), (3,), [0, 3], (0.0, 3)):
        with pytest.raises(ValidationError, match="phase 1 steps"):
            staged_phase1.step_stats(stream, steps=bad)
