"""The shape path: lines of one shape read by a compiled scanner, ahead of Arrow.

A diag's lines are one shape: the same keys in the same order with the same spacing,
only the values differ. A chunk's first candidate line is cut into its *literals* (the
bytes between values: keys, punctuation, spacing) and its *slots* (one value each, of a
kind: number, bool, string, null). A line *matches* when it is exactly those literals
with a value of each slot's kind (or ``null``) between them, then only blanks. That
decomposition is the line's JSON reading, so a matched line provably means what the
reference (:func:`json.loads`, flattened) makes of it, provided the template line is
checked against the reference once (same flattened keys, in order, none repeated) and
the scanner accepts only what Python's ``json`` accepts:

* numbers by Python's grammar (``-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?``) and
  the ``NaN``, ``Infinity``, ``-Infinity`` tokens; integers of at most 18 digits (so
  int64) and exponents of at most 2 digits (so float64: no ``1e400``);
* strings without an escape or a control byte, their UTF-8 validated by Arrow.

Floats are converted by the scanner where Clinger's fast path makes the conversion one
correctly rounded IEEE operation (at most 18 digits below 2**53, a power of ten up to
10**22) or Eisel and Lemire's algorithm rounds it correctly (at most 18 digits, 10**-27
to 10**22: the 17-digit texts of float32 values), the rest by Python's ``float`` where a
column of a chunk has a few, else by Arrow's string-to-double cast (both correctly
rounded: the same double). Any other line, or a chunk the scanner
cannot vouch for, goes the usual way (:mod:`regime_dash.ingest.arrow`), so the result
never depends on this path.

The kernels are the scanner compiled ahead of time (:mod:`~regime_dash.ingest.shape_native`,
built by ``pip install`` where a C compiler is present), ready at once for any source
but a small one. Without it, numba's (:mod:`~regime_dash.ingest.shape_jit`, the same
loops) load on a background thread the first time a large source is read
(:func:`worth_loading`, :func:`start_loading`); until they are ready (cached on disk
after the first compile), chunks go the usual way, so a small ingest or a first run
never waits. Both give the same outputs, bit for bit (the tests hold them to it).
"""
from __future__ import annotations

import functools
import json
import re
import sys
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from regime_dash.ingest.arrays import from_numpy, to_numpy
from regime_dash.ingest.reference import flatten_into
from regime_dash.ingest.report import LINE_COLUMN
from regime_dash.ingest.shape_tables import BOOL, NULL, NUMBER, STRING

#: Fewest candidate lines in a chunk worth a template.
MIN_LINES = 64

#: Sources smaller than this load no numba into a process that has none: importing it
#: (and the scipy it brings) costs about what the scanner saves on a few hundred MB. A
#: process that has numba already (the app, whose engines use it) reads any large source
#: the shape way.
MIN_SOURCE_BYTES = 512 << 20

#: Sources smaller than this never take the shape path (Arrow reads them as fast).
MIN_WARM_BYTES = 16 << 20

_state: dict[str, Any] = {"kernels": None, "thread": None, "failed": False}
_lock = threading.Lock()


@functools.cache
def native() -> Any:
    """The scanner compiled ahead of time (:mod:`~regime_dash.ingest.shape_native`), or
    ``None`` where the package was installed without it (no C compiler then); looked for
    once a process, not at every ingest."""
    try:
        from regime_dash.ingest import shape_native
    except ImportError:
        return None
    return shape_native


def load_numba() -> Any:
    """The numba scanner (:mod:`~regime_dash.ingest.shape_jit`), compiled or loaded from
    numba's disk cache by one tiny call each; raises where numba cannot compile here."""
    from regime_dash.ingest import shape_jit as k

    if sys.byteorder != "little":  # the scanner's word reads are little-endian
        raise RuntimeError("the shape path needs a little-endian host")
    z = np.zeros((1, 1), np.int64)
    f = np.zeros((1, 1), np.int8)
    b = np.frombuffer(b"{}", np.uint8)
    k.match_lines(b, k.windows(b), k.windows(_padded(b)), 0, np.zeros(1, np.int64), np.full(1, 2, np.int64),
                  k.windows(_padded(b)), np.array([0, 1, 2], np.int64), np.zeros(1, np.int8), z, z.copy(),
                  f, z.copy(), np.zeros((1, 1)))
    k.gather(b, z, z.copy(), f, np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.bool_))
    k.views(b, z, z.copy(), f, np.zeros(1, np.int64), np.zeros(1, np.int64))
    return k


