"""Many runs: aligned on step, grouped by tag or config, each group's mean and band per step."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from regime_dash.analysis.groups import align, group_options, group_runs, group_stats, grouped_stats
from regime_dash.errors import ValidationError


def run(steps, values, column="x") -> pd.DataFrame:
    return pd.DataFrame({"step": np.asarray(steps, dtype=np.int64), column: np.asarray(values, dtype=np.float64)})


def test_align_puts_runs_of_unequal_length_on_the_union_of_their_steps():
    a = run([5, 6, 7, 8], [1.0, 2.0, 3.0, 4.0])
    b = run([7, 8, 9], [10.0, 20.0, 30.0])
    al = align({"a": a, "b": b}, "x")
    assert al.labels == ("a", "b")
    assert al.steps.tolist() == [5, 6, 7, 8, 9] and al.steps.dtype == np.int64
    np.testing.assert_array_equal(al.values[0], [1.0, 2.0, 3.0, 4.0, np.nan])
    np.testing.assert_array_equal(al.values[1], [np.nan, np.nan, 10.0, 20.0, 30.0])


def test_align_sorts_each_run_before_its_transform_and_fills_a_missing_column_with_nan():
    shuffled = run([3, 1, 2], [30.0, 10.0, 20.0])
    seen = []

    def cumulative(y):
        seen.append(y.copy())
        return np.cumsum(y)

    al = align({"s": shuffled, "none": pd.DataFrame({"step": [2, 4]})}, "x", transform=cumulative)
    np.testing.assert_array_equal(seen[0], [10.0, 20.0, 30.0])  # in step order, not row order
    assert al.steps.tolist() == [1, 2, 3, 4]
    np.testing.assert_array_equal(al.values[0], [10.0, 30.0, 60.0, np.nan])
    assert np.isnan(al.values[1]).all()


def test_align_reads_booleans_as_numbers_and_text_as_missing():
    frame = pd.DataFrame({"step": [0, 1, 2], "flag": [True, False, True], "t": ["a", "1.5", "b"]})
    np.testing.assert_array_equal(align({"r": frame}, "flag").values[0], [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(align({"r": frame}, "t").values[0], [np.nan, 1.5, np.nan])


@pytest.mark.parametrize("bad, why", [(pd.DataFrame({"x": [1.0]}), "no 'step'"),
                                      (run([1, 1], [1.0, 2.0]), "step 1 appears more than once")])
def test_align_names_the_run_whose_steps_cannot_be_matched(bad, why):
    with pytest.raises(ValidationError, match=why) as err:
        align({"good": run([1], [1.0]), "seed 3": bad}, "x")
    assert "run seed 3" in str(err.value)


def test_no_runs_align_to_nothing():
    al = align({}, "x")
    assert al.steps.size == 0 and al.values.shape == (0, 0)
    st = group_stats(al)
    assert st.steps.size == 0 and st.mean.size == 0


def test_group_statistics_over_the_runs_that_reached_each_step():
    a = run([0, 1, 2, 3], [1.0, 2.0, 3.0, 4.0])
    b = run([0, 1, 2], [3.0, 4.0, 9.0])
    c = run([0, 1], [5.0, 0.0])
    al = align({"a": a, "b": b, "c": c}, "x")
    mm = group_stats(al, "minmax")
    assert mm.steps.tolist() == [0, 1, 2, 3]
    assert mm.count.tolist() == [3, 3, 2, 1]
    np.testing.assert_allclose(mm.mean, [3.0, 2.0, 6.0, 4.0])
    np.testing.assert_array_equal(mm.lo, [1.0, 0.0, 3.0, 4.0])
    np.testing.assert_array_equal(mm.hi, [5.0, 4.0, 9.0, 4.0])
    sd = group_stats(al, "sigma")
    expect = [np.std([1.0, 3.0, 5.0]), np.std([2.0, 4.0, 0.0]), np.std([3.0, 9.0]), 0.0]
    np.testing.assert_allclose(sd.hi - sd.mean, expect)
    np.testing.assert_allclose(sd.mean - sd.lo, expect)


def test_nan_and_inf_are_left_out_like_a_missing_step_and_an_empty_step_is_dropped():
    a = run([0, 1, 2], [np.nan, 2.0, np.inf])
    b = run([0, 1, 2], [np.nan, 4.0, 6.0])
    st = group_stats(align({"a": a, "b": b}, "x"), "minmax")
    assert st.steps.tolist() == [1, 2]  # step 0: no run has a value there
    assert st.count.tolist() == [2, 1]
    np.testing.assert_array_equal(st.mean, [3.0, 6.0])
    assert np.isfinite(st.lo).all() and np.isfinite(st.hi).all()


def test_a_one_run_group_is_the_run_with_a_band_of_no_width():
    a = run(np.arange(7), np.linspace(-1.0, 2.0, 7))
    for band in ("minmax", "sigma"):
        st = group_stats(align({"only": a}, "x"), band)
        np.testing.assert_array_equal(st.mean, a["x"].to_numpy())
        np.testing.assert_array_equal(st.lo, st.hi)
        assert (st.count == 1).all()


def test_an_unknown_band_is_refused_by_name():
    with pytest.raises(ValidationError, match="band 'iqr'") as err:
        group_stats(align({"a": run([0], [1.0])}, "x"), "iqr")
    assert err.value.field == "band" and err.value.value == "iqr"


def test_grouped_stats_keeps_the_groups_order_and_each_groups_own_steps():
    frames = {"s0": run([0, 1], [1.0, 2.0]), "s1": run([0, 1, 2], [3.0, 4.0, 5.0]),
              "t0": run([10, 11], [100.0, 200.0]), "stray": run([0], [1e9])}
    out = grouped_stats(frames, {"t0": "cfg=b", "s0": "cfg=a", "s1": "cfg=a"}, "x")
    assert list(out) == ["cfg=b", "cfg=a"]
    assert out["cfg=b"].steps.tolist() == [10, 11] and out["cfg=b"].mean.tolist() == [100.0, 200.0]
    assert out["cfg=a"].steps.tolist() == [0, 1, 2] and out["cfg=a"].mean.tolist() == [2.0, 3.0, 5.0]
    assert out["cfg=a"].count.tolist() == [2, 2, 1]  # "stray" is in no group: left out


ROWS = [
    {"run_id": "r1", "tags": ["cfg=a", "seed=1"], "config": {"max_duration": 500.0, "resurrection": True}},
    {"run_id": "r2", "tags": ["cfg=b", "seed=1"], "config": {"max_duration": 200.0, "resurrection": True}},
    {"run_id": "r3", "tags": ["seed=2", "cfg=a"], "config": {"max_duration": 500.0, "resurrection": False}},
    {"run_id": "r4", "tags": [], "config": {}},
]


def test_group_options_are_the_tags_their_keys_and_the_logged_config_fields():
    assert group_options(ROWS) == ["tags", "tag:cfg", "tag:seed", "config:max_duration", "config:resurrection"]
    assert group_options([{"run_id": "x", "tags": ["plain"], "config": {}}]) == ["tags"]
    assert group_options([{"run_id": "x"}]) == []


def test_group_runs_by_config_sorts_by_value_and_puts_runs_without_it_last():
    groups = group_runs(ROWS, "config:max_duration")
    assert groups == {"r2": "max_duration=200", "r1": "max_duration=500", "r3": "max_duration=500",
                      "r4": "(no max_duration)"}
    assert list(groups) == ["r2", "r1", "r3", "r4"]
    assert group_runs(ROWS, "config:resurrection")["r3"] == "resurrection=off"


def test_group_runs_by_a_tag_key_and_by_the_whole_tag_set():
    by_cfg = group_runs(ROWS, "tag:cfg")
    assert by_cfg == {"r1": "cfg=a", "r3": "cfg=a", "r2": "cfg=b", "r4": "(no cfg)"}
    by_tags = group_runs(ROWS, "tags")
    assert by_tags["r1"] == "cfg=a, seed=1" and by_tags["r3"] == "cfg=a, seed=2" and by_tags["r4"] == "(no tags)"
    assert len(set(by_tags.values())) == 4


def test_group_runs_refuses_a_way_it_does_not_know():
    with pytest.raises(ValidationError, match="group by 'colour'") as err:
        group_runs(ROWS, "colour")
    assert err.value.field == "group_by"
