"""Compare's figures beyond the signal panels: A − B per field, and groups of runs as mean and band.

Functional like :mod:`regime_dash.figures.signals`: arrays in, a plotly figure dict
(``{"data", "layout"}``, arrays as plotly's typed arrays) out, drawn by the page as it is.

* :func:`difference_figure`: one panel per field, A − B at the steps both runs have
  (:func:`regime_dash.analysis.diff.field_deltas`), each field's first differing step marked
  (✕) and the runs' first differing step as a dotted line across every panel;
* :func:`group_figure`: one panel per field, each group's mean (its colour) over a band,
  min-max or ±1 σ (:func:`regime_dash.analysis.groups.grouped_stats`), step-aligned; the
  hover says over how many runs each point was taken.

Long runs are cut to about the chart's width as the signal panels are (MinMaxLTTB for a
line; a band keeps each bucket's lowest low and highest high).
"""
from __future__ import annotations

import functools
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from regime_dash.figures import plotly_arrays
from regime_dash.analysis.diff import FieldDelta
from regime_dash.analysis.groups import BANDS, grouped_stats
from regime_dash.errors import ValidationError
from regime_dash.figures.signals import DEFAULT_POINTS, RUN_COLOURS, compact, downsample, ema_debiased, thin_flat
from regime_dash.figures.overlay import SEVERITY_COLOURS, break_at_nonfinite

#: Height of one panel in pixels (the figure is this times the number of panels, plus its margins).
PANEL_HEIGHT = 190
#: The margins: the y titles on the left, the legend above, the x title below.
MARGIN = {"l": 84, "r": 24, "t": 64, "b": 56}
#: The words of each band kind, for titles and the hover.
BAND_WORDS = {"minmax": "min-max", "sigma": "±1 σ"}


def _fill(hex_colour: str, alpha: float) -> str:
    h = hex_colour.lstrip("#")
    return f"rgba({int(h[0:2], 16)},{int(h[2:4], 16)},{int(h[4:6], 16)},{alpha})"


def short_name(column: str) -> str:
    """A diag column without its ``risk_stack.`` prefix (the panels' titles)."""
    return column.removeprefix("risk_stack.").removeprefix("regime.")


@functools.lru_cache(maxsize=32)
def stacked_layout(titles: tuple[str, ...], height: int) -> tuple[dict, tuple[tuple[str, str], ...]]:
    """A layout of ``len(titles)`` panels on one shared step axis, and each panel's ``(xaxis, yaxis)``."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=len(titles), cols=1, shared_xaxes=True, subplot_titles=titles,
                        vertical_spacing=min(0.06, 0.3 / max(len(titles), 1)))
    fig.update_layout(height=height, margin=MARGIN, hovermode="x unified", uirevision="compare",
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0))
    for ann in fig.layout.annotations:
        ann.update(font=dict(size=12), x=0, xanchor="left")
    fig.update_xaxes(tickformat="d", hoverformat="d")
    fig.update_xaxes(title_text="step", row=len(titles), col=1)
    axes = []
    for r in range(1, len(titles) + 1):
        fig.add_scatter(x=[], y=[], row=r, col=1)
        axes.append((fig.data[-1].xaxis, fig.data[-1].yaxis))
    return fig.layout.to_plotly_json(), tuple(axes)


def _spec(data: list[dict], titles: Sequence[str], shapes: list[dict] | None = None) -> dict:
    import copy

    layout, _ = stacked_layout(tuple(titles), PANEL_HEIGHT * len(titles) + MARGIN["t"] + MARGIN["b"])
    layout = copy.deepcopy(layout)
    if shapes:
        layout["shapes"] = shapes
    return {"data": [{k: plotly_arrays.encode(v) for k, v in t.items()} for t in data], "layout": layout}


def _axes(n: int) -> tuple[tuple[str, str], ...]:
    return stacked_layout(tuple(str(i) for i in range(n)), 100)[1]


def without_bands(spec: dict) -> dict:
    """``spec`` (a :func:`regime_dash.figures.signals.signal_spec`) without its series' min/max bands (the
    traces :func:`regime_dash.figures.signals.run_traces` names ``"<run> <series> min/max"``).

    With many runs overlaid each run's bands cover the others' lines, and they are a third of
    the traces and about half of the browser's drawing time; the downsampled lines keep
    each bucket's extremes (MinMaxLTTB)."""
    return {**spec, "data": [t for t in spec["data"] if not str(t.get("name", "")).endswith(" min/max")]}


