"""regime-dash: diagnose the regime-observer risk stack of a GPU RL trading trainer.

The package is a functional core: engines, analysis, figures and parsing take
values and return values. Only ``regime_dash.ui`` (the Streamlit shell) imports
streamlit; nothing here imports plotly or cupy at import time.

The top-level names are loaded lazily (PEP 562): ``import regime_dash.ingest``
must not pay for numba and the engines, which only a replay or a sweep needs.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: Public name -> the module that defines it.
_EXPORTS = {
    "RegimeConfig": "regime_dash.core.config",
    "ReplayOptions": "regime_dash.engine",
    "Stream": "regime_dash.core.streams",
    "Trajectory": "regime_dash.engine",
    "prepare": "regime_dash.engine",
    "replay": "regime_dash.engine",
    "replay_trajectory": "regime_dash.engine",
    "sweep": "regime_dash.runs.sweeps",
}

__all__ = sorted(_EXPORTS)
__version__ = "0.1.0"

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from regime_dash.core.config import RegimeConfig
    from regime_dash.engine import ReplayOptions, Trajectory, prepare, replay, replay_trajectory
    from regime_dash.core.streams import Stream
    from regime_dash.runs.sweeps import sweep


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'regime_dash' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
