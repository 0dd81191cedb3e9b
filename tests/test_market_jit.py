"""The scripted market stepped in numba: NumPy's Philox draws word for word, the NumPy step's streams bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

from regime_dash.sources import market_jit
from regime_dash.sources import scenarios
from regime_dash.sources.simulator import Draws, Market, account_rng, stream_of
from tests import scenario_oracle


def _numpy_draws(seed, t, b):
    """Step t's draws from NumPy's own Philox generators, one per account and one for τ."""
    rows = []
    for i in range(b):
        g = account_rng(seed, t, i)
        rows.append((*g.random(3), g.standard_normal()))
    close, win, opn, size = (np.array(c) for c in zip(*rows))
    return close, win, opn, size, float(account_rng(seed, t, -1).random())


@pytest.mark.parametrize("seed,t,b", [(0, 0, 128), (7, 12345, 64), (2 ** 63 + 5, 999_999, 301), (1, 2, 1),
                                      (2 ** 64 - 1, 3, 5)])
def test_draws_are_numpys_philox_draws(seed, t, b):
    want = _numpy_draws(seed, t, b)
    got = market_jit.draws(seed, t, b)
    for g, w in zip(got[:4], want[:4]):
        assert np.array_equal(g, w)
    assert got[4] == want[4]
    sim = Draws.of(seed, t, b)
    assert all(np.array_equal(a, x) for a, x in zip((sim.close, sim.win, sim.open, sim.size, sim.tau), got))


def test_normals_take_numpys_rare_paths_too():
    # 300 steps × 200 normals: the wedge and the tail of the ziggurat (about 1 % of draws, some reading a
    # second block) are met
    for t in range(300):
        assert np.array_equal(market_jit.draws(11, t, 200)[3], _numpy_draws(11, t, 200)[3])


def _same(a, b) -> None:
    for k, x in a.arrays().items():
        assert np.array_equal(x, b.arrays()[k]), k


def test_the_scripted_presets_are_those_the_oracle_steps():
    assert scenarios.SCRIPTED == set(scenario_oracle.PRESETS)


@pytest.mark.parametrize("name", sorted(scenario_oracle.PRESETS))
@pytest.mark.parametrize("seed", [0, 5])
def test_every_scripted_preset_is_the_numpy_steps_stream(name, seed):
    steps = 2100 if name == "kelly_trap_run8" else 1500
    _same(scenarios.make(name, seed=seed, steps=steps, accounts=48),
          scenario_oracle.PRESETS[name](seed, steps, 48))


def test_drawdown_cooldown_and_forced_flat_follow_market_step():
    market = Market(drawdown_limit=1500.0, cooldown_steps=20, hazard=0.1, jitter=0.4)
    n, b = 800, 24
    p_true = np.where(np.arange(n) < 300, 0.35, 0.6)
    boundary, flat = np.zeros(n, bool), np.zeros(n, bool)
    boundary[[200, 500]] = True
    flat[650] = True
    got = market_jit.scripted(9, b, market, p_true, kelly=0.5, boundary=boundary, force_flat=flat)
    rec = scenario_oracle.Recorder(9, b, market)
    for t in range(n):
        rec.step(float(p_true[t]), boundary=bool(boundary[t]), force_flat=bool(flat[t]))
    want = stream_of(rec.rows, rec.boundary).arrays()
    assert (want["cooldown"] > 0).any()  # the drawdown path ran
    for k, x in want.items():
        assert np.array_equal(got[k], x), k


@pytest.mark.parametrize("block, n", [(7, 800), (1, 97), (256, 800), (800, 800), (999, 800), (64, 0)])
def test_a_run_made_block_by_block_is_the_run_made_at_once(monkeypatch, block, n):
    """``on_block``: the market's state carried between blocks (drawdown, cooldown, a boundary, a forced
    close and the trap's latch among them), each block told once, in order, with its rows final."""
    market = Market(drawdown_limit=1500.0, cooldown_steps=20, hazard=0.1, jitter=0.4)
    p_true = np.where(np.arange(n) < 300, 0.35, 0.6)
    boundary, flat = np.zeros(n, bool), np.zeros(n, bool)
    boundary[[i for i in (200, 500) if i < n]] = True
    flat[[i for i in (650,) if i < n]] = True
    kw = dict(kelly=0.5, boundary=boundary, force_flat=flat, latch_from=min(n, 700))
    whole = market_jit.scripted(9, 24, market, p_true, **kw)
    monkeypatch.setattr(market_jit, "BLOCK_STEPS", block)
    told = []

    def on_block(lo, hi, rewards, lots):
        told.append((lo, hi))
        assert np.array_equal(rewards[lo:hi], whole["rewards"][lo:hi])
        assert np.array_equal(lots[lo:hi], whole["lots"][lo:hi])

    blocks = market_jit.scripted(9, 24, market, p_true, on_block=on_block, **kw)
    assert told == [(lo, min(lo + block, n)) for lo in range(0, n, block)]
    for k, x in whole.items():
        assert np.array_equal(blocks[k], x), k
