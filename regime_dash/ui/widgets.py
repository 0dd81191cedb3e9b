"""Reusable dashboard inputs and small helpers. Each widget owns the session-state keys it is given.

Widgets read input and return values; they call no core code beyond what
they need to label themselves (the engine probe, the config field list).
Session-state stores shared between pages live in :mod:`regime_dash.ui.stores`;
whole page sections (panels, tabs) in :mod:`regime_dash.ui.sections`.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import streamlit as st

from regime_dash.core.config import SWITCHES, RegimeConfig
from regime_dash.core.params import FieldSpec
from regime_dash.text import markdown_literal
from regime_dash.ui import plotly_react

#: Toggle labels: the spec's feature numbers of F2/F4/F5, "model:" for the model switches. A toggle's
#: label does not wrap: each fits the What-if column of a 1,280 px window (about 21 characters
#: beside its help icon); the config field's doc, the whole story, is its help.
SWITCH_LABELS = {"resurrection": "F2 Kelly resurrection", "envelope": "F4 PopArt σ envelope",
                 "tau_boost": "F5 IQN τ tail boost", "tail_on_deviation": "model: |Δ − mean| tail",
                 "duration_across_cycles": "model: cycle DURATION",
                 "fused_mirror_tau_boost": "fused: F5 mirrored",
                 "fused_mirror_resurrection": "fused: F2 mirrored"}
ENGINE_CHOICES = ("auto", "reference", "fast", "cuda")


def numeric_specs() -> dict[str, FieldSpec]:
    """RegimeConfig's numeric field declarations (the ones with a slider) by name, in declaration order.

    Each slider's range and step is its field's ``param()`` record, the one
    declaration the Controllers page and the sensitivity analysis read too.
    """
    return RegimeConfig.numeric_specs()


def slider_domain(name: str) -> tuple[float, float, float]:
    """``(min, max, step)`` of numeric RegimeConfig field ``name``'s slider, as floats."""
    return RegimeConfig.domain(name)


def numeric_fields() -> list[str]:
    """RegimeConfig's numeric fields (the ones with a slider), in declaration order."""
    return list(numeric_specs())


def config_controls(key: str, base: RegimeConfig | None = None, *, columns: int = 3,
                    in_url: bool = False) -> dict[str, Any]:
    """A slider for every numeric config field and a toggle for each switch (F2, F4, F5, the model switches).

    Returns the chosen values as a dict (not yet a :class:`RegimeConfig`, so
    the page can show a :class:`~regime_dash.errors.ConfigError` such as
    ε_min > ε_max instead of failing inside the widget). Keys are
    ``f"{key}.{field}"``; ``columns`` lays them out side by side. With
    ``in_url``, each field is kept across pages and named in the URL by its
    field name when it differs from ``base`` (see :mod:`regime_dash.ui.state`).
    """
    from regime_dash.ui import state

    base = base or RegimeConfig()
    out: dict[str, Any] = {}

    def seed(name: str, kind: str, default: Any, **kw) -> dict[str, Any]:
        if not in_url:
            return {"value": default}
        state.restore(f"{key}.{name}", name, kind, default, **kw)
        return {}

    cols = st.columns(min(columns, 3))
    docs = {f.name: f.doc for f in RegimeConfig.field_specs()}
    for name in SWITCHES:
        out[name] = cols[SWITCHES.index(name) % len(cols)].toggle(
            SWITCH_LABELS[name], key=f"{key}.{name}", help=docs.get(name) or None,
            **seed(name, "bool", bool(getattr(base, name))))
    names = numeric_fields()
    cols = st.columns(columns)
    for i, name in enumerate(names):
        lo, hi, step = slider_domain(name)
        value = float(min(max(getattr(base, name), lo), hi))
        out[name] = cols[i % columns].slider(name, min_value=lo, max_value=hi, step=step, key=f"{key}.{name}",
                                             format="%g", **seed(name, "float", value,
                                                                  valid=lambda v, lo=lo, hi=hi: lo <= v <= hi))
    return out


