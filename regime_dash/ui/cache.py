"""Cached loaders of the dashboard: the store, run frames, replays and figures.

``st.cache_resource`` holds things that are shared and not copied (the store,
the engine probe); ``st.cache_data`` holds values (frames, replay results).
Runs in the store are immutable once in place, so a run's frame is keyed by
its id alone. Arguments whose name starts with ``_`` are not hashed; the key
that stands for them is passed beside them.
"""
from __future__ import annotations

import os
from typing import Any

import pandas as pd
import streamlit as st

from regime_dash.config import RegimeConfig

#: Environment variable naming the store directory (tests point it at a tmp dir).
STORE_ENV = "REGIME_DASH_STORE"
DEFAULT_STORE = "data/store"


def store_root() -> str:
    """The store directory: ``$REGIME_DASH_STORE`` or ``data/store``."""
    return os.environ.get(STORE_ENV) or DEFAULT_STORE


@st.cache_resource(show_spinner=False)
def _store(root: str):
    from regime_dash.store import RunStore

    return RunStore(root)


def get_store():
    """The run store at :func:`store_root` (one instance per directory and process)."""
    return _store(store_root())


@st.cache_data(show_spinner=False, max_entries=32)
def load_run(root: str, run_id: str, aliases: tuple = ()) -> pd.DataFrame:
    """A stored run as a frame with canonical column names (``aliases`` as ``((canonical, (alt, ...)), ...)``)."""
    from regime_dash.aliases import canonical_frame

    frame = canonical_frame(_store(root).load(run_id), dict(aliases) or None)
    if "step" not in frame.columns:
        # A file without a step field is drawn against its line order; say so on the page.
        frame.insert(0, "step", range(len(frame)))
        frame.attrs["step_from_row"] = True
    return frame


@st.cache_data(show_spinner=False, max_entries=32)
def analyse_run(root: str, run_id: str, aliases: tuple = ()) -> dict[str, Any]:
    """Episodes, events, invariant results and headline summary of a stored run."""
    from regime_dash.analysis.episodes import find_all, summary
    from regime_dash.analysis.invariants import run_checks

    frame = load_run(root, run_id, aliases)
    episodes, events, skipped = find_all(frame)
    return {"episodes": episodes, "events": events, "skipped": skipped,
            "checks": [c.to_dict() | {"missing": list(c.missing)} for c in run_checks(frame)],
            "summary": summary(frame)}


@st.cache_data(show_spinner=False, ttl=60)
def engine_status() -> dict[str, str | None]:
    """``{engine: None | why it cannot run}``; probed once a minute at most."""
    from regime_dash.engine import engine_status as probe

    return probe()


@st.cache_data(show_spinner=False, max_entries=16)
def replay(source_key: str, _stream, config: dict[str, Any], engine: str) -> tuple[pd.DataFrame, float, str]:
    """``(frame, seconds, engine)`` of a replay of ``_stream`` (identified by ``source_key``)."""
    from regime_dash.engine import replay_trajectory

    traj = replay_trajectory(_stream, RegimeConfig(**config), engine=engine)
    return traj.frame, traj.seconds, traj.engine


@st.cache_data(show_spinner=False, max_entries=8)
def signal_figure(key: str, _runs: dict, x: str, smoothing: float, x_range: tuple | None = None,
                  height: int = 1400):
    """:func:`regime_dash.figures.signal_panels` of ``_runs`` (identified by ``key``)."""
    from regime_dash.figures import signal_panels

    return signal_panels(_runs, x=x, smoothing=smoothing, x_range=x_range, height=height)


def runs_frame(store) -> pd.DataFrame:
    """The store's runs as a frame (newest first), one row per run; not cached (the list changes)."""
    rows = [dict(r) if isinstance(r, dict) else dict(vars(r)) for r in store.list_runs()]
    frame = pd.DataFrame(rows)
    if frame.empty:
        return pd.DataFrame(columns=["run_id", "name"])
    return frame.reset_index(drop=True)


def sample_files() -> list:
    """The diag files under ``data/samples`` of the checkout (the one-click start)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "data" / "samples"
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir()
                  if p.is_file() and (p.name.endswith(".jsonl") or p.name.endswith(".jsonl.gz")))
