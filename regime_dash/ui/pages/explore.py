"""Explore: overlay stored runs on the regime panels and on a panel for any field; episodes, events and invariants."""
import pandas as pd
import streamlit as st

from regime_dash.analysis.structure.lines import judged_rows
from regime_dash.diag import catalogue as diag
from regime_dash.errors import RegimeDashError
from regime_dash.figures.custom import numeric_columns
from regime_dash.figures.overlay import overlay
from regime_dash.diag.panel_set import encode
from regime_dash.text import markdown_literal
from regime_dash.ui import cache, live_alerts, panel_controls, provenance_panel, sections, state, widgets
from regime_dash.ui.errors import show_error
from regime_dash.ui.repair_panel import run_repair_panel
from regime_dash.ui.verdict_strip import verdict_strip

st.title("Explore")
st.caption("See what the regime observer did over a run: dead zones, ε recovery, tail events, the σ envelope. "
           "Pick one or more stored runs first; drag across the chart to zoom in at full detail.")
store = cache.get_store()
runs = cache.runs_frame(store)
if runs.empty:
    st.info("No runs in the store yet. Upload a diag.jsonl on the Runs page, or load the samples there.")
    st.page_link(widgets.page_path("runs.py"), label="Go to Runs", icon=":material/folder_open:")
    st.stop()

WINDOW = "explore.window"
picked = widgets.run_picker("explore.runs", runs, param="runs",
                            on_change=lambda: state.forget(WINDOW, "window"))  # new runs: whole range
with st.expander("Aliases: map your file's field names to the dashboard's"):
    aliases = widgets.alias_editor("explore.aliases")
if not picked:
    st.info("Pick one or more runs to overlay.")
    state.publish()
    st.stop()

root, alias_key = cache.store_root(), widgets.alias_key(aliases)
labels = widgets.run_labels(runs, picked)
live = live_alerts.live_versions(picked)  # runs a follower is writing now: redrawn as they grow
frames = {}
for rid in list(picked):
    try:  # a damaged run (or one deleted meanwhile) is said and left out; the others are drawn
        frames[labels[rid]] = (cache.live_run(root, rid, alias_key, live[rid]) if rid in live
                               else cache.load_run(root, rid, alias_key))
    except RegimeDashError as exc:
        show_error(exc, context=f"{markdown_literal(labels[rid])}: not shown. ")
        picked.remove(rid)
if not picked:
    state.publish()
    st.stop()
for label, frame in frames.items():
    if frame.attrs.get("step_from_row"):
        st.caption(f"{markdown_literal(label)} has no step field: drawn against its row number.")
    if frame.attrs.get("rows_without_step"):
        st.warning(f"{markdown_literal(label)}: {frame.attrs['rows_without_step']:,} row(s) have no whole-number "
                   "step and are left out.")


def single_twins() -> dict[str, str]:
    """``{fused run id: single run id}``: for each picked run of the fused controller path, the picked
    run the user names as the single path's replay of its inputs (finding ``fused_mirror_drift``)."""
    fused = [rid for rid in picked if diag.FUSED_COLUMN in frames[labels[rid]].columns]
    out: dict[str, str] = {}
    for rid in fused:
        others = [r for r in picked if r != rid and diag.FUSED_COLUMN not in frames[labels[r]].columns]
        if not others:
            st.caption(f"{markdown_literal(labels[rid])} ran the fused controllers: pick the single path's run "
                       "of the same inputs too, to see where the two part (fused_mirror_drift).")
            continue
        twin = st.selectbox(f"{markdown_literal(labels[rid])} ran the fused controllers; the single path's run "
                            "of the same inputs",
                            [None, *others], format_func=lambda r: "none" if r is None else labels[r],
                            key=f"explore.single_twin.{rid}")
        if twin is not None:
            out[rid] = twin
    return out


twins = single_twins()
results = {labels[rid]: cache.analyse_run(root, rid, alias_key, twins.get(rid)) for rid in picked}


@st.cache_data(show_spinner=False, max_entries=16)
def writer_report(root_: str, rid: str, aliases: tuple, writer: str):
    """The report of one writer of a run whose rows a field says several wrote (each a run of its own)."""
    from regime_dash.analysis import diagnose

    return diagnose(cache.load_run(root_, rid, aliases), writer=writer)


