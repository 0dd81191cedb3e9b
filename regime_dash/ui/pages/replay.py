"""Replay & what-if: replay a stream under the baseline and a what-if config; sweep a field or two."""
import streamlit as st

from regime_dash.config import RegimeConfig
from regime_dash.errors import ConfigError
from regime_dash.ui import cache, widgets
from regime_dash.ui.sensitivity_tab import sensitivity_tab

st.title("Replay & what-if")
source_key, stream = widgets.stream_source("replay.source")
if stream is None:
    st.stop()
status = cache.engine_status()
engine = widgets.engine_picker("replay.engine", status)
if engine != "auto" and status.get(engine) is not None:
    st.error(f"Engine {engine!r} cannot run here: {status[engine]}. Pick another engine.")
    st.stop()
layout, layout_source = widgets.active_layout()
fp = layout.fingerprint_hex()
st.caption(f"Stream: {stream.steps:,} steps × {stream.accounts:,} accounts.")
st.caption(f"Slot layout: {layout_source}, fingerprint {fp} (change it on the Slots page).")

tab_whatif, tab_sweep, tab_sensitivity = st.tabs(["What-if", "Sweep", "Sensitivity"])
with tab_whatif:
    with st.expander("What-if config (every RegimeConfig field; F2, F4, F5 switches)", expanded=True):
        values = widgets.config_controls("replay.whatif")
    try:
        what_if_config = RegimeConfig(**values)
    except ConfigError as exc:
        what_if_config = None
        st.error(f"What-if config rejected: {exc}")
    if what_if_config is not None:
        base = cache.replay(source_key, stream, RegimeConfig().as_dict(), engine, fp, layout)
        what_if = cache.replay(source_key, stream, what_if_config.as_dict(), engine, fp, layout)
        c1, c2, c3 = st.columns(3)
        c1.metric("what-if replay time", f"{what_if['seconds'] * 1000:.1f} ms")
        c2.metric("baseline replay time", f"{base['seconds'] * 1000:.1f} ms")
        c3.metric("engine", what_if["engine"])
        widgets.summary_metrics("replay.summary", what_if["summary"], base["summary"])
        x = widgets.x_axis_picker("replay.x", [what_if["frame"]])
        smoothing = widgets.smoothing_slider("replay.smoothing")
        fig = cache.signal_figure(f"replay|{source_key}|{engine}|{fp}|{what_if_config}",
                                  {"baseline": base["frame"], "what-if": what_if["frame"]}, x, smoothing)
        widgets.plotly_chart(fig, "replay.chart")

with tab_sweep:
    widgets.sweep_panel("replay.sweep", source_key, stream, engine, what_if_config, layout)

with tab_sensitivity:
    sensitivity_tab("replay.sensitivity", source_key, stream, what_if_config, layout)
