"""A Plotly chart kept on the page and redrawn in place: a streamlit components v2 element.

``st.plotly_chart`` mounts a new chart element for every new figure (its element id hashes
the figure), so each change is drawn from nothing (``newPlot``), hidden, then themed and
drawn again once its width is known; and any page with one loads streamlit's 4.7 MB
plotly.js chunk. :func:`plotly_chart` instead keeps one graph div per ``key`` across
reruns and draws each new figure into it with ``Plotly.react`` (one drawing), sized to
its column; plotly.js is the partial bundle in ``plotly_assets/`` (the cartesian traces,
1.5 MB; see its README), loaded once per page. The figure is drawn with its own template,
over which the page's theme (streamlit's text colour, font and border colour, and a
transparent background) is laid, so that a chart follows the light or dark theme as
``st.plotly_chart``'s did.
A figure with a trace type that bundle lacks (``scattergl``) goes to ``st.plotly_chart``.

The component is declared the components v2 way: the package's manifest
(``regime_dash/pyproject.toml``, ``[tool.streamlit.component]``) names ``ui/plotly_assets``
its ``asset_dir``, and streamlit, finding it in the installed distribution (a wheel, or
``pip install -e .`` as the README's commands do), serves the module and the bundle from
that folder.
A checkout run without installing it has no manifest streamlit can find: there the
module goes inline and the bundle through components v1's file route.
"""
from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Mapping

import streamlit as st
from streamlit.components import v1 as components_v1
from streamlit.components import v2 as components_v2
from streamlit.errors import StreamlitAPIException

#: The bundle's folder: package data, found through importlib.resources (a checkout or an install);
#: a real directory, since streamlit's file route serves it by path.
ASSETS = Path(str(resources.files("regime_dash").joinpath("ui", "plotly_assets")))
#: The vendored plotly.js bundle (npm ``plotly.js-cartesian-dist-min``; the version is in the name).
BUNDLE = "plotly-cartesian-4.1.1.min.js"
#: The trace types that bundle draws (its README's list; a test reads them from the bundle).
TRACE_TYPES = frozenset({"bar", "box", "contour", "heatmap", "histogram", "histogram2d", "histogram2dcontour",
                         "image", "pie", "scatter", "scatterternary", "violin"})
#: The dashboard's chart config: scroll zoom, no plotly logo.
CONFIG = {"scrollZoom": True, "displaylogo": False}
#: The component's name: the distribution's and the manifest entry's (streamlit's element carries it).
NAME = "regime-dash.plotly_react"
#: Name of the file route the bundle is served under (``component/<name>/<file>``).
_ROUTE_NAME = "plotly_bundle"

_CSS = """
.rd-plotly-status { font-size: 0.875rem; opacity: 0.75; padding: 0.25rem 0; }
.rd-plotly-status.rd-plotly-problem { opacity: 1; color: var(--st-red-text-color, #b91c1c); }
"""



#: ``(mount, served from the asset_dir)`` once declared: declared at the first draw, in a script
#: run, since streamlit reads the installed manifests when its runtime starts.
_DECLARED: list[tuple[Any, bool]] = []


def _component() -> tuple[Any, bool]:
    """The component, and whether it is served from its ``asset_dir`` (the manifest was found)."""
    if not _DECLARED:
        try:
            _DECLARED.append((components_v2.component(NAME, js="plotly_react.js", css=_CSS,
                                                      isolate_styles=False), True))
        except StreamlitAPIException:  # not installed: no manifest, so no asset_dir to serve from
            _DECLARED.append((components_v2.component(NAME, js=(ASSETS / "plotly_react.js").read_text(),
                                                      css=_CSS, isolate_styles=False), False))
    return _DECLARED[0]


