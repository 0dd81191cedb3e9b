"""Reusable dashboard widgets. Each one owns the session-state keys it is given.

Widgets read input and return values; they call no core code beyond what
they need to label themselves (the engine probe, the config field list).
"""
from __future__ import annotations

import math
from dataclasses import fields
from typing import Any, Callable, Mapping, Sequence

import pandas as pd
import streamlit as st

from regime_dash.config import SWITCHES, RegimeConfig
from regime_dash.field_ranges import FIELD_RANGES
from regime_dash.ui.errors import ErrorNote, show_error

#: Toggle labels: the spec's feature numbers of F2/F4/F5, "model:" for the model switches.
SWITCH_LABELS = {"resurrection": "F2 Kelly resurrection", "envelope": "F4 PopArt σ envelope",
                 "tau_boost": "F5 IQN τ tail boost", "tail_on_deviation": "model: tail test on |Δworst − mean|",
                 "duration_across_cycles": "model: DURATION across F2 cycles"}
ENGINE_CHOICES = ("auto", "reference", "fast", "cuda")


def numeric_fields() -> list[str]:
    """RegimeConfig's numeric fields (the ones with a slider), in declaration order."""
    return [f.name for f in fields(RegimeConfig) if f.name not in SWITCHES]


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
    for name in SWITCHES:
        out[name] = cols[SWITCHES.index(name) % len(cols)].toggle(
            SWITCH_LABELS[name], key=f"{key}.{name}", **seed(name, "bool", bool(getattr(base, name))))
    names = numeric_fields()
    cols = st.columns(columns)
    for i, name in enumerate(names):
        lo, hi, step = FIELD_RANGES[name]
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
    else:
        picked = st.selectbox(label, ids, index=ids.index(first), format_func=fmt, key=key, on_change=on_change)
    return [picked] if picked else []


