"""Compare's figures: A − B panels with the first differing steps marked, groups as mean over band."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from regime_dash.figures import plotly_arrays
from regime_dash.analysis.diff import field_deltas

fc = pytest.importorskip("regime_dash.figures.compare")
figures = pytest.importorskip("regime_dash.figures.signals")


def arr(v):
    return plotly_arrays.decode(v) if plotly_arrays.is_typed(v) else np.asarray(v)


def test_difference_figure_marks_each_fields_first_step_and_the_runs_first_step():
    a = pd.DataFrame({"step": np.arange(10), "x": np.arange(10.0), "y": np.ones(10)})
    b = a.assign(x=np.where(np.arange(10) >= 4, a["x"] + 2.5, a["x"]))
    spec = fc.difference_figure(field_deltas(a, b), ("A", "B"), 4)
    titles = [ann["text"] for ann in spec["layout"]["annotations"]]
    assert titles[0].startswith("x — first differs at step 4 (6 of 10 steps)")
    assert titles[1].startswith("y — equal at all 10 shared steps")
    (mark,) = [t for t in spec["data"] if t["name"] == "x first difference"]
    assert mark["x"] == [4] and mark["y"] == [-2.5]
    assert spec["layout"]["shapes"][0]["x0"] == 4
    with pytest.raises(Exception, match="no field"):
        fc.difference_figure({}, ("A", "B"), None)


def test_without_bands_leaves_out_exactly_the_series_min_max_bands():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"step": np.arange(5000), "risk_stack.kelly.fraction": rng.random(5000)})
    spec = figures.signal_spec({"r1": frame, "r2": frame * 1.0}, n_out=200)
    bands = [t for t in spec["data"] if t["name"].endswith(" min/max")]
    assert bands and all(t["fill"] == "toself" for t in bands)
    left = fc.without_bands(spec)["data"]
    assert len(left) == len(spec["data"]) - len(bands)
    assert {t["name"] for t in left} == {t["name"] for t in spec["data"]} - {t["name"] for t in bands}


def test_group_figure_draws_each_groups_mean_and_a_band_of_its_runs():
    a = pd.DataFrame({"step": [0, 1, 2], "v": [1.0, 2.0, 3.0]})
    b = pd.DataFrame({"step": [0, 1], "v": [3.0, 6.0]})
    c = pd.DataFrame({"step": [0, 1, 2], "v": [10.0, 10.0, 10.0]})
    spec = fc.group_figure({"a": a, "b": b, "c": c}, {"a": "g", "b": "g", "c": "h"}, ["v"])
    by = {t["name"]: t for t in spec["data"]}
    assert arr(by["g (2 runs)"]["y"]).tolist() == [2.0, 4.0, 3.0]
    assert arr(by["g (2 runs)"]["customdata"]).tolist() == [2, 2, 1]
    band = arr(by["g (2 runs) band"]["y"]).tolist()
    assert band == [3.0, 6.0, 3.0, 3.0, 2.0, 1.0]  # highs forward, lows back
    assert "h (1 run) band" not in by  # one run: no width
    with pytest.raises(Exception, match="band"):
        fc.group_figure({"a": a}, {"a": "g"}, ["v"], band="iqr")
