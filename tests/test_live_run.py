"""Live runs of any source (regime_dash.runs.live): stepping equals replay, config changes carry the ISV over,
injections on a stream are edits of its inputs, the simulator takes config changes too."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from regime_dash import RegimeConfig, replay
from regime_dash.sources import scenarios
from regime_dash.core.config import FIELD_SLOTS
from regime_dash.engine import replay_trajectory
from regime_dash.errors import ValidationError
from regime_dash.runs.live import LiveRun, reconfigured_isv, status_line
from regime_dash.sources.simulator import PRESETS, Simulator, simulate
from regime_dash.core.slots import DEFAULT_LAYOUT

DZ = "risk_stack.regime.dead_zone."


@pytest.fixture(scope="module")
def trap():
    """Run #8's trap: with resurrection off, one dead zone from step 341 to the end (duration 2659)."""
    return scenarios.make("kelly_trap_run8")


def full_isv(isv: np.ndarray) -> dict[str, float]:
    """Every named slot of ``isv``, as the ``isv=`` overrides of a replay."""
    return {name: float(isv[DEFAULT_LAYOUT.index(name)]) for name in DEFAULT_LAYOUT.names}


def test_playing_a_stream_step_by_step_is_its_replay(trap):
    config = RegimeConfig(resurrection=False, max_duration=700)
    run = LiveRun.of_stream(trap, config, source="trap")
    assert run.step(1) == 1 and run.step(499) == 499
    assert run.next_step == int(trap.step[500])
    assert run.step(10_000) == trap.steps - 500  # stops at the end
    assert run.done and run.step(5) == 0
    pd.testing.assert_frame_equal(run.frame(), replay(trap, config, engine="reference"))
    assert run.changes == []


def test_a_config_change_mid_stream_carries_the_isv_state_over(trap):
    a = RegimeConfig(resurrection=False)             # max_duration 1000: the dead zone times out at 1341
    b = a.replace(max_duration=600.0)
    k = 800                                          # 459 steps into the dead zone
    run = LiveRun.of_stream(trap, a)
    run.step(k)
    before = replay_trajectory(trap.slice(0, k), a, engine="reference")
    # up to the change: the reference replay of the same inputs under the old config
    pd.testing.assert_frame_equal(run.frame(), before.frame)
    np.testing.assert_array_equal(run.isv, before.isv)

    change = run.set_config(b)
    assert (change.step, change.kind, change.label) == (int(trap.step[k]), "config", "max_duration=600")
    assert run.set_config(b) is None                 # the same config again changes nothing
    # the state carried over: only the config slots were rewritten
    moved = np.flatnonzero(run.isv != before.isv)
    assert set(moved) == {DEFAULT_LAYOUT.index(FIELD_SLOTS["max_duration"])}
    run.step(trap.steps)

    frame = run.frame()
    pd.testing.assert_frame_equal(frame.iloc[:k], before.frame)
    isv_k, _ = reconfigured_isv(before.isv, b, DEFAULT_LAYOUT)
    after = replay(trap.slice(k, trap.steps), b, engine="reference", isv=full_isv(isv_k))
    pd.testing.assert_frame_equal(frame.iloc[k:].reset_index(drop=True), after.reset_index(drop=True),
                                  check_index_type=False)
    duration = frame[DZ + "duration"].to_numpy()
    assert duration[k] == duration[k - 1] + 1        # the dead zone went on counting
    first_timeout = int(np.flatnonzero(frame[DZ + "timeout_flag"].to_numpy())[0])
    assert first_timeout == int(np.flatnonzero(duration > 600)[0])  # the new limit, on the old count
    fresh = replay(trap.slice(k, trap.steps), b, engine="reference")
    assert fresh[DZ + "duration"].iloc[0] <= 1       # a fresh replay would have started over
    assert (frame[DZ + "max_duration"].to_numpy()[:k] == 1000).all()
    assert (frame[DZ + "max_duration"].to_numpy()[k:] == 600).all()


