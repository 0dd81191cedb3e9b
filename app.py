"""Streamlit entry: page config and navigation over regime_dash/ui/pages. Nothing else."""
import streamlit as st

from regime_dash.ui.navigation import pages

st.set_page_config(page_title="regime-dash", page_icon=":material/monitoring:", layout="wide")
st.navigation(pages()).run()