def config_values(key: str, base: RegimeConfig | None = None) -> dict[str, Any]:
    """The values :func:`config_controls` under ``key`` holds now (``base``'s for fields not drawn yet)."""
    base = base or RegimeConfig()
    return {name: st.session_state.get(f"{key}.{name}", getattr(base, name))
            for name in (*SWITCHES, *numeric_fields())}


def engine_picker(key: str, status: Mapping[str, str | None], auto_now: str | None = None) -> str:
    """Engine choice; engines that cannot run here are labelled with the reason.

    ``auto_now`` is what ``auto`` runs on at the moment (the reference while the
    fast engine compiles); the choice is kept across pages and in the URL (``engine``).
    """
    from regime_dash.ui import state

    def label(name: str) -> str:
        if name == "auto":
            if auto_now:
                return f"auto (→ {auto_now})"
            ok = [n for n in ("fast", "cuda", "reference") if status.get(n) is None]
            return f"auto (→ {ok[0]})" if ok else "auto (no engine available)"
        reason = status.get(name, "unknown engine")
        return name if reason is None else f"{name} — unavailable: {reason[:80]}"

    state.restore(key, "engine", "str", "auto", options=ENGINE_CHOICES)
    return st.selectbox("Engine", ENGINE_CHOICES, format_func=label, key=key)


#: The controller paths a replay can take (:mod:`regime_dash.engine.controllers`), with their labels.
CONTROLLER_LABELS = {"single": "single controllers (launch order step 7)",
                     "fused": "rl_fused_controllers (step 8, mirrors the single ones)"}


def controllers_picker(key: str) -> str:
    """The risk-stack controller path (``single`` or ``fused``), kept in the URL as ``controllers``."""
    from regime_dash.ui import state

    state.restore(key, "controllers", "str", "single", options=list(CONTROLLER_LABELS))
    return st.radio("Controller path", list(CONTROLLER_LABELS), format_func=CONTROLLER_LABELS.get, key=key,
                    help="The fused path runs the same controller code in one kernel; with a fused_mirror_* "
                         "switch off its copy leaves the F5 or F2 block out, and the single path's replay "
                         "is drawn beside it.")


def run_picker(key: str, runs: pd.DataFrame, *, multi: bool = True, default: int = 1,
               label: str = "Runs", index: int = 0, param: str | None = None,
               on_change: Callable[[], None] | None = None) -> list[str]:
    """Pick stored runs by name; returns run ids in the order picked.

    ``default`` is how many runs a multi-pick starts with, ``index`` which run a
    single pick starts on. With ``param``, the pick is kept across pages and
    named in the URL under that query parameter (runs since deleted drop out).
    """
    from regime_dash.ui import state

    if runs.empty:
        return []
    ids = list(runs["run_id"])
    names = dict(zip(runs["run_id"], runs["name"]))
    fmt = lambda rid: f"{names.get(rid, rid)} · {rid[-6:]}"  # noqa: E731
    if param and param in st.query_params:  # a URL may name runs by name or alias, as the CLI does
        st.query_params[param] = ",".join(_run_ids_of(runs, st.query_params[param].split(",")))
    if multi:
        if param:
            state.restore(key, param, "list", ids[:default], options=ids)
            return list(st.multiselect(label, ids, format_func=fmt, key=key, on_change=on_change))
        return list(st.multiselect(label, ids, default=ids[:default], format_func=fmt, key=key,
                                   on_change=on_change))
    first = ids[min(index, len(ids) - 1)]
    if param:
        state.restore(key, param, "str", first, options=ids)
        picked = st.selectbox(label, ids, format_func=fmt, key=key, on_change=on_change)
    elif st.session_state.get(key) in ids:  # set by another page (the runs table's "Compare")
        picked = st.selectbox(label, ids, format_func=fmt, key=key, on_change=on_change)
    else:
        picked = st.selectbox(label, ids, index=ids.index(first), format_func=fmt, key=key, on_change=on_change)
    return [picked] if picked else []