def pick_writers() -> None:
    """A run that several writers wrote (a rank field): which writer is drawn and judged; then each run
    drawn once (a resume's re-logged rows left out, a failed resume's superseded rows set aside)."""
    for rid in picked:
        label = labels[rid]
        outline = results[label].verdict.structure
        if outline is not None and len(outline.writers) > 1 and outline.writer_field != "content":
            names = list(outline.writers)
            chosen = st.selectbox(f"{markdown_literal(label)}: writer (by its field {outline.writer_field})", names,
                                  key=f"explore.writer.{rid}",
                                  format_func=lambda w, o=outline: f"{w} ({o.writers[w]:,} rows)")
            if chosen != outline.writer:
                results[label] = writer_report(root, rid, alias_key, chosen)
        frames[label] = judged_rows(frames[label], results[label].verdict.structure)


pick_writers()
verdict_strip("explore.verdict", results, WINDOW, frames)  # its buttons move the window (callbacks)
with st.expander("Find a passing config"):  # the repair search's answer for one picked run
    repair_rid = st.selectbox("Run", picked, format_func=labels.get, key="explore.repair.pick") \
        if len(picked) > 1 else picked[0]
    run_repair_panel("explore.repair", repair_rid, frames[labels[repair_rid]])
PROVENANCE, ids = "explore.failure", {label: rid for rid, label in labels.items()}
PANELS = "explore.panels"  # the panel set: the spec panels and the custom ones, in the URL as `panels`


def verdict_counts(result) -> tuple:
    """What the page's verdict strip, failures table and tabs show of a run's verdict, as a comparable key."""
    vd = result.verdict
    return vd.status, tuple((c.id, c.status, c.first_step) for c in vd.checks), len(vd.findings)


def verdicts_moved(now: dict[str, str]) -> bool:
    """Whether a live run's verdict at its current version differs from the one the page drew (each is
    put in ``results``, so the failures table in this fragment shows the current one)."""
    moved = False
    for rid in now:
        fresh = cache.analyse_run(root, rid, alias_key, twins.get(rid))
        moved |= verdict_counts(fresh) != verdict_counts(results[labels[rid]])
        results[labels[rid]] = fresh
    return moved


def follow_live_runs() -> None:
    """Fresh rows of the live runs (only the rows committed since the last redraw are read), and the
    window moved with them: kept where the user looks into the past, grown when it reached the last
    step, the last N steps with "follow the tail"."""
    now = live_alerts.live_versions(picked)
    for rid, version in now.items():  # the held frame grown by the commit's rows only
        frames[labels[rid]] = judged_rows(cache.live_run(root, rid, alias_key, version),
                                          results[labels[rid]].verdict.structure)
    if set(now) != set(live) or verdicts_moved(now):
        st.rerun(scope="app")  # a follow ended (the whole run is read) or a verdict changed: the page follows
    c1, c2 = st.columns([1, 3])
    with c1:
        tail = st.toggle("Follow the tail", key="explore.follow_tail",
                         help="Keep the last N steps in view as the live run grows.")
    with c2:
        n = st.number_input("N steps", min_value=10, value=500, step=100, key="explore.tail_steps",
                            disabled=not tail)
    old_hi = st.session_state.get("explore.live_hi")
    lo, hi = widgets.step_bounds(list(frames.values()), False)
    win = st.session_state.get(WINDOW)
    st.session_state["explore.live_version"] = "|".join(now.values())  # a new commit: a new figure
    if st.session_state.get("explore.align"):
        pass  # the window counts steps since each run's start: left as the user set it
    elif tail:
        state.keep(WINDOW, (max(lo, hi - int(n)), hi))
    elif win is not None and old_hi is not None and win[1] == old_hi and hi > old_hi:
        state.keep(WINDOW, (win[0], hi))  # the view reached the last step: it grows with the run
    st.session_state["explore.live_hi"] = hi
    names = markdown_literal(", ".join(labels[r] for r in now))
    st.caption(f"live: {names or 'the follow has ended'}; redrawn every second")


