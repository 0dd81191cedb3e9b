"""The dashboard's URL format, shared by its pages and by the links that alerts send.

A view is kept in its page's query string; a range of steps is written ``lo..hi``. The
pages read and write these through :mod:`regime_dash.ui.state`; a follower's alert builds
its Explore link here, so a link opens exactly the view the page itself would write.
"""
from __future__ import annotations

#: How a range (a step window) is written in a URL: ``lo..hi``.
RANGE_SEP = ".."
#: The dashboard a link points to unless the caller names another (streamlit's default port).
DEFAULT_DASHBOARD = "http://localhost:8501"
#: Steps shown either side of the step an alert links to.
ALERT_HALF_WINDOW = 100


def range_text(lo: int, hi: int) -> str:
    """``lo..hi``: a step window as the pages write it."""
    return f"{lo}{RANGE_SEP}{hi}"


def explore_url(base: str, run_id: str, step: int | None = None) -> str:
    """The Explore view of ``run_id`` (a window around ``step``, when given) on the dashboard at ``base``."""
    url = f"{base.rstrip('/')}/explore?runs={run_id}"
    if step is not None:
        url += f"&window={range_text(max(0, int(step) - ALERT_HALF_WINDOW), int(step) + ALERT_HALF_WINDOW)}"
    return url
