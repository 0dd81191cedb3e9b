"""``replay(stream, config, engine=...)``: one entry point, several backends.

Like tsdownsample, the entry point validates once and then dispatches: every
backend receives the same already-checked inputs (a validated :class:`Stream`,
the initial ISV vector, the bootstrap vector used by boundary resets, the slot
layout and the snapshot slot indices) and returns the same five arrays, which
are turned into the frame here. Backends are listed in :data:`ENGINES`.
"""
from __future__ import annotations

import importlib
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from regime_dash.diag import catalogue as diag
from regime_dash.core.config import RegimeConfig
from regime_dash.engine.controllers import CONTROLLERS, check_controllers  # noqa: F401  (CONTROLLERS: public)
from regime_dash.errors import EngineUnavailable, StreamError, ValidationError
from regime_dash.core.slots import DEFAULT_LAYOUT, SlotLayout
from regime_dash.core.streams import StepStream, Stream

#: engine name -> "module:function" of its backend (imported on first use, so
#: that cupy and numba are only needed by the engines that use them).
ENGINES: dict[str, str] = {
    "reference": "regime_dash.engine.reference:run",
    "cuda": "regime_dash.engine.cuda:run",
    "fast": "regime_dash.engine.fast:run",
}
#: Preference order of ``engine="auto"``.
AUTO_ORDER = ("fast", "cuda", "reference")


@dataclass
class Trajectory:
    """A replay's full output.

    Attributes
    ----------
    frame
        One row per step: ``step``, ``fold``, ``phase`` and the dotted diag columns.
    rewards_normalized
        float32 [T, b], PopArt-normalized rewards (rl_popart_normalize's Pass 3).
    v_pred_corrected
        float32 [T, b] after rl_popart_v_correct, when the stream has ``v_pred``.
    isv
        The ISV buffer after the last step.
    engine
        The backend that ran.
    seconds
        Wall time of the backend call.
    """

    frame: pd.DataFrame
    rewards_normalized: np.ndarray
    v_pred_corrected: np.ndarray | None
    isv: np.ndarray
    engine: str
    seconds: float


def backend(name: str) -> Callable[..., Any]:
    """The ``run`` function of the backend ``name`` (as :func:`resolve_engine` resolves it).

    Every caller that runs a backend (:func:`replay_trajectory`, the live run's
    :class:`~regime_dash.engine.steppers.BackendStepper`) gets it here.

    Raises
    ------
    ValidationError
        ``name`` is no engine.
    EngineUnavailable
        The backend's module cannot be imported here.
    """
    name = resolve_engine(name)
    module, func = ENGINES[name].split(":")
    try:
        return getattr(importlib.import_module(module), func)
    except ImportError as exc:
        raise EngineUnavailable(f"engine {name!r} cannot run here: {exc}", engine=name) from exc


def engine_status() -> dict[str, str | None]:
    """``{engine: None if it can run here, else why not}``."""
    out: dict[str, str | None] = {}
    for name in ENGINES:
        try:
            probe = getattr(importlib.import_module(ENGINES[name].split(":")[0]), "available", None)
            out[name] = probe() if probe else None
        except ImportError as exc:
            out[name] = str(exc)
    return out


def resolve_engine(engine: str) -> str:
    """The backend ``engine`` names; ``auto`` is the first of :data:`AUTO_ORDER` that can run."""
    if engine == "auto":
        status = engine_status()
        return next(n for n in AUTO_ORDER if status.get(n) is None)
    if engine not in ENGINES:
        raise ValidationError(f"unknown engine {engine!r}; choose one of {['auto', *ENGINES]}",
                              field="engine", value=engine)
    return engine


