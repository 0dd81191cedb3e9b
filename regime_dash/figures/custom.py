"""The custom panels: any field of the runs, one panel each, below the spec panels.

A :class:`regime_dash.diag.panel_set.PanelSet` names the fields, in order, each on a linear or
a log y axis; :func:`custom_spec` draws them from the runs' frames on one shared x axis,
a run in the colour it has on the spec panels (:func:`regime_dash.figures.signals.run_colours`).
Each y axis is titled with the field's unit where the catalogue knows it
(:data:`regime_dash.diag.catalogue.UNITS`). A continuous field is downsampled
(:func:`regime_dash.figures.signals.downsample`) and smoothed with the page's smoothing; a 0/1
flag and a counter (whole numbers) are never smoothed (a smoothed flag is a fraction
nobody logged, a smoothed counter a wrong count), and a flag is drawn as steps from every
one of its changes.
"""
from __future__ import annotations

import copy
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from regime_dash.diag import catalogue as diag
from regime_dash.figures import plotly_arrays
from regime_dash.errors import ValidationError
from regime_dash.figures.signals import (COUNTER_COLUMNS, DEFAULT_POINTS, FLAG_COLUMNS, SIGNAL_MARGIN, compact,
                                         downsample, duty_traces, ema_debiased, plot_x, run_colours,
                                         signal_x_domain, thin_flat, x_values)
from regime_dash.figures.compare import stacked_layout, short_name
from regime_dash.figures.overlay import break_at_nonfinite
from regime_dash.diag.panel_set import PanelSet

__all__ = ["PANEL_HEIGHT", "custom_spec", "field_kind", "numeric_columns", "y_title"]

#: Pixels between the top of the first panel and the legend: room for that panel's title.
LEGEND_GAP_PX = 22
#: Height of one custom panel in pixels (the figure's margins come on top).
PANEL_HEIGHT = 240
#: Columns never offered as a panel: the x axes themselves.
X_COLUMNS = frozenset({"step", "wall_time"})


def numeric_columns(frames: Iterable[pd.DataFrame]) -> list[str]:
    """Every numeric column of any of ``frames`` (their union, in first-seen order), but the x axes
    and the store's own bookkeeping (names starting with ``_``)."""
    out: dict[str, None] = {}
    for frame in frames:
        for name in frame.columns:
            if (name in X_COLUMNS or str(name).startswith("_") or name in out
                    or not (pd.api.types.is_numeric_dtype(frame[name]) or pd.api.types.is_bool_dtype(frame[name]))):
                continue
            out[str(name)] = None
    return list(out)


def field_kind(name: str, values: np.ndarray) -> str:
    """``"flag"`` (0/1 values), ``"counter"`` (whole numbers) or ``"signal"`` (the rest): whether a
    field may be smoothed, from the catalogue where it names the field, else from its values."""
    if name in FLAG_COLUMNS:
        return "flag"
    if name in COUNTER_COLUMNS:
        return "counter"
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size and np.isin(v, (0.0, 1.0)).all():
        return "flag"
    if v.size and np.array_equal(v, np.round(v)):
        return "counter"
    return "signal"


def y_title(field: str) -> str:
    """A custom panel's y-axis title: the field's last name, with its unit where the catalogue has one."""
    unit = diag.UNITS.get(field)
    leaf = field.rsplit(".", 1)[-1]
    return f"{leaf} ({unit})" if unit else leaf