def _run_ids_of(runs: pd.DataFrame, refs: Sequence[str]) -> list[str]:
    """Each ref as a run id: an id, else the one run with that name, else with that alias (else kept as given)."""
    ids = set(runs["run_id"])
    aliases = runs["aliases"] if "aliases" in runs else [[]] * len(runs)
    out = []
    for ref in refs:
        by_name = [r for r, n in zip(runs["run_id"], runs["name"]) if n == ref]
        by_alias = [r for r, a in zip(runs["run_id"], aliases) if ref in (a or [])]
        out.append(ref if ref in ids else next((m[0] for m in (by_name, by_alias) if len(m) == 1), ref))
    return out


def sharing_pair(runs: pd.DataFrame, run_a: str | None = None) -> tuple[int, int]:
    """Positions in ``runs`` of the two runs whose step ranges share the most steps (the first such
    pair in the table's order); with ``run_a``, that run and the other run sharing the most steps
    with it. ``(0, 1)`` (or ``run_a`` and the first other run) where no ranges overlap.

    Compare starts on such a pair: runs that share no step have nothing to compare value by value,
    and a run is never paired with itself.
    """
    ids = list(runs["run_id"])
    a = ids.index(run_a) if run_a in ids else None
    if "first_step" in runs and "last_step" in runs:
        lo = pd.to_numeric(runs["first_step"], errors="coerce").to_numpy(dtype=float)
        hi = pd.to_numeric(runs["last_step"], errors="coerce").to_numpy(dtype=float)
        shared = np.nan_to_num(np.minimum.outer(hi, hi) - np.maximum.outer(lo, lo) + 1, nan=0.0)
        np.fill_diagonal(shared, 0.0)
        if a is not None:
            b = int(np.argmax(shared[a]))
            return a, b if shared[a, b] > 0 else (1 if a == 0 else 0)
        i, j = divmod(int(np.argmax(np.triu(shared, 1))), len(ids))
        if shared[i, j] > 0:
            return i, j
    return (0, 1) if a is None else (a, 1 if a == 0 else 0)


def x_axis_picker(key: str, frames: Sequence[pd.DataFrame], param: str | None = None) -> str:
    """``step`` or ``wall_time``; wall time only when every frame has it. ``param``: kept in the URL."""
    from regime_dash.ui import state

    options = ["step"]
    if frames and all("wall_time" in f.columns and f["wall_time"].notna().any() for f in frames):
        options.append("wall_time")
    if len(options) == 1:
        return "step"  # nothing to choose: no widget
    if param:
        state.restore(key, param, "str", "step", options=options)
    return st.radio("x axis", options, horizontal=True, key=key)


def smoothing_slider(key: str, param: str | None = None) -> float:
    """TensorBoard-style smoothing weight in [0, 0.999]. ``param``: kept in the URL."""
    from regime_dash.ui import state

    label = "Smoothing (debiased EMA; flags and counters stay raw)"
    if param:
        state.restore(key, param, "float", 0.0, valid=lambda v: 0.0 <= v <= 0.999)
        return st.slider(label, 0.0, 0.999, step=0.001, format="%.3f", key=key)
    return st.slider(label, 0.0, 0.999, 0.0, step=0.001, format="%.3f", key=key)


