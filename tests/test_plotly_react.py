"""The in-place chart's Python side and its vendored plotly.js (regime_dash.ui.plotly_react).

What the browser does with it (one graph div per key redrawn with Plotly.react, the bundle
loaded once, a refused bundle said in words) is checked in tests/test_browser.py.
"""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("streamlit")

from regime_dash.figures import signals as figures  # noqa: E402
from regime_dash.ui import plotly_react  # noqa: E402


def bundle_text() -> str:
    return (plotly_react.ASSETS / plotly_react.BUNDLE).read_text(encoding="utf-8")


def test_the_vendored_bundle_is_the_named_version_with_its_license():
    head = bundle_text()[:300]
    assert "plotly.js (cartesian - minified) v4.1.1" in head and "Licensed under the MIT license" in head
    assert "MIT License" in (plotly_react.ASSETS / "LICENSE").read_text()
    readme = (plotly_react.ASSETS / "README.md").read_text()
    assert "plotly.js-cartesian-dist-min@4.1.1" in readme and plotly_react.BUNDLE in readme


def test_trace_types_are_the_ones_the_bundle_registers():
    registered = set(re.findall(r'moduleType:"trace",name:"([a-z0-9]+)"', bundle_text()))
    assert registered == plotly_react.TRACE_TYPES
    assert "scattergl" not in registered


def test_the_bundle_reads_typed_arrays():
    # plotly.js decodes {"dtype", "bdata"} (from 2.28 on): the decoder is in this bundle
    text = bundle_text()
    assert 'hasOwnProperty("bdata")' in text and 'Error in dtype: "' in text


def test_drawable_and_trace_types_for_dicts_and_figures():
    import plotly.graph_objects as go

    frame = pd.DataFrame({"step": np.arange(50), "risk_stack.kelly.fraction": np.linspace(0, 1, 50)})
    spec = figures.signal_spec({"a": frame}, n_out=20, height=600)
    assert plotly_react.trace_types(spec) == {"scatter"} and plotly_react.drawable(spec)
    gl = go.Figure([go.Scattergl(x=[1, 2], y=[3, 4]), go.Bar(x=[1], y=[2])])
    assert plotly_react.trace_types(gl) == {"scattergl", "bar"} and not plotly_react.drawable(gl)
    assert plotly_react.trace_types({"data": [{"x": [1]}]}) == {"scatter"}  # plotly's default type


def test_figure_json_sends_a_dict_and_a_figure_as_their_json_text():
    import plotly.graph_objects as go

    spec = {"data": [{"type": "scatter", "x": [1, 2], "y": [3, 4]}], "layout": {"height": 300}}
    sent = plotly_react.figure_json(spec)
    assert isinstance(sent, str) and json.loads(sent) == spec
    fig = go.Figure(go.Scatter(x=np.arange(4, dtype=np.float32), y=np.arange(4, dtype=np.float32)))
    text = plotly_react.figure_json(fig)
    decoded = json.loads(text)
    assert decoded["data"][0]["type"] == "scatter"
    assert set(decoded["data"][0]["y"]) == {"dtype", "bdata"}  # typed arrays, as plotly encodes them


def test_figure_json_sends_a_dict_json_cannot_hold_through_plotlys_encoder():
    # NumPy arrays and scalars, datetimes and NaN: streamlit would send the dict's str(), and a
    # NaN would break the browser's parse of the whole message
    steps = np.arange(3, dtype=np.int64)
    for spec in ({"data": [{"type": "scatter", "x": steps, "y": [1.0, 2.0, 3.0]}], "layout": {}},
                 {"data": [{"type": "scatter", "x": [1, 2], "y": [np.int64(3), 4]}], "layout": {}},
                 {"data": [{"type": "scatter", "x": [1, 2], "y": [float("nan"), 4.0]}], "layout": {}},
                 {"data": [{"type": "scatter", "x": np.array(["2026-11-30T10:00", "2026-11-30T11:00"],
                                                             dtype="datetime64[m]"), "y": [1, 2]}],
                  "layout": {}}):
        text = plotly_react.figure_json(spec)
        assert isinstance(text, str)
        decoded = json.loads(text)  # strict JSON: what the browser parses
        assert decoded["data"][0]["type"] == "scatter" and len(decoded["data"]) == 1
    nan = json.loads(plotly_react.figure_json({"data": [{"y": [float("nan"), 4.0]}], "layout": {}}))
    assert nan["data"][0]["y"] == [None, 4.0]
