/* The shape scanner's loops (regime_dash/ingest/shape_jit.py), compiled ahead of time.
 *
 * A line-for-line port of the numba kernels, so that a fresh process has the scanner
 * without loading numba (about a second). regime_dash/ingest/shape_native.py wraps these
 * functions with the numba module's signatures and allocates their outputs; the tests
 * hold the two to the same outputs, bit for bit, over awkward inputs.
 *
 * Every buffer is C-contiguous (the buffer protocol's simple request), its length checked
 * against the counts it must hold before any loop runs; the indices the loops follow
 * (line ends, value spans, rows, columns, flags) are checked where they are read, so a
 * wrong argument raises rather than reads outside a buffer. The loops run without the GIL.
 * Words are read 8 bytes at a time with memcpy (unaligned, little-endian: the module
 * refuses to load on a big-endian host).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

enum { NUMBER = 0, BOOL = 1, STRING = 2, NUL = 3 };
enum { MAX_INT_DIGITS = 18, MAX_EXP_DIGITS = 2, EXACT_DIGITS = 18, LEMIRE_Q_MIN = -27, LEMIRE_Q_MAX = 22 };
#define EXACT_MANTISSA ((uint64_t)1 << 53)
#define N_POW5 (LEMIRE_Q_MAX - LEMIRE_Q_MIN + 1)

/* fast_float's table of 5**q (128 bits, two words), and 10**0 to 10**22: given once by the
 * wrapper (computed in Python with exact integers), so there is one source of them. */
static uint64_t pow5_hi[N_POW5], pow5_lo[N_POW5];
static double exact_pow10[23];
static int tables_set = 0;

static const int64_t POW10_INT[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};
static const uint64_t U32 = 0xFFFFFFFFull, U9 = 0x1FFull, UMAX = 0xFFFFFFFFFFFFFFFFull;
static const uint64_t ZEROS = 0x3030303030303030ull, LOW7 = 0x7F7F7F7F7F7F7F7Full;
static const uint64_t PAST_NINE = 0x7676767676767676ull, HIGH_BITS = 0x8080808080808080ull;
static const uint64_t LOW_BITS = 0x0101010101010101ull, BYTE_PAIRS = 0x000000FF000000FFull;
static const uint64_t MUL_HI = 100ull + (1000000ull << 32), MUL_LO = 1ull + (10000ull << 32);
static const uint64_t LINE_FEEDS = 0x0A0A0A0A0A0A0A0Aull;

static inline uint64_t word_at(const uint8_t *s, int64_t i) {
    uint64_t w;
    memcpy(&w, s + i, 8);
    return w;
}

/* The 128-bit product of two words: one instruction where the compiler has 128-bit integers,
 * else four 32-bit products (shape_jit._mul128's; the same exact product either way). */
static inline void mul128(uint64_t a, uint64_t b, uint64_t *hi, uint64_t *lo) {
#ifdef __SIZEOF_INT128__
    unsigned __int128 p = (unsigned __int128)a * b;
    *hi = (uint64_t)(p >> 64);
    *lo = (uint64_t)p;
#else
    uint64_t a_lo = a & U32, a_hi = a >> 32, b_lo = b & U32, b_hi = b >> 32;
    uint64_t p0 = a_lo * b_lo, p1 = a_lo * b_hi, p2 = a_hi * b_lo, p3 = a_hi * b_hi;
    uint64_t mid = (p0 >> 32) + (p1 & U32) + (p2 & U32);
    *hi = p3 + (p1 >> 32) + (p2 >> 32) + (mid >> 32);
    *lo = (mid << 32) | (p0 & U32);
#endif
}

/* The double nearest m * 10**q (0 < m < 2**63, q in the table's range), ties to even;
 * NaN where the algorithm cannot vouch (shape_jit.lemire). */
