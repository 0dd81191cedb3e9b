"""The closed loop's compiled steps against the Python path, bit for bit."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from regime_dash.sources import simulator_jit
from regime_dash.core.config import RegimeConfig
from regime_dash.errors import ValidationError
from regime_dash.sources.simulator import PRESETS, Market, Schedule, Simulator, ema_over


def _pair(steps: int, accounts: int, **kw) -> tuple[Simulator, Simulator]:
    """The same run on the Python path and in the compiled loop (both on the fast stepper)."""
    runs = []
    for compiled in (False, True):
        sim = Simulator(accounts=accounts, engine="fast", **kw)
        sim.step(steps, compiled=compiled)
        runs.append(sim)
    return runs[0], runs[1]


def _assert_same(python: Simulator, jit: Simulator) -> None:
    pd.testing.assert_frame_equal(jit.frame(), python.frame(), check_exact=True)
    pd.testing.assert_frame_equal(jit.market_frame(), python.market_frame(), check_exact=True)
    a, b = python.stream(), jit.stream()
    for name in ("rewards", "lots", "kelly_analytic", "cooldown", "session_pnl_worst", "tau_action", "boundary"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x.view(np.uint8), y.view(np.uint8)), name
    np.testing.assert_array_equal(jit.isv.view(np.uint32), python.isv.view(np.uint32))
    for f in ("p_ema", "w_ema", "l_ema", "cooldown", "cum_pnl"):
        assert getattr(jit.state, f) == getattr(python.state, f), f
    assert jit.kelly_f == python.kelly_f and jit.t == python.t


@pytest.mark.parametrize("name", sorted(PRESETS))
@pytest.mark.parametrize("accounts", [1, 3, 7])
def test_every_preset_is_bit_identical_to_the_python_path(name, accounts):
    steps = 300
    preset = PRESETS[name]
    python, jit = _pair(steps, accounts, seed=5, market=preset.market, schedule=preset.schedule(steps))
    _assert_same(python, jit)


def test_many_closes_a_step_leave_that_step_to_the_python_path():
    """b = 300 with a high hazard: steps of 16 closes or more (BLAS's blocked dot) happen, each on the
    Python path inside the compiled run; a drawdown cooldown and a boundary are crossed too."""
    market = Market(hazard=0.3, pi_open=0.9, drawdown_limit=3000.0, cooldown_steps=7)
    schedule = Schedule(((0, 0.5), (60, 0.4)), boundaries=(80,), shocks=(30, 90))
    python, jit = _pair(120, 300, seed=2, market=market, schedule=schedule, config=RegimeConfig(max_duration=50))
    assert (python.market_frame().closes >= simulator_jit.sequential_dot_max()).any()
    _assert_same(python, jit)


def test_injections_and_stretches_mix_with_the_python_path():
    def drive(compiled: bool) -> Simulator:
        sim = Simulator(accounts=5, seed=9, engine="fast", schedule=PRESETS["tail_shock"].schedule(200))
        sim.step(40, compiled=compiled)
        sim.inject_tail_shock()
        sim.step(30, compiled=compiled)
        sim.force_flat()
        sim.cross_boundary()
        sim.step(50, compiled=compiled)
        return sim

    _assert_same(drive(False), drive(True))


def test_the_pairwise_sum_and_the_ema_tables_are_numpys():
    from numba import njit

    total = njit(lambda a: simulator_jit.pairwise_sum(a, 0, a.shape[0]))
    rng = np.random.default_rng(0)
    for n in (1, 7, 8, 9, 127, 128, 129, 300, 1025):
        x = rng.standard_normal(n) * 1000.0
        x[rng.random(n) < 0.5] = 0.0
        assert total(x) == float(x.sum())
    keep_pow, weights = simulator_jit.ema_tables(0.02, simulator_jit.sequential_dot_max())
    xs = rng.random(len(keep_pow) - 1) * 2000.0
    for k in range(1, len(keep_pow)):
        assert keep_pow[k] * 0.3 + float(weights[k, :k] @ xs[:k]) == ema_over(0.3, xs[:k], 0.02)


def test_the_compiled_loop_needs_the_fast_stepper():
    sim = Simulator(accounts=2, engine="reference")
    with pytest.raises(ValidationError, match="'reference'"):
        sim.step(3, compiled=True)
    sim.step(3)  # the reference stepper keeps the Python path
    assert sim.t == 3


def test_keep_stream_off_keeps_no_rows_and_the_same_frame():
    kept = Simulator(accounts=4, seed=3, engine="fast")
    kept.step(200, compiled=True)
    lean = Simulator(accounts=4, seed=3, engine="fast", keep_stream=False)
    lean.step(200, compiled=True)
    pd.testing.assert_frame_equal(lean.frame(), kept.frame(), check_exact=True)
    with pytest.raises(ValidationError, match="keep_stream"):
        lean.stream()
