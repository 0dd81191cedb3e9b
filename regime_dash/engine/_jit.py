"""``jitable``: write a step function once, run it as Python and compile it with numba.

The reference engine's step functions are the oracle and must stay readable
Python; the fast CPU engine must run the very same source compiled. numba's
``register_jitable`` does exactly that: called from Python the function runs as
written, called from an ``@njit`` function it is compiled inline. Without numba
the decorator is the identity, so the reference engine never needs it.
"""
from __future__ import annotations

try:  # numba is a hard requirement of the app, but the oracle must not depend on it
    from numba.extending import register_jitable as jitable

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised only where numba is absent
    HAVE_NUMBA = False

    def jitable(fn):
        return fn

__all__ = ["jitable", "HAVE_NUMBA"]
