"""Which config fields move which summary metrics of a stream: what ``sensitivity`` and the Replay page's
Sensitivity tab do (:mod:`regime_dash.runs.sensitivity`)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

from regime_dash.usecases.sources import StreamSource

if TYPE_CHECKING:
    from regime_dash.core.config import RegimeConfig
    from regime_dash.engine import Prepared
    from regime_dash.runs.sensitivity import SensitivityResult

Progress = Callable[[float, str], None]


def sensitivity_prepared(prepared: Prepared, base: RegimeConfig | None = None, *, fields: Sequence[str] | None = None,
                         progress: Progress | None = None, **sizes: int) -> SensitivityResult:
    """The sensitivity of a prepared stream around ``base`` (every sweep of it shares the stream's phase 1);
    ``sizes``: ``points``, ``pair_fields``, ``pair_points`` (:func:`regime_dash.runs.sensitivity.prepared_sensitivity`)."""
    from regime_dash.runs.sensitivity import prepared_sensitivity

    return prepared_sensitivity(prepared, base, fields=fields, progress=progress, **sizes)


def sensitivity_source(source: StreamSource, base: RegimeConfig | None = None, *, engine: str = "auto",
                       device: str = "auto", fields: Sequence[str] | None = None, progress: Progress | None = None,
                       **sizes: int) -> SensitivityResult:
    """The sensitivity of the stream ``source`` names (a closed-loop live run runs under ``base``) on ``engine``
    (``auto``: fast where it runs, else reference; ``device`` for fast only)."""
    from regime_dash.engine import ReplayOptions, prepare
    from regime_dash.usecases.sweep import engine_for_sweep

    stream = source.load(base)
    options = ReplayOptions(device=device if engine in ("auto", "fast") else "auto", normalized=False)
    prepared = prepare(stream, engine_for_sweep(engine), options)
    return sensitivity_prepared(prepared, base, fields=fields, progress=progress, **sizes)


__all__ = ["sensitivity_prepared", "sensitivity_source"]
