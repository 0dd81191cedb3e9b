"""Hostile inputs for the ingest tests: gzip bombs, peak-RSS measurement of a child process.

``write_bomb`` writes a gzip file that expands to a long run of zero bytes with no line
break, between a few good diag lines, compressing it block by block so neither the
test nor the file ever holds the expansion. ``run_measured`` runs a command in a child
process and returns its exit status, output and peak resident set size, read from the
kernel's accounting of that one child (``os.wait4``), not sampled.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: The stated bound on the peak RSS of one ingest process, whatever the input (bytes).
RSS_BOUND = 1 << 30


def good_lines(n: int, start: int = 0) -> bytes:
    return b"".join(json.dumps({"step": i, "fold": 0, "phase": "train",
                                "risk_stack": {"popart": {"sigma": 1.0 + i}}}).encode() + b"\n"
                    for i in range(start, start + n))


def write_bomb(path: Path, expanded_mb: int, good: int = 50) -> Path:
    """``good`` diag lines, one line of ``expanded_mb`` MiB of zero bytes, ``good`` more."""
    z = zlib.compressobj(1, zlib.DEFLATED, 31)  # wbits 31: a gzip member
    block = bytes(1 << 20)
    with open(path, "wb") as fh:
        fh.write(z.compress(good_lines(good)))
        for _ in range(expanded_mb):
            fh.write(z.compress(block))
        fh.write(z.compress(b"\n" + good_lines(good, start=good)))
        fh.write(z.flush())
    return path


def child_env(**extra: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def start_measured(args: list[str], cwd: Path | None = None, env: dict | None = None,
                   preexec_fn=None) -> tuple[subprocess.Popen, object, object]:
    """Start a child with its output in temporary files (no pipe can fill up)."""
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen(args, cwd=cwd, env=env or child_env(), stdout=out, stderr=err,
                            preexec_fn=preexec_fn)
    return proc, out, err


def finish_measured(proc: subprocess.Popen, out, err) -> tuple[int, str, str, int]:
    """Wait for a child started by :func:`start_measured`: (rc, stdout, stderr, peak RSS bytes)."""
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    texts = []
    for fh in (out, err):
        fh.seek(0)
        texts.append(fh.read().decode("utf-8", "replace"))
        fh.close()
    return proc.returncode, texts[0], texts[1], usage.ru_maxrss * 1024  # ru_maxrss is in KiB


def run_measured(args: list[str], **kw) -> tuple[int, str, str, int]:
    return finish_measured(*start_measured(args, **kw))


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "regime_dash", *args]


#: The app's upload path, as the Runs page drives it: AppTest runs the real page script
#: in this child, which uploads argv[2] (an UploadedFile over its bytes, as streamlit
#: hands it over) into the store argv[1]; prints the ingest report the page shows.
APP_UPLOAD = """
import os, sys
os.environ["REGIME_DASH_STORE"] = sys.argv[1]
from streamlit.testing.v1 import AppTest
at = AppTest.from_file(sys.argv[3], default_timeout=600).run()
data = open(sys.argv[2], "rb").read()
at.file_uploader(key="runs.upload").set_value((os.path.basename(sys.argv[2]), data, "application/gzip")).run()
del data
print("EXC", [e.message for e in at.exception])
print("EXPANDERS", [e.label for e in at.expander])
print("ERRORS", [e.value for e in at.error])
"""


def app_upload(store: Path, path: Path) -> list[str]:
    return [sys.executable, "-c", APP_UPLOAD, str(store), str(path), str(REPO / "app.py")]
