"""A live run of a source, step by step (``replay --live``): the closed loop of a simulator preset, or a
scenario's or a stream file's inputs played open loop (:mod:`regime_dash.runs.live`)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from regime_dash.usecases.sources import StreamSource

if TYPE_CHECKING:
    from regime_dash.core.config import RegimeConfig
    from regime_dash.runs.live import LiveRun


def live_run(source: StreamSource, config: RegimeConfig, engine: str = "auto") -> tuple[LiveRun, int]:
    """``(the run, its steps)``: :class:`~regime_dash.runs.live.LiveRun` of ``source`` under ``config`` on
    ``engine``, not started."""
    from regime_dash.runs.live import LiveRun

    if source.simulate is None:
        stream = source.load()
        return LiveRun.of_stream(stream, config, engine=engine, source=source.label), stream.steps
    from regime_dash.sources.simulator import PRESETS, Simulator

    preset = PRESETS[source.simulate]
    steps = preset.steps if source.steps is None else source.steps
    sim = Simulator(accounts=preset.accounts if source.accounts is None else source.accounts, seed=source.seed,
                    config=config, market=preset.market, schedule=preset.schedule(steps), engine=engine)
    return LiveRun.of_simulator(sim, source=source.label, steps=steps), steps


__all__ = ["live_run"]
