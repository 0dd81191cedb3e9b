"""The dashboard's one run: page config, the background compiles (the fast engine, the re-derivation
loop), navigation over ui/pages.

Both streamlit entry scripts call :func:`main` on every rerun: the checkout's ``app.py``
and the installed package's ``ui/launch/app.py`` (what ``regime-dash app`` runs).
"""
from __future__ import annotations

import streamlit as st

from regime_dash.ui.cache import warm_rederivation
from regime_dash.ui.live_alerts import alert_toasts
from regime_dash.ui import state
from regime_dash.ui.navigation import pages
from regime_dash.usecases.warmup import start_warmup


def main() -> None:
    """Set up the page and run the page navigation picks."""
    st.set_page_config(page_title="regime-dash", page_icon=":material/monitoring:", layout="wide")
    state.start_run()  # before any page draws a persisted widget
    start_warmup()  # idempotent; replays use the reference engine until the fast one is compiled
    warm_rederivation()  # once a process: a failure clicked on Explore re-derives on the compiled loop
    alert_toasts()  # a followed run that starts failing is shown on whatever page is open
    st.navigation(pages()).run()
