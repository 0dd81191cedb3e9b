"""The app's pages, in menu order."""
from __future__ import annotations

from pathlib import Path

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
