"""The synthetic market's model, a model the spec leaves out: its parameters (:class:`Market`),
what happens when (:class:`Schedule`) and the named live-run setups (:data:`PRESETS`).

Its own module, light to import (NumPy, no pandas, no engine): a command lists the presets
and generates a scenario while it still loads the engine. :mod:`regime_dash.sources.simulator` steps
the market in the closed loop, :mod:`regime_dash.sources.market_jit` in the scripted presets.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Callable

import numpy as np

from regime_dash.errors import ValidationError

#: ``on_block(lo, hi, rewards, lots)``: rows ``lo .. hi`` of a run's [T, b] arrays are made (final).
BlockSink = Callable[[int, int, np.ndarray, np.ndarray], None]

#: Run #8's tail: a $6484 loss, −19.45 after reward_scale 0.003 (Theorem 6).
RUN8_SHOCK_PNL = 6484.0


@dataclass(frozen=True)
class Market:
    """Parameters of the synthetic market and agent (a model; :mod:`regime_dash.sources.simulator` describes it).

    Attributes
    ----------
    base_lots
        Position size at kelly_f = 1; a position is ⌈base_lots·kelly_f⌉ lots.
    pi_open
        Probability that a flat account opens in a step when it may.
    hazard
        Probability that an open position closes in a step.
    win, loss
        W and L: pnl per lot of a winning and a losing close, in dollars.
    jitter
        σ of the mean-one lognormal factor on each close's size (0 = fixed W, L).
    reward_scale
        Reward per dollar of realized pnl (Run #8: 0.003).
    ema_alpha
        Weight of one close in the win-rate and win/loss-size EMAs.
    p_ema0
        Win-rate EMA at the start (the win/loss EMAs start at W and L).
    drawdown_limit
        Session-pnl drawdown (dollars, > 0) that starts a cooldown; 0 turns it off.
    cooldown_steps
        Length of that cooldown.
    tau_lo, tau_hi
        The policy's IQN τ is uniform on [tau_lo, tau_hi) each step.
    shock_pnl
        Size of an injected tail shock, in dollars (default Run #8's $6484).
    """

    base_lots: float = 4.0
    pi_open: float = 0.3
    hazard: float = 0.05
    win: float = 1000.0
    loss: float = 1000.0
    jitter: float = 0.25
    reward_scale: float = 0.003
    ema_alpha: float = 0.02
    p_ema0: float = 0.55
    drawdown_limit: float = 0.0
    cooldown_steps: int = 50
    tau_lo: float = 0.0
    tau_hi: float = 0.2
    shock_pnl: float = RUN8_SHOCK_PNL

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValidationError(f"market {f.name}={v!r} is not a finite number", field=f.name, value=v)
        for name in ("pi_open", "hazard", "p_ema0"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValidationError(f"market {name}={getattr(self, name)!r} is outside [0, 1]",
                                      field=name, value=getattr(self, name))
        if not 0.0 < self.ema_alpha <= 1.0:
            raise ValidationError(f"market ema_alpha={self.ema_alpha!r} is outside (0, 1]",
                                  field="ema_alpha", value=self.ema_alpha)
        for name in ("base_lots", "win", "loss", "reward_scale"):
            if getattr(self, name) <= 0:
                raise ValidationError(f"market {name}={getattr(self, name)!r} must be > 0",
                                      field=name, value=getattr(self, name))
        for name in ("jitter", "drawdown_limit", "cooldown_steps", "shock_pnl"):
            if getattr(self, name) < 0:
                raise ValidationError(f"market {name}={getattr(self, name)!r} must be >= 0",
                                      field=name, value=getattr(self, name))
        if self.cooldown_steps != int(self.cooldown_steps):
            raise ValidationError(f"market cooldown_steps={self.cooldown_steps!r} must be a whole number",
                                  field="cooldown_steps", value=self.cooldown_steps)
        if not 0.0 <= self.tau_lo <= self.tau_hi <= 1.0:
            raise ValidationError(f"market tau range [{self.tau_lo!r}, {self.tau_hi!r}) is not inside [0, 1]",
                                  field="tau_lo", value=(self.tau_lo, self.tau_hi))


@dataclass(frozen=True)
class Schedule:
    """What happens when: the regimes (p_true over time), fold boundaries and tail shocks.

    Attributes
    ----------
    p_true
        ``((start_step, p), ...)``: p_true is ``p`` from ``start_step`` on, until
        the next entry. The first entry must start at step 0.
    boundaries
        Steps before which reset_session_state runs.
    shocks
        Steps at which one account takes a ``Market.shock_pnl`` loss.
    """

    p_true: tuple[tuple[int, float], ...] = ((0, 0.56),)
    boundaries: tuple[int, ...] = ()
    shocks: tuple[int, ...] = ()

    def __post_init__(self):
        if not self.p_true or self.p_true[0][0] != 0:
            raise ValidationError(f"schedule p_true={self.p_true!r} must start at step 0",
                                  field="p_true", value=self.p_true)
        starts = [s for s, _ in self.p_true]
        if any(b <= a for a, b in zip(starts, starts[1:])):
            raise ValidationError(f"schedule p_true starts {starts} must increase", field="p_true",
                                  value=starts)
        for s, p in self.p_true:
            if not 0.0 <= p <= 1.0:
                raise ValidationError(f"schedule p_true {p!r} at step {s} is outside [0, 1]",
                                      field="p_true", value=p)
        object.__setattr__(self, "_starts", np.array(starts, dtype=np.int64))
        object.__setattr__(self, "_ps", np.array([p for _, p in self.p_true], dtype=np.float64))
        object.__setattr__(self, "_boundaries", frozenset(int(b) for b in self.boundaries))
        object.__setattr__(self, "_shocks", frozenset(int(s) for s in self.shocks))

    def p_at(self, t: int) -> float:
        """p_true at step ``t``."""
        return float(self._ps[np.searchsorted(self._starts, t, side="right") - 1])

    def is_boundary(self, t: int) -> bool:
        return t in self._boundaries

    def is_shock(self, t: int) -> bool:
        return t in self._shocks

    def arrays(self, t0: int, t1: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Steps ``t0 .. t1``'s p_true (float64), boundary and shock flags (bool): :meth:`p_at`,
        :meth:`is_boundary` and :meth:`is_shock` of each."""
        t = np.arange(t0, t1, dtype=np.int64)
        p = self._ps[np.searchsorted(self._starts, t, side="right") - 1]
        return (p, np.isin(t, np.fromiter(self._boundaries, np.int64)),
                np.isin(t, np.fromiter(self._shocks, np.int64)))


# ---- presets -----------------------------------------------------------------------------
@dataclass(frozen=True)
class SimPreset:
    """A named live-run setup: a schedule built for a run length, a market, default sizes."""

    name: str
    doc: str
    schedule: Callable[[int], Schedule]
    market: Market = Market()
    steps: int = 3000
    accounts: int = 64


PRESETS: dict[str, SimPreset] = {p.name: p for p in (
    SimPreset("calm", "p_true 0.6 throughout with slow EMAs: kelly_f stays positive and the dead "
              "zone never fires.", lambda T: Schedule(((0, 0.60),)), market=Market(ema_alpha=0.005)),
    SimPreset("adverse_regime",
              "favourable (p 0.6) for the first 10 %, adverse (p 0.35) until half way, then favourable "
              "(p 0.62). Without resurrection the run falls into the absorbing state during the adverse "
              "stretch and never leaves it; with it, probes find the good regime and trading resumes.",
              lambda T: Schedule(((0, 0.60), (T // 10, 0.35), (T // 2, 0.62)))),
    SimPreset("tail_shock", "calm, with one account taking Run #8's $6484 loss half way (Theorem 6).",
              lambda T: Schedule(((0, 0.56),), shocks=(T // 2,))),
    SimPreset("fold_boundary", "train (p 0.56) then eval (p 0.53) from half way; reset_session_state "
              "runs at the boundary.", lambda T: Schedule(((0, 0.56), (T // 2, 0.53)), boundaries=(T // 2,))),
)}
