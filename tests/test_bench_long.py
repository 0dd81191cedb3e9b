"""``bench long``, tested as the pieces it is made of, at a tiny size.

The benchmark itself (``python -m regime_dash bench long``: 15 stages, each in a child process, at
T = 1M) is a script, not a test. Here every stage runs in this process through the child's own entry
(:func:`long.child`: the stage, then its CPU seconds and peak RSS as one JSON line) on a 2,100-step run;
one stage runs in a real child process (:func:`long._run_child`), and a failing one comes back as a
one-line error; :func:`long.run` walks two stages and sets the ratio to their anchor.
"""
from __future__ import annotations

import contextlib
import io
import json

import pytest

from regime_dash.benchmarks import long
from regime_dash.cli import build_parser

STEPS, ACCOUNTS, SIM_STEPS = 2100, 8, 40  # the scenario needs 1,937 steps and more


def options(work, *extra: str):
    """``bench long``'s options as the CLI parses them, at the tiny size, in ``work``."""
    argv = ["bench", "long", "--steps", str(STEPS), "--accounts", str(ACCOUNTS), "--sim-steps", str(SIM_STEPS),
            "--workdir", str(work), *extra]
    return build_parser(argv).parse_args(argv)


def in_process(stage: str, work) -> dict:
    """What the child of ``stage`` prints, from :func:`long.child` run here."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert long.child(options(work, "--child", stage)) == 0
    return json.loads(out.getvalue().strip().splitlines()[-1])


@pytest.fixture(scope="module")
def walked(tmp_path_factory):
    """``(workdir, {stage: row})``: every stage in :data:`long.STAGES` order (later stages read earlier files).

    The simulator's compiled loop is made ready first, as ``bench long`` makes the fast engine's before
    its stages: otherwise the ``simulate`` stage leaves it compiling on a thread into the stages after
    it, and numba's compile, swapping the standard streams (colorama), takes a later stage's output."""
    from regime_dash.sources import simulator

    simulator.compile_loop()
    work = tmp_path_factory.mktemp("long")
    return work, {stage: in_process(stage, work) for stage in long.STAGES}


@pytest.mark.slow  # every bench long stage at 2,100 steps: ~8 s on 2 shared cores
def test_every_stage_reports_its_seconds_throughput_cpu_and_memory(walked):
    work, rows = walked
    assert list(rows) == list(long.STAGES)
    for name, row in rows.items():
        if "skipped" in row:
            assert name == "whatif_gpu" and row["skipped"].startswith("skipped: ") and "\n" not in row["skipped"]
            continue
        assert row["seconds"] > 0 and row["units"] > 0 and row["unit"] in ("steps", "MB"), (name, row)
        assert row["cpu_s"] > 0 and row["rss_mb"] > 0, (name, row)
    assert rows["scenario"]["units"] == STEPS and rows["simulate"]["units"] == SIM_STEPS
    assert rows["replay_jsonl"]["mb"] > 0 and rows["replay_parquet"]["mb"] > 0
    assert rows["diag_write"]["mb"] > 0 and rows["duckdb_json"]["mb"] > 0
    assert rows["explore"]["smoothing_s"] > 0


@pytest.mark.slow  # every bench long stage at 2,100 steps (the fixture it shares)
def test_the_stages_leave_the_files_the_later_ones_read(walked):
    from regime_dash.store.run_store import RunStore

    work, rows = walked
    assert {p.name for p in work.iterdir()} >= {"stream.npz", "run.parquet", "run.jsonl", "store"}
    assert not any(p.name.startswith(("write.", "duck.")) for p in work.iterdir())  # scratch outputs removed
    (run,) = RunStore(work / "store").list_runs()
    assert run["name"] == "long" and run["rows"] == STEPS


@pytest.mark.slow  # every bench long stage at 2,100 steps (the fixture it shares)
def test_the_table_has_a_line_per_stage_and_judges_the_targets(walked):
    _, rows = walked
    text = long.table(rows, STEPS)
    lines = text.splitlines()
    for name in long.STAGES:
        assert any(line.startswith(name) for line in lines), name
    judged = [line.split()[-1] for line in lines if line.split() and line.split()[0] in long.TARGETS
              and "seconds" in rows[line.split()[0]]]
    assert judged and set(judged) <= {"yes", "NO"}


@pytest.mark.slow  # two child processes
def test_a_stage_runs_in_a_child_process_and_a_failed_one_says_why(tmp_path):
    row = long._run_child("draws", tmp_path, options(tmp_path))
    assert row["seconds"] > 0 and row["units"] == STEPS and row["cpu_s"] > 0 and row["rss_mb"] > 0
    failed = long._run_child("diag_write", tmp_path, options(tmp_path))  # no run.parquet in this workdir
    assert set(failed) == {"error"} and "run.parquet" in failed["error"] and "\n" not in failed["error"]


@pytest.mark.slow  # bench long's warm-ups and two child processes
def test_run_walks_the_stages_and_sets_each_ratio_to_its_anchor(tmp_path, monkeypatch):
    monkeypatch.setattr(long, "STAGES", {k: long.STAGES[k] for k in ("scenario", "draws")})
    rows = long.run(options(tmp_path), tmp_path)
    assert list(rows) == ["scenario", "draws"]
    assert rows["scenario"]["anchor"] == "draws"
    assert rows["scenario"]["ratio"] == rows["draws"]["seconds"] / rows["scenario"]["seconds"]
    assert "anchor" not in rows["draws"]


def test_targets_scale_with_the_run_and_cap_the_memory():
    row = {"seconds": 2.0, "units": 1, "unit": "steps", "rss_mb": 100.0}
    assert long._met("scenario", row, long.DEFAULT_STEPS) == "yes"
    assert long._met("scenario", row, long.DEFAULT_STEPS // 2) == "NO"  # 1.5 s allowed at half T
    assert long._met("scenario", {**row, "rss_mb": 2000.0}, long.DEFAULT_STEPS) == "NO"
    assert long._met("diag_write", {**row, "ratio": 0.5}, long.DEFAULT_STEPS) == "NO"
    # DuckDB's own memory is not ours to judge: an anchor row has no target
    assert long._met("duckdb_json", {**row, "rss_mb": 3000.0}, long.DEFAULT_STEPS) == ""
    assert set(long.ANCHORS) <= set(long.STAGES)
