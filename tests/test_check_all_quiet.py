"""``check --all --scheduler local`` prints its table, not dask's start-up logging, and
its workers serve on the loopback only; ``--verbose`` brings the workers' logging back."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("distributed", reason="the local scheduler needs dask.distributed (requirements-test.txt)")

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "samples" / "diag.jsonl"
pytestmark = pytest.mark.slow


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "regime_dash", *args], capture_output=True, text=True, timeout=300)


def test_a_local_cluster_is_quiet_unless_verbose(tmp_path):
    store = str(tmp_path / "store")
    assert _cli("ingest", str(SAMPLE), "--store", store).returncode == 0
    quiet = _cli("check", "--all", "--scheduler", "local", "--store", store)
    assert quiet.returncode == 0, quiet.stderr
    assert "diag-" in quiet.stdout and "pass" in quiet.stdout
    assert "distributed." not in quiet.stderr and " INFO " not in quiet.stderr
    loud = _cli("check", "--all", "--scheduler", "local", "--store", store, "--verbose")
    assert loud.returncode == 0 and "distributed.worker - INFO" in loud.stderr
    started = [line for line in loud.stderr.splitlines() if "Start worker at:" in line]
    assert started and all("tcp://127.0.0.1:" in line for line in started)