def _line(xs: np.ndarray, y: np.ndarray, kind: str, smoothing: float, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    """One run's series of one field as sent: smoothed only when a signal, cut to about ``n_out`` points."""
    if kind == "flag":  # every change kept: a one-step flag still shows
        lx, ly = thin_flat(xs, y, stride=0)
        if len(lx) <= 4 * n_out:
            return lx, ly
    if kind == "signal" and smoothing > 0:
        y = ema_debiased(y, smoothing)
    red = downsample(xs, y, n_out)
    return thin_flat(*break_at_nonfinite(red.x, red.y, xs, y))


def _run_traces(label: str, frame: pd.DataFrame, colour: str, fields: Sequence[str],
                axes: Sequence[tuple[str, str]], *, x: str, smoothing: float, n_out: int, offset: float,
                widen: float) -> list[dict]:
    """One run's traces on the custom panels (a field the run lacks leaves its panel without it)."""
    if len(frame) == 0 or x not in frame.columns:
        return []
    xs = x_values(frame, x) - offset
    order = np.argsort(xs, kind="stable") if np.any(np.diff(xs) < 0) else None
    if order is not None:
        xs = xs[order]
    at = " (step %{x:d})" if x == "step" else ""
    out, first = [], True
    for field, (xa, ya) in zip(fields, axes):
        if field not in frame.columns:
            continue
        y = pd.to_numeric(frame[field], errors="coerce").to_numpy(dtype=np.float64)
        y = y[order] if order is not None else y
        kind = field_kind(field, y)
        name = label if first else f"{label} {short_name(field)}"
        band = None if kind == "signal" else duty_traces(
            xs, y, f"{label} {short_name(field)}", colour, columns=n_out, top=1.0 if kind == "flag" else None,
            steps=x == "step", x_out=lambda v: plot_x(v, x) if x == "wall_time" else compact(v),
            name=name, legendgroup=label, showlegend=first)
        if band is not None:  # flipping faster than the pixel columns: the fraction of steps on, per column
            out += [{**trace, "xaxis": xa, "yaxis": ya} for trace in band]
            first = False
            continue
        lx, ly = _line(xs, y, kind, smoothing, n_out)
        out.append({"type": "scatter", "x": plot_x(lx, x) if x == "wall_time" else compact(lx),
                    "y": compact(ly), "mode": "lines", "xaxis": xa, "yaxis": ya,
                    "line": {"color": colour, "width": 1.5 * widen, **({"shape": "hv"} if kind == "flag" else {})},
                    "name": name, "legendgroup": label,
                    "showlegend": first,
                    "hovertemplate": f"{label} {short_name(field)}: %{{y:.6g}}{at}<extra></extra>"})
        first = False
    return out


def custom_spec(runs: Mapping[str, pd.DataFrame], panels: PanelSet, *, x: str = "step", smoothing: float = 0.0,
                n_out: int = DEFAULT_POINTS, colours: Mapping[str, str] | None = None,
                x_offsets: Mapping[str, float] | None = None,
                x_range: Sequence[float] | None = None) -> dict:
    """The custom panels of ``panels`` for every run of ``runs``, as a plotly figure dict.

    ``runs`` is ``{label: frame}``; ``x``, ``smoothing``, ``n_out``, ``colours`` and ``x_offsets``
    as :func:`regime_dash.figures.signals.signal_panels` takes them; ``x_range`` fixes the x axis's
    range. A panel's y axis is logarithmic where its entry says so. Arrays go as plotly's
    typed arrays. Raises :class:`ValidationError` when ``panels`` has no custom panel.
    """
    if not panels.panels:
        raise ValidationError("the panel set has no custom panel to draw", field="panels", value="")
    fields = panels.fields
    titles = tuple(f"{short_name(p.field)}{' (log)' if p.log else ''}" for p in panels.panels)
    layout, axes = stacked_layout(titles, PANEL_HEIGHT * len(fields) + 150)
    layout = copy.deepcopy(layout)
    # the spec panels' margins: drawn below them at the same width, the x axes line up
    layout["margin"] = dict(SIGNAL_MARGIN)
    for key in [k for k in layout if k.startswith("xaxis")]:
        layout[key]["domain"] = signal_x_domain()
    plot_height = layout["height"] - SIGNAL_MARGIN["t"] - SIGNAL_MARGIN["b"]
    layout["legend"] = {**layout.get("legend", {}), "y": 1 + LEGEND_GAP_PX / plot_height}  # above the first title
    for p, (_, ya) in zip(panels.panels, axes):
        name = "yaxis" + ya[1:]  # "y2" → layout key "yaxis2"
        layout[name] = {**layout.get(name, {}), "title": {"text": y_title(p.field), "font": {"size": 11}},
                        **({"type": "log"} if p.log else {})}
    if x != "step":
        bottom = "xaxis" + axes[-1][0][1:]
        for key in [k for k in layout if k.startswith("xaxis")]:
            layout[key] = {k: v for k, v in layout[key].items() if k not in ("tickformat", "hoverformat")}
        layout[bottom]["title"] = {"text": "wall time"}
    elif x_offsets:
        layout["xaxis" + axes[-1][0][1:]]["title"] = {"text": "steps since each run's first step"}
    if x_range is not None:
        rng = [v.item() if hasattr(v, "item") else v for v in plot_x(np.asarray(x_range, dtype=np.float64), x)]
        for key in [k for k in layout if k.startswith("xaxis")]:
            layout[key]["range"] = [str(v) for v in rng] if x == "wall_time" else rng
    layout["uirevision"] = "custom"
    data: list[dict] = []
    n = len(runs)
    colours = {**run_colours(list(runs)), **(colours or {})}
    for i, (label, frame) in enumerate(runs.items()):
        data += _run_traces(label, frame, colours[label], fields, axes, x=x,
                            smoothing=smoothing, n_out=n_out, offset=float((x_offsets or {}).get(label, 0.0)),
                            widen=1.0 + 0.7 * (n - 1 - i))
    return {"data": [{k: plotly_arrays.encode(v) for k, v in t.items()} for t in data], "layout": layout}
