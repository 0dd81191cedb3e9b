"""The checkout guard (:mod:`checkout_guard`): a session that writes into the checkout fails and names the file."""
from __future__ import annotations

import shutil
import subprocess

import pytest

import checkout_guard

pytest_plugins = ["pytester"]

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="the guard reads git status")


def _git(root, *args) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


@pytest.fixture
def checkout(pytester):
    """A git checkout (pytester's folder) with a tracked file, an ignored folder and the guard as its plugin."""
    root = pytester.path
    pytester.makefile(".txt", tracked="kept\n")
    pytester.makefile("", **{".gitignore": "out/\n__pycache__/\n"})
    pytester.makeini("[pytest]\n")
    _git(root, "init", "-q")
    _git(root, "add", "tracked.txt", ".gitignore", "tox.ini")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
    return root


def run_session(pytester, tmp_path):
    """pytest in the checkout with the guard, its temporary folders outside it (pytester's default is inside)."""
    return pytester.runpytest_inprocess("-p", "checkout_guard", "-p", "no:cacheprovider",
                                        f"--basetemp={tmp_path / 'basetemp'}")


def test_snapshot_sees_written_left_and_ignored_files_but_not_caches(checkout):
    before = checkout_guard.snapshot(checkout)
    assert before == {}
    (checkout / "tracked.txt").write_text("changed\n")
    (checkout / "out").mkdir()
    (checkout / "out" / "shot.png").write_bytes(b"png")
    (checkout / "__pycache__").mkdir()
    (checkout / "__pycache__" / "x.pyc").write_bytes(b"")
    lines = checkout_guard.changes(before, checkout_guard.snapshot(checkout))
    assert any(line.startswith("changed: tracked.txt") or line.startswith("left behind: tracked.txt")
               for line in lines), lines
    assert any("out/shot.png" in line for line in lines), lines
    assert not any("__pycache__" in line for line in lines), lines
    assert checkout_guard.snapshot(checkout.parent / "no-such-folder") is None


def test_a_session_that_writes_into_the_checkout_fails(checkout, pytester, tmp_path):
    pytester.makepyfile(test_writes="""
        from pathlib import Path

        def test_leaves_a_file(request):
            (Path(str(request.config.rootpath)) / "out").mkdir(exist_ok=True)
            (Path(str(request.config.rootpath)) / "out" / "left.png").write_bytes(b"x")

        def test_overwrites_a_tracked_file(request):
            (Path(str(request.config.rootpath)) / "tracked.txt").write_text("overwritten\\n")
    """)
    result = run_session(pytester, tmp_path)
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*the tests changed the checkout*", "*out/left.png*", "*tracked.txt*"])


def test_a_session_that_keeps_to_tmp_path_passes(checkout, pytester, tmp_path):
    pytester.makepyfile(test_clean="""
        def test_writes_under_tmp_path(tmp_path):
            (tmp_path / "shot.png").write_bytes(b"x")
    """)
    _git(checkout, "add", "test_clean.py")
    result = run_session(pytester, tmp_path)
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK
    assert "the tests changed the checkout" not in result.stdout.str()


def test_an_artifacts_folder_a_developer_put_in_the_checkout_is_not_counted(checkout, monkeypatch):
    monkeypatch.setenv(checkout_guard.ARTIFACTS_ENV, "out")
    before = checkout_guard.snapshot(checkout)
    (checkout / "out").mkdir()
    (checkout / "out" / "shot.png").write_bytes(b"png")
    (checkout / "elsewhere.png").write_bytes(b"png")
    assert checkout_guard.changes(before, checkout_guard.snapshot(checkout)) == ["left behind: elsewhere.png (??)"]
