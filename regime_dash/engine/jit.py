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

numba is imported by the first compile, not by the step functions: a function
decorated before then waits in a list that :func:`register_pending` (called by
every compile site: ``numba_adapter.njit_kernel``, the import of ``fast``)
registers. A process that only runs the step functions as Python, a follower's
verdict, never pays numba's import.
"""
from __future__ import annotations

import importlib.util
import sys
import threading
from typing import Callable

# numba is a hard requirement of the app, but the oracle must not depend on it; and importing it costs
# ~50 MB, which a process that never compiles should not pay: found here, imported by the first compile
HAVE_NUMBA = importlib.util.find_spec("numba") is not None
_PENDING: list[Callable] = []  # decorated before numba was imported: registered by :func:`register_pending`
_LOCK = threading.Lock()


def jitable(fn: Callable) -> Callable:
    """Register ``fn`` so compiled code can call it (inlined); ``fn`` itself is returned unchanged.

    Where numba is not imported yet, ``fn`` waits for :func:`register_pending`, which every compile
    site calls first (a compile needs numba anyway)."""
    if HAVE_NUMBA:
        with _LOCK:
            _PENDING.append(fn)
        if "numba" in sys.modules:
            register_pending()
    return fn


def register_pending() -> None:
    """Import numba and register every :func:`jitable` function decorated so far (a no-op without
    numba): call it before compiling anything that calls one."""
    if not HAVE_NUMBA:
        return
    from numba.extending import register_jitable

    with _LOCK:
        while _PENDING:
            register_jitable(forceinline=True)(_PENDING.pop(0))


__all__ = ["jitable", "register_pending", "HAVE_NUMBA"]