static double lemire(uint64_t m, int64_t q) {
    static const int halves[6] = {32, 16, 8, 4, 2, 1};
    uint64_t w = m, hi, lo;
    int64_t lz = 0;
    for (int h = 0; h < 6; h++) {
        if (w < ((uint64_t)1 << (64 - halves[h]))) {
            w <<= halves[h];
            lz += halves[h];
        }
    }
    int64_t k = q - LEMIRE_Q_MIN;
    mul128(w, pow5_hi[k], &hi, &lo);
    if ((hi & U9) == U9) {
        uint64_t hi2, lo_unused;
        mul128(w, pow5_lo[k], &hi2, &lo_unused);
        uint64_t lo2 = lo + hi2;
        if (hi2 > lo2)
            hi += 1;
        lo = lo2;
        if ((hi & U9) == U9 && lo == UMAX)
            return NAN;
    }
    int64_t upper = (int64_t)(hi >> 63);
    uint64_t shift = (uint64_t)(upper + 9);
    uint64_t mant = hi >> shift;
    int64_t power2 = (((152170 + 65536) * q) >> 16) + 63 + upper - lz + 1023;
    if (power2 <= 0 || power2 >= 2046)
        return NAN;
    if (lo <= 1 && -4 <= q && q <= 23 && (mant & 3) == 1 && (mant << shift) == hi)
        mant ^= 1;
    mant = (mant + (mant & 1)) >> 1;
    if (mant >= ((uint64_t)2 << 52)) {
        mant = (uint64_t)1 << 52;
        power2 += 1;
    }
    /* ldexp(mant, power2 - 1075), its bits set directly: mant is in [2**52, 2**53) and
     * power2 in [1, 2046], so the double is normal, its exponent field power2 */
    uint64_t bits = ((uint64_t)power2 << 52) | (mant & (((uint64_t)1 << 52) - 1));
    double d;
    memcpy(&d, &bits, 8);
    return d;
}

/* How many leading bytes of w (first byte lowest) are ASCII digits (0 to 8). */
static inline int64_t leading_digits(uint64_t w) {
    uint64_t lo = w ^ ZEROS;
    uint64_t stop = (((lo & LOW7) + PAST_NINE) | lo) & HIGH_BITS;
    uint64_t first = stop & (0 - stop);
    uint64_t below = ((first - 1) >> 7) & LOW_BITS;
    return (int64_t)((below * LOW_BITS) >> 56);
}

/* The value of the first c bytes of w, ASCII digits (c from 0 to 8). */
static inline int64_t digits_value(uint64_t w, int64_t c) {
    if (c == 0)
        return 0;
    if (c < 8)
        w = (w << (8 * (8 - c))) | (ZEROS >> (8 * c));
    w -= ZEROS;
    w = w * 10 + (w >> 8);
    w = (((w & BYTE_PAIRS) * MUL_HI) + (((w >> 16) & BYTE_PAIRS) * MUL_LO)) >> 32;
    return (int64_t)(w & U32);
}

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static inline int is_digit(uint8_t b) { return b >= 48 && b <= 57; }

/* Whether the bytes of want (n of them) stand at buf[p:], before e. */
static inline int word_is(const uint8_t *buf, int64_t p, int64_t e, const char *want, int n) {
    for (int j = 0; j < n; j++)
        if (p + j >= e || buf[p + j] != (uint8_t)want[j])
            return 0;
    return 1;
}

typedef struct {
    int64_t end, flag, v, s, t;
} Value;

/* A value of kind (or null) at p, as shape_jit._value scans it; end -1 where none. */
static Value scan_value(const uint8_t *buf, int64_t p, int64_t e, int kind) {
    Value none = {-1, 0, 0, 0, 0};
    if (word_is(buf, p, e, "null", 4)) {
        Value v = {p + 4, 5, 0, 0, 0};
        return v;
    }
    if (kind == NUMBER) {
        int64_t x = p;
        int neg = x < e && buf[x] == 45;
        if (neg)
            x += 1;
        if (x < e && buf[x] == 73 && word_is(buf, x, e, "Infinity", 8)) {
            Value v = {x + 8, neg ? 4 : 3, 0, p, x + 8};
            return v;
        }
        if (x < e && buf[x] == 78 && !neg && word_is(buf, x, e, "NaN", 3)) {
            Value v = {x + 3, 2, 0, p, x + 3};
            return v;
        }
        none.s = p;
        return none;
    }
    if (kind == BOOL) {
        if (word_is(buf, p, e, "true", 4)) {
            Value v = {p + 4, 1, 0, 0, 0};
            return v;
        }
        if (word_is(buf, p, e, "false", 5)) {
            Value v = {p + 5, 0, 0, 0, 0};
            return v;
        }
        return none;
    }
    if (kind == STRING) {
        if (p >= e || buf[p] != 34)
            return none;
        int64_t s = p + 1, q = s;
        while (q < e) {
            uint8_t b = buf[q];
            if (b == 34 || b == 92 || b < 32)
                break;
            q += 1;
        }
        if (q >= e || buf[q] != 34)
            return none;
        Value v = {q + 1, 0, 0, s, q};
        return v;
    }
    return none;
}

