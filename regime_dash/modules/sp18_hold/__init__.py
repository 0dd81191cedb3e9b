"""SP18 Hold attractor fix as a replayable controller module: the D-leg and the B-leg.

D-leg: ``compute_sp18_hold_opportunity_cost`` (the per-bar Hold reward, T1), the
``hold_reward_cap_update`` producer (POS = p99|step_ret| of Long/Short closes ×
1.5, NEG = −2 × POS, bounds, first-observation bootstrap; T5; slots 483/484) and
a replay of a synthetic bar stream (T3, T4) comparing Hold's reward width to
Long/Short's. B-leg: the per-branch DDQN bootstrap (dir [0..4), mag [4..7),
ord [7..10), urg [10..13); T8, T9) and the TD(λ) return kernel with q_next as an
input, replayed with q_next = rewards (the defect) and with the target-Q
bootstrap (T10: mean |TD error| ratio in [0.5, 5.0]).
Kernels: ``kernels/sp18_*.cu``; twins: :mod:`.twin`. :func:`coverage` says how each logged
field of a frame is checked.
"""
from __future__ import annotations

from regime_dash.modules.base import ControllerModule
from regime_dash.modules.sp18_hold.config import Sp18Config
from regime_dash.modules.sp18_hold.rederive import coverage
from regime_dash.modules.sp18_hold.stream import Sp18Stream

MODULE = ControllerModule.of_package(__name__, title="SP18 Hold reward & TD(λ) bootstrap", doc=__doc__, stream_type=Sp18Stream,
                                     config_type=Sp18Config)

__all__ = ["MODULE", "Sp18Config", "Sp18Stream", "coverage"]
