"""A sweep's metric columns: finalized from its accumulators and packed exactly for the trip home.

A sweep shard ends with one accumulator row per config (float64 [S, N_METRICS + 1],
:func:`summary.accumulate`'s). :func:`finalize` turns them into the table's metric
columns, metric-major ([N_METRICS, S], each metric one contiguous row, as the
table's columns are), exactly as :func:`summary.finalize` does row by row.
:func:`pack` then gives each metric in the narrowest form that holds all its
values bit for bit: one value if they are all equal, else int8 / int16 / int32 /
float32 / float64 (most metrics are counts or float32 values carried in float64,
and some do not move with the swept fields at all), so a
shard's result crosses PCIe and the network in a fraction of the bytes; :func:`fill`
writes packed columns back into a float64 block.

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


#: What a metric column may be packed as, narrowest first (a column whose values are all
#: equal goes as one value, before any of these).
PACK_DTYPES = (np.int8, np.int16, np.int32, np.float32)


def pack(xp: Any, metrics: Any) -> list[Any]:
    """The rows of ``metrics`` (float64 [N, S]), each in the narrowest form that holds it exactly.

    A row whose values are all the same float64 bits is one value (a 0-d array:
    a metric the swept fields do not move); otherwise int8, int16, int32 or
    float32 if every value comes back bit for bit, else float64. Checked, not
    assumed: -0.0 does not survive an integer, a NaN's payload must come back,
    and a cast out of range, whatever it gives on either device, fails the check.
    """
    metrics = xp.ascontiguousarray(metrics, dtype=np.float64)
    bits = metrics.view(np.int64)
    narrow = []
    with np.errstate(invalid="ignore", over="ignore"):  # NaN / out of range to an int: caught below
        for dtype in PACK_DTYPES:
            narrow.append(metrics.astype(dtype))
    # one trip to the host for every decision: [constant, each of PACK_DTYPES] per row
    fits = _host(xp.stack([(bits == bits[:, :1]).all(axis=1)]
                          + [(c.astype(np.float64).view(np.int64) == bits).all(axis=1) for c in narrow]))
    out = []
    for j in range(metrics.shape[0]):
        if fits[0, j]:
            out.append(metrics[j, :1].reshape(()))  # 0-d
            continue
        k = next((k for k in range(len(narrow)) if fits[1 + k, j]), None)
        out.append(metrics[j] if k is None else narrow[k][j])
    return out


def device_to_host(cp: Any, columns: Sequence[Any]) -> list[np.ndarray]:
    """CuPy columns (1-D or 0-d) as NumPy arrays, in one copy to pinned host memory (each a view of it)."""
    order = sorted(range(len(columns)), key=lambda j: -columns[j].itemsize)  # wider first: every offset aligned
    offsets, total = {}, 0
    for j in order:
        offsets[j] = total
        total += columns[j].nbytes
    buf = cp.empty(total, np.uint8)
    for j in order:
        c = columns[j]
        buf[offsets[j]:offsets[j] + c.nbytes].view(c.dtype)[...] = c
    # pinned: the copy runs at the link's speed (a fresh pageable array first faults in every page)
    host = np.frombuffer(cp.cuda.alloc_pinned_memory(total), np.uint8, total)
    buf.get(out=host)
    return [np.frombuffer(host, columns[j].dtype, columns[j].size, offsets[j]).reshape(columns[j].shape)
            for j in range(len(columns))]


def fill(block: np.ndarray, start: int, stop: int, columns: Sequence[np.ndarray]) -> None:
    """Write packed ``columns`` (one per metric, 1-D or 0-d) into ``block[:, start:stop]`` (float64 [N, S]), exactly."""
    for j, col in enumerate(columns):
        block[j, start:stop] = col


def _host(x: Any) -> np.ndarray:
    return x.get() if hasattr(x, "get") else np.asarray(x)


__all__ = ["finalize", "pack", "device_to_host", "fill", "PACK_DTYPES"]
