"""The shards of a sweep: a range of its configs run here or on a worker, and phase 1 in pieces.

With the fast engine, phase 1 (the per-step batch sums and flat counts) is computed
once for the whole sweep and each config runs only the scalar scan, folding its
snapshot into a row of accumulators (:func:`fast_shard`), so memory is O(S + T·b),
never O(S·T). On the GPU all of a shard's configs run in one launch; on the CPU in
chunks of :data:`CPU_CHUNK`. On the GPU, phase 1 uploads the [T, b] batch in pinned
chunks, each reduced as it lands (:mod:`regime_dash.engine.staged_phase1`), in pieces
of steps that grow (:func:`phase1_pieces`): the scan of a piece starts as soon as that
piece's phase 1 is done, while phase 1 works on the next. The reference and cuda
engines run one full replay per config (:func:`replay_shard`).

A phase-1 piece reaches a shard as a handle whose ``result()`` waits for
``(t0, t1, StepStats)``: a :class:`concurrent.futures.Future` in-process, or what a
:class:`~regime_dash.engine.sweep.ShardScheduler` hands its workers.
"""
from __future__ import annotations

import concurrent.futures
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from regime_dash.core.config import RegimeConfig
from regime_dash.core.slots import SlotLayout
from regime_dash.core.streams import StepStream, Stream
from regime_dash.diag import catalogue as diag
from regime_dash.engine import metric_pack, summary
from regime_dash.engine.config_grid import Columns, ConfigGrid, SlotPlan
from regime_dash.engine.start import snapshot_indices
from regime_dash.engine.step_stats import StepStats

#: Scenarios per chunk on the CPU: bounds the [chunk, n_isv] initial-state rows
#: (4096 × 716 float32 × 2 ≈ 23 MB) whatever S is.
CPU_CHUNK = 4096

Progress = Callable[[int, int], None]

#: A GPU sweep's first phase-1 piece: this many steps, or T / 64 if more (a stream
#: shorter than two of it is one piece). Small, so the scan starts early; each next
#: piece is :data:`PHASE1_PIECE_GROWTH` times the last, so that phase 1 (and its
#: publishing, on a cluster) of the next piece takes less time than the scan of this one.
PHASE1_FIRST_PIECE = 16_384
PHASE1_PIECE_GROWTH = 3


