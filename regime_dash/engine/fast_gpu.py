"""The GPU half of the fast engine: a two-phase replay, and sweeps over many scenarios.

Phase 1 (``kernels/replay_step_stats.cu``) reduces every step's [b] batch in
parallel, one 256-thread block per step, to the flat count and Σr, Σr², max|r|,
with common.cuh's reduction in rl_popart_normalize's order. Phase 2
(``kernels/replay_scan.cu``) runs the scalar state machine over the shared
phase-1 stats with the same float operations as regime_step.cuh's functions
(which the per-step kernels call), with the ISV held in registers (the slot and
snapshot lists are compiled in from the registry, so ``run`` accepts only the
layout's own ``snapshot_indices``). For a single replay the scan
(``replay_scan_warp``: one warp per scenario) splits the step into its
recurrences, which lane 0 runs, and everything that hangs off them, which the
32 lanes evaluate for 32 steps at once; it writes the [T, n] snapshot and each
step's PopArt (μ, σ) pairs, and ``replay_normalize.cu`` then applies Pass 3
(and rl_popart_v_correct) to all steps at once. For a sweep
(``kernels/replay_sweep.cu``: one thread per scenario, one launch for all S) each
block loads every batch of step inputs once into shared memory, the threads keep
only the slots the chain touches in registers (:func:`chain_slots`) and fold each
step's snapshot row into register accumulators (the twin of
:func:`regime_dash.engine.summary.accumulate`), so S scenarios × T steps never
materialize trajectories, except the scenarios named in ``keep``.
:func:`sweep_values` builds the S initial rows on the device from each config's
slot values and takes phase 1 from the caller, so a sweep shard needs neither
[S, n_isv] host arrays nor the [T, b] batch; its two halves (:func:`prepare_sweep`,
which needs no phase 1, and :func:`run_prepared`) let a shard build its rows while
phase 1 is still running elsewhere.

CuPy is imported only inside functions.
"""
from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from regime_dash.engine import loader, summary
from regime_dash.engine.controllers import path_options
from regime_dash.engine.cuda import check_inputs
from regime_dash.engine.step_stats import StepStats
from regime_dash.errors import ValidationError
from regime_dash.core.slots import DEFAULT_LAYOUT, SlotLayout
from regime_dash.core.streams import Stream, check_arrays

FILES: tuple[str, ...] = ("replay_step_stats.cu", "replay_scan.cu", "replay_normalize.cu",
                          "replay_sweep.cu")
#: Threads per block of phase 1: the reference's reduction order assumes 256.
STATS_BLOCK = 256
#: Scenarios per block of the sweep scan (``replay_sweep``'s SWEEP_BLOCK default).
SWEEP_BLOCK = 128
#: Threads per scenario (and per block) of the single-replay scan ``replay_scan_warp``.
SCAN_WARP = 32
NORMALIZE_BLOCK = 256


#: The header whose slot names are the chain's (see :func:`chain_slots`).
_STEP_HEADER = "regime_step.cuh"


def chain_slots(layout: SlotLayout) -> list[int]:
    """The slots the scan's chain touches: every slot ``regime_step.cuh`` names, and the snapshot slots.

    The sweep kernel keeps only these in registers (``-DCHAIN_SLOT_LIST``); the
    header reaches slots only through their ``*_INDEX`` names, so this list is complete.
    """
    from regime_dash.diag import catalogue as diag

    text = (loader.KERNEL_DIR / _STEP_HEADER).read_text(encoding="utf-8")
    names = set(re.findall(r"\b([A-Z][A-Z0-9_]*_INDEX)\b", text)) | set(diag.SNAPSHOT_SLOTS)
    return sorted(layout.index(n) for n in names if n in layout)


def _options(layout: SlotLayout, options: tuple[str, ...]) -> tuple[str, ...]:
    return (*options, "-DCHAIN_SLOT_LIST=" + "".join(f"X({i})" for i in chain_slots(layout)))


def available() -> str | None:
    """None when this engine can run here, else why not."""
    return loader.available()


