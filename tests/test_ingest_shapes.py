"""The shape path (ingest/shapes.py) reads exactly what the usual path reads.

Every source here is parsed twice, with the compiled scanner on (from the first
candidate line of a chunk; the C one and numba's, each in turn) and off, and the tables
and reports must be equal: values, types, nulls, NaN and infinities, rejects with their
line numbers, set-aside values.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pytest

from regime_dash.ingest import parse, shapes
from regime_dash.benchmarks.ingest import make_diag_file


def scanner(name: str):
    """The shape kernels by name: "C" (built by ``pip install``, which needs a C compiler,
    as the README's commands have) or "numba"."""
    if name == "C":
        k = shapes.native()
        assert k is not None, "the C scanner (ingest/_shape_scan.c) was not built by pip install"
        return k
    return shapes.load_numba()


@pytest.fixture(scope="module", params=["C", "numba"])
def kernels(request):
    """Each test runs with either scanner as the shape path's kernels."""
    saved = shapes._state["kernels"]
    shapes._state["kernels"] = k = scanner(request.param)
    yield k
    shapes._state["kernels"] = saved


def _both(monkeypatch, source: bytes, **kw):
    monkeypatch.setattr(shapes, "MIN_LINES", 1)
    calls = []
    table_of = shapes.table_of
    monkeypatch.setattr(shapes, "table_of", lambda *a: calls.append(1) or table_of(*a))
    on = parse(source, **kw)
    assert calls, "the shape path read nothing"
    saved = shapes._state["kernels"]
    monkeypatch.setitem(shapes._state, "kernels", None)
    off = parse(source, **kw)
    monkeypatch.setitem(shapes._state, "kernels", saved)
    return on, off


def _same_table(a: pa.Table, b: pa.Table) -> None:
    assert a.schema == b.schema
    for name in a.column_names:
        x, y = a.column(name).to_pylist(), b.column(name).to_pylist()
        for u, v in zip(x, y):
            if isinstance(u, float) and isinstance(v, float) and math.isnan(u):
                assert math.isnan(v), name
            else:
                assert u == v and type(u) is type(v), (name, u, v)


def _same(on, off) -> None:
    (t1, r1), (t2, r2) = on, off
    _same_table(t1, t2)
    assert [(r.line, r.reason, r.raw) for r in r1.rejected] == [(r.line, r.reason, r.raw) for r in r2.rejected]
    assert r1.to_dict() == r2.to_dict()


def _line(step: int, **extra) -> str:
    obj = {"step": step, "phase": "train", "risk_stack": {"popart": {"sigma": 0.5 + step, "live": True}},
           **extra}
    return json.dumps(obj)


TRICKY = [
    '{"step": 7, "phase": "train", "risk_stack": {"popart": {"sigma": NaN, "live": false}}}',
    '{"step": 8, "phase": "train", "risk_stack": {"popart": {"sigma": Infinity, "live": true}}}',
    '{"step": 9, "phase": "train", "risk_stack": {"popart": {"sigma": -Infinity, "live": null}}}',
    '{"step": 10, "phase": null, "risk_stack": {"popart": {"sigma": null, "live": true}}}',
    '{"step": 11, "phase": "tr\\u00e9in", "risk_stack": {"popart": {"sigma": 1e5, "live": true}}}',
    '{"step": 12, "phase": "trèin", "risk_stack": {"popart": {"sigma": -0.0, "live": true}}}',
    '{"step": 13, "phase": "train", "risk_stack": {"popart": {"sigma": 1e400, "live": true}}}',
    '{"step": 14, "phase": "train", "risk_stack": {"popart": {"sigma": -NaN, "live": true}}}',
    '{"step": 15, "phase": "train", "risk_stack": {"popart": {"sigma": 01, "live": true}}}',
    '{"step": 16, "phase": "train", "risk_stack": {"popart": {"sigma": 1., "live": true}}}',
    '{"step": 12345678901234567890, "phase": "train", "risk_stack": {"popart": {"sigma": 2, "live": true}}}',
    '{"step": 17, "phase": "train", "risk_stack": {"popart": {"sigma": 2, "live": 1}}}',
    '{"step": 18, "phase": "train", "risk_stack": {"popart": {"sigma": 2, "live": true}}} {"step": 19}',
    '{"step": 20, "phase": "train", "risk_stack": {"popart": {"sigma": 2, "live": true}}}   ',
    '{"step": 21, "step": 22, "phase": "train", "risk_stack": {"popart": {"sigma": 2, "live": true}}}',
    '{"step": 23, "phase": "tr\x01in", "risk_stack": {"popart": {"sigma": 2, "live": true}}}',
    '{"step": 24, "phase": "train", "risk_stack": {"popart": {"sigma": 2e-5, "live": true}}, "x": [1]}',
    '{"step": 25, "phase": "2024-01-02", "risk_stack": {"popart": {"sigma": 3E+2, "live": true}}}',
    '{"step": 26, "phase": 5, "risk_stack": {"popart": {"sigma": 2, "live": true}}}',
    '{"step": 27, "phase": "train", "risk_stack": {"popart": {"sigma": 2, "live": true}}',
]


@pytest.mark.parametrize("i", range(len(TRICKY)))
def test_each_tricky_line_reads_the_same_among_lines_of_its_shape(kernels, monkeypatch, i):
    lines = [_line(s) for s in range(5)] + [TRICKY[i]] + [_line(s) for s in range(30, 35)]
    _same(*_both(monkeypatch, ("\n".join(lines) + "\n").encode(), diag_only=True, workers=1))


def test_all_tricky_lines_together_and_bad_utf8(kernels, monkeypatch):
    body = "\n".join([_line(s) for s in range(3 * len(TRICKY))] + TRICKY).encode()
    bad = _line(99).replace("train", "tr\udcffin").encode("utf-8", "surrogateescape")
    on, off = _both(monkeypatch, body + b"\n" + bad + b"\n" + body)
    _same(on, off)
    assert on[1].rejected_count > 0


def test_a_shape_with_empty_objects_nulls_and_a_late_key(kernels, monkeypatch):
    lines = [json.dumps({"step": s, "e": {}, "n": None, "s": "x" * (s % 3), "f": s / 3, "i": -s})
             for s in range(200)]
    lines += [json.dumps({"step": 200, "e": {}, "n": 1.5, "s": "y", "f": 1, "i": 2, "late": True})]
    (t, r), off = _both(monkeypatch, ("\n".join(lines)).encode())
    _same((t, r), off)
    assert t.column("late").to_pylist()[-1] is True and t.num_rows == 201


def test_a_generated_diag_with_bad_lines_over_several_chunks(kernels, monkeypatch, tmp_path):
    path = tmp_path / "d.jsonl"
    make_diag_file(path, 0.6, seed=4, bad_every=97)
    data = path.read_bytes()
    on, off = _both(monkeypatch, data, chunk_bytes=100_000, diag_only=True)
    _same(on, off)
    assert on[1].rejected_count > 10 and on[0].num_rows > 400


@pytest.mark.parametrize("line", [
    b'{"a": 1, "a": 2}',              # a repeated key: the last wins (the reference decides)
    b'{"a.b": 1, "a": {"b": 2}}',     # a dotted key colliding with a nested path
    b'{"a": [1, 2]}',                 # lists go the usual way
    b'{"a": "x\\n"}',                 # an escape
    b'{"_line": 1}',                  # a reserved name is renamed the usual way
    b'[1, 2]',
    b'{"a": 1',
])
def test_no_template_where_the_shape_path_cannot_vouch(line):
    assert shapes.template_of(line) is None


def test_a_template_names_the_flattened_columns_and_kinds():
    tpl = shapes.template_of(b'{"a": 1, "b": {"c": "x", "d": {}}, "e": null, "f": true}')
    assert tpl.names == ("a", "b.c", "e", "f")
    assert tpl.kinds.tolist() == [shapes.NUMBER, shapes.STRING, shapes.NULL, shapes.BOOL]
    assert bytes(tpl.lit) == b'{"a": , "b": {"c": , "d": {}}, "e": , "f": }'


def test_integers_stay_int64_and_floats_are_correctly_rounded(kernels, monkeypatch):
    vals = ["0.1", "2.2250738585072014e-308", "1.7976931348623157e+308", "123456789012345678",
            "-987654321098765432", "5e-324", "0.30000000000000004", "9007199254740993"]
    lines = [f'{{"step": {i}, "x": {v}, "y": {i}}}' for i, v in enumerate(vals)]
    (t, _r), off = _both(monkeypatch, "\n".join(lines).encode())
    _same((t, _r), off)
    assert t.column("x").to_pylist() == [float(v) for v in vals]
    assert t.schema.field("y").type == pa.int64()
    assert np.array_equal(t.column("y").to_numpy(), np.arange(len(vals)))


def _floats_match_python(monkeypatch, vals: list[str]) -> list[str]:
    """One diag line a value of ``vals`` read both ways: each double Python's ``float`` of its text, bit for bit."""
    lines = [f'{{"step": {i}, "x": {v}}}' for i, v in enumerate(vals)]
    (t, r), off = _both(monkeypatch, "\n".join(lines).encode())
    _same((t, r), off)
    got = np.asarray(t.column("x").to_numpy()).view(np.uint64)
    want = np.array([float(v) for v in vals]).view(np.uint64)
    assert got.tolist() == want.tolist()
    return lines


def test_floats_the_scanner_converts_are_python_s_to_the_bit(kernels, monkeypatch):
    # either side of Clinger's fast path (18 digits, 2**53, 10**22) and the signed zeros
    vals = ["-0.0", "-0", "0.0", "1E22", "1e23", "1e-22", "1e-23", "-1.5e-05", "2.5E+3",
            "9007199254740991.0", "9007199254740992.0", "9007199254740993.0", "0.2697867137638703",
            "0.17565562060255901", "12345678901234567.5", "0.000001234", "4.35", "1700000000.25",
            "0.1234567890123456789", "8.98846567431158e307", "7e-10", "3", "-9007199254740993"]
    _floats_match_python(monkeypatch, vals)


def _stored(root, source, monkeypatch, *, kernels_on: bool, reference: bool = False):
    """``source`` ingested into a store of its own: the stored table, and the rows the
    shape path read."""
    from regime_dash.ingest import arrow
    from regime_dash.store.run_store import RunStore

    rows = []
    table_of = shapes.table_of
    with monkeypatch.context() as m:
        m.setattr(shapes, "table_of", lambda *a: rows.append(int(a[2][0].sum())) or table_of(*a))
        if not kernels_on:
            m.setitem(shapes._state, "kernels", None)
        if reference:  # the line-by-line reference reads every chunk
            m.setattr(arrow, "_parse_lines", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("slow")))
        store = RunStore(root, chunk_bytes=1 << 18)
        return store.load_table(store.ingest(source).run_id), sum(rows)


