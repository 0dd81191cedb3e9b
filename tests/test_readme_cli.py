"""The README's command-line block runs exactly as written on a fresh clone.

Every command of the block, continuation lines joined, runs through ``bash`` in a
fresh directory laid out as a clone's root (``data/samples`` as committed, nothing
else), with the repository on ``PYTHONPATH`` and the default store (``./data/store``).
Only ``data/store`` and ``data/out`` (git ignores both) may be new after it.
``python3`` is this interpreter, through a wrapper script that runs it by its own path,
so that inside a virtualenv it is the venv's (a symlink to it would start the base
interpreter, which lacks the venv's packages).
"""
from __future__ import annotations

import json
import os
import re
import shutil
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
#: fails; diff 0 (the stored run equals its file); everything else 0.
ALLOWED = {"check": {0, 1}, "check_all": {0, 1}}


def python3_on_path(bin_dir: Path, python: str = sys.executable) -> Path:
    """Put a ``python3`` in ``bin_dir`` that runs ``python`` (a script that execs it by its path, so a
    venv's interpreter finds its ``pyvenv.cfg``); returns it."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    shim = bin_dir / "python3"
    shim.write_text(f'#!/bin/sh\nexec "{python}" "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    return shim


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_python3_on_path_is_a_venvs_own_interpreter(tmp_path):
    """Inside a virtualenv, the ``python3`` the README test puts on PATH sees the venv's packages."""
    import venv

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env_dir)
    venv_python = env_dir / "bin" / "python3"
    site = subprocess.run([str(venv_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "only_in_this_venv.py").write_text("WHERE = 'venv'\n")
    shim = python3_on_path(tmp_path / "bin", str(venv_python))
    res = subprocess.run(["bash", "-c", "python3 -c 'import only_in_this_venv as m; print(m.WHERE)'"],
                         env=dict(os.environ, PATH=f"{shim.parent}{os.pathsep}{os.environ['PATH']}"),
                         capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout.strip() == "venv", res.stderr[-1000:]


@pytest.mark.slow  # a replay, a sweep and a short engine benchmark: a minute or two on 2 cores
def test_readme_command_line_runs_as_written(tmp_path):
    cmds = readme_commands()
    assert [c.split()[3] for c in cmds] == ["ingest", "runs", "tag", "runs", "doctor", "check", "diff", "replay",
                                            "replay", "check", "replay", "sweep", "sensitivity", "bench", "check"]
    clone = tmp_path / "clone"  # what a fresh clone's root holds that the block reads
    shutil.copytree(REPO / "data" / "samples", clone / "data" / "samples",
                    ignore=shutil.ignore_patterns("__pycache__"))
    committed = files_under(clone)
    shim = python3_on_path(tmp_path / "bin")  # `python3` is this interpreter
    env = {k: v for k, v in os.environ.items() if k != "REGIME_DASH_STORE"}
    env["PATH"] = f"{shim.parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    out = {}
    for cmd in cmds:
        res = subprocess.run(["bash", "-c", cmd], cwd=clone, env=env, capture_output=True,
                             text=True, timeout=600)
        name = "check_all" if "--all" in cmd else cmd.split()[3]
        assert res.returncode in ALLOWED.get(name, {0}), (cmd, res.returncode, res.stderr[-2000:])
        assert "Traceback" not in res.stderr and "error:" not in res.stderr, (cmd, res.stderr[-2000:])
        out.setdefault(name, res.stdout)
    assert "fold1" in out["runs"]
    doc = json.loads(out["check"])
    assert doc["source"]["run_id"].startswith("fold1-")
    assert out["diff"].startswith("identical")
    assert (clone / "data" / "out" / "trap.jsonl").stat().st_size > 0
    assert (clone / "data" / "out" / "bench.json").stat().st_size > 0
    new = files_under(clone) - committed  # nothing outside the folders git ignores
    assert new and all(f.startswith(("data/store/", "data/out/")) for f in new), sorted(new)[:20]
    ignored = (REPO / ".gitignore").read_text().split()
    assert "/data/store/" in ignored and "/data/out/" in ignored
