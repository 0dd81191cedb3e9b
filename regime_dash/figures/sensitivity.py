"""Plotly figures of a what-if sensitivity (:mod:`regime_dash.runs.sensitivity`): tables in, figures out.

:func:`tornado` draws one summary metric: a horizontal bar per config field
from the lowest to the highest value its sweep reached, measured from the base
replay's value (the line at 0), largest span on top. :func:`field_sweep` draws
the sweep of one field: each metric it moves against the field's value.
No streamlit and no I/O here.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from regime_dash.errors import ValidationError
from regime_dash.runs.sensitivity import format_value

#: Bar colour of the tornado.
BAR_COLOUR = "#636EFA"


def _need(table: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    for name in columns:
        if name not in table.columns:
            raise ValidationError(f"{what} has no column {name!r}", field=name, value=name)


def tornado(effects: pd.DataFrame, metric: str, exclude: Sequence[str] = ()):
    """Tornado chart of ``metric``: each field's [low, high] relative to the base value.

    Parameters
    ----------
    effects
        :attr:`SensitivityResult.effects` (columns ``field``, ``metric``,
        ``base``, ``low``, ``high``, ``at_low``, ``at_high``, ``span``).
    metric
        The summary metric drawn.
    exclude
        Fields left out (the no-effect list: an end-of-range blip is not an effect).

    Returns
    -------
    plotly.graph_objects.Figure
        One bar per field whose span is > 0, largest at the top; each bar's
        ``customdata`` is its field name, so a click names the field.
    """
    import plotly.graph_objects as go

    _need(effects, ("field", "metric", "base", "low", "high", "at_low", "at_high", "span"), "effects table")
    rows = effects[(effects["metric"] == metric) & (effects["span"] > 0) & ~effects["field"].isin(exclude)]
    rows = rows.sort_values("span", kind="stable")  # plotly draws the first bar at the bottom
    base = float(effects.loc[effects["metric"] == metric, "base"].iloc[0]) if (effects["metric"] == metric).any() \
        else float("nan")
    text = [f"{f}: {lo:g} at {format_value(al)} … {hi:g} at {format_value(ah)}"
            for f, lo, hi, al, ah in zip(rows["field"], rows["low"], rows["high"], rows["at_low"], rows["at_high"])]
    fig = go.Figure(go.Bar(
        y=rows["field"].tolist(), x=(rows["high"] - rows["low"]).to_numpy(dtype=float),
        base=(rows["low"] - base).to_numpy(dtype=float), orientation="h", marker_color=BAR_COLOUR,
        customdata=rows["field"].tolist(), hovertext=text, hoverinfo="text"))
    fig.add_vline(x=0, line_color="black", line_width=1)
    fig.update_layout(title=f"{metric} (base {base:g})", xaxis_title=f"{metric} − base",
                      height=max(180, 60 + 28 * len(rows)), margin=dict(l=160, r=20, t=40, b=40),
                      showlegend=False)
    return fig


def field_sweep(table: pd.DataFrame, field: str, metrics: Sequence[str]):
    """Each of ``metrics`` against ``field`` over its one-at-a-time sweep (one panel per metric).

    ``table`` holds the base row and the rows that varied ``field``
    (:meth:`SensitivityResult.field_sweep`). A switch's values are drawn as
    ``false`` / ``true``.
    """
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    _need(table, (field, *metrics), "sweep table")
    if not metrics:
        raise ValidationError(f"no metric to draw for {field!r}", field="metrics", value=list(metrics))
    table = table.sort_values(field, kind="stable")
    x = table[field].to_numpy()
    if x.dtype == bool:
        x = np.array([format_value(v) for v in x])
    fig = make_subplots(rows=len(metrics), cols=1, shared_xaxes=True, vertical_spacing=0.04,
                        subplot_titles=list(metrics))
    for i, metric in enumerate(metrics, start=1):
        fig.add_trace(go.Scatter(x=x, y=table[metric].to_numpy(dtype=float), mode="lines+markers",
                                 name=metric, line_color=BAR_COLOUR,
                                 hovertemplate=f"{field}=%{{x}}<br>{metric}=%{{y}}<extra></extra>"), row=i, col=1)
    fig.update_xaxes(title_text=field, row=len(metrics), col=1)
    fig.update_layout(height=140 + 160 * len(metrics), showlegend=False, margin=dict(l=60, r=20, t=40, b=40))
    return fig


__all__ = ["tornado", "field_sweep"]