def test_a_replay_written_diag_takes_the_shape_path_and_stores_the_slow_path_s_frame(
        kernels, monkeypatch, tmp_path, capsys):
    """The file ``replay --out x.jsonl`` writes (compact separators, float32 values as their
    shortest float64 text, 17 digits often) is read by the scanner line for line, and the
    run stored from it is the Arrow path's and the reference's, to the bit."""
    from regime_dash.cli import main

    path = tmp_path / "run.jsonl"
    assert main(["replay", "--scenario", "kelly_trap_run8", "--steps", "2000", "--accounts", "16",
                 "--engine", "reference", "--out", str(path)]) == 0
    capsys.readouterr()
    assert path.stat().st_size > 4 * (1 << 18)  # several chunks
    shaped, read = _stored(tmp_path / "a", path, monkeypatch, kernels_on=True)
    assert read == shaped.num_rows == 2000, "the shape path left lines of the replay's diag to Arrow"
    for kw in ({"kernels_on": False}, {"kernels_on": False, "reference": True}):
        slow, read = _stored(tmp_path / str(len(kw)), path, monkeypatch, **kw)
        assert read == 0
        assert shaped.schema == slow.schema, kw
        for name in shaped.column_names:
            a, b = shaped.column(name).combine_chunks(), slow.column(name).combine_chunks()
            if pa.types.is_floating(a.type):
                a, b = (np.asarray(x.to_numpy(zero_copy_only=False)).view(np.int64) for x in (a, b))
                assert np.array_equal(a, b) and shaped.column(name).null_count == slow.column(name).null_count, name
            else:
                assert a.equals(b), (name, kw)


