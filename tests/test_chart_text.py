"""Charts drawn by ``st.plotly_chart`` (those that report selections) have axis text in the page's
text colour: its theme draws ticks and titles pale grey, hard to read on a white page."""
from __future__ import annotations

import pytest

pytest.importorskip("streamlit")

from regime_dash.ui import widgets  # noqa: E402


def test_axis_ticks_and_titles_take_the_page_text_colour():
    spec = {"data": [{"type": "bar", "x": [1.0, -2.0], "y": ["eps_min", "max_duration"], "orientation": "h"}],
            "layout": {"xaxis": {"title": {"text": "effect"}}, "yaxis2": {"title": {"text": "field"}}}}
    fig = widgets.legible_axes(spec)
    colour = widgets.TEXT_COLOURS["light"]
    for axis in (fig.layout.xaxis, fig.layout.yaxis, fig.layout.yaxis2):
        assert axis.tickfont.color == colour and axis.title.font.color == colour
    assert fig.layout.xaxis.title.text == "effect"  # the figure's own settings kept
    assert "tickfont" not in spec["layout"]["xaxis"]  # the caller's dict is not changed

