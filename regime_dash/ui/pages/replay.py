"""Replay & what-if: replay a stream under the baseline and a what-if config; sweep a field or two."""
import streamlit as st

from regime_dash.core.config import RegimeConfig
from regime_dash.analysis.mirror_drift import needs_single_twin
from regime_dash.errors import ConfigError
from regime_dash.text import markdown_literal
from regime_dash.ui import cache, sections, state, stores, widgets
from regime_dash.ui.repair_panel import repair_panel
from regime_dash.ui.sensitivity_tab import sensitivity_tab
from regime_dash.usecases.warmup import engine_now

st.title("Replay & what-if")
st.caption("Ask what the risk stack would have done under another config. Pick a stream, then move a slider "
           "on the left: the what-if run is redrawn against the spec's baseline beside it.")
source_key, stream = sections.stream_source("replay.source", in_url=True)
if stream is None:
    state.publish()
    st.stop()
status = cache.engine_status()
sections.fast_engine_status("replay.compile")
auto_now = engine_now("auto", stream.steps)
requested = widgets.engine_picker("replay.engine", status, auto_now=auto_now)
if requested != "auto" and status.get(requested) is not None:
    st.error(f"Engine {requested!r} cannot run here: {status[requested]}. Pick another engine.")
    st.stop()
engine = auto_now if requested == "auto" else requested
layout, layout_source = stores.active_layout()
fp = layout.fingerprint_hex()
st.caption(f"Stream: {stream.steps:,} steps × {stream.accounts:,} accounts. Slot layout: "
           f"{markdown_literal(layout_source)}, "
           f"fingerprint {fp} (change it on the Slots page).")


#: Points per trace: about the chart's plot width in pixels beside the sliders (650 px in a
#: 1,600 px window, where Explore's full-width chart has 1,000); more only cost the browser time.
CHART_POINTS = 700
#: Replay's runs are not stored runs: the baseline and the what-if keep the palette's first colours.
PAIR_COLOURS = (("baseline", "#636EFA"), ("what-if", "#EF553B"), ("what-if, single path", "#00CC96"))


def mirror_drift_note(source_key: str, stream, config: RegimeConfig, engine: str, fp: str, layout) -> None:
    """Where the fused path parts from the single one (finding ``fused_mirror_drift``), or that they agree."""
    found = cache.mirror_drift(source_key, stream, config.as_dict(), engine, fp, layout)
    for f in found:
        st.error(f"**{f['id']}** (first at step {f['steps'][0]}): {markdown_literal(f['message'])}")
    if not found:
        st.success("fused_mirror_drift: none here (the fused and single paths agree bit for bit on this stream).")


@st.fragment
def what_if() -> None:
    """Sliders on the left, the chart on the right: a slider reruns only this."""
    left, right = st.columns([1, 2.4])
    with left:
        st.markdown("**What-if config** (F2, F4, F5 and the model switches; every RegimeConfig field)")
        with st.container(height=820):
            controllers = widgets.controllers_picker("replay.controllers")
            values = widgets.config_controls("replay.whatif", columns=1, in_url=True)
            smoothing = widgets.smoothing_slider("replay.smoothing", param="smooth")
    with right:
        try:
            config = RegimeConfig(**values)
        except ConfigError as exc:
            st.error(f"What-if config rejected: {markdown_literal(exc)}")
            state.publish()
            return
        base = cache.replay(source_key, stream, RegimeConfig().as_dict(), engine, fp, layout)
        same = config == RegimeConfig() and controllers == "single"
        run = base if same else cache.replay(source_key, stream, config.as_dict(), engine, fp, layout, controllers)
        path = "" if controllers == "single" else f" Controller path: {widgets.CONTROLLER_LABELS[controllers]}."
        st.caption(f"What-if replayed in {run['seconds'] * 1000:.1f} ms on the {run['engine']} engine.{path}")
        metrics = st.container()  # above the chart, filled after it: the chart is not kept waiting
        run_key = f"replay|{source_key}|{engine}|{fp}"
        runs = {"baseline": base["frame"], "what-if": run["frame"]}
        keys = [("baseline", f"{run_key}|{RegimeConfig()}"), ("what-if", f"{run_key}|{config}|{controllers}")]
        if needs_single_twin(config, controllers):  # a mirror off: the single path beside the fused one
            mirror_drift_note(source_key, stream, config, engine, fp, layout)
            runs["what-if, single path"] = cache.replay(source_key, stream, config.as_dict(), engine, fp,
                                                        layout)["frame"]
            keys.append(("what-if, single path", f"{run_key}|{config}"))
        # a box dragged on the chart zooms in: the window is drawn again from every step of the runs
        bounds = widgets.step_bounds([base["frame"]])
        window_key = widgets.window_key("replay.window", [source_key])
        lo, hi = widgets.kept_window(window_key, bounds, param="window")  # in the URL as lo..hi
        zoom = "" if (lo, hi) == bounds else f"|{lo}..{hi}"
        fig = cache.signal_spec(f"{run_key}|{config}|{controllers}{zoom}", widgets.cut_window(runs, lo, hi), "step",
                                smoothing, height=900, points=CHART_POINTS,
                                run_keys=tuple((label, key + zoom) for label, key in keys), colours=PAIR_COLOURS)
        widgets.box_zoom("replay.chart", window_key, bounds, fig, window=(lo, hi))
        with metrics:
            sections.summary_metrics("replay.summary",
                                    cache.replay_summary(source_key, stream, config.as_dict(), engine, fp, layout,
                                                         controllers),
                                    cache.replay_summary(source_key, stream, RegimeConfig().as_dict(), engine, fp,
                                                         layout))
    state.publish()


tab_whatif, tab_sweep, tab_sensitivity, tab_repair = st.tabs(["What-if", "Sweep", "Sensitivity", "Repair"])
with tab_whatif:
    what_if()
with tab_sweep:
    try:
        what_if_config = RegimeConfig(**widgets.config_values("replay.whatif"))
    except ConfigError:
        what_if_config = None
    sections.sweep_panel("replay.sweep", source_key, stream, engine, what_if_config, layout)
with tab_sensitivity:
    sensitivity_tab("replay.sensitivity", source_key, stream, what_if_config, layout)
with tab_repair:  # its candidates' "Apply" sets the what-if sliders: the What-if tab shows the run under one
    repair_panel("replay.repair", source_key, stream, what_if_config, whatif_key="replay.whatif")
state.publish()
