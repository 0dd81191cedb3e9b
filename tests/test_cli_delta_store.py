"""The CLI on a Delta store, in subprocesses: a local Delta path and ``s3://`` on a moto server.

ingest, ``ingest --follow``, runs, check (a run, ``--follow``, ``--all`` over Dask workers), rm,
``runs --removed``, restore, ``store migrate`` of a folder store with its labels, layouts and
rejects, ``store vacuum``; and the errors: an unknown scheme, a bad ``--storage-option``, undo on
a folder store. A URI never becomes a local folder.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("deltalake", reason="deltalake is not installed (requirements.txt)")

from regime_dash.diag.panel_set import Panel, PanelSet  # noqa: E402
from regime_dash.store import labels  # noqa: E402
from regime_dash.store.delta import DeltaRunStore  # noqa: E402
from regime_dash.store.run_store import RunStore  # noqa: E402
from tests.s3_server import child_env, s3_server  # noqa: E402,F401  (the fixture)
from tests.test_store import diag  # noqa: E402  (the same diag lines as the folder store's tests)


class Team:
    """A Delta store the CLI is pointed at: its ``--store`` arguments and the environment reaching it."""

    def __init__(self, cwd: Path, store_args: list[str], env: dict[str, str] | None = None):
        self.cwd, self.store_args, self.env = cwd, store_args, env or {}

    def cli(self, *args: str, store: bool = True, timeout: float = 240) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "regime_dash", *args, *(self.store_args if store else [])]
        return subprocess.run(cmd, cwd=self.cwd, env=child_env(self.env), capture_output=True, text=True,
                              timeout=timeout)

    def ok(self, *args: str, **kw) -> subprocess.CompletedProcess:
        r = self.cli(*args, **kw)
        assert r.returncode == 0, (args, r.stdout, r.stderr)
        return r

    def runs(self, *extra: str) -> list[dict]:
        return json.loads(self.ok("runs", "--json", *extra).stdout)


@pytest.fixture(params=["local", "s3"])
def team(request, tmp_path) -> Team:
    (tmp_path / "a.jsonl").write_bytes(diag(200) + b"broken {\n")
    (tmp_path / "b.jsonl").write_bytes(diag(150, extra_col="x"))
    (tmp_path / "c.jsonl").write_bytes(diag(120))
    if request.param == "local":
        return Team(tmp_path, ["--store", str(tmp_path / "team"), "--store-format", "delta"])
    server = request.getfixturevalue("s3_server")
    return Team(tmp_path, ["--store", f"s3://{server.bucket()}/team/runs"], server.env())


def _by_name(runs: list[dict]) -> dict[str, dict]:
    return {r["name"]: r for r in runs}


def test_ingest_runs_check_rm_restore(team, tmp_path):
    out = team.ok("ingest", "a.jsonl", "b.jsonl", "--json").stdout
    assert {r["rows"] for r in json.loads(out)} == {200, 150}
    runs = _by_name(team.runs())
    assert runs["a"]["rows"] == 200 and runs["a"]["rejected"] == 1 and runs["b"]["rows"] == 150
    if not team.env:  # a local Delta folder is known as one without --store-format
        assert (tmp_path / "team" / "runs" / "_delta_log").is_dir()
        assert len(json.loads(Team(tmp_path, team.store_args[:2]).ok("runs", "--json").stdout)) == 2

    # a run of the Delta store checks as the same file does in a folder store
    folder = Team(tmp_path, ["--store", str(tmp_path / "folder"), "--store-format", "folder"])
    folder.ok("ingest", "a.jsonl", "b.jsonl")
    mine, theirs = team.cli("check", "a", "--json"), folder.cli("check", "a", "--json")
    assert mine.returncode == theirs.returncode and mine.returncode in (0, 1)
    mine_doc, theirs_doc = json.loads(mine.stdout), json.loads(theirs.stdout)
    assert mine_doc["checks"] == theirs_doc["checks"] and mine_doc["counts"] == theirs_doc["counts"]
    every, every_folder = team.cli("check", "--all", "--scheduler", "local"), folder.cli("check", "--all")
    assert every.returncode == every_folder.returncode, (every.stdout, every.stderr)
    for run in runs.values():
        assert run["run_id"] in every.stdout

    gone = team.ok("rm", "a").stdout
    assert runs["a"]["run_id"] in gone and "a" not in _by_name(team.runs())
    removed = team.runs("--removed")
    assert [r["run_id"] for r in removed] == [runs["a"]["run_id"]] and removed[0]["restorable_until"]
    assert runs["a"]["run_id"] in team.ok("restore", "a").stdout
    back = _by_name(team.runs())
    assert back["a"]["rows"] == 200 and back["a"]["rejected"] == 1 and team.runs("--removed") == []
    assert "removed" in team.ok("store", "vacuum", "--retention-hours", "200").stdout
    assert "0 run(s) recovered" in team.ok("doctor").stdout
    assert not (tmp_path / "s3:").exists() and not any(p.name.startswith("s3") for p in tmp_path.iterdir())


def test_follow_into_the_store_and_check_follow(team):
    r = team.ok("ingest", "--follow", "--until-idle", "1", "--name", "live", "c.jsonl", timeout=120)
    assert "120 in all" in r.stdout + r.stderr
    run = _by_name(team.runs())["live"]
    assert run["rows"] == 120 and run["last_step"] == 119
    watched = team.ok("check", "live", "--follow", "--until-idle", "1", timeout=120)
    assert "120 rows" in watched.stdout and "follow ended, verdict pass" in watched.stderr


def test_migrate_a_folder_store_losing_nothing(team, tmp_path):
    old = RunStore(tmp_path / "old")
    a = old.ingest(tmp_path / "a.jsonl", name="a")
    old.ingest(tmp_path / "b.jsonl", name="b")
    old.ingest(tmp_path / "a.jsonl", name="again")  # the same bytes: an alias of run a
    labels.tag(old, "a", ["baseline"])
    labels.set_note(old, "b", "the widened one")
    from regime_dash.store import layouts

    panels = PanelSet((Panel("risk_stack.popart.sigma", True),), False)
    layouts.save(old, "mine", panels)
    target = team.store_args[1]
    r = team.ok("store", "migrate", str(tmp_path / "old"), target, store=False)
    assert "copied 2 run(s)" in r.stdout and "verified row for row: 2" in r.stdout and a.run_id in r.stdout
    runs = _by_name(team.runs())
    assert runs["a"]["tags"] == ["baseline"] and runs["a"]["aliases"] == ["again"]
    assert runs["a"]["rejected"] == 1 and runs["b"]["notes"] == "the widened one"
    new = DeltaRunStore(target, storage_options=team.env or None)
    assert new.rejects(a.run_id) == old.rejects(a.run_id) and new.layouts.load("mine") == panels
    assert new.load_table(a.run_id).num_rows == old.load_table(a.run_id).num_rows == 200
    again = team.ok("store", "migrate", str(tmp_path / "old"), target, store=False)
    assert "copied 0 run(s) of 2" in again.stdout  # nothing twice; both verified again


def test_bad_locations_and_options_exit_2_naming_them(tmp_path):
    (tmp_path / "a.jsonl").write_bytes(diag(20))
    t = Team(tmp_path, [])
    r = t.cli("runs", "--store", "foo://bucket/runs")
    assert r.returncode == 2 and "'foo'" in r.stderr
    r = t.cli("runs", "--store", "s3://bucket/runs", "--storage-option", "NOEQUALS")
    assert r.returncode == 2 and "NOEQUALS" in r.stderr
    r = t.cli("runs", "--store", "s3://bucket/runs", "--storage-option", "bad key=1")
    assert r.returncode == 2 and "bad key" in r.stderr
    r = t.cli("app", "--store", "ftp://host/runs")
    assert r.returncode == 2 and "'ftp'" in r.stderr
    r = t.cli("ingest", "a.jsonl", "--store", "x", "--store-format", "parquet")
    assert r.returncode == 2 and "'parquet'" in r.stderr
    t.cli("ingest", "a.jsonl", "--store", "folder", "--store-format", "folder")  # undo is a Delta store's only
    for args in (["restore", "a"], ["runs", "--removed"], ["store", "vacuum"]):
        r = t.cli(*args, "--store", "folder")
        assert r.returncode == 2 and "store migrate" in r.stderr, (args, r.stderr)
    made = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("."))  # .folder.staging: its staging
    assert made == ["a.jsonl", "folder"]  # no URI made a folder, nor did the refused format
