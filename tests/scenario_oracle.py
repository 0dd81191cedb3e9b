"""The scripted presets stepped the way they were before the compiled market: one
``simulator.market_step`` of NumPy calls a step. The oracle of ``market_jit.scripted``."""
from __future__ import annotations

import numpy as np

from regime_dash.sources.scenarios import RUN8_TRAP_STEPS, SCRIPTED_KELLY
from regime_dash.sources.simulator import Draws, Market, MarketState, kelly_edge, market_step, stream_of


class Recorder:
    def __init__(self, seed: int, accounts: int, market: Market):
        self.seed, self.b, self.market = seed, accounts, market
        self.state = MarketState.start(market, accounts)
        self.edge = kelly_edge(market.p_ema0, market.win, market.loss)
        self.rows: list = []
        self.boundary: list[bool] = []

    def step(self, p_true: float, *, allow_open: bool = True, force_flat: bool = False,
             boundary: bool = False) -> None:
        t = len(self.rows)
        if boundary:
            self.state.reset_session()
        kelly_f = SCRIPTED_KELLY if self.edge > 0 else 0.0
        out = market_step(self.state, self.market, Draws.of(self.seed, t, self.b), p_true=p_true,
                          kelly_f=kelly_f, force_flat=force_flat, allow_open=allow_open)
        self.edge = float(out.edge)
        self.rows.append(out)
        self.boundary.append(boundary)


def calm(seed, steps, accounts):
    rec = Recorder(seed, accounts, Market(ema_alpha=0.005))
    for _ in range(steps):
        rec.step(0.6)
    return stream_of(rec.rows, rec.boundary)


def kelly_trap_run8(seed, steps, accounts):
    rec = Recorder(seed, accounts, Market(ema_alpha=0.005))
    t_adverse, t_trap = (steps - RUN8_TRAP_STEPS) // 5, steps - RUN8_TRAP_STEPS
    dead = False
    for t in range(steps):
        adverse = t >= t_adverse
        dead = dead or (adverse and rec.edge <= 0.0)
        rec.step(0.3 if adverse else 0.6, allow_open=not dead, force_flat=(t == t_trap - 1))
    return stream_of(rec.rows, rec.boundary)


def fold_boundary(seed, steps, accounts):
    rec = Recorder(seed, accounts, Market(ema_alpha=0.005))
    for t in range(steps):
        rec.step(0.6 if t < steps // 2 else 0.57, boundary=(t == steps // 2))
    return stream_of(rec.rows, rec.boundary)


def adverse_regime(seed, steps, accounts):
    rec = Recorder(seed, accounts, Market(hazard=0.0015, ema_alpha=0.05))
    for t in range(steps):
        rec.step(0.6 if t < steps // 10 else 0.3 if t < 35 * steps // 100 else 0.85)
    return stream_of(rec.rows, rec.boundary)


PRESETS = {"calm": calm, "kelly_trap_run8": kelly_trap_run8, "fold_boundary": fold_boundary,
           "adverse_regime": adverse_regime}