typedef struct {
    const uint8_t *buf, *tail, *lits;
    int64_t nb, t0;
    const int64_t *starts, *ends, *lit_off;
    const int8_t *kinds;
    int64_t n, k;
    int64_t *vs, *ve, *iv;
    int8_t *fl;
    double *fv;
    uint8_t *ok;
} Match;

/* The digits at p (up to 8 a word, read from src at p - base, none past e) folded into *acc;
 * the position after them. */
static inline int64_t read_digits(const uint8_t *src, int64_t base, int64_t p, int64_t e, uint64_t *acc) {
    for (;;) {
        uint64_t w = word_at(src, p - base);
        int64_t c = min64(leading_digits(w), e - p);
        *acc = *acc * (uint64_t)POW10_INT[c] + (uint64_t)digits_value(w, c);
        p += c;
        if (c < 8)
            return p;
    }
}

/* A number by Python's grammar at p (a digit, or '-' and a digit), slot i of line r, as
 * shape_jit.match_lines reads it; the position after it, or -1 where the line goes the
 * other way. */
static int64_t match_number(const Match *M, const uint8_t *src, int64_t base, int64_t p, int64_t e,
                            size_t at) {
    const uint8_t *buf = M->buf;
    int64_t s = p;
    int neg = buf[p] == 45;
    if (neg)
        p += 1;
    int64_t q = p;
    uint64_t v = 0;
    p = read_digits(src, base, p, e, &v);
    int64_t nd = p - q;
    int good = nd <= MAX_INT_DIGITS && (nd == 1 || buf[q] != 48);
    int flag = 0;
    uint64_t m = v;
    int64_t ndig = nd, e10 = 0;
    if (p < e && buf[p] == 46) {
        p += 1;
        int64_t f0 = p;
        p = read_digits(src, base, p, e, &m);
        int64_t nf = p - f0;
        good = good && nf > 0;
        flag = 1;
        ndig = nd + nf;
        e10 = -nf;
    }
    if (p < e && (buf[p] == 101 || buf[p] == 69)) {
        p += 1;
        int minus = p < e && buf[p] == 45;
        if (p < e && (buf[p] == 43 || minus))
            p += 1;
        uint64_t w = word_at(src, p - base);
        int64_t nx = min64(leading_digits(w), e - p);
        int64_t ex = digits_value(w, nx);
        p += nx;
        good = good && 0 < nx && nx <= MAX_EXP_DIGITS;
        flag = 1;
        e10 = minus ? e10 - ex : e10 + ex;
    }
    if (!good)
        return -1;
    double dbl = NAN;
    if (ndig > EXACT_DIGITS && nd == 1 && buf[q] == 48) {
        int64_t z = q + 2;
        while (z < p && buf[z] == 48)
            z += 1;
        ndig -= z - q - 1;
    }
    if (ndig <= EXACT_DIGITS && m < EXACT_MANTISSA && -22 <= e10 && e10 <= 22) {
        double x = (double)(int64_t)m;
        dbl = e10 >= 0 ? x * exact_pow10[e10] : x / exact_pow10[-e10];
        dbl = neg ? -dbl : dbl;
    } else if (ndig <= EXACT_DIGITS && LEMIRE_Q_MIN <= e10 && e10 <= LEMIRE_Q_MAX) {
        dbl = lemire(m, e10);
        dbl = neg ? -dbl : dbl;
    }
    M->fv[at] = dbl;
    if (flag)
        M->fl[at] = 1;
    else if (v)
        M->iv[at] = neg ? -(int64_t)v : (int64_t)v;
    if (dbl != dbl) {
        M->vs[at] = s;
        M->ve[at] = p;
    }
    return p;
}