def _load() -> None:
    try:
        _state["kernels"] = load_numba()
    except Exception:  # noqa: BLE001 - no numba, or it cannot compile here: the usual way
        _state["failed"] = True


def _padded(lit: np.ndarray) -> np.ndarray:
    """The literals with the 8 bytes after them that the scanner's word reads may touch."""
    return np.concatenate((lit, np.zeros(8, np.uint8)))


def worth_loading(total: int | None) -> bool:
    """Whether a source of ``total`` bytes (``None``: unknown) should load the kernels: any
    but a small one where the compiled scanner is built in, else (numba's load costs about
    what it saves on a few hundred MB) a large one, or any where numba is loaded already."""
    if native() is not None:
        return total is None or total >= MIN_WARM_BYTES
    if total is None:
        return "numba" in sys.modules
    return total >= MIN_SOURCE_BYTES or ("numba" in sys.modules and total >= MIN_WARM_BYTES)


def start_loading() -> None:
    """Make the kernels ready: the built-in scanner at once, else numba's on a daemon
    thread (once per process)."""
    with _lock:
        if _state["kernels"] is not None or _state["thread"] is not None or _state["failed"]:
            return
        built_in = native()
        if built_in is not None:
            _state["kernels"] = built_in
            return
        t = threading.Thread(target=_load, name="ingest-shapes", daemon=True)
        _state["thread"] = t
        t.start()


def wait_loaded() -> Any:
    """Start loading the kernels if nothing has, wait for them; the kernels, or ``None``
    where they cannot load here."""
    start_loading()
    t = _state["thread"]
    if t is not None:
        t.join()
    return _state["kernels"]


def kernels() -> Any:
    """The compiled kernels module when ready, else ``None`` (never waits)."""
    return _state["kernels"]


@dataclass(frozen=True)
class Template:
    lit: np.ndarray       # the literals, end to end (uint8)
    lit_off: np.ndarray   # literal i is lit[lit_off[i]:lit_off[i + 1]]; one more than slots
    kinds: np.ndarray     # int8 per slot
    names: tuple[str, ...]  # the flattened column of each slot


_TOKEN = re.compile(rb'"[^"\\\x00-\x1f]*"|-?[0-9][0-9.eE+-]*|true|false|null|NaN|-?Infinity')


def _scan(line: bytes) -> tuple[list[bytes], list[int], list[str]] | None:
    """Literals, slot kinds and dotted paths of an object line of scalars and objects
    (``None`` for anything else: arrays, escapes in keys or strings)."""
    lits: list[bytes] = []
    kinds: list[int] = []
    names: list[str] = []
    stack: list[str] = []  # the dotted prefix of each open object
    key = ""
    expect = "value"  # what may come next: value, key, key or end, colon, comma or end
    i, pos, n = 0, 0, len(line)
    while i < n:
        c = line[i]
        if c in b" \t\r":
            i += 1
            continue
        if expect in ("key", "key_or_end") and c == 0x22:
            m = _TOKEN.match(line, i)
            if m is None:
                return None
            key, i, expect = m.group()[1:-1].decode("utf-8"), m.end(), "colon"
        elif expect in ("key_or_end", "comma_or_end") and c == 0x7D:  # }
            stack.pop()
            i += 1
            expect = "comma_or_end"
            if not stack:
                break
        elif expect == "colon" and c == 0x3A:
            i, expect = i + 1, "value"
        elif expect == "comma_or_end" and c == 0x2C:
            i, expect = i + 1, "key"
        elif expect == "value" and c == 0x7B:  # {
            stack.append(stack[-1] + key + "." if stack else "")
            i, expect = i + 1, "key_or_end"
        elif expect == "value" and stack:
            m = _TOKEN.match(line, i)
            if m is None:
                return None
            tok = m.group()
            lits.append(line[pos:i])
            kinds.append(STRING if c == 0x22 else BOOL if tok in (b"true", b"false") else
                         NULL if tok == b"null" else NUMBER)
            names.append(stack[-1] + key)
            pos = i = m.end()
            expect = "comma_or_end"
        else:
            return None
    if stack or not line[:i].endswith(b"}") or line[i:].strip(b" \t\r"):
        return None
    lits.append(line[pos:i])
    return lits, kinds, names


