"""The closed-loop live run: a synthetic market whose trades the pipeline's own kelly_f sizes.

A replay is open loop: the stream is fixed and the pipeline only watches it. The
Kelly trap is a closed-loop effect (kelly_f = 0 stops new trades, no trades stop
the EMA updates, frozen EMAs keep kelly_f at 0), so seeing it form, and seeing
the resurrection get out of it, needs the pipeline's output to drive the market.
:class:`Simulator` does that, one step at a time:

1. the market step of step ``t`` sizes new positions with ``kelly_f(t-1)``, the
   value the engine wrote at the previous step (the spec's one-step lag);
2. its rewards, lots, full-Kelly edge, cooldown, worst session pnl and τ are
   step ``t``'s stream inputs; a :class:`StepEngine` runs the spec's kernels on
   them and returns the diag snapshot, which holds ``kelly_f(t)``.

The market and the agent are a **model**; the spec describes neither. b accounts
each hold 0 or some lots. A flat account opens with probability ``pi_open``
whenever kelly_f > 0 and no cooldown runs, with ⌈base_lots·kelly_f⌉ lots (the
spec's position sizing). An open position closes with hazard ``hazard`` per
step and then wins ``win``·lots with probability p_true(t), else loses
``loss``·lots (each times a mean-one lognormal jitter). The reward is the
realized pnl × ``reward_scale``; nothing unrealized is rewarded. Each close
updates, in account order, the win-rate EMA and the win-size or loss-size EMA
(per lot), and the edge fed to the pipeline is p − (1−p)·L/W from them
(the analytic Kelly of docs/CONTRACTS.md before its safety fraction and clamp,
which the engine applies). Session pnl is tracked per account with its running worst;
the stream's ``session_pnl_worst`` is the worst of those. An account whose
session pnl first falls below −``drawdown_limit`` starts a cooldown of
``cooldown_steps`` during which nobody opens. ``reset_session_state`` (a fold
boundary) zeroes session pnl, worst and cooldown; positions are carried over.

Randomness is counter-based: account ``i``'s draws at step ``t`` come from Philox
keyed by the seed with the counter at ``(t, i)`` (:func:`account_rng`; made in numba by
:mod:`regime_dash.sources.market_jit`), and every step draws the same arrays whatever the state,
so a run is a function of (seed, schedule, market, config) alone and is the same on every
engine, whatever was injected before.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from regime_dash.diag import catalogue as diag
from regime_dash.core.config import RegimeConfig
from regime_dash.engine import initial_isv
from regime_dash.engine.stepper_choice import make_stepper
from regime_dash.engine.steppers import StepEngine, StepInputs
from regime_dash.errors import ValidationError
# the market model's parameters, schedules and presets, found here as before
from regime_dash.sources.market import PRESETS, RUN8_SHOCK_PNL, Market, Schedule, SimPreset  # noqa: F401
from regime_dash.core.slots import DEFAULT_LAYOUT, SlotLayout
from regime_dash.core.streams import Stream

def _check_fresh(engine: object) -> None:
    """ValidationError unless ``engine`` is a step engine that has run no step yet.

    :meth:`Simulator.frame` lines the engine's trajectory up with the
    simulator's own per-step records, so an engine that already ran steps
    would give a frame of mismatched columns.
    """
    if not all(callable(getattr(engine, m, None)) for m in ("step", "trajectory")):
        raise ValidationError(f"engine must be an engine name or a StepEngine, got {type(engine).__name__}",
                              field="engine", value=type(engine).__name__)
    ran = len(engine.trajectory()[1])
    if ran:
        raise ValidationError(f"the engine has already run {ran} step(s); pass a fresh StepEngine "
                              "(one that has run no step) to a new Simulator", field="engine", value=ran)


def account_rng(seed: int, t: int, account: int) -> np.random.Generator:
    """The generator of account ``account`` at step ``t`` (``account`` -1: the step's τ): Philox keyed
    by ``seed``, counter words 1 and 2 = ``t`` and ``account + 1``.

    Draws within a stream advance counter word 0 only, so no two (step, account) pairs share a
    counter and a draw never depends on what other steps or accounts drew.
    """
    return np.random.Generator(np.random.Philox(key=seed, counter=[0, t, account + 1, 0]))


def ema_over(ema: float, xs: np.ndarray, alpha: float) -> float:
    """``ema`` after ``ema ← (1−α)·ema + α·x`` for each x of ``xs`` in order (closed form)."""
    k = len(xs)
    if k == 0:
        return ema
    keep = 1.0 - alpha
    weights = alpha * keep ** np.arange(k - 1, -1, -1, dtype=np.float64)
    return float(keep ** k * ema + weights @ np.asarray(xs, dtype=np.float64))


def kelly_edge(p: float, w: float, l: float) -> float:
    """Full-Kelly edge p − (1−p)·L/W (docs/CONTRACTS.md's analytic Kelly before safety_frac and clamp)."""
    return p - (1.0 - p) * l / w


@dataclass
class Draws:
    """One step's random numbers, all [b] except ``tau``."""

    close: np.ndarray
    win: np.ndarray
    open: np.ndarray
    size: np.ndarray
    tau: float

    @classmethod
    def of(cls, seed: int, t: int, b: int) -> "Draws":
        """Step ``t``'s draws: per account :func:`account_rng`'s ``random()`` ×3 and ``standard_normal()``
        (close, win, open, size), then the τ stream's ``random()``; made in numba, the same numbers."""
        from regime_dash.sources import market_jit

        return cls(*market_jit.draws(seed, t, b))


@dataclass
class MarketState:
    """Everything the market carries from one step to the next."""

    lots: np.ndarray
    session: np.ndarray
    session_worst: np.ndarray
    tripped: np.ndarray
    p_ema: float
    w_ema: float
    l_ema: float
    cooldown: int = 0
    cum_pnl: float = 0.0

    @classmethod
    def start(cls, market: Market, b: int) -> "MarketState":
        return cls(np.zeros(b, np.int32), np.zeros(b), np.zeros(b), np.zeros(b, bool),
                   market.p_ema0, market.win, market.loss)

    def reset_session(self) -> None:
        """The market side of reset_session_state: session pnl, worst and cooldown back to 0."""
        self.session[:] = 0.0
        self.session_worst[:] = 0.0
        self.tripped[:] = False
        self.cooldown = 0


@dataclass
class MarketStep:
    """One market step's outputs: the stream inputs and what the diag does not show."""

    rewards: np.ndarray
    lots: np.ndarray
    edge: np.float32
    cooldown: np.float32
    worst: np.float32
    tau_action: np.float32
    closes: int
    wins: int
    pnl: float


def market_step(state: MarketState, market: Market, draws: Draws, *, p_true: float, kelly_f: float,
                force_flat: bool = False, shock_account: int | None = None,
                allow_open: bool = True) -> MarketStep:
    """Advance ``state`` by one step (mutates it) and return the step's stream inputs.

    ``kelly_f`` is the previous step's pipeline output; ``force_flat`` closes
    every open position; ``shock_account`` takes a ``market.shock_pnl`` loss
    (model: an external hit such as a forced liquidation, so it moves pnl,
    reward and session pnl but no trade EMA). ``allow_open=False`` blocks opens
    whatever kelly_f says (scripted streams use it).
    """
    b = state.lots.shape[0]
    if shock_account is not None and not 0 <= shock_account < b:
        raise ValidationError(f"shock account {shock_account} is not in [0, {b})", field="account",
                              value=shock_account)
    state.cooldown = max(state.cooldown - 1, 0)
    held = state.lots > 0
    closing = held if force_flat else held & (draws.close < market.hazard)
    won = closing & (draws.win < p_true)
    factor = np.exp(market.jitter * draws.size - 0.5 * market.jitter ** 2)
    per_lot = np.where(won, market.win, -market.loss) * factor
    pnl = np.where(closing, per_lot * state.lots, 0.0)
    lots = np.where(closing, 0, state.lots).astype(np.int32)

    if allow_open and kelly_f > 0.0 and state.cooldown == 0:
        opening = ~held & (draws.open < market.pi_open)
        size = math.ceil(market.base_lots * float(kelly_f))
        lots = np.where(opening, size, lots).astype(np.int32)

    if shock_account is not None:
        pnl[shock_account] -= market.shock_pnl

    idx = np.flatnonzero(closing)
    wins = idx[won[idx]]
    losses = idx[~won[idx]]
    state.p_ema = ema_over(state.p_ema, won[idx].astype(np.float64), market.ema_alpha)
    state.w_ema = ema_over(state.w_ema, np.abs(per_lot[wins]), market.ema_alpha)
    state.l_ema = ema_over(state.l_ema, np.abs(per_lot[losses]), market.ema_alpha)

    state.lots = lots
    state.session += pnl
    np.minimum(state.session_worst, state.session, out=state.session_worst)
    if market.drawdown_limit > 0:
        newly = (state.session < -market.drawdown_limit) & ~state.tripped
        if newly.any():
            state.tripped |= newly
            state.cooldown = int(market.cooldown_steps)
    step_pnl = float(pnl.sum())
    state.cum_pnl += step_pnl
    tau = market.tau_lo + (market.tau_hi - market.tau_lo) * draws.tau
    return MarketStep(
        rewards=(pnl * market.reward_scale).astype(np.float32),
        lots=lots,
        edge=np.float32(kelly_edge(state.p_ema, state.w_ema, state.l_ema)),
        cooldown=np.float32(state.cooldown),
        worst=np.float32(state.session_worst.min()),
        tau_action=np.float32(tau),
        closes=int(len(idx)), wins=int(len(wins)), pnl=step_pnl)


def stream_of(steps: list[MarketStep], boundary: list[bool]) -> Stream:
    """The :class:`Stream` of consecutive market steps (step numbers 0..n-1)."""
    if not steps:
        raise ValidationError("no market step to make a stream of", field="steps", value=0)
    return Stream(rewards=np.vstack([o.rewards for o in steps]), lots=np.vstack([o.lots for o in steps]),
                  kelly_analytic=np.array([o.edge for o in steps], np.float32),
                  cooldown=np.array([o.cooldown for o in steps], np.float32),
                  session_pnl_worst=np.array([o.worst for o in steps], np.float32),
                  tau_action=np.array([o.tau_action for o in steps], np.float32),
                  boundary=np.array(boundary, bool), step=np.arange(len(steps), dtype=np.int64))


class StepRecords:
    """Per-step records as columns of fixed dtypes, added a row at a time (a Python step) or a block
    of rows at a time (the compiled loop's), kept in step order."""

    def __init__(self, dtypes: dict[str, type]):
        self.dtypes = dtypes
        self._rows: list[tuple] = []
        self._blocks: list[tuple[np.ndarray, ...]] = []

    def add_row(self, row: tuple) -> None:
        self._rows.append(row)

    def add_block(self, columns: tuple[np.ndarray, ...]) -> None:
        self._flush()
        self._blocks.append(columns)

    def _flush(self) -> None:
        if self._rows:
            self._blocks.append(tuple(np.array([row[j] for row in self._rows], dtype=d)
                                      for j, d in enumerate(self.dtypes.values())))
            self._rows = []

    def __len__(self) -> int:
        return len(self._rows) + sum(len(block[0]) for block in self._blocks)

    def columns(self) -> dict[str, np.ndarray]:
        """Every record so far, a column each (nothing recorded: no rows, no columns)."""
        self._flush()
        if not self._blocks:
            return {}
        return {name: np.concatenate([block[j] for block in self._blocks]).astype(d, copy=False)
                for j, (name, d) in enumerate(self.dtypes.items())}


#: :meth:`Simulator.market_frame`'s columns and their dtypes.
MARKET_COLUMNS = {"step": np.int64, "p_true": np.float64, "closes": np.int64, "wins": np.int64,
                  "open_accounts": np.int64, "pnl": np.float64, "cum_pnl": np.float64, "shock": np.bool_,
                  "forced_flat": np.bool_}
#: What :meth:`Simulator.stream` keeps a step: its rewards and lots rows and its scalar inputs.
STREAM_COLUMNS = {"rewards": np.float32, "lots": np.int32, "kelly_analytic": np.float32, "cooldown": np.float32,
                  "session_pnl_worst": np.float32, "tau_action": np.float32}


# ---- the closed loop -----------------------------------------------------------------
class Simulator:
    """The live run: :func:`market_step` and a :class:`StepEngine` in a closed loop.

    Parameters
    ----------
    accounts
        b, the number of accounts.
    seed
        Key of the counter-based RNG (an int >= 0).
    config
        The pipeline's config (resurrection on or off, ε range, max_duration, ...).
    market, schedule
        The market model and what happens when; defaults are a calm market.
    engine
        ``reference`` (default), ``cuda`` (the GPU stepper), ``fast``, ``auto``
        (the faster stepper here, measured), or a fresh :class:`StepEngine` built
        on the same config and layout (it keeps the trajectory :meth:`frame` reads;
        one that has already run steps is a :class:`ValidationError`).
    layout
        Slot layout; default :data:`regime_dash.core.slots.DEFAULT_LAYOUT`.
    keep_stream
        Keep every step's rewards and lots so :meth:`stream` can return them
        (8·b bytes a step); turn off for long live runs that only need the frame.

    Examples
    --------
    >>> sim = Simulator(accounts=64, seed=1, schedule=PRESETS["adverse_regime"].schedule(3000))
    >>> frame = sim.run(3000)          # same columns as replay()
    >>> sim.force_flat(); sim.step()   # the app's Live page drives it step by step
    """

    def __init__(self, *, accounts: int = 64, seed: int = 0, config: RegimeConfig | None = None,
                 market: Market | None = None, schedule: Schedule | None = None,
                 engine: str | StepEngine = "reference", layout: SlotLayout | None = None,
                 keep_stream: bool = True):
        if isinstance(accounts, bool) or not isinstance(accounts, (int, np.integer)) or accounts < 1:
            raise ValidationError(f"accounts must be an int >= 1, got {accounts!r}", field="accounts",
                                  value=accounts)
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2 ** 64:
            raise ValidationError(f"seed must be an int in [0, 2**64), got {seed!r}", field="seed",
                                  value=seed)
        self.config = RegimeConfig() if config is None else config
        if not isinstance(self.config, RegimeConfig):
            raise ValidationError(f"config must be a RegimeConfig, got {type(self.config).__name__}",
                                  field="config", value=type(self.config).__name__)
        self.market = Market() if market is None else market
        self.schedule = Schedule() if schedule is None else schedule
        self.accounts = int(accounts)
        self.seed = int(seed)
        self.layout = (layout or DEFAULT_LAYOUT).validate()
        isv0, boot = initial_isv(self.config, None, self.layout)
        self.engine = engine if not isinstance(engine, str) else make_stepper(engine, isv0, boot, self.layout,
                                                                              self.accounts)
        if not isinstance(engine, str):
            _check_fresh(engine)
        self.kelly_f = float(isv0[self.layout.index("RL_KELLY_FRACTION_INDEX")])
        self.state = MarketState.start(self.market, self.accounts)
        self.t = 0
        self.keep_stream = bool(keep_stream)
        self._pending_shock: int | None = None
        self._pending_flat = False
        self._pending_boundary = False
        self._boundary: list[bool] = []
        self._market_rows = StepRecords(MARKET_COLUMNS)
        self._steps = StepRecords(STREAM_COLUMNS)

    # ---- injections (take effect at the next step) ----------------------------------
    def inject_tail_shock(self, account: int | None = None) -> None:
        """Make one account take a ``market.shock_pnl`` loss at the next step (Theorem 6's case).

        ``account`` defaults to the account with the most lots (the first such).
        """
        if account is not None and not 0 <= account < self.accounts:
            raise ValidationError(f"account {account} is not in [0, {self.accounts})", field="account",
                                  value=account)
        self._pending_shock = int(np.argmax(self.state.lots)) if account is None else int(account)

    def force_flat(self) -> None:
        """Close every open position at the next step (at market: wins and losses as usual)."""
        self._pending_flat = True

    def cross_boundary(self) -> None:
        """Cross a fold boundary before the next step, so reset_session_state runs there."""
        self._pending_boundary = True

    # ---- stepping --------------------------------------------------------------------------
    def step(self, n: int = 1, *, compiled: bool | None = None) -> None:
        """Advance the closed loop by ``n`` steps.

        On the ``fast`` stepper the steps run in one compiled loop
        (:mod:`regime_dash.sources.simulator_jit`), bit for bit the steps of the Python path; a step
        with an injection pending runs on the Python path. ``compiled``: None (default) the
        loop, except a stretch of fewer than ``simulator_jit.PYTHON_WHILE_COMPILING`` steps
        while the loop is not compiled yet (those run on the Python path, and the compile
        starts in the background); False the Python path; True the loop (a ValidationError
        on another stepper).
        """
        n = int(n)
        if n > 0 and (self._pending_shock is not None or self._pending_flat or self._pending_boundary):
            self._one()
            n -= 1
        if n > 0 and self._compiled(n, compiled):
            from regime_dash.sources import simulator_jit

            with simulator_jit.announced():
                simulator_jit.run(self, n)
            return
        for _ in range(n):
            self._one()

    def _compiled(self, n: int, compiled: bool | None) -> bool:
        """Whether ``n`` plain steps run in the compiled loop (see :meth:`step`)."""
        from regime_dash.sources import simulator_jit
        from regime_dash.engine.steppers import BackendStepper

        host_fast = isinstance(self.engine, BackendStepper) and self.engine.name == "fast"
        if compiled is None:
            if not host_fast:
                return False
            if simulator_jit.is_compiled() or n >= simulator_jit.PYTHON_WHILE_COMPILING:
                return True
            simulator_jit.start_compile(compile_loop)
            return False
        if compiled and not host_fast:
            raise ValidationError(f"the compiled loop runs on the 'fast' stepper, not {self.engine.name!r}",
                                  field="engine", value=self.engine.name)
        return bool(compiled)

    def record_block(self, steps: np.ndarray, p_true: np.ndarray, boundary: np.ndarray, shock: np.ndarray,
                     counts: np.ndarray, money: np.ndarray, stream: tuple[np.ndarray, ...] | None) -> None:
        """Take the records of steps the compiled loop ran: ``counts`` [k, 3] closes, wins, open accounts;
        ``money`` [k, 2] pnl, cum_pnl; ``stream`` (rewards, lots, the [k, 4] edge, cooldown, worst, τ) or None."""
        self._boundary.extend(boundary.tolist())
        self._market_rows.add_block((steps, p_true, counts[:, 0], counts[:, 1], counts[:, 2], money[:, 0],
                                     money[:, 1], shock, np.zeros(len(steps), np.bool_)))
        if self.keep_stream and stream is not None:
            rewards, lots, inputs = stream
            self._steps.add_block((rewards, lots, inputs[:, 0], inputs[:, 1], inputs[:, 2], inputs[:, 3]))
        self.t += len(steps)

    def _one(self) -> None:
        t = self.t
        boundary = self._pending_boundary or self.schedule.is_boundary(t)
        shock = self._pending_shock
        if shock is None and self.schedule.is_shock(t):
            shock = int(np.argmax(self.state.lots))
        if boundary:
            self.state.reset_session()
        p = self.schedule.p_at(t)
        out = market_step(self.state, self.market, Draws.of(self.seed, t, self.accounts), p_true=p,
                          kelly_f=self.kelly_f, force_flat=self._pending_flat, shock_account=shock)
        inputs = StepInputs(bool(boundary), out.cooldown, out.worst, out.edge, out.tau_action, t)
        self.kelly_f = self.engine.step(out.rewards, out.lots, inputs)  # the one value read back a step
        self._boundary.append(bool(boundary))
        if self.keep_stream:
            self._steps.add_row((out.rewards, out.lots, out.edge, out.cooldown, out.worst, out.tau_action))
        self._market_rows.add_row((t, p, out.closes, out.wins, int(np.count_nonzero(out.lots)),
                                   out.pnl, self.state.cum_pnl, shock is not None, self._pending_flat))
        self._pending_shock = None
        self._pending_flat = False
        self._pending_boundary = False
        self.t = t + 1

    def run(self, steps: int) -> pd.DataFrame:
        """Advance ``steps`` steps and return :meth:`frame` (all steps so far)."""
        if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
            raise ValidationError(f"steps must be an int >= 0, got {steps!r}", field="steps", value=steps)
        self.step(steps)
        return self.frame()

    # ---- outputs -------------------------------------------------------------------------
    def frame(self) -> pd.DataFrame:
        """The trajectory so far, with exactly the columns :func:`regime_dash.replay` gives."""
        snap, flat = self.engine.trajectory()
        n = len(flat)
        frame = diag.frame_from_snapshot(snap, flat, self.accounts,
                                         np.arange(n, dtype=np.int64), np.array(self._boundary, bool), self.config)
        frame.attrs["layout_fingerprint"] = self.layout.fingerprint_hex()
        frame.attrs["engine"] = self.engine.name
        return frame

    def market_frame(self) -> pd.DataFrame:
        """What the diag does not show: p_true, closes, wins, open accounts, pnl, injections."""
        columns = self._market_rows.columns()
        if not columns:
            return pd.DataFrame([], columns=list(MARKET_COLUMNS))
        return pd.DataFrame(columns)

    def stream(self) -> Stream:
        """The inputs fed to the pipeline so far; replaying them gives :meth:`frame` again."""
        if not self.keep_stream:
            raise ValidationError("this simulator was made with keep_stream=False", field="keep_stream",
                                  value=False)
        kept = self._steps.columns()
        if not kept:
            raise ValidationError("no market step to make a stream of", field="steps", value=0)
        return Stream(**kept, boundary=np.array(self._boundary, bool), step=np.arange(len(self._boundary),
                                                                                       dtype=np.int64))

    @property
    def isv(self) -> np.ndarray:
        """The engine's ISV buffer now."""
        return self.engine.isv


def compile_loop() -> None:
    """Compile (or load from numba's disk cache) the simulator's compiled loop, by a one-account, one-step run."""
    Simulator(accounts=1, engine="fast").step(1, compiled=True)


def simulate(name: str, *, steps: int | None = None, accounts: int | None = None, seed: int = 0,
             config: RegimeConfig | None = None, engine: str | StepEngine = "reference",
             keep_stream: bool = True) -> Simulator:
    """Run preset ``name`` for ``steps`` steps and return the simulator (``.frame()`` has the diag;
    ``keep_stream`` as :class:`Simulator`'s)."""
    if name not in PRESETS:
        raise ValidationError(f"unknown live-run preset {name!r}; choose one of {sorted(PRESETS)}",
                              field="simulate", value=name)
    preset = PRESETS[name]
    steps = preset.steps if steps is None else steps
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValidationError(f"steps must be an int >= 1, got {steps!r}", field="steps", value=steps)
    sim = Simulator(accounts=preset.accounts if accounts is None else accounts, seed=seed, config=config,
                    market=preset.market, schedule=preset.schedule(int(steps)), engine=engine,
                    keep_stream=keep_stream)
    sim.step(int(steps))
    return sim
