"""Streamlit entry: page config, the background compiles (the fast engine, the re-derivation loop),
navigation over regime_dash/ui/pages."""
import streamlit as st

from regime_dash.engine.warm import start_fast_compile
from regime_dash.ui.cache import warm_rederivation
from regime_dash.ui.navigation import pages

st.set_page_config(page_title="regime-dash", page_icon=":material/monitoring:", layout="wide")
start_fast_compile()  # idempotent; replays use the reference engine until it is ready
warm_rederivation()  # once a process: a failure clicked on Explore re-derives on the compiled loop
st.navigation(pages()).run()
