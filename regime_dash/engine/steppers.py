"""The pipeline one step at a time: the step engines a live run drives.

A replay hands a whole stream to a backend. A live run (the closed-loop
:class:`~regime_dash.sources.simulator.Simulator`, or a stream played step by step in
:mod:`regime_dash.runs.live`) needs the pipeline one step at a time, because what it
feeds to step ``t`` depends on step ``t-1``'s output or on the user. A
:class:`StepEngine` does that;
:func:`regime_dash.engine.stepper_choice.make_stepper` picks one by engine name:

* :class:`ReferenceStepper`: the reference engine's step functions, called directly;
* :class:`~regime_dash.engine.gpu_stepper.GpuStepper`: the ``cuda`` kernels, one
  CUDA graph launch per step (or per block of steps);
* :class:`BackendStepper`: any backend of :data:`regime_dash.engine.ENGINES`,
  chained over one-step streams through the same dispatch
  (:func:`regime_dash.engine.backends.usable_backend`) that :func:`regime_dash.engine.replay` uses.

A step engine keeps its own trajectory (the diag snapshot rows and flat counts
of every step, :meth:`StepEngine.trajectory`), and :meth:`StepEngine.step`
returns only kelly_f, the one value the closed loop's market reads back each
step; so the GPU stepper moves no more than that per step.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from regime_dash.diag import catalogue as diag
from regime_dash.engine import reference
from regime_dash.engine.backends import Backend, usable_backend
from regime_dash.engine.options import ReplayOptions
from regime_dash.engine.start import StartState, snapshot_indices
from regime_dash.errors import ValidationError
from regime_dash.core.slots import SlotLayout
from regime_dash.core.streams import Stream

#: Column of kelly_f in a snapshot row: what :meth:`StepEngine.step` returns.
KELLY_COL = diag.SNAPSHOT_SLOTS.index("RL_KELLY_FRACTION_INDEX")


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
    """Runs the spec's kernels step by step; the pluggable half of a live run.

    Every engine keeps the trajectory of the steps it ran, so :meth:`step`
    hands back only what a closed loop must see before the next step.
    """

    name: str

    def step(self, rewards: np.ndarray, lots: np.ndarray, inputs: StepInputs) -> float:
        """Run one step; return its kelly_f (the value the market sizes the next step with)."""

    def steps(self, block: Stream) -> None:
        """Run every row of ``block`` in order (inputs known ahead: a recorded stream); nothing comes back."""

    def trajectory(self) -> tuple[np.ndarray, np.ndarray]:
        """(snapshot rows float32 [n, len(SNAPSHOT_SLOTS)], flat counts int32 [n]) of every step so far."""

    def reconfigure(self, isv: np.ndarray, boot: np.ndarray) -> None:
        """Go on from ``isv`` with ``boot`` as the bootstrap row (a config change); the trajectory stays."""

    @property
    def isv(self) -> np.ndarray:
        """The ISV buffer after the last step (a copy)."""


def check_block(block: Any, accounts: int | None = None) -> Stream:
    """``block`` if it is a :class:`Stream` (of ``accounts`` accounts, when given), else a ValidationError."""
    if not isinstance(block, Stream):
        raise ValidationError(f"a block of steps must be a regime_dash.Stream, got {type(block).__name__}",
                              field="block", value=type(block).__name__)
    if accounts is not None and block.accounts != accounts:
        raise ValidationError(f"the block has {block.accounts} accounts, the stepper {accounts}",
                              field="accounts", value=block.accounts)
    return block


def block_inputs(block: Stream, t: int) -> StepInputs:
    """Row ``t`` of ``block``'s per-step scalars as :class:`StepInputs`."""
    return StepInputs(bool(block.boundary[t]), block.cooldown[t], block.session_pnl_worst[t],
                      block.kelly_analytic[t], block.tau_action[t], int(block.step[t]))


