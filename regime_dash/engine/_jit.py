"""``jitable``: write a step function once, run it as Python and compile it with numba.

The reference engine's step functions are the oracle and must stay readable
Python; the fast CPU engine must run the very same source compiled. numba's
``register_jitable`` does exactly that: called from Python the function runs as
written, called from an ``@njit`` function it is compiled. Without numba the
decorators are the identity, so the reference engine never needs it.

Two compiled forms serve two needs:

* a plain call (``@jitable``): each step function is compiled once as its own
  function. Cheapest to compile; the replay scan uses it.
* :func:`inlined`: a twin of the function, made from the same code object,
  that numba inlines into its caller along with every ``@jitable`` it calls.
  A kernel then holds the whole step as one body, so a constant slot table
  folds into constant offsets. About 2x faster per step and ~3 s more compile;
  the sweep, which runs millions of steps, uses it.
"""
from __future__ import annotations

import types
from typing import Callable

try:  # numba is a hard requirement of the app, but the oracle must not depend on it
    from numba import prange
    from numba.extending import register_jitable

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised only where numba is absent
    HAVE_NUMBA = False
    prange = range

# the registered step functions, and the inline twin made for each (by id: functions hash by id anyway)
_JITABLE: dict[int, Callable] = {}
_LEAF: set[int] = set()
_TWINS: dict[int, Callable] = {}


def jitable(fn: Callable) -> Callable:
    """Register ``fn`` so compiled code can call it; ``fn`` itself is returned unchanged."""
    if HAVE_NUMBA:
        register_jitable(fn)
    _JITABLE[id(fn)] = fn
    return fn


def jitable_leaf(fn: Callable) -> Callable:
    """:func:`jitable` for a small leaf (``fminf``) that :func:`inlined` leaves as a call.

    numba's IR inliner mishandles a leaf with several returns (it warns that
    a variable is out of scope); LLVM inlines such small functions itself.
    """
    _LEAF.add(id(fn))
    return jitable(fn)


def inlined(fn: Callable) -> Callable:
    """The twin of ``@jitable`` ``fn`` that numba inlines at its call sites, callees included.

    Same code object, closure and defaults; only the globals differ, where each
    ``@jitable`` callee ``fn`` names is replaced by its own twin. Called as
    Python it behaves exactly like ``fn``.
    """
    if id(fn) not in _JITABLE:
        raise TypeError(f"{fn.__qualname__} is not @jitable")
    if id(fn) in _LEAF or not HAVE_NUMBA:
        return fn
    twin = _TWINS.get(id(fn))
    if twin is None:
        namespace = dict(fn.__globals__)
        for name in fn.__code__.co_names:
            callee = namespace.get(name)
            if callable(callee) and id(callee) in _JITABLE:
                namespace[name] = inlined(callee)
        twin = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, fn.__closure__)
        twin.__qualname__ = fn.__qualname__
        twin.__doc__ = fn.__doc__
        register_jitable(inline="always")(twin)
        _TWINS[id(fn)] = twin
    return twin


__all__ = ["jitable", "jitable_leaf", "inlined", "prange", "HAVE_NUMBA"]
