"""Phase 1 of a GPU sweep straight from host memory: chunked, pinned, overlapped.

A sweep needs only phase 1 of its stream (the per-step Σr, Σr², max|r| and flat
count of ``kernels/replay_step_stats.cu``), so the [T, b] rewards and lots go to
the device once, and never come back. ``cupy.asarray`` of pageable memory moves
them in one synchronous copy through the driver's own small staging buffer
(about 6 GB/s measured for the 200 MB of the benchmark stream). Here the batch is
cut into chunks of steps; host threads copy chunks into pinned buffers (NumPy
releases the GIL while it copies), each chunk goes to the device with an
asynchronous copy on its thread's CUDA stream, and phase 1 runs on that chunk
as soon as it has landed (a step's statistics read only that step's row), so the
host copies, the PCIe transfers and the reductions of different chunks overlap.

The statistics are the kernel's, chunk or not: one block per step reduces that
step's row in the same order, so the result is bit-identical to
``fast_gpu.step_stats`` and to the CPU's ``fast.step_stats`` (a GPU test checks it).

The pinned buffers come from CuPy's pinned-memory pool: two chunk buffers per
thread, returned to the pool after the call and reused by the next one, so the
pinned memory held is bounded by ``threads × 2 × chunk`` whatever T is.
"""
from __future__ import annotations

import concurrent.futures
import os
from typing import TYPE_CHECKING

import numpy as np

from regime_dash.streams import Stream, check_arrays

if TYPE_CHECKING:  # the annotation only: step_stats imports the engine modules when it runs
    from regime_dash.engine.fast import StepStats

#: Bytes of rewards (and as many of lots) per chunk: big enough that a copy runs
#: at full PCIe speed, small enough that many chunks overlap.
CHUNK_BYTES = 4 << 20
#: Host threads copying chunks into pinned memory (capped by the cores and the chunks).
MAX_THREADS = 8


def _threads(requested: int | None, chunks: int) -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    want = min(MAX_THREADS, cores) if requested is None else int(requested)
    return max(1, min(want, chunks))


def step_stats(stream: Stream, *, threads: int | None = None, chunk_bytes: int = CHUNK_BYTES) -> StepStats:
    """Phase 1 on the GPU from host arrays, through pinned chunks: ``fast.StepStats``.

    Parameters
    ----------
    stream
        The stream; only its rewards and lots are read.
    threads
        Host threads staging chunks (default: up to :data:`MAX_THREADS`, one per core).
    chunk_bytes
        Bytes of rewards per chunk (a chunk is a whole number of steps, at least one).

    Returns
    -------
    fast.StepStats
        The same bits as ``fast_gpu.step_stats(stream)``.
    """
    from regime_dash.engine import fast_gpu, loader
    from regime_dash.engine.fast import StepStats
    from regime_dash.slots import DEFAULT_LAYOUT

    t_steps, b = check_arrays(stream)
    cp = loader.cupy_module()
    kernel = fast_gpu.module(DEFAULT_LAYOUT)["replay_step_stats"]  # reads no slot: any layout's module
    rewards = np.ascontiguousarray(stream.rewards, dtype=np.float32)
    lots = np.ascontiguousarray(stream.lots, dtype=np.int32)
    rows = max(1, min(t_steps, int(chunk_bytes) // (b * 4)))  # a short stream pins no more than itself
    chunks = [(a, min(t_steps, a + rows)) for a in range(0, t_steps, rows)]
    n_threads = _threads(threads, len(chunks))
    dev_r = cp.empty((t_steps, b), np.float32)
    dev_l = cp.empty((t_steps, b), np.int32)
    stats = cp.empty((t_steps, 3), np.float32)
    flat = cp.empty(t_steps, np.int32)
    # as fast_gpu._Phase1: three float banks and the int bank of the flat count
    shared = (fast_gpu.STATS_BLOCK * 3 + fast_gpu.STATS_BLOCK // 32) * 4
    device = cp.cuda.Device()
    i32 = np.int32

    def stage(k: int) -> None:
        with device, cp.cuda.Stream(non_blocking=True) as s:
            bufs = []
            for _ in range(2):  # double-buffered: fill one while the other's copy is in flight
                mem = cp.cuda.alloc_pinned_memory(2 * rows * b * 4)
                bufs.append((mem, np.frombuffer(mem, np.float32, rows * b).reshape(rows, b),
                             np.frombuffer(mem, np.int32, rows * b, offset=rows * b * 4).reshape(rows, b),
                             None))
            for j, (a, z) in enumerate(chunks[k::n_threads]):
                mem, host_r, host_l, done = bufs[j % 2]
                if done is not None:
                    done.synchronize()  # this buffer's last copy has left it
                n = z - a
                np.copyto(host_r[:n], rewards[a:z])
                np.copyto(host_l[:n], lots[a:z])
                dev_r[a:z].data.copy_from_host_async(host_r.ctypes.data, n * b * 4, s)
                dev_l[a:z].data.copy_from_host_async(host_l.ctypes.data, n * b * 4, s)
                kernel((n,), (fast_gpu.STATS_BLOCK,), (dev_r[a:z], dev_l[a:z], i32(b), i32(n), stats[a:z],
                                                      flat[a:z]), shared_mem=shared)
                bufs[j % 2] = (mem, host_r, host_l, s.record())
            s.synchronize()

    if n_threads == 1:
        stage(0)
    else:
        with concurrent.futures.ThreadPoolExecutor(n_threads) as pool:
            for fut in [pool.submit(stage, k) for k in range(n_threads)]:
                fut.result()
    return StepStats(cp.asnumpy(stats), cp.asnumpy(flat))


__all__ = ["step_stats", "CHUNK_BYTES", "MAX_THREADS"]
