"""A follow ends on SIGTERM and on an early Ctrl-C with its summary line, never a traceback."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "samples" / "diag.jsonl"


def _start(tmp_path: Path) -> subprocess.Popen:
    diag = tmp_path / "diag.jsonl"
    diag.write_bytes(SAMPLE.read_bytes())
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "regime_dash", "ingest", str(diag), "--follow", "--name", "job",
                             "--store", str(tmp_path / "store")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _wait_for(proc: subprocess.Popen, text: str, deadline_s: float = 120.0) -> str:
    seen = ""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            break
        seen += line
        if text in line:
            return seen
    raise AssertionError(f"{text!r} not printed; stderr so far:\n{seen}")


@pytest.mark.slow
def test_sigterm_ends_the_follow_with_its_summary_and_the_rows_committed(tmp_path):
    proc = _start(tmp_path)
    _wait_for(proc, "following")
    out = proc.stdout.readline()  # the first commit's status line: the sample's rows are stored
    assert "job" in out
    proc.send_signal(signal.SIGTERM)
    rest = proc.communicate(timeout=120)[1]
    assert proc.returncode == 0, rest
    assert "follow ended: terminated (SIGTERM)" in rest and "Traceback" not in rest
    runs = subprocess.run([sys.executable, "-m", "regime_dash", "runs", "--store", str(tmp_path / "store")],
                          capture_output=True, text=True, timeout=120)
    assert "1200" in runs.stdout  # every line of the sample was committed


def test_ctrl_c_before_the_first_commit_prints_no_traceback(tmp_path):
    proc = _start(tmp_path)
    time.sleep(0.5)  # the interrupt must land while the command is still starting: that is the case under test
    proc.send_signal(signal.SIGINT)
    err = proc.communicate(timeout=120)[1]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "follow ended: interrupted" in err or err.strip().endswith("interrupted"), err


def test_a_ctrl_c_that_an_import_wrapped_is_still_a_ctrl_c():
    """Python 3.11 wraps an exception raised in ``__set_name__`` in a RuntimeError: a Ctrl-C landing while
    pandas defines a dataclass reaches the command as one, and must not be shown as a bug's traceback."""
    from regime_dash.cli import was_interrupted

    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as inner:
            raise RuntimeError("Error calling __set_name__ on '_HAS_DEFAULT_FACTORY_CLASS' in 'IOHandles'") from inner
    except RuntimeError as wrapped:
        assert was_interrupted(wrapped)
    assert not was_interrupted(RuntimeError("a bug"))
