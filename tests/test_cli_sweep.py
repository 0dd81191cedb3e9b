"""``python -m regime_dash sweep``: grid parsing, outputs, errors and exit codes."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from regime_dash import RegimeConfig, replay
from regime_dash.cli import main
from regime_dash.cli.sweep import parse_grid
from regime_dash.engine import summary
from regime_dash.errors import ConfigError
from test_fast_engine import regime_stream


@pytest.fixture(scope="module")
def stream_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("sweep") / "stream.npz"
    regime_stream(np.random.default_rng(4), 180, 9, v_pred=False).save(path)
    return path


def test_parse_grid_types_values_like_set():
    grid = parse_grid(["max_duration=10,20", "envelope=on,false", "eps_min=0.01"])
    assert grid == {"max_duration": [10.0, 20.0], "envelope": [True, False], "eps_min": [0.01]}
    with pytest.raises(ConfigError, match="'bogus'"):
        parse_grid(["bogus=1"])
    with pytest.raises(ConfigError, match="empty value"):
        parse_grid(["max_duration=10,"])
    with pytest.raises(ConfigError, match="twice"):
        parse_grid(["max_duration=1", "max_duration=2"])
    with pytest.raises(ConfigError, match="not a boolean"):
        parse_grid(["envelope=maybe"])


def test_csv_out_matches_single_replays(stream_file, tmp_path, capsys):
    out = tmp_path / "table.csv"
    rc = main(["sweep", "--stream", str(stream_file), "--grid", "max_duration=15,400",
               "--grid", "resurrection=on,off", "--set", "eps_min=0.0", "--device", "cpu", "--out", str(out)])
    assert rc == 0
    assert "swept 4 configs over 180 steps × 9 accounts (engine fast-cpu" in capsys.readouterr().err
    table = pd.read_csv(out)
    assert len(table) == 4
    from regime_dash.core import streams

    stream = streams.load(stream_file)
    for k, row in table.iterrows():
        config = RegimeConfig(max_duration=row["max_duration"], resurrection=bool(row["resurrection"]),
                              eps_min=0.0)
        want = summary.summarize_frame(replay(stream, config))
        for m in summary.METRICS:
            assert row[m] == pytest.approx(want[m], rel=1e-15), (k, m)
    assert table["timeouts"].nunique() > 1


def test_json_and_parquet_and_text(stream_file, tmp_path, capsys):
    rc = main(["sweep", "--stream", str(stream_file), "--grid", "envelope=on,off", "--json"])
    assert rc == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["envelope"] for r in records] == [True, False]
    assert set(summary.METRICS) <= set(records[0])
    out = tmp_path / "t.parquet"
    assert main(["sweep", "--stream", str(stream_file), "--grid", "envelope=on,off", "--out", str(out)]) == 0
    table = pd.read_parquet(out)
    assert table["sigma_max"].tolist() == [r["sigma_max"] for r in records]
    capsys.readouterr()
    assert main(["sweep", "--stream", str(stream_file), "--grid", "envelope=on,off"]) == 0
    text = capsys.readouterr().out
    assert text.split("\n")[0].split()[:3] == ["envelope", "dead_zone_steps", "longest_dead_zone"]


def test_scenario_source(capsys):
    rc = main(["sweep", "--scenario", "tail_shock", "--steps", "300", "--accounts", "8",
               "--grid", "resurrection=on,off", "--json"])
    assert rc == 0
    records = json.loads(capsys.readouterr().out)
    assert len(records) == 2 and records[0]["resurrection"] is True


def test_errors_exit_2_and_name_the_value(stream_file, tmp_path, capsys):
    assert main(["sweep", "--stream", str(stream_file), "--grid", "nope=1"]) == 2
    assert "unknown config field 'nope'" in capsys.readouterr().err
    assert main(["sweep", "--stream", str(stream_file)]) == 2
    assert "--grid" in capsys.readouterr().err
    assert main(["sweep", "--stream", str(stream_file), "--grid", "eps_min=0.1",
                 "--out", str(tmp_path / "x.xlsx")]) == 2
    assert "'.xlsx'" in capsys.readouterr().err
    assert main(["sweep", "--stream", str(tmp_path / "missing.npz"), "--grid", "eps_min=0.1"]) == 2
    assert "missing.npz" in capsys.readouterr().err


def test_the_sweep_progress_bar_counts_to_the_total(monkeypatch):
    import io
    import sys

    from regime_dash.cli.progress import ProgressBar

    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    bar = ProgressBar("sweep", unit="configs", scale=1)
    bar(3, 10)
    bar(10, 10)
    bar.close()
    assert "10/10" in err.getvalue() and "sweep" in err.getvalue()
