"""``prepare(stream, engine, options)``: a stream made ready for many replays and sweeps of one engine.

:func:`prepare` checks everything a replay of the stream needs that does not depend on the
config, once: the stream, the engine and its options, the slot layout, the ``isv``
overrides, a phase 1 handed in. The :class:`Prepared` it returns holds the stream's
phase 1 (the fast engine's :class:`~regime_dash.engine.step_stats.StepStats`, computed
on first need and kept: it does not depend on the config) and offers
:meth:`Prepared.replay` (one config, a :class:`Trajectory`) and :meth:`Prepared.sweep`
(many configs, a :class:`~regime_dash.engine.sweep.SweepResult`). Callers never build
phase 1 or set a pass off by hand: the options say what the replays keep.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np
import pandas as pd

from regime_dash.core.config import RegimeConfig
from regime_dash.core.slots import DEFAULT_LAYOUT, SlotLayout
from regime_dash.core.streams import StepStream, Stream
from regime_dash.diag import catalogue as diag
from regime_dash.engine.backends import Backend, backend
from regime_dash.engine.logged_inputs import input_columns
from regime_dash.engine.options import ReplayOptions, checked_options
from regime_dash.engine.start import StartState, initial_isv
from regime_dash.engine.step_stats import StepStats
from regime_dash.errors import StreamError, ValidationError

if TYPE_CHECKING:
    from regime_dash.engine.sweep import ShardScheduler, SweepResult


@dataclass
class Trajectory:
    """A replay's full output.

    Attributes
    ----------
    frame
        One row per step: ``step``, ``fold``, ``phase`` and the dotted diag columns.
    rewards_normalized
        float32 [T, b], PopArt-normalized rewards (rl_popart_normalize's Pass 3); None where the
        normalize pass is left out (``ReplayOptions(normalized=False)``).
    v_pred_corrected
        float32 [T, b] after rl_popart_v_correct, when the stream has ``v_pred`` and the pass ran.
    isv
        The ISV buffer after the last step.
    engine
        The backend that ran.
    seconds
        Wall time of the backend's work (phase 1 included where this replay computed it).
    """

    frame: pd.DataFrame
    rewards_normalized: np.ndarray | None
    v_pred_corrected: np.ndarray | None
    isv: np.ndarray
    engine: str
    seconds: float


@runtime_checkable
class LightSource(Protocol):
    """A stream held light (:class:`regime_dash.engine.file_phase1.LightFile`): its per-step fields
    (``inputs``), its phase 1 (``stats``) and the whole stream on demand (``load()``)."""

    inputs: StepStream
    stats: StepStats

    def load(self) -> Stream:
        """The whole stream."""


def prepare(stream: Stream | StepStream | LightSource, engine: str = "auto", options: ReplayOptions | None = None,
            *, isv: Mapping[str, float] | None = None, layout: SlotLayout | None = None,
            stats: StepStats | None = None) -> "Prepared":
    """``stream`` made ready for replays and sweeps on ``engine`` under ``options``.

    Parameters
    ----------
    stream
        A :class:`Stream`; a :class:`StepStream` (its per-step fields only) on engine ``fast`` given
        its phase 1; or a light source (a stream file held light), whose per-step fields and phase 1
        the fast engine replays and whose whole stream the others load.
    engine
        ``reference``, ``cuda``, ``fast`` or ``auto`` (the first that runs here of fast, cuda, reference).
    options
        The :class:`ReplayOptions` every replay runs with (the defaults if None).
    isv
        Initial slot values by slot name, applied after bootstrap and config.
    layout
        Slot layout (e.g. from :func:`regime_dash.core.slots.import_rust`); the default registry if None.
    stats
        For engine ``fast``: the stream's phase 1, when the caller has it (a file read block by block).

    Raises
    ------
    StreamError
        Not a stream; a StepStream on an engine that reads the [T, b] arrays, or without its phase 1.
    ValidationError
        An unknown engine, an option the engine does not take, a bad ``isv`` override, a
        ``stats`` off engine ``fast`` or not of the stream's steps.
    """
    options = checked_options(options)
    chosen = backend(engine)
    chosen.check(options)
    if isinstance(stream, LightSource) and not isinstance(stream, (Stream, StepStream)):
        stream, stats = (stream.load(), None) if chosen.reads_batch else (stream.inputs, stream.stats)
    _check_stream(stream, chosen)
    layout = (layout or DEFAULT_LAYOUT).validate()
    initial_isv(RegimeConfig(), isv, layout)  # the overrides checked once, not per config
    _check_phase1(stream, chosen, stats)
    return Prepared(stream, chosen, options, layout, None if isv is None else dict(isv), stats)


def _check_stream(stream: Any, chosen: Backend) -> None:
    if not isinstance(stream, (Stream, StepStream)):
        raise StreamError(f"stream must be a regime_dash.Stream, got {type(stream).__name__}",
                          field="stream", value=type(stream).__name__)
    if isinstance(stream, StepStream) and chosen.reads_batch:
        raise StreamError(f"a StepStream holds no [T, b] rewards and lots: engine {chosen.name!r} replays them; "
                          "load the whole stream for it", field="stream", value=chosen.name)


def _check_phase1(stream: Stream | StepStream, chosen: Backend, stats: Any) -> None:
    """A StepStream needs its phase 1; a given phase 1 is a ``StepStats`` of the stream's steps, for engine
    ``fast``."""
    if isinstance(stream, StepStream) and stats is None:
        raise StreamError("a StepStream holds no [T, b] rewards and lots to compute phase 1 from: give its "
                          "phase 1 (stats=), or load the whole stream", field="stats", value=None)
    if stats is None:
        return
    if chosen.name != "fast":
        raise ValidationError(f"stats= (phase 1) applies to engine 'fast' only, not {chosen.name!r}",
                              field="stats", value=chosen.name)
    if not isinstance(stats, StepStats):
        raise ValidationError(f"stats must be the stream's phase 1 (a StepStats), got {type(stats).__name__}",
                              field="stats", value=type(stats).__name__)
    if np.shape(stats.sums) != (stream.steps, 3) or np.shape(stats.flat) != (stream.steps,):
        raise ValidationError(f"stats cover sums {np.shape(stats.sums)} and flat {np.shape(stats.flat)}, "
                              f"the stream has {stream.steps} steps", field="stats", value=np.shape(stats.flat))


def _checked_config(config: Any) -> RegimeConfig:
    config = RegimeConfig() if config is None else config
    if not isinstance(config, RegimeConfig):
        raise ValidationError(f"config must be a RegimeConfig, got {type(config).__name__}",
                              field="config", value=type(config).__name__)
    return config


class Prepared:
    """A checked stream, its engine and options, and its phase 1 once computed (see :func:`prepare`).

    Safe to share between threads (a page's reruns): phase 1 is computed once, under a lock.
    """

    def __init__(self, stream: Stream | StepStream, chosen: Backend, options: ReplayOptions, layout: SlotLayout,
                 isv: Mapping[str, float] | None, stats: StepStats | None):
        self.stream, self.backend, self.options, self.layout, self.isv = stream, chosen, options, layout, isv
        self._stats, self._tried = stats, stats is not None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        """What a worker of a sweep gets: everything but the lock (a fresh one is made there)."""
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def engine(self) -> str:
        """The engine that runs: ``reference``, ``cuda`` or ``fast``."""
        return self.backend.name

    @property
    def steps(self) -> int:
        """T, the stream's steps."""
        return self.stream.steps

    @property
    def accounts(self) -> int:
        """b, the stream's accounts."""
        return self.stream.accounts

    def held_phase1(self) -> StepStats | None:
        """Phase 1 as held now (given to :func:`prepare`, or computed by an earlier replay); nothing is computed."""
        with self._lock:
            return self._stats

    def phase1(self) -> StepStats | None:
        """The stream's phase 1, computed once on first need and kept; None where the engine holds none
        (reference, cuda, the fast GPU replay that normalizes the batch it uploads)."""
        with self._lock:
            if not self._tried:
                self._stats = self.backend.phase1(self.stream, self.options)
                self._tried = True
            return self._stats

    def with_options(self, **changes: Any) -> "Prepared":
        """The same stream on the same engine under ``self.options.replace(**changes)`` (checked by the engine),
        sharing this one's phase 1 (computed here first if it is not yet: it does not depend on the options
        but the device, and every device's has the same bits)."""
        options = self.options.replace(**changes)
        self.backend.check(options)
        return Prepared(self.stream, self.backend, options, self.layout, self.isv, self.phase1())

    def replay(self, config: RegimeConfig | None = None) -> Trajectory:
        """The replay of the stream under ``config`` (the spec's defaults if None).

        Raises
        ------
        StreamError
            The stream is a StepStream and the options ask for the normalize pass (it reads the batch).
        """
        config = _checked_config(config)
        if isinstance(self.stream, StepStream) and self.options.normalized:
            raise StreamError("a StepStream holds no [T, b] rewards to normalize: replay it with "
                              "ReplayOptions(normalized=False) (the frame alone), or load the whole stream",
                              field="stream", value="normalized")
        start = StartState.of(config, self.isv, self.layout)
        t0 = time.perf_counter()
        stats = self.phase1()
        out = self.backend.run(self.stream, start, self.options, stats)
        seconds = time.perf_counter() - t0
        frame = self._frame(out.snapshot, out.flat, config, stats)
        return Trajectory(frame, out.rewards_normalized, out.v_pred_corrected, out.isv, self.engine, seconds)

    def _frame(self, snapshot: np.ndarray, flat: np.ndarray, config: RegimeConfig,
               stats: StepStats | None) -> pd.DataFrame:
        controllers = self.options.controllers
        frame = diag.frame_from_snapshot(snapshot, flat, self.stream.accounts, self.stream.step, self.stream.boundary,
                                         config, fused=controllers == "fused")
        if self.options.log_inputs:
            for col, values in input_columns(self.stream, None if stats is None else stats.sums).items():
                frame[col] = values
        frame.attrs["layout_fingerprint"] = self.layout.fingerprint_hex()
        frame.attrs["engine"] = self.engine
        frame.attrs["controllers"] = controllers
        return frame

    def sweep(self, configs: Sequence[RegimeConfig] | Mapping[str, Any], *, keep: Sequence[int] | None = None,
              progress: Callable[[int, int], None] | None = None, chunk_size: int | None = None,
              base: RegimeConfig | None = None,
              scheduler: "ShardScheduler | None" = None) -> "SweepResult":
        """Replay the stream under every config and summarize each replay in one row.

        Parameters
        ----------
        configs
            A grid ``{field: values}`` (checked and built as NumPy columns, no config object per
            scenario) on top of ``base``, or a list of :class:`RegimeConfig`. Either form gives the same table.
        keep
            Config indices whose full trajectories to return.
        progress
            Called as ``progress(done, total)`` after each chunk (fast), config (reference, cuda)
            or, with a scheduler, shard.
        chunk_size
            Scenarios per chunk; :data:`regime_dash.engine.sweep_shards.CPU_CHUNK` on the CPU, all of a
            shard in one launch on the GPU, if None.
        scheduler
            None (in-process) or a :class:`~regime_dash.engine.sweep.ShardScheduler` (one contiguous shard
            per worker; :func:`regime_dash.runs.sweeps.sweep` takes ``"local"``, an address or a client).

        Raises
        ------
        ConfigError
            Bad configs, or none. ``ValidationError``: a bad ``keep`` or ``chunk_size``.
        """
        from regime_dash.engine.sweep import SweepPlan

        plan = SweepPlan.of(self, configs, keep=keep, chunk_size=chunk_size, base=base)
        return plan.run(progress, scheduler)


__all__ = ["LightSource", "Prepared", "Trajectory", "prepare"]