def alias_editor(key: str) -> dict[str, tuple[str, ...]]:
    """Edit the user's alias table: rows of ``canonical`` and ``alternatives`` (comma separated).

    The table lives in ``st.session_state[key]`` (a plain value, so it survives
    page switches, which clear widget state). Each edit is folded into it by a
    callback and the editor is re-keyed, so the editor never holds stale deltas.
    Returns ``{canonical: (alt, ...)}``.
    """
    from regime_dash.diag.aliases import normalize_user_aliases

    if key not in st.session_state:
        st.session_state[key] = pd.DataFrame({"canonical": pd.Series(dtype=str),
                                              "alternatives": pd.Series(dtype=str)})
    version = st.session_state.setdefault(f"{key}.version", 0)
    editor = f"{key}.editor.{version}"

    def commit() -> None:
        st.session_state[key] = _apply_edits(st.session_state[key], st.session_state[editor])
        st.session_state[f"{key}.version"] = version + 1

    edited = st.data_editor(st.session_state[key], num_rows="dynamic", key=editor, on_change=commit,
                            column_config={"canonical": st.column_config.TextColumn(
                                               "canonical column", help="e.g. risk_stack.kelly.fraction"),
                                           "alternatives": st.column_config.TextColumn(
                                               "names in your file", help="comma separated")},
                            hide_index=True)
    user: dict[str, list[str]] = {}
    for _, row in edited.iterrows():
        canonical = str(row.get("canonical") or "").strip()
        alts = [a.strip() for a in str(row.get("alternatives") or "").split(",") if a.strip()]
        if canonical and alts:
            user.setdefault(canonical, []).extend(alts)
    return normalize_user_aliases(user)


def _apply_edits(base: pd.DataFrame, edits: Mapping[str, Any]) -> pd.DataFrame:
    """``base`` with a data editor's ``edited_rows``, ``deleted_rows`` and ``added_rows`` applied."""
    out = base.copy()
    for row, changes in (edits.get("edited_rows") or {}).items():
        for col, value in changes.items():
            out.iloc[int(row), out.columns.get_loc(col)] = value
    out = out.drop(index=out.index[list(edits.get("deleted_rows") or [])])
    added = [r for r in (edits.get("added_rows") or []) if r]
    if added:
        out = pd.concat([out, pd.DataFrame(added, columns=out.columns)], ignore_index=True)
    return out.reset_index(drop=True)


def download_view(key: str, make_frame: Callable[[], pd.DataFrame], stem: str) -> None:
    """A CSV or Parquet download of the current view, written when asked for.

    ``make_frame`` is called only when "Prepare download" is pressed, so a
    long run's page does not pay for serializing it on every rerun; the file
    lives for that rerun only, so it always matches the view on screen. Columns
    that held mixed types across runs are settled on one type and listed
    (:func:`regime_dash.store.export.settle`); a failure says which column and why.
    """
    from regime_dash.store import export
    from regime_dash.errors import RegimeDashError

    c1, c2, c3 = st.columns([1, 1, 2], vertical_alignment="bottom")
    fmt = c1.radio("Format", list(export.FORMATS), format_func=str.upper, horizontal=True, key=f"{key}.format")
    if not c2.button("Prepare download", key=f"{key}.prepare", icon=":material/download:"):
        return
    try:
        with st.spinner(f"writing {fmt.upper()}…"):
            table, notes = export.settle(make_frame())
            data = export.to_bytes(table, fmt)
    except RegimeDashError as exc:
        st.error(f"Export failed: {markdown_literal(exc)}")
        return
    for note in notes:  # they name columns, which come from files
        st.caption(markdown_literal(note))
    suffix, mime = export.FORMATS[fmt]
    c3.download_button(f"Download {stem}{suffix} ({len(table):,} rows, {len(data) / 1e6:.2f} MB)", data,
                       f"{stem}{suffix}", mime, key=f"{key}.file", on_click="ignore", type="primary",
                       icon=":material/download:")


def download_tables(key: str, tables: Mapping[str, Callable[[], pd.DataFrame]], stem: str) -> None:
    """:func:`download_view` of one of several tables, picked by name (``{key}.table``); the file is
    ``{stem}-{name}``. Each table is made only when its download is prepared."""
    names = list(tables)
    name = st.selectbox("Table", names, key=f"{key}.table") if len(names) > 1 else names[0]
    download_view(key, tables[name], f"{stem}-{name.replace(' ', '-')}")


