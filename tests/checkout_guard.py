"""A pytest plugin: the test session fails if it changed the checkout.

Tests write into temporary folders only (``tmp_path``; screenshots and measured figures
under ``$REGIME_DASH_TEST_ARTIFACTS``, see :mod:`artifacts`). At the session's start
this plugin notes ``git status`` of the checkout (pytest's rootdir), every changed tracked
file and every untracked or ignored file with its size and modification time; at its end
it looks again, and any difference (a tracked file written, a file left behind or removed)
fails the session, listed in a section of the summary. Interpreter and tool caches
(``__pycache__``, which holds numba's cache too, ``.pytest_cache``, ``.hypothesis``) are left
out, and so is the artifacts folder where a developer put it inside the checkout on purpose
(``REGIME_DASH_TEST_ARTIFACTS=test-artifacts``). Outside a git checkout, or without git, nothing
is checked.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

#: Folder names whose contents a test run may create or change (caches, not outputs).
CACHES = frozenset({"__pycache__", ".pytest_cache", ".hypothesis"})
#: The variable naming the artifacts folder (:mod:`artifacts`): a developer's choice, not checked.
ARTIFACTS_ENV = "REGIME_DASH_TEST_ARTIFACTS"

_BEFORE = pytest.StashKey[dict]()
_CHANGES = pytest.StashKey[list]()


def snapshot(root: Path) -> dict[str, tuple] | None:
    """``{path: (git status code, size, mtime ns)}`` of every file of ``root`` that ``git status``
    lists (changed tracked files, untracked and ignored files, one by one), caches aside; a
    listed file that is gone has size and mtime None. None where ``root`` is no git checkout."""
    try:
        proc = subprocess.run(["git", "-C", str(root), "status", "--porcelain=v1", "-z", "--ignored=traditional",
                               "--untracked-files=all"], capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    kept = _artifacts_folder(root)
    state = {}
    for code, path in _entries(proc.stdout):
        if CACHES.isdisjoint(Path(path).parts) and (kept is None or not (root / path).resolve().is_relative_to(kept)):
            state[path] = (code, *_stat(root / path))
    return state


def _artifacts_folder(root: Path) -> Path | None:
    """The artifacts folder a developer named, resolved against ``root``; None when unset."""
    named = os.environ.get(ARTIFACTS_ENV)
    return (root / named).resolve() if named else None


def _entries(out: bytes) -> list[tuple[str, str]]:
    """``(XY code, path)`` of ``git status --porcelain=v1 -z`` output (a rename's source path skipped)."""
    fields = out.decode("utf-8", "surrogateescape").split("\0")
    entries, skip = [], False
    for field in fields:
        if skip or not field:
            skip = False
            continue
        code, path = field[:2], field[3:]
        entries.append((code, path))
        skip = code[0] in "RC"  # the next field is the path it was renamed or copied from
    return entries


def _stat(path: Path) -> tuple[int | None, int | None]:
    try:
        st = os.stat(path)
    except OSError:
        return None, None
    return st.st_size, st.st_mtime_ns


def changes(before: dict[str, tuple], after: dict[str, tuple]) -> list[str]:
    """One line per file whose state differs between two :func:`snapshot` results."""
    lines = []
    for path in sorted(before.keys() | after.keys()):
        if path not in before:
            lines.append(f"left behind: {path} ({after[path][0].strip() or 'changed'})")
        elif path not in after:
            lines.append(f"restored or removed: {path}")
        elif before[path] != after[path]:
            lines.append(f"changed: {path} (git status {after[path][0]!r})")
    return lines


def pytest_sessionstart(session: pytest.Session) -> None:
    before = snapshot(session.config.rootpath)
    if before is not None:
        session.config.stash[_BEFORE] = before


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = session.config.stash.get(_BEFORE, None)
    after = snapshot(session.config.rootpath) if before is not None else None
    found = changes(before, after) if after is not None else []
    session.config.stash[_CHANGES] = found
    if found and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    found = config.stash.get(_CHANGES, [])
    if found:
        terminalreporter.section("the tests changed the checkout", sep="=", red=True, bold=True)
        for line in found:
            terminalreporter.line(line)
        terminalreporter.line("(tests write under tmp_path or $REGIME_DASH_TEST_ARTIFACTS, never into the checkout)")
