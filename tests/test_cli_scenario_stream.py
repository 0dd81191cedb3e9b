"""``replay --scenario``'s stream made on a thread while phase 1 of each block is computed: the stream and
phase 1 of ``scenarios.make`` and ``fast.step_stats``, bit for bit; a failure on the thread is the error raised."""
from __future__ import annotations

import numpy as np
import pytest

from regime_dash.sources import market_jit
from regime_dash.sources import scenarios
from regime_dash.usecases.scenario_stream import generated
from regime_dash.engine import fast
from regime_dash.errors import ValidationError

needs_numba = pytest.mark.skipif(not fast.HAVE_NUMBA, reason="phase 1 on the fly runs the fast engine's kernel")


def _same_stream(a, b) -> None:
    for k, x in a.arrays().items():
        assert np.array_equal(x, b.arrays()[k]), k


@needs_numba
@pytest.mark.parametrize("name, steps, block", [("kelly_trap_run8", 2500, 300), ("calm", 997, 1000),
                                                ("adverse_regime", 1201, 64), ("tail_shock", 400, 300)])
def test_the_stream_and_phase_one_are_makes_and_step_stats(monkeypatch, name, steps, block):
    fast.compile_cpu("replay")  # compiled: phase 1 is made on the fly (a compile is the replay's to announce)
    monkeypatch.setattr(market_jit, "BLOCK_STEPS", block)
    stream, stats = generated(name, "fast", seed=4, steps=steps, accounts=40)
    want = scenarios.make(name, seed=4, steps=steps, accounts=40)
    _same_stream(stream, want)
    assert stats is not None
    expected = fast.step_stats(want)
    assert np.array_equal(stats.sums, expected.sums) and np.array_equal(stats.flat, expected.flat)


def test_no_phase_one_for_another_engine():
    stream, stats = generated("calm", "reference", seed=1, steps=300, accounts=8)
    assert stats is None
    _same_stream(stream, scenarios.make("calm", seed=1, steps=300, accounts=8))


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_a_refusal_on_the_thread_is_raised(engine):
    with pytest.raises(ValidationError, match="steps must be an int >= 1937, got 100"):
        generated("kelly_trap_run8", engine, seed=0, steps=100, accounts=8)


@needs_numba
def test_a_failure_after_some_blocks_is_the_error_raised_not_a_short_phase_one(monkeypatch):
    fast.compile_cpu("replay")
    real = scenarios.make

    def failing(name, on_block=None, **size):
        stream = real(name, **size)
        on_block(0, 100, stream.rewards, stream.lots)
        raise ValidationError("the market broke at step 100", field="steps", value=100)

    monkeypatch.setattr(scenarios, "make", failing)
    with pytest.raises(ValidationError, match="the market broke at step 100"):
        generated("calm", "fast", seed=0, steps=300, accounts=8)
