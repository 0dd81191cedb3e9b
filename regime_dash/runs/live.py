"""Live runs of any source: a recorded stream, a scenario or the closed-loop simulator, step by step.

A replay runs a whole stream under one config. A live run plays its source one
step (or a few) at a time through a :class:`~regime_dash.engine.steppers.StepEngine`,
and between two steps the config can change and inputs can be injected:

* **config changes** (:meth:`LiveRun.set_config`) take effect from the next step
  on. The ISV state carries over: only the config slots (one per
  :class:`~regime_dash.core.config.RegimeConfig` field) are rewritten in the ISV, and
  the bootstrap vector that boundary resets restore from becomes the new
  config's. Everything the pipeline has learnt so far (EMAs, the dead-zone
  duration, the tail recency, ...) stays. The steps before a change are exactly
  the reference replay of the same inputs under the old config.
* **injections** (tail shock, force flat, fold boundary) act on the next step.
  The simulator takes them as market events (:class:`~regime_dash.sources.simulator.Simulator`);
  a stream takes them as edits of its upcoming inputs, which is a **model**
  (a recording does not say what the market would have done):

  - *tail shock*: the account holding the most lots at the next step takes a
    ``shock_pnl`` loss: its reward drops by ``shock_pnl · reward_scale`` (Run #8:
    $6484 × 0.003 = −19.45) and ``session_pnl_worst`` drops by ``shock_pnl`` from
    that step until the next fold boundary (the shocked account's session pnl
    stays that much lower, and it is taken to be the worst one);
  - *force flat*: every account holds 0 lots at the next step (the rewards of
    the step are kept: a recording has no pnl for closes it did not make);
  - *boundary*: ``reset_session_state`` runs before the next step, and the
    shocks' offset on ``session_pnl_worst`` ends there.

  :meth:`LiveRun.inputs` returns the edited inputs fed so far; replaying them
  under the same configs gives :meth:`LiveRun.frame` again.

Every change and injection is logged in :attr:`LiveRun.changes` with the step
number it first acts on, so a chart can mark it. No I/O and no streamlit here:
the Live page and ``replay --live`` drive it.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from regime_dash.diag import catalogue as diag
from regime_dash.core.config import FIELD_SLOTS, RegimeConfig
from regime_dash.engine import initial_isv
from regime_dash.errors import ValidationError
from regime_dash.engine.stepper_choice import make_stepper
from regime_dash.engine.steppers import StepEngine
from regime_dash.sources.simulator import RUN8_SHOCK_PNL, Market, Simulator
from regime_dash.core.slots import DEFAULT_LAYOUT, SlotLayout
from regime_dash.core.streams import Stream

#: Kinds of :class:`Change`.
KINDS = ("config", "shock", "flat", "boundary")


@dataclass(frozen=True)
class Change:
    """One thing that happened to a live run: it acts from step ``step`` (a step number) on.

    ``kind`` is one of :data:`KINDS`; ``label`` says what, in words (for a chart
    or a status line), e.g. ``max_duration=200`` or ``tail shock (account 3)``.
    """

    step: int
    kind: str
    label: str


def config_diff(old: RegimeConfig, new: RegimeConfig) -> dict[str, Any]:
    """``{field: new value}`` of the fields where ``new`` differs from ``old``."""
    a, b = old.as_dict(), new.as_dict()
    return {k: v for k, v in b.items() if a[k] != v}


def reconfigured_isv(isv: np.ndarray, config: RegimeConfig,
                     layout: SlotLayout) -> tuple[np.ndarray, np.ndarray]:
    """``(isv, boot)`` after switching a running pipeline to ``config``.

    The config slots of ``isv`` take ``config``'s values and every other slot
    keeps its state; ``boot``, what boundary resets restore, is the bootstrap
    of ``config`` (as :func:`regime_dash.engine.initial_isv` builds it).
    """
    out = np.asarray(isv, dtype=np.float32).copy()
    values = config.to_isv()
    for slot in FIELD_SLOTS.values():
        if slot in layout:
            out[layout.index(slot)] = np.float32(values[slot])
    _, boot = initial_isv(config, None, layout)
    return out, boot


def _check_config(config: Any) -> RegimeConfig:
    if not isinstance(config, RegimeConfig):
        raise ValidationError(f"config must be a RegimeConfig, got {type(config).__name__}",
                              field="config", value=type(config).__name__)
    return config


def _check_steps(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValidationError(f"steps must be an int >= 0, got {n!r}", field="steps", value=n)
    return int(n)


class LiveRun(ABC):
    """What the Live page and ``replay --live`` drive: step, reconfigure, inject, read the frame.

    Build one with :meth:`of_stream` (a recorded stream or a scenario) or
    :meth:`of_simulator` (the closed loop). Attributes: ``source`` (a label),
    ``config`` (the config of the next step), ``layout``, ``changes`` (the
    :class:`Change` log).
    """

    source: str
    config: RegimeConfig
    layout: SlotLayout
    changes: list[Change]

    # ---- constructors ---------------------------------------------------------------
    @staticmethod
    def of_stream(stream: Stream, config: RegimeConfig | None = None, *, engine: str = "reference",
                  layout: SlotLayout | None = None, source: str = "stream",
                  shock_pnl: float = RUN8_SHOCK_PNL, reward_scale: float = Market().reward_scale
                  ) -> "StreamRun":
        """A live run of ``stream`` (see :class:`StreamRun`)."""
        return StreamRun(stream, config, engine=engine, layout=layout, source=source, shock_pnl=shock_pnl,
                         reward_scale=reward_scale)

    @staticmethod
    def of_simulator(sim: Simulator, source: str = "simulator", *, steps: int | None = None) -> "SimulatorRun":
        """A live run of the closed-loop ``sim`` (see :class:`SimulatorRun`); it ends after ``steps``
        steps (its schedule's length), or runs on while ``steps`` is None."""
        return SimulatorRun(sim, source, steps=steps)

    # ---- what each source provides ----------------------------------------------------
    @property
    @abstractmethod
    def t(self) -> int:
        """Steps taken so far."""

    @property
    @abstractmethod
    def next_step(self) -> int:
        """The step number the next step will have."""

    @property
    @abstractmethod
    def last_step(self) -> int:
        """The step number of the last step taken."""

    @property
    @abstractmethod
    def open_accounts(self) -> int:
        """Accounts holding lots after the last step."""

    @property
    @abstractmethod
    def isv(self) -> np.ndarray:
        """The pipeline's ISV buffer now (a copy)."""

    @abstractmethod
    def step(self, n: int = 1) -> int:
        """Advance up to ``n`` steps (a stream stops at its end); return how many were taken."""

    @abstractmethod
    def frame(self) -> pd.DataFrame:
        """The trajectory so far, with the columns :func:`regime_dash.replay` gives."""

    @abstractmethod
    def inject_tail_shock(self, account: int | None = None) -> Change:
        """The next step: one account (default: the one holding the most lots) takes a tail loss."""

    @abstractmethod
    def force_flat(self) -> Change:
        """The next step: every account is flat."""

    @abstractmethod
    def cross_boundary(self) -> Change:
        """The next step: reset_session_state runs before it."""

    @abstractmethod
    def _switch(self, config: RegimeConfig) -> None:
        """Make the next steps run under ``config`` (see :func:`reconfigured_isv`)."""

    # ---- shared ------------------------------------------------------------------------
    @property
    def total(self) -> int | None:
        """Steps the source holds (None: the simulator runs on)."""
        return None

    @property
    def done(self) -> bool:
        """True once a stream has been played to its end."""
        return self.total is not None and self.t >= self.total

    def set_config(self, config: RegimeConfig) -> Change | None:
        """Run the next steps under ``config``, carrying the ISV state over; log and return the change.

        Returns None (and logs nothing) when ``config`` equals the current one.
        """
        config = _check_config(config)
        diff = config_diff(self.config, config)
        if not diff:
            return None
        self._switch(config)
        # which config ran from which step, for the frame's F2/F4/F5 switch columns
        self._config_history = [*getattr(self, "_config_history", [(0, self.config)]), (self.t, config)]
        self.config = config
        return self._log("config", ", ".join(f"{k}={v}" if isinstance(v, bool) else f"{k}={v:g}"
                                             for k, v in diff.items()))

    def _switch_columns(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` with its config columns per row: a config change sets them from its step on."""
        for t, config in getattr(self, "_config_history", []):
            for name, col in diag.CONFIG_COLUMNS.items():
                if col in frame.columns:
                    frame.iloc[t:, frame.columns.get_loc(col)] = diag.config_value(name, getattr(config, name))
        return frame

    def _log(self, kind: str, label: str) -> Change:
        change = Change(int(self.next_step), kind, label)
        self.changes.append(change)
        return change

    def status(self) -> dict[str, Any]:
        """Headline values after the last step: kelly_f, dead zone, duration, ε live, σ, tail recency.

        Read from the ISV, not from :meth:`frame`, so a status per tick costs
        the same at step 100 as at step 100,000.
        """
        out: dict[str, Any] = {"t": self.t, "total": self.total, "source": self.source}
        if self.t == 0:
            return out
        isv = self.isv

        def slot(name: str) -> float:
            return float(isv[self.layout.index(name)])

        out.update(step=self.last_step,
                   kelly_f=slot("RL_KELLY_FRACTION_INDEX"),
                   dead_zone=slot("RL_REGIME_DEAD_ZONE_FLAG_INDEX") != 0.0,
                   duration=int(slot("RL_REGIME_DEAD_ZONE_DURATION_INDEX")),
                   timeout=slot("RL_REGIME_DEAD_ZONE_TIMEOUT_FLAG_INDEX") != 0.0,
                   eps_live=slot("RL_KELLY_EPS_RECOVERY_LIVE_INDEX"),
                   sigma=slot("POPART_SIGMA_INDEX"),
                   tail_recency=slot("RL_REGIME_TAIL_EVENT_RECENCY_INDEX"),
                   open_accounts=self.open_accounts)
        return out


def status_line(status: dict[str, Any], changes: list[Change] = ()) -> str:
    """One line of a live run's :meth:`LiveRun.status` (and the changes since the last line)."""
    total = f"/{status['total']:,}" if status.get("total") is not None else ""
    if "step" not in status:
        return f"{status['source']}: {status['t']:,}{total} steps"
    line = (f"{status['source']} t={status['t']:,}{total} step {status['step']:,}  "
            f"kelly_f {status['kelly_f']:.4f}  dead zone {'ON ' if status['dead_zone'] else 'off'} "
            f"(duration {status['duration']:,}{', TIMEOUT' if status['timeout'] else ''})  "
            f"eps {status['eps_live']:.3f}  sigma {status['sigma']:.4g}  "
            f"tail recency {status['tail_recency']:.0f}  open {status['open_accounts']:,}")
    if changes:
        line += "  | " + "; ".join(f"{c.kind} at step {c.step}: {c.label}" for c in changes)
    return line


class StreamRun(LiveRun):
    """A recorded or synthetic :class:`Stream` played step by step through a step engine.

    Parameters
    ----------
    stream
        The inputs, played in order.
    config
        The config of the first step (the spec's defaults if None).
    engine
        ``reference`` (default), ``cuda``, ``fast`` or ``auto``, as
        :func:`regime_dash.engine.stepper_choice.make_stepper` takes it.
    layout
        Slot layout; default :data:`regime_dash.core.slots.DEFAULT_LAYOUT`.
    source
        A label for status lines and charts.
    shock_pnl, reward_scale
        Size of an injected tail shock in dollars, and the reward per dollar
        (see the module docstring's model).
    """

    def __init__(self, stream: Stream, config: RegimeConfig | None = None, *, engine: str = "reference",
                 layout: SlotLayout | None = None, source: str = "stream",
                 shock_pnl: float = RUN8_SHOCK_PNL, reward_scale: float = Market().reward_scale):
        if not isinstance(stream, Stream):
            raise ValidationError(f"stream must be a regime_dash.Stream, got {type(stream).__name__}",
                                  field="stream", value=type(stream).__name__)
        for name, v in (("shock_pnl", shock_pnl), ("reward_scale", reward_scale)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v < 0:
                raise ValidationError(f"{name} must be a finite number >= 0, got {v!r}", field=name, value=v)
        self.stream = stream
        self.config = RegimeConfig() if config is None else _check_config(config)
        self.layout = (layout or DEFAULT_LAYOUT).validate()
        self.source = source
        self.shock_pnl = float(shock_pnl)
        self.reward_scale = float(reward_scale)
        isv0, boot = initial_isv(self.config, None, self.layout)
        self.engine: StepEngine = make_stepper(engine, isv0, boot, self.layout, stream.accounts)
        self.changes = []
        self._t = 0
        # edits of the inputs by stream index: the shocked accounts, the flat steps, the injected
        # boundaries; ``_offset`` is the shocks' offset on session_pnl_worst at the last step taken
        self._shocks: dict[int, list[int]] = {}
        self._flat_steps: set[int] = set()
        self._boundaries: set[int] = set()
        self._offset = 0.0
        self._open = 0

    @property
    def t(self) -> int:
        return self._t

    @property
    def open_accounts(self) -> int:
        return self._open

    @property
    def last_step(self) -> int:
        return int(self.stream.step[self._t - 1])

    @property
    def total(self) -> int:
        return self.stream.steps

    @property
    def next_step(self) -> int:
        s = self.stream.step
        return int(s[self._t]) if self._t < len(s) else int(s[-1]) + 1

    @property
    def isv(self) -> np.ndarray:
        return self.engine.isv

    def _switch(self, config: RegimeConfig) -> None:
        self.engine.reconfigure(*reconfigured_isv(self.engine.isv, config, self.layout))

    # ---- injections: edits of the next step's inputs ----------------------------------
    def _next_index(self, what: str) -> int:
        if self.done:
            raise ValidationError(f"the stream has been played to its end ({self.total} steps): "
                                  f"nothing left to {what}", field="step", value=self._t)
        return self._t

    def inject_tail_shock(self, account: int | None = None) -> Change:
        """The next step: one account (default: the one with the most lots) takes a ``shock_pnl`` loss."""
        t = self._next_index("shock")
        b = self.stream.accounts
        if account is not None and (isinstance(account, bool) or not isinstance(account, (int, np.integer))
                                    or not 0 <= account < b):
            raise ValidationError(f"account {account!r} is not in [0, {b})", field="account", value=account)
        acct = int(np.argmax(self.stream.lots[t])) if account is None else int(account)
        self._shocks.setdefault(t, []).append(acct)
        return self._log("shock", f"tail shock, account {acct} (−${self.shock_pnl:,.0f})")

    def force_flat(self) -> Change:
        """The next step: every account holds 0 lots."""
        self._flat_steps.add(self._next_index("flatten"))
        return self._log("flat", "every account flat")

    def cross_boundary(self) -> Change:
        """The next step: reset_session_state runs before it; the shocks' offset on the worst pnl ends."""
        self._boundaries.add(self._next_index("cross"))
        return self._log("boundary", "fold boundary (reset_session_state)")

    def _edited(self, t: int, rewards: np.ndarray, lots: np.ndarray, offset: float
                ) -> tuple[np.ndarray, np.ndarray, bool, float]:
        """Stream row ``t``'s rewards, lots, boundary and worst-pnl offset with the injections applied.

        ``offset`` is the offset at step ``t - 1``; a boundary (recorded or
        injected) ends it, each shock at ``t`` adds ``-shock_pnl`` to it.
        """
        boundary = bool(self.stream.boundary[t]) or t in self._boundaries
        offset = 0.0 if boundary else offset
        if t in self._shocks:
            rewards = rewards.copy()
            for acct in self._shocks[t]:
                rewards[acct] = np.float32(rewards[acct] - np.float32(self.shock_pnl * self.reward_scale))
                offset -= self.shock_pnl
        if t in self._flat_steps:
            lots = np.zeros_like(lots)
        return rewards, lots, boundary, offset

    def _block(self, start: int, stop: int, offset: float) -> tuple[Stream, float]:
        """Stream rows ``[start, stop)`` with the injections' edits, and the worst-pnl offset after them."""
        s = self.stream.slice(start, stop)
        rewards, lots, worst = s.rewards, s.lots, s.session_pnl_worst.copy()
        edits = self._shocks.keys() | self._flat_steps
        if any(start <= t < stop for t in edits):
            rewards, lots = rewards.copy(), lots.copy()  # the recording itself stays as it was
        for t in range(start, stop):
            i = t - start
            r, l_, _, offset = self._edited(t, rewards[i], lots[i], offset)
            if t in edits:
                rewards[i], lots[i] = r, l_
            worst[i] = np.float32(worst[i] + np.float32(offset))
        return Stream(rewards=rewards, lots=lots, kelly_analytic=s.kelly_analytic, cooldown=s.cooldown,
                      session_pnl_worst=worst, tau_action=s.tau_action,
                      boundary=self._boundary_mask(stop)[start:], step=s.step, v_pred=s.v_pred), offset

    def step(self, n: int = 1) -> int:
        """Advance up to ``n`` steps: the inputs are known, so they go to the engine as one block."""
        n = min(_check_steps(n), self.total - self._t)
        if n:
            block, self._offset = self._block(self._t, self._t + n, self._offset)
            self.engine.steps(block)
            self._open = int(np.count_nonzero(block.lots[-1]))
            self._t += n
        return n

    def _boundary_mask(self, n: int) -> np.ndarray:
        mask = self.stream.boundary[:n].copy()
        mask[[t for t in self._boundaries if t < n]] = True
        return mask

    def frame(self) -> pd.DataFrame:
        n = self._t
        snap, flat = self.engine.trajectory()
        frame = diag.frame_from_snapshot(snap, flat, self.stream.accounts,
                                         self.stream.step[:n], self._boundary_mask(n), self.config)
        frame.attrs["layout_fingerprint"] = self.layout.fingerprint_hex()
        frame.attrs["engine"] = self.engine.name
        return self._switch_columns(frame)

    def inputs(self) -> Stream:
        """The inputs fed so far, with the injections' edits: replaying them gives :meth:`frame`."""
        n = self._t
        if n == 0:
            raise ValidationError("no step has been taken yet", field="steps", value=0)
        return self._block(0, n, 0.0)[0]


class SimulatorRun(LiveRun):
    """The closed-loop :class:`~regime_dash.sources.simulator.Simulator` as a live run.

    Stepping and injections are the simulator's own (market events); a config
    change replaces its step engine by one on the same ISV with the new config
    slots (see :func:`reconfigured_isv`).
    """

    def __init__(self, sim: Simulator, source: str = "simulator", *, steps: int | None = None):
        if not isinstance(sim, Simulator):
            raise ValidationError(f"sim must be a Simulator, got {type(sim).__name__}", field="sim",
                                  value=type(sim).__name__)
        self.steps = None if steps is None else _check_steps(steps)
        self.simulator = sim
        self.config = sim.config
        self.layout = sim.layout
        self.source = source
        self.changes = []

    @property
    def t(self) -> int:
        return self.simulator.t

    next_step = t  # the simulator numbers its steps 0, 1, ...: the next one's is the count taken

    @property
    def last_step(self) -> int:
        return self.simulator.t - 1

    @property
    def open_accounts(self) -> int:
        return int(np.count_nonzero(self.simulator.state.lots))

    @property
    def isv(self) -> np.ndarray:
        return self.simulator.isv

    @property
    def total(self) -> int | None:
        """The schedule's length when the run was given one (None: it runs on)."""
        return self.steps

    def _switch(self, config: RegimeConfig) -> None:
        sim = self.simulator
        sim.engine.reconfigure(*reconfigured_isv(sim.engine.isv, config, self.layout))
        sim.config = config

    def _check_not_done(self, what: str) -> None:
        if self.done:
            raise ValidationError(f"the simulator has run its schedule to its end ({self.total} steps): "
                                  f"nothing left to {what}", field="step", value=self.t)

    def inject_tail_shock(self, account: int | None = None) -> Change:
        """The next step: one account takes the market's shock loss (see the simulator)."""
        self._check_not_done("shock")
        sim = self.simulator
        acct = int(np.argmax(sim.state.lots)) if account is None else account
        sim.inject_tail_shock(acct)
        return self._log("shock", f"tail shock, account {acct} (−${sim.market.shock_pnl:,.0f})")

    def force_flat(self) -> Change:
        """The next step: every open position closes at market."""
        self._check_not_done("flatten")
        self.simulator.force_flat()
        return self._log("flat", "every account flat")

    def cross_boundary(self) -> Change:
        """The next step: reset_session_state runs before it."""
        self._check_not_done("cross a boundary at")
        self.simulator.cross_boundary()
        return self._log("boundary", "fold boundary (reset_session_state)")

    def step(self, n: int = 1) -> int:
        """Advance up to ``n`` steps (a run with a schedule length stops at its end); return how many."""
        n = _check_steps(n)
        if self.total is not None:
            n = min(n, self.total - self.t)
        self.simulator.step(n)
        return n

    def frame(self) -> pd.DataFrame:
        return self._switch_columns(self.simulator.frame())

    def market_frame(self) -> pd.DataFrame:
        """The simulator's market columns (p_true, closes, open accounts, pnl, injections)."""
        return self.simulator.market_frame()


__all__ = ["Change", "KINDS", "LiveRun", "SimulatorRun", "StreamRun", "config_diff", "reconfigured_isv",
           "status_line"]
