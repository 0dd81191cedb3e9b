"""Sweep a stream under a grid of configs, here or over dask: what ``sweep`` and the Replay page's Sweep tab do.

:func:`sweep_source` loads the stream a source names, picks the engine against the fast
engine's compile (a sweep replays the stream once per config, so the compile pays off sooner
than for one replay), announces a compile on ``notices``, and sweeps; :func:`sweep_prepared`
sweeps a stream already prepared (the page's, its phase 1 held) on ``scheduler``.
"""
from __future__ import annotations

from typing import IO, TYPE_CHECKING, Any, Callable, Mapping, Sequence

from regime_dash.usecases.sources import StreamSource
from regime_dash.usecases.warmup import announced

if TYPE_CHECKING:
    from regime_dash.core.config import RegimeConfig
    from regime_dash.engine import Prepared
    from regime_dash.engine.sweep import SweepResult

Progress = Callable[[int, int], None]


def engine_for_sweep(engine: str = "auto") -> str:
    """The engine a sweep runs on: ``auto`` is ``fast`` where it can run, else ``reference``
    (:func:`regime_dash.engine.sweep.sweep_engine`); any other name as it is, checked."""
    from regime_dash.engine.sweep import sweep_engine

    return sweep_engine(engine)


def sweep_prepared(prepared: Prepared, configs: Sequence[RegimeConfig] | Mapping[str, Any],
                   base: RegimeConfig | None = None, *, keep: Sequence[int] | None = None, scheduler: Any = None,
                   progress: Progress | None = None) -> SweepResult:
    """:meth:`Prepared.sweep <regime_dash.engine.prepared.Prepared.sweep>` of ``configs`` (a grid on ``base``,
    or a list), its arguments checked before ``scheduler`` (None, ``"local"``, an address, a client) connects."""
    from regime_dash.engine.sweep import SweepPlan
    from regime_dash.runs.sweeps import shard_scheduler

    plan = SweepPlan.of(prepared, configs, keep=keep, base=base)
    with shard_scheduler(scheduler) as shards:
        return plan.run(progress, shards)


def sweep_source(source: StreamSource, grid: Mapping[str, Any], base: RegimeConfig | None = None, *,
                 engine: str = "auto", device: str = "auto", scheduler: Any = None,
                 progress: Progress | None = None, notices: IO[str] | None = None) -> SweepResult:
    """The sweep of the stream ``source`` names over ``grid`` on top of ``base``.

    ``engine`` ``auto`` is ``fast`` once compiled (or when a compile pays off for this many replays), else
    ``reference``; ``device`` applies to ``fast`` only. ``notices`` is told of a compile (None: nothing said).
    """
    from regime_dash.engine import ReplayOptions, prepare, warm
    from regime_dash.engine.config_grid import ConfigGrid

    size = len(ConfigGrid.of(grid, base))
    stream = source.load()
    chosen = warm.choose_engine(engine, stream.steps * size, warm.SWEEP_KERNELS)
    options = ReplayOptions(device=device if chosen in ("auto", "fast") else "auto", normalized=False)
    with announced(chosen, notices, kernels=warm.SWEEP_KERNELS):
        prepared = prepare(stream, engine_for_sweep(chosen), options)
        return sweep_prepared(prepared, grid, base, scheduler=scheduler, progress=progress)


__all__ = ["engine_for_sweep", "sweep_prepared", "sweep_source"]