#: With more runs overlaid than this, the series' min/max bands are left out (:func:`thin_bands`).
BANDS_UP_TO = 3


def thin_bands(spec: dict, runs: int) -> dict:
    """``spec`` (a :func:`regime_dash.figures.signals.signal_spec`) without its series' min/max bands when it
    overlays more than :data:`BANDS_UP_TO` runs (:func:`regime_dash.figures.compare.without_bands`),
    said in a caption: each run's bands cover the others' lines, and they were a third of the traces
    and about half of the browser's drawing."""
    from regime_dash.figures.compare import without_bands

    if runs <= BANDS_UP_TO:
        return spec
    st.caption(f"{runs} runs: each line without its min/max band (up to {BANDS_UP_TO} runs drawn with it).")
    return without_bands(spec)


def zoomable_chart(key: str, window_key: str, bounds: tuple[int, int], fig_key: str,
                   runs: Mapping[str, pd.DataFrame], x: str, smoothing: float, *,
                   offsets: Mapping[str, int] | None = None, height: int = 1400,
                   window: tuple[int, int] | None = None, decorate: Callable[[Any], Any] | None = None,
                   on_marker: Callable[[Mapping[str, Any], Any], None] | None = None,
                   run_keys: tuple = (), colours: tuple = ()) -> None:
    """The signal panels of ``runs`` (already cut to the window of ``window_key``), zoomable with detail.

    Dragging across the chart (step axis) selects a step range; it becomes the
    window of ``window_key``, and the page redraws that window from the
    full-resolution runs, so a zoom shows every peak rather than the points
    the wider view kept. Buttons step the window back, forward and out.
    ``bounds`` is the window's full range, ``fig_key`` names the figure's inputs
    for the cache; ``window`` (the steps shown) fixes the x range, so nothing drawn
    by ``decorate`` (a function of the cached figure dict's copy, e.g. an overlay)
    outside it widens the view. ``on_marker(meta, x)`` is called when a point of a trace that
    carries a ``meta`` dict (a verdict marker of :func:`regime_dash.figures.overlay.overlay`) is clicked.
    ``run_keys`` (``((label, key), ...)``, each key naming that run's frame as cut) caches each run's
    traces on its own, with the ones the smoothing leaves as they are (:func:`regime_dash.ui.cache.signal_spec`);
    ``colours`` (``((label, colour), ...)``) gives each run its colour (see :func:`run_colours`).
    """
    from regime_dash.ui import cache

    # the figure dict, not a plotly Figure: with ten runs, building one, drawing the verdicts on it and
    # encoding it again cost 0.2 s a redraw (the overlay takes the dict as it is)
    fig = cache.signal_spec(fig_key, dict(runs), x, smoothing, height=height,
                            x_offsets=tuple(sorted((offsets or {}).items())), run_keys=run_keys, colours=colours)
    fig = thin_bands(fig, len(runs))
    if decorate is not None:
        fig = decorate(fig)
    box_zoom(key, window_key, bounds, fig, window=window, zoomable=x == "step", on_marker=on_marker)


