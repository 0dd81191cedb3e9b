"""The pure ingest core: diag.jsonl bytes -> flattened Arrow rows + rejected lines."""
from __future__ import annotations

import gzip
import io
import json
import math
from contextlib import contextmanager
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from regime_dash import ingest
from regime_dash.errors import IngestError
from regime_dash.ingest import IngestReport, iter_batches, parse, unify_types
from regime_dash.ingest import arrow as ingest_arrow  # the fast path reads _SLOW_LINES there

from diag_lines import check_against_model, diag_files, same


def rows_by_line(table: pa.Table) -> dict[int, dict]:
    return {r["_line"]: r for r in table.to_pylist()}


@contextmanager
def fast_everywhere():
    """Let the Arrow fast path run on pieces of any size (it normally skips pieces of
    64 lines or fewer), so small test inputs exercise it and its fallbacks."""
    with mock.patch.object(ingest_arrow, "_SLOW_LINES", 0):
        yield


def lines(*objs) -> bytes:
    """JSONL of the given objects (bytes are taken as a raw line)."""
    return b"".join((o if isinstance(o, bytes) else json.dumps(o).encode()) + b"\n" for o in objs)


def both_paths(fn):
    """Run a test with the default thresholds and with the fast path everywhere."""
    return pytest.mark.parametrize("fast", [False, True], ids=["default", "fast"])(fn)


def run(data: bytes, fast: bool, **kw):
    if fast:
        with fast_everywhere():
            return parse(data, **kw)
    return parse(data, **kw)


# ------------------------------------------------------------------------ tokens, lines


@both_paths
def test_nan_and_infinity_tokens_become_floats(fast):
    data = b'{"step": 1, "v": NaN}\n{"step": 2, "v": Infinity}\n{"step": 3, "v": -Infinity}\n'
    table, rep = run(data, fast)
    v = table.column("v").to_pylist()
    assert math.isnan(v[0]) and v[1] == math.inf and v[2] == -math.inf
    assert table.schema.field("v").type == pa.float64()
    assert rep.rejected == []


@both_paths
def test_python_json_output_roundtrips(fast):
    objs = [{"step": i, "x": float(i) / 3, "n": math.nan if i % 2 else 1.5} for i in range(100)]
    data = "".join(json.dumps(o) + "\n" for o in objs).encode()
    table, rep = run(data, fast)
    assert rep.rows == 100 and not rep.rejected
    got = table.to_pylist()
    for o, g in zip(objs, got):
        assert g["step"] == o["step"] and same(g["x"], o["x"]) and same(g["n"], o["n"])


@both_paths
def test_crlf_and_blank_lines(fast):
    data = b'{"step": 1}\r\n\r\n   \r\n\t\n{"step": 2}\r\n\n{"step": 3}'
    table, rep = run(data, fast)
    assert table.column("step").to_pylist() == [1, 2, 3]
    assert table.column("_line").to_pylist() == [1, 5, 7]  # blank lines still count
    assert rep.rejected == [] and rep.blank_lines == 4 and rep.lines == 7


@both_paths
def test_bad_lines_rejected_with_line_and_reason_others_kept(fast):
    data = (b'{"step": 1}\n'
            b'not json\n'
            b'[1, 2, 3]\n'
            b'{"step": 4}\n'
            b'{"a": "\xff\xfe"}\n'
            b'"a string"\n'
            b'{"step": 7}\n'
            b'{"step": 8, "risk_stack": {"kelly": {"fraction": 0.')
    table, rep = run(data, fast)
    assert table.column("step").to_pylist() == [1, 4, 7]
    got = {r.line: r.reason for r in rep.rejected}
    assert set(got) == {2, 3, 5, 6, 8}
    assert "not JSON" in got[2]
    assert "array, not an object" in got[3]
    assert "invalid UTF-8" in got[5] and "0xff" in got[5]
    assert "string, not an object" in got[6]
    assert got[8].startswith("truncated last line")


@both_paths
def test_unterminated_last_line_that_parses_is_kept(fast):
    table, rep = run(b'{"step": 1}\n{"step": 2}', fast)
    assert table.column("step").to_pylist() == [1, 2] and not rep.rejected


