"""The compiled scanners of :mod:`regime_dash.ingest.shapes` (numba, cached on disk).

Imported only by :func:`regime_dash.ingest.shapes.kernels`, on a background thread, so
``import regime_dash.ingest`` loads no numba and a small ingest never waits for it.

Value flags (``fl``): a number slot holds 0 (an integer, its value in ``iv``), 1 (a
number with a fraction or an exponent), 2 (``NaN``), 3 (``Infinity``), 4
(``-Infinity``); a bool slot 0 or 1; a string slot 0; any slot 5 for ``null``.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, types

from regime_dash.ingest import shape_tables as _t
from regime_dash.ingest.shape_tables import BOOL, NUMBER, STRING

# the grammar's limits and the conversion tables (see shape_tables), as numba's globals
_MAX_INT_DIGITS, _MAX_EXP_DIGITS = _t.MAX_INT_DIGITS, _t.MAX_EXP_DIGITS
_EXACT_DIGITS, _EXACT_MANTISSA, _EXACT_POW10 = _t.EXACT_DIGITS, _t.EXACT_MANTISSA, _t.EXACT_POW10
_LEMIRE_Q_MIN, _LEMIRE_Q_MAX = _t.LEMIRE_Q_MIN, _t.LEMIRE_Q_MAX
_POW5_HI, _POW5_LO = _t.POW5_HI, _t.POW5_LO
_U32 = np.uint64(0xFFFFFFFF)
_U9 = np.uint64(0x1FF)
_UMAX = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(nogil=True, cache=True, inline="always")
def _mul128(a, b):
    """The 128-bit product of two uint64: (high, low) words."""
    a_lo, a_hi, b_lo, b_hi = a & _U32, a >> np.uint64(32), b & _U32, b >> np.uint64(32)
    p0, p1, p2, p3 = a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi
    mid = (p0 >> np.uint64(32)) + (p1 & _U32) + (p2 & _U32)
    hi = p3 + (p1 >> np.uint64(32)) + (p2 >> np.uint64(32)) + (mid >> np.uint64(32))
    return hi, (mid << np.uint64(32)) | (p0 & _U32)


@njit(nogil=True, cache=True)
def lemire(m, q):
    """The double nearest ``m * 10**q`` (``0 < m < 2**63``, ``q`` in the table's range),
    ties to even, as Python's ``float`` of its text; NaN where the algorithm cannot vouch."""
    w = np.uint64(m)
    lz = 0
    for bits in (32, 16, 8, 4, 2, 1):  # leading zeros, by halves
        if w < (np.uint64(1) << np.uint64(64 - bits)):
            w <<= np.uint64(bits)
            lz += bits
    k = q - _LEMIRE_Q_MIN
    hi, lo = _mul128(w, _POW5_HI[k])
    if hi & _U9 == _U9:  # the low bits may carry into those kept: the table's next word
        hi2, _lo2 = _mul128(w, _POW5_LO[k])
        lo2 = lo + hi2
        if hi2 > lo2:
            hi += np.uint64(1)
        lo = lo2
        if hi & _U9 == _U9 and lo == _UMAX:
            return np.nan
    upper = int(hi >> np.uint64(63))
    shift = np.uint64(upper + 9)
    mant = hi >> shift
    power2 = (((152170 + 65536) * q) >> 16) + 63 + upper - lz + 1023
    if power2 <= 0 or power2 >= 2046:
        return np.nan  # subnormal or near overflow: not this path's
    if lo <= np.uint64(1) and -4 <= q <= 23 and mant & np.uint64(3) == np.uint64(1) and (mant << shift) == hi:
        mant ^= np.uint64(1)  # exactly halfway: round to even (down) rather than up
    mant = (mant + (mant & np.uint64(1))) >> np.uint64(1)
    if mant >= (np.uint64(2) << np.uint64(52)):
        mant = np.uint64(1) << np.uint64(52)
        power2 += 1
    return math.ldexp(float(mant), power2 - 1075)


@njit(nogil=True, cache=True, inline="always")
def _word(buf, p, e, a, b, c, d, f=-1, g=-1, h=-1, x=-1):
    """Whether the bytes ``a b c d [f g h x]`` (a word of 3 to 8 bytes; -1 ends it, and
    ``d`` may be -1) stand at ``buf[p:]``, before ``e``."""
    want = (a, b, c, d, f, g, h, x)
    for j in range(8):
        if want[j] < 0:
            return True
        if p + j >= e or buf[p + j] != want[j]:
            return False
    return True


#: The scanner's signature, declared rather than inferred so that its word views
#: (:func:`windows`) are typed unaligned: numba then reads them with unaligned loads. Input
#: arrays are read-only here, so writable ones convert to these types too.
_BYTES = types.Array(types.uint8, 1, "C", readonly=True)
_WORDS = types.Array(types.uint64, 1, "A", readonly=True, aligned=False)
_INTS = types.Array(types.int64, 1, "C", readonly=True)
_KINDS = types.Array(types.int8, 1, "C", readonly=True)
_MATCH_SIGNATURE = types.Array(types.bool_, 1, "C")(
    _BYTES, _WORDS, _WORDS, types.int64, _INTS, _INTS, _WORDS, _INTS, _KINDS,
    types.Array(types.int64, 2, "C"), types.Array(types.int64, 2, "C"), types.Array(types.int8, 2, "C"),
    types.Array(types.int64, 2, "C"), types.Array(types.float64, 2, "C"))


def windows(a: np.ndarray) -> np.ndarray:
    """Every 8-byte window of the bytes ``a`` as an unsigned integer, the first byte
    lowest (element ``i``: bytes ``i`` to ``i + 7``; ``len(a) - 7`` of them): a view, no
    copy. Little-endian hosts only (the loader refuses others)."""
    return np.ndarray((max(len(a) - 7, 0),), np.dtype("<u8"), buffer=a, offset=0, strides=(1,))


_ZEROS = np.uint64(0x3030303030303030)
_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
_PAST_NINE = np.uint64(0x7676767676767676)
_HIGH_BITS = np.uint64(0x8080808080808080)
_LOW_BITS = np.uint64(0x0101010101010101)
_BYTE_PAIRS = np.uint64(0x000000FF000000FF)
_MUL_HI = np.uint64(100 + (1000000 << 32))
_MUL_LO = np.uint64(1 + (10000 << 32))
_POW10_INT = np.array([10 ** i for i in range(9)], np.int64)


@njit(nogil=True, cache=True, inline="always")
def _leading_digits(w):
    """How many of the bytes of ``w`` (a window: first byte lowest) are ASCII digits
    before the first that is not (0 to 8). A byte is a digit when it XOR ``0`` is at most
    9: adding 0x76 to its low 7 bits sets the top bit from 10 on, with no carry out."""
    lo = w ^ _ZEROS
    stop = (((lo & _LOW7) + _PAST_NINE) | lo) & _HIGH_BITS
    first = stop & (np.uint64(0) - stop)  # the lowest such top bit (0: none)
    below = ((first - np.uint64(1)) >> np.uint64(7)) & _LOW_BITS  # one bit a byte before it
    return np.int64((below * _LOW_BITS) >> np.uint64(56))


@njit(nogil=True, cache=True, inline="always")
def _digits_value(w, c):
    """The value of the first ``c`` bytes of ``w``, ASCII digits (``c`` from 0 to 8): they
    are moved to the top, ``0`` bytes put before them, and the 8 digits read in three
    multiplications, pairs of digits then pairs of pairs (fast_float's)."""
    if c == 0:
        return np.int64(0)
    if c < 8:
        w = (w << np.uint64(8 * (8 - c))) | (_ZEROS >> np.uint64(8 * c))
    w -= _ZEROS
    w = w * np.uint64(10) + (w >> np.uint64(8))
    w = (((w & _BYTE_PAIRS) * _MUL_HI) + (((w >> np.uint64(16)) & _BYTE_PAIRS) * _MUL_LO)) >> np.uint64(32)
    return np.int64(w & _U32)


@njit(nogil=True, cache=True, inline="always")
def _number_word(buf, p, e):
    """Scan ``NaN``, ``Infinity`` or ``-Infinity`` at ``p`` (the numbers that start with
    no digit; :func:`match_lines` reads the others): (end, flag, 0); end -1 when there
    is none."""
    neg = p < e and buf[p] == 45
    if neg:
        p += 1
    if p < e and buf[p] == 73 and _word(buf, p, e, 73, 110, 102, 105, 110, 105, 116, 121):
        return p + 8, 4 if neg else 3, 0
    if p < e and buf[p] == 78 and not neg and _word(buf, p, e, 78, 97, 78, -1):
        return p + 3, 2, 0  # Python's json has no -NaN
    return -1, 0, 0


@njit(nogil=True, cache=True, inline="always")
def _value(buf, p, e, kind):
    """Scan a value of ``kind`` (or ``null``) at ``p``: (end or -1, flag, integer value,
    value start, value end). It takes no arrays: an array argument of a compiled call is
    reference-counted on every call, which doubles the scanner's time."""
    if p + 4 <= e and buf[p] == 110 and buf[p + 1] == 117 and buf[p + 2] == 108 and buf[p + 3] == 108:
        return p + 4, 5, 0, 0, 0  # null
    if kind == NUMBER:
        end, flag, v = _number_word(buf, p, e)
        return end, flag, v, p, end
    if kind == BOOL:
        if p + 4 <= e and buf[p] == 116 and buf[p + 1] == 114 and buf[p + 2] == 117 and buf[p + 3] == 101:
            return p + 4, 1, 0, 0, 0
        if (p + 5 <= e and buf[p] == 102 and buf[p + 1] == 97 and buf[p + 2] == 108
                and buf[p + 3] == 115 and buf[p + 4] == 101):
            return p + 5, 0, 0, 0, 0
        return -1, 0, 0, 0, 0
    if kind == STRING:
        if p >= e or buf[p] != 34:
            return -1, 0, 0, 0, 0
        s = p + 1
        q = s
        while q < e:
            b = buf[q]
            if b == 34 or b == 92 or b < 32:  # an escape or a control byte: the other way
                break
            q += 1
        if q >= e or buf[q] != 34:
            return -1, 0, 0, 0, 0
        return q + 1, 0, 0, s, q
    return -1, 0, 0, 0, 0  # a null slot holds only null


@njit(_MATCH_SIGNATURE, nogil=True, cache=True)
def match_lines(buf, bw, tw, t0, starts, ends, lw, lit_off, kinds, vs, ve, fl, iv, fv):
    """For each line ``buf[starts[r]:ends[r]]``: whether it is the template's literals
    (``lw``: the windows of the literals, 8 bytes of padding after them)
    with a value of each slot's kind (or null) between them, then only blanks; the
    values' spans, flags and integers go into ``vs``, ``ve``, ``fl``, ``iv`` (slot by
    line: a column's values lie together; 0 where a slot has no span or integer), and
    into ``fv`` each number's double where Clinger's fast path or :func:`lemire` gives
    it correctly rounded (NaN where neither does: that value needs the cast; untouched
    for the words and null). A number has its span only where its double is NaN (the
    cast's to read; nothing else reads a number's text). Only entries other than 0 are
    written: the outputs must come zeroed.

    The line's bytes are read 8 at a time from windows (:func:`windows`): those of ``buf``
    (``bw``) where 8 bytes of it follow the line's end, else those of a padded copy of
    ``buf[t0:]`` (``tw``) that holds the line, so that no read leaves the arrays."""
    n = len(starts)
    nb = len(buf)
    k = len(kinds)
    ok = np.zeros(n, np.bool_)
    for r in range(n):
        ur = np.uint64(r)
        p = starts[r]
        e = ends[r]
        src, base = (bw, 0) if e + 8 <= nb else (tw, t0)
        good = True
        for i in range(k + 1):
            ui = np.uint64(i)
            a = lit_off[i]
            size = lit_off[i + 1] - a
            if p + size > e:
                good = False
                break
            for j in range(0, size, 8):
                # eight bytes a compare, the last word's bytes past the literal masked off
                x = src[np.uint64(p + j - base)] ^ lw[np.uint64(a + j)]
                if size - j < 8:
                    x &= (np.uint64(1) << np.uint64(8 * (size - j))) - np.uint64(1)
                if x != 0:
                    good = False
                    break
            if not good:
                break
            p += size
            if i < k:
                s = p
                if kinds[i] == NUMBER and p < e and (48 <= buf[p] <= 57 or (
                        buf[p] == 45 and p + 1 < e and 48 <= buf[p + 1] <= 57)):
                    # a number by Python's grammar, read here rather than in a helper
                    # (a compiled call, even inlined, makes the scanner a third slower)
                    neg = buf[p] == 45
                    if neg:
                        p += 1
                    q = p
                    v = 0
                    while True:  # the integer's digits, up to 8 a word (the word loops
                        # are written out: a helper taking an array costs a reference
                        # count a call)
                        c = min(_leading_digits(src[np.uint64(p - base)]), e - p)
                        v = v * _POW10_INT[c] + _digits_value(src[np.uint64(p - base)], c)
                        p += c
                        if c < 8:
                            break
                    nd = p - q
                    # beyond int64, or a leading zero ("01"): not Python's, the other way
                    good = nd <= _MAX_INT_DIGITS and (nd == 1 or buf[q] != 48)
                    flag = 0
                    m, ndig, e10 = v, nd, 0  # the decimal's digits, their count, its power of ten
                    if p < e and buf[p] == 46:
                        p += 1
                        f0 = p
                        while True:
                            c = min(_leading_digits(src[np.uint64(p - base)]), e - p)
                            m = m * _POW10_INT[c] + _digits_value(src[np.uint64(p - base)], c)
                            p += c
                            if c < 8:
                                break
                        nf = p - f0
                        good = good and nf > 0
                        flag, ndig, e10 = 1, nd + nf, -nf
                    if p < e and (buf[p] == 101 or buf[p] == 69):
                        p += 1
                        minus = p < e and buf[p] == 45
                        if p < e and (buf[p] == 43 or minus):
                            p += 1
                        nx = min(_leading_digits(src[np.uint64(p - base)]), e - p)
                        ex = _digits_value(src[np.uint64(p - base)], nx)
                        p += nx  # 8 digits or more: refused below all the same
                        good = good and 0 < nx <= _MAX_EXP_DIGITS
                        flag, e10 = 1, e10 - ex if minus else e10 + ex
                    if not good:
                        break
                    dbl = np.nan
                    if ndig > _EXACT_DIGITS and nd == 1 and buf[q] == 48:
                        # "0.000ddd": the zeros before the first digit are no digits of m
                        z = q + 2
                        while z < p and buf[z] == 48:
                            z += 1
                        ndig -= z - q - 1
                    if ndig <= _EXACT_DIGITS and m < _EXACT_MANTISSA and -22 <= e10 <= 22:
                        dbl = m * _EXACT_POW10[e10] if e10 >= 0 else m / _EXACT_POW10[-e10]
                        dbl = -dbl if neg else dbl
                    elif ndig <= _EXACT_DIGITS and _LEMIRE_Q_MIN <= e10 <= _LEMIRE_Q_MAX:
                        dbl = lemire(m, e10)  # m >= 2**53 here: never 0
                        dbl = -dbl if neg else dbl
                    # only what is not 0 is stored (the outputs come zeroed): a store
                    # costs about what the scan of the value does
                    fv[ui, ur] = dbl
                    if flag:
                        fl[ui, ur] = 1
                    elif v:
                        iv[ui, ur] = -v if neg else v
                    if dbl != dbl:  # its double is the cast's: the cast reads its text
                        vs[ui, ur] = s
                        ve[ui, ur] = p
                    continue
                end, flag, v, s, t = _value(buf, p, e, kinds[i])
                if end < 0:
                    good = False
                    break
                vs[ui, ur] = s
                ve[ui, ur] = t
                fl[ui, ur] = flag
                iv[ui, ur] = v
                p = end
        if good:
            while p < e and (buf[p] == 32 or buf[p] == 9 or buf[p] == 13):
                p += 1
            ok[r] = p == e
    return ok


@njit(nogil=True, cache=True)
def gather(buf, vs, ve, fl, rows, cols, zero):
    """The bytes of the values of columns ``cols`` in ``rows``, column after column, and
    their offsets (int32, an Arrow string array's: column ``j`` is entries
    ``j * len(rows)`` on). Where ``zero[j]``, a value flagged NaN, an infinity or null
    stands as ``0`` (a float column's cast then reads every entry); elsewhere a null is
    nothing. The spans are read inline, not through a helper taking the arrays (see
    :func:`_value`)."""
    n = len(rows)
    off = np.empty(len(cols) * n + 1, np.int32)
    off[0] = 0
    q = 0
    for j in range(len(cols)):  # first the sizes (so the offsets), then the bytes
        c = cols[j]
        z = zero[j]
        for t in range(n):
            r = rows[t]
            f = fl[c, r]
            if z and f >= 2:
                q += 1
            elif f != 5:
                q += ve[c, r] - vs[c, r]
            off[j * n + t + 1] = q
    out = np.empty(q, np.uint8)
    for j in range(len(cols)):
        c = cols[j]
        z = zero[j]
        for t in range(n):
            r = rows[t]
            f = fl[c, r]
            q = off[j * n + t]
            if z and f >= 2:
                out[q] = 48  # "0"
            elif f != 5:
                a = vs[c, r]
                for x in range(ve[c, r] - a):
                    out[q + x] = buf[a + x]
    return off, out


@njit(nogil=True, cache=True)
def views(buf, vs, ve, fl, rows, cols):
    """Arrow string-view entries (16 bytes each: length, then the bytes inline up to 12,
    else a 4-byte prefix, buffer 0 and the offset into ``buf``) of the values of number
    columns ``cols`` in ``rows``, column after column, as int32 quadruples. A value
    flagged NaN, an infinity or null stands as ``0`` (the float cast then reads every
    entry). Nothing is copied beyond the 12 inline bytes: the views point into ``buf``."""
    n = len(rows)
    out = np.zeros((len(cols) * n, 4), np.int32)
    raw = out.reshape(-1).view(np.uint8)  # the same bytes, one by one
    for j in range(len(cols)):
        c = cols[j]
        for t in range(n):
            r = rows[t]
            f = fl[c, r]
            q = j * n + t
            if f >= 2:
                out[q, 0] = 1
                raw[q * 16 + 4] = 48  # "0"
                continue
            a = vs[c, r]
            size = ve[c, r] - a
            out[q, 0] = size
            if size <= 12:
                for x in range(size):
                    raw[q * 16 + 4 + x] = buf[a + x]
            else:
                for x in range(4):
                    raw[q * 16 + 4 + x] = buf[a + x]
                out[q, 3] = a  # out[q, 2], the buffer index, stays 0
    return out


_LINE_FEEDS = np.uint64(0x0A0A0A0A0A0A0A0A)


@njit(nogil=True, cache=True, inline="always")
def _feeds(w):
    """The top bit of each byte of ``w`` that is ``\\n``, the others clear. A byte is a line
    feed when it XOR ``\\n`` is 0: its low 7 bits plus 0x7F, or'd with it, leave its top bit
    clear only then (no carry leaves a byte)."""
    x = w ^ _LINE_FEEDS
    return ~(((x & _LOW7) + _LOW7) | x) & _HIGH_BITS


@njit(types.Array(types.int64, 1, "C")(_BYTES, _WORDS), nogil=True, cache=True)
def line_breaks(buf, bw):
    """The offsets of the ``\\n`` bytes of ``buf`` (``bw``: its windows, :func:`windows`),
    as ``np.flatnonzero(buf == 10)`` gives them, read 32 bytes (four words) a step: a step
    without a line feed, nearly all of them, costs one test. ``[-1]`` where there are more
    than one a 64 bytes (short lines: the caller's NumPy pass then, as for a chunk of one
    line)."""
    n = len(buf)
    cap = n // 64 + 8
    out = np.empty(cap, np.int64)
    c = 0
    blocks = n // 32
    for i in range(blocks):
        a = np.uint64(32 * i)
        if not (_feeds(bw[a]) | _feeds(bw[a + np.uint64(8)]) | _feeds(bw[a + np.uint64(16)])
                | _feeds(bw[a + np.uint64(24)])):
            continue
        for j in range(4):
            z = _feeds(bw[a + np.uint64(8 * j)])
            while z:
                if c == cap:
                    return np.full(1, -1, np.int64)
                bit = z & (np.uint64(0) - z)
                below = ((bit - np.uint64(1)) >> np.uint64(7)) & _LOW_BITS  # one bit a byte before it
                out[c] = 32 * i + 8 * j + np.int64((below * _LOW_BITS) >> np.uint64(56))
                c += 1
                z ^= bit
    for p in range(32 * blocks, n):
        if buf[p] == 10:
            if c == cap:
                return np.full(1, -1, np.int64)
            out[c] = p
            c += 1
    return out[:c].copy()


@njit(types.Array(types.int64, 2, "C")(types.Array(types.int8, 2, "C", readonly=True),
                                      types.Array(types.float64, 2, "C", readonly=True), _INTS),
      nogil=True, cache=True)
def slot_counts(fl, fv, rows):
    """For each slot (a row of ``fl``, flags slot by line), over the lines ``rows``: how
    many lines hold each flag (columns 0 to 5), and how many hold a number whose double
    is NaN (flag 0 or 1 with NaN in ``fv``: the values the float cast reads; column 6).
    One pass over the slots' flags rather than NumPy's few."""
    k = fl.shape[0]
    out = np.zeros((k, 7), np.int64)
    for i in range(k):
        for t in range(len(rows)):
            r = rows[t]
            f = fl[i, r]
            out[i, f] += 1
            if f <= 1 and fv[i, r] != fv[i, r]:
                out[i, 6] += 1
    return out