def test_floats_past_clinger_s_path_are_python_s_to_the_bit(kernels, monkeypatch):
    """17- and 18-digit decimals (a float32's shortest text as a double, random digits),
    exact halfway cases between two doubles (ties to even) and either side of the
    power-of-ten range the scanner converts: as Python's ``float``, bit for bit."""
    rng = np.random.default_rng(7)
    f32 = (rng.standard_normal(3000).astype(np.float32).astype(np.float64)
           * 10.0 ** rng.integers(-9, 9, 3000))
    vals = [repr(float(x)) for x in f32]
    vals += [f"{int(d)}e{int(q)}" for d, q in zip(rng.integers(10**16, 10**18, 2000), rng.integers(-30, 25, 2000))]
    vals += [str((2 * k + 1) << s) for k, s in zip(rng.integers(2**52, 2**53, 500).tolist(), [0, 1, 2, 3] * 125)]
    vals += ["9007199254740993", "123456789012345678e-27", "123456789012345678e-28", "123456789012345678e22",
             "99999999999999999e22", "0.1000000000000000055511151231257827", "17976931348623157e292"]
    lines = _floats_match_python(monkeypatch, vals)
    calls = []  # and the scanner, not the cast, converted the 17-digit ones
    real = shapes._number_texts
    monkeypatch.setattr(shapes, "_number_texts", lambda *a: calls.append(len(a[4])) or real(*a))
    parse("\n".join(lines[:3000]).encode())
    assert sum(calls) == 0


