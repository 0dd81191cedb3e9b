"""The pipeline one step at a time: the step engines a live run drives.

A replay hands a whole stream to a backend. A live run (the closed-loop
:class:`~regime_dash.simulator.Simulator`, or a stream played step by step in
:mod:`regime_dash.live`) needs the pipeline one step at a time, because what it
feeds to step ``t`` depends on step ``t-1``'s output or on the user. A
:class:`StepEngine` does that; :func:`make_stepper` picks one by engine name:

* :class:`ReferenceStepper`: the reference engine's step functions, called directly;
* :class:`~regime_dash.engine.gpu_stepper.GpuStepper`: the ``cuda`` kernels, one
  CUDA graph launch per step;
* :class:`BackendStepper`: any backend of :data:`regime_dash.engine.ENGINES`,
  chained over one-step streams through the same dispatch
  (:func:`regime_dash.engine.backend`) that :func:`regime_dash.engine.replay` uses.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

import numpy as np

from regime_dash.config import RegimeConfig
from regime_dash.engine import backend, engine_status, initial_isv, reference, resolve_engine, snapshot_indices
from regime_dash.errors import EngineUnavailable
from regime_dash.slots import DEFAULT_LAYOUT, SlotLayout
from regime_dash.streams import Stream


@dataclass(frozen=True)
class StepInputs:
    """The per-step scalars of a stream row (float32, as the ISV holds them)."""

    boundary: bool
    cooldown: np.float32
    worst: np.float32
    kelly_edge: np.float32
    tau_action: np.float32
    step: int


class StepEngine(Protocol):
    """Runs the spec's kernels for one step; the pluggable half of the closed loop."""

    name: str

    def step(self, rewards: np.ndarray, lots: np.ndarray, inputs: StepInputs) -> tuple[np.ndarray, int]:
        """Run one step; return (snapshot row float32[len(SNAPSHOT_SLOTS)], flat count)."""

    @property
    def isv(self) -> np.ndarray:
        """The ISV buffer after the last step (a copy)."""


class ReferenceStepper:
    """The reference engine's step functions, called directly (no per-step Stream).

    Does what one iteration of :func:`regime_dash.engine.reference.run` does,
    by calling the same functions, minus the PopArt normalization pass (the
    simulator does not use normalized rewards).
    """

    name = "reference"

    def __init__(self, isv0: np.ndarray, boot: np.ndarray, layout: SlotLayout):
        self._isv = isv0.copy()
        self._boot = boot
        self._ix = reference.index_table(layout)
        self._plan = layout.reset_plan()
        self._snap_idx = snapshot_indices(layout)

    def step(self, rewards: np.ndarray, lots: np.ndarray, inputs: StepInputs) -> tuple[np.ndarray, int]:
        v_sum, v_ssq, v_max = reference.block_reduce_stats(rewards)
        flat = int(np.count_nonzero(lots == 0))  # rl_regime_flat_count
        row = np.empty(self._snap_idx.shape[0], dtype=np.float32)
        reference.scalar_step(self._isv, self._ix, self._boot, *self._plan, self._snap_idx, row,
                              bool(inputs.boundary), inputs.cooldown, inputs.worst, inputs.kelly_edge,
                              inputs.tau_action, v_sum, v_ssq, v_max, flat, rewards.shape[0])
        return row, flat

    @property
    def isv(self) -> np.ndarray:
        return self._isv.copy()


class BackendStepper:
    """Any replay backend, stepped through its ``run`` contract on one-step streams.

    The whole pipeline state lives in the ISV, so chaining ``run`` over
    one-step streams, each starting from the previous call's final ISV, is the
    same computation as one long replay. This is how the ``cuda`` (or ``fast``)
    engine drives the live run until it offers a stepping API of its own; the
    per-step cost is the backend's per-call overhead.
    """

    def __init__(self, engine: str, isv0: np.ndarray, boot: np.ndarray, layout: SlotLayout):
        name = resolve_engine(engine)
        reason = engine_status().get(name)
        if reason is not None:
            raise EngineUnavailable(f"engine {name!r} cannot run here: {reason}", engine=name)
        self._run: Callable[..., Any] = backend(name)
        self.name = name
        self._isv = isv0.copy()
        self._boot = boot
        self._layout = layout
        self._snap_idx = snapshot_indices(layout)

    def step(self, rewards: np.ndarray, lots: np.ndarray, inputs: StepInputs) -> tuple[np.ndarray, int]:
        one = Stream(rewards=rewards[None, :], lots=lots[None, :],
                     kelly_analytic=np.array([inputs.kelly_edge], np.float32),
                     cooldown=np.array([inputs.cooldown], np.float32),
                     session_pnl_worst=np.array([inputs.worst], np.float32),
                     tau_action=np.array([inputs.tau_action], np.float32),
                     boundary=np.array([inputs.boundary], np.bool_),
                     step=np.array([inputs.step], np.int64))
        snap, flat, _, _, isv = self._run(one, self._isv, self._boot, self._layout, self._snap_idx)
        self._isv = np.asarray(isv, dtype=np.float32).copy()
        return np.asarray(snap[0], dtype=np.float32), int(flat[0])

    @property
    def isv(self) -> np.ndarray:
        return self._isv.copy()


def live_engine(engine: str = "auto", *, accounts: int = 64, layout: SlotLayout | None = None) -> str:
    """The engine a live run uses for ``engine``: ``auto`` is the faster stepper on this machine.

    ``auto`` times the GPU stepper (:class:`regime_dash.engine.gpu_stepper.GpuStepper`,
    the ``cuda`` kernels in one CUDA graph a step) against the reference stepper
    at b = ``accounts`` (:func:`~regime_dash.engine.gpu_stepper.fastest_live_engine`,
    once per process) and picks the faster; reference where there is no GPU.
    """
    if engine == "auto":
        if engine_status().get("cuda") is not None:
            return "reference"
        from regime_dash.engine.gpu_stepper import fastest_live_engine

        layout = (layout or DEFAULT_LAYOUT).validate()
        isv0, boot = initial_isv(RegimeConfig(), None, layout)
        return fastest_live_engine(isv0, boot, layout, int(accounts))
    return resolve_engine(engine)


def make_stepper(engine: str, isv0: np.ndarray, boot: np.ndarray, layout: SlotLayout,
                 accounts: int | None = None) -> StepEngine:
    """A :class:`StepEngine` for the engine name (``auto`` as in :func:`live_engine`).

    ``cuda`` with ``accounts`` given is the GPU stepper; without, or for ``fast``,
    the backend stepped through one-step replays (:class:`BackendStepper`).
    """
    name = live_engine(engine, accounts=accounts or 64, layout=layout)
    if name == "reference":
        return ReferenceStepper(isv0, boot, layout)
    if name == "cuda" and accounts is not None:
        from regime_dash.engine.gpu_stepper import GpuStepper

        return GpuStepper(isv0, boot, layout, int(accounts))
    return BackendStepper(name, isv0, boot, layout)


__all__ = ["BackendStepper", "ReferenceStepper", "StepEngine", "StepInputs", "live_engine", "make_stepper"]
