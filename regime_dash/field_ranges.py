"""The domain of every numeric RegimeConfig field: what a slider offers and a sensitivity sweeps.

The domains are ours (the spec gives defaults, not ranges): wide enough to show
each mechanism switched off or exaggerated, within RegimeConfig's checks. The
Replay page's sliders and :mod:`regime_dash.sensitivity` read this one table,
so a sensitivity sweeps exactly the values a user can set.
"""
from __future__ import annotations

#: Slider domain of every numeric RegimeConfig field: (min, max, step).
FIELD_RANGES: dict[str, tuple[float, float, float]] = {
    "max_duration": (0.0, 5000.0, 10.0),
    "eps_min": (0.0, 1.0, 0.01),
    "eps_max": (0.0, 1.0, 0.01),
    "n_recovery": (0.0, 2000.0, 10.0),
    "tau_boost_factor": (1.0, 5.0, 0.05),
    "tau_boost_window": (0.0, 2000.0, 10.0),
    "tail_sigma_threshold": (0.5, 10.0, 0.1),
    "envelope_decay_alpha": (0.001, 1.0, 0.001),
    "popart_alpha": (0.0001, 0.1, 0.0001),
    "transition_steps": (0.0, 5000.0, 10.0),
    "transition_decay_steps": (0.0, 5000.0, 10.0),
    "safety_frac_defensive": (0.0, 1.0, 0.01),
    "safety_frac_normal": (0.0, 1.0, 0.01),
    "tau_min": (0.0, 1.0, 0.01),
    "kelly_cap": (0.05, 2.0, 0.05),
}

__all__ = ["FIELD_RANGES"]
