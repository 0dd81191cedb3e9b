"""A live run, step by step (``replay --live``, the Live page): the closed loop of a simulator preset, or a
scenario's or a stream file's inputs played open loop (:mod:`regime_dash.runs.live`)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from regime_dash.usecases.sources import StreamSource

if TYPE_CHECKING:
    from regime_dash.core.config import RegimeConfig
    from regime_dash.core.streams import Stream
    from regime_dash.runs.live import LiveRun


def stream_live_run(stream: Stream, config: RegimeConfig, engine: str = "auto", label: str = "stream") -> LiveRun:
    """A live run playing ``stream``'s inputs open loop under ``config`` on ``engine`` (named ``label``), not
    started."""
    from regime_dash.runs.live import LiveRun

    return LiveRun.of_stream(stream, config, engine=engine, source=label)


def simulator_live_run(preset: str, config: RegimeConfig, *, accounts: int | None = None, seed: int = 0,
                       steps: int | None = None, engine: str = "auto", label: str | None = None
                       ) -> tuple[LiveRun, int]:
    """``(the run, its steps)``: the closed loop of simulator preset ``preset`` under ``config`` for ``steps``
    steps of its schedule (the preset's, and its accounts, where None), not started; it ends with its schedule."""
    from regime_dash.runs.live import LiveRun
    from regime_dash.sources.simulator import PRESETS, Simulator

    chosen = PRESETS[preset]
    steps = chosen.steps if steps is None else steps
    sim = Simulator(accounts=chosen.accounts if accounts is None else accounts, seed=seed, config=config,
                    market=chosen.market, schedule=chosen.schedule(steps), engine=engine)
    return LiveRun.of_simulator(sim, source=label or f"simulate:{preset}", steps=steps), steps


def live_run(source: StreamSource, config: RegimeConfig, engine: str = "auto") -> tuple[LiveRun, int]:
    """``(the run, its steps)``: the live run of ``source`` under ``config`` on ``engine``, not started."""
    if source.simulate is None:
        stream = source.load()
        return stream_live_run(stream, config, engine, source.label), stream.steps
    return simulator_live_run(source.simulate, config, accounts=source.accounts, seed=source.seed,
                              steps=source.steps, engine=engine, label=source.label)


__all__ = ["live_run", "simulator_live_run", "stream_live_run"]