@st.fragment(run_every=1.0 if live else None)
def charts() -> None:
    """The failures table, the view controls, the panel set's controls and the charts (the spec panels,
    then the custom panels): a change here reruns only this, not the tables below; the provenance panel
    opens from here (a marker clicked or a row chosen)."""
    if live:
        follow_live_runs()
    provenance_panel.failures_table(PROVENANCE, results, ids)
    # before the chart: the panel is a side sheet over the page, and its elements reach the browser first
    provenance_panel.panel(PROVENANCE, provenance_panel.restore(PROVENANCE, results, ids), root, alias_key,
                           frames, results, ids)
    c1, c2, c3 = st.columns([1, 1, 2])
    with c1:
        x = widgets.x_axis_picker("explore.x", list(frames.values()), param="x")
    with c2:
        state.restore("explore.align", "align", "bool", False)
        align = st.toggle("Align first steps", key="explore.align",  # a toggle's label does not wrap
                          on_change=lambda: state.forget(WINDOW, "window"),
                          help="Draw each run against the steps since its own first step.") and x == "step"
    with c3:
        smoothing = widgets.smoothing_slider("explore.smoothing", param="smooth")
    lo, hi = widgets.window_slider(WINDOW, list(frames.values()), param="window", align=align)
    panel_controls.restore_panels(PANELS, store)
    panels = panel_controls.panel_rows(PANELS, numeric_columns(frames.values()))
    panel_controls.layouts_panel(PANELS, store)
    view = widgets.cut_window(frames, lo, hi, align)
    offsets = {label: int(f["step"].min()) for label, f in frames.items() if len(f)} if align else None
    # checks and findings where they happen (placed by step: left out when runs are aligned)
    verdicts = None if align else {label: r.verdict for label, r in results.items()}
    live_version = st.session_state.get("explore.live_version", "")
    fig_key = f"{root}|{'|'.join(picked)}|{alias_key}|{lo}|{hi}|{align}|{live_version}"
    # each run's traces cached on their own key: a smoothing change redraws only what it smooths
    run_keys = tuple((labels[rid], f"{root}|{rid}|{alias_key}|{lo}|{hi}|{align}|{live_version}") for rid in picked)
    if panels.spec:
        widgets.zoomable_chart("explore.chart", WINDOW, widgets.step_bounds(list(frames.values()), align),
                               fig_key, view, x, smoothing, offsets=offsets, window=(lo, hi),
                               decorate=(lambda fig: overlay(fig, verdicts, x=x)) if verdicts else None,
                               on_marker=provenance_panel.marker_clicked(PROVENANCE, ids), run_keys=run_keys,
                               colours=widgets.run_colours({rid: labels[rid] for rid in picked}))
    if panels.panels:
        widgets.plotly_chart(cache.custom_spec(fig_key, view, encode(panels), x, smoothing,
                                               tuple(sorted((offsets or {}).items())),
                                               (lo, hi) if x == "step" and hi > lo else None,
                                               widgets.run_colours({rid: labels[rid] for rid in picked})),
                             "explore.custom")
    elif not panels.spec:
        st.info("No panels to draw: turn the spec panels on, or add a field above.")
    state.publish()


charts()


def view_frame() -> pd.DataFrame:
    """The runs cut to the window on screen now (read when a download is asked for: the
    chart's controls rerun only the chart, so the values at the last full run may be old)."""
    align = bool(st.session_state.get("explore.align", False))
    bounds = widgets.step_bounds(list(frames.values()), align)
    lo, hi = st.session_state.get(WINDOW, bounds)
    cut = widgets.cut_window(frames, lo, hi, align)
    return pd.concat([f.assign(run=label) for label, f in cut.items()], ignore_index=True)


# only the open tab's tables are built and sent (a rerun when another is opened): a run
# added to the view then costs its chart and one tab, not every table of every run
tab_ep, tab_ev, tab_inv, tab_dl = st.tabs(["Episodes", "Events", "Invariants", "Download"], key="explore.tabs",
                                          on_change="rerun")
if tab_ep.open:
    with tab_ep:
        sections.episode_tables("explore.episodes", results)
if tab_ev.open:
    with tab_ev:
        sections.event_tables("explore.events", results)
if tab_inv.open:
    with tab_inv:
        sections.invariant_report("explore.invariants", results, WINDOW, frames)
if tab_dl.open:
    with tab_dl:
        st.caption("The view on screen: the runs picked and the step window above, every column.")
        widgets.download_view("explore.download", view_frame, "regime-dash-view")
state.publish()
