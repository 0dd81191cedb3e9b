"""Run diff: the spec's F3 byte-identical check, and where two runs part when they are not."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from regime_dash import RegimeConfig, replay
from regime_dash.sources import scenarios
from regime_dash.analysis import diff_runs
from regime_dash.analysis import view as v
from regime_dash.diag.catalogue import read_jsonl, write_jsonl
from regime_dash.errors import ValidationError
from test_invariants import STEP0, rich_frame


def test_the_same_replay_twice_is_identical():
    stream = scenarios.make("fold_boundary", steps=300, accounts=16)
    d = diff_runs(replay(stream), replay(stream))
    assert d.identical and d.first_step is None and d.fields == [] and d.rows_compared == 300
    assert d.lines() == ["identical: 300 steps, every field equal"]


def test_a_jsonl_round_trip_is_identical(tmp_path):
    f = rich_frame()
    back = read_jsonl(write_jsonl(f, tmp_path / "diag.jsonl"))
    assert diff_runs(f, back).identical


def test_one_changed_value_gives_its_step_field_and_size():
    f = rich_frame()
    g = f.copy()
    g.loc[700, v.SIGMA] = g.loc[700, v.SIGMA] + np.float32(0.25)
    g.loc[900, v.SIGMA] = g.loc[900, v.SIGMA] - np.float32(0.5)
    d = diff_runs(f, g)
    assert not d.identical and d.first_step == STEP0 + 700
    (fd,) = d.fields
    assert fd.column == v.SIGMA and fd.rows == 2 and fd.first_step == STEP0 + 700
    assert fd.max_abs == pytest.approx(0.5, rel=1e-6)


def test_a_config_change_parts_the_runs_where_its_effect_starts():
    stream = scenarios.make("tail_shock", steps=200, accounts=32)
    d = diff_runs(replay(stream), replay(stream, RegimeConfig(envelope_decay_alpha=0.02)))
    # the decay α is a diag field on every row; σ and the envelope part once the envelope decays
    assert d.first_step == int(stream.step[0])
    cols = {f.column: f for f in d.fields}
    assert v.DECAY_ALPHA in cols and cols[v.DECAY_ALPHA].rows == 200
    assert cols[v.ENVELOPE].first_step == int(stream.step[1])
    assert cols[v.ENVELOPE].max_abs > 0


def test_nan_equals_nan_and_dtypes_do_not_matter():
    a = pd.DataFrame({"step": [1, 2, 3], "x": np.array([1.5, np.nan, 2.0], np.float32)})
    b = pd.DataFrame({"step": [1, 2, 3], "x": np.array([1.5, np.nan, 2.0], np.float64)})
    d = diff_runs(a, b)
    assert d.identical and any("dtypes" in n for n in d.notes)
    c = b.copy()
    c.loc[1, "x"] = 7.0
    d2 = diff_runs(a, c)
    assert d2.fields[0].first_step == 2 and d2.fields[0].to_dict()["max_abs"] is None  # NaN vs 7


def test_rows_are_matched_by_step_not_position():
    f = rich_frame()
    d = diff_runs(f, f.iloc[::-1].reset_index(drop=True))
    assert d.identical


def test_missing_steps_and_columns_are_reported():
    f = rich_frame()
    g = f.drop(index=[5, 6]).drop(columns=[v.FACTOR])
    g["extra"] = 1.0
    d = diff_runs(f, g)
    assert not d.identical
    assert d.only_a == [v.FACTOR] and d.only_b == ["extra"]
    assert d.steps_only_a == 2 and d.first_step_only_a == STEP0 + 5 and d.steps_only_b == 0
    assert d.first_step == STEP0 + 5 and d.fields == []
    text = "\n".join(d.lines())
    assert "only in A: " + v.FACTOR in text and "2 step(s) only in A" in text


def test_text_columns_differ_without_a_size():
    a = pd.DataFrame({"step": [0, 1], "phase": ["train", "train"]})
    b = pd.DataFrame({"step": [0, 1], "phase": ["train", "eval"]})
    (fd,) = diff_runs(a, b).fields
    assert fd.column == "phase" and fd.first_step == 1 and fd.max_abs is None


def test_columns_option_limits_the_comparison():
    f = rich_frame()
    g = f.copy()
    g[v.SIGMA] = g[v.SIGMA] * np.float32(2)
    assert diff_runs(f, g, columns=[v.FLAG, v.RECENCY]).identical
    with pytest.raises(ValidationError, match="nope"):
        diff_runs(f, g, columns=["nope"])


def test_runs_without_usable_steps_raise():
    with pytest.raises(ValidationError, match="step"):
        diff_runs(pd.DataFrame({"x": [1]}), pd.DataFrame({"step": [0], "x": [1]}))
    with pytest.raises(ValidationError, match="step 3 appears more than once"):
        diff_runs(pd.DataFrame({"step": [3, 3], "x": [1, 2]}), pd.DataFrame({"step": [3], "x": [1]}))


# ---- A − B per field (the Compare page's difference chart) --------------------------------------
def test_field_deltas_agree_with_the_diff_on_every_first_differing_step():
    from regime_dash.analysis.diff import field_deltas

    stream = scenarios.make("tail_shock", steps=200, accounts=32)
    a, b = replay(stream), replay(stream, RegimeConfig(envelope_decay_alpha=0.02))
    deltas = field_deltas(a, b)
    firsts = {f.column: f for f in diff_runs(a, b).fields}
    for column, d in deltas.items():
        if column in firsts:
            assert d.first_step == firsts[column].first_step and d.rows == firsts[column].rows, column
        else:
            assert d.first_step is None and not d.delta.any(), column
    env = deltas[v.ENVELOPE]
    np.testing.assert_array_equal(env.delta, a[v.ENVELOPE].to_numpy(np.float64) - b[v.ENVELOPE].to_numpy(np.float64))


def test_field_deltas_match_by_step_over_unequal_lengths_nan_and_text():
    from regime_dash.analysis.diff import field_deltas

    a = pd.DataFrame({"step": [3, 1, 2, 0], "x": [4.0, np.nan, 3.0, 1.0], "flag": [True, False, True, False],
                      "phase": ["train"] * 4})
    b = pd.DataFrame({"step": [1, 2, 3, 4, 5], "x": [np.nan, 1.0, np.nan, 0.0, 0.0], "flag": [0, 1, 0, 0, 0],
                      "phase": ["eval"] * 5})
    d = field_deltas(a, b)
    assert set(d) == {"x", "flag"}  # text has no difference
    assert d["x"].steps.tolist() == [1, 2, 3]
    np.testing.assert_array_equal(d["x"].delta, [0.0, 2.0, np.nan])  # NaN = NaN; NaN against 4 differs
    assert d["x"].first_step == 2 and d["x"].rows == 2
    np.testing.assert_array_equal(d["flag"].delta, [0.0, 0.0, 1.0])
    assert d["flag"].first_step == 3
    with pytest.raises(ValidationError, match="neither run"):
        field_deltas(a, b, ["nope"])
    with pytest.raises(ValidationError, match="appears more than once"):
        field_deltas(a, pd.concat([b, b]))


def test_field_deltas_of_runs_that_share_no_step_are_empty_arrays():
    from regime_dash.analysis.diff import field_deltas

    d = field_deltas(pd.DataFrame({"step": [0, 1], "x": [1.0, 2.0]}), pd.DataFrame({"step": [5], "x": [1.0]}))
    assert d["x"].steps.size == 0 and d["x"].first_step is None and d["x"].rows == 0
