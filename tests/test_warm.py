"""regime_dash.engine.warm: the background compile of the fast engine and the engine it picks meanwhile."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from regime_dash.engine import warm

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def compiling(monkeypatch):
    """The compile state of a cold compile that started a moment ago (nothing loaded in this process)."""
    monkeypatch.setattr(warm, "_loaded_in_process", lambda: False)
    monkeypatch.setattr(warm, "_load_timings", lambda: {"cold_s": 100.0, "cached_s": 1.0})
    monkeypatch.setitem(warm._STATE, "state", "compiling")
    monkeypatch.setitem(warm._STATE, "started", time.monotonic())
    monkeypatch.setitem(warm._STATE, "finished", None)
    monkeypatch.setitem(warm._STATE, "cached", False)


def test_auto_answers_on_the_reference_while_compiling(compiling):
    s = warm.compile_state()
    assert s["state"] == "compiling" and s["estimate_s"] == 100.0 and 0 <= s["elapsed_s"] < 5
    assert warm.choose_engine("auto", 25_000) == "reference"  # 3.5 s on the reference < 100 s
    assert warm.choose_engine("auto", 10_000_000) == "fast"   # longer than the compile: wait for it
    assert warm.choose_engine("reference", 10_000_000) == "reference"
    assert warm.choose_engine("fast", 10) == "fast"


def test_a_compile_past_its_estimate_is_not_taken_as_nearly_done(compiling, monkeypatch):
    # the estimate was measured on a quieter machine: 130 s into a 100 s estimate, a 25k-step replay
    # still answers on the reference rather than waiting for a compile whose rest is unknown
    monkeypatch.setitem(warm._STATE, "started", time.monotonic() - 130.0)
    assert warm.compile_state()["elapsed_s"] >= 130.0
    assert warm.choose_engine("auto", 25_000) == "reference"
    assert warm.choose_engine("auto", 10_000_000) == "fast"


def test_a_failed_compile_falls_back_to_the_reference(compiling, monkeypatch):
    monkeypatch.setitem(warm._STATE, "state", "failed")
    monkeypatch.setitem(warm._STATE, "error", "RuntimeError: boom")
    assert warm.choose_engine("auto", 10_000_000) == "reference"
    assert warm.compile_state()["error"] == "RuntimeError: boom"


def test_compiled_kernels_are_read_as_a_fresh_cache():
    warm.compile_kernels()  # compiles, or loads what an earlier test compiled
    assert warm.cache_is_fresh()
    assert not warm.fast_needs_compile()
    assert warm.choose_engine("auto", 10) == "fast"


@pytest.mark.slow  # a CLI replay on a cold numba cache: about 12 s
def test_cli_on_a_cold_cache_answers_on_the_reference_and_says_why(tmp_path):
    """An empty numba cache is detected as cold (not guessed): auto replays on the reference and says so."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba-cache"))
    out = tmp_path / "r.jsonl"
    proc = subprocess.run([sys.executable, "-m", "regime_dash", "replay", "--scenario", "kelly_trap_run8",
                           "--steps", "2000", "--out", str(out)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "the fast engine is not compiled yet" in proc.stderr
    assert "(engine reference," in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "regime_dash", "replay", "--scenario", "kelly_trap_run8",
                           "--steps", "2000", "--engine", "reference", "--out", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "compil" not in proc.stderr and "(engine reference," in proc.stderr


def test_a_compile_is_announced_and_never_silent(monkeypatch):
    import io

    monkeypatch.setattr(warm, "fast_needs_compile", lambda device="auto": True)
    monkeypatch.setattr(warm, "cache_is_fresh", lambda names=None: False)
    monkeypatch.setattr(warm, "_loaded_in_process", lambda: False)
    monkeypatch.setattr(warm, "_load_timings", lambda: {"cold_s": 42.0, "cached_s": 1.0})
    out = io.StringIO()
    with warm.announced("fast", out=out, every_s=0.05):
        time.sleep(0.2)  # the compile's stand-in: long enough for "still compiling" lines
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("compiling the fast engine once (about 42 s")
    assert any(line.strip().startswith("still compiling") for line in lines[1:])
    quiet = io.StringIO()
    with warm.announced("reference", out=quiet):
        pass
    assert quiet.getvalue() == ""
