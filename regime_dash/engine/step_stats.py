"""Phase 1 of the fast engine, as its CPU half (``fast``) and its GPU halves (``fast_gpu``,
``staged_phase1``) all hand it over: one record, imported by each, so neither half imports
the other for it."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StepStats:
    """Phase 1 of a stream: what the state machine needs from the [T, b] arrays.

    Attributes
    ----------
    sums
        float32 [T, 3]: Σr, Σr², max|r| of each step, in rl_popart_normalize's order.
    flat
        int32 [T]: accounts with zero lots (rl_regime_flat_count).
    """

    sums: np.ndarray
    flat: np.ndarray