def test_each_float_column_casts_only_where_its_own_values_need_it(kernels, monkeypatch):
    """Columns of one shape, each its own case: one value past the scanner's conversions
    (cast from its text) at a different line in each of two columns, a NaN and an
    infinity in a third, nulls in a fourth, plain doubles in the last (taken as the
    scanner gave them): bit for bit as the reference reads them."""
    rows = []
    for i in range(300):
        a = "1e-30" if i == 17 else f"{i / 7!r}"
        b = "0.12345678901234567890123" if i == 250 else f"{i * 0.25}"
        c = "NaN" if i == 3 else "-Infinity" if i == 299 else f"{i}.5"
        d = "null" if i % 11 == 5 else f"{i / 3!r}"
        rows.append(f'{{"step": {i}, "a": {a}, "b": {b}, "c": {c}, "d": {d}, "e": {i / 9!r}}}')
    (t, r), off = _both(monkeypatch, "\n".join(rows).encode())
    _same((t, r), off)
    for name in "abcde":
        got = np.asarray(t.column(name).to_numpy(zero_copy_only=False))
        want = np.asarray(off[0].column(name).to_numpy(zero_copy_only=False))
        assert got.view(np.uint64).tolist() == want.view(np.uint64).tolist(), name
    assert t.column("d").null_count == 27 and math.isnan(t.column("c")[3].as_py())


def test_slot_counts_compiled_and_in_numpy_agree(kernels, monkeypatch):
    """The compiled per-slot summary (flag counts, numbers whose double is NaN) is the NumPy
    one, over every line and over a subset (a chunk's matched lines), NaN under every flag."""
    rng = np.random.default_rng(11)
    fl = rng.integers(0, 6, (9, 500)).astype(np.int8)
    fv = rng.standard_normal((9, 500))
    fv[rng.random((9, 500)) < 0.05] = np.nan
    fv[3] = 0.0  # a slot with no NaN at all
    for rows in (np.arange(500), np.flatnonzero(rng.random(500) < 0.4), np.array([7]), np.arange(0)):
        sub = fl if len(rows) == 500 else fl[:, rows]
        compiled = shapes._slot_counts(fl, fv, rows, sub)
        monkeypatch.setitem(shapes._state, "kernels", None)
        plain = shapes._slot_counts(fl, fv, rows, sub)
        monkeypatch.setitem(shapes._state, "kernels", kernels)
        assert compiled[0].tolist() == plain[0].tolist() and compiled[1].tolist() == plain[1].tolist()
        assert compiled[0].sum() == 9 * len(rows)
