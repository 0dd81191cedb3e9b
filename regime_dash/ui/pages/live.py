"""Live: play a recorded stream, a scenario or the closed-loop simulator step by step; reconfigure and inject while it plays."""
import time

import pandas as pd
import streamlit as st

from regime_dash.core.config import RegimeConfig
from regime_dash.errors import ConfigError, RegimeDashError
from regime_dash.figures.signals import live_figure
from regime_dash.text import markdown_literal
from regime_dash.ui import sections, state, stores, widgets

st.title("Live")
st.caption("Play the pipeline step by step on a recorded stream, a scenario or the closed-loop simulator. "
           "A config change or an injection acts from the current step on, with the state carried over, and "
           "is marked on the chart. Pick a source, then press Play or Step.")
widgets.show_charts_while_sized()  # a new chart every tick: no blank frame while it is sized
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
    st.error(f"Config rejected, the run keeps its current config: {markdown_literal(exc)}")
lock = stores.live_lock("live.run")  # one script thread at a time steps or draws the run
with lock:
    try:
        run = stores.live_run("live.run", source, config or RegimeConfig(), reset=controls["reset"])
    except RegimeDashError as exc:
        st.error(f"The live run cannot start: {markdown_literal(exc)}")
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
        st.warning(markdown_literal(exc))
    if controls["step"] or controls["shock"] or controls["flat"] or controls["boundary"]:
        run.step(1)  # an injection takes effect at the next step: take it, so it shows at once

#: Seconds between ticks while playing, each one step of `speed` steps and one redraw.
TICK_S = 1.0 / sections.LIVE_TICKS_PER_S
#: Ticks one run of the fragment plays before it hands back (a rerun is then due at once).
TICKS_PER_RUN = 20


def draw(slots: list, note, chart) -> None:
    """The run as it is now, written into the placeholders (the metrics, a note, the chart)."""
    status = run.status()
    slots[0].metric("step", f"{run.t:,}" + (f" of {run.total:,}" if run.total is not None else ""))
    if "step" not in status:
        note.info("Press Play or Step to start the live run.")
        return
    slots[1].metric("kelly_f", f"{status['kelly_f']:.4g}")
    slots[2].metric("dead zone", "ON" if status["dead_zone"] else "off")
    slots[3].metric("open accounts", f"{status['open_accounts']:,}")
    slots[4].metric("changes", len(run.changes))
    if run.done:
        note.info(end_note())
    marks = [(ch.step, ch.kind, ch.label) for ch in run.changes]  # each config change and injection
    chart.plotly_chart(live_figure(run.frame(), marks), config={"displaylogo": False})


def end_note() -> str:
    """What the page says once the run has ended: a stream's end or the simulator's schedule."""
    if source["kind"] == "Simulator":
        return f"The simulator has run its schedule of {run.total:,} steps to its end. Reset to run it again."
    return "The stream has been played to its end. Reset to play it again."


@st.fragment(run_every=TICK_S if controls["playing"] and not run.done else None)
def live_view() -> None:
    """While playing, one run of this plays up to TICKS_PER_RUN ticks on its own clock, each
    redrawn in place: a rerun per tick (the browser asking, the server answering) left the
    ticks late and uneven (six or seven a second). A click anywhere interrupts it."""
    # the step ("2,260 of 3,000") in a wider column: at a fifth of a 1,280 px window it was cut
    slots = [c.empty() for c in st.columns([2, 1, 1, 1, 1])]
    note, chart = st.empty(), st.empty()
    # a full run of the page (a button, a slider) draws one tick; the fragment's own reruns play on
    own_rerun = state.fragment_rerun("live_view")
    ticks = TICKS_PER_RUN if controls["playing"] and own_rerun else 1
    due = time.monotonic()
    for _ in range(ticks):
        with lock:  # a tick's steps and their drawing, whole: a page run started meanwhile waits
            if controls["playing"]:
                run.step(controls["speed"])
            draw(slots, note, chart)
        if run.done:
            if controls["playing"] and own_rerun:
                st.rerun()  # the whole page, once: it sees the end and stops the tick clock
            break
        due = max(due + TICK_S, time.monotonic())  # late: the next tick waits its full interval, no burst
        time.sleep(max(0.0, due - time.monotonic()))  # due may be now: the clock has moved on since


state.page_runs("live_view")
live_view()


def trajectory() -> pd.DataFrame:
    """The run's steps so far, read under the lock: a playing fragment may be stepping it."""
    with lock:
        return run.frame()


with st.expander("Download the trajectory so far"):
    widgets.download_view("live.download", trajectory, "regime-dash-live")
