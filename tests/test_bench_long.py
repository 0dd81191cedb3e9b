"""``bench long``: every stage runs in its own child and reports seconds, throughput and peak RSS."""
from __future__ import annotations

import json

from regime_dash.benchmarks import long
from regime_dash.cli import main


def test_bench_long_walks_every_stage(tmp_path, capsys):
    out = tmp_path / "long.json"
    code = main(["bench", "long", "--steps", "2100", "--accounts", "8", "--sim-steps", "40",
                 "--workdir", str(tmp_path), "--json", str(out)])
    assert code == 0
    stages = json.loads(out.read_text())["stages"]
    assert list(stages) == list(long.STAGES)
    for name, row in stages.items():
        if "skipped" in row:
            assert name == "whatif_gpu" and "\n" not in row["skipped"]
            continue
        assert row["seconds"] > 0 and row["rss_mb"] > 0 and row["cpu_s"] > 0, name
    assert stages["diag_write"]["anchor"] == "duckdb_json" and stages["diag_write"]["ratio"] > 0
    assert stages["replay_jsonl"]["mb"] > 0 and "smoothing_s" in stages["explore"]
    table = capsys.readouterr().out
    assert all(name in table for name in long.STAGES)


def test_targets_scale_with_the_run_and_cap_the_memory():
    row = {"seconds": 2.0, "units": 1, "unit": "steps", "rss_mb": 100.0}
    assert long._met("scenario", row, long.DEFAULT_STEPS) == "yes"
    assert long._met("scenario", row, long.DEFAULT_STEPS // 2) == "NO"  # 1.5 s allowed at half T
    assert long._met("scenario", {**row, "rss_mb": 2000.0}, long.DEFAULT_STEPS) == "NO"
    assert long._met("diag_write", {**row, "ratio": 0.5}, long.DEFAULT_STEPS) == "NO"
    # DuckDB's own memory is not ours to judge: an anchor row has no target
    assert long._met("duckdb_json", {**row, "rss_mb": 3000.0}, long.DEFAULT_STEPS) == ""
    assert set(long.ANCHORS) <= set(long.STAGES)
