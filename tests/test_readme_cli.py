"""The README's command-line block runs exactly as written.

Every command of the block, continuation lines joined, runs through ``bash`` in a
fresh directory that holds the files it names (``run.diag.jsonl.gz``, ``before.jsonl``,
``after.jsonl``: the sample run, gzipped, and twice with one value changed), with
the repository on ``PYTHONPATH`` (the README runs them from the repository root) and
the default store (``./data/store``).
"""
from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "samples" / "diag.jsonl"


def readme_commands() -> list[str]:
    """The commands of the README's "Command line" bash block."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Command line", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    joined = re.sub(r"\\\n\s*", " ", block)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


#: Exit statuses the README documents: check (and check --all) exits 1 when a check
#: fails, diff 1 when the runs differ (before/after do); everything else 0.
ALLOWED = {"check": {0, 1}, "check_all": {0, 1}, "diff": {1}}


@pytest.mark.slow  # a replay, a sweep and a short engine benchmark: a minute or two on 2 cores
def test_readme_command_line_runs_as_written(tmp_path):
    cmds = readme_commands()
    assert [c.split()[3] for c in cmds] == ["ingest", "runs", "tag", "runs", "doctor", "check", "diff", "replay",
                                            "replay", "check", "replay", "sweep", "sensitivity", "bench", "check"]
    (tmp_path / "run.diag.jsonl.gz").write_bytes(gzip.compress(SAMPLE.read_bytes()))
    (tmp_path / "before.jsonl").write_bytes(SAMPLE.read_bytes())
    lines = SAMPLE.read_text().splitlines(keepends=True)
    row = json.loads(lines[100])
    row["risk_stack"]["popart"]["sigma"] += 1.0
    lines[100] = json.dumps(row) + "\n"
    (tmp_path / "after.jsonl").write_text("".join(lines))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)  # `python3` is this interpreter
    env = {k: v for k, v in os.environ.items() if k != "REGIME_DASH_STORE"}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    out = {}
    for cmd in cmds:
        res = subprocess.run(["bash", "-c", cmd], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=600)
        name = "check_all" if "--all" in cmd else cmd.split()[3]
        assert res.returncode in ALLOWED.get(name, {0}), (cmd, res.returncode, res.stderr[-2000:])
        assert "Traceback" not in res.stderr and "error:" not in res.stderr, (cmd, res.stderr[-2000:])
        out.setdefault(name, res.stdout)
    assert "fold1" in out["runs"]
    doc = json.loads(out["check"])
    assert doc["source"]["run_id"].startswith("fold1-")
    assert "risk_stack.popart.sigma" in out["diff"]
    assert (tmp_path / "trap.jsonl").stat().st_size > 0 and (tmp_path / "bench.json").stat().st_size > 0
