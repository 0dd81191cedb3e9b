"""Session-state stores: values one page sets and another reads, each under its own key.

The Slots page's active layout (read by Replay), the Runs page's ingest
reports, and the Live page's running :class:`~regime_dash.runs.live.LiveRun`.
"""
from __future__ import annotations

import threading
from typing import Any, Mapping, Sequence

import streamlit as st

from regime_dash.core.config import RegimeConfig


# ---- slot layout (Slots page sets it, Replay uses it) ----------------------------------
_LAYOUT = "slots.active_layout"


def use_layout(layout, source: str | None) -> None:
    """Make ``layout`` (from ``source``, an uploaded isv_slots.rs) the one replays use; None: the registry."""
    if source is None:
        st.session_state.pop(_LAYOUT, None)
    else:
        st.session_state[_LAYOUT] = (layout, source)


def active_layout():
    """``(layout, source)``: the layout the Slots page made active, else the default registry."""
    from regime_dash.core.slots import DEFAULT_LAYOUT

    return st.session_state.get(_LAYOUT, (DEFAULT_LAYOUT, "the default registry"))


# ---- ingest reports (Runs page) ---------------------------------------------------
REPORTS_KEY = "runs.reports"


def ingest_reports() -> dict[str, Any]:
    """``{upload id: report}`` of this session's ingests (owned by the Runs page's report panel)."""
    return st.session_state.setdefault(REPORTS_KEY, {})


def record_ingest(upload_id: str, name: str, result: Any) -> None:
    """Remember one ingest's result (or the error it raised) for :func:`ingest_report_panel`."""
    ingest_reports()[upload_id] = (name, result)


def uploaded_runs(stored: Sequence[str]) -> list[str]:
    """The runs this session's ingests stored (or found stored), newest ingest first, among
    ``stored`` (the store's run ids now: a run deleted since drops out)."""
    ids = [getattr(result, "run_id", None) for _, result in reversed(list(ingest_reports().values()))]
    return [rid for rid in dict.fromkeys(ids) if rid in set(stored)]


# ---- live run (Live page) -----------------------------------------------------------
def live_lock(key: str) -> threading.Lock:
    """The lock a session holds while it steps, reconfigures or draws its live run ``key``.

    Streamlit's fast reruns start a page run at once, in a new thread, while the run it
    stops goes on to its next ``st`` call: a tick's 20 steps half taken when the new run
    drew the step (a Pause that stopped at step 669), or a config switched mid-tick.
    """
    return st.session_state.setdefault(f"{key}.lock", threading.Lock())


def live_run(key: str, source: Mapping[str, Any], config: RegimeConfig, *, reset: bool = False):
    """The session's :class:`~regime_dash.runs.live.LiveRun` of ``source``, started under ``config``.

    Held in ``st.session_state[key]``; a new run starts on ``reset`` or when the
    source's key changes (``st.session_state[key + '.source']`` remembers it).
    It steps on the faster stepper of this machine (``engine="auto"``: the GPU
    stepper where it measures faster, else the reference; never a compile).
    """
    from regime_dash.usecases.live import simulator_live_run, stream_live_run

    if reset or key not in st.session_state or st.session_state.get(f"{key}.source") != source["key"]:
        if "stream" in source:
            run = stream_live_run(source["stream"], config, "auto", source["key"])
        else:
            setup = source["sim"]
            run, _ = simulator_live_run(setup["preset"], config, accounts=setup["accounts"], seed=setup["seed"],
                                        steps=setup["horizon"], label=source["key"])  # it ends with its schedule
        st.session_state[key] = run
        st.session_state[f"{key}.source"] = source["key"]
    return st.session_state[key]