@both_paths
def test_truncated_line_in_the_middle_is_not_called_truncated_last_line(fast):
    _, rep = run(b'{"step": 1}\n{"step": 2, "a": \n{"step": 3}\n', fast)
    assert [r.line for r in rep.rejected] == [2]
    assert not rep.rejected[0].reason.startswith("truncated")


@both_paths
def test_arrow_only_quirks_are_rejected_like_python_json(fast):
    # Arrow's reader accepts each of these; Python's json (the contract) does not
    data = (b'{"step": 0}\n'
            b'{"a": -NaN}\n'
            b'{"a": Inf}\n'
            b'{"a": 1} {"a": 2}\n'
            b'\xef\xbb\xbf{"a": 1}\n'
            b'{"a": "tab\there"}\n'
            b'{"a": "\\ud800"}\n'
            b'{"step": 9}\n') * 20
    table, rep = run(data, fast)
    assert table.column("step").to_pylist() == [0, 9] * 20
    assert len(rep.rejected) == 6 * 20


@both_paths
def test_minus_nan_is_rejected_past_many_n_bytes(fast):
    # the search for -NaN probes each "N" first, then searches plainly: a -NaN placed
    # past the probes, among NaN values and N-heavy strings, is still found
    good = b''.join(b'{"step": %d, "s": "NNNNNNNNNN", "v": NaN}\n' % i for i in range(60))
    data = good + b'{"step": 60, "s": "x", "v": -NaN}\n' + b'{"step": 61, "v": 1.5}\n'
    table, rep = run(data, fast)
    assert [r.line for r in rep.rejected] == [61]
    assert table.column("step").to_pylist() == [*range(60), 61]


@both_paths
@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_cr_lf_and_crlf_all_end_a_line(fast, eol):
    # a lone CR is a line break (as Arrow reads it): it never merges two records
    data = eol.join([b'{"step": %d}' % i for i in range(100)]) + eol + b'{"step": 100}\r{"step": 101}\n'
    table, rep = run(data, fast, chunk_bytes=256)
    assert table.column("step").to_pylist() == list(range(102))
    assert rep.rejected_count == 0 and rep.lines == 102
    assert table.column("_line").to_pylist() == list(range(1, 103))


@both_paths
def test_bare_null_lines_rejected_and_never_reach_arrow(fast):
    # Arrow reads a "null" line as a row of nulls, and pyarrow 26 crashes (SIGSEGV) on
    # a block that starts with one: such lines must be screened before Arrow sees them
    data = b'null\n{}\n  null\n{"a": 1}\n' * 40
    table, rep = run(data, fast)
    assert table.column("a").to_pylist() == [None, 1] * 40
    assert [r.line for r in rep.rejected][:2] == [1, 3]
    assert all("null, not an object" in r.reason for r in rep.rejected)


@both_paths
def test_control_character_and_multiline_value_rejected(fast):
    data = b'{"a": 1}\n{"a":\n2}\n{"a": 3}\n' * 30
    table, rep = run(data, fast)
    assert table.column("a").to_pylist() == [1, 3] * 30
    assert len(rep.rejected) == 60


def test_bom_at_file_start_is_skipped():
    table, rep = parse(b'\xef\xbb\xbf{"step": 1}\n')
    assert table.column("step").to_pylist() == [1] and not rep.rejected


def test_reject_keeps_raw_bytes():
    reps = [r for b in iter_batches(b'{"a": 1}\nbad \xff line\n') for r in b.rejects]
    assert reps[0].raw == b"bad \xff line" and reps[0].line == 2


# ----------------------------------------------------------------- shape of the rows


@both_paths
def test_nested_objects_flatten_to_dotted_columns(fast):
    obj = {"step": 1, "risk_stack": {"regime": {"tail": {"recency": 7}, "dead_zone": {"flag": True}},
                                     "kelly": {"fraction": 0.5}}}
    table, _ = run(lines(obj) * 3, fast)
    assert set(table.column_names) == {"_line", "step", "risk_stack.regime.tail.recency",
                                       "risk_stack.regime.dead_zone.flag",
                                       "risk_stack.kelly.fraction"}
    assert table.column("risk_stack.regime.tail.recency").to_pylist() == [7] * 3


