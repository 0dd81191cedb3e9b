"""Explore: overlay stored runs on the regime panels; episodes, events and invariants."""
import pandas as pd
import streamlit as st

from regime_dash.figures_overlay import overlay
from regime_dash.ui import cache, widgets
from regime_dash.ui.verdict_strip import verdict_strip

st.title("Explore")
store = cache.get_store()
runs = cache.runs_frame(store)
if runs.empty:
    st.info("No runs in the store yet. Upload a diag.jsonl on the Runs page, or load the samples there.")
    st.page_link(widgets.page_path("runs.py"), label="Go to Runs", icon=":material/folder_open:")
    st.stop()

picked = widgets.run_picker("explore.runs", runs)
with st.expander("Aliases: map your file's field names to the dashboard's"):
    aliases = widgets.alias_editor("explore.aliases")
if not picked:
    st.info("Pick one or more runs to overlay.")
    st.stop()

root, alias_key = cache.store_root(), widgets.alias_key(aliases)
labels = widgets.run_labels(runs, picked)
frames = {labels[rid]: cache.load_run(root, rid, alias_key) for rid in picked}
for label, frame in frames.items():
    if frame.attrs.get("step_from_row"):
        st.caption(f"{label} has no step field: drawn against its row number.")
    if frame.attrs.get("rows_without_step"):
        st.warning(f"{label}: {frame.attrs['rows_without_step']:,} row(s) have no whole-number step "
                   "and are left out.")

c1, c2 = st.columns([1, 2])
with c1:
    x = widgets.x_axis_picker("explore.x", list(frames.values()))
with c2:
    smoothing = widgets.smoothing_slider("explore.smoothing")
window_key = widgets.window_key("explore.window", picked)
results = {labels[rid]: cache.analyse_run(root, rid, alias_key) for rid in picked}
verdict_strip("explore.verdict", results, window_key, frames)  # its buttons move the window: before the slider
lo, hi = widgets.window_slider(window_key, list(frames.values()))
view = {label: f[(f["step"] >= lo) & (f["step"] <= hi)] for label, f in frames.items()}

fig = cache.signal_figure(f"{root}|{'|'.join(picked)}|{alias_key}|{lo}|{hi}", view, x, smoothing)
fig = overlay(fig, {label: r.verdict for label, r in results.items()}, x=x)  # checks and findings where they happen
widgets.plotly_chart(fig, "explore.chart")

tab_ep, tab_ev, tab_inv, tab_dl = st.tabs(["Episodes", "Events", "Invariants", "Download"])
with tab_ep:
    widgets.episode_tables("explore.episodes", results)
with tab_ev:
    widgets.event_tables("explore.events", results)
with tab_inv:
    widgets.invariant_report("explore.invariants", results, window_key, frames)
with tab_dl:
    st.caption(f"The view: steps {lo} … {hi} of {len(view)} run(s), every column.")
    widgets.download_view("explore.download", lambda: pd.concat(
        [f.assign(run=label) for label, f in view.items()], ignore_index=True), "regime-dash-view")