/* Whether the template's literal i stands at p (8 bytes a compare); 0 where not. */
static inline int literal_at(const Match *M, const uint8_t *src, int64_t base, int64_t p, int64_t a, int64_t size) {
    for (int64_t j = 0; j < size; j += 8) {
        uint64_t x = word_at(src, p + j - base) ^ word_at(M->lits, a + j);
        if (size - j < 8)
            x &= ((uint64_t)1 << (8 * (size - j))) - 1;
        if (x != 0)
            return 0;
    }
    return 1;
}

/* Line r: whether it matches the template (its values written as it goes). */
static int match_line(const Match *M, int64_t r) {
    const uint8_t *buf = M->buf;
    int64_t p = M->starts[r], e = M->ends[r];
    const uint8_t *src = M->buf;
    int64_t base = 0;
    if (e + 8 > M->nb) {
        src = M->tail;
        base = M->t0;
    }
    for (int64_t i = 0; i <= M->k; i++) {
        int64_t a = M->lit_off[i], size = M->lit_off[i + 1] - a;
        if (p + size > e || !literal_at(M, src, base, p, a, size))
            return 0;
        p += size;
        if (i == M->k)
            break;
        size_t at = (size_t)i * (size_t)M->n + (size_t)r;
        if (M->kinds[i] == NUMBER && p < e && (is_digit(buf[p]) || (buf[p] == 45 && p + 1 < e && is_digit(buf[p + 1])))) {
            p = match_number(M, src, base, p, e, at);
            if (p < 0)
                return 0;
            continue;
        }
        Value v = scan_value(buf, p, e, M->kinds[i]);
        if (v.end < 0)
            return 0;
        M->vs[at] = v.s;
        M->ve[at] = v.t;
        M->fl[at] = (int8_t)v.flag;
        M->iv[at] = v.v;
        p = v.end;
    }
    while (p < e && (buf[p] == 32 || buf[p] == 9 || buf[p] == 13))
        p += 1;
    return p == e;
}

/* ---- buffers in, checked ---------------------------------------------------------- */

typedef struct {
    Py_buffer b[16];
    int n;
} Buffers;

static void release(Buffers *B) {
    for (int i = 0; i < B->n; i++)
        PyBuffer_Release(&B->b[i]);
    B->n = 0;
}

/* The bytes of o (C-contiguous; writable where asked), holding count items of itemsize
 * bytes (count < 0: any whole number of them); NULL with an exception set where not. */
static void *take(Buffers *B, PyObject *o, int writable, Py_ssize_t itemsize, Py_ssize_t count,
                  const char *name, Py_ssize_t *items) {
    Py_buffer *view = &B->b[B->n];
    if (PyObject_GetBuffer(o, view, writable ? (PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) : PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    B->n += 1;
    Py_ssize_t have = view->len / itemsize;
    if (view->len % itemsize != 0 || (count >= 0 && have != count)) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes, not %zd items of %zd bytes", name, view->len,
                     count, itemsize);
        return NULL;
    }
    if (items)
        *items = have;
    return view->buf;
}

static PyObject *fail(Buffers *B) {
    release(B);
    return NULL;
}

static int need_tables(void) {
    if (!tables_set)
        PyErr_SetString(PyExc_RuntimeError, "the scanner's tables are not set (set_tables)");
    return tables_set;
}

/* ---- the module's functions --------------------------------------------------------- */

static PyObject *py_set_tables(PyObject *self, PyObject *args) {
    PyObject *hi_o, *lo_o, *p10_o;
    Buffers B = {.n = 0};
    if (!PyArg_ParseTuple(args, "OOO", &hi_o, &lo_o, &p10_o))
        return NULL;
    const void *hi = take(&B, hi_o, 0, 8, N_POW5, "pow5_hi", NULL);
    const void *lo = hi ? take(&B, lo_o, 0, 8, N_POW5, "pow5_lo", NULL) : NULL;
    const void *p10 = lo ? take(&B, p10_o, 0, 8, 23, "pow10", NULL) : NULL;
    if (!p10)
        return fail(&B);
    memcpy(pow5_hi, hi, sizeof pow5_hi);
    memcpy(pow5_lo, lo, sizeof pow5_lo);
    memcpy(exact_pow10, p10, sizeof exact_pow10);
    tables_set = 1;
    release(&B);
    Py_RETURN_NONE;
}