def template_of(line: bytes) -> Template | None:
    """The template of one line, or ``None`` where the shape path cannot vouch for it."""
    scanned = _scan(line)
    if scanned is None:
        return None
    lits, kinds, names = scanned
    try:
        obj = json.loads(line.decode("utf-8"))
        flat: dict[str, Any] = {}
        flatten_into("", obj, flat)
    except (ValueError, RecursionError, TypeError, AttributeError):
        return None
    # the reference's reading of the line must be the slots, in order: no repeated key, no
    # dotted key colliding with a nested path, nothing the scan above misread
    if list(flat) != names or len(set(names)) != len(names) or LINE_COLUMN in flat:
        return None
    for v, kind in zip(flat.values(), kinds):
        want = {NUMBER: (int, float), BOOL: (bool,), STRING: (str,), NULL: (type(None),)}[kind]
        if isinstance(v, bool) != (kind == BOOL) or not isinstance(v, want):
            return None
    lit = np.frombuffer(b"".join(lits), np.uint8)
    off = np.cumsum([0] + [len(x) for x in lits]).astype(np.int64)
    return Template(lit, off, np.array(kinds, np.int8), tuple(names))


def match(tpl: Template, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray):
    """Run the scanner over the lines; (matched mask, value starts, ends, flags, ints,
    exact doubles), the last five slot by line."""
    k = kernels()
    shape = (len(tpl.kinds), len(starts))
    vs, ve, iv = np.zeros(shape, np.int64), np.zeros(shape, np.int64), np.zeros(shape, np.int64)
    fl = np.zeros(shape, np.int8)
    fv = np.zeros(shape, np.float64)
    # the scanner reads 8 bytes at a time, up to 7 past a line's end: the lines that end
    # closer than that to the end of ``buf`` (the chunk's last) are read from a padded copy
    near = ends + 8 > len(buf)
    t0 = int(starts[near].min()) if near.any() else len(buf)
    tail = _padded(buf[t0:])
    ok = k.match_lines(buf, k.windows(buf), k.windows(tail), t0, starts, ends, k.windows(_padded(tpl.lit)),
                       tpl.lit_off, tpl.kinds, vs, ve, fl, iv, fv)
    return ok, vs, ve, fl, iv, fv


def _texts(buf, vs, ve, fl, rows, cols: list[int]) -> list[pa.Array]:
    """The values of string columns ``cols`` in ``rows`` as string arrays, from one gather
    (no validity: see :func:`~regime_dash.ingest.shape_jit.gather` for what stands for what)."""
    if not cols:
        return []
    off, data = kernels().gather(buf, vs, ve, fl, rows, np.array(cols, np.int64),
                                 np.zeros(len(cols), np.bool_))
    n = len(rows)
    whole = pa.StringArray.from_buffers(n * len(cols), pa.py_buffer(off), pa.py_buffer(data))
    return [whole.slice(j * n, n) for j in range(len(cols))]


def _number_texts(buf, vs, ve, fl, rows, cols: list[int]) -> list[pa.Array]:
    """The values of number columns ``cols`` in ``rows`` as string views into ``buf`` (NaN,
    infinities and nulls as ``0``: :func:`~regime_dash.ingest.shape_jit.views`), for the
    float cast: no copy of the values' bytes."""
    if not cols:
        return []
    entries = kernels().views(buf, vs, ve, fl, rows, np.array(cols, np.int64))
    n = len(rows)
    whole = pa.Array.from_buffers(pa.string_view(), n * len(cols),
                                  [None, pa.py_buffer(entries), pa.py_buffer(buf)])
    return [whole.slice(j * n, n) for j in range(len(cols))]


def _flag_counts(sub: np.ndarray) -> np.ndarray:
    """How many lines hold each flag (0 to 5) in each slot (``sub``: flags, slot by line):
    one pass over the flags for every slot's questions, not a pass a question a slot."""
    k = len(sub)
    keys = sub.astype(np.intp) + 6 * np.arange(k, dtype=np.intp)[:, None]
    return np.bincount(keys.ravel(), minlength=6 * k).reshape(k, 6)


