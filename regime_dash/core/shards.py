"""Contiguous ranges that split ``n`` items into parts as evenly as possible.

Plain arithmetic, so both the engines (a GPU sweep's phase 1 split over devices) and the
scale-out over dask (:mod:`regime_dash.runs.scheduler`) cut their work the same way without
either importing the other.
"""
from __future__ import annotations


def shard_bounds(n: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous ``[start, stop)`` ranges covering ``0..n`` as evenly as possible (none empty)."""
    parts = max(1, min(int(parts), n))
    base, extra = divmod(n, parts)
    out, start = [], 0
    for k in range(parts):
        stop = start + base + (1 if k < extra else 0)
        out.append((start, stop))
        start = stop
    return out