class DevicePhase1:
    """The per-step inputs on the device and their phase-1 stats (run here, or given)."""

    def __init__(self, cp, mod, stream: Stream, t_steps: int, b: int, stats=None, batch: bool = True):
        i32 = np.int32
        self.t_steps, self.b = t_steps, b
        self.cooldown = cp.asarray(stream.cooldown)
        self.worst = cp.asarray(stream.session_pnl_worst)
        self.kelly_edge = cp.asarray(stream.kelly_analytic)
        self.tau_action = cp.asarray(stream.tau_action)
        self.boundary = cp.asarray(stream.boundary.astype(i32))
        if stats is not None or not batch:  # phase 1 runs elsewhere (``StepStats``): only [T]-sized inputs move
            self.rewards = None
            self.flat_host = None
            if stats is not None:
                self.set_stats(cp, stats)
            return
        self.rewards = cp.asarray(stream.rewards)
        self.flat_host = None
        lots = cp.asarray(stream.lots)
        self.stats = cp.empty((t_steps, 3), np.float32)
        self.flat = cp.empty(t_steps, i32)
        # three float banks + the int bank of the flat count (one partial per warp)
        shared = (STATS_BLOCK * 3 + STATS_BLOCK // 32) * 4
        mod["replay_step_stats"]((t_steps,), (STATS_BLOCK,), (
            self.rewards, lots, i32(b), i32(t_steps), self.stats, self.flat), shared_mem=shared)

    def set_stats(self, cp, stats) -> None:
        """Phase 1's statistics (``StepStats``, run elsewhere) to the device."""
        self.stats = cp.asarray(np.ascontiguousarray(stats.sums, dtype=np.float32))
        self.flat_host = np.ascontiguousarray(stats.flat, dtype=np.int32)  # returned (a copy): no copy back
        self.flat = cp.asarray(self.flat_host)

    def inputs(self) -> tuple:
        """The scan kernels' per-step arguments, in their order."""
        return (self.stats, self.flat, self.cooldown, self.worst, self.kelly_edge, self.tau_action,
                self.boundary)


def module(layout: SlotLayout, options: tuple[str, ...] = loader.PARITY_OPTIONS) -> loader.Module:
    """This engine's kernels compiled for ``layout`` (the sweep's chain slots compiled in)."""
    return loader.load_module(FILES, layout, _options(layout, options))


def _reset_args(cp, layout: SlotLayout) -> tuple:
    r_idx, r_code, r_src = layout.reset_plan()
    return cp.asarray(r_idx), cp.asarray(r_code), cp.asarray(r_src), np.int32(len(r_idx))


def _scan(cp, mod, p1: DevicePhase1, layout: SlotLayout, snap_idx: np.ndarray, isv_rows, boot_rows,
          keep_slot: np.ndarray, n_keep: int, norm_params=None, steps: tuple[int, int] | None = None,
          snap_out=None):
    """The single-replay scan ``replay_scan_warp`` over ``isv_rows`` (device [S, n_isv], updated in place).

    Returns the [n_keep, T, n_snap] snapshots of the scenarios with ``keep_slot[s] >= 0``
    (and fills ``norm_params`` [T, 4] from scenario 0).
    The snapshot columns are compiled in (``SNAP_SLOT_LIST``), so ``snap_idx`` must be
    the layout's diag snapshot slots.
    ``steps`` ``(t0, t1)`` launches those steps alone, into rows ``t0..t1`` of ``snap_out`` (and of
    ``norm_params``): the state a launch leaves between steps is the ISV row (lane 0 writes it back,
    the next launch reads it), so launches over consecutive pieces give the bits of one launch.
    """
    _check_snapshot_slots(layout, snap_idx)
    i32 = np.int32
    n_scen = int(isv_rows.shape[0])
    t0, t1 = steps if steps is not None else (0, p1.t_steps)
    if steps is not None and n_keep != 1:  # the kernel finds scenario k's rows k·(t1 − t0) rows apart
        raise ValidationError(f"a scan over steps {t0}..{t1} keeps one snapshot, not {n_keep}",
                              field="n_keep", value=n_keep)
    if snap_out is None:
        snap_out = cp.empty((max(n_keep, 1), p1.t_steps, len(snap_idx)), np.float32)
    norm_d = norm_params[t0:t1] if norm_params is not None else cp.zeros(1, np.float32)
    inputs = [a[t0:t1] for a in p1.inputs()]  # views: the pointers offset to the piece
    mod["replay_scan_warp"]((n_scen,), (SCAN_WARP,), (
        isv_rows, boot_rows, i32(n_scen), i32(t1 - t0), i32(p1.b), *_reset_args(cp, layout),
        *inputs, cp.asarray(keep_slot), snap_out[:, t0:t1], norm_d, i32(norm_params is not None)))
    return snap_out


#: Steps a launch of the single replay's scan covers when its snapshot goes to the host (a multiple
#: of the scan's SCAN_WARP-step batch): each piece's rows are copied back while the next piece runs.
SCAN_PIECE = 1 << 17


def _scan_to_host(cp, mod, p1: DevicePhase1, layout: SlotLayout, snap_idx: np.ndarray, isv_rows, boot_rows,
                  norm_params) -> np.ndarray:
    """Scenario 0's scan in launches of ``piece`` steps on the current stream, its snapshot copied to
    the host as float32 [T, n] column-major piece by piece on a second stream, so the copy back (tens
    of milliseconds at a million steps) runs beside the scan (one warp) instead of after it."""
    piece = SCAN_PIECE
    if piece <= 0 or piece % SCAN_WARP:
        raise ValidationError(f"scan piece {piece} is not a positive multiple of {SCAN_WARP} steps",
                              field="piece", value=piece)
    t_steps, n_snap = p1.t_steps, len(snap_idx)
    snap = cp.empty((1, t_steps, n_snap), np.float32)
    pieces = []
    for t0 in range(0, t_steps, piece):
        t1 = min(t0 + piece, t_steps)
        _scan(cp, mod, p1, layout, snap_idx, isv_rows, boot_rows, np.zeros(1, np.int32), 1,
              norm_params=norm_params, steps=(t0, t1), snap_out=snap)
        pieces.append((t0, t1, cp.cuda.get_current_stream().record()))
    host = np.empty((t_steps, n_snap), np.float32, order="F")
    copier = cp.cuda.Stream(non_blocking=True)
    with copier:
        for t0, t1, launched in pieces:
            copier.wait_event(launched)
            cols = cp.ascontiguousarray(snap[0, t0:t1].T)  # [n, piece]: each column's run contiguous
            for j in range(n_snap):  # into a pageable array: each copy returns once it is done
                cols[j].get(stream=copier, out=host[t0:t1, j])
    copier.synchronize()
    return host


def _sweep(cp, mod, p1: DevicePhase1, layout: SlotLayout, rows, boots, keep: Sequence[int]):
    """``replay_sweep`` over device rows [S, n_isv] (updated in place): (acc [S, N+1] host, {k: snapshot})."""
    acc, snap_out = launch_sweep(cp, mod, p1, layout, rows, boots, keep)
    return cp.asnumpy(acc), {k: cp.asnumpy(snap_out[i]) for i, k in enumerate(keep)}


def launch_sweep(cp, mod, p1: DevicePhase1, layout: SlotLayout, rows, boots, keep: Sequence[int]):
    """Launch ``replay_sweep`` over every step (no sync); the device ``(acc [S, N+1], snapshots [K, T, n])``."""
    launch = _SweepLaunch(cp, mod, p1, layout, rows, boots, keep)
    launch.steps(0, p1.t_steps)
    return launch.acc, launch.snap_out


class _SweepLaunch:
    """``replay_sweep`` over ``rows`` (updated in place), launched over consecutive pieces of steps.

    :meth:`steps` launches steps ``t0..t1`` (no sync), each launch carrying on from
    the rows and accumulators the last one left: the same bits as one launch over
    all of them (``replay_sweep.cu``).
    """

    def __init__(self, cp, mod, p1: DevicePhase1, layout: SlotLayout, rows, boots, keep: Sequence[int]):
        from regime_dash.engine.start import snapshot_indices

        self.cp, self.mod, self.p1, self.rows, self.boots = cp, mod, p1, rows, boots
        self.n_scen = int(rows.shape[0])
        keep_slot = np.full(self.n_scen, -1, np.int32)
        keep_slot[list(keep)] = np.arange(len(keep), dtype=np.int32)
        self.keep_slot = cp.asarray(keep_slot)
        self.snap_out = cp.empty((max(len(keep), 1), p1.t_steps, len(snapshot_indices(layout))), np.float32)
        init = np.empty(summary.N_METRICS + 1, np.float64)
        summary.init(init)
        self.init = cp.asarray(init)
        self.acc = cp.empty((self.n_scen, summary.N_METRICS + 1), np.float64)
        self.reset = _reset_args(cp, layout)
        self.done = 0  # steps launched so far

    def check(self, t0: int, t1: int, what: str = "sweep step range") -> None:
        """Raise unless steps ``t0..t1`` follow the ones launched so far (and are some)."""
        if t0 != self.done or not t0 < t1 <= self.p1.t_steps:
            raise ValidationError(f"{what} {t0}..{t1} does not follow the {self.done} steps launched "
                                  f"(of {self.p1.t_steps})", field="steps", value=(t0, t1))

    def steps(self, t0: int, t1: int) -> None:
        """Launch steps ``t0..t1`` (``t0`` is where the last launch stopped)."""
        self.check(t0, t1)
        i32 = np.int32
        first = t0 == 0  # from summary.init's row, else from each scenario's own accumulators
        acc_in, stride = (self.init, 0) if first else (self.acc, summary.N_METRICS + 1)
        grid = ((self.n_scen + SWEEP_BLOCK - 1) // SWEEP_BLOCK,)
        inputs = [a[t0:t1] for a in self.p1.inputs()]  # views: the pointers offset to the piece
        self.mod["replay_sweep"](grid, (SWEEP_BLOCK,), (
            self.rows, self.boots, i32(self.n_scen), i32(t1 - t0), i32(self.p1.b), *self.reset, *inputs,
            self.keep_slot, self.snap_out, acc_in, i32(stride), self.acc, i32(t0), i32(self.p1.t_steps)))
        self.done = t1


def device_rows(cp, isv0: np.ndarray, boot: np.ndarray, slot_idx: np.ndarray, values: np.ndarray,
                override_idx: np.ndarray):
    """(rows, boots) device [S, n_isv]: ``sweep.initial_rows`` built on the device (see :func:`sweep_values`)."""
    n_scen = values.shape[0]
    boots = cp.empty((n_scen, boot.shape[0]), np.float32)
    boots[...] = cp.asarray(boot)[None, :]
    boots[:, cp.asarray(slot_idx)] = cp.asarray(values)
    rows = boots.copy()
    if len(override_idx):
        rows[:, cp.asarray(override_idx)] = cp.asarray(isv0[override_idx])[None, :]
    return rows, boots


def _check_snapshot_slots(layout: SlotLayout, snap_idx: np.ndarray) -> None:
    from regime_dash.engine.start import snapshot_indices

    want = snapshot_indices(layout)
    if not np.array_equal(snap_idx, want):
        raise ValidationError(
            f"the fast GPU engine compiles the layout's diag snapshot slots in; snap_idx "
            f"{snap_idx.tolist()} is not snapshot_indices(layout) {want.tolist()}",
            field="snap_idx", value=snap_idx.tolist())


def run(stream: Stream, isv0: np.ndarray, boot: np.ndarray, layout: SlotLayout,
        snap_idx: np.ndarray, *, options: tuple[str, ...] = loader.PARITY_OPTIONS,
        controllers: str = "single", stats=None, normalized: bool = True):
    """Replay ``stream`` in two phases on the GPU (the backend contract).

    ``controllers`` is the risk-stack path the scan is compiled for (``"fused"``:
    rl_fused_controllers, :data:`regime_dash.engine.controllers.FUSED_DEFINE`).
    ``stats`` is phase 1 of ``stream`` (``StepStats``, the same bits as this engine's phase 1)
    when the caller keeps it between replays: only the [T]-sized inputs then go to the device,
    not the [T, b] rewards and lots. ``normalized=False`` leaves out Pass 3 (the normalized
    rewards and ``v_pred`` come back None), as the CPU path does; given ``stats`` and with
    ``normalized=False``, ``stream`` may be a :class:`~regime_dash.core.streams.StepStream`.

    The snapshot comes back column-major (each slot's [T] column contiguous, as the CPU fast
    scan writes it), so the frame takes its columns without a transpose on the host.

    Returns
    -------
    (snap float32 [T, n], flat int32 [T], rewards_normalized float32 [T, b],
    v_pred_corrected float32 [T, b] or None, isv_final float32 [n_isv])
    """
    # a StepStream (per-step fields only) passes where nothing reads the [T, b] arrays
    t_steps, b = check_inputs(stream, isv0, boot, layout, snap_idx, per_step=stats is not None and not normalized)
    _check_snapshot_slots(layout, snap_idx)
    options = path_options(controllers, options)
    cp = loader.cupy_module()
    mod = module(layout, options)
    with cp.cuda.Stream(non_blocking=True) as s:
        p1 = DevicePhase1(cp, mod, stream, t_steps, b, stats=stats)
        isv_rows = cp.asarray(isv0)[None, :].copy()
        boot_rows = cp.asarray(boot)[None, :].copy()
        norm_params = cp.empty((t_steps, 4), np.float32)
        snap = _scan_to_host(cp, mod, p1, layout, snap_idx, isv_rows, boot_rows, norm_params)
        flat = p1.flat_host.copy() if p1.flat_host is not None else cp.asnumpy(p1.flat)
        if not normalized:
            out = (snap, flat, None, None, cp.asnumpy(isv_rows[0]))
            s.synchronize()
            return out
        if p1.rewards is None:  # phase 1 was given: Pass 3 still needs the raw rewards
            p1.rewards = cp.asarray(stream.rewards)
        has_v = stream.v_pred is not None
        v_pred = cp.asarray(stream.v_pred) if has_v else cp.zeros(1, np.float32)
        total = t_steps * b
        grid = (min((total + NORMALIZE_BLOCK - 1) // NORMALIZE_BLOCK, 65535),)
        # phase 1 has read the raw rewards; Pass 3 now normalizes them in place
        mod["replay_normalize"](grid, (NORMALIZE_BLOCK,), (
            p1.rewards, v_pred, np.int32(has_v), norm_params, np.int32(t_steps), np.int32(b)))
        out = (snap, flat, cp.asnumpy(p1.rewards), cp.asnumpy(v_pred) if has_v else None,
               cp.asnumpy(isv_rows[0]))
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
    from regime_dash.engine.start import snapshot_indices

    snap_idx = snapshot_indices(layout)
    n_isv = layout.size
    n_scen = _check_rows("isv0s", isv0s, n_isv)
    if _check_rows("boot_rows", boot_rows, n_isv) != n_scen:
        raise ValidationError(f"boot_rows has {boot_rows.shape[0]} rows, isv0s has {n_scen}",
                              field="boot_rows", value=boot_rows.shape)
    t_steps, b = check_inputs(stream, np.ascontiguousarray(isv0s[0]),
                              np.ascontiguousarray(boot_rows[0]), layout, snap_idx)
    keep = _check_keep(keep, n_scen)
    cp = loader.cupy_module()
    mod = module(layout, options)
    with cp.cuda.Stream(non_blocking=True) as s:
        p1 = DevicePhase1(cp, mod, stream, t_steps, b)
        rows = cp.asarray(np.ascontiguousarray(isv0s))
        boots = cp.asarray(np.ascontiguousarray(boot_rows))
        out = _sweep(cp, mod, p1, layout, rows, boots, keep)
        s.synchronize()
    return out


def step_stats(stream: Stream, *, options: tuple[str, ...] = loader.PARITY_OPTIONS):
    """Phase 1 on the GPU: ``StepStats`` (Σr, Σr², max|r| and the flat count of each step).

    Bit-identical to ``fast.step_stats`` on the CPU (both reduce in common.cuh's order).
    """

    t_steps, b = check_arrays(stream)
    cp = loader.cupy_module()
    mod = module(DEFAULT_LAYOUT, options)  # phase 1 reads no slot: any layout's module has it
    with cp.cuda.Stream(non_blocking=True) as s:
        p1 = DevicePhase1(cp, mod, stream, t_steps, b)
        out = StepStats(cp.asnumpy(p1.stats), cp.asnumpy(p1.flat))
        s.synchronize()
    return out


def sweep_values(scalars: Stream, stats, accounts: int, isv0: np.ndarray, boot: np.ndarray,
                 slot_idx: np.ndarray, values: np.ndarray, override_idx: np.ndarray,
                 layout: SlotLayout, keep: Sequence[int] = (),
                 *, options: tuple[str, ...] = loader.PARITY_OPTIONS, packed: bool = False
                 ) -> tuple[np.ndarray | list[np.ndarray], dict[int, np.ndarray]]:
    """A sweep from phase 1 and per-config slot values: the rows are built on the device.

    Scenario s's re-bootstrap row is ``boot`` with ``values[s]`` written to slots
    ``slot_idx``; it starts from that row with slots ``override_idx`` (the
    caller's ``isv`` overrides) set to ``isv0``'s values: ``sweep.initial_rows``,
    without [S, n_isv] host arrays. One launch covers all S scenarios.

    Parameters
    ----------
    scalars
        A stream whose per-step fields are used (its [T, b] batch is not read): a
        :class:`~regime_dash.core.streams.StepStream`, or a Stream.
    stats
        ``StepStats`` of the real stream (phase 1).
    accounts
        b of the real stream.
    isv0, boot
        float32 [n_isv]: the base config's initial and bootstrap rows.
    slot_idx, values
        int32 [K] slots and float32 [S, K] their values per scenario.
    override_idx
        int32 slots taken from ``isv0`` after the values (may be empty).
    layout, keep
        As for :func:`sweep_summaries`.
    packed
        Return the table's metric columns instead of the raw accumulators: finalized
        and packed on the device (:mod:`~regime_dash.engine.metric_pack`), and
        brought back in one copy of a fraction of the bytes.

    Returns
    -------
    As :func:`sweep_summaries`; with ``packed``, the accumulators are replaced by
    ``metric_pack.pack(finalize(acc, T))``: one array per metric (one value, or
    int8 / int16 / int32 / float32 / float64), holding exactly the float64 values.
    """
    prepared = prepare_sweep(scalars, accounts, isv0, boot, slot_idx, values, override_idx, layout, keep,
                             options=options)
    return run_prepared(prepared, stats, packed=packed)


class PreparedSweep:
    """A sweep's device work that needs no phase 1: the per-step inputs and the initial rows on the device.

    Made by :func:`prepare_sweep` (while phase 1 may still run elsewhere), run once
    by :func:`run_prepared`.
    """

    def __init__(self, cp, mod, stream, p1: DevicePhase1, rows, boots, layout: SlotLayout, keep: list[int]):
        self.cp, self.mod, self.stream, self.p1 = cp, mod, stream, p1
        self.rows, self.boots, self.layout, self.keep = rows, boots, layout, keep


def prepare_sweep(scalars: Stream, accounts: int, isv0: np.ndarray, boot: np.ndarray, slot_idx: np.ndarray,
                  values: np.ndarray, override_idx: np.ndarray, layout: SlotLayout, keep: Sequence[int] = (),
                  *, options: tuple[str, ...] = loader.PARITY_OPTIONS) -> PreparedSweep:
    """The first half of :func:`sweep_values` (same arguments, no phase 1): inputs up, rows built, on a stream."""
    n_isv = layout.size
    values = np.ascontiguousarray(values, dtype=np.float32)
    slot_idx = np.ascontiguousarray(slot_idx, dtype=np.int32)
    if values.ndim != 2 or values.shape[1] != slot_idx.shape[0] or values.shape[0] == 0:
        raise ValidationError(f"values must be float32 [S >= 1, {slot_idx.shape[0]}], got {values.shape}",
                              field="values", value=values.shape)
    n_scen = values.shape[0]
    keep = _check_keep(keep, n_scen)
    for name, arr in (("isv0", isv0), ("boot", boot)):
        if not isinstance(arr, np.ndarray) or arr.dtype != np.float32 or arr.shape != (n_isv,):
            raise ValidationError(f"{name} must be float32 [{n_isv}], got {getattr(arr, 'shape', arr)}",
                                  field=name, value=getattr(arr, "shape", None))
    overrides = np.ascontiguousarray(override_idx, dtype=np.int32)
    cp = loader.cupy_module()
    mod = module(layout, options)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        p1 = DevicePhase1(cp, mod, scalars, scalars.steps, int(accounts), stats=None, batch=False)
        rows, boots = device_rows(cp, isv0, boot, slot_idx, values, overrides)
    return PreparedSweep(cp, mod, stream, p1, rows, boots, layout, keep)


def run_prepared(prepared: PreparedSweep, stats, *, packed: bool = False
                 ) -> tuple[np.ndarray | list[np.ndarray], dict[int, np.ndarray]]:
    """The second half of :func:`sweep_values`: phase 1's ``stats`` up, the launch, the results back.

    ``stats`` is phase 1 of every step (``StepStats``), or an iterable of
    ``(t0, t1, StepStats of steps t0..t1)`` pieces, in step order and covering every
    step: each piece goes up and its steps are launched as it comes, so the scan of
    one piece runs while the next is still being computed (or sent). The same bits
    either way.
    """
    cp, mod, p1, layout, keep = prepared.cp, prepared.mod, prepared.p1, prepared.layout, prepared.keep
    rows, boots = prepared.rows, prepared.boots
    prepared.rows = prepared.boots = None  # run once: the rows are updated in place

    if isinstance(stats, StepStats):  # every step: one piece
        stats = [(0, p1.t_steps, stats)]
    with prepared.stream as s:
        launch = _SweepLaunch(cp, mod, p1, layout, rows, boots, keep)
        _launch_pieces(cp, p1, launch, stats, s)
        del rows, boots  # [S, n_isv] each: back to the pool once the launches are done
        launch.rows = launch.boots = None
        if packed:
            from regime_dash.engine import metric_pack

            acc = metric_pack.device_to_host(cp, metric_pack.pack(cp, metric_pack.finalize(cp, launch.acc,
                                                                                          p1.t_steps)))
        else:
            acc = cp.asnumpy(launch.acc)
        snaps = {k: cp.asnumpy(launch.snap_out[i]) for i, k in enumerate(keep)}
        s.synchronize()
    return acc, snaps


def _launch_pieces(cp, p1: DevicePhase1, launch: _SweepLaunch, pieces, scan_stream) -> None:
    """Each phase-1 piece up on a stream of its own, and its steps launched after it on ``scan_stream``.

    The upload has its own stream because a copy from pageable memory first waits
    for everything queued before it on its stream: on the scan's, for the last
    piece's scan.
    """
    p1.stats = cp.empty((p1.t_steps, 3), np.float32)
    p1.flat = cp.empty(p1.t_steps, np.int32)
    upload = cp.cuda.Stream(non_blocking=True)
    for t0, t1, piece in pieces:
        launch.check(t0, t1, "phase 1 piece")
        if piece.sums.shape != (t1 - t0, 3) or piece.flat.shape != (t1 - t0,):
            raise ValidationError(f"phase 1 piece {t0}..{t1} holds sums {piece.sums.shape} and flat "
                                  f"{piece.flat.shape}, not {t1 - t0} steps", field="stats", value=(t0, t1))
        p1.stats[t0:t1].set(np.ascontiguousarray(piece.sums, dtype=np.float32), upload)
        p1.flat[t0:t1].set(np.ascontiguousarray(piece.flat, dtype=np.int32), upload)
        landed = cp.cuda.Event(disable_timing=True)
        landed.record(upload)
        scan_stream.wait_event(landed)
        launch.steps(t0, t1)
    if launch.done != p1.t_steps:
        raise ValidationError(f"phase 1's pieces cover {launch.done} of {p1.t_steps} steps", field="stats",
                              value=launch.done)


def _check_keep(keep: Sequence[int], n_scen: int) -> list[int]:
    keep = [int(k) for k in keep]
    for k in keep:
        if not 0 <= k < n_scen:
            raise ValidationError(f"keep holds scenario {k}, outside [0, {n_scen})",
                                  field="keep", value=k)
    if len(set(keep)) != len(keep):
        raise ValidationError(f"keep names a scenario twice: {keep}", field="keep", value=keep)
    return keep