def difference_figure(deltas: Mapping[str, FieldDelta], names: tuple[str, str], first_step: int | None, *,
                      n_out: int = DEFAULT_POINTS) -> dict:
    """A − B of each field of ``deltas`` (in its order), one panel each.

    ``names`` are runs A and B (for the hover); ``first_step`` is where the runs first part
    (:attr:`regime_dash.analysis.diff.RunDiff.first_step`): a dotted line across every panel.
    """
    if not deltas:
        raise ValidationError("no field to draw the difference of", field="fields", value=[])
    a, b = names
    titles, data = [], []
    for (column, d), (xa, ya) in zip(deltas.items(), _axes(len(deltas))):
        where = (f"first differs at step {d.first_step:,} ({d.rows:,} of {len(d.steps):,} steps)"
                 if d.first_step is not None else f"equal at all {len(d.steps):,} shared steps")
        titles.append(f"{short_name(column)} — {where}")
        x = d.steps.astype(np.float64)
        red = downsample(x, d.delta, n_out)
        lx, ly = thin_flat(*break_at_nonfinite(red.x, red.y, x, d.delta))
        data.append({"x": compact(lx), "y": compact(ly), "mode": "lines", "name": short_name(column),
                     "line": {"color": RUN_COLOURS[0], "width": 1.5}, "showlegend": False,
                     "hovertemplate": f"{a} − {b}: %{{y:.6g}} (step %{{x:d}})<extra>{short_name(column)}</extra>",
                     "xaxis": xa, "yaxis": ya})
        if d.first_step is not None:
            at = int(np.searchsorted(d.steps, d.first_step))
            y0 = float(d.delta[at]) if np.isfinite(d.delta[at]) else 0.0
            data.append({"x": [d.first_step], "y": [y0], "mode": "markers", "name": f"{column} first difference",
                         "marker": {"symbol": "x", "size": 11, "color": SEVERITY_COLOURS["fail"]},
                         "showlegend": False, "xaxis": xa, "yaxis": ya,
                         "hovertemplate": f"first difference of {short_name(column)}: step %{{x:d}}, "
                                          f"{a} − {b} = %{{y:.6g}}<extra></extra>"})
    shapes = [] if first_step is None else [
        {"type": "line", "xref": "x", "yref": "paper", "x0": first_step, "x1": first_step, "y0": 0, "y1": 1,
         "line": {"color": SEVERITY_COLOURS["fail"], "dash": "dot", "width": 1}}]
    return _spec(data, titles, shapes)


def _band_trace(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, colour: str, name: str, n_out: int,
                axes: tuple[str, str]) -> dict | None:
    """The band ``lo``..``hi`` as one closed polygon (highs forward, lows back); None when it has no width."""
    if not len(x) or np.array_equal(lo, hi):
        return None
    rl, rh = downsample(x, lo, n_out), downsample(x, hi, n_out)
    if len(rl.band_x) and len(rh.band_x) == len(rl.band_x):  # long: each bucket's lowest low, highest high
        bx, blo, bhi = rl.band_x, rl.band_lo, rh.band_hi
    else:
        bx, blo, bhi = x, lo, hi
    return {"x": compact(np.concatenate([bx, bx[::-1]])), "y": compact(np.concatenate([bhi, blo[::-1]])),
            "mode": "lines", "fill": "toself", "fillcolor": _fill(colour, 0.18), "line": {"width": 0, "color": colour},
            "hoverinfo": "skip", "showlegend": False, "legendgroup": name, "name": f"{name} band",
            "xaxis": axes[0], "yaxis": axes[1]}


def group_figure(frames: Mapping[str, pd.DataFrame], groups: Mapping[str, str], columns: Sequence[str], *,
                 band: str = "minmax", smoothing: float = 0.0, n_out: int = DEFAULT_POINTS) -> dict:
    """Each group's mean of each of ``columns`` over its band, one panel per column.

    ``groups`` maps a run's label (a key of ``frames``) to its group, in the groups' order;
    ``smoothing`` (the signal panels' debiased EMA) is applied to each run before the statistics.
    """
    if band not in BANDS:
        raise ValidationError(f"band {band!r} is not one of {list(BANDS)}", field="band", value=band)
    if not columns:
        raise ValidationError("no field to draw the groups of", field="fields", value=[])
    transform = (lambda y: ema_debiased(y, smoothing)) if smoothing > 0 else None
    order = list(dict.fromkeys(groups.values()))
    size = {g: sum(1 for label in groups if groups[label] == g and label in frames) for g in order}
    titles, data = [], []
    for k, (column, axes) in enumerate(zip(columns, _axes(len(columns)))):
        titles.append(f"{short_name(column)} — group mean, {BAND_WORDS[band]} band")
        for g, stats in grouped_stats(frames, groups, column, band, transform).items():
            colour = RUN_COLOURS[order.index(g) % len(RUN_COLOURS)]  # groups are not runs: in their order
            name = f"{g} ({size[g]} run{'s' if size[g] != 1 else ''})"
            x = stats.steps.astype(np.float64)
            shade = _band_trace(x, stats.lo, stats.hi, colour, name, n_out, axes)
            if shade is not None:
                data.append(shade)
            red = downsample(x, stats.mean, n_out)
            at = np.searchsorted(stats.steps, red.x.astype(np.int64))
            data.append({"x": compact(red.x), "y": compact(red.y), "customdata": compact(stats.count[at]),
                         "mode": "lines", "name": name, "legendgroup": name, "showlegend": k == 0,
                         "line": {"color": colour, "width": 1.8}, "xaxis": axes[0], "yaxis": axes[1],
                         "hovertemplate": f"{g}: %{{y:.6g}} (mean of %{{customdata}}; step %{{x:d}})<extra></extra>"})
    return _spec(data, titles)
