"""The replay engines behind one typed interface: a :class:`Backend` class per engine, found by name.

Every backend takes the same already-checked inputs (a validated stream, a
:class:`~regime_dash.engine.start.StartState`, the :class:`~regime_dash.engine.options.ReplayOptions`
and, where it has one, the stream's phase 1) and returns a :class:`BackendOutput`. The
registry :data:`ENGINES` maps each engine's name to its class; a class imports its
engine's module only when it runs or is probed, so numba and cupy load only for the
engines that need them (``tests/test_import_isolation.py``).
"""
from __future__ import annotations

from typing import Any, ClassVar, NamedTuple, Protocol, runtime_checkable

import numpy as np

from regime_dash.engine.options import ReplayOptions
from regime_dash.engine.start import StartState
from regime_dash.engine.step_stats import StepStats
from regime_dash.errors import EngineUnavailable, ValidationError


class BackendOutput(NamedTuple):
    """What a backend's replay returns.

    Attributes
    ----------
    snapshot
        float32 [T, n]: the diag snapshot slots after each step.
    flat
        int32 [T]: accounts with zero lots (rl_regime_flat_count).
    rewards_normalized
        float32 [T, b] after rl_popart_normalize; None where the pass was left out.
    v_pred_corrected
        float32 [T, b] after rl_popart_v_correct, when the stream has ``v_pred`` and the pass ran.
    isv
        The ISV buffer after the last step.
    """

    snapshot: np.ndarray
    flat: np.ndarray
    rewards_normalized: np.ndarray | None
    v_pred_corrected: np.ndarray | None
    isv: np.ndarray


@runtime_checkable
class Backend(Protocol):
    """A replay engine.

    ``reads_batch`` says whether a replay reads the stream's [T, b] rewards and lots even
    given phase 1 (then a :class:`~regime_dash.core.streams.StepStream` cannot be replayed on it).
    """

    name: ClassVar[str]
    reads_batch: ClassVar[bool]

    def available(self) -> str | None:
        """None when this engine can run here, else why not."""

    def check(self, options: ReplayOptions) -> None:
        """Raise :class:`ValidationError` naming an option of ``options`` this engine does not take."""

    def phase1(self, stream: Any, options: ReplayOptions) -> StepStats | None:
        """The stream's phase 1 worth holding across replays under ``options``, or None (none to hold)."""

    def run(self, stream: Any, start: StartState, options: ReplayOptions,
            stats: StepStats | None = None) -> BackendOutput:
        """Replay ``stream`` from ``start``; ``stats`` is its phase 1 when held."""


def _refuse(name: str, options: ReplayOptions, *, device: bool = False, graph: bool = False) -> None:
    """Refuse the options engine ``name`` does not take: a device other than ``auto`` (unless ``device``),
    a CUDA graph (unless ``graph``)."""
    if not device and options.device != "auto":
        raise ValidationError(f"device={options.device!r} applies to engine 'fast' only, not {name!r}",
                              field="device", value=options.device)
    if not graph and options.graph:
        raise ValidationError(f"graph={options.graph!r} applies to engine 'cuda' only, not {name!r}",
                              field="graph", value=options.graph)


def _output(arrays: tuple, options: ReplayOptions) -> BackendOutput:
    """A backend's five arrays as its output; the [T, b] ones dropped when the options leave that pass out."""
    out = BackendOutput(*arrays)
    return out if options.normalized else out._replace(rewards_normalized=None, v_pred_corrected=None)


class ReferenceBackend:
    """``reference``: the NumPy float32 oracle, statement by statement like the ``.cu`` files."""

    name: ClassVar[str] = "reference"
    reads_batch: ClassVar[bool] = True

    def available(self) -> str | None:
        return None

    def check(self, options: ReplayOptions) -> None:
        _refuse(self.name, options)

    def phase1(self, stream: Any, options: ReplayOptions) -> StepStats | None:
        return None  # it reduces each step's batch as it steps

    def run(self, stream: Any, start: StartState, options: ReplayOptions,
            stats: StepStats | None = None) -> BackendOutput:
        from regime_dash.engine import reference

        return _output(reference.run(stream, start.isv0, start.boot, start.layout, start.snap_idx,
                                     controllers=options.controllers), options)


