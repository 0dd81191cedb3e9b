"""The constants of the shape scanner's number reading, shared by its two compiled forms
(:mod:`regime_dash.ingest.shape_jit`, numba; :mod:`regime_dash.ingest.shape_native`, C):
one source of the grammar's limits and of the conversion tables. NumPy only.
"""
from __future__ import annotations

import numpy as np

#: Slot kinds (the kind of the template line's value there; ``_shape_scan.c``'s enum too).
NUMBER, BOOL, STRING, NULL = 0, 1, 2, 3

#: Most digits of an integer read here (beyond, it could leave int64: the line goes the
#: other way).
MAX_INT_DIGITS = 18

#: Most digits of an exponent read here (beyond, the value may leave float64, which the
#: reference rejects: the line goes the other way).
MAX_EXP_DIGITS = 2

#: Clinger's fast path: a decimal of at most this many digits whose value (the digits
#: as an integer) is below 2**53, times or over an exactly representable power of ten
#: (10**0 to 10**22), is one IEEE multiplication or division of two exact doubles, so
#: correctly rounded: the double Python's ``float`` (and Arrow's cast) gives.
EXACT_DIGITS = 18
EXACT_MANTISSA = 1 << 53
EXACT_POW10 = np.array([10.0 ** i for i in range(23)])

#: Beyond Clinger's path (17 digits, as a float32's shortest text as a double has, are past
#: 2**53), decimals of at most ``EXACT_DIGITS`` digits times 10**q for q in this range are
#: converted by Eisel and Lemire's algorithm (as fast_float and Go's strconv do): the digits
#: times a 128-bit truncation of 5**q give the double correctly rounded, or say that they
#: cannot (the value then goes to Arrow's cast, as any other).
LEMIRE_Q_MIN, LEMIRE_Q_MAX = -27, 22


def pow5_128(q: int) -> int:
    """5**q normalized into [2**127, 2**128): truncated for q >= 0, rounded up below
    (fast_float's table, for q >= -27)."""
    if q >= 0:
        p = 5 ** q
        return p << (128 - p.bit_length()) if p.bit_length() <= 128 else p >> (p.bit_length() - 128)
    p5 = 5 ** -q
    return (1 << (p5.bit_length() + 127)) // p5 + 1


POW5 = [pow5_128(q) for q in range(LEMIRE_Q_MIN, LEMIRE_Q_MAX + 1)]
POW5_HI = np.array([x >> 64 for x in POW5], np.uint64)
POW5_LO = np.array([x & ((1 << 64) - 1) for x in POW5], np.uint64)
