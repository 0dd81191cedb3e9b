"""The app's pages, in menu order."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

PAGES_DIR = Path(__file__).parent / "pages"


def pages() -> list:
    return [
        st.Page(str(PAGES_DIR / "runs.py"), title="Runs", icon="🗂️", default=True),
    ]