def box_zoom(key: str, window_key: str, bounds: tuple[int, int], fig, *, window: tuple[int, int] | None = None,
             zoomable: bool = True, on_marker: Callable[[Mapping[str, Any], Any], None] | None = None) -> None:
    """Draw ``fig`` (a plotly ``Figure`` or its dict, on a step axis) with the box zoom of the window of
    ``window_key``: a box dragged across the chart becomes that window, and buttons step it back,
    forward and out to ``bounds``. The page draws the window from the full-resolution runs on its
    next run (see :func:`zoomable_chart`); ``window`` (the steps shown) fixes the x range.
    ``on_marker`` as :func:`zoomable_chart` takes it."""
    from regime_dash.ui import state

    lo, hi = bounds
    version = st.session_state.setdefault(f"{key}.version", 0)
    chart_key = f"{key}.{version}"  # a fresh chart after each zoom: no stale selection box on it

    def set_window(win: tuple[int, int] | None) -> None:
        if win is not None:
            state.keep(window_key, (int(win[0]), int(win[1])))
        st.session_state[f"{key}.version"] = version + 1

    def zoom() -> None:
        event = st.session_state.get(chart_key) or {}
        set_window(window_from_box(event.get("selection"), lo, hi))

    def shift(direction: int) -> None:
        a, b = st.session_state.get(window_key, bounds)
        width = b - a
        a = min(max(lo, a + direction * max(1, width // 2)), hi - width)
        set_window((a, a + width))

    zoomable = zoomable and hi > lo
    fig = _zoom_layout(fig, window if zoomable and window is not None and window[1] > window[0] else None,
                       zoomable)
    if zoomable:
        # one row sized to its buttons' labels: fixed column shares cut them ("E…") in a narrow page column
        row = st.container(horizontal=True, vertical_alignment="center")
        row.button("Earlier", icon=":material/chevron_left:", key=f"{key}.earlier", on_click=shift, args=(-1,))
        row.button("Later", icon=":material/chevron_right:", key=f"{key}.later", on_click=shift, args=(1,))
        row.button("Whole run", icon=":material/zoom_out_map:", key=f"{key}.out", on_click=set_window,
                   args=(bounds,))
        row.caption("Drag across the chart to zoom in: the window is redrawn from every step of the run.")

    def clicked() -> None:
        hit = (st.session_state.get(chart_key) or {}).get("click") or {}
        if isinstance(hit.get("meta"), Mapping) and hit.get("x") is not None:
            on_marker(hit["meta"], hit["x"])

    plotly_react.plotly_chart(fig, chart_key, on_select=zoom if zoomable else None,
                              on_click=clicked if on_marker else None,
                              config={**plotly_react.CONFIG, "scrollZoom": not zoomable})


def _zoom_layout(fig, window: tuple[int, int] | None, select: bool):
    """``fig`` with its x range set to ``window`` (None: left as it is) and, with ``select``, a drag that
    draws a horizontal box; a figure dict's layout is copied, not changed in place (it may be cached)."""
    if not isinstance(fig, Mapping):
        if window is not None:
            fig.update_xaxes(range=list(window))
        if select:
            fig.update_layout(dragmode="select", selectdirection="h")
        return fig
    layout = dict(fig["layout"])
    if window is not None:
        for name in [k for k in layout if k.startswith("xaxis")]:
            layout[name] = {**layout[name], "range": list(window)}
    if select:
        layout.update(dragmode="select", selectdirection="h")
    return {**fig, "layout": layout}


def kept_window(key: str, bounds: tuple[int, int], param: str | None = None) -> tuple[int, int]:
    """The window kept under ``key`` where it lies within ``bounds``, else ``bounds`` (the whole run).

    ``param``: kept in the URL too, as ``lo..hi`` (a box zoom's window, which no slider shows); a URL
    value that is not a window inside ``bounds`` is said and dropped. ``key`` names the runs drawn
    (:func:`window_key`): when they change within the session, the URL's window, which was theirs,
    is dropped rather than laid over the new ones."""
    from regime_dash.ui import state

    lo, hi = bounds

    def fits(win) -> bool:
        return win is not None and len(win) == 2 and lo <= win[0] < win[1] <= hi

    if param:
        owner = f"_view.window_of.{param}"
        if st.session_state.get(owner, key) != key and param in st.query_params:
            del st.query_params[param]
        st.session_state[owner] = key
        if hi > lo:
            state.restore(key, param, "range", bounds, valid=lambda v: v == bounds or fits(v))
    win = st.session_state.get(key)
    if fits(win):
        return int(win[0]), int(win[1])
    return bounds


def plotly_chart(fig, key: str, **kwargs):
    """A figure or its plotly JSON dict with the dashboard's defaults (full width, scroll zoom).

    Drawn in place (:func:`regime_dash.ui.plotly_react.plotly_chart`: redrawn with
    ``Plotly.react``, the small plotly.js bundle) unless ``kwargs`` ask for selection
    events (``on_select``, ``selection_mode``): those charts are ``st.plotly_chart``'s,
    whose return value they read.
    """
    if not kwargs:
        return plotly_react.plotly_chart(fig, key)
    return st.plotly_chart(legible_axes(fig), key=key, config=dict(plotly_react.CONFIG), **kwargs)


#: Streamlit's text colours of its light and dark themes (where the app sets no ``theme.textColor``).
TEXT_COLOURS = {"light": "#31333F", "dark": "#FAFAFA"}


def legible_axes(fig):
    """``fig`` (a figure or its dict) as a figure whose axis ticks and titles are in the page's text
    colour: ``st.plotly_chart``'s theme draws them pale grey, hard to read on a white page (the in-place
    charts lay the page's text colour on in the browser)."""
    import plotly.graph_objects as go

    theme = getattr(getattr(st, "context", None), "theme", None)
    colour = st.get_option("theme.textColor") or TEXT_COLOURS.get(getattr(theme, "type", None) or "light",
                                                                   TEXT_COLOURS["light"])
    fig = go.Figure(fig)
    fig.update_xaxes(tickfont_color=colour, title_font_color=colour)
    fig.update_yaxes(tickfont_color=colour, title_font_color=colour)
    return fig


def lazy_expander(label: str, key: str):
    """A collapsed expander that reruns the page when opened: the expander while it is open, else None.

    What it holds is built only while it is open: streamlit sends and mounts a collapsed
    expander's content all the same, and a table or code block in it loads its own script
    chunk on a new page load before the page's first chart is drawn.
    """
    box = st.expander(label, key=key, on_change="rerun")
    return box if box.open else None


#: Streamlit hides a newly mounted Plotly chart (``visibility: hidden``) until it has measured
#: the chart's container, then has plotly.js draw it again at that width. plotly.js has already
#: sized the first drawing to the container, so it is shown at once.
_SHOW_CHARTS_WHILE_SIZED = ("<style>[data-testid=stPlotlyChart] .js-plotly-plot "
                            "{ visibility: visible !important; }</style>")


def show_charts_while_sized() -> None:
    """Show each new Plotly chart from its first drawing, not from its second (call once per page).

    A page that replaces its chart many times a second (Live) otherwise shows no chart in
    every frame between a new chart's two drawings: it blinks.
    """
    st.html(_SHOW_CHARTS_WHILE_SIZED)


# ---- Explore and Compare -----------------------------------------------------------
def page_path(file: str) -> str:
    """The path ``st.page_link`` needs for one of our pages (as navigation registers it)."""
    from regime_dash.ui.navigation import PAGES_DIR

    return str(PAGES_DIR / file)


def alias_key(aliases: Mapping[str, Sequence[str]]) -> tuple:
    """A hashable, order-independent form of a user alias table (for cache keys)."""
    return tuple(sorted((k, tuple(v)) for k, v in aliases.items()))


def run_labels(runs: pd.DataFrame, run_ids: Sequence[str]) -> dict[str, str]:
    """``{run_id: label}``: the run name, with the id's start where two names are equal."""
    names = dict(zip(runs["run_id"], runs["name"]))
    picked = [names.get(r, r) for r in run_ids]
    return {r: (n if picked.count(n) == 1 else f"{n} ({r[-6:]})") for r, n in zip(run_ids, picked)}


def run_colours(labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """``((label, colour), ...)`` of ``labels`` (``{run_id: label}``): each run in the colour of its id
    (:func:`regime_dash.figures.signals.run_colours`): the same on every page and in any order, moved
    only where two runs drawn together hash to one colour."""
    from regime_dash.figures.signals import run_colours as by_id

    colour = by_id(list(labels))
    return tuple((label, colour[rid]) for rid, label in labels.items())


def window_key(prefix: str, run_ids: Sequence[str]) -> str:
    """Session key of the step-window slider for this set of runs (a new set gets a fresh window)."""
    import hashlib

    return f"{prefix}.{hashlib.sha1('|'.join(run_ids).encode()).hexdigest()[:12]}"


def step_bounds(frames: Sequence[pd.DataFrame], align: bool = False) -> tuple[int, int]:
    """``(lo, hi)``: the union of the frames' step ranges (with ``align``, of their steps since their first)."""
    spans = [(int(f["step"].min()), int(f["step"].max())) for f in frames if len(f)]
    if not spans:
        return 0, 0
    if align:
        return 0, max(b - a for a, b in spans)
    return min(a for a, _ in spans), max(b for _, b in spans)


def window_slider(key: str, frames: Sequence[pd.DataFrame], param: str | None = None,
                  align: bool = False) -> tuple[int, int]:
    """Step window ``(lo, hi)`` over the union of the frames' step ranges (see :func:`step_bounds`).

    ``param``: kept across pages and in the URL as ``lo..hi``.
    """
    from regime_dash.ui import state

    lo, hi = step_bounds(frames, align)
    if lo == hi:
        return lo, hi

    def fits(v) -> bool:
        return len(v) == 2 and lo <= v[0] <= v[1] <= hi

    if param:
        state.restore(key, param, "range", (lo, hi), valid=fits)
    elif key not in st.session_state or not fits(st.session_state[key]):
        st.session_state[key] = (lo, hi)
    value = st.slider("Steps in view" + (" (since each run's first step)" if align else ""), lo, hi, key=key)
    return int(value[0]), int(value[1])


def cut_window(frames: Mapping[str, pd.DataFrame], lo: int, hi: int,
               align: bool = False) -> dict[str, pd.DataFrame]:
    """Each frame's rows with ``lo <= step <= hi`` (steps since its first step with ``align``).

    Frames sorted by step (as the store keeps them) are cut by binary search,
    which takes no copy; others by a mask.
    """
    import numpy as np

    out = {}
    for label, f in frames.items():
        if not len(f):
            out[label] = f
            continue
        step = f["step"].to_numpy()
        first = int(step.min()) if align else 0
        a, b = lo + first, hi + first
        if len(step) < 2 or bool((np.diff(step) >= 0).all()):
            out[label] = f.iloc[int(np.searchsorted(step, a, "left")):int(np.searchsorted(step, b, "right"))]
        else:
            out[label] = f[(step >= a) & (step <= b)]
    return out


def window_from_box(selection: Mapping[str, Any] | None, lo: int, hi: int,
                    min_width: int = 10) -> tuple[int, int] | None:
    """The step window a box drawn on a chart selects (clamped to ``[lo, hi]``); None without a box.

    ``selection`` is the ``selection`` of ``st.plotly_chart(on_select=...)``:
    its ``box`` entries carry the dragged ``x`` range.
    """
    boxes = (selection or {}).get("box") or []
    for box in boxes:
        xs = [float(v) for v in box.get("x", []) if v is not None]
        if len(xs) < 2:
            continue
        a, b = max(lo, int(min(xs))), min(hi, int(round(max(xs))))
        if b - a < min_width:  # a click-sized box: widen it around its centre
            mid = (a + b) // 2
            a, b = max(lo, mid - min_width // 2), min(hi, mid + min_width // 2)
        return (a, b) if a < b else None
    return None


def jump_to_step(key: str, step: int, lo: int, hi: int) -> None:
    """Callback: centre the window of ``key`` on ``step`` (about 2 % of the run, at least 100 steps)."""
    half = max(50, (hi - lo) // 100)
    st.session_state[key] = (max(lo, int(step) - half), min(hi, int(step) + half))
