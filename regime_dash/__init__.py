"""regime-dash: diagnose the regime-observer risk stack of a GPU RL trading trainer.

The package is a functional core: engines, analysis, figures and parsing take
values and return values. Only ``regime_dash.ui`` (the Streamlit shell) imports
streamlit; nothing here imports plotly or cupy at import time.
"""
from regime_dash.config import RegimeConfig
from regime_dash.engine import Trajectory, replay, replay_trajectory
from regime_dash.streams import Stream
from regime_dash.sweep import sweep

__all__ = ["RegimeConfig", "Stream", "Trajectory", "replay", "replay_trajectory", "sweep"]
__version__ = "0.1.0"