def initial_isv(config: RegimeConfig, isv: Mapping[str, float] | None,
                layout: SlotLayout) -> tuple[np.ndarray, np.ndarray]:
    """(isv0, boot): the buffer a replay starts from, and the one boundaries re-bootstrap from.

    ``boot`` is the spec's bootstrap with ``config`` applied; ``isv0`` adds the
    caller's ``isv`` overrides on top, which a boundary does not bring back.
    """
    overrides = dict(isv or {})
    for name, value in overrides.items():
        if name not in layout:
            raise ValidationError(f"isv override names unknown slot {name!r}", field=name, value=value)
        if not isinstance(value, (int, float, np.floating, np.integer)) or not math.isfinite(float(value)):
            raise ValidationError(f"isv override {name}={value!r} is not a finite number",
                                  field=name, value=value)
    boot = layout.bootstrap_vector(config.to_isv())
    isv0 = boot.copy()
    for name, value in overrides.items():
        isv0[layout.index(name)] = np.float32(value)
    return isv0, boot


def snapshot_indices(layout: SlotLayout) -> np.ndarray:
    return np.array([layout.index(n) for n in diag.SNAPSHOT_SLOTS], dtype=np.int32)


def _fast_module():
    """The fast backend's module, imported as :func:`backend` imports it (by its name in :data:`ENGINES`)."""
    return importlib.import_module(ENGINES["fast"].split(":")[0])


def _fast_on_cpu(options: Mapping[str, Any]) -> bool:
    return not _fast_module().use_gpu(options.get("device", "auto"))