def trace_types(figure: Any) -> set[str]:
    """The trace types of a plotly figure or figure dict (``scatter`` where a trace names none)."""
    traces = (figure.get("data") or ()) if isinstance(figure, Mapping) else figure.data
    return {str((t.get("type") if isinstance(t, Mapping) else t.type) or "scatter") for t in traces}


def drawable(figure: Any) -> bool:
    """Whether the vendored bundle draws every trace of ``figure`` (a plotly figure or figure dict)."""
    return trace_types(figure) <= TRACE_TYPES


def figure_json(figure: Any) -> str:
    """What the component is given: the figure's JSON text, which the browser parses. A figure dict
    that is plain JSON is encoded once, here; a plotly ``Figure``, or a dict holding what JSON cannot
    (NumPy arrays or scalars, datetimes, NaN), by plotly's own encoder (arrays as typed arrays,
    NaN as null).

    Streamlit sends a component's data as JSON: a dict it cannot encode would reach the
    browser as its ``str()``, and a NaN would break the browser's parse of the whole message.
    Text, not the dict: streamlit encodes a component's data twice a run (the message, and
    sorted for the element's identity), which for a dict of many traces (Compare's ten runs,
    1.6 MB) was three encodings of it a redraw; a string is copied, not walked. And the browser
    skips drawing a figure whose text is the one on screen.
    """
    import plotly.io

    if isinstance(figure, Mapping):
        try:
            return json.dumps(figure, allow_nan=False)
        except (TypeError, ValueError):
            return plotly.io.json.to_json_plotly(figure)
    return plotly.io.to_json(figure, validate=False)


def bundle_url() -> dict[str, str]:
    """Where the browser finds the bundle: ``{"bundle", "bundle_base"}``, the file beside the
    component's module (``"module"``), or the v1 file route's URL relative to the page (``"page"``,
    registering that route with this server)."""
    if _component()[1]:
        return {"bundle": BUNDLE, "bundle_base": "module"}
    route = components_v1.declare_component(_ROUTE_NAME, path=str(ASSETS))
    return {"bundle": f"component/{route.name}/{BUNDLE}", "bundle_base": "page"}


def plotly_chart(figure: Any, key: str, *, config: Mapping[str, Any] | None = None,
                 on_select: Callable[[], None] | None = None, on_click: Callable[[], None] | None = None) -> Any:
    """Draw ``figure`` in the chart kept under ``key``.

    Parameters
    ----------
    figure
        A plotly figure dict, ``{"data", "layout"}`` (numeric arrays may be typed arrays,
        ``{"dtype", "bdata"}``), or a plotly ``Figure``.
    key
        The chart's key: the same key on the next rerun redraws the same graph in place.
    config
        plotly.js config; the dashboard's :data:`CONFIG` by default.
    on_select
        Called when a box is dragged on the chart; the box is then the component's
        ``selection`` (``{"box": [{"x": [a, b], "y": [c, d]}]}``, as ``st.plotly_chart``'s).
    on_click
        Called when a point of a trace with a ``meta`` dict is clicked; the component's ``click``
        is then ``{"meta": that dict, "x": the point's x}`` (a chart the bundle cannot draw has none).

    Returns
    -------
    The component's result (its ``selection`` trigger value), or ``st.plotly_chart``'s for a
    figure the bundle cannot draw.
    """
    if not drawable(figure):
        return st.plotly_chart(figure, key=key, config=dict(config or CONFIG),
                               **({"on_select": on_select, "selection_mode": "box"} if on_select else {}))
    events = {"selection": on_select, "click": on_click}
    data = {"figure": figure_json(figure), "config": dict(config or CONFIG), **bundle_url(),
            "events": [name for name, fn in events.items() if fn]}
    return _component()[0](key=key, data=data, **{f"on_{name}_change": fn for name, fn in events.items() if fn})


__all__ = ["ASSETS", "BUNDLE", "CONFIG", "NAME", "TRACE_TYPES", "bundle_url", "drawable", "figure_json",
           "plotly_chart", "trace_types"]
