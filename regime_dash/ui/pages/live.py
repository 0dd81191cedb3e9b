"""Live: the closed-loop simulator stepping in real time; inject shocks, flatten, cross a fold."""
import streamlit as st

from regime_dash.errors import ConfigError
from regime_dash.figures import live_figure
from regime_dash.ui import widgets

st.title("Live")
st.caption("Watch the pipeline react as it runs: press Play to step the closed-loop simulator, then inject a "
           "tail shock, a forced flat or a fold boundary and see the regime signals answer.")
setup = widgets.live_setup("live.setup")
controls = widgets.live_controls("live.controls")
try:
    sim = widgets.live_simulator("live.sim", setup, reset=controls["reset"])
except ConfigError as exc:
    st.error(f"Config rejected: {exc}")
    st.stop()
if controls["shock"]:
    sim.inject_tail_shock()
if controls["flat"]:
    sim.force_flat()
if controls["boundary"]:
    sim.cross_boundary()
if controls["step"] or controls["shock"] or controls["flat"] or controls["boundary"]:
    sim.step(1)  # an injection takes effect at the next step: take it, so it shows at once


#: Seconds between ticks while playing: ten redraws a second, each one step of `speed` steps.
TICK_S = 0.1


@st.fragment(run_every=TICK_S if controls["playing"] else None)
def live_view() -> None:
    if controls["playing"]:
        sim.step(controls["speed"])
    frame = sim.frame()
    market = sim.market_frame()
    c = st.columns(5)
    c[0].metric("step", f"{sim.t:,}")
    c[1].metric("kelly_f", f"{sim.kelly_f:.4g}")
    if len(frame):
        last = frame.iloc[-1]
        c[2].metric("dead zone", "ON" if last["risk_stack.regime.dead_zone.flag"] else "off")
        c[3].metric("open accounts", f"{int(market['open_accounts'].iloc[-1]):,}")
        c[4].metric("cumulative pnl", f"{market['cum_pnl'].iloc[-1]:,.0f}")
        marks = {"tail shock": market.loc[market["shock"] != 0, "step"].tolist(),
                 "forced flat": market.loc[market["forced_flat"] != 0, "step"].tolist()}
        st.plotly_chart(live_figure(frame, marks), key="live.chart", config={"displaylogo": False})
    else:
        st.info("Press Play or Step to start the live run.")


live_view()
