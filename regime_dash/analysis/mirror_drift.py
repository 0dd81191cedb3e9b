"""The fused controller path against the single one on the same inputs: the twin replay and the finding.

A replay on the fused path (``controllers="fused"``) with a mirror switch off
(``fused_mirror_tau_boost`` or ``fused_mirror_resurrection``) is a trainer whose
``rl_fused_controllers`` copy never got the F5 or F2 block. What that costs shows
only against the single path's replay of the same stream and config: this module
replays that twin and hands both frames to the finding
:func:`~regime_dash.analysis.findings.fused_mirror_drift`. The CLI's
``replay --controllers fused`` and the Replay page call it; ``check FUSED --single
SINGLE`` takes the two frames from files instead.
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from regime_dash.analysis.findings import Finding, fused_mirror_drift
from regime_dash.core.config import MIRROR_SWITCHES, RegimeConfig
from regime_dash.engine import check_controllers, replay
from regime_dash.core.streams import Stream


def mirrors_off(config: RegimeConfig) -> tuple[str, ...]:
    """The mirror switches ``config`` turns off (none: the fused path is the single one, bit for bit)."""
    return tuple(name for name in MIRROR_SWITCHES if not getattr(config, name))


def needs_single_twin(config: RegimeConfig, controllers: str) -> bool:
    """Whether a replay on ``controllers`` under ``config`` can part from the single path: fused, a mirror off."""
    return check_controllers(controllers) == "fused" and bool(mirrors_off(config))


def single_twin(fused: pd.DataFrame, stream: Stream, config: RegimeConfig, engine: str = "reference",
                **options: Any) -> tuple[pd.DataFrame, list[Finding]]:
    """The single path's replay of ``stream`` under ``config`` and the finding against ``fused``.

    Parameters
    ----------
    fused
        The fused path's frame of the same ``stream`` and ``config``.
    engine, options
        As for :func:`regime_dash.engine.replay` (the same engine gives the same bits; any does).

    Returns
    -------
    (single frame, ``fused_mirror_drift`` findings: one where the paths part, none where they agree)
    """
    single = replay(stream, config, engine=engine, controllers="single", **options)
    return single, fused_mirror_drift(fused, single)