static PyObject *py_lemire(PyObject *self, PyObject *args) {
    unsigned long long m;
    long long q;
    if (!PyArg_ParseTuple(args, "KL", &m, &q) || !need_tables())
        return NULL;
    if (m == 0 || m >= ((uint64_t)1 << 63) || q < LEMIRE_Q_MIN || q > LEMIRE_Q_MAX) {
        PyErr_Format(PyExc_ValueError, "lemire: m=%llu, q=%lld outside 0 < m < 2**63, %d <= q <= %d", m, q,
                     LEMIRE_Q_MIN, LEMIRE_Q_MAX);
        return NULL;
    }
    return PyFloat_FromDouble(lemire((uint64_t)m, (int64_t)q));
}

/* The lines' spans, the template's offsets and the tail's reach, checked before the scan. */
static int check_match(const Match *M, Py_ssize_t tail_len, Py_ssize_t lits_len) {
    for (int64_t i = 0; i <= M->k + 1; i++) {
        if (M->lit_off[i] < 0 || (i <= M->k && M->lit_off[i + 1] < M->lit_off[i]) || M->lit_off[i] + 8 > lits_len) {
            PyErr_Format(PyExc_ValueError, "lit_off[%lld] = %lld: outside the padded literals (%zd bytes)",
                         (long long)i, (long long)M->lit_off[i], lits_len);
            return 0;
        }
    }
    if (M->t0 < 0 || M->t0 > M->nb || tail_len != M->nb - M->t0 + 8) {
        PyErr_Format(PyExc_ValueError, "t0 = %lld with a tail of %zd bytes for %lld bytes", (long long)M->t0,
                     tail_len, (long long)M->nb);
        return 0;
    }
    for (int64_t r = 0; r < M->n; r++) {
        int64_t p = M->starts[r], e = M->ends[r];
        if (p < 0 || p > e || e > M->nb || (e + 8 > M->nb && p < M->t0)) {
            PyErr_Format(PyExc_ValueError, "line %lld spans [%lld, %lld): outside the %lld bytes (t0 %lld)",
                         (long long)r, (long long)p, (long long)e, (long long)M->nb, (long long)M->t0);
            return 0;
        }
    }
    return 1;
}

static PyObject *py_match_lines(PyObject *self, PyObject *args) {
    PyObject *o[13];
    long long t0;
    Buffers B = {.n = 0};
    Match M;
    Py_ssize_t tail_len, lits_len, nb, n, k, kk;
    if (!PyArg_ParseTuple(args, "OOLOOOOOOOOOOO", &o[0], &o[1], &t0, &o[2], &o[3], &o[4], &o[5], &o[6], &o[7],
                          &o[8], &o[9], &o[10], &o[11], &o[12]) || !need_tables())
        return NULL;
    if (!(M.buf = take(&B, o[0], 0, 1, -1, "buf", &nb)) || !(M.tail = take(&B, o[1], 0, 1, -1, "tail", &tail_len))
        || !(M.starts = take(&B, o[2], 0, 8, -1, "starts", &n)) || !(M.ends = take(&B, o[3], 0, 8, n, "ends", NULL))
        || !(M.lits = take(&B, o[4], 0, 1, -1, "lits", &lits_len))
        || !(M.lit_off = take(&B, o[5], 0, 8, -1, "lit_off", &kk)) || kk < 2
        || !(M.kinds = take(&B, o[6], 0, 1, kk - 2, "kinds", &k))
        || !(M.vs = take(&B, o[7], 1, 8, k * n, "vs", NULL)) || !(M.ve = take(&B, o[8], 1, 8, k * n, "ve", NULL))
        || !(M.fl = take(&B, o[9], 1, 1, k * n, "fl", NULL)) || !(M.iv = take(&B, o[10], 1, 8, k * n, "iv", NULL))
        || !(M.fv = take(&B, o[11], 1, 8, k * n, "fv", NULL)) || !(M.ok = take(&B, o[12], 1, 1, n, "ok", NULL))) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "lit_off: fewer than 2 offsets (two more than slots)");
        return fail(&B);
    }
    M.nb = nb;
    M.t0 = t0;
    M.n = n;
    M.k = k;
    if (!check_match(&M, tail_len, lits_len))
        return fail(&B);
    Py_BEGIN_ALLOW_THREADS
    for (int64_t r = 0; r < n; r++)
        M.ok[r] = (uint8_t)match_line(&M, r);
    Py_END_ALLOW_THREADS
    release(&B);
    Py_RETURN_NONE;
}

