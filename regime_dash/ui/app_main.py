"""The dashboard's one run: page config, the background compiles (the fast engine, the re-derivation
loop), navigation over ui/pages.

Both streamlit entry scripts call :func:`main` on every rerun: the checkout's ``app.py``
and the installed package's ``ui/launch/app.py`` (what ``regime-dash app`` runs).
"""
from __future__ import annotations

import streamlit as st

from regime_dash.ui.cache import get_store, warm_rederivation
from regime_dash.ui.live_alerts import alert_toasts
from regime_dash.ui import memory_trim, state
from regime_dash.ui.navigation import pages
from regime_dash.usecases.warmup import start_warmup


def own_url() -> str:
    """This server's URL from streamlit's ``server.address`` (``localhost`` when it listens on every
    address) and ``server.port``, as it runs."""
    host = st.get_option("server.address") or "localhost"
    host = "localhost" if host in ("0.0.0.0", "::") else host
    return f"http://{host}:{int(st.get_option('server.port'))}"


@st.cache_resource(show_spinner=False)
def record_dashboard_url() -> str | None:
    """Record :func:`own_url` in the store, once a process; a store that cannot be written keeps none
    (the dashboard still serves it; its followers link to their default). Returns why it was not."""
    from regime_dash.errors import StoreError

    try:
        get_store().record_dashboard_url(own_url())
    except StoreError as exc:
        return str(exc)
    return None


def main() -> None:
    """Set up the page and run the page navigation picks."""
    st.set_page_config(page_title="regime-dash", page_icon=":material/monitoring:", layout="wide")
    state.start_run()  # before any page draws a persisted widget
    start_warmup()  # idempotent; replays use the reference engine until the fast one is compiled
    warm_rederivation()  # once a process: a failure clicked on Explore re-derives on the compiled loop
    record_dashboard_url()  # a follower of this store links its alerts to this server
    memory_trim.keep_trimmed()  # once a process: what the redraws free goes back to the system
    alert_toasts()  # a followed run that starts failing is shown on whatever page is open
    st.navigation(pages()).run()