def phase1_pieces(steps: int) -> list[tuple[int, int]]:
    """The ``(t0, t1)`` pieces a GPU sweep of ``steps`` steps computes phase 1 in, in order.

    The first is :data:`PHASE1_FIRST_PIECE` steps (or ``steps // 64``), each next
    :data:`PHASE1_PIECE_GROWTH` times the last; a remainder shorter than two of the
    next size goes into the last piece.
    """
    out: list[tuple[int, int]] = []
    start, size = 0, max(PHASE1_FIRST_PIECE, steps // 64)
    while start < steps:
        stop = steps if steps - start < 2 * size else start + size
        out.append((start, stop))
        start, size = stop, size * PHASE1_PIECE_GROWTH
    return out


def _chunks(n: int, size: int) -> Iterable[tuple[int, int]]:
    for start in range(0, n, size):
        yield start, min(n, start + size)


def trajectory_frame(snap: np.ndarray, flat: np.ndarray, accounts: int, stream_step: np.ndarray,
                     boundary: np.ndarray, layout: SlotLayout, engine: str, config: Any = None) -> pd.DataFrame:
    """The diag frame of a kept snapshot of a fast sweep, as its single replay has it."""
    frame = diag.frame_from_snapshot(snap, flat, accounts, stream_step, boundary, config)
    frame.attrs["layout_fingerprint"] = layout.fingerprint_hex()
    frame.attrs["engine"] = engine
    return frame


def packed_shard(fn: Callable[..., Any], shard: "Shard", *shared: Any):
    """``fn(shard, *shared)`` on a worker, its metrics packed for the trip back (:func:`metric_pack.pack`;
    a GPU shard's come packed from the device)."""
    metrics, kept, engine = fn(shard, *shared)
    if isinstance(metrics, np.ndarray):
        metrics = metric_pack.pack(np, metrics)
    return metrics, kept, engine


@dataclass
class Shard:
    """One piece of a sweep: configs ``start..stop`` as field columns, and which of them to keep.

    A shard carries its columns (a list's, sliced on the client, or a grid's
    built in-process), or only the grid, whose range it expands where it runs.
    """

    start: int
    stop: int
    keep: list[int]                  # indices within the shard
    table: Columns | None = None     # the configs' field columns, or
    grid: ConfigGrid | None = None   # the grid whose start..stop they are

    def fields(self) -> Columns:
        if self.table is not None:
            return self.table
        return self.grid.columns(self.start, self.stop)

    def plan_columns(self) -> Mapping[str, Any]:
        """What :class:`SlotPlan` needs: the columns, or, for a grid, only its varying axes expanded."""
        if self.table is not None:
            return self.table
        return self.grid.varying_columns(self.start, self.stop)


def gpu_here() -> bool:
    """Whether the fast engine's GPU half can run here (in this process, or on the worker that asks)."""
    from regime_dash.engine import fast_gpu

    return fast_gpu.available() is None


def cuda_device() -> int | None:
    """The calling thread's current CUDA device, if CuPy is in use here (phase 1's thread re-enters it)."""
    cupy = sys.modules.get("cupy")
    if cupy is None or not gpu_here():
        return None
    return int(cupy.cuda.runtime.getDevice())


def phase1_stats(stream: Stream, device: str = "auto", device_id: int | None = None,
                 devices: Sequence[int] | None = None, steps: tuple[int, int] | None = None):
    """Phase 1 for the sweep (of steps ``t0..t1`` if ``steps``), here: on this GPU (``device_id``,
    the caller's), or spread over ``devices``, if there is one and ``device`` is not ``"cpu"``
    (the same bits as the CPU's; the CPU takes every step).

    On the GPU the [T, b] batch goes up in pinned chunks, each reduced as it lands
    (:mod:`regime_dash.engine.staged_phase1`), and only the [T] statistics come back.
    A scan then reads only phase 1 and the per-step fields (:func:`per_step`), so the
    shards get no [T, b] batch, on either device.
    """
    if device != "cpu" and gpu_here():
        import cupy

        from regime_dash.engine import staged_phase1

        with cupy.cuda.Device(device_id):
            return staged_phase1.step_stats(stream, devices=devices, steps=steps)
    from regime_dash.engine import fast

    return fast.step_stats(stream)


def phase1_in_pieces(stream: Stream, device: str, device_id: int | None, devices: Sequence[int] | None,
                     bounds: Sequence[tuple[int, int]], pieces: Sequence[concurrent.futures.Future]) -> None:
    """Phase 1 piece by piece: ``pieces[k]`` gets ``(t0, t1, StepStats)`` of ``bounds[k]`` when it is done.

    After an error every piece not done yet gets it, so that nothing waits for them.
    """
    for k, ((t0, t1), piece) in enumerate(zip(bounds, pieces)):
        try:
            steps = None if (t0, t1) == (0, stream.steps) else (t0, t1)
            piece.set_result((t0, t1, phase1_stats(stream, device, device_id, devices, steps)))
        except BaseException as exc:
            for rest in pieces[k:]:
                rest.set_exception(exc)
            return


class Pieces:
    """A sweep's phase-1 pieces (handles whose ``result()`` gives ``(t0, t1, StepStats)``: futures in-process,
    a scheduler's handles on a worker), each resolved once, in order, when first needed."""

    def __init__(self, handles: Sequence[Any]):
        self.handles, self.got = list(handles), []

    def __iter__(self):
        for k, handle in enumerate(self.handles):
            if k == len(self.got):
                self.got.append(handle.result())
            yield self.got[k]

    def whole(self):
        """Phase 1 of every step (waits for every piece; one piece: itself)."""
        pieces = list(self)
        if len(pieces) == 1:
            return pieces[0][2]
        return StepStats(np.concatenate([p[2].sums for p in pieces]), np.concatenate([p[2].flat for p in pieces]))


def fast_shard(shard: Shard, scalars: StepStream, stats: Any, accounts: int, layout: SlotLayout, isv,
               device: str, chunk_size: int | None, progress: Progress | None = None):
    """Run one shard of a fast sweep: ``(metric columns, {index: snapshot}, engine)``.

    ``scalars`` is the stream's per-step fields (:func:`per_step`), ``stats`` its phase 1 as a list of pieces
    (:func:`phase1_pieces`; in-process futures, on a cluster the handles its scheduler publishes each
    into (:meth:`~regime_dash.engine.sweep.ShardScheduler.later`), each resolving to ``(t0, t1, StepStats)``:
    waited for only once the rows are planned; on the GPU each piece's steps are
    launched as it comes), ``accounts`` its b.
    On the GPU the metric columns come finalized and packed from the device (one
    array per metric, :func:`metric_pack.pack`; in several chunks, float64 [N, n]);
    on the CPU as float64 [N, n].
    """
    from regime_dash.engine import fast

    gpu = fast.use_gpu(device)
    n = shard.stop - shard.start
    plan = SlotPlan.of(shard.plan_columns(), n, isv, layout)
    kept: dict[int, np.ndarray] = {}
    pieces = Pieces(stats)
    if gpu:
        from regime_dash.engine import fast_gpu

        # one launch for the whole shard: the configs' slot values go to the device
        # and the initial rows are built there (chunk_size bounds device memory if given)
        slot_idx = np.array([layout.index(s) for s in plan.slots], np.int32)
        override_idx = np.array([layout.index(name) for name in (isv or {})], np.int32)
        bounds = list(_chunks(n, chunk_size or n))

        def prepare(start: int, stop: int):
            return fast_gpu.prepare_sweep(scalars, accounts, plan.isv0, plan.boot, slot_idx, plan.values[start:stop],
                                          override_idx, layout, [k - start for k in shard.keep if start <= k < stop])

        prepared = prepare(*bounds[0])  # the per-step inputs up and the rows built while phase 1 may still run
        # one chunk (the default): its packed columns as they came; several: filled into one block
        block = np.empty((summary.N_METRICS, n), dtype=np.float64) if len(bounds) > 1 else None
        for i, (start, stop) in enumerate(bounds):
            # the first chunk launches each phase-1 piece as it comes; the next ones find them all here
            cols, snaps = fast_gpu.run_prepared(prepared if i == 0 else prepare(start, stop), iter(pieces),
                                                packed=True)
            if block is not None:
                metric_pack.fill(block, start, stop, cols)
            kept.update({start + k: s for k, s in snaps.items()})
            if progress is not None:
                progress(stop, n)
        return (cols if block is None else block), kept, "fast-gpu"
    stats = pieces.whole()  # in-process, phase 1 may still be running until here
    acc = np.empty((n, summary.N_METRICS + 1), dtype=np.float64)
    snap_idx = snapshot_indices(layout)
    for start, stop in _chunks(n, chunk_size or CPU_CHUNK):
        isv0s, boot_rows = plan.rows(start, stop, isv, layout)
        local = [k - start for k in shard.keep if start <= k < stop]
        a, snaps = fast.sweep_cpu(scalars, isv0s, boot_rows, layout, local, stats=stats, snap_idx=snap_idx)
        acc[start:stop] = a
        kept.update({start + k: s for k, s in snaps.items()})
        if progress is not None:
            progress(stop, n)
    return metric_pack.finalize(np, acc, scalars.steps), kept, "fast-cpu"


def replay_shard(shard: Shard, prepared: Any, progress: Progress | None = None):
    """Run one shard with one full replay per config of ``prepared`` (a
    :class:`~regime_dash.engine.prepared.Prepared` stream on reference or cuda, its replays frame-only):
    ``(metric columns, {index: frame}, engine)``."""
    rows, trajectories = [], {}
    wanted = set(shard.keep)
    columns = shard.fields()
    names = list(columns)
    n = len(columns[names[0]])
    for k, values in enumerate(zip(*(c.tolist() for c in columns.values()))):
        frame = prepared.replay(RegimeConfig(**dict(zip(names, values)))).frame
        row = summary.summarize_frame(frame)
        rows.append([row[m] for m in summary.METRICS])
        if k in wanted:
            trajectories[k] = frame
        if progress is not None:
            progress(k + 1, n)
    return (np.array(rows, dtype=np.float64).reshape(len(rows), summary.N_METRICS).T.copy(), trajectories,
            prepared.engine)


def per_step(stream: Stream | StepStream) -> StepStream:
    """What a fast sweep's shards read of the stream, given phase 1: its per-step fields and b."""
    return stream.per_step() if isinstance(stream, Stream) else stream


__all__ = ["CPU_CHUNK", "PHASE1_FIRST_PIECE", "PHASE1_PIECE_GROWTH", "Pieces", "Progress", "Shard", "cuda_device",
           "fast_shard", "gpu_here", "packed_shard", "per_step", "phase1_in_pieces", "phase1_pieces", "phase1_stats",
           "replay_shard", "trajectory_frame"]