typedef struct {
    const uint8_t *buf;
    const int64_t *vs, *ve, *rows, *cols;
    const int8_t *fl;
    const uint8_t *zero;
    int64_t nb, row_len, n, nc;
} Spans;

/* How many slots ``cells`` flags (slot by line) of ``row_len`` lines are, each of ``rows``
 * (``n`` of them) checked to be one of those lines; -1 with an exception set where not. */
static Py_ssize_t slots_of(Py_ssize_t cells, Py_ssize_t row_len, const int64_t *rows, Py_ssize_t n) {
    if (row_len < 0 || (row_len == 0 ? cells != 0 : cells % row_len != 0)) {
        PyErr_Format(PyExc_ValueError, "fl: %zd cells are no whole number of rows of %zd", cells, row_len);
        return -1;
    }
    for (Py_ssize_t t = 0; t < n; t++)
        if (rows[t] < 0 || rows[t] >= row_len) {
            PyErr_Format(PyExc_ValueError, "rows[%zd] = %lld: not a line of %zd", t, (long long)rows[t], row_len);
            return -1;
        }
    return row_len ? cells / row_len : 0;
}

/* Takes buf, vs, ve, fl (slot by line, row_len lines), rows and cols, each checked. */
static int take_spans(Buffers *B, Spans *S, PyObject **o, Py_ssize_t row_len) {
    Py_ssize_t nb, cells, n, nc;
    if (!(S->buf = take(B, o[0], 0, 1, -1, "buf", &nb)) || !(S->fl = take(B, o[3], 0, 1, -1, "fl", &cells))
        || !(S->vs = take(B, o[1], 0, 8, cells, "vs", NULL)) || !(S->ve = take(B, o[2], 0, 8, cells, "ve", NULL))
        || !(S->rows = take(B, o[4], 0, 8, -1, "rows", &n)) || !(S->cols = take(B, o[5], 0, 8, -1, "cols", &nc)))
        return 0;
    Py_ssize_t slots = slots_of(cells, row_len, S->rows, n);
    if (slots < 0)
        return 0;
    for (Py_ssize_t j = 0; j < nc; j++)
        if (S->cols[j] < 0 || S->cols[j] >= slots) {
            PyErr_Format(PyExc_ValueError, "cols[%zd] = %lld: not a slot of %zd", j, (long long)S->cols[j], slots);
            return 0;
        }
    S->nb = nb;
    S->row_len = row_len;
    S->n = n;
    S->nc = nc;
    return 1;
}

/* The span of slot c in line r, where it lies in buf; 0 where it does not. */
static inline int span_of(const Spans *S, int64_t c, int64_t r, int64_t *a, int64_t *size) {
    size_t at = (size_t)c * (size_t)S->row_len + (size_t)r;
    *a = S->vs[at];
    *size = S->ve[at] - *a;
    return *a >= 0 && *size >= 0 && *a + *size <= S->nb;
}

static PyObject *bad_span(Buffers *B) {
    PyErr_SetString(PyExc_ValueError, "a value's span lies outside buf");
    return fail(B);
}

/* gather(buf, vs, ve, fl, row_len, rows, cols, zero, off) -> bytearray: shape_jit.gather, its
 * offsets written into off (int32, one more than rows times cols). */