class TrajectoryLog:
    """The snapshot rows and flat counts a step engine has produced, kept as blocks."""

    def __init__(self, n_snap: int):
        self._n_snap = n_snap
        self._snap: list[np.ndarray] = []
        self._flat: list[np.ndarray] = []

    def add(self, snap: np.ndarray, flat: np.ndarray) -> None:
        """Append a block: snap float32 [k, n_snap], flat int32 [k] (kept, not copied)."""
        self._snap.append(snap)
        self._flat.append(flat)

    def arrays(self, tail: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Every block, then ``tail`` (rows not yet added), as one (snap, flat) pair."""
        snap, flat = list(self._snap), list(self._flat)
        if tail is not None:
            snap.append(tail[0])
            flat.append(tail[1])
        if not snap:
            return np.empty((0, self._n_snap), np.float32), np.empty(0, np.int32)
        return (np.concatenate(snap).astype(np.float32, copy=False),
                np.concatenate(flat).astype(np.int32, copy=False))


class _HostState:
    """What the steppers that keep the ISV in host memory share: ``_isv``, ``_boot``, ``_log``."""

    _isv: np.ndarray
    _boot: np.ndarray
    _log: TrajectoryLog

    def trajectory(self) -> tuple[np.ndarray, np.ndarray]:
        return self._log.arrays()

    def reconfigure(self, isv: np.ndarray, boot: np.ndarray) -> None:
        self._isv = np.asarray(isv, dtype=np.float32).copy()
        self._boot = np.asarray(boot, dtype=np.float32).copy()

    @property
    def isv(self) -> np.ndarray:
        return self._isv.copy()

    @property
    def boot(self) -> np.ndarray:
        """The bootstrap row a boundary resets from (a copy)."""
        return self._boot.copy()

    def record(self, snap: np.ndarray, flat: np.ndarray, isv: np.ndarray) -> None:
        """Take steps run elsewhere on this state (the simulator's compiled loop): their snapshot rows
        float32 [k, n_snap] and flat counts int32 [k] join the trajectory, and ``isv`` is the ISV after them."""
        self._log.add(np.asarray(snap, dtype=np.float32), np.asarray(flat, dtype=np.int32))
        self._isv = np.asarray(isv, dtype=np.float32).copy()


class ReferenceStepper(_HostState):
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
        self._log = TrajectoryLog(len(self._snap_idx))

    def step(self, rewards: np.ndarray, lots: np.ndarray, inputs: StepInputs) -> float:
        v_sum, v_ssq, v_max = reference.block_reduce_stats(rewards)
        flat = int(np.count_nonzero(lots == 0))  # rl_regime_flat_count
        row = np.empty((1, self._snap_idx.shape[0]), dtype=np.float32)
        reference.scalar_step(self._isv, self._ix, self._boot, *self._plan, self._snap_idx, row[0],
                              bool(inputs.boundary), inputs.cooldown, inputs.worst, inputs.kelly_edge,
                              inputs.tau_action, v_sum, v_ssq, v_max, flat, rewards.shape[0])
        self._log.add(row, np.array([flat], np.int32))
        return float(row[0, KELLY_COL])

    def steps(self, block: Stream) -> None:
        check_block(block)
        for t in range(block.steps):
            self.step(block.rewards[t], block.lots[t], block_inputs(block, t))


#: A stepped block keeps its snapshot and state only: no [T, b] normalize pass.
_STEPPED = ReplayOptions(normalized=False)


class BackendStepper(_HostState):
    """Any replay backend, stepped through its ``run`` contract on short streams.

    The whole pipeline state lives in the ISV, so chaining ``run`` over
    one-step streams (or over the blocks :meth:`steps` is given), each starting
    from the previous call's final ISV, is the same computation as one long
    replay. The per-step cost is the backend's per-call overhead.
    """

    def __init__(self, engine: str, isv0: np.ndarray, boot: np.ndarray, layout: SlotLayout):
        self.backend: Backend = usable_backend(engine)
        self.name = self.backend.name
        self._isv = isv0.copy()
        self._boot = boot
        self._layout = layout
        self._snap_idx = snapshot_indices(layout)
        self._log = TrajectoryLog(len(self._snap_idx))

    def step(self, rewards: np.ndarray, lots: np.ndarray, inputs: StepInputs) -> float:
        one = Stream(rewards=rewards[None, :], lots=lots[None, :],
                     kelly_analytic=np.array([inputs.kelly_edge], np.float32),
                     cooldown=np.array([inputs.cooldown], np.float32),
                     session_pnl_worst=np.array([inputs.worst], np.float32),
                     tau_action=np.array([inputs.tau_action], np.float32),
                     boundary=np.array([inputs.boundary], np.bool_),
                     step=np.array([inputs.step], np.int64))
        self.steps(one)
        return self._last_kelly

    def steps(self, block: Stream) -> None:
        check_block(block)
        out = self.backend.run(block, StartState(self._isv, self._boot, self._layout, self._snap_idx), _STEPPED)
        self._isv = np.asarray(out.isv, dtype=np.float32).copy()
        snap = np.asarray(out.snapshot, dtype=np.float32)
        self._log.add(snap, np.asarray(out.flat, dtype=np.int32))
        self._last_kelly = float(snap[-1, KELLY_COL])


__all__ = ["BackendStepper", "KELLY_COL", "ReferenceStepper", "StepEngine", "StepInputs", "TrajectoryLog",
           "block_inputs", "check_block"]