class CudaBackend:
    """``cuda``: the spec's kernels launched per step (``graph``: one step captured in a CUDA graph)."""

    name: ClassVar[str] = "cuda"
    reads_batch: ClassVar[bool] = True

    def available(self) -> str | None:
        from regime_dash.engine import cuda

        return cuda.available()

    def check(self, options: ReplayOptions) -> None:
        _refuse(self.name, options, graph=True)

    def phase1(self, stream: Any, options: ReplayOptions) -> StepStats | None:
        return None  # each step's kernels reduce its batch

    def run(self, stream: Any, start: StartState, options: ReplayOptions,
            stats: StepStats | None = None) -> BackendOutput:
        from regime_dash.engine import cuda

        return _output(cuda.run(stream, start.isv0, start.boot, start.layout, start.snap_idx, graph=options.graph,
                                controllers=options.controllers), options)


class FastBackend:
    """``fast``: the two-phase replay (phase 1, then the scalar scan), on the CPU (numba) or the GPU
    (``options.device``)."""

    name: ClassVar[str] = "fast"
    reads_batch: ClassVar[bool] = False

    def available(self) -> str | None:
        from regime_dash.engine import fast

        return fast.available()

    def check(self, options: ReplayOptions) -> None:
        _refuse(self.name, options, device=True)

    def on_gpu(self, options: ReplayOptions) -> bool:
        """Whether ``options.device`` runs the GPU half here (:class:`EngineUnavailable` for a GPU that is not)."""
        from regime_dash.engine import fast

        return fast.use_gpu(options.device)

    def phase1(self, stream: Any, options: ReplayOptions) -> StepStats | None:
        """On the CPU, phase 1 (the scan's input, and the logged sums); on the GPU, phase 1 of frame-only
        replays (each then uploads only the [T]-sized inputs); None where a GPU replay uploads the batch for
        the normalize pass anyway and reduces it on the device as it lands."""
        from regime_dash.engine import fast

        if not self.on_gpu(options):
            return fast.step_stats(stream)
        if options.normalized:
            return None
        from regime_dash.engine import fast_gpu

        return fast_gpu.step_stats(stream)

    def run(self, stream: Any, start: StartState, options: ReplayOptions,
            stats: StepStats | None = None) -> BackendOutput:
        from regime_dash.engine import fast

        return _output(fast.run(stream, start.isv0, start.boot, start.layout, start.snap_idx, device=options.device,
                                controllers=options.controllers, stats=stats, normalized=options.normalized),
                       options)


#: engine name -> its backend class, in the order listings show them.
ENGINES: dict[str, type[Backend]] = {"reference": ReferenceBackend, "cuda": CudaBackend, "fast": FastBackend}
#: Preference order of ``engine="auto"``.
AUTO_ORDER = ("fast", "cuda", "reference")


def engine_status() -> dict[str, str | None]:
    """``{engine: None if it can run here, else why not}``."""
    out: dict[str, str | None] = {}
    for name, cls in ENGINES.items():
        try:
            out[name] = cls().available()
        except ImportError as exc:
            out[name] = str(exc)
    return out


def resolve_engine(engine: str) -> str:
    """The backend ``engine`` names; ``auto`` is the first of :data:`AUTO_ORDER` that can run."""
    if engine == "auto":
        status = engine_status()
        return next(n for n in AUTO_ORDER if status.get(n) is None)
    if not isinstance(engine, str) or engine not in ENGINES:
        raise ValidationError(f"unknown engine {engine!r}; choose one of {['auto', *ENGINES]}",
                              field="engine", value=engine)
    return engine


def backend(name: str) -> Backend:
    """The backend of engine ``name`` (as :func:`resolve_engine` resolves it).

    Raises
    ------
    ValidationError
        ``name`` is no engine.
    """
    return ENGINES[resolve_engine(name)]()


def usable_backend(name: str) -> Backend:
    """:func:`backend`, or :class:`EngineUnavailable` saying why the engine cannot run here."""
    chosen = backend(name)
    try:
        reason = chosen.available()
    except ImportError as exc:
        reason = str(exc)
    if reason is not None:
        raise EngineUnavailable(f"engine {chosen.name!r} cannot run here: {reason}", engine=chosen.name)
    return chosen


__all__ = ["AUTO_ORDER", "ENGINES", "Backend", "BackendOutput", "CudaBackend", "FastBackend", "ReferenceBackend",
           "backend", "engine_status", "resolve_engine", "usable_backend"]
