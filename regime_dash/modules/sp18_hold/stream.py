"""Sp18Stream: a synthetic bar stream, next-bar log returns and the policy's chosen directions."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from regime_dash.modules.base import ModuleStream
from regime_dash.core.streams import ArraySpec


@dataclass(frozen=True, eq=False)
class Sp18Stream(ModuleStream):
    """Inputs of an SP18 replay (T bars).

    ``next_log_return`` is the design's tgt[1] (lookahead-clean next-bar log
    return), ``vol_proxy`` its vol normaliser, ``action_dir`` the chosen
    direction (0 Short, 1 Hold, 2 Long, 3 Flat), ``boundary`` a fold reset.
    """

    SCHEMA = {
        "next_log_return": ArraySpec(np.float32, 1, "next-bar log return (tgt[1])"),
        "vol_proxy": ArraySpec(np.float32, 1, "vol normaliser of the bar (> 0)", lo=0.0),
        "action_dir": ArraySpec(np.int32, 1, "chosen direction: 0 Short, 1 Hold, 2 Long, 3 Flat", lo=0, hi=3),
        "boundary": ArraySpec(np.bool_, 1, "fold reset before this bar", default=False),
        "step": ArraySpec(np.int64, 1, "bar / trainer step"),
    }

    next_log_return: np.ndarray
    vol_proxy: np.ndarray
    action_dir: np.ndarray
    boundary: np.ndarray
    step: np.ndarray

