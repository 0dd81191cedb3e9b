"""The controller modules' line charts: SVG for short series, WebGL for long ones."""
import numpy as np
import pandas as pd

from regime_dash.modules import MODULES, plots


def _frame(n: int) -> pd.DataFrame:
    return pd.DataFrame({"step": np.arange(n), "a": np.sin(np.arange(n) / 10.0)})


def test_short_series_are_svg_and_long_ones_webgl():
    short = plots.lines(_frame(600), ["a"], "short", baseline=_frame(600))
    assert [t.type for t in short.data] == ["scatter", "scatter"]
    edge = plots.lines(_frame(plots.SVG_MAX_POINTS), ["a"], "edge")
    assert [t.type for t in edge.data] == ["scatter"]
    long = plots.lines(_frame(plots.SVG_MAX_POINTS + 1), ["a"], "long")
    assert [t.type for t in long.data] == ["scattergl"]
    # a long baseline puts the whole chart on WebGL (one kind of trace a chart)
    mixed = plots.lines(_frame(600), ["a"], "mixed", baseline=_frame(plots.SVG_MAX_POINTS + 1))
    assert [t.type for t in mixed.data] == ["scattergl", "scattergl"]


def test_every_module_demo_chart_is_drawn_without_webgl():
    # the Controllers page opens on a module's demo stream; in a browser without a GPU a WebGL
    # chart is rendered in software, so the first charts stay SVG
    for name, m in MODULES.items():
        frame = m.replay(m.demo_stream(0, None), m.config_type(), "reference")
        types = {t.type for fig in m.figures(frame, frame) for t in fig.data}
        assert "scattergl" not in types, (name, types)