@both_paths
def test_empty_object_and_lists(fast):
    data = lines({"a": {}, "b": [1, 2], "c": [{"d": 1}]}, {"b": [], "c": []}, {})
    table, rep = run(data, fast)
    assert rep.rows == 3 and "a" not in table.column_names
    assert table.column("b").to_pylist() == [[1, 2], [], None]
    assert table.column("c").to_pylist() == [[{"d": 1}], [], None]


@both_paths
def test_late_key_is_kept(fast):
    data = lines(*[{"step": i, "x": 1.0} for i in range(5000)], {"step": 5000, "late": {"k": "v"}})
    table, rep = run(data, fast, chunk_bytes=4096)
    assert rep.columns["late.k"] == "string"
    assert table.column("late.k").to_pylist()[-1] == "v"
    assert table.column("late.k").null_count == 5000


def test_late_key_in_a_single_big_chunk():
    data = lines(*[{"step": i} for i in range(20000)], {"step": 20000, "late": 1})
    table, rep = parse(data)  # one 4 MB chunk through Arrow
    assert "late" in rep.columns and table.column("late").to_pylist()[-1] == 1


@both_paths
def test_duplicate_key_last_wins(fast):
    data = b'{"a": 1, "b": 0, "a": 2}\n{"a": {"x": 1}, "a": {"y": 2}}\n' * 40
    table, rep = run(data, fast)
    assert not rep.rejected
    assert table.column("a").to_pylist() == [2, None] * 40
    assert table.column("a.y").to_pylist() == [None, 2] * 40
    assert "a.x" not in table.column_names


@both_paths
def test_dotted_key_collision_later_wins(fast):
    table, _ = run(b'{"a.b": 1, "a": {"b": 2}}\n{"a": {"b": 3}, "a.b": 4}\n' * 40, fast)
    assert table.column("a.b").to_pylist() == [2, 4] * 40


@both_paths
def test_reserved_line_column_is_renamed(fast):
    table, _ = run(b'{"_line": "mine", "step": 1}\n' * 70, fast)
    assert table.column("_line").to_pylist()[:2] == [1, 2]
    assert table.column("_line_").to_pylist()[0] == "mine"


@both_paths
def test_step_is_int64(fast):
    table, rep = run(b'{"step": 1}\n{"step": 2}\n' * 40, fast)
    assert table.schema.field("step").type == pa.int64()
    table, rep = run(b'{"step": 1.0}\n{"step": 2.0}\n' * 40, fast)
    assert table.schema.field("step").type == pa.int64()
    assert rep.first_step == 1 and rep.last_step == 2
    table, rep = run(b'{"step": 1.5}\n' * 70, fast)
    # step is int64 in every run: a fractional step is set aside, the row is kept
    assert table.schema.field("step").type == pa.int64() and rep.rows == 70
    assert table.column("step").null_count == 70 and rep.aside_count == 70
    assert rep.aside[0] == ingest.Aside(1, "step", "1.5", "int64")


@both_paths
def test_date_like_strings_stay_strings(fast):
    data = b'{"t": "2024-01-01", "u": {"v": "2024-01-01T00:00:00"}}\n' * 70
    table, _ = run(data, fast)
    assert table.column("t").to_pylist()[0] == "2024-01-01"
    assert table.column("u.v").to_pylist()[0] == "2024-01-01T00:00:00"


def test_date_like_column_turning_numeric_stays_fast_and_right():
    data = lines(*[{"t": "2024-01-01", "v": i} for i in range(3000)],
                 *[{"t": i, "v": i} for i in range(3000)])
    from regime_dash.ingest import arrow

    sent = []  # lines the fast path hands to the json reference reader
    real = arrow.read_reference

    def counting(lines_, *a, **k):
        sent.append(len(lines_))
        return real(lines_, *a, **k)

    with mock.patch.object(arrow, "read_reference", counting):
        table, rep = parse(data, chunk_bytes=8192, workers=1)
    t = table.column("t").to_pylist()
    assert t[0] == "2024-01-01" and t[-1] == "2999" and rep.rows == 6000
    # the string hint for "t" does not push the numeric chunks off the fast path
    assert sum(sent) < 100, sent


# ---------------------------------------------------------------------- type conflicts


@both_paths
def test_int_and_float_widen_to_float(fast):
    table, rep = run(lines(*[{"v": 1}] * 50, {"v": 2.5}, *[{"v": 3}] * 50), fast)
    assert table.schema.field("v").type == pa.float64() and rep.rows == 101
    assert table.column("v").to_pylist()[49:52] == [1.0, 2.5, 3.0]


