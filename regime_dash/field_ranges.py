"""The domain of every numeric RegimeConfig field: what a slider offers and a sensitivity sweeps.

A view of :class:`regime_dash.config.RegimeConfig`'s field declarations (its
:func:`~regime_dash.params.param` records), kept for the pages and
:mod:`regime_dash.sensitivity`, which read ``(min, max, step)`` by field name: a
sensitivity sweeps exactly the values a user can set, and the Replay and
Controllers pages offer the same ranges.
"""
from __future__ import annotations

from regime_dash.config import RegimeConfig

#: Slider domain of every numeric RegimeConfig field: (min, max, step), in declaration order.
FIELD_RANGES: dict[str, tuple[float, float, float]] = {
    s.name: (float(s.lo), float(s.hi), float(s.step)) for s in RegimeConfig.field_specs() if s.kind != "bool"}

__all__ = ["FIELD_RANGES"]
