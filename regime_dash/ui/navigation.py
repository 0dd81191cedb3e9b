"""The app's pages, in menu order."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

PAGES_DIR = Path(__file__).parent / "pages"

#: (file, title, icon), in menu order; the first is the default page.
PAGES: tuple[tuple[str, str, str], ...] = (
    ("runs.py", "Runs", "🗂️"),
    ("explore.py", "Explore", "📈"),
    ("replay.py", "Replay & what-if", "🔁"),
    ("live.py", "Live", "▶️"),
    ("slots.py", "Slots", "🧮"),
    ("compare.py", "Compare", "⚖️"),
)


def pages() -> list:
    """The ``st.Page`` objects ``st.navigation`` routes over."""
    return [st.Page(str(PAGES_DIR / file), title=title, icon=icon, default=(i == 0))
            for i, (file, title, icon) in enumerate(PAGES)]