def input_columns(stream: Stream, sums: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The :data:`regime_dash.diag.catalogue.INPUT_COLUMNS` of ``stream``: its edge and τ inputs, and each step's
    (Σr, Σr², max|r|) in rl_popart_normalize's reduction order (:func:`.reference.block_reduce_stats`)."""
    sums = step_sums(stream) if sums is None else sums
    values = (stream.kelly_analytic, stream.tau_action, sums[:, 0], sums[:, 1], sums[:, 2])
    return {col: np.asarray(v, dtype=np.float32) for col, v in zip(diag.INPUT_COLUMNS.values(), values)}


def step_sums(stream: Stream) -> np.ndarray:
    """float32 [T, 3]: each step's (Σr, Σr², max|r|) in rl_popart_normalize's reduction order
    (:func:`.reference.block_reduce_stats`): the fast engine's phase-1 kernel where numba is
    installed (the same bits), else that NumPy function over blocks of steps."""
    from regime_dash.engine._jit import HAVE_NUMBA

    if HAVE_NUMBA:
        return _fast_module().step_stats(stream).sums
    from regime_dash.engine.reference import block_reduce_stats

    t_steps = stream.rewards.shape[0]
    sums = np.empty((t_steps, 3), dtype=np.float32)
    chunk = max(1, (1 << 22) // max(1, stream.rewards.shape[1]))  # ~16 MB of rewards at a time
    for a in range(0, t_steps, chunk):
        s, q, m = block_reduce_stats(np.asarray(stream.rewards[a:a + chunk], dtype=np.float32))
        sums[a:a + chunk, 0], sums[a:a + chunk, 1], sums[a:a + chunk, 2] = s, q, m
    return sums


def _check_step_stream(stream: StepStream, name: str, options: Mapping[str, Any]) -> None:
    """A :class:`StepStream` (no [T, b] arrays) replays only where nothing reads them: on the fast engine,
    given the stream's phase 1 (``stats``) and with the normalize pass left out (``normalized=False``)."""
    stats = options.get("stats")
    if name != "fast" or stats is None or options.get("normalized", True):
        raise StreamError("a StepStream holds no [T, b] rewards and lots: it replays only on engine 'fast' given "
                          "its phase 1 (stats=) and with normalized=False; load the whole stream for the rest",
                          field="stream", value=name)
    if np.shape(stats.sums) != (stream.steps, 3) or np.shape(stats.flat) != (stream.steps,):
        raise ValidationError(f"stats cover {np.shape(stats.flat)} steps, the stream has {stream.steps}",
                              field="stats", value=np.shape(stats.flat))


def replay_trajectory(stream: Stream, config: RegimeConfig | None = None, engine: str = "reference",
                      isv: Mapping[str, float] | None = None, layout: SlotLayout | None = None,
                      log_inputs: bool = False, controllers: str = "single", **options: Any) -> Trajectory:
    """Like :func:`replay`, returning the full :class:`Trajectory` (``rewards_normalized`` None where
    the normalize pass is left out)."""
    if isinstance(stream, StepStream):
        _check_step_stream(stream, resolve_engine(engine), options)
    elif not isinstance(stream, Stream):
        raise StreamError(f"stream must be a regime_dash.Stream, got {type(stream).__name__}",
                          field="stream", value=type(stream).__name__)
    config = RegimeConfig() if config is None else config
    if not isinstance(config, RegimeConfig):
        raise ValidationError(f"config must be a RegimeConfig, got {type(config).__name__}",
                              field="config", value=type(config).__name__)
    controllers = check_controllers(controllers)
    layout = (layout or DEFAULT_LAYOUT).validate()
    name = resolve_engine(engine)
    isv0, boot = initial_isv(config, isv, layout)
    run = backend(name)
    if log_inputs and name == "fast" and options.get("stats") is None and _fast_on_cpu(options):
        options["stats"] = _fast_module().step_stats(stream)  # phase 1 once: the scan's input and the logged sums
    t0 = time.perf_counter()
    snap, flat, normalized, v_pred, isv_end = run(stream, isv0, boot, layout, snapshot_indices(layout),
                                                  controllers=controllers, **options)
    seconds = time.perf_counter() - t0
    frame = diag.frame_from_snapshot(snap, flat, stream.accounts, stream.step, stream.boundary, config,
                                     fused=controllers == "fused")
    if log_inputs:
        stats = options.get("stats")
        for col, values in input_columns(stream, None if stats is None else stats.sums).items():
            frame[col] = values
    frame.attrs["layout_fingerprint"] = layout.fingerprint_hex()
    frame.attrs["engine"] = name
    frame.attrs["controllers"] = controllers
    return Trajectory(frame, normalized, v_pred, isv_end, name, seconds)


def replay(stream: Stream, config: RegimeConfig | None = None, engine: str = "reference",
           isv: Mapping[str, float] | None = None, layout: SlotLayout | None = None,
           log_inputs: bool = False, controllers: str = "single", **options: Any) -> pd.DataFrame:
    """Replay the regime pipeline over ``stream``; one frame row per step.

    Parameters
    ----------
    stream
        The inputs (see :mod:`regime_dash.core.streams`); a :class:`~regime_dash.core.streams.StepStream` (its
        per-step fields only) on engine ``fast`` given its phase 1 (``stats=``).
    config
        What-if config; defaults to the spec's values.
    engine
        ``reference`` (NumPy oracle), ``cuda`` (spec kernels per step),
        ``fast`` (two-phase) or ``auto``.
    isv
        Initial slot values by slot name, applied after bootstrap and config.
    layout
        Slot layout (e.g. from :func:`regime_dash.core.slots.import_rust`).
    log_inputs
        Also log the inputs a diag does not carry (:data:`regime_dash.diag.catalogue.INPUT_COLUMNS`: the Kelly edge,
        IQN τ before its clamp, each step's batch sums), so every output can be re-derived from the file.
    controllers
        The risk-stack path: ``"single"`` (the single controller kernels, launch order
        step 7) or ``"fused"`` (``rl_fused_controllers``, step 8, with the config's mirror
        switches); :mod:`regime_dash.engine.controllers`. Both give the same bits while
        the mirror switches are on.
    **options
        Backend options, e.g. ``graph=True`` for ``cuda``.

    Returns
    -------
    pandas.DataFrame
        ``step``, ``fold``, ``phase``, the dotted diag columns, the config columns (F2/F4/F5, models,
        mirrors and the config slots; :data:`regime_dash.diag.catalogue.CONFIG_COLUMNS`), the input columns
        with ``log_inputs`` and, on the fused path,
        :data:`regime_dash.diag.catalogue.FUSED_COLUMN`. ``attrs`` carries ``layout_fingerprint``,
        ``engine`` and ``controllers``.
    """
    name = resolve_engine(engine)
    if name == "fast":
        options.setdefault("normalized", False)  # the frame is all this returns: no [T, b] pass
    return replay_trajectory(stream, config, name, isv, layout, log_inputs, controllers, **options).frame
