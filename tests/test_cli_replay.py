"""``python -m regime_dash replay``: every source, both outputs, the ingest round trip, bad input."""
from __future__ import annotations

import os
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
from regime_dash.core.config import field_names
from regime_dash.sources.simulator import simulate
from regime_dash.store.run_store import RunStore

REPO = Path(__file__).resolve().parent.parent


def _same_values(expected: pd.DataFrame, got: pd.DataFrame) -> None:
    """Every column of ``expected`` is in ``got`` with the same values (float32 slots compared as float32)."""
    for col in expected.columns:
        assert col in got.columns, col
        e, g = expected[col].to_numpy(), got[col].to_numpy()
        if e.dtype == np.float32:
            g = g.astype(np.float32)
        assert np.array_equal(e, g), col


def test_scenario_to_jsonl_ingests_to_the_same_values(tmp_path):
    out = tmp_path / "tail.jsonl"
    rc = main(["replay", "--scenario", "tail_shock", "--steps", "120", "--accounts", "64", "--seed", "2",
               "--engine", "reference", "--out", str(out)])
    assert rc == 0
    expected = replay(scenarios.tail_shock(seed=2, steps=120, accounts=64), engine="reference")
    _same_values(expected, diag.read_jsonl(out))

    store = RunStore(tmp_path / "store")
    result = store.ingest(out)
    assert result.rows == 120 and result.rejected == []
    _same_values(expected, store.load(result.run_id))


def test_a_scripted_scenario_generated_on_a_thread_is_the_one_make_builds(tmp_path):
    """``--scenario`` of a scripted preset runs the market on a thread while the engine loads: the
    Parquet holds what the in-process replay of ``scenarios.make``'s stream gives, every column."""
    out = tmp_path / "trap.parquet"
    rc = main(["replay", "--scenario", "kelly_trap_run8", "--steps", "2400", "--accounts", "24", "--seed", "5",
               "--engine", "fast", "--out", str(out)])
    assert rc == 0
    stream = scenarios.make("kelly_trap_run8", seed=5, steps=2400, accounts=24)
    expected = replay(stream, engine="fast", log_inputs=True)
    got = pd.read_parquet(out)
    assert list(got.columns) == list(expected.columns)
    _same_values(expected, got)
    assert got["risk_stack.inputs.batch_sum"].abs().sum() > 0  # the run traded


def test_a_scenario_refused_on_the_thread_says_why(tmp_path, capsys):
    rc = main(["replay", "--scenario", "kelly_trap_run8", "--steps", "100", "--out", str(tmp_path / "x.parquet")])
    assert rc == 2
    assert "steps must be an int >= 1937, got 100" in capsys.readouterr().err
    assert not (tmp_path / "x.parquet").exists()


def test_simulate_with_settings_to_parquet(tmp_path):
    out = tmp_path / "live.parquet"
    rc = main(["replay", "--simulate", "adverse_regime", "--steps", "600", "--accounts", "16", "--seed", "1",
               "--engine", "reference", "--set", "resurrection=false", "--set", "max_duration=200",
               "--out", str(out)])
    assert rc == 0
    got = pd.read_parquet(out)
    cfg = RegimeConfig(resurrection=False, max_duration=200)
    expected = simulate("adverse_regime", steps=600, accounts=16, seed=1, config=cfg).frame()
    _same_values(expected, got)
    assert (got["risk_stack.regime.dead_zone.max_duration"] == 200).all()
    assert got["risk_stack.regime.dead_zone.timeout_flag"].max() == 1  # trapped for > 200 steps
    default = simulate("adverse_regime", steps=600, accounts=16, seed=1).frame()
    assert not np.array_equal(default["risk_stack.kelly.fraction"], got["risk_stack.kelly.fraction"])


def test_stream_file_with_steps_and_accounts(tmp_path):
    src = tmp_path / "in.parquet"
    scenarios.fold_boundary(seed=1, steps=300, accounts=16).save(src)
    out = tmp_path / "out.jsonl"
    assert main(["replay", "--stream", str(src), "--steps", "200", "--accounts", "8",
                 "--engine", "reference", "--out", str(out)]) == 0
    got = diag.read_jsonl(out)
    assert len(got) == 200 and (got["risk_stack.positions.b_size"] == 8).all()
    assert got.phase.iloc[150] == "eval"


def test_bad_set_names_the_field_and_lists_the_valid_ones(tmp_path, capsys):
    out = tmp_path / "x.jsonl"
    rc = main(["replay", "--scenario", "calm", "--steps", "5", "--set", "max_durration=5", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2
    assert "'max_durration'" in err
    assert all(name in err for name in field_names())
    assert not out.exists()
    rc = main(["replay", "--scenario", "calm", "--steps", "5", "--set", "eps_min=lots", "--out", str(out)])
    assert rc == 2 and "eps_min='lots'" in capsys.readouterr().err


def test_bad_out_suffix_and_missing_stream(tmp_path, capsys):
    assert main(["replay", "--scenario", "calm", "--steps", "5", "--out", str(tmp_path / "x.csv")]) == 2
    assert "'.csv'" in capsys.readouterr().err
    assert main(["replay", "--stream", str(tmp_path / "none.npz"), "--out", str(tmp_path / "x.jsonl")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_sources_are_mutually_exclusive_and_required(tmp_path):
    with pytest.raises(SystemExit):
        main(["replay", "--out", str(tmp_path / "x.jsonl")])
    with pytest.raises(SystemExit):
        main(["replay", "--scenario", "calm", "--simulate", "calm", "--out", str(tmp_path / "x.jsonl")])


@pytest.mark.slow  # a CLI subprocess: ~1.4 s of CPU
def test_python_dash_m_entry_point(tmp_path):
    out = tmp_path / "calm.jsonl"
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "regime_dash", "replay", "--scenario", "calm", "--steps", "30",
                           "--accounts", "4", "--engine", "reference", "--out", str(out)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "wrote 30 steps" in proc.stderr
    assert len(out.read_text().splitlines()) == 30
