"""The shape scanner compiled ahead of time (ingest/_shape_scan.c, through
ingest/shape_native.py) gives numba's kernels' outputs (ingest/shape_jit.py) bit for bit:
every output array of every kernel, over lines of awkward values, corrupted bytes, views
at every alignment and lines at the very end of a buffer; and it refuses, with the
offending value named, arguments that would make it read outside its buffers.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from regime_dash.ingest import shape_tables, shapes
from tests.test_ingest_shapes import scanner


@pytest.fixture(scope="module")
def c_and_numba():
    return scanner("C"), scanner("numba")


def _bits(x: np.ndarray) -> np.ndarray:
    """Doubles as their bit patterns (NaN's included), for an exact comparison."""
    return np.ascontiguousarray(x, np.float64).view(np.int64)


def test_lemire_gives_numba_s_double_and_python_s_where_it_vouches(c_and_numba):
    c, jit = c_and_numba
    rng = np.random.default_rng(5)
    ms = [2 ** 53, 2 ** 53 + 1, 10 ** 18 - 1, 2 ** 63 - 1, 10 ** 17, 9007199254740993, 123456789012345678,
          *rng.integers(2 ** 53, 10 ** 18, 200, dtype=np.int64).tolist(), *rng.integers(1, 2 ** 53, 50).tolist()]
    vouched = 0
    for q in range(shape_tables.LEMIRE_Q_MIN, shape_tables.LEMIRE_Q_MAX + 1):
        for m in ms:
            a, b = c.lemire(m, q), float(jit.lemire(m, q))
            assert _bits(np.array([a])) == _bits(np.array([b])), (m, q, a, b)
            if a == a:
                vouched += 1
                assert a == float(f"{m}e{q}"), (m, q)
    assert vouched > 0.9 * len(ms) * (shape_tables.LEMIRE_Q_MAX - shape_tables.LEMIRE_Q_MIN + 1)
    with pytest.raises(ValueError, match="q=23"):
        c.lemire(5, 23)


_VALUES = {
    shapes.NUMBER: ["0", "-0", "7", "-12", "123456789012345678", "1234567890123456789", "01", "-", "1.", ".5",
                    "0.5", "-0.0", "3.14159", "1e5", "1E+22", "2e-5", "1e400", "1e123", "12345678.87654321",
                    "0.000000000000000000001234", "0.1000000000000000055511151231257827", "6.02214076e23",
                    "0.30000001192092896", "NaN", "-NaN", "Infinity", "-Infinity", "Inf", "null", "nul", "1e",
                    "1e+", "99999999999999999999", "4.9406564584124654e-324", "1.7976931348623157e308"],
    shapes.BOOL: ["true", "false", "null", "True", "tru", "1"],
    shapes.STRING: ['"train"', '""', '"tr\\u00e9in"', '"trèin"', '"a\\"b"', '"tr\x01in"', '"open', "null", "5"],
}


def _line(rng, kinds_of: list[int]) -> str:
    parts = [f'"k{i}": {rng.choice(_VALUES[kind])}' for i, kind in enumerate(kinds_of)]
    line = "{" + ", ".join(parts) + "}" + rng.choice(["", " ", "\t", "\r", "  x"])
    if rng.random() < 0.1:  # a corrupted byte anywhere
        pos = int(rng.integers(0, len(line)))
        line = line[:pos] + rng.choice(["Z", "{", "\"", " ", ":"]) + line[pos + 1:]
    return line


def _source(seed: int, n: int) -> tuple[bytes, list[int]]:
    rng = np.random.default_rng(seed)
    kinds_of = [int(k) for k in rng.choice([shapes.NUMBER] * 4 + [shapes.BOOL, shapes.STRING], 9)]
    template = "{" + ", ".join(f'"k{i}": {_VALUES[k][2 if k == shapes.NUMBER else 0]}'
                               for i, k in enumerate(kinds_of)) + "}"
    lines = [template] + [_line(rng, kinds_of) for _ in range(n)]
    return ("\n".join(lines)).encode(), kinds_of


def _match_with(k, monkeypatch, tpl, buf, starts, ends):
    monkeypatch.setitem(shapes._state, "kernels", k)
    return shapes.match(tpl, buf, starts, ends)


@pytest.mark.parametrize("seed", range(6))
def test_every_output_of_every_kernel_is_numba_s(c_and_numba, monkeypatch, seed):
    c, jit = c_and_numba
    data, _kinds = _source(seed, 400)
    for shift in range(8):  # the bytes at every alignment; the last line ends at the buffer's end
        raw = np.frombuffer(b" " * shift + data, np.uint8)
        buf = raw[shift:]
        ends = np.append(np.flatnonzero(buf == 10), len(buf)).astype(np.int64)
        starts = np.concatenate(([0], ends[:-1] + 1)).astype(np.int64)
        tpl = shapes.template_of(buf[starts[0]:ends[0]].tobytes())
        assert tpl is not None
        got = _match_with(c, monkeypatch, tpl, buf, starts, ends)
        want = _match_with(jit, monkeypatch, tpl, buf, starts, ends)
        ok = want[0]
        assert 0 < ok.sum() < len(ok), "the lines must both match and not"
        for name, a, b in zip(["ok", "vs", "ve", "fl", "iv"], got[:5], want[:5]):
            assert a.dtype == b.dtype and np.array_equal(a, b), (seed, shift, name)
        assert np.array_equal(_bits(got[5]), _bits(want[5])), (seed, shift, "fv")
        _, vs, ve, fl, _iv, fv = want
        rng = np.random.default_rng(seed * 8 + shift)
        for rows in (np.flatnonzero(ok), np.flatnonzero(ok & (rng.random(len(ok)) < 0.5)), np.arange(0)):
            cols = np.arange(len(tpl.kinds), dtype=np.int64)
            zero = rng.random(len(cols)) < 0.5
            for x, y in zip(c.gather(buf, vs, ve, fl, rows, cols, zero), jit.gather(buf, vs, ve, fl, rows, cols, zero)):
                assert x.dtype == y.dtype and np.array_equal(x, y), (seed, shift, "gather")
            numbers = np.flatnonzero(tpl.kinds == shapes.NUMBER).astype(np.int64)
            assert np.array_equal(c.views(buf, vs, ve, fl, rows, numbers), jit.views(buf, vs, ve, fl, rows, numbers))
            assert np.array_equal(c.slot_counts(fl, fv, rows), jit.slot_counts(fl, fv, rows))


def test_values_read_are_python_s():
    """The C scanner's integers and doubles are what ``json.loads`` reads (not just numba's):
    integers up to 18 digits, doubles' and float32s' shortest texts, exponents, long fractions."""
    rng = np.random.default_rng(99)
    lines = []
    for i in range(3000):
        f = float(rng.standard_normal() * 10.0 ** int(rng.integers(-30, 30)))
        g = float(np.float32(rng.standard_normal() * 10.0 ** int(rng.integers(-8, 8))))
        e = f"{rng.integers(1, 10 ** 9)}e{rng.integers(-40, 40)}"
        z = "0." + "0" * int(rng.integers(0, 12)) + str(rng.integers(1, 10 ** 17))
        lines.append(f'{{"i": {int(rng.integers(-10 ** 18 + 1, 10 ** 18))}, "f": {f!r}, "g": {g!r}, '
                     f'"e": {e}, "z": {z}}}')
    data = "\n".join(lines).encode()
    buf = np.frombuffer(data, np.uint8)
    ends = np.append(np.flatnonzero(buf == 10), len(buf)).astype(np.int64)
    starts = np.concatenate(([0], ends[:-1] + 1)).astype(np.int64)
    tpl = shapes.template_of(buf[starts[0]:ends[0]].tobytes())
    saved = shapes._state["kernels"]
    shapes._state["kernels"] = scanner("C")
    try:
        ok, _vs, _ve, fl, iv, fv = shapes.match(tpl, buf, starts, ends)
    finally:
        shapes._state["kernels"] = saved
    assert ok.all()
    converted = 0
    for r, line in enumerate(lines):
        for i, v in enumerate(json.loads(line).values()):
            if isinstance(v, int) and fl[i, r] == 0:
                assert iv[i, r] == v, (line, i)
            elif fv[i, r] == fv[i, r]:  # NaN: beyond both conversions, the cast's
                assert fv[i, r] == float(v) and np.signbit(fv[i, r]) == np.signbit(float(v)), (line, i)
                converted += 1
    assert converted > 0.75 * 4 * len(lines)  # the rest (exponents past the tables) are the cast's


def test_line_breaks_are_numba_s_and_numpy_s(c_and_numba):
    c, jit = c_and_numba
    rng = np.random.default_rng(8)
    for n in [0, 1, 7, 31, 32, 33, 63, 64, 65, 1000, 4096 + 17]:
        for density in (0.0, 0.01, 0.05, 0.5):
            raw = rng.integers(0, 256, n + 5).astype(np.uint8)
            raw[raw == 10] = 11
            raw[rng.random(n + 5) < density] = 10
            buf = raw[5:]
            a, b = c.line_breaks(buf, c.windows(buf)), jit.line_breaks(buf, jit.windows(buf))
            assert a.tolist() == b.tolist(), (n, density)
            if not (len(a) == 1 and a[0] == -1):
                assert a.tolist() == np.flatnonzero(buf == 10).tolist()


def _empty_outputs(k: int, n: int):
    shape = (k, n)
    return (np.zeros(shape, np.int64), np.zeros(shape, np.int64), np.zeros(shape, np.int8),
            np.zeros(shape, np.int64), np.zeros(shape))


def test_arguments_that_would_read_outside_a_buffer_are_refused_with_the_value(c_and_numba):
    c, _ = c_and_numba
    buf = np.frombuffer(b'{"a": 1}\n{"a": 2}\n', np.uint8)
    tpl = shapes.template_of(b'{"a": 1}')
    lw = np.concatenate((tpl.lit, np.zeros(8, np.uint8)))
    tail = np.concatenate((buf, np.zeros(8, np.uint8)))
    with pytest.raises(ValueError, match=r"line 1 spans \[9, 99\)"):
        c.match_lines(buf, buf, tail, 0, np.array([0, 9]), np.array([8, 99]), lw, tpl.lit_off, tpl.kinds,
                      *_empty_outputs(1, 2))
    with pytest.raises(ValueError, match="t0 = 5"):
        c.match_lines(buf, buf, tail, 5, np.array([0, 9]), np.array([8, 17]), lw, tpl.lit_off, tpl.kinds,
                      *_empty_outputs(1, 2))
    with pytest.raises(ValueError, match="vs: 8 bytes, not 2 items"):
        c.match_lines(buf, buf, tail, 0, np.array([0, 9]), np.array([8, 17]), lw, tpl.lit_off, tpl.kinds,
                      np.zeros((1, 1), np.int64), *_empty_outputs(1, 2)[1:])
    with pytest.raises(ValueError, match=r"lit_off\[2\] = 99"):
        c.match_lines(buf, buf, tail, 0, np.array([0]), np.array([8]), lw, np.array([0, 5, 99]), tpl.kinds,
                      *_empty_outputs(1, 1))
    vs, ve, fl, _iv, fv = _empty_outputs(1, 2)
    ve[0, 1] = 500
    with pytest.raises(ValueError, match="span lies outside buf"):
        c.gather(buf, vs, ve, fl, np.array([1]), np.array([0]), np.zeros(1, np.bool_))
    with pytest.raises(ValueError, match=r"rows\[0\] = 2: not a line of 2"):
        c.views(buf, vs, ve, fl, np.array([2]), np.array([0]))
    with pytest.raises(ValueError, match=r"cols\[0\] = 1: not a slot of 1"):
        c.gather(buf, vs, ve, fl, np.array([0]), np.array([1]), np.zeros(1, np.bool_))
    fl[0, 0] = 9
    with pytest.raises(ValueError, match="flag outside 0 to 5"):
        c.slot_counts(fl, fv, np.array([0, 1]))


def test_without_the_c_scanner_numba_s_loads_on_a_thread_for_large_sources_only(monkeypatch):
    """An install without a C compiler: small sources load nothing, a large one (or any once
    numba is in the process) starts numba's scanner on a thread, and ingest reads the same."""
    monkeypatch.setattr(shapes, "native", lambda: None)
    monkeypatch.setattr(shapes, "_state", {"kernels": None, "thread": None, "failed": False})
    assert not shapes.worth_loading(shapes.MIN_WARM_BYTES - 1)
    assert shapes.worth_loading(shapes.MIN_SOURCE_BYTES)
    import sys
    assert shapes.worth_loading(shapes.MIN_WARM_BYTES) == ("numba" in sys.modules)
    shapes.start_loading()
    assert shapes._state["thread"] is not None  # on a thread: the caller never waits
    k = shapes.wait_loaded()
    assert k is not None and k.__name__ == "regime_dash.ingest.shape_jit"


def test_with_the_c_scanner_any_but_a_small_source_has_it_at_once(monkeypatch):
    monkeypatch.setattr(shapes, "_state", {"kernels": None, "thread": None, "failed": False})
    assert shapes.worth_loading(shapes.MIN_WARM_BYTES) and shapes.worth_loading(None)
    assert not shapes.worth_loading(shapes.MIN_WARM_BYTES - 1)
    shapes.start_loading()
    assert shapes._state["thread"] is None and shapes.kernels() is scanner("C")


@pytest.mark.parametrize("few", [0, 10 ** 9])
def test_values_past_both_conversions_are_python_s_by_the_cast_or_by_float(monkeypatch, few):
    """The values neither conversion vouches for (exponents past the tables, 19+ digits) are
    converted by Arrow's cast or, a few a column, by Python's float: the same doubles."""
    from regime_dash.ingest import parse

    rng = np.random.default_rng(12)
    vals = [f"{int(d)}e{int(q)}" for d, q in zip(rng.integers(10 ** 16, 10 ** 18, 1500), rng.integers(-60, -28, 1500))]
    vals += ["0.12345678901234567890123", "1e-30", "-4.9406564584124654e-300"] * 20
    lines = [f'{{"step": {i}, "x": {v}, "y": {i}.25}}' for i, v in enumerate(vals)]
    monkeypatch.setattr(shapes, "_FEW_CASTS", few)
    monkeypatch.setitem(shapes._state, "kernels", scanner("C"))
    casts = []
    import pyarrow.compute as pc
    real = pc.cast
    monkeypatch.setattr(pc, "cast", lambda *a, **k: casts.append(1) or real(*a, **k))
    t, r = parse("\n".join(lines).encode())
    assert r.rejected_count == 0 and bool(casts) == (few == 0)
    got = np.asarray(t.column("x").to_numpy()).view(np.uint64)
    assert got.tolist() == np.array([float(v) for v in vals]).view(np.uint64).tolist()