def test_injections_on_a_stream_edit_its_upcoming_inputs():
    stream = scenarios.make("tail_shock", steps=300, accounts=16, seed=3)
    run = LiveRun.of_stream(stream)
    run.step(100)
    acct = int(np.argmax(stream.lots[100]))
    shock = run.inject_tail_shock()
    run.step(1)
    run.force_flat()
    run.step(1)
    run.cross_boundary()
    run.step(50)
    assert [(c.step, c.kind) for c in run.changes] == [(100, "shock"), (101, "flat"), (102, "boundary")]
    assert f"account {acct}" in shock.label

    edited = run.inputs()
    assert edited.steps == 152
    delta = edited.rewards - stream.rewards[:152]
    assert np.flatnonzero(delta.any(axis=1)).tolist() == [100]
    np.testing.assert_allclose(delta[100, acct], -6484.0 * 0.003, rtol=1e-5)  # Run #8's −19.45
    offset = edited.session_pnl_worst - stream.session_pnl_worst[:152]
    np.testing.assert_array_equal(offset[:100], 0.0)
    np.testing.assert_allclose(offset[100:102], -6484.0, rtol=1e-6)  # until the boundary
    np.testing.assert_array_equal(offset[102:], 0.0)
    assert (edited.lots[101] == 0).all() and (edited.lots[[100, 102]] == stream.lots[[100, 102]]).all()
    assert edited.boundary.nonzero()[0].tolist() == [102]

    frame = run.frame()
    # the live run is the replay of its edited inputs
    pd.testing.assert_frame_equal(frame, replay(edited, engine="reference"))
    plain = replay(stream.slice(0, 152), engine="reference")
    assert frame["risk_stack.regime.tail.recency"].iloc[100] == 0       # the shock is a tail event
    assert plain["risk_stack.regime.tail.recency"].iloc[100] > 0
    assert frame["risk_stack.positions.flat_count"].iloc[101] == 16
    assert frame["phase"].iloc[101] == "train" and frame["phase"].iloc[102] == "eval"

    run.step(1000)
    with pytest.raises(ValidationError, match="played to its end"):
        run.force_flat()
    with pytest.raises(ValidationError, match="account 16"):
        LiveRun.of_stream(stream).inject_tail_shock(16)


def test_the_simulator_takes_a_config_change_mid_run():
    preset = PRESETS["adverse_regime"]
    a, b = RegimeConfig(), RegimeConfig(resurrection=False)
    sim = Simulator(accounts=16, seed=1, config=a, market=preset.market, schedule=preset.schedule(600))
    run = LiveRun.of_simulator(sim)
    run.step(300)
    isv_300 = run.isv
    unchanged = simulate("adverse_regime", steps=600, accounts=16, seed=1, config=a).frame()
    pd.testing.assert_frame_equal(run.frame(), unchanged.iloc[:300])
    change = run.set_config(b)
    assert (change.step, change.label) == (300, "resurrection=False")
    assert sim.config == b and run.config == b
    run.inject_tail_shock()
    run.step(300)
    assert run.t == 600 and [c.kind for c in run.changes] == ["config", "shock"]
    assert run.market_frame()["shock"].to_numpy().nonzero()[0].tolist() == [300]
    # after the change: the replay of the inputs the loop produced, from the carried-over state
    isv, _ = reconfigured_isv(isv_300, b, DEFAULT_LAYOUT)
    after = replay(sim.stream().slice(300, 600), b, engine="reference", isv=full_isv(isv))
    pd.testing.assert_frame_equal(run.frame().iloc[300:].reset_index(drop=True), after.reset_index(drop=True))
    assert not run.frame()["risk_stack.kelly.fraction"].equals(unchanged["risk_stack.kelly.fraction"])


def test_status_line_names_the_step_and_the_changes(trap):
    run = LiveRun.of_stream(trap, RegimeConfig(resurrection=False), source="trap")
    assert status_line(run.status()) == "trap: 0/3,000 steps"
    run.step(400)
    change = run.set_config(RegimeConfig(resurrection=False, eps_min=0.1))
    line = status_line(run.status(), [change])
    assert line.startswith("trap t=400/3,000 step 399  kelly_f ")
    last = run.frame().iloc[-1]
    assert f"kelly_f {last['risk_stack.kelly.fraction']:.4f}" in line
    assert f"(duration {int(last[DZ + 'duration']):,})" in line and "dead zone ON " in line
    assert f"sigma {last['risk_stack.popart.sigma']:.4g}" in line
    assert "| config at step 400: eps_min=0.1" in line
    with pytest.raises(ValidationError, match="RegimeConfig"):
        run.set_config({"eps_min": 0.1})
