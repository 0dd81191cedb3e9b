"""The clean path's NumPy checks and casts give what Arrow's compute functions give.

A fresh ``ingest`` of a clean diag imports no ``pyarrow.compute``: the finite-value
check, the int64/bool -> float64 cast and the step range run in NumPy where a column has
no nulls. Here each is held to the compute call it stands for, bit for bit, on the
values where the two could part (past 2**53, the int64 ends, NaN, infinities, chunked
columns, nulls).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from regime_dash.ingest.arrow import _special_floats
from regime_dash.ingest.columns import _as_float64, conform_column
from regime_dash.ingest.report import _step_range

_INTS = [0, 1, -1, 2**53, 2**53 + 1, -(2**53) - 1, 2**62 + 2**10 + 1, 2**63 - 1, -(2**63),
         9_007_199_254_740_993, 123_456_789_012_345_679]


def _random_ints(n: int = 5000) -> list[int]:
    rng = np.random.default_rng(7)
    big = rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64, endpoint=True)
    return _INTS + big.tolist()


def _bits(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.float64).view(np.int64)


@pytest.mark.parametrize("make", [
    lambda v: pa.array(v, pa.int64()),
    lambda v: pa.chunked_array([pa.array(v[:7], pa.int64()), pa.array(v[7:], pa.int64())]),
    lambda v: pa.array(v, pa.int64()).slice(3),
    lambda v: pa.array([x % 2 == 0 for x in v], pa.bool_()),
    lambda v: pa.array([x % 3 == 0 for x in v], pa.bool_()).slice(5),
    lambda v: pa.array([None if i % 5 == 0 else x for i, x in enumerate(v)], pa.int64()),
])
def test_float64_cast_matches_arrows_unchecked_cast(make):
    arr = make(_random_ints())
    ours = _as_float64(arr)
    want = pc.cast(arr, pa.float64(), safe=False)
    assert ours.type == pa.float64() and len(ours) == len(want)
    assert ours.null_count == want.null_count
    assert np.array_equal(_bits(ours), _bits(want))
    # and as Python's float() rounds each integer
    vals = arr.to_pylist()
    assert ours.to_pylist() == [None if v is None else float(v) for v in vals]


def test_conform_column_casts_to_float64_and_counts_bools():
    col, aside, note = conform_column(pa.array([True, False, True]), pa.float64(), [1, 2, 3], "f")
    assert col.to_pylist() == [1.0, 0.0, 1.0] and not aside and note == {"f": {"bool": 3}}
    col, aside, note = conform_column(pa.array([2**53 + 1, -3]), pa.float64(), [1, 2], "i")
    assert col.to_pylist() == [float(2**53 + 1), -3.0] and not aside and note == {}


@pytest.mark.parametrize("values", [
    [0.5, 1.5, -2.0],
    [0.5, float("nan"), 1.0],
    [float("inf"), 0.0],
    [float("-inf"), float("nan")],
    [1e308, -1e308, 5e-324],
    [],
])
def test_special_floats_match_compute(values):
    for arr in (pa.array(values, pa.float64()),
                pa.chunked_array([pa.array(values, pa.float64()), pa.array([2.0], pa.float64())]),
                pa.array([None] + values, pa.float64())):
        want = (bool(pc.any(pc.is_nan(arr)).as_py()), bool(pc.any(pc.is_inf(arr)).as_py()))
        assert _special_floats(arr) == want


def test_special_floats_look_inside_structs():
    arr = pa.array([{"a": 1.0, "b": {"c": float("nan")}}, {"a": float("inf"), "b": {"c": 2.0}}])
    assert _special_floats(arr) == (True, True)
    assert _special_floats(pa.array([{"a": 1.0}])) == (False, False)


@pytest.mark.parametrize("arr", [
    pa.array(_INTS, pa.int64()),
    pa.chunked_array([pa.array([5, 3], pa.int64()), pa.array([9, -(2**63)], pa.int64())]),
    pa.array([None, 4, 2], pa.int64()),
    pa.array([1.5, float("nan"), float("inf"), -2.5], pa.float64()),
    pa.array([7], pa.int64()),
])
def test_step_range_matches_min_max(arr):
    col = arr if isinstance(arr, pa.ChunkedArray) else pa.chunked_array([arr])
    if pa.types.is_floating(col.type):
        mm = pc.min_max(pc.filter(col, pc.is_finite(col))).as_py()
    else:
        mm = pc.min_max(col).as_py()
    lo, hi = _step_range(col)
    assert (lo, hi) == (mm["min"], mm["max"])
    assert type(lo) is type(mm["min"])
