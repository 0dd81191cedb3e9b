"""Followed runs seen from any page: a toast when one of them starts failing, the Runs page's badges.

:func:`alert_toasts` runs as a fragment on its own timer beside every page (``app.py``
calls it): each (run, check) alert the follower recorded is shown once per browser
session, as a toast linking to its Explore view. :func:`badges` gives the Runs table
its "live" and "alerts" columns.
"""
from __future__ import annotations

import datetime as _dt

import pandas as pd
import streamlit as st

from regime_dash.text import markdown_literal
from regime_dash.ui import cache

#: Seconds between two looks at the store for new alerts.
POLL_SECONDS = 2.0
_SEEN = "live_alerts.seen"


def _status() -> dict:

    return cache.get_store().follow_status()


@st.fragment(run_every=POLL_SECONDS)
def alert_toasts() -> None:
    """Toast each alert not shown in this session yet (a failure that passed and fails again is new)."""
    seen = st.session_state.setdefault(_SEEN, set())
    now: set = set()
    for run_id, s in _status().items():
        for a in s["alert_details"]:
            k = (run_id, a.get("check"), a.get("at"))
            now.add(k)
            if k not in seen:
                st.toast(f"**{markdown_literal(run_id)}**: {markdown_literal(a.get('check'))} fails from step "
                         f"{markdown_literal(a.get('first_step'))}",
                         icon=":material/error:")
    st.session_state[_SEEN] = seen | now


def _ago(stamp: str | None) -> str:
    if not stamp:
        return ""
    try:
        t = _dt.datetime.fromisoformat(stamp)
    except ValueError:
        return ""
    secs = (_dt.datetime.now(_dt.timezone.utc) - t).total_seconds()
    return f"{secs:.0f} s ago" if secs < 120 else f"{secs / 60:.0f} min ago"


def badges(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` with a ``live`` column ("● live, step N, 3 s ago" while followed) and an ``alerts``
    column (the failing checks of a followed run, "FAIL: id, ...": text, which every font draws, where an emoji was an empty box without an emoji font)."""
    status = _status()
    live, alerts = [], []
    for rid in runs["run_id"]:
        s = status.get(rid)
        if s is None:
            live.append("")
            alerts.append("")
            continue
        live.append(f"● live, step {s['last_step']}, last line {_ago(s['last_line_at'])}" if s["live"]
                    else "followed")
        alerts.append(("FAIL: " + ", ".join(s["alerts"])) if s["alerts"] else "")
    return runs.assign(live=live, alerts=alerts)


def live_versions(run_ids) -> dict[str, str]:
    """``{run_id: version}`` of the runs among ``run_ids`` a follower is writing now."""
    status = _status()
    return {r: status[r]["version"] for r in run_ids if r in status and status[r]["live"]}