def sharing_pair(runs: pd.DataFrame) -> tuple[int, int]:
    """Positions in ``runs`` of the first two runs whose step ranges overlap; ``(0, 1)`` if none do.

    Compare starts on such a pair: runs that share no step have nothing to
    compare value by value.
    """
    lo = pd.to_numeric(runs.get("first_step"), errors="coerce") if "first_step" in runs else None
    hi = pd.to_numeric(runs.get("last_step"), errors="coerce") if "last_step" in runs else None
    if lo is not None and hi is not None:
        for i in range(len(runs)):
            for j in range(i + 1, len(runs)):
                if max(lo.iloc[i], lo.iloc[j]) <= min(hi.iloc[i], hi.iloc[j]):  # NaN compares False
                    return i, j
    return 0, 1


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
    from regime_dash.aliases import normalize_user_aliases

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
    (:func:`regime_dash.export.settle`); a failure says which column and why.
    """
    from regime_dash import export
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
        st.error(f"Export failed: {exc}")
        return
    for note in notes:
        st.caption(note)
    suffix, mime = export.FORMATS[fmt]
    c3.download_button(f"Download {stem}{suffix} ({len(table):,} rows, {len(data) / 1e6:.2f} MB)", data,
                       f"{stem}{suffix}", mime, key=f"{key}.file", on_click="ignore", type="primary",
                       icon=":material/download:")


def zoomable_chart(key: str, window_key: str, bounds: tuple[int, int], fig_key: str,
                   runs: Mapping[str, pd.DataFrame], x: str, smoothing: float, *,
                   offsets: Mapping[str, int] | None = None, height: int = 1400,
                   window: tuple[int, int] | None = None, decorate: Callable[[Any], Any] | None = None) -> None:
    """The signal panels of ``runs`` (already cut to the window of ``window_key``), zoomable with detail.

    Dragging across the chart (step axis) selects a step range; it becomes the
    window of ``window_key``, and the page redraws that window from the
    full-resolution runs, so a zoom shows every peak rather than the points
    the wider view kept. Buttons step the window back, forward and out.
    ``bounds`` is the window's full range, ``fig_key`` names the figure's inputs
    for the cache; ``window`` (the steps shown) fixes the x range, so nothing drawn
    by ``decorate`` (a function of the cached figure's copy, e.g. an overlay)
    outside it widens the view.
    """
    from regime_dash.ui import cache, state

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

    fig = cache.signal_figure(fig_key, dict(runs), x, smoothing, height=height,
                              x_offsets=tuple(sorted((offsets or {}).items())))
    if decorate is not None:
        fig = decorate(fig)
    if window is not None and x == "step" and window[1] > window[0]:
        fig.update_xaxes(range=list(window))
    zoomable = x == "step" and hi > lo
    if zoomable:
        fig.update_layout(dragmode="select", selectdirection="h")
        c = st.columns([1, 1, 1, 5])
        c[0].button("Earlier", icon=":material/chevron_left:", key=f"{key}.earlier", on_click=shift, args=(-1,))
        c[1].button("Later", icon=":material/chevron_right:", key=f"{key}.later", on_click=shift, args=(1,))
        c[2].button("Whole run", icon=":material/zoom_out_map:", key=f"{key}.out", on_click=set_window,
                    args=(bounds,))
        c[3].caption("Drag across the chart to zoom in: the window is redrawn from every step of the run.")
    st.plotly_chart(fig, key=chart_key, on_select=zoom if zoomable else "ignore",
                    selection_mode="box",
                    config={"scrollZoom": not zoomable, "displaylogo": False})


def plotly_chart(fig, key: str, **kwargs):
    """``st.plotly_chart`` with the dashboard's defaults (full width, scroll zoom)."""
    return st.plotly_chart(fig, key=key, config={"scrollZoom": True, "displaylogo": False}, **kwargs)


# ---- slot layout (Slots page sets it, Replay uses it) ----------------------------------
_LAYOUT = "slots.active_layout"


def use_layout(layout, source: str | None) -> None:
    """Make ``layout`` (from ``source``, an uploaded isv_slots.rs) the one replays use; None: the registry."""
    if source is None:
        st.session_state.pop(_LAYOUT, None)
    else:
        st.session_state[_LAYOUT] = (layout, source)


def active_layout():
    """``(layout, source)``: the layout the Slots page made active, else the default registry."""
    from regime_dash.slots import DEFAULT_LAYOUT

    return st.session_state.get(_LAYOUT, (DEFAULT_LAYOUT, "the default registry"))


# ---- ingest reports (Runs page) ---------------------------------------------------
_REPORTS = "runs.reports"


def ingest_reports() -> dict[str, Any]:
    """``{upload id: report}`` of this session's ingests (owned by the Runs page's report panel)."""
    return st.session_state.setdefault(_REPORTS, {})


def record_ingest(upload_id: str, name: str, result: Any) -> None:
    """Remember one ingest's result (or the error it raised) for :func:`ingest_report_panel`."""
    ingest_reports()[upload_id] = (name, result)


def ingest_report_panel() -> None:
    """One expander per ingest of this session: rows, rejected lines, columns and step range."""
    for upload_id, (name, result) in reversed(list(ingest_reports().items())):
        if isinstance(result, (Exception, ErrorNote)):
            show_error(result, context=f"{name}: not ingested. ")
            continue
        rejected = list(getattr(result, "rejected", []) or [])
        dup = getattr(result, "duplicate_of", None)
        head = (f"{name}: {result.rows:,} rows, {len(rejected):,} rejected, "
                f"{len(result.columns):,} columns, steps {result.first_step}…{result.last_step}")
        with st.expander(head + (" (already stored)" if dup else ""), expanded=bool(rejected)):
            if dup:
                st.info(f"Same bytes as stored run {dup}; no new run was made.")
            if rejected:
                st.markdown(f"**Rejected lines** ({len(rejected):,})")
                st.dataframe(pd.DataFrame([dict(r) if isinstance(r, Mapping) else vars(r) for r in rejected]),
                             hide_index=True, key=f"{_REPORTS}.{upload_id}.rejects")
            st.markdown("**Columns**: " + ", ".join(f"`{c}`" for c in result.columns))


def rejected_lines_panel(key: str, store, runs: pd.DataFrame) -> None:
    """The rejected lines (line number, reason, text) of any stored run, read from the store.

    The store keeps each run's rejects beside its Parquet parts, so they show in
    any later session, not only in the one that uploaded the file.
    """
    if "rejected" not in runs.columns:
        return
    counts = pd.to_numeric(runs["rejected"], errors="coerce").fillna(0).astype(int)
    with_rejects = runs[counts > 0]
    with st.expander(f"Rejected lines ({int(counts.sum()):,} in {len(with_rejects)} run(s))"):
        if with_rejects.empty:
            st.caption("No stored run has rejected lines.")
            return
        names = dict(zip(with_rejects["run_id"], with_rejects["name"]))
        n = dict(zip(runs["run_id"], counts))
        rid = st.selectbox("Run", list(with_rejects["run_id"]), key=f"{key}.run",
                           format_func=lambda r: f"{names[r]} · {r[-6:]} ({n[r]:,} rejected)")
        rows = store.rejects(rid)
        table = pd.DataFrame([{"line": r.get("line"), "reason": r.get("reason"), "text": r.get("raw")}
                              for r in rows])
        st.dataframe(table, hide_index=True, key=f"{key}.table",
                     column_config={"line": st.column_config.NumberColumn("line", format="%d")})


def delete_run_control(key: str, store, runs: pd.DataFrame) -> None:
    """Pick a run and delete it after a confirmation tick (then the page reruns)."""
    with st.expander("Delete a run"):
        names = dict(zip(runs["run_id"], runs["name"]))
        rid = st.selectbox("Run", list(runs["run_id"]), format_func=lambda r: f"{names[r]} · {r[-6:]}",
                           key=f"{key}.run")
        sure = st.checkbox("Yes, delete it from the store", key=f"{key}.sure")
        if st.button("Delete", disabled=not sure, key=f"{key}.go"):
            store.delete(rid)
            st.toast(f"deleted {names[rid]}")
            st.rerun()


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


def _tables(key: str, results: Mapping[str, Any], part: str) -> None:
    for label, res in results.items():
        tables = getattr(res, part)
        st.markdown(f"**{label}**")
        shown = False
        for name, table in tables.items():
            st.caption(f"{name.replace('_', ' ')}: {len(table)}")
            if len(table):
                st.dataframe(table, hide_index=True, key=f"{key}.{label}.{name}",
                             height=min(35 * (len(table) + 1) + 3, 300))
            shown = True
        if not shown:
            st.caption("none")
        for name, why in res.skipped.items():
            if (part == "episodes") == (name == "dead_zone"):
                st.caption(f"{name}: not found — {why}")


def episode_tables(key: str, results: Mapping[str, Any]) -> None:
    """Dead-zone episodes of each run (``results``: :class:`regime_dash.analysis.Report` by label)."""
    _tables(key, results, "episodes")


def event_tables(key: str, results: Mapping[str, Any]) -> None:
    """Tail events, timeouts, floor spans, transitions and boundaries of each run."""
    _tables(key, results, "events")


STATUS_ICON = {"pass": ":material/check_circle:", "fail": ":material/cancel:", "warn": ":material/warning:",
               "skip": ":material/block:"}


def invariant_report(key: str, results: Mapping[str, Any], window: str,
                     frames: Mapping[str, pd.DataFrame]) -> None:
    """The invariant checks of each run; each violation's step is a button that moves the window there."""
    for label, res in results.items():
        checks = res.checks
        counts = {s: sum(c.status == s for c in checks) for s in STATUS_ICON}
        st.markdown(f"**{label}** — {counts['pass']} pass, {counts['fail']} fail, {counts['warn']} warn, "
                    f"{counts['skip']} skip")
        st.dataframe(pd.DataFrame([{"check": c.id, "status": c.status,
                                    "violations": c.violations, "first step": c.first_step,
                                    "detail": c.detail} for c in checks]),
                     hide_index=True, key=f"{key}.{label}.table")
        f = frames[label]
        lo, hi = int(f["step"].min()), int(f["step"].max())
        for c in checks:
            if c.status != "fail":
                continue
            st.markdown(f"{STATUS_ICON['fail']} `{c.id}`: {c.violations} violation(s) — jump to step:")
            cols = st.columns(min(len(c.steps), 8) or 1)
            for i, s in enumerate(c.steps[:8]):
                cols[i].button(f"step {s}", key=f"{key}.{label}.{c.id}.{s}", on_click=jump_to_step,
                               args=(window, s, lo, hi))


# ---- Replay ---------------------------------------------------------------------------
SOURCES = ("Scenario", "Stream file", "Simulator")


def stream_source(key: str, kind: str | None = None, in_url: bool = False) -> tuple[str | None, Any]:
    """Choose the replay input: a scenario preset, an uploaded stream file, or a simulator run.

    Returns ``(source_key, stream)``; ``source_key`` names the stream for caches,
    and both are ``None`` until a file is uploaded. ``kind`` (one of
    :data:`SOURCES`) skips the source radio. With ``in_url`` the choice is
    kept across pages and in the URL (``src``, ``scenario``, ``seed``, ...; a file
    cannot travel in a URL, so it is named there only as the source kind).
    """
    import hashlib

    from regime_dash import scenarios, simulator
    from regime_dash.ui import cache, state

    def seed_(name: str, param: str, kind_: str, default: Any, **kw) -> dict[str, Any]:
        if not in_url:
            return {"value": default}
        state.restore(f"{key}.{name}", param, kind_, default, **kw)
        return {}

    def in_range(lo: int, hi: int):
        return lambda v: lo <= v <= hi

    if kind is None:
        seed_("kind", "src", "str", SOURCES[0], options=SOURCES)
        kind = st.radio("Source", SOURCES, horizontal=True, key=f"{key}.kind")
    c1, c2, c3, c4 = st.columns([2, 1, 1, 1])
    if kind == "Scenario":
        names = [n for n in scenarios.SCENARIOS if n != "recorded" or scenarios.SAMPLE_STREAM.exists()]
        first = names.index("kelly_trap_run8") if "kelly_trap_run8" in names else 0
        seed_("scenario", "scenario", "str", names[first], options=names)
        name = c1.selectbox("Scenario", names, key=f"{key}.scenario", **({} if in_url else {"index": first}))
        seed = int(c2.number_input("Seed", 0, 2 ** 31 - 1, key=f"{key}.seed",
                                   **seed_("seed", "seed", "int", 0, valid=in_range(0, 2 ** 31 - 1))))
        steps = int(c3.number_input("Steps (0 = preset)", 0, 1_000_000, step=500, key=f"{key}.steps",
                                    **seed_("steps", "steps", "int", 0, valid=in_range(0, 1_000_000))))
        accounts = int(c4.number_input("Accounts (0 = preset)", 0, 8192, step=64, key=f"{key}.accounts",
                                       **seed_("accounts", "accounts", "int", 0, valid=in_range(0, 8192))))
        st.caption(scenarios.describe(name))
        stream = cache.scenario_stream(name, seed, steps or None, accounts or None)
        return f"scenario:{name}:{seed}:{stream.steps}:{stream.accounts}", stream
    if kind == "Stream file":
        up = c1.file_uploader("Stream file (.npz or .parquet, as Stream.save writes)",
                              type=["npz", "parquet"], key=f"{key}.file")
        if up is None:
            st.info("Upload a stream file to replay it.")
            return None, None
        data = up.getvalue()
        digest = hashlib.sha256(data).hexdigest()
        suffix = ".npz" if up.name.endswith(".npz") else ".parquet"
        return f"file:{digest}", cache.uploaded_stream(digest, data, suffix)
    names = list(simulator.PRESETS)
    first = names.index("adverse_regime") if "adverse_regime" in names else 0
    seed_("preset", "preset", "str", names[first], options=names)
    preset = c1.selectbox("Simulator preset", names, key=f"{key}.preset", **({} if in_url else {"index": first}))
    seed = int(c2.number_input("Seed", 0, 2 ** 31 - 1, key=f"{key}.simseed",
                               **seed_("simseed", "seed", "int", 0, valid=in_range(0, 2 ** 31 - 1))))
    steps = int(c3.number_input("Steps", 100, 200_000, step=500, key=f"{key}.simsteps",
                                **seed_("simsteps", "steps", "int", simulator.PRESETS[preset].steps,
                                        valid=in_range(100, 200_000))))
    st.caption(simulator.PRESETS[preset].doc + " The live run uses the spec's default config; its "
               "recorded inputs are then replayed open loop under each config.")
    stream = cache.simulator_stream(preset, seed, steps, RegimeConfig().as_dict())
    return f"sim:{preset}:{seed}:{steps}", stream


def fast_engine_status(key: str) -> None:
    """The background compile of the fast engine, as a progress bar while it runs.

    Redraws itself every second while compiling (a fragment: nothing else on
    the page reruns) and reruns the page once the engine is ready, so ``auto``
    replays move to it.
    """
    from regime_dash.engine import warm

    compiling = warm.compile_state()["state"] == "compiling"
    if compiling:
        st.session_state[f"{key}.waited"] = True

    @st.fragment(run_every=1.0 if compiling else None)
    def badge() -> None:
        s = warm.compile_state()
        if s["state"] == "compiling":
            frac = min(s["elapsed_s"] / max(s["estimate_s"], 1e-9), 0.99)
            st.progress(frac, text=f"Compiling the fast engine in the background: {s['elapsed_s']:.0f} s of "
                                   f"about {s['estimate_s']:.0f} s. Replays run on the reference engine "
                                   "(exact, slower on long streams) until it is ready.")
        elif s["state"] == "failed":
            st.warning(f"The fast engine could not be compiled ({s['error']}); replays use the reference engine.")
        elif s["state"] == "ready" and st.session_state.pop(f"{key}.waited", False):
            st.rerun()  # the whole page: auto replays now run on the fast engine

    badge()


#: Summary metrics shown as headline numbers on the Replay page.
HEADLINE = ("timeouts", "timeout_steps", "dead_zone_steps", "longest_dead_zone", "tail_events",
            "floor_active_steps", "kelly_zero_steps", "sigma_max")


def summary_metrics(key: str, what_if: Mapping[str, float], baseline: Mapping[str, float]) -> None:
    """Headline summary metrics of the what-if replay, with the change from the baseline."""
    cols = st.columns(4)
    for i, name in enumerate(HEADLINE):
        v, b = what_if[name], baseline[name]
        delta = v - b
        cols[i % 4].metric(name.replace("_", " "), f"{v:g}", f"{delta:+g}" if delta else None,
                           delta_color="off")


# ---- Live -----------------------------------------------------------------------------
LIVE_SOURCES = ("Simulator", "Scenario", "Stream file")


def live_source(key: str) -> dict[str, Any] | None:
    """What a live run plays: the closed-loop simulator, a scenario or a stream file.

    A scenario or a file is picked as on the Replay page (:func:`stream_source`);
    the simulator by preset, seed, accounts and schedule length. Returns
    ``{"kind", "key", "stream"}`` or ``{"kind", "key", "sim"}`` (``key`` names
    the source: a new key means a new run), or None until a file is uploaded.
    """
    from regime_dash.simulator import PRESETS

    kind = st.radio("Source", LIVE_SOURCES, horizontal=True, key=f"{key}.kind")
    if kind != "Simulator":
        source_key, stream = stream_source(key, kind=kind)
        return None if stream is None else {"kind": kind, "key": source_key, "stream": stream}
    names = list(PRESETS)
    c1, c2, c3, c4 = st.columns([2, 1, 1, 1])
    preset = c1.selectbox("Market preset", names, key=f"{key}.sim.preset",
                          index=names.index("adverse_regime") if "adverse_regime" in names else 0)
    seed = int(c2.number_input("Seed", 0, 2 ** 31 - 1, 0, key=f"{key}.sim.seed"))
    accounts = int(c3.number_input("Accounts", 1, 4096, PRESETS[preset].accounts, key=f"{key}.sim.accounts"))
    horizon = int(c4.number_input("Schedule length", 100, 1_000_000, PRESETS[preset].steps, step=500,
                                  key=f"{key}.sim.horizon"))
    st.caption(PRESETS[preset].doc)
    return {"kind": kind, "key": f"sim:{preset}:{seed}:{accounts}:{horizon}",
            "sim": {"preset": preset, "seed": seed, "accounts": accounts, "horizon": horizon}}


def live_run(key: str, source: Mapping[str, Any], config: RegimeConfig, *, reset: bool = False):
    """The session's :class:`~regime_dash.live.LiveRun` of ``source``, started under ``config``.

    Held in ``st.session_state[key]``; a new run starts on ``reset`` or when the
    source's key changes (``st.session_state[key + '.source']`` remembers it).
    """
    from regime_dash.live import LiveRun
    from regime_dash.simulator import PRESETS, Simulator

    if reset or key not in st.session_state or st.session_state.get(f"{key}.source") != source["key"]:
        if "stream" in source:
            run = LiveRun.of_stream(source["stream"], config, source=source["key"])
        else:
            setup = source["sim"]
            preset = PRESETS[setup["preset"]]
            run = LiveRun.of_simulator(Simulator(accounts=setup["accounts"], seed=setup["seed"], config=config,
                                                 market=preset.market, schedule=preset.schedule(setup["horizon"]),
                                                 engine="reference"), source=source["key"])
        st.session_state[key] = run
        st.session_state[f"{key}.source"] = source["key"]
    return st.session_state[key]


def live_controls(key: str) -> dict[str, Any]:
    """Play/pause, step, reset, speed and the three injections.

    Returns ``{"playing", "step", "reset", "speed", "shock", "flat", "boundary"}``;
    ``playing`` persists in ``st.session_state[key + '.playing']``.
    """
    pk = f"{key}.playing"
    st.session_state.setdefault(pk, False)
    c = st.columns([1, 1, 1, 3])
    playing = st.session_state[pk]
    c[0].button("Pause" if playing else "Play", key=f"{key}.play",
                icon=":material/pause:" if playing else ":material/play_arrow:",
                on_click=lambda: st.session_state.update({pk: not st.session_state[pk]}))
    step = c[1].button("Step", key=f"{key}.step", icon=":material/skip_next:")
    reset = c[2].button("Reset", key=f"{key}.reset", icon=":material/restart_alt:")
    speed = c[3].slider("Speed (steps per tick, 10 ticks/s)", 1, 500, 20, key=f"{key}.speed")
    d = st.columns(3)
    shock = d[0].button("Inject tail shock", key=f"{key}.shock", icon=":material/bolt:")
    flat = d[1].button("Force every account flat", key=f"{key}.flat", icon=":material/block:")
    boundary = d[2].button("Cross a fold boundary", key=f"{key}.boundary", icon=":material/start:")
    return {"playing": st.session_state[pk], "step": step, "reset": reset, "speed": speed,
            "shock": shock, "flat": flat, "boundary": boundary}


# ---- Sweep ----------------------------------------------------------------------------
def sweep_range(name: str, base: RegimeConfig) -> tuple[float, float]:
    """The values field ``name`` can be swept over on top of ``base``: its slider range, within
    what RegimeConfig accepts next to ``base``'s other fields (ε_min up to ε_max and back)."""
    lo, hi, _ = FIELD_RANGES[name]
    if name == "eps_min":
        hi = min(hi, base.eps_max)
    elif name == "eps_max":
        lo = max(lo, base.eps_min)
    return lo, hi


def sweep_controls(key: str, base: RegimeConfig | None = None) -> dict[str, Any] | None:
    """One or two fields, each over ``[lo, hi]`` in ``n`` points, and a summary metric.

    The ``from``/``to`` bounds are :func:`sweep_range` of ``base`` (default: the
    spec's config). Returns the sweep's parameters once "Run sweep" has been
    pressed (they stay in ``st.session_state[key + '.params']`` until pressed
    again), else ``None``.
    """
    from regime_dash.engine.summary import METRICS

    base = base or RegimeConfig()
    names = numeric_fields()
    c1, c2, c3, c4 = st.columns([2, 1, 1, 1])
    f1 = c1.selectbox("Field 1", names, index=names.index("max_duration"), key=f"{key}.f1")
    lo1, hi1 = sweep_range(f1, base)
    a1 = c2.number_input("from", lo1, hi1, lo1 if f1 != "max_duration" else 100.0, key=f"{key}.lo1")
    b1 = c3.number_input("to", lo1, hi1, hi1 if f1 != "max_duration" else 3000.0, key=f"{key}.hi1")
    n1 = int(c4.number_input("points", 2, 64, 8, key=f"{key}.n1"))
    d1, d2, d3, d4 = st.columns([2, 1, 1, 1])
    f2 = d1.selectbox("Field 2 (optional)", ["—"] + [n for n in names if n != f1], key=f"{key}.f2")
    grid = {f1: _grid(f1, a1, b1, n1)}
    if f2 != "—":
        lo2, hi2 = sweep_range(f2, base)
        a2 = d2.number_input("from", lo2, hi2, lo2, key=f"{key}.lo2")
        b2 = d3.number_input("to", lo2, hi2, hi2, key=f"{key}.hi2")
        n2 = int(d4.number_input("points", 2, 64, 6, key=f"{key}.n2"))
        grid[f2] = _grid(f2, a2, b2, n2)
    metric = st.selectbox("Summary metric", METRICS, index=METRICS.index("timeout_steps"), key=f"{key}.metric")
    if st.button(f"Run sweep ({math.prod(len(v) for v in grid.values())} replays)", key=f"{key}.run",
                 type="primary"):
        st.session_state[f"{key}.params"] = {"grid": grid}
    params = st.session_state.get(f"{key}.params")
    return None if params is None else {**params, "metric": metric}


def _changed(config: RegimeConfig) -> dict[str, Any]:
    default = RegimeConfig().as_dict()
    return {k: v for k, v in config.as_dict().items() if default[k] != v}


def _grid(name: str, lo: float, hi: float, n: int) -> list[float]:
    """``n`` values from ``lo`` to ``hi``; whole-step fields are rounded to whole numbers."""
    import numpy as np

    values = np.linspace(min(lo, hi), max(lo, hi), n)
    if FIELD_RANGES[name][2] >= 1.0:
        values = np.unique(np.round(values))
    return [float(v) for v in values]


def pick_sweep_row(key: str, event: Any, table: pd.DataFrame, swept: Sequence[str]) -> int | None:
    """The sweep row to open: the clicked heatmap cell or line point, else the row chosen below the chart.

    ``event`` is what ``st.plotly_chart(on_select="rerun")`` returned; ``swept``
    names the swept fields (the row picker's labels).
    """
    points = []
    try:
        points = event.selection.points if event is not None else []
    except AttributeError:
        points = []
    seen = f"{key}.clicked"
    for p in points:
        row = p.get("customdata")
        if isinstance(row, (list, tuple)):
            row = row[0] if row else None
        if not isinstance(row, (int, float)) or isinstance(row, bool) or not float(row).is_integer():
            continue  # a point that names no sweep row (not one of ours)
        # a chart keeps its selection across reruns: apply each click once, so the
        # row picker below still works after a click
        if int(row) >= 0 and st.session_state.get(seen) != int(row):
            st.session_state[seen] = int(row)
            st.session_state[f"{key}.row"] = int(row)
    labels = {i: ", ".join(f"{c}={table[c].iloc[i]:g}" for c in swept) for i in range(len(table))}
    st.session_state.setdefault(f"{key}.row", None)
    if st.session_state[f"{key}.row"] is not None and st.session_state[f"{key}.row"] >= len(table):
        st.session_state[f"{key}.row"] = None  # a smaller sweep replaced the one the row was from
    return st.selectbox("Open the replay of", list(range(len(table))), key=f"{key}.row",
                        format_func=lambda i: labels[i], placeholder="click a point or cell above, or pick one")


def sweep_panel(key: str, source_key: str, stream: Any, engine: str, base: RegimeConfig | None,
                layout=None) -> None:
    """The Sweep tab: controls, the heatmap or line of a summary metric, and the replay of a picked cell.

    The swept fields vary on top of ``base`` (the what-if config; the spec's
    defaults when it is ``None``); replays use ``layout`` (default registry if None).
    """
    from regime_dash import figures
    from regime_dash.errors import RegimeDashError
    from regime_dash.ui import cache

    base = base or RegimeConfig()
    st.caption("Fields vary on top of the what-if config"
               + (f" ({', '.join(f'{k}={v}' for k, v in _changed(base).items())})." if _changed(base) else
                  " (the spec's defaults)."))
    params = sweep_controls(key, base)
    if params is None:
        st.caption("Pick one or two fields and press Run sweep.")
        return
    fp = layout.fingerprint_hex() if layout is not None else ""
    try:
        result = cache.sweep(source_key, stream, params["grid"], engine, base.as_dict(), fp, layout)
    except RegimeDashError as exc:
        st.error(f"Sweep rejected: {exc}. Narrow the range, or change the what-if config it varies on.")
        return
    table = result["table"]
    fields_ = list(params["grid"])
    metric = params["metric"]
    st.caption(f"{len(table)} replays in {result['seconds']:.2f} s on {result['engine']}.")
    if len(fields_) == 2:
        fig = figures.sweep_heatmap(table, fields_[0], fields_[1], metric)
    else:
        fig = figures.sweep_line(table, fields_[0], metric)
    event = plotly_chart(fig, f"{key}.chart", on_select="rerun", selection_mode="points")
    from regime_dash.analysis.verdict import flat_sweep_note, verdict

    note = flat_sweep_note(table[metric], fields_, verdict(cache.replay(source_key, stream, base.as_dict(), engine,
                                                                         fp, layout)["frame"]))
    if note:
        st.caption(note)
    row = pick_sweep_row(key, event, table, fields_)
    if row is None:
        return
    config = base.replace(**{f: float(table[f].iloc[row]) for f in fields_})
    baseline = cache.replay(source_key, stream, RegimeConfig().as_dict(), engine, fp, layout)
    cell = cache.replay(source_key, stream, config.as_dict(), engine, fp, layout)
    label = ", ".join(f"{f}={table[f].iloc[row]:g}" for f in fields_)
    cell_summary = cache.replay_summary(source_key, stream, config.as_dict(), engine, fp, layout)
    base_summary = cache.replay_summary(source_key, stream, RegimeConfig().as_dict(), engine, fp, layout)
    st.markdown(f"**Replay of {label}** — {metric} = {cell_summary[metric]:g} "
                f"(baseline {base_summary[metric]:g}), {cell['seconds'] * 1000:.1f} ms")
    fig = cache.signal_figure(f"sweepcell|{source_key}|{engine}|{fp}|{config}",
                              {"baseline": baseline["frame"], label: cell["frame"]}, "step", 0.0)
    plotly_chart(fig, f"{key}.cell_chart")