@both_paths
@pytest.mark.parametrize("chunk", [64, 1 << 20])
def test_a_value_of_another_kind_does_not_retype_its_column(fast, chunk):
    objs = [{"v": 1}] * 40 + [{"v": "high"}, {"v": True}, {"v": 2.5}, {"v": [1, 2]},
                              {"v": math.nan}, {"v": None}] + [{"v": 4.0}] * 40
    table, rep = run(lines(*objs), fast, chunk_bytes=chunk)
    # every row kept; the column keeps its kind (number: int64 widened by 2.5 to float64)
    assert rep.rows == len(objs) and table.schema.field("v").type == pa.float64()
    v = table.column("v").to_pylist()
    assert v[:40] == [1.0] * 40 and v[-40:] == [4.0] * 40
    assert v[40] is None and v[41] == 1.0 and v[42] == 2.5 and v[43] is None
    assert math.isnan(v[44]) and v[45] is None
    # what does not fit is kept aside exactly, with its line; lossless coercions are counted
    assert [(a.line, a.field, a.value) for a in rep.aside] == [(41, "v", '"high"'), (44, "v", "[1,2]")]
    assert rep.aside_count == 2 and rep.coerced == {"v": {"bool": 1}}


@both_paths
def test_one_text_fold_among_integers_is_coerced_and_noted(fast):
    objs = [{"step": i, "fold": 1} for i in range(3000)]
    objs[1500] = {"step": 1500, "fold": "1"}
    table, rep = run(lines(*objs), fast, chunk_bytes=4096)
    assert table.schema.field("fold").type == pa.int64()
    assert table.column("fold").to_pylist() == [1] * 3000
    assert rep.coerced == {"fold": {"string": 1}} and rep.aside_count == 0


def test_numbers_outside_float64_reject_the_line_never_inf():
    big = b"9" * 400
    data = (b'{"step": 0, "x": 1.5}\n{"step": 1, "x": ' + big + b'}\n{"step": 2, "x": 1e400}\n'
            b'{"step": 3, "x": -1E+999}\n{"step": 4, "x": Infinity}\n{"step": 5, "x": 1e308}\n')
    for fast in (False, True):
        table, rep = run(data * 30, fast)
        assert table.column("step").to_pylist() == [0, 4, 5] * 30
        x = table.column("x").to_pylist()
        assert x[:3] == [1.5, math.inf, 1e308]  # Infinity is a real token; 1e400 is not
        reasons = [r.reason for r in rep.rejected[:3]]
        assert all(r.startswith("number out of float64 range") for r in reasons), reasons
        assert "1e400" in reasons[1] and "(400 characters)" in reasons[0]
        assert [r.line for r in rep.rejected[:3]] == [2, 3, 4]


def test_unify_types_lattice():
    i, f, s, b, n = pa.int64(), pa.float64(), pa.string(), pa.bool_(), pa.null()
    assert unify_types(i, f) == f and unify_types(n, i) == i and unify_types(b, b) == b
    assert unify_types(b, i) == s and unify_types(i, s) == s
    assert unify_types(pa.list_(i), pa.list_(f)) == pa.list_(f)
    assert unify_types(pa.list_(i), i) == s
    assert unify_types(pa.list_(pa.struct([("x", i)])), pa.list_(pa.struct([("y", s)]))) == \
        pa.list_(pa.struct([("x", i), ("y", s)]))


def test_int64_bounds_and_beyond():
    table, _ = parse(lines({"a": 2**63 - 1, "b": 2**63}, {"a": -(2**63), "b": 1}))
    assert table.schema.field("a").type == pa.int64()
    assert table.column("a").to_pylist() == [2**63 - 1, -(2**63)]
    assert table.schema.field("b").type == pa.float64()  # outside int64: float64


# ------------------------------------------------------------------ sources, streaming


