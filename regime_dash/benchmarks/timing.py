"""The one timing helper of the benchmarks: wall-clock seconds of calls and of blocks.

Every benchmark times with :func:`time.perf_counter` through these, so "a run", "the
warm-up" and "the best/median of N" mean the same thing in every figure.
"""
from __future__ import annotations

import math
import statistics
import time
from typing import Any, Callable, TypeVar

__all__ = ["Stopwatch", "best_of", "median_of", "repeat", "timed", "wall"]

T = TypeVar("T")


class Stopwatch:
    """Wall-clock seconds of a block: ``with Stopwatch() as sw: ...``, then ``sw.seconds``.

    ``sw.elapsed()`` reads the running time inside the block.
    """

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.seconds = 0.0

    def __enter__(self) -> "Stopwatch":
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.seconds = time.perf_counter() - self.start

    def elapsed(self) -> float:
        """Seconds since the block (or the stopwatch) started."""
        return time.perf_counter() - self.start


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    """Seconds of one call of ``fn``, and what it returned."""
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


def wall(fn: Callable[[], Any]) -> Callable[[], float]:
    """``fn`` as a callable that returns its own wall-clock seconds (for :func:`repeat`)."""
    return lambda: timed(fn)[0]


def repeat(once: Callable[[], float], repeats: int, budget_s: float = math.inf) -> list[float]:
    """Seconds of up to ``repeats`` calls of ``once``, which times itself (see :func:`wall`;
    a GPU row times with device events instead); stops once ``budget_s`` has passed."""
    runs: list[float] = []
    start = time.perf_counter()
    while len(runs) < repeats:
        runs.append(float(once()))
        if time.perf_counter() - start >= budget_s:
            break
    return runs


def best_of(fn: Callable[[], Any], repeats: int) -> float:
    """The fastest of ``repeats`` calls of ``fn``, in seconds (no warm-up; ``inf`` for none)."""
    return min(repeat(wall(fn), repeats), default=math.inf)


def median_of(fn: Callable[[], T], repeats: int) -> tuple[float, list[float], T]:
    """Median seconds of ``repeats`` calls of ``fn`` after one untimed warm-up call (compiles
    and cache loads are not counted); also every run's seconds and the last result."""
    out = fn()
    runs = []
    for _ in range(repeats):
        s, out = timed(fn)
        runs.append(s)
    return statistics.median(runs), runs, out