def _slot_counts(fl, fv, rows, sub) -> tuple[np.ndarray, np.ndarray]:
    """(:func:`_flag_counts` of the flags ``sub`` of the matched lines ``rows``, whether
    each slot holds a number whose double is NaN there: a value the float cast reads), from
    one compiled pass where the kernels are loaded. The doubles of slots other than
    numbers are 0, never NaN."""
    k = kernels()
    if k is not None:
        both = k.slot_counts(fl, fv, rows)
        return both[:, :6], both[:, 6] > 0
    exact = fv if len(rows) == fv.shape[1] else fv[:, rows]
    return _flag_counts(sub), ((sub <= 1) & np.isnan(exact)).any(axis=1)


#: Values of one column of a chunk converted by Python's ``float`` rather than Arrow's cast.
_FEW_CASTS = 512


def _float(f: np.ndarray, exact: np.ndarray, texts, counts: np.ndarray, cast: bool) -> pa.Array:
    """A float64 column: the scanner's exact doubles (``exact``), the values it could not
    vouch for (NaN there: beyond both of its conversions; ``cast``: whether there are any)
    converted from their text (``texts(rows)``: their string views) by Python's ``float``
    where they are few, else by Arrow's cast, then NaN and the
    infinities by their flags (``counts``: the column's :func:`_flag_counts`)."""
    if not cast and not counts[2:5].any():
        # every value is the scanner's double: the column is ``exact`` as it is, no copy
        return from_numpy(exact, f == 5 if counts[5] else None)
    vals = np.array(exact)  # a copy: filled in below
    need = np.flatnonzero((f <= 1) & np.isnan(vals))
    if 0 < len(need) <= _FEW_CASTS:
        # Python's float is correctly rounded too (the same double): a few values cost less
        # this way than importing pyarrow.compute
        vals[need] = [float(t) for t in texts(need).to_pylist()]
    elif len(need):
        import pyarrow.compute as pc  # only where many need it

        vals[need] = to_numpy(pc.cast(texts(need), pa.float64()))
    if counts[2:5].any():
        vals[f == 2] = np.nan
        vals[f == 3] = np.inf
        vals[f == 4] = -np.inf
    return from_numpy(vals, f == 5 if counts[5] else None)


def _string(f: np.ndarray, text: pa.Array) -> pa.Array:
    null = f == 5
    if null.any():
        import pyarrow.compute as pc

        text = pc.if_else(from_numpy(null), pa.nulls(1, pa.string())[0], text)
    text.validate(full=True)  # UTF-8 (raises: the chunk goes the usual way)
    return text


def table_of(tpl: Template, buf, matched, line_numbers: np.ndarray) -> pa.Table:
    """The flattened table of the matched lines (``line_numbers``: theirs), as the fast
    path would give it: int64 for integers, float64 where a slot holds any other number."""
    ok, vs, ve, fl, iv, fv = matched
    rows = np.flatnonzero(ok)
    whole = len(rows) == len(ok)
    sub = fl if whole else fl[:, rows]
    counts, casts = _slot_counts(fl, fv, rows, sub)
    values = counts[:, :5].any(axis=1)  # a slot holding anything but null
    nulls = counts[:, 5] > 0
    # a number slot is float64 when it holds a fraction, an exponent, NaN or an infinity
    floats = values & (tpl.kinds == NUMBER) & counts[:, 1:5].any(axis=1)
    strings = np.flatnonzero(values & (tpl.kinds == STRING)).tolist()
    texts = dict(zip(strings, _texts(buf, vs, ve, fl, rows, strings)))
    cols = [from_numpy(np.asarray(line_numbers, dtype=np.int64))]
    for i, kind in enumerate(tpl.kinds.tolist()):
        f = sub[i]
        if kind == NULL or not values[i]:
            cols.append(pa.nulls(len(rows)))
        elif kind == BOOL:
            cols.append(from_numpy(f == 1, f == 5 if nulls[i] else None))
        elif kind == STRING:
            cols.append(_string(f, texts[i]))
        elif floats[i]:
            cols.append(_float(f, fv[i] if whole else fv[i, rows],
                               lambda need, i=i: _number_texts(buf, vs, ve, fl, rows[need], [i])[0],
                               counts[i], bool(casts[i])))
        else:
            cols.append(from_numpy(iv[i] if whole else iv[i, rows], f == 5 if nulls[i] else None))
    return pa.Table.from_arrays(cols, names=[LINE_COLUMN, *tpl.names])
