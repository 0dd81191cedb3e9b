"""Replay a scenario, a stream file or a closed-loop live run, and write its diag: what ``replay`` does.

:func:`replay_source` makes the frame a request asks for: a scenario's stream generated on a
thread while the engine loads, phase 1 made block by block as the stream is
(:mod:`regime_dash.usecases.scenario_stream`); the engine chosen against the fast engine's
compile (:func:`regime_dash.engine.warm.choose_engine`: ``auto`` answers on the reference when
that is sooner), a compile announced on ``notices`` while it runs; the inputs logged so every
output can be re-derived; on the fused controller path with a mirror switch off (or when asked),
the single path replayed beside it and the finding ``fused_mirror_drift``.
:func:`replay_to_file` adds the ``--out`` (and ``--single-out``) writing.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable

from regime_dash.errors import ValidationError
from regime_dash.usecases.frames import check_out, write_frame
from regime_dash.usecases.sources import StreamSource
from regime_dash.usecases.warmup import announced, fallback_notice

if TYPE_CHECKING:  # the annotations only: pandas loads with the replay
    import pandas as pd

    from regime_dash.core.config import RegimeConfig
    from regime_dash.engine import Prepared, Trajectory

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class ReplayRequest:
    """A replay of ``source`` under ``config`` on ``engine`` (``auto``: see :func:`replay_source`) and the
    risk-stack path ``controllers``; ``single_twin``: also replay the single path (a fused replay's twin)."""

    source: StreamSource
    config: RegimeConfig
    engine: str = "auto"
    controllers: str = "single"
    single_twin: bool = False


@dataclass
class ReplayOutcome:
    """A replay's frame; with the twin, the single path's frame and the ``fused_mirror_drift`` findings."""

    frame: pd.DataFrame
    single: pd.DataFrame | None = None
    findings: list = field(default_factory=list)
    seconds: float = 0.0

    @property
    def engine(self) -> str:
        return str(self.frame.attrs.get("engine", "?"))


def replay_source(request: ReplayRequest, notices: IO[str] | None = None) -> ReplayOutcome:
    """The frame ``request`` asks for (no file written).

    ``notices`` gets what a person waiting should know: that ``auto`` answers on the reference
    while the fast engine is not compiled, or that a compile runs (and, every few seconds, that it
    still does); None: nothing is said.

    Raises
    ------
    ValidationError
        The fused path on a closed-loop live run (it runs the single controllers).
    """
    t0 = time.perf_counter()
    source = request.source
    if source.simulate is not None:
        return ReplayOutcome(_simulated(request), seconds=time.perf_counter() - t0)
    stream, stats = _stream_and_phase1(source, request.engine)
    from regime_dash.engine import warm

    engine = warm.choose_engine(request.engine, stream.steps)
    notice = fallback_notice(request.engine, engine, stream.steps)
    if notice is not None and notices is not None:
        print(notice, file=notices, flush=True)
    with announced(engine, notices):
        outcome = _replayed(request, stream, engine, stats if engine == "fast" else None)
    outcome.seconds = time.perf_counter() - t0
    return outcome


def _simulated(request: ReplayRequest) -> pd.DataFrame:
    from regime_dash.sources.simulator import simulate

    if request.controllers != "single":
        raise ValidationError("--controllers fused replays a --scenario or a --stream; --simulate runs the "
                              "single controllers", field="controllers", value=request.controllers)
    source = request.source
    return simulate(source.simulate, steps=source.steps, accounts=source.accounts, seed=source.seed,
                    config=request.config, engine=request.engine).frame()


def _stream_and_phase1(source: StreamSource, engine: str) -> tuple[Any, Any]:
    """``(stream, phase 1 or None)``: a scenario made on a thread, its phase 1 made block by block where the
    fast CPU engine is ready; a file read whole (its phase 1 is the engine's to make)."""
    if source.scenario is not None:
        from regime_dash.usecases.scenario_stream import generated

        return generated(source.scenario, engine, seed=source.seed, steps=source.steps, accounts=source.accounts)
    return source.load(), None


def _replayed(request: ReplayRequest, stream: Any, engine: str, stats: Any) -> ReplayOutcome:
    """The replay, its inputs logged so every output can be re-derived (check's rederive.*), and its single
    twin where asked for or where the fused path can part from it."""
    from regime_dash.analysis.mirror_drift import needs_single_twin, single_twin
    from regime_dash.engine import ReplayOptions, prepare

    options = ReplayOptions(log_inputs=True, controllers=request.controllers, normalized=False)
    prepared = prepare(stream, engine, options, stats=stats)
    frame = prepared.replay(request.config).frame
    if not (request.single_twin or needs_single_twin(request.config, request.controllers)):
        return ReplayOutcome(frame)
    held = prepared.held_phase1()  # the twin replays the same inputs: its phase 1 is this one's
    single, findings = single_twin(frame, stream, request.config, engine, log_inputs=True,
                                   **({} if held is None else {"stats": held}))
    return ReplayOutcome(frame, single, findings)


def replay_to_file(request: ReplayRequest, out: str | Path, single_out: str | Path | None = None,
                   notices: IO[str] | None = None, progress: Callable[[str], Progress | None] | None = None
                   ) -> ReplayOutcome:
    """:func:`replay_source`, its frame written to ``out`` (``.jsonl`` or ``.parquet``) and, given
    ``single_out``, the single path's to it (``request`` then asks for the twin).

    ``progress(file name)`` gives the progress callback of a diag.jsonl's write, or None.

    Raises
    ------
    ValidationError
        ``out`` or ``single_out`` of an unknown suffix (before anything runs); ``single_out`` off the
        fused path.
    """
    out = check_out(out)
    if single_out is not None:
        if request.controllers != "fused":
            raise ValidationError("--single-out needs --controllers fused (the single path is what --out writes)",
                                  field="single_out", value=str(single_out))
        single_out = check_out(single_out, "--single-out")
        request = ReplayRequest(request.source, request.config, request.engine, request.controllers, True)
    outcome = replay_source(request, notices)
    _written(outcome.frame, out, progress)
    if single_out is not None and outcome.single is not None:
        _written(outcome.single, single_out, progress)
    return outcome


def _written(frame: pd.DataFrame, out: Path, progress: Callable[[str], Progress | None] | None) -> Path:
    bar = None if progress is None or out.suffix != ".jsonl" else progress(out.name)
    try:
        return write_frame(frame, out, progress=bar)
    finally:
        close = getattr(bar, "close", None)
        if close is not None:
            close()


def prepare_source(stream: Any, engine: str, layout: Any = None) -> Prepared:
    """A stream (a Stream, or a stream file held light) made ready for many what-if replays, sweeps and
    sensitivities on ``engine``, their frames all that is kept: on the fast engine only its per-step inputs and
    its phase 1 are read (a light file is never loaded whole; on a GPU only the [T]-sized inputs go up)."""
    from regime_dash.engine import ReplayOptions, prepare

    return prepare(stream, engine, ReplayOptions(normalized=False), layout=layout)


def what_if(prepared: Prepared, config: RegimeConfig, controllers: str = "single") -> Trajectory:
    """The replay of a prepared stream under ``config`` on the risk-stack path ``controllers`` (the
    prepared stream's phase 1 shared by both paths)."""
    if controllers != prepared.options.controllers:
        prepared = prepared.with_options(controllers=controllers)
    return prepared.replay(config)


__all__ = ["ReplayOutcome", "ReplayRequest", "prepare_source", "replay_source", "replay_to_file", "what_if"]
