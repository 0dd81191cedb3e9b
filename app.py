"""Streamlit entry: page config, the fast engine's background compile, navigation over regime_dash/ui/pages."""
import streamlit as st

from regime_dash.engine.warm import start_fast_compile
from regime_dash.ui.live_alerts import alert_toasts
from regime_dash.ui.navigation import pages

st.set_page_config(page_title="regime-dash", page_icon=":material/monitoring:", layout="wide")
start_fast_compile()  # idempotent; replays use the reference engine until it is ready
alert_toasts()  # a followed run that starts failing is shown on whatever page is open
st.navigation(pages()).run()
