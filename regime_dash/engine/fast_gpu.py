"""The GPU half of the fast engine: a two-phase replay, and sweeps over many scenarios.

Phase 1 (``kernels/replay_step_stats.cu``) reduces every step's [b] batch in
parallel, one 256-thread block per step, to the flat count and Σr, Σr², max|r|,
with common.cuh's reduction in rl_popart_normalize's order. Phase 2
(``kernels/replay_scan.cu``) runs the scalar state machine, the chain of each
scenario in one thread, calling the same regime_step.cuh functions as the
per-step kernels over the shared phase-1 stats, with the ISV held in registers
(the slot and snapshot lists are compiled in from the registry, so ``run``
accepts only the layout's own ``snapshot_indices``). For a single replay the
scan (``replay_scan_warp``: one warp per scenario, whose other lanes only move
inputs in and snapshot rows out through shared memory) writes the [T, n]
snapshot and each step's PopArt (μ, σ) pairs, and ``replay_normalize.cu`` then
applies Pass 3 (and rl_popart_v_correct) to all steps at once. For a sweep the
scan (``replay_scan``: one thread per scenario) folds each step's snapshot row into float64 accumulators (the twin of
:func:`regime_dash.engine.summary.accumulate`), so S scenarios × T steps never
materialize trajectories, except the scenarios named in ``keep``.

CuPy is imported only inside functions.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from regime_dash.engine import loader, summary
from regime_dash.engine.cuda import check_inputs
from regime_dash.errors import ValidationError
from regime_dash.slots import SlotLayout
from regime_dash.streams import Stream

FILES: tuple[str, ...] = ("replay_step_stats.cu", "replay_scan.cu", "replay_normalize.cu")
#: Threads per block of phase 1: the reference's reduction order assumes 256.
STATS_BLOCK = 256
#: Scenarios per block of the sweep scan: small blocks spread few scenarios over many SMs.
SCAN_BLOCK = 64
#: Threads per scenario (and per block) of the single-replay scan ``replay_scan_warp``.
SCAN_WARP = 32
NORMALIZE_BLOCK = 256


def available() -> str | None:
    """None when this engine can run here, else why not."""
    return loader.available()


class _Phase1:
    """The stream on the device and its per-step stats (phase 1)."""

    def __init__(self, cp, mod, stream: Stream, t_steps: int, b: int):
        i32 = np.int32
        self.t_steps, self.b = t_steps, b
        self.rewards = cp.asarray(stream.rewards)
        lots = cp.asarray(stream.lots)
        self.cooldown = cp.asarray(stream.cooldown)
        self.worst = cp.asarray(stream.session_pnl_worst)
        self.kelly_edge = cp.asarray(stream.kelly_analytic)
        self.tau_action = cp.asarray(stream.tau_action)
        self.boundary = cp.asarray(stream.boundary.astype(i32))
        self.stats = cp.empty((t_steps, 3), np.float32)
        self.flat = cp.empty(t_steps, i32)
        # three float banks + the int bank of the flat count (one partial per warp)
        shared = (STATS_BLOCK * 3 + STATS_BLOCK // 32) * 4
        mod["replay_step_stats"]((t_steps,), (STATS_BLOCK,), (
            self.rewards, lots, i32(b), i32(t_steps), self.stats, self.flat), shared_mem=shared)


def _scan(cp, mod, p1: _Phase1, layout: SlotLayout, snap_idx: np.ndarray, isv_rows, boot_rows,
          keep_slot: np.ndarray, n_keep: int, acc=None, norm_params=None):
    """Launch phase 2 over ``isv_rows`` (device [S, n_isv], updated in place); return the snapshots.

    The snapshot columns are compiled in (``SNAP_SLOT_LIST``: the layout's diag
    snapshot slots), so the scan keeps the ISV in registers; ``snap_idx`` must
    be those slots. Without ``acc`` (a replay: snapshots and norm params only)
    the warp-per-scenario kernel runs; with it, the thread-per-scenario one.
    """
    _check_snapshot_slots(layout, snap_idx)
    i32 = np.int32
    n_scen = int(isv_rows.shape[0])
    r_idx, r_code, r_src = layout.reset_plan()
    n_snap = len(snap_idx)
    snap_out = cp.empty((max(n_keep, 1), p1.t_steps, n_snap), np.float32)
    norm_d = norm_params if norm_params is not None else cp.zeros(1, np.float32)
    common = (isv_rows, boot_rows, i32(n_scen), i32(p1.t_steps), i32(p1.b),
              cp.asarray(r_idx), cp.asarray(r_code), cp.asarray(r_src), i32(len(r_idx)),
              p1.stats, p1.flat, p1.cooldown, p1.worst, p1.kelly_edge, p1.tau_action, p1.boundary,
              cp.asarray(keep_slot), snap_out)
    if acc is None:
        mod["replay_scan_warp"]((n_scen,), (SCAN_WARP,), (
            *common, norm_d, i32(norm_params is not None)))
    else:
        grid = ((n_scen + SCAN_BLOCK - 1) // SCAN_BLOCK,)
        mod["replay_scan"](grid, (SCAN_BLOCK,), (
            *common, acc, i32(1), norm_d, i32(norm_params is not None)))
    return snap_out


def _check_snapshot_slots(layout: SlotLayout, snap_idx: np.ndarray) -> None:
    from regime_dash.engine import snapshot_indices

    want = snapshot_indices(layout)
    if not np.array_equal(snap_idx, want):
        raise ValidationError(
            f"the fast GPU engine compiles the layout's diag snapshot slots in; snap_idx "
            f"{snap_idx.tolist()} is not snapshot_indices(layout) {want.tolist()}",
            field="snap_idx", value=snap_idx.tolist())


def run(stream: Stream, isv0: np.ndarray, boot: np.ndarray, layout: SlotLayout,
        snap_idx: np.ndarray, *, options: tuple[str, ...] = loader.PARITY_OPTIONS):
    """Replay ``stream`` in two phases on the GPU (the backend contract).

    Returns
    -------
    (snap float32 [T, n], flat int32 [T], rewards_normalized float32 [T, b],
    v_pred_corrected float32 [T, b] or None, isv_final float32 [n_isv])
    """
    t_steps, b = check_inputs(stream, isv0, boot, layout, snap_idx)
    _check_snapshot_slots(layout, snap_idx)
    cp = loader.cupy_module()
    mod = loader.load_module(FILES, layout, options)
    with cp.cuda.Stream(non_blocking=True) as s:
        p1 = _Phase1(cp, mod, stream, t_steps, b)
        isv_rows = cp.asarray(isv0)[None, :].copy()
        boot_rows = cp.asarray(boot)[None, :].copy()
        norm_params = cp.empty((t_steps, 4), np.float32)
        snap = _scan(cp, mod, p1, layout, snap_idx, isv_rows, boot_rows, np.zeros(1, np.int32),
                     1, norm_params=norm_params)
        has_v = stream.v_pred is not None
        v_pred = cp.asarray(stream.v_pred) if has_v else cp.zeros(1, np.float32)
        total = t_steps * b
        grid = (min((total + NORMALIZE_BLOCK - 1) // NORMALIZE_BLOCK, 65535),)
        # phase 1 has read the raw rewards; Pass 3 now normalizes them in place
        mod["replay_normalize"](grid, (NORMALIZE_BLOCK,), (
            p1.rewards, v_pred, np.int32(has_v), norm_params, np.int32(t_steps), np.int32(b)))
        out = (cp.asnumpy(snap[0]), cp.asnumpy(p1.flat), cp.asnumpy(p1.rewards),
               cp.asnumpy(v_pred) if has_v else None, cp.asnumpy(isv_rows[0]))
        s.synchronize()
    return out


def _check_rows(name: str, rows, n_isv: int) -> int:
    if (not isinstance(rows, np.ndarray) or rows.dtype != np.float32 or rows.ndim != 2
            or rows.shape[1] != n_isv or rows.shape[0] == 0):
        raise ValidationError(
            f"{name} must be float32 [S >= 1, {n_isv}] (the layout's ISV size), got "
            f"{getattr(rows, 'dtype', type(rows).__name__)} {getattr(rows, 'shape', '')}",
            field=name, value=getattr(rows, "shape", None))
    return int(rows.shape[0])


def sweep_summaries(stream: Stream, isv0s: np.ndarray, boot_rows: np.ndarray,
                    layout: SlotLayout, keep: Sequence[int] = (), *,
                    options: tuple[str, ...] = loader.PARITY_OPTIONS
                    ) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """Replay ``stream`` under S scenarios at once; summary accumulators per scenario.

    Phase 1 runs once for all scenarios; the scan runs one thread per scenario.

    Parameters
    ----------
    stream
        The shared input.
    isv0s, boot_rows
        float32 [S, n_isv]: each scenario's initial ISV and its re-bootstrap row.
    layout
        Slot layout.
    keep
        Scenario indices whose full snapshot is also returned.

    Returns
    -------
    acc : float64 [S, N_METRICS + 1]
        Raw accumulators of :func:`regime_dash.engine.summary.accumulate`
        (use :func:`~regime_dash.engine.summary.finalize` per row).
    snapshots : dict[int, float32 [T, n]]
        The diag snapshot of each scenario in ``keep``.
    """
    from regime_dash.engine import snapshot_indices

    snap_idx = snapshot_indices(layout)
    n_isv = layout.size
    n_scen = _check_rows("isv0s", isv0s, n_isv)
    if _check_rows("boot_rows", boot_rows, n_isv) != n_scen:
        raise ValidationError(f"boot_rows has {boot_rows.shape[0]} rows, isv0s has {n_scen}",
                              field="boot_rows", value=boot_rows.shape)
    t_steps, b = check_inputs(stream, np.ascontiguousarray(isv0s[0]),
                              np.ascontiguousarray(boot_rows[0]), layout, snap_idx)
    keep = [int(k) for k in keep]
    for k in keep:
        if not 0 <= k < n_scen:
            raise ValidationError(f"keep holds scenario {k}, outside [0, {n_scen})",
                                  field="keep", value=k)
    if len(set(keep)) != len(keep):
        raise ValidationError(f"keep names a scenario twice: {keep}", field="keep", value=keep)
    keep_slot = np.full(n_scen, -1, np.int32)
    keep_slot[keep] = np.arange(len(keep), dtype=np.int32)
    row = np.empty(summary.N_METRICS + 1, np.float64)
    summary.init(row)
    acc0 = np.tile(row, (n_scen, 1))

    cp = loader.cupy_module()
    mod = loader.load_module(FILES, layout, options)
    with cp.cuda.Stream(non_blocking=True) as s:
        p1 = _Phase1(cp, mod, stream, t_steps, b)
        isv_rows = cp.asarray(np.ascontiguousarray(isv0s))
        boot_d = cp.asarray(np.ascontiguousarray(boot_rows))
        acc = cp.asarray(acc0)
        snap = _scan(cp, mod, p1, layout, snap_idx, isv_rows, boot_d, keep_slot, len(keep),
                     acc=acc)
        acc_h = cp.asnumpy(acc)
        snaps = {k: cp.asnumpy(snap[i]) for i, k in enumerate(keep)}
        s.synchronize()
    return acc_h, snaps
