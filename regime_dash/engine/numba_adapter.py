"""The one place that reaches past numba's public API: compiling a kernel without its runtime.

A step function takes the ISV buffer as an array argument, and the kernels call
dozens of them per step. With numba's runtime on, every such call increments and
decrements the reference counts of its array arguments (atomic operations), which
costs about twenty times the step's own arithmetic: a loop of 53 slot copies per
row ran 0.43 s over 200,000 rows with it and 0.02 s without. The kernels allocate
nothing (every buffer comes from the caller), so they need no runtime at all.

numba has no public switch for this; ``njit``'s ``_nrt=False`` option is the
documented-in-source way its own tests compile runtime-free code. Supported: numba
0.60 to 0.68 (the versions this project is tested with; requirements ask >= 0.60).
A numba that drops the option fails the first compile, loudly, in the parity tests.
"""
from __future__ import annotations

from typing import Callable

#: The numba releases whose ``_nrt`` option this module relies on.
SUPPORTED = ">=0.60,<0.69"


def njit_kernel(fn: Callable, cache: bool = True, **options) -> Callable:
    """``numba.njit(cache=cache, **options)(fn)`` without numba's runtime.

    ``cache``: keep the compiled code in numba's disk cache; where there is no writable cache
    location (a read-only install) it compiles per process instead.
    """
    from numba import njit

    from regime_dash.engine.jit import register_pending

    register_pending()  # the step functions ``fn`` calls
    try:
        return njit(cache=cache, _nrt=False, **options)(fn)
    except RuntimeError:  # no writable cache location
        return njit(cache=False, _nrt=False, **options)(fn)


__all__ = ["njit_kernel", "SUPPORTED"]
