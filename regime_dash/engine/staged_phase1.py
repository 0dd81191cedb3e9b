"""Phase 1 of a GPU sweep straight from host memory: chunked, pinned, overlapped.

A sweep needs only phase 1 of its stream (the per-step Σr, Σr², max|r| and flat
count of ``kernels/replay_step_stats.cu``), so the [T, b] rewards and lots go to
the device once, and never come back. ``cupy.asarray`` of pageable memory moves
them in one synchronous copy through the driver's own small staging buffer
(about 5 GB/s measured for the 200 MB of the benchmark stream). Here the batch is
cut into chunks of steps; host threads copy chunks into pinned buffers (NumPy
releases the GIL while it copies), each chunk goes to the device with an
asynchronous copy on its thread's CUDA stream, and phase 1 runs on that chunk
as soon as it has landed (a step's statistics read only that step's row), so the
host copies, the PCIe transfers and the reductions of different chunks overlap.
The host's memory bandwidth bounds it (each byte is read, written and read again
by the DMA): about 17 GB/s at T = 25,000 and 27 GB/s at T = 200,000 were measured
on 8 threads, against 54 GB/s for the link, and more threads measured slower.

The statistics are the kernel's, chunk or not: one block per step reduces that
step's row in the same order, so the result is bit-identical to
``fast_gpu.step_stats`` and to the CPU's ``fast.step_stats`` (a GPU test checks it).

With ``devices=[0, 1]`` the steps are split into one contiguous range per device,
each staged by its own threads over its own PCIe link (what a sweep on a cluster
of this host's GPUs does); the statistics are the same bits. Being host-bound,
it measured no faster than one device, but not slower.

The pinned buffers come from CuPy's pinned-memory pool: :data:`BUFFERS` chunk
buffers per thread, returned to the pool after the call and reused by the next
one, so the pinned memory held is bounded by ``threads × BUFFERS × chunk``
whatever T is. A thread waiting for a buffer sleeps instead of spinning
(:data:`BLOCKING_SYNC`; measured 13.4 vs 15.4 ms at T = 25,000).

A stream whose rewards and lots are already page-locked (:func:`pinned`: a
stream swept many times is pinned once) skips the host copy: each chunk goes
straight from the stream's own memory over the link, :data:`DIRECT_THREADS`
streams per device, so phase 1 is bound by the PCIe links, one per device,
rather than by the host's memory bandwidth.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import os
from typing import Sequence

import numpy as np

from regime_dash.engine.step_stats import StepStats
from regime_dash.errors import ValidationError
from regime_dash.core.shards import shard_bounds
from regime_dash.core.streams import Stream, check_arrays


#: Bytes of rewards (and as many of lots) per chunk: big enough that a copy runs
#: at full PCIe speed, small enough that many chunks overlap.
CHUNK_BYTES = 4 << 20
#: Host threads copying chunks into pinned memory, over all devices (capped by the cores and the chunks):
#: more measured slower (the host's memory bandwidth, not the threads, bounds a staged upload).
MAX_THREADS = 8

#: Pinned chunk buffers per thread: one fills while the others' copies are in flight.
BUFFERS = 2
#: Wait for a copy with a blocking sync (the thread sleeps) rather than a spin.
BLOCKING_SYNC = True
#: Threads (each with its CUDA stream) per device when the stream is already pinned:
#: one chunk's copy overlaps the other's reduction; the host does no copying.
DIRECT_THREADS = 2
#: Bytes of rewards per chunk when the stream is already pinned: no staging buffer bounds it,
#: and fewer, larger copies leave the launching threads less to do. Measured on two H200s at
#: T = 800,000, b = 1,024 (2 threads a device): 86 ms with 4 MB chunks, 72–73 ms with 16 MB
#: and 32 MB over two devices; 133 and 128–130 ms on one.
DIRECT_CHUNK_BYTES = 16 << 20


def pinned(stream: Stream) -> Stream:
    """``stream`` with its rewards and lots copied once into page-locked host memory.

    Phase 1 of a sweep (:func:`step_stats`) then reads them straight over the
    PCIe link(s), with no staging copy through host memory: what a user who
    sweeps one stream many times does once. The memory is portable (pinned for
    every device of this host) and is freed with the arrays.

    Raises
    ------
    EngineUnavailable
        No usable CUDA device here (page-locked memory needs the driver).
    """
    from regime_dash.engine import loader

    cp = loader.cupy_module()
    out = {}
    for name, dtype in (("rewards", np.float32), ("lots", np.int32)):
        src = np.ascontiguousarray(getattr(stream, name), dtype=dtype)
        mem = cp.cuda.PinnedMemory(max(src.nbytes, 1), cp.cuda.runtime.hostAllocPortable)
        dst = np.frombuffer(cp.cuda.PinnedMemoryPointer(mem, 0), dtype, src.size).reshape(src.shape)
        np.copyto(dst, src)
        out[name] = dst  # the array keeps its PinnedMemoryPointer, which keeps the memory
    return dataclasses.replace(stream, **out)


def _is_pinned(cp, array: np.ndarray) -> bool:
    """Whether ``array``'s memory is page-locked for the CUDA driver (cudaHostAlloc'd or registered)."""
    if array.size == 0 or not array.flags.c_contiguous:
        return False
    ends = (array.ctypes.data, array.ctypes.data + array.nbytes - 1)
    try:  # both ends: an array page-locked only in part is staged instead (an array of
        # pinned(), one allocation, is locked throughout)
        kinds = [cp.cuda.runtime.pointerGetAttributes(p).type for p in ends]
    except cp.cuda.runtime.CUDARuntimeError:
        return False
    return all(k == cp.cuda.runtime.memoryTypeHost for k in kinds)


def _threads(requested: int | None, chunks: int, devices: int = 1) -> int:
    """Threads of one device's share: ``requested`` (or the default's share of the cores), at most one per chunk."""
    if requested is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        requested = max(1, min(MAX_THREADS, cores) // devices)
    return max(1, min(int(requested), chunks))


def _device_ids(cp, devices: Sequence[int] | None) -> list[int]:
    """The CUDA device ids ``devices`` names (the current device if None), each checked to be here."""
    n_dev = int(cp.cuda.runtime.getDeviceCount())
    if devices is None:
        ids = [int(cp.cuda.runtime.getDevice())]
    elif isinstance(devices, (str, bytes)) or not all(
            isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in devices):
        ids = []
    else:
        ids = [int(d) for d in devices]
    if not ids or any(not 0 <= d < n_dev for d in ids):
        raise ValidationError(f"phase 1 devices must be CUDA device ids in 0..{n_dev - 1}, got {devices!r}",
                              field="devices", value=devices)
    return ids


def _step_range(steps: tuple[int, int] | None, t_steps: int) -> tuple[int, int]:
    """``(first, count)`` of the steps ``steps`` names out of ``t_steps`` (every step if None), checked."""
    if steps is None:
        return 0, t_steps
    if (not isinstance(steps, tuple) or len(steps) != 2
            or not all(isinstance(t, (int, np.integer)) and not isinstance(t, bool) for t in steps)
            or not 0 <= steps[0] < steps[1] <= t_steps):
        raise ValidationError(f"phase 1 steps must be (t0, t1) with 0 <= t0 < t1 <= {t_steps}, got {steps!r}",
                              field="steps", value=steps)
    return int(steps[0]), int(steps[1]) - int(steps[0])


def step_stats(stream: Stream, *, threads: int | None = None, chunk_bytes: int | None = None,
               devices: Sequence[int] | None = None, steps: tuple[int, int] | None = None) -> StepStats:
    """Phase 1 on the GPU from host arrays, through pinned chunks: ``StepStats``.

    Parameters
    ----------
    stream
        The stream; only its rewards and lots are read.
    threads
        Host threads staging chunks on each device (default: :data:`MAX_THREADS`,
        at most one per core, shared between the devices). A pinned stream
        (:func:`pinned`) is not staged: it takes :data:`DIRECT_THREADS` per device.
    chunk_bytes
        Bytes of rewards per chunk (a chunk is a whole number of steps, at least one);
        :data:`CHUNK_BYTES` staged, :data:`DIRECT_CHUNK_BYTES` from a pinned stream, if None.
    devices
        CUDA device ids to spread the steps over (each gets a contiguous range of
        steps and its own staging threads, so each device's PCIe link carries its
        share); the current device if None. A device may be named twice.
    steps
        ``(t0, t1)``: phase 1 of steps ``t0..t1`` only (a sweep computes it piece by
        piece, its scan starting on the first piece); every step if None.

    Returns
    -------
    StepStats
        The same bits as ``fast_gpu.step_stats(stream)`` (of those steps), whatever
        the devices: each step is reduced by one block of the same kernel, wherever it runs.

    Raises
    ------
    ValidationError
        ``devices`` is empty or names a device that is not here, or ``steps`` is not a
        non-empty range of the stream's steps.
    """
    from regime_dash.engine import fast_gpu, loader
    from regime_dash.core.slots import DEFAULT_LAYOUT

    t_steps, b = check_arrays(stream)
    cp = loader.cupy_module()
    ids = _device_ids(cp, devices)
    # reads no slot: any layout's module; its RawKernel loads itself on each device it runs on
    kernel = fast_gpu.module(DEFAULT_LAYOUT)["replay_step_stats"]
    first, t_steps = _step_range(steps, t_steps)
    # a range of a C-contiguous [T, b] array is contiguous: a view (a pinned stream stays pinned)
    rewards = np.ascontiguousarray(stream.rewards[first:first + t_steps], dtype=np.float32)
    lots = np.ascontiguousarray(stream.lots[first:first + t_steps], dtype=np.int32)
    direct = _is_pinned(cp, rewards) and _is_pinned(cp, lots)  # already page-locked: no staging copy
    if chunk_bytes is None:
        chunk_bytes = DIRECT_CHUNK_BYTES if direct else CHUNK_BYTES
    rows = max(1, min(t_steps, int(chunk_bytes) // (b * 4)))  # a short stream pins no more than itself
    chunks = [(a, min(t_steps, a + rows)) for a in range(0, t_steps, rows)]
    # contiguous runs of chunks, one per device (fewer chunks than devices: the last ones idle)
    parts = [chunks[lo:hi] for lo, hi in shard_bounds(len(chunks), len(ids))]
    sums = np.empty((t_steps, 3), np.float32)
    flat = np.empty(t_steps, np.int32)
    jobs = []
    for device_id, part in zip(ids, parts):
        n_threads = min(DIRECT_THREADS, len(part)) if direct else _threads(threads, len(part), len(ids))
        jobs.append(_DevicePart(cp, device_id, part, b, n_threads, direct))
    workers = sum(j.n_threads for j in jobs)
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        futs = [pool.submit(j.stage, k, rewards, lots, kernel) for j in jobs for k in range(j.n_threads)]
        concurrent.futures.wait(futs)  # every thread done with its buffers before any error is raised
        for fut in futs:
            fut.result()
    for j in jobs:
        j.fetch(cp, sums, flat)
    return StepStats(sums, flat)


def _recorded(cp, stream):
    """An event recorded on ``stream`` now; waiting for it sleeps (:data:`BLOCKING_SYNC`) or spins."""
    event = cp.cuda.Event(block=BLOCKING_SYNC, disable_timing=True)
    event.record(stream)
    return event


class _DevicePart:
    """One device's share of phase 1: steps ``first..last`` of its chunks, on arrays of its own."""

    def __init__(self, cp, device_id: int, chunks: list[tuple[int, int]], b: int, n_threads: int,
                 direct: bool = False):
        from regime_dash.engine import fast_gpu

        self.device_id, self.chunks, self.b, self.n_threads = device_id, chunks, b, n_threads
        self.direct = direct  # the source is page-locked: copy from it, no staging buffers
        self.first, last = chunks[0][0], chunks[-1][1]
        self.rows = max(z - a for a, z in chunks)
        n = last - self.first
        with cp.cuda.Device(device_id):
            self.dev_r = cp.empty((n, b), np.float32)
            self.dev_l = cp.empty((n, b), np.int32)
            self.stats = cp.empty((n, 3), np.float32)
            self.flat = cp.empty(n, np.int32)
        # as fast_gpu.DevicePhase1: three float banks and the int bank of the flat count
        self.shared = (fast_gpu.STATS_BLOCK * 3 + fast_gpu.STATS_BLOCK // 32) * 4
        self.cp = cp

    def stage(self, k: int, rewards: np.ndarray, lots: np.ndarray, kernel) -> None:
        """Thread ``k`` of this device: its chunks (every n_threads-th), staged through :data:`BUFFERS` pinned
        buffers, or, from a page-locked source, copied straight from it."""
        with self.cp.cuda.Device(self.device_id), self.cp.cuda.Stream(non_blocking=True) as s:
            try:
                self._stage(k, rewards, lots, kernel, s)
            finally:  # even after an error, no buffer or array is freed while a copy still reads it
                with contextlib.suppress(Exception):
                    s.synchronize()

    def _stage(self, k: int, rewards: np.ndarray, lots: np.ndarray, kernel, s) -> None:
        """:meth:`stage`'s work, on CUDA stream ``s``."""
        cp, b, rows = self.cp, self.b, self.rows
        if self.direct:
            for a, z in self.chunks[k::self.n_threads]:
                n, lo, hi = z - a, a - self.first, z - self.first
                self.dev_r[lo:hi].data.copy_from_host_async(rewards[a:z].ctypes.data, n * b * 4, s)
                self.dev_l[lo:hi].data.copy_from_host_async(lots[a:z].ctypes.data, n * b * 4, s)
                self._reduce(kernel, lo, hi)
            _recorded(cp, s).synchronize()
            return
        bufs = []
        for _ in range(BUFFERS):
            mem = cp.cuda.alloc_pinned_memory(2 * rows * b * 4)
            bufs.append((mem, np.frombuffer(mem, np.float32, rows * b).reshape(rows, b),
                         np.frombuffer(mem, np.int32, rows * b, offset=rows * b * 4).reshape(rows, b)))
        in_flight: list = [None] * BUFFERS
        for j, (a, z) in enumerate(self.chunks[k::self.n_threads]):
            _, host_r, host_l = bufs[j % BUFFERS]
            if in_flight[j % BUFFERS] is not None:
                in_flight[j % BUFFERS].synchronize()  # this buffer's last copy has left it
            n, lo, hi = z - a, a - self.first, z - self.first
            np.copyto(host_r[:n], rewards[a:z])
            np.copyto(host_l[:n], lots[a:z])
            self.dev_r[lo:hi].data.copy_from_host_async(host_r.ctypes.data, n * b * 4, s)
            self.dev_l[lo:hi].data.copy_from_host_async(host_l.ctypes.data, n * b * 4, s)
            self._reduce(kernel, lo, hi)
            in_flight[j % BUFFERS] = _recorded(cp, s)
        _recorded(cp, s).synchronize()  # the pinned buffers go back to the pool only once read

    def _reduce(self, kernel, lo: int, hi: int) -> None:
        """Phase 1 of this part's rows ``lo..hi`` (landed, or queued behind their copy on the current stream)."""
        from regime_dash.engine import fast_gpu

        n, i32 = hi - lo, np.int32
        kernel((n,), (fast_gpu.STATS_BLOCK,), (self.dev_r[lo:hi], self.dev_l[lo:hi], i32(self.b), i32(n),
                                              self.stats[lo:hi], self.flat[lo:hi]),
               shared_mem=self.shared)

    def fetch(self, cp, sums: np.ndarray, flat: np.ndarray) -> None:
        """This device's statistics into their steps of ``sums`` and ``flat``; its arrays freed."""
        last = self.first + self.stats.shape[0]
        with cp.cuda.Device(self.device_id):
            sums[self.first:last] = cp.asnumpy(self.stats)
            flat[self.first:last] = cp.asnumpy(self.flat)
        self.dev_r = self.dev_l = self.stats = self.flat = None


__all__ = ["step_stats", "pinned", "CHUNK_BYTES", "DIRECT_CHUNK_BYTES", "MAX_THREADS", "DIRECT_THREADS"]
