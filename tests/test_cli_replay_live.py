"""``python -m regime_dash replay --live``: a status line per tick, scheduled changes and injections."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from regime_dash import RegimeConfig, replay
from regime_dash.diag import catalogue as diag
from regime_dash.sources import scenarios
from regime_dash.cli import main
from regime_dash.runs.live import LiveRun

REPO = Path(__file__).resolve().parent.parent


def test_live_scenario_prints_a_line_per_tick_and_writes_the_run(tmp_path, capsys):
    out = tmp_path / "trap.parquet"
    rc = main(["replay", "--scenario", "kelly_trap_run8", "--steps", "2000", "--accounts", "32",
               "--engine", "reference", "--set", "resurrection=false", "--live", "--tick", "250",
               "--change", "800:max_duration=600", "--inject", "1200:shock", "--out", str(out)])
    assert rc == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "scenario:kelly_trap_run8: 0/2,000 steps"
    ticks = lines[1:]
    # 250-step ticks, cut short at the events before steps 800 and 1200
    assert [int(t.split()[1][2:].split("/")[0].replace(",", "")) for t in ticks] == \
        [250, 500, 750, 800, 1050, 1200, 1450, 1700, 1950, 2000]
    assert "| config at step 800: max_duration=600" in ticks[4]
    assert "| shock at step 1200: tail shock" in ticks[6]

    # the file holds the same run as the core's live run with the same changes
    stream = scenarios.make("kelly_trap_run8", steps=2000, accounts=32)
    run = LiveRun.of_stream(stream, RegimeConfig(resurrection=False))
    run.step(800)
    run.set_config(run.config.replace(max_duration=600))
    run.step(400)
    run.inject_tail_shock()
    run.step(800)
    got = pd.read_parquet(out)
    expected = run.frame()
    for col in expected.columns:
        np.testing.assert_array_equal(got[col].to_numpy(), expected[col].to_numpy(), err_msg=col)
    # before the change it is the plain replay; after it, the new max_duration is in the diag
    plain = replay(stream.slice(0, 800), RegimeConfig(resurrection=False), engine="reference")
    np.testing.assert_array_equal(got["risk_stack.kelly.fraction"].to_numpy()[:800],
                                  plain["risk_stack.kelly.fraction"].to_numpy())
    assert set(got["risk_stack.regime.dead_zone.max_duration"].iloc[800:]) == {600.0}


@pytest.mark.slow  # a CLI subprocess: ~1.4 s of CPU
def test_live_simulator_from_the_command_line(tmp_path):
    out = tmp_path / "calm.jsonl"
    proc = subprocess.run([sys.executable, "-m", "regime_dash", "replay", "--simulate", "calm", "--steps", "90",
                           "--accounts", "8", "--engine", "reference", "--live", "--tick", "40",
                           "--inject", "50:boundary", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    # the start, then 40-step ticks cut short at the event before step 50
    assert [line.split()[1] for line in lines[1:]] == ["t=40/90", "t=50/90", "t=90/90"]  # of its schedule
    assert "| boundary at step 50" in lines[3]
    assert "played 90 steps with 1 change(s)" in proc.stderr
    frame = diag.read_jsonl(out)
    assert len(frame) == 90 and list(frame["phase"].iloc[49:51]) == ["train", "eval"]


def test_live_rejects_bad_schedules_with_the_value(capsys):
    rc = main(["replay", "--scenario", "calm", "--live", "--change", "ten:max_duration=5"])
    assert rc == 2 and "--change 'ten:max_duration=5'" in capsys.readouterr().err
    rc = main(["replay", "--scenario", "calm", "--live", "--inject", "5:meteor"])
    assert rc == 2 and "unknown injection 'meteor'" in capsys.readouterr().err
    rc = main(["replay", "--scenario", "calm", "--live", "--change", "5:eps_min=2"])
    assert rc == 2 and "eps_min=2.0" in capsys.readouterr().err
    rc = main(["replay", "--scenario", "calm"])
    assert rc == 2 and "--out FILE is required (unless --live)" in capsys.readouterr().err