def test_sources_bytes_path_stream_gzip(tmp_path):
    data = lines(*[{"step": i, "a": {"b": i / 2}} for i in range(300)]) + b"oops\n"
    p = tmp_path / "diag.jsonl"
    p.write_bytes(data)
    g = tmp_path / "diag.jsonl.gz"
    g.write_bytes(gzip.compress(data))
    plain_sha = parse(data)[1].sha256
    for src in (data, memoryview(data), bytearray(data), p, str(p), g, io.BytesIO(data),
                open(g, "rb")):
        table, rep = parse(src, chunk_bytes=1000)
        assert rep.rows == 300 and [r.line for r in rep.rejected] == [301]
        assert rep.sha256 == plain_sha  # content hash: same for plain and gzip
        assert table.column("step").to_pylist() == list(range(300))
    assert parse(g)[1].gzip and not parse(p)[1].gzip


def test_truncated_gzip_keeps_what_was_written(tmp_path):
    data = lines(*[{"step": i, "pad": "x" * 50} for i in range(2000)])
    z = gzip.compress(data)
    table, rep = parse(z[: len(z) // 2])
    assert rep.truncated_gzip and 0 < rep.rows < 2000
    assert len(rep.rejected) <= 1  # at most the half-written last line
    assert table.column("step").to_pylist() == list(range(rep.rows))


def test_unreadable_sources_raise_ingest_error(tmp_path):
    with pytest.raises(IngestError, match="nope.jsonl"):
        parse(tmp_path / "nope.jsonl")
    with pytest.raises(IngestError, match="cannot read"):
        parse(tmp_path)  # a directory
    bad = gzip.compress(b'{"a": 1}\n' * 1000)
    bad = bad[:20] + bytes(b ^ 0x55 for b in bad[20:60]) + bad[60:]
    with pytest.raises(IngestError):
        parse(bad)
    with pytest.raises(IngestError, match="int"):
        parse(12345)


def test_line_longer_than_chunk():
    data = lines({"a": "x" * 10000}, {"a": "y"})
    table, _ = parse(data, chunk_bytes=100)
    assert [len(s) for s in table.column("a").to_pylist()] == [10000, 1]


@pytest.mark.parametrize("workers", [1, 3])
def test_batches_in_order_with_progress(workers):
    data = lines(*[{"step": i} for i in range(3000)])
    rep = IngestReport()
    batches = list(iter_batches(data, chunk_bytes=2000, report=rep, workers=workers))
    assert len(batches) > 5
    steps = [s for b in batches for s in b.table.column("step").to_pylist()]
    assert steps == list(range(3000))
    done = [b.bytes_done for b in batches]
    assert done == sorted(done) and done[-1] == len(data)
    assert rep.complete and rep.sha256 and rep.rows == 3000


def test_parser_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    parse(lines({"a": 1}) * 10)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------ properties

# Modest example counts keep this file fast on a shared 2-core box; every run draws new
# examples, and a failure prints the exact file that broke the contract.
_PROP = settings(max_examples=70, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.slow  # a property test's examples: ~1.8 s of CPU
@_PROP
@given(data=diag_files(), chunk=st.sampled_from([16, 64, 256, 1 << 20]),
       workers=st.sampled_from([1, 2]), slow_lines=st.sampled_from([0, 2, 64]))
def test_property_rows_equal_good_lines_rejects_equal_bad_lines(data, chunk, workers, slow_lines):
    with mock.patch.object(ingest_arrow, "_SLOW_LINES", slow_lines):
        table, rep = parse(data, chunk_bytes=chunk, workers=workers)
    check_against_model(data, table, rep)


@pytest.mark.slow  # a property test's examples: ~3 s of CPU
@_PROP
@given(data=diag_files(max_lines=60))
def test_property_fast_path_agrees_with_reference(data):
    """Arrow's fast path (forced on every piece) and the line-by-line reference agree."""
    with fast_everywhere():
        fast_table, fast_rep = parse(data, workers=1)
    with mock.patch.object(ingest_arrow, "_SLOW_LINES", 10**9):
        ref_table, ref_rep = parse(data, workers=1)
    assert [(r.line, r.reason) for r in fast_rep.rejected] == \
        [(r.line, r.reason) for r in ref_rep.rejected]
    a, b = rows_by_line(fast_table), rows_by_line(ref_table)
    assert a.keys() == b.keys()
    for line in a:
        for k in set(a[line]) | set(b[line]):
            assert same(a[line].get(k), b[line].get(k)), (line, k)
    check_against_model(data, ref_table, ref_rep)


@pytest.mark.slow  # a property test's examples: ~1.5 s of CPU
@_PROP
@given(data=diag_files(), cut=st.integers(0, 400))
def test_property_split_anywhere_same_rows(data, cut):
    """A file cut at any byte and ingested in two chunk sizes gives the same rows
    (chunk boundaries never change the result)."""
    data = data[:cut] if cut < len(data) else data
    t1, r1 = parse(data, chunk_bytes=7, workers=2)
    t2, r2 = parse(data, chunk_bytes=1 << 20, workers=1)
    assert [x.line for x in r1.rejected] == [x.line for x in r2.rejected]
    a, b = rows_by_line(t1), rows_by_line(t2)
    assert a.keys() == b.keys()
    for line in a:
        for k in set(a[line]) | set(b[line]):
            assert same(a[line].get(k), b[line].get(k)), (line, k)


@pytest.mark.parametrize("dtype", [np.int64, np.float64, np.int8, np.int32, np.bool_])
def test_arrays_from_and_to_numpy_match_pyarrow(dtype):
    """The pandas-free conversions give what ``pa.array`` and ``to_numpy`` give: values,
    nulls, slices (bit offsets of bool columns included) and chunked columns."""
    from regime_dash.ingest.arrays import first_valid, from_numpy, to_numpy

    rng = np.random.default_rng(7)
    for n in (0, 1, 7, 8, 9, 1000):
        vals = (rng.random(n) < 0.5) if dtype is np.bool_ else (rng.random(n) * 200 - 100).astype(dtype)
        mask = rng.random(n) < 0.3
        plain, masked = from_numpy(vals), from_numpy(vals, mask)
        plain.validate(full=True)
        masked.validate(full=True)
        assert plain.equals(pa.array(vals)) and masked.equals(pa.array(vals, mask=mask))
        for off in range(min(n, 3)):
            got = to_numpy(plain.slice(off))
            assert got.dtype == vals.dtype and np.array_equal(got, vals[off:])
        halves = pa.chunked_array([plain.slice(0, n // 2), plain.slice(n // 2)], type=plain.type)
        assert np.array_equal(to_numpy(halves), vals)
        if (~mask).any():
            assert first_valid(masked) == int(np.argmax(~mask))
    with pytest.raises(TypeError):
        from_numpy(np.zeros(2, np.uint16))


def test_column_types_settle_the_same_over_many_chunks_of_the_same_types():
    """Chunks that repeat the run's types (each column kept as it is) between chunks that
    widen them (int64 then float64), start them late (null, then a type), hold a list,
    or a value of another kind (coerced or set aside): as the model reads the lines, and
    the same batch after batch as in one chunk."""
    objs = []
    for i in range(600):
        o = {"step": i, "n": i, "f": 1.5 * i, "s": f"s{i % 7}", "late": None, "xs": [i, i + 1]}
        if i == 550:
            o["n"] = 2.5  # the run's int64 widens to float64, past the last change of columns
        if i == 300:
            o["late"] = 4
        if i == 450:
            o["f"] = True  # another kind: set aside
        if i == 500:
            o["s"] = 12
        if 100 <= i < 120 or 400 <= i < 410:
            o["opt"] = "x" if i == 405 else i  # a column in some chunks only
        objs.append(o)
    data = lines(*objs)
    many, rep = parse(data, chunk_bytes=2_000, workers=1)
    check_against_model(data, many, rep)
    one, rep1 = parse(data, workers=1)
    assert many.schema == one.schema
    assert rep.to_dict()["columns"] == rep1.to_dict()["columns"]
    assert rep.to_dict()["columns"]["n"] == "double" and rep.aside_count == rep1.aside_count > 0
    for name in one.column_names:
        assert all(same(a, b) for a, b in zip(many.column(name).to_pylist(), one.column(name).to_pylist())), name
    assert many.schema.field("n").type == pa.float64() and many.schema.field("late").type == pa.int64()
    # batch by batch (as the store writes them): once widened or started, a column keeps
    # the run's type in every later batch, values read the same
    batches = list(iter_batches(data, chunk_bytes=2_000, workers=1))
    assert len(batches) > 20
    for b in batches:
        first = b.table.column("_line")[0].as_py()
        if first > 551:
            assert b.table.schema.field("n").type == pa.float64(), first
        if first > 301:
            assert b.table.schema.field("late").type == pa.int64(), first
