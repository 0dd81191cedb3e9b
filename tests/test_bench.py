"""``bench engines`` runs end to end at a tiny size and its JSON has the fields (no timing assertions)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from regime_dash.benchmarks import engines
from regime_dash.cli import main
from regime_dash.engine import loader
from regime_dash.errors import ValidationError

ROWS = {("reference", "cpu"), ("fast phase 1", "cpu"), ("fast", "cpu"), ("cuda per step", "gpu"),
        ("cuda per step (graph)", "gpu"), ("fast", "gpu"), ("fast phase 1", "gpu"), ("fast end to end", "gpu"),
        ("D2D copy (roofline)", "gpu"), ("phase 1 from host, pageable", "gpu"),
        ("phase 1 from host, pinned chunks", "gpu"), ("sweep S=3 (list)", "cpu"), ("sweep S=3 (list)", "gpu")}


SMALL_TARGET = ">= 1 scenario-step/s (test)"


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "engines.json"
    with pytest.MonkeyPatch.context() as mp:  # a target at a size this small run takes, to see it carried
        mp.setitem(engines.SWEEP_ROW_TARGETS, ("cpu", 3), SMALL_TARGET)
        out = engines.run(steps=48, accounts=8, json_path=path, repeats=2, sweep_sizes=(1, 3), budget_s=5.0,
                          gpu_sweep_sizes=(1, 3), scale_out_size=5, live_accounts=(4,), live_steps=10)
    return out, path


def test_json_has_machine_params_rows_and_ratios(result):
    out, path = result
    on_disk = json.loads(path.read_text())
    assert on_disk["benchmark"] == "engines"
    assert on_disk["params"]["steps"] == 48 and on_disk["params"]["accounts"] == 8
    for key in ("cpu_model", "cpu_count", "numba_threads", "python", "numpy", "numba", "gpu"):
        assert key in on_disk["machine"], key
    names = {(r["name"], r["device"]) for r in on_disk["rows"]}
    assert ROWS <= names
    assert {("sweep S=1", "cpu"), ("sweep S=3", "cpu"), ("sweep S=1", "gpu"), ("sweep S=3", "gpu")} <= names
    assert {("sweep S=5 (1 GPU)", "gpu"), ("sweep S=5 (GPUs over dask)", "gpu"), ("sweep kernel S=3", "gpu")} <= names
    assert set(on_disk["ratios"]) == {"fast_cpu_vs_reference", "fast_gpu_vs_cuda_per_step",
                                      "fast_gpu_vs_cuda_graph", "phase1_vs_copy_bandwidth",
                                      "sweep_two_gpus_vs_one", "sweep_two_gpus_vs_one_pinned",
                                      "gpu_sweep_scenario_steps_per_s",
                                      "gpu_sweep_kernel_scenario_steps_per_s", "phase1_pinned_vs_pageable",
                                      "sweep_cpu_grid_vs_list", "sweep_gpu_grid_vs_list"}
    assert on_disk["ratios"]["sweep_two_gpus_vs_one"]["target"] == 1.8
    assert on_disk["ratios"]["gpu_sweep_scenario_steps_per_s"]["target"] == 2e10
    assert on_disk["ratios"]["fast_gpu_vs_cuda_per_step"]["target"] == 300.0
    assert on_disk["ratios"]["phase1_vs_copy_bandwidth"]["target"] == 0.7
    assert on_disk["ratios"]["fast_cpu_vs_reference"]["target"] == 20.0
    assert set(on_disk["bandwidth"]) >= {"phase1_gb_per_s", "copy_gb_per_s", "definition"}


def test_cpu_rows_are_medians_of_their_runs(result):
    out, _ = result
    for row in out["rows"]:
        if row["device"] != "cpu":
            continue
        assert row["status"] == "ok", row
        assert 1 <= row["repeats"] == len(row["runs"]) <= 2
        assert row["seconds"] == float(np.median(row["runs"]))
        assert row["scenario_steps_per_s"] == pytest.approx(row["scenarios"] * 48 / row["seconds"])
    ratio = out["ratios"]["fast_cpu_vs_reference"]
    by = {(r["name"], r["device"]): r for r in out["rows"]}
    assert ratio["value"] == pytest.approx(by[("reference", "cpu")]["seconds"] / by[("fast", "cpu")]["seconds"])
    assert ratio["met"] == (ratio["value"] >= 20.0)


def test_gpu_rows_say_why_when_there_is_no_device(result):
    out, _ = result
    reason = loader.available()
    if reason is None:
        pytest.skip("a CUDA device is present; test_gpu_rows_measure covers the GPU rows")
    for row in out["rows"]:
        if row["device"] == "gpu":
            assert row["status"].startswith("unavailable: ") and row["seconds"] is None, row
    for key in ("fast_gpu_vs_cuda_per_step", "phase1_vs_copy_bandwidth"):
        assert out["ratios"][key]["value"] is None
        assert out["ratios"][key]["status"].startswith("not measured")
    assert out["machine"]["gpu"].startswith("unavailable: ")


@pytest.mark.gpu
def test_gpu_rows_measure(result):
    out, _ = result
    two_gpus = out["machine"].get("gpu_count", 0) >= 2
    for row in out["rows"]:
        if row["device"] == "gpu" and (two_gpus or "over dask" not in row["name"]):
            assert row["status"] == "ok", row
    for key in ("fast_gpu_vs_cuda_per_step", "fast_gpu_vs_cuda_graph", "phase1_vs_copy_bandwidth"):
        assert out["ratios"][key]["value"] is not None and out["ratios"][key]["value"] > 0
    assert out["bandwidth"]["copy_gb_per_s"] > 0


def test_table_lists_every_row(result):
    out, _ = result
    text = engines.format_table(out)
    assert "T = 48 × b = 8" in text
    for name, device in ROWS:
        if device == "gpu" and loader.available() is not None:
            continue  # a machine without a GPU says so once (test_no_gpu_is_said_once)
        assert any(line.startswith(name) and f" {device:6s} " in line for line in text.splitlines()), name
    assert "fast_cpu_vs_reference" in text


def test_cli_bench_engines(tmp_path, capsys):
    path = tmp_path / "b.json"
    rc = main(["bench", "engines", "--steps", "32", "--accounts", "4", "--repeats", "1",
               "--sweep-sizes", "2", "--gpu-sweep-sizes", "2", "--scale-out-size", "0", "--json", str(path),
               "--live-accounts", "3", "--live-steps", "5"])
    assert rc == 0
    assert "replay engines, T = 32 × b = 4" in capsys.readouterr().out
    assert json.loads(path.read_text())["params"]["sweep_sizes"] == [2]


def test_no_gpu_is_said_once(tmp_path, capsys):
    """Without a usable GPU, the reason is printed once (the table's GPU line) and the progress says the
    GPU rows are skipped, once; the JSON still holds every GPU row with the reason."""
    reason = loader.available()
    if reason is None:
        pytest.skip("a CUDA device is present: the GPU rows are measured")
    path = tmp_path / "b.json"
    assert main(["bench", "--steps", "24", "--accounts", "3", "--repeats", "1", "--sweep-sizes", "1",
                 "--gpu-sweep-sizes", "1", "--scale-out-size", "2", "--json", str(path),
                 "--live-accounts", "4", "--live-steps", "5"]) == 0
    captured = capsys.readouterr()
    printed = captured.out + captured.err
    assert printed.count(reason) == 1, printed
    assert captured.err.count("GPU rows skipped") == 1 and "the GPU rows and their ratios are skipped" in captured.out
    assert not [line for line in captured.out.splitlines() if " gpu " in line]  # no GPU row in the table
    gpu_rows = [r for r in json.loads(path.read_text())["rows"] if r["device"] == "gpu"]
    assert len(gpu_rows) >= 10 and all(reason in r["status"] for r in gpu_rows)


def test_bad_sizes_raise():
    with pytest.raises(ValidationError, match="steps must be an int >= 1, got 0"):
        engines.run(steps=0, accounts=4)
    with pytest.raises(ValidationError, match="sweep sizes"):
        engines.run(steps=4, accounts=4, sweep_sizes=(0,))


def test_bench_stream_exercises_the_pipeline():
    stream = engines.bench_stream(900, 16)
    assert stream.boundary.sum() == 1
    assert (stream.lots == 0).all(axis=1).any()          # all-flat stretches
    assert len({c.max_duration for c in engines.sweep_configs(2000)}) == 1000


def test_sweep_grid_has_exactly_n_valid_configs():
    from regime_dash.runs.sweeps import ConfigGrid

    for n in (1, 3, 7, 1024, 65_536, 262_144, 3000):
        grid = engines.sweep_grid(n)
        assert len(ConfigGrid.of(grid)) == n
        assert len(grid["max_duration"]) <= 1024
    assert [len(v) for v in engines.sweep_grid(65_536).values()] == [1024, 64]


def test_sweep_rows_carry_their_targets(result):
    out, _ = result
    by = {(r["name"], r["device"]): r for r in out["rows"]}
    assert by[("sweep S=3", "cpu")]["configs"] == "grid" and by[("sweep S=3 (list)", "cpu")]["configs"] == "list"
    rows = [r for r in out["rows"] if r.get("target")]
    assert by[("sweep S=3", "cpu")]["target"] == SMALL_TARGET and by[("sweep S=3", "cpu")] in rows
    if by[("sweep S=5 (GPUs over dask)", "gpu")]["status"] == "ok":
        assert "1.8x" in by[("sweep S=5 (GPUs over dask)", "gpu")]["target"]
    text = engines.format_table(out)
    for r in rows:
        assert f"target {r['target']}" in text
    assert engines.SWEEP_ROW_TARGETS[("gpu", 65_536)].startswith(">= 2e10")


def test_cli_bench_without_a_target_runs_engines(tmp_path, capsys):
    path = tmp_path / "b.json"
    rc = main(["bench", "--steps", "24", "--accounts", "3", "--repeats", "1", "--sweep-sizes", "1",
               "--gpu-sweep-sizes", "1", "--scale-out-size", "0", "--json", str(path), "--live-accounts", "0"])
    assert rc == 0
    assert "replay engines, T = 24 × b = 3" in capsys.readouterr().out
    assert json.loads(path.read_text())["params"]["accounts"] == 3


def test_bench_startup_times_the_help_against_a_bare_interpreter_in_one_run(capsys):
    from regime_dash.benchmarks import startup

    result = startup.run(repeats=2)
    assert result["repeats"] == 2 and result["baseline_s"] > 0 and result["help_s"] > 0
    assert result["extra_s"] == pytest.approx(result["help_s"] - result["baseline_s"])
    assert result["met"] == (result["extra_s"] <= startup.TARGET_EXTRA_S)
    assert main(["bench", "startup", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "python -c pass" in out and "python -m regime_dash --help" in out and "target <= +0.25 s" in out
