"""``jitable``: write a step function once, run it as Python and compile it with numba.

The reference engine's step functions are the oracle and must stay readable
Python; the fast CPU engine must run the very same source compiled. numba's
``register_jitable`` does exactly that: called from Python the function runs as
written, called from an ``@njit`` function it is compiled. Without numba the
decorator is the identity, so the reference engine never needs it.

Every step function is compiled with ``forceinline``: LLVM inlines it into its
caller, so a kernel holds the whole step as one body. The sweep relies on it:
its slot table is a compile-time constant, so inlined, every ``isv[ix[K]]``
becomes a constant offset (half the time per step of a call to
``scalar_step``). LLVM-level inlining costs little compile time; numba's own
IR inliner (``inline="always"``) cost ~3 s more per kernel for the same code.
"""
from __future__ import annotations

from typing import Callable

try:  # numba is a hard requirement of the app, but the oracle must not depend on it
    from numba.extending import register_jitable

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised only where numba is absent
    HAVE_NUMBA = False


def jitable(fn: Callable) -> Callable:
    """Register ``fn`` so compiled code can call it (inlined); ``fn`` itself is returned unchanged."""
    if HAVE_NUMBA:
        register_jitable(forceinline=True)(fn)
    return fn


__all__ = ["jitable", "HAVE_NUMBA"]
