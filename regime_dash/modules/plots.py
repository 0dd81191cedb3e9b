"""Small plotly helpers the module figure builders share; plotly is imported inside each function.

Frames in, :class:`plotly.graph_objects.Figure` out; no streamlit, no I/O.
A ``baseline`` frame (the replay before a what-if change) is drawn dashed and
faint beside the current one.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
#: Longest series drawn as SVG; longer ones go to WebGL. In a browser without a GPU, WebGL is
#: rendered in software: the Controllers page's first charts (600 steps) took about a second longer
#: to appear as a new page load with WebGL than with SVG. The demo streams are 600–3,000 steps.
SVG_MAX_POINTS = 5_000
#: A module chart's margins: the bottom holds the x tick labels and the x title below them
#: (about 50 px; at 30 px plotly drew the title over the ticks).
MARGIN = {"l": 40, "r": 10, "t": 40, "b": 56}
#: A module chart's legend, below the x title.
LEGEND = {"orientation": "h", "y": -0.3}


def lines(frame: pd.DataFrame, columns: Sequence[str], title: str, *, baseline: pd.DataFrame | None = None,
          labels: Sequence[str] | None = None, yaxis: str = "", x: str = "step", hlines: Sequence = (),
          step_shape: Sequence[str] = ()):
    """One line per present column (plus the baseline's, dashed); ``hlines`` is ``[(y, label)]``.

    Series of up to :data:`SVG_MAX_POINTS` points are drawn as SVG, longer ones with WebGL.
    """
    import plotly.graph_objects as go

    fig = go.Figure()
    labels = list(labels or columns)
    xs = frame[x].to_numpy() if x in frame.columns else np.arange(len(frame))
    longest = max(len(frame), 0 if baseline is None else len(baseline))
    scatter = go.Scatter if longest <= SVG_MAX_POINTS else go.Scattergl
    for i, (col, label) in enumerate(zip(columns, labels)):
        colour = PALETTE[i % len(PALETTE)]
        shape = "hv" if col in step_shape else "linear"
        if baseline is not None and col in baseline.columns:
            bx = baseline[x].to_numpy() if x in baseline.columns else np.arange(len(baseline))
            fig.add_trace(scatter(x=bx, y=baseline[col].to_numpy(), name=f"{label} (baseline)",
                                  line=dict(color=colour, dash="dash", width=1, shape=shape), opacity=0.5))
        if col in frame.columns:
            fig.add_trace(scatter(x=xs, y=frame[col].to_numpy(), name=label,
                                  line=dict(color=colour, width=1.5, shape=shape)))
    for y, label in hlines:
        fig.add_hline(y=float(y), line_dash="dot", line_color="grey", annotation_text=label,
                      annotation_position="top left")
    fig.update_layout(title=title, xaxis_title=x, yaxis_title=yaxis, height=320,
                      margin=dict(MARGIN), legend=dict(LEGEND))
    return fig


def histograms(series: dict[str, np.ndarray], title: str, *, nbins: int = 60, xaxis: str = ""):
    """Overlaid normalized histograms, one per named array."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for i, (name, values) in enumerate(series.items()):
        fig.add_trace(go.Histogram(x=np.asarray(values), name=name, nbinsx=nbins, histnorm="probability",
                                   opacity=0.55, marker_color=PALETTE[i % len(PALETTE)]))
    fig.update_layout(title=title, barmode="overlay", xaxis_title=xaxis, yaxis_title="fraction", height=320,
                      margin=dict(MARGIN), legend=dict(LEGEND))
    return fig