static PyObject *py_gather(PyObject *self, PyObject *args) {
    PyObject *o[8];
    Py_ssize_t row_len;
    Buffers B = {.n = 0};
    Spans S;
    if (!PyArg_ParseTuple(args, "OOOOnOOOO", &o[0], &o[1], &o[2], &o[3], &row_len, &o[4], &o[5], &o[6], &o[7]))
        return NULL;
    int32_t *off;
    if (!take_spans(&B, &S, o, row_len) || !(S.zero = take(&B, o[6], 0, 1, S.nc, "zero", NULL))
        || !(off = take(&B, o[7], 1, 4, S.nc * S.n + 1, "off", NULL)))
        return fail(&B);
    int64_t q = 0, a, size;
    int bad = 0;
    off[0] = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t j = 0; j < S.nc && !bad; j++)
        for (int64_t t = 0; t < S.n; t++) {
            int64_t c = S.cols[j], r = S.rows[t];
            int8_t f = S.fl[(size_t)c * (size_t)S.row_len + (size_t)r];
            if (S.zero[j] && f >= 2)
                q += 1;
            else if (f != 5) {
                if (!span_of(&S, c, r, &a, &size)) {
                    bad = 1;
                    break;
                }
                q += size;
            }
            if (q > INT32_MAX) {
                bad = 2;
                break;
            }
            off[j * S.n + t + 1] = (int32_t)q;
        }
    Py_END_ALLOW_THREADS
    if (bad == 2) {
        PyErr_SetString(PyExc_OverflowError, "gather: the values pass 2**31 bytes");
        return fail(&B);
    }
    if (bad)
        return bad_span(&B);
    PyObject *out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)q);
    if (!out)
        return fail(&B);
    uint8_t *dst = (uint8_t *)PyByteArray_AS_STRING(out);
    Py_BEGIN_ALLOW_THREADS
    for (int64_t j = 0; j < S.nc; j++)
        for (int64_t t = 0; t < S.n; t++) {
            int64_t c = S.cols[j], r = S.rows[t];
            int8_t f = S.fl[(size_t)c * (size_t)S.row_len + (size_t)r];
            int32_t at = off[j * S.n + t];
            if (S.zero[j] && f >= 2)
                dst[at] = 48;
            else if (f != 5) {
                span_of(&S, c, r, &a, &size);  /* checked in the pass above */
                memcpy(dst + at, S.buf + a, (size_t)size);
            }
        }
    Py_END_ALLOW_THREADS
    release(&B);
    return out;
}

/* views(buf, vs, ve, fl, row_len, rows, cols, out): shape_jit.views into out (int32,
 * rows times cols entries of 4, zeroed). */
static PyObject *py_views(PyObject *self, PyObject *args) {
    PyObject *o[7];
    Py_ssize_t row_len;
    Buffers B = {.n = 0};
    Spans S;
    if (!PyArg_ParseTuple(args, "OOOOnOOO", &o[0], &o[1], &o[2], &o[3], &row_len, &o[4], &o[5], &o[6]))
        return NULL;
    uint8_t *raw;
    if (!take_spans(&B, &S, o, row_len) || !(raw = take(&B, o[6], 1, 16, S.nc * S.n, "out", NULL)))
        return fail(&B);
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t j = 0; j < S.nc && !bad; j++)
        for (int64_t t = 0; t < S.n; t++) {
            int64_t c = S.cols[j], r = S.rows[t], a, size;
            int8_t f = S.fl[(size_t)c * (size_t)S.row_len + (size_t)r];
            uint8_t *entry = raw + (size_t)(j * S.n + t) * 16;
            if (f >= 2) {
                int32_t one = 1;
                memcpy(entry, &one, 4);
                entry[4] = 48;
                continue;
            }
            if (!span_of(&S, c, r, &a, &size) || size > INT32_MAX || a > INT32_MAX) {
                bad = 1;
                break;
            }
            int32_t len32 = (int32_t)size, a32 = (int32_t)a;
            memcpy(entry, &len32, 4);
            if (size <= 12)
                memcpy(entry + 4, S.buf + a, (size_t)size);
            else {
                memcpy(entry + 4, S.buf + a, 4);
                memcpy(entry + 12, &a32, 4);
            }
        }
    Py_END_ALLOW_THREADS
    if (bad)
        return bad_span(&B);
    release(&B);
    Py_RETURN_NONE;
}

static inline uint64_t feeds(uint64_t w) {
    uint64_t x = w ^ LINE_FEEDS;
    return ~(((x & LOW7) + LOW7) | x) & HIGH_BITS;
}

/* line_breaks(buf, out) -> count: shape_jit.line_breaks into out (int64, len(buf) // 64 + 8
 * entries); -1 where there are more line feeds than that. */
