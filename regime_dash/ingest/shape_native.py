"""The shape scanner compiled ahead of time (``_shape_scan.c``), with the numba module's
functions and signatures (:mod:`regime_dash.ingest.shape_jit`), so
:mod:`regime_dash.ingest.shapes` takes either as its kernels.

It loads in milliseconds where numba takes about a second, so a fresh process (the CLI)
reads its first chunk the shape way. The extension is built by ``pip install`` where a C
compiler is present; without it this module fails to import and ingest loads the numba
kernels instead. Here the outputs are allocated; the C functions check every buffer's
length and every index they follow, and run without the GIL.

A *window* view (:func:`windows`) is the bytes themselves: the C loops read their 8-byte
words with unaligned loads, as the numba kernels read the views ``shape_jit.windows``
makes.
"""
from __future__ import annotations

import numpy as np

import regime_dash.ingest._shape_scan as _c
from regime_dash.ingest import shape_tables

_c.set_tables(shape_tables.POW5_HI, shape_tables.POW5_LO, shape_tables.EXACT_POW10)


def windows(a: np.ndarray) -> np.ndarray:
    """The bytes ``a`` as the C loops read their words: the array itself, contiguous."""
    return np.ascontiguousarray(a, np.uint8)


def _ints(a) -> np.ndarray:
    return np.ascontiguousarray(a, np.int64)


def lemire(m: int, q: int) -> float:
    """The double nearest ``m * 10**q`` (``0 < m < 2**63``, ``q`` from -27 to 22), or NaN
    where Eisel and Lemire's algorithm cannot vouch (``shape_jit.lemire``)."""
    return _c.lemire(int(m), int(q))


def match_lines(buf, bw, tw, t0, starts, ends, lw, lit_off, kinds, vs, ve, fl, iv, fv) -> np.ndarray:
    """``shape_jit.match_lines``: ``bw`` is ``buf``'s windows (the bytes themselves here),
    ``tw`` a padded copy of ``buf[t0:]``, ``lw`` the literals with 8 bytes of padding; the
    outputs ``vs``, ``ve``, ``fl``, ``iv``, ``fv`` come zeroed, slot by line."""
    starts = _ints(starts)
    ok = np.zeros(len(starts), np.bool_)
    _c.match_lines(windows(buf), windows(tw), int(t0), starts, _ints(ends), windows(lw), _ints(lit_off),
                   np.ascontiguousarray(kinds, np.int8), vs, ve, fl, iv, fv, ok)
    return ok


def gather(buf, vs, ve, fl, rows, cols, zero) -> tuple[np.ndarray, np.ndarray]:
    """``shape_jit.gather``: the values' bytes column after column and their int32 offsets."""
    rows, cols = _ints(rows), _ints(cols)
    off = np.empty(len(cols) * len(rows) + 1, np.int32)
    data = _c.gather(windows(buf), vs, ve, fl, fl.shape[1], rows, cols, np.ascontiguousarray(zero, np.bool_), off)
    return off, np.frombuffer(data, np.uint8)


def views(buf, vs, ve, fl, rows, cols) -> np.ndarray:
    """``shape_jit.views``: Arrow string-view entries of number columns, as int32 quadruples."""
    rows, cols = _ints(rows), _ints(cols)
    out = np.zeros((len(cols) * len(rows), 4), np.int32)
    _c.views(windows(buf), vs, ve, fl, fl.shape[1], rows, cols, out)
    return out


def line_breaks(buf, bw) -> np.ndarray:
    """``shape_jit.line_breaks``: the offsets of the ``\\n`` bytes, or ``[-1]`` past one a 64
    bytes (the caller's NumPy pass then)."""
    buf = windows(buf)
    out = np.empty(len(buf) // 64 + 8, np.int64)
    c = _c.line_breaks(buf, out)
    return np.full(1, -1, np.int64) if c < 0 else out[:c].copy()


def slot_counts(fl, fv, rows) -> np.ndarray:
    """``shape_jit.slot_counts``: lines holding each flag per slot, and numbers needing the cast."""
    out = np.zeros((fl.shape[0], 7), np.int64)
    _c.slot_counts(np.ascontiguousarray(fl, np.int8), np.ascontiguousarray(fv, np.float64), fl.shape[1],
                   _ints(rows), out)
    return out
