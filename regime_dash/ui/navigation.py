"""The app's pages, in menu order, and the early load of the chart library for pages that draw charts."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

import streamlit as st

PAGES_DIR = Path(__file__).parent / "pages"

#: (file, title, icon), in menu order; the first is the default page. Material icons, not
#: emoji: they come with streamlit's own font, so they render without an emoji font.
PAGES: tuple[tuple[str, str, str], ...] = (
    ("runs.py", "Runs", ":material/folder_open:"),
    ("explore.py", "Explore", ":material/monitoring:"),
    ("replay.py", "Replay & what-if", ":material/replay:"),
    ("live.py", "Live", ":material/play_circle:"),
    ("controllers.py", "Controllers", ":material/tune:"),
    ("slots.py", "Slots", ":material/table_rows:"),
    ("compare.py", "Compare", ":material/compare_arrows:"),
)


def pages() -> list:
    """The ``st.Page`` objects ``st.navigation`` routes over."""
    return [st.Page(str(PAGES_DIR / file), title=title, icon=icon, default=(i == 0))
            for i, (file, title, icon) in enumerate(PAGES)]


#: URL paths of the pages whose first view is a Plotly chart.
CHART_PAGES = frozenset({"explore", "replay", "live", "controllers", "compare"})
#: Session-state flag: this browser session has loaded the chart library.
PRELOADED = "navigation.plotly_preloaded"
#: An empty, invisible chart: no cartesian axes, no data, nothing drawn.
_BLANK_CHART = {"data": [{"type": "pie", "values": [], "visible": False}],
                "layout": {"height": 10, "margin": {"l": 0, "r": 0, "t": 0, "b": 0}, "showlegend": False,
                           "paper_bgcolor": "rgba(0,0,0,0)"}}


@contextlib.contextmanager
def preload_charts(page) -> Iterator[None]:
    """Run ``page`` with the browser loading the chart library meanwhile.

    Streamlit's browser code loads plotly.js (a 4.7 MB chunk, about 2 s to fetch,
    compile and start on a loaded 2-core machine) only when the first chart
    arrives, that is after the page has computed it. On the first run of a session
    on a chart page, a blank chart is sent before the page runs, so the library
    loads while the server works, and is taken away when the page is done. The
    library stays loaded across page switches (one browser document), so later
    runs send nothing.
    """
    if page.url_path not in CHART_PAGES or st.session_state.get(PRELOADED):
        yield
        return
    st.session_state[PRELOADED] = True
    slot = st.empty()
    slot.plotly_chart(_BLANK_CHART, key="navigation.preload", config={"staticPlot": True})
    try:
        yield
    finally:
        slot.empty()
