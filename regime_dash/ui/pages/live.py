"""Live: play a recorded stream, a scenario or the closed-loop simulator step by step; reconfigure and inject while it plays."""
import streamlit as st

from regime_dash.config import RegimeConfig
from regime_dash.errors import ConfigError, RegimeDashError
from regime_dash.figures import live_figure
from regime_dash.ui import sections, stores, widgets

st.title("Live")
st.caption("Play the pipeline step by step on a recorded stream, a scenario or the closed-loop simulator. "
           "A config change or an injection acts from the current step on, with the state carried over, and "
           "is marked on the chart. Pick a source, then press Play or Step.")
source = sections.live_source("live.source")
if source is None:
    st.stop()
controls = sections.live_controls("live.controls")
with st.expander("Pipeline config (a change applies from the current step on)"):
    values = widgets.config_controls("live.config")
try:
    config = RegimeConfig(**values)
except ConfigError as exc:
    config = None
    st.error(f"Config rejected, the run keeps its current config: {exc}")
try:
    run = stores.live_run("live.run", source, config or RegimeConfig(), reset=controls["reset"])
except RegimeDashError as exc:
    st.error(f"The live run cannot start: {exc}")
    st.stop()
if config is not None:
    run.set_config(config)
try:
    if controls["shock"]:
        run.inject_tail_shock()
    if controls["flat"]:
        run.force_flat()
    if controls["boundary"]:
        run.cross_boundary()
except RegimeDashError as exc:  # e.g. the stream has been played to its end
    st.warning(str(exc))
if controls["step"] or controls["shock"] or controls["flat"] or controls["boundary"]:
    run.step(1)  # an injection takes effect at the next step: take it, so it shows at once


#: Seconds between ticks while playing: ten redraws a second, each one step of `speed` steps.
TICK_S = 0.1


@st.fragment(run_every=TICK_S if controls["playing"] and not run.done else None)
def live_view() -> None:
    if controls["playing"]:
        run.step(controls["speed"])
    status = run.status()
    c = st.columns(5)
    c[0].metric("step", f"{run.t:,}" + (f" of {run.total:,}" if run.total is not None else ""))
    if "step" not in status:
        st.info("Press Play or Step to start the live run.")
        return
    c[1].metric("kelly_f", f"{status['kelly_f']:.4g}")
    c[2].metric("dead zone", "ON" if status["dead_zone"] else "off")
    c[3].metric("open accounts", f"{status['open_accounts']:,}")
    c[4].metric("changes", len(run.changes))
    if run.done:
        st.info("The stream has been played to its end. Reset to play it again.")
    marks = [(ch.step, ch.kind, ch.label) for ch in run.changes]  # each config change and injection
    st.plotly_chart(live_figure(run.frame(), marks), key="live.chart", config={"displaylogo": False})


live_view()
