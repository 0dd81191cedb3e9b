"""The one place tests read Streamlit's element protobufs: what AppTest's public API leaves untyped.

Supported Streamlit range: 1.67 up to (not including) 2.0, as requirements.txt asks
(``streamlit>=1.67``, components v2). In that range ``streamlit.testing.v1.AppTest`` gives
``st.plotly_chart``, ``st.download_button``, ``st.progress`` and a components-v2 element
(``bidi_component``: the in-place chart of ``regime_dash.ui.plotly_react``) only as an
``UnknownElement``, whose content is its ``.proto``. Every other element the tests read goes
through AppTest's typed API. When a Streamlit release types these elements or moves their
fields, this module is what changes.
"""
from __future__ import annotations

import json
from typing import Any


def component(e: Any) -> tuple[str, str, Any]:
    """(component name, element id, the data the page gave it, parsed from JSON) of a components-v2 element."""
    p = e.proto
    return p.component_name, p.id, json.loads(p.json if p.WhichOneof("data") == "json" else p.mixed.json)


def plotly_spec(e: Any) -> dict:
    """The figure of an ``st.plotly_chart`` element, parsed."""
    return json.loads(e.proto.spec)


def label(e: Any) -> str:
    """The label of an ``st.download_button`` element."""
    return e.proto.label


def progress(e: Any) -> tuple[int, str]:
    """(value in percent, text) of an ``st.progress`` element."""
    return e.proto.value, e.proto.text
