"""PearlCStream: per-step pre-clamp Adam update magnitudes of one parameter group."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from regime_dash.modules.base import ModuleStream
from regime_dash.core.streams import ArraySpec


@dataclass(frozen=True, eq=False)
class PearlCStream(ModuleStream):
    """Inputs of a Pearl C replay: ``updates`` float32 [T, n] (one row per step), fold ``boundary``, ``step``."""

    SCHEMA = {
        "updates": ArraySpec(np.float32, 2, "pre-clamp update of each parameter, per step"),
        "boundary": ArraySpec(np.bool_, 1, "fold reset before this step (the EMA state goes to 0)", default=False),
        "step": ArraySpec(np.int64, 1, "trainer step"),
    }

    updates: np.ndarray
    boundary: np.ndarray
    step: np.ndarray

