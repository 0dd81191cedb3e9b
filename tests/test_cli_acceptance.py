"""Issue 12's acceptance lines, run as a user runs them (subprocesses; ``--engine reference`` so that a
cold CI machine does not pay the numba compile of the default engine, which agrees bit for bit)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def cli(*argv, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "regime_dash", *map(str, argv)], capture_output=True, text=True,
                          cwd=cwd, env=ENV, timeout=300)


@pytest.mark.slow  # a 1940-step replay and a check in subprocesses: 5-22 s
@pytest.mark.parametrize("resurrection", [True, False], ids=["f2_on", "f2_off"])
def test_replay_kelly_trap_run8_then_check(tmp_path, resurrection):
    out = tmp_path / "t.jsonl"
    extra = [] if resurrection else ["--set", "resurrection=false"]
    rep = cli("replay", "--scenario", "kelly_trap_run8", "--engine", "reference", *extra, "--out", out)
    assert rep.returncode == 0, rep.stderr
    chk = cli("check", out, "--json")
    doc = json.loads(chk.stdout)
    (trap,) = [c for c in doc["checks"] if c["id"] == "kelly_trap"]
    findings = {f["id"]: f for f in doc["findings"]}
    if resurrection:
        assert chk.returncode == 1
        assert trap["status"] == "fail" and len(trap["spans"]) == 1
        a, b = trap["spans"][0]
        assert trap["first_step"] == a and b - a + 1 > 1000 and trap["evidence"]["traps"][0][2] == b - a + 1
        unreachable = findings["timeout_unreachable"]
        assert unreachable["severity"] == "fail" and unreachable["spans"][0][0] == a
        assert unreachable["evidence"]["max_DURATION"] == 1 and unreachable["fields"] == ["max_duration"]
    else:
        assert chk.returncode == 0, chk.stdout[-2000:]
        assert trap["status"] == "pass" and trap["evidence"]["excused_by_timeout"]
        assert "timeout_unreachable" not in findings
    text = cli("check", out)
    assert text.returncode == chk.returncode
    if resurrection:
        assert "FAIL  timeout_unreachable" in text.stdout and "finding(s) of severity fail" in text.stdout


@pytest.mark.slow  # a CLI subprocess
def test_check_the_clean_sample_exits_0():
    assert cli("check", "data/samples/diag.jsonl").returncode == 0


@pytest.mark.slow  # CLI subprocesses: ~1.8 s of CPU
def test_check_a_file_that_is_not_a_diag_exits_2_naming_it():
    notes = ROOT / "README.md"  # a text file that exists on every checkout (/etc/hostname may not)
    proc = cli("check", notes)
    assert proc.returncode == 2 and "README.md" in proc.stderr and "not a diag" in proc.stderr
    if Path("/etc/hostname").is_file():
        assert cli("check", "/etc/hostname").returncode == 2
