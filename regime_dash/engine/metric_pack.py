"""A sweep's metric columns: finalized from its accumulators and packed exactly for the trip home.

A sweep shard ends with one accumulator row per config (float64 [S, N_METRICS + 1],
:func:`summary.accumulate`'s). :func:`finalize` turns them into the table's metric
columns, metric-major ([N_METRICS, S], each metric one contiguous row, as the
table's columns are), exactly as :func:`summary.finalize` does row by row.
:func:`pack` then gives each metric in the narrowest of int32 / float32 /
float64 that holds all its values bit for bit (most metrics are counts or float32
values carried in float64), so a shard's result crosses PCIe and the network in
about half the bytes; :func:`fill` writes packed columns back into a float64 block.

Both work on NumPy or CuPy arrays (``xp`` is the array module): a GPU shard
finalizes and packs on the device and brings the packed bytes back in one copy
(:func:`device_to_host`).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from regime_dash.engine import summary

#: The metric whose accumulator is a sum that :func:`finalize` divides by the step count.
_MEAN = summary.METRICS.index("kelly_mean")


def finalize(xp: Any, acc: Any, steps: int) -> Any:
    """float64 [N_METRICS, S]: :func:`summary.finalize` of every accumulator row at once, metric-major.

    Parameters
    ----------
    xp
        ``numpy`` or ``cupy``: the module of ``acc``.
    acc
        float64 [S, N_METRICS + 1] accumulators.
    steps
        Steps of the replayed stream (the mean's divisor).
    """
    out = xp.ascontiguousarray(acc[:, :summary.N_METRICS].T)
    out[_MEAN] = acc[:, _MEAN] / steps if steps else np.nan  # IEEE division on either side: the same bits
    return out


def pack(xp: Any, metrics: Any) -> list[Any]:
    """The rows of ``metrics`` (float64 [N, S]), each as int32, float32 or float64: the narrowest exact one.

    A row is narrowed only if every value comes back bit for bit (checked, not
    assumed: -0.0 does not survive int32, a NaN's payload must come back, and a
    cast out of range, whatever it gives on either device, fails the check).
    """
    metrics = xp.ascontiguousarray(metrics, dtype=np.float64)
    bits = metrics.view(np.int64)
    with np.errstate(invalid="ignore", over="ignore"):  # NaN / out of range to int32: caught below
        as_i32 = metrics.astype(np.int32)
        as_f32 = metrics.astype(np.float32)
    fits_i32 = _host((as_i32.astype(np.float64).view(np.int64) == bits).all(axis=1))
    fits_f32 = _host((as_f32.astype(np.float64).view(np.int64) == bits).all(axis=1))
    return [as_i32[j] if fits_i32[j] else as_f32[j] if fits_f32[j] else metrics[j]
            for j in range(metrics.shape[0])]


def device_to_host(cp: Any, columns: Sequence[Any]) -> list[np.ndarray]:
    """CuPy columns as NumPy arrays, in one device-to-host copy (each a view of that copy's buffer)."""
    order = sorted(range(len(columns)), key=lambda j: -columns[j].itemsize)  # 8-byte ones first: aligned
    offsets, total = {}, 0
    for j in order:
        offsets[j] = total
        total += columns[j].nbytes
    buf = cp.empty(total, np.uint8)
    for j in order:
        c = columns[j]
        buf[offsets[j]:offsets[j] + c.nbytes].view(c.dtype)[...] = c
    host = buf.get()
    return [np.frombuffer(host, columns[j].dtype, columns[j].size, offsets[j]) for j in range(len(columns))]


def fill(block: np.ndarray, start: int, columns: Sequence[np.ndarray]) -> None:
    """Write packed ``columns`` (one per metric) into ``block[:, start:]`` (float64 [N, S]), exactly."""
    for j, col in enumerate(columns):
        block[j, start:start + len(col)] = col


def _host(x: Any) -> np.ndarray:
    return x.get() if hasattr(x, "get") else np.asarray(x)


__all__ = ["finalize", "pack", "device_to_host", "fill"]