static PyObject *py_line_breaks(PyObject *self, PyObject *args) {
    PyObject *o[2];
    Buffers B = {.n = 0};
    Py_ssize_t n, cap;
    if (!PyArg_ParseTuple(args, "OO", &o[0], &o[1]))
        return NULL;
    const uint8_t *buf;
    int64_t *out;
    if (!(buf = take(&B, o[0], 0, 1, -1, "buf", &n)) || !(out = take(&B, o[1], 1, 8, -1, "out", &cap)))
        return fail(&B);
    if (cap != n / 64 + 8) {
        PyErr_Format(PyExc_ValueError, "out: %zd entries, not %zd", cap, n / 64 + 8);
        return fail(&B);
    }
    int64_t c = 0, blocks = n / 32;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < blocks && c >= 0; i++) {
        int64_t a = 32 * i;
        if (!(feeds(word_at(buf, a)) | feeds(word_at(buf, a + 8)) | feeds(word_at(buf, a + 16))
              | feeds(word_at(buf, a + 24))))
            continue;
        for (int64_t j = 0; j < 4 && c >= 0; j++) {
            uint64_t z = feeds(word_at(buf, a + 8 * j));
            while (z) {
                if (c == cap) {
                    c = -1;
                    break;
                }
                uint64_t bit = z & (0 - z);
                uint64_t below = ((bit - 1) >> 7) & LOW_BITS;
                out[c++] = a + 8 * j + (int64_t)((below * LOW_BITS) >> 56);
                z ^= bit;
            }
        }
    }
    for (int64_t p = 32 * blocks; p < n && c >= 0; p++)
        if (buf[p] == 10) {
            if (c == cap)
                c = -1;
            else
                out[c++] = p;
        }
    Py_END_ALLOW_THREADS
    release(&B);
    return PyLong_FromLongLong(c);
}

/* slot_counts(fl, fv, row_len, rows, out): shape_jit.slot_counts into out (int64, slots by 7,
 * zeroed). */
static PyObject *py_slot_counts(PyObject *self, PyObject *args) {
    PyObject *o[4];
    Py_ssize_t row_len, cells, n;
    Buffers B = {.n = 0};
    if (!PyArg_ParseTuple(args, "OOnOO", &o[0], &o[1], &row_len, &o[2], &o[3]))
        return NULL;
    const int8_t *fl;
    const double *fv;
    const int64_t *rows;
    int64_t *out;
    if (!(fl = take(&B, o[0], 0, 1, -1, "fl", &cells)) || !(fv = take(&B, o[1], 0, 8, cells, "fv", NULL))
        || !(rows = take(&B, o[2], 0, 8, -1, "rows", &n)))
        return fail(&B);
    Py_ssize_t k = slots_of(cells, row_len, rows, n);
    if (k < 0 || !(out = take(&B, o[3], 1, 8, k * 7, "out", NULL)))
        return fail(&B);
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < k && !bad; i++)
        for (Py_ssize_t t = 0; t < n; t++) {
            size_t at = (size_t)i * (size_t)row_len + (size_t)rows[t];
            int8_t f = fl[at];
            if (f < 0 || f > 5) {
                bad = 1;
                break;
            }
            out[i * 7 + f] += 1;
            if (f <= 1 && fv[at] != fv[at])
                out[i * 7 + 6] += 1;
        }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "fl: a flag outside 0 to 5");
        return fail(&B);
    }
    release(&B);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"set_tables", py_set_tables, METH_VARARGS, "set_tables(pow5_hi, pow5_lo, pow10): the conversion tables"},
    {"lemire", py_lemire, METH_VARARGS, "lemire(m, q) -> the double nearest m * 10**q, or NaN"},
    {"match_lines", py_match_lines, METH_VARARGS,
     "match_lines(buf, tail, t0, starts, ends, lits, lit_off, kinds, vs, ve, fl, iv, fv, ok)"},
    {"gather", py_gather, METH_VARARGS, "gather(buf, vs, ve, fl, row_len, rows, cols, zero, off) -> bytearray"},
    {"views", py_views, METH_VARARGS, "views(buf, vs, ve, fl, row_len, rows, cols, out)"},
    {"line_breaks", py_line_breaks, METH_VARARGS, "line_breaks(buf, out) -> count, or -1"},
    {"slot_counts", py_slot_counts, METH_VARARGS, "slot_counts(fl, fv, row_len, rows, out)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_shape_scan", "The shape scanner's loops, compiled ahead of time.", -1, methods,
};

PyMODINIT_FUNC PyInit__shape_scan(void) {
    const uint16_t probe = 1;
    if (*(const uint8_t *)&probe != 1) {
        PyErr_SetString(PyExc_ImportError, "the shape scanner reads words little-endian: not this host");
        return NULL;
    }
    return PyModule_Create(&module);
}
