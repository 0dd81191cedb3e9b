"""Who writes a run: the follower and the store agree (regime_dash.store.claims, doctor, labels).

Planted for real, with follower subprocesses and a trainer stand-in writing the file:
- a second follower of the same run, and a follower of another file under the same name, are
  refused naming the first (pid, host, start); the claim is freed on a clean end and taken over
  from a follower killed with -9; afterwards parts, metadata, DuckDB and ``runs`` agree;
- ``doctor`` on a run whose follower was killed between writing a part and its metadata says
  "recoverable: restart the follower" and ``--repair`` leaves it in place (its source gone too);
  a run ``--repair`` does move stays readable where doctor says; ``doctor --repair`` during a
  live follow touches nothing and the follow goes on;
- ``rename``, ``tag`` and ``note`` made through the CLI while a follower writes the run survive its
  later commits and its restart; the same for a Delta store, with its claim.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from polling import wait_until
from s3_server import child_env
from regime_dash.errors import StoreError
from regime_dash.follow.follower import Follower
from regime_dash.store.doctor import repair, survey
from regime_dash.store.run_store import RunStore

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "data" / "samples" / "diag.jsonl"
WRITER = Path(__file__).with_name("follow_writer.py")
pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]  # follower subprocesses


def write(dst: Path, a: int, b: int, *extra: str, wait: bool = True) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, str(WRITER), str(SAMPLE), str(dst), "--from", str(a), "--to", str(b),
                             *extra])
    if wait:
        assert proc.wait(60) == 0
    return proc


#: The folder store's claims, parts and doctor are what most tests here look at; the Delta store's own
#: test below passes its format.
FOLDER = ("--store-format", "folder")


def cli(*args: str, store: Path, fmt: tuple[str, ...] = FOLDER) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "regime_dash", *args, "--store", str(store), *fmt], cwd=ROOT,
                          capture_output=True, text=True, timeout=180, env=child_env())


def follower(src: Path, name: str, store: Path, *extra: str, fmt: tuple[str, ...] = FOLDER) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "regime_dash", "ingest", str(src), "--follow", "--name", name,
                             "--store", str(store), *fmt, "--commit-every", "0.1", *extra], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())


def claim_of(store: Path, name: str) -> dict:
    path = store / ".claims" / f"{name}.json"
    try:
        return json.loads(path.read_text() or "null") or {}
    except (OSError, ValueError):
        return {}


def duck_rows(root: Path) -> int:
    if not list(root.glob("**/*.parquet")):
        return 0
    return duckdb.sql(f"SELECT count(*) FROM read_parquet('{root}/**/*.parquet', hive_partitioning=true, "
                      "union_by_name=true)").fetchall()[0][0]


def agree(store: RunStore) -> int:
    """Every run's parts hold the rows its metadata says, and DuckDB counts what ``runs`` lists."""
    for r in store.list_runs():
        assert sum(pq.read_metadata(p).num_rows for p in store.parts(r["run_id"])) == r["rows"], r
    total = sum(r["rows"] for r in store.list_runs())
    assert duck_rows(store.root) == total
    return total


# ---------------------------------------------------------------- one writer per run


def test_a_second_follower_of_a_run_or_its_name_is_refused_naming_the_first(tmp_path):
    store_dir, src, other = tmp_path / "store", tmp_path / "job.diag.jsonl", tmp_path / "other.diag.jsonl"
    writer = write(src, 0, 1200, "--rate", "400", wait=False)
    write(other, 0, 50)
    first = follower(src, "job", store_dir)  # until it is told to end (SIGTERM: a clean end)
    wait_until(lambda: claim_of(store_dir, "job").get("pid") == first.pid, 60, "the first follower's claim")
    started = claim_of(store_dir, "job")["started"]
    # the same file under the same name: one run, two writers
    second = cli("ingest", str(src), "--follow", "--name", "job", "--until-idle", "1", store=store_dir)
    assert second.returncode == 2, second.stdout + second.stderr
    assert f"pid {first.pid} on {socket.gethostname()}" in second.stderr and started in second.stderr
    assert "already followed" in second.stderr and "Traceback" not in second.stderr
    # another file under the same name: the name is claimed, whether or not the run exists yet
    third = cli("ingest", str(other), "--follow", "--name", "job", "--until-idle", "1", store=store_dir)
    assert third.returncode == 2 and f"pid {first.pid}" in third.stderr and "--name" in third.stderr
    assert writer.wait(60) == 0
    wait_until(lambda: RunStore(store_dir).list_runs()[0]["rows"] == 1200, 60, "every line committed")
    assert first.poll() is None  # it was alive through both refusals
    first.send_signal(signal.SIGTERM)
    _out, err = first.communicate(timeout=120)
    assert first.returncode == 0 and "terminated" in err, err
    assert not (store_dir / ".claims" / "job.json").exists()  # a clean end frees the run
    store = RunStore(store_dir)
    (run,) = store.list_runs()
    assert run["name"] == "job" and run["rows"] == 1200 and agree(store) == 1200
    assert store.load(run["run_id"], columns=["step"])["step"].tolist() == list(range(1200))
    check = cli("check", "job", store=store_dir)
    assert "ambiguous" not in check.stderr and check.returncode in (0, 1), check.stderr
    # freed: the same follow resumes, and another file gets its own name
    again = cli("ingest", str(src), "--follow", "--name", "job", "--until-idle", "1", store=store_dir)
    assert again.returncode == 0, again.stderr
    assert agree(RunStore(store_dir)) == 1200


def test_a_killed_followers_claim_is_taken_over(tmp_path):
    store_dir, src = tmp_path / "store", tmp_path / "job.diag.jsonl"
    writer = write(src, 0, 900, "--rate", "300", wait=False)
    first = follower(src, "job", store_dir, "--until-idle", "30")
    wait_until(lambda: RunStore(store_dir).list_runs() if store_dir.exists() else False, 60, "a first commit")
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    assert claim_of(store_dir, "job").get("pid") == first.pid  # its record stays; its lock died with it
    assert writer.wait(60) == 0
    done = cli("ingest", str(src), "--follow", "--name", "job", "--until-idle", "1.5", store=store_dir)
    assert done.returncode == 0, done.stderr
    store = RunStore(store_dir)
    (run,) = store.list_runs()
    assert run["rows"] == 900 and agree(store) == 900
    assert store.load(run["run_id"], columns=["step"])["step"].tolist() == list(range(900))


# ------------------------------------------------------------------------------ doctor


CRASH = """
import os, signal, sys
from regime_dash.store.run_store import RunStore
from regime_dash.follow.follower import Follower
store, src, more = RunStore(sys.argv[1]), sys.argv[2], sys.argv[3]
f = Follower(store, src, "job", commit_every=0)
f.poll(force=True)  # the first commit: part and metadata
with open(src, "ab") as fh:  # the trainer writes on
    fh.write(open(more, "rb").read())
# the verdict is judged once the part is visible, before the metadata is written: die there
f.verdict.update = lambda frame: os.kill(os.getpid(), signal.SIGKILL)
f.poll(force=True)
"""


def crash_between_part_and_metadata(tmp_path: Path) -> tuple[Path, Path, str]:
    store_dir, src, more = tmp_path / "store", tmp_path / "job.diag.jsonl", tmp_path / "more.jsonl"
    write(src, 0, 200)
    write(more, 200, 300)
    proc = subprocess.run([sys.executable, "-c", CRASH, str(store_dir), str(src), str(more)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env=child_env())
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    (run,) = RunStore(store_dir).list_runs()
    parts = RunStore(store_dir).parts(run["run_id"])
    assert run["rows"] == 200 and sum(pq.read_metadata(p).num_rows for p in parts) == 300  # the planted state
    return store_dir, src, run["run_id"]


def test_doctor_calls_a_run_killed_mid_commit_recoverable_and_repair_leaves_it(tmp_path):
    store_dir, src, rid = crash_between_part_and_metadata(tmp_path)
    out = cli("doctor", store=store_dir)
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"recoverable  {store_dir / f'run={rid}'}" in out.stdout and "restart the follower" in out.stdout
    assert "damaged" not in out.stdout
    # the source gone: the run can no longer be recovered by a restart, and it still stays
    away = src.with_name("moved-away.jsonl")
    os.replace(src, away)
    fixed = cli("doctor", "--repair", "--json", store=store_dir)
    assert fixed.returncode == 1, fixed.stdout + fixed.stderr
    (problem,) = json.loads(fixed.stdout)
    assert problem["kind"] == "recoverable" and problem["moved_to"] is None and "is gone" in problem["detail"]
    store = RunStore(store_dir)
    assert [r["run_id"] for r in store.list_runs()] == [rid] and not (store_dir / "_quarantine").exists()
    assert duck_rows(store_dir) == 300
    # the source back: the restart the doctor named finishes the commit, and doctor finds nothing
    os.replace(away, src)
    again = cli("ingest", str(src), "--follow", "--name", "job", "--until-idle", "1", store=store_dir)
    assert again.returncode == 0, again.stderr
    assert RunStore(store_dir).meta(rid)["rows"] == 300 and agree(RunStore(store_dir)) == 300
    clean = cli("doctor", store=store_dir)
    assert clean.returncode == 0 and "0 problem(s)" in clean.stdout, clean.stdout


def test_repair_keeps_the_rows_it_moves_readable_and_says_where(tmp_path):
    store_dir, src = tmp_path / "store", tmp_path / "job.diag.jsonl"
    write(src, 0, 300)
    store = RunStore(store_dir)
    f = Follower(store, src, "job", commit_every=0)
    f.poll(force=True)
    f.close()
    src.unlink()  # the store holds the last copy of these rows
    (part,) = store.parts(f.run_id)
    store.update_meta(f.run_id, lambda m: m.update(rows=299))  # damaged by hand: not what a stop leaves
    out = cli("doctor", "--repair", store=store_dir)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"damaged   {part.parent}" in out.stdout
    moved = [ln for ln in out.stdout.splitlines() if ln.startswith("moved ")]
    assert len(moved) == 1 and "stay readable there" in moved[0]
    dest = Path(moved[0].split(" -> ", 1)[1].split("; ", 1)[0])
    kept = pq.read_table(dest / (part.name + ".quarantined"))
    assert kept.column("step").to_pylist() == list(range(300))
    assert store.list_runs() == [] and duck_rows(store_dir) == 0


def test_doctor_repair_during_a_live_follow_touches_nothing(tmp_path):
    store_dir, src = tmp_path / "store", tmp_path / "job.diag.jsonl"
    write(src, 0, 100)
    live = follower(src, "job", store_dir, "--until-idle", "2")
    wait_until(lambda: RunStore(store_dir).list_runs() if store_dir.exists() else False, 60, "a first commit")
    writer = write(src, 100, 1200, "--rate", "400", wait=False)
    store, surveys = RunStore(store_dir), 0
    while live.poll() is None:  # survey and repair as fast as they go, between and inside commits
        found = survey(store)
        assert found == [], found
        assert repair(store, found) == []
        surveys += 1
        if surveys % 25 == 0 and writer.poll() is None:  # the CLI's too, now and then
            out = cli("doctor", "--repair", store=store_dir)
            assert out.returncode == 0 and "0 problem(s)" in out.stdout, out.stdout
    assert writer.wait(60) == 0 and surveys > 25
    _o, err = live.communicate(timeout=120)
    assert live.returncode == 0 and "removed from the store" not in err, err
    (run,) = store.list_runs()
    assert run["rows"] == 1200 and agree(store) == 1200 and not (store_dir / "_quarantine").exists()
    assert store.load(run["run_id"], columns=["step"])["step"].tolist() == list(range(1200))
    print(f"surveys during the follow: {surveys}")


# ------------------------------------------------------------------------------ labels


def test_labels_made_while_a_follower_writes_survive_its_commits_and_restart(tmp_path):
    store_dir, src = tmp_path / "store", tmp_path / "job.diag.jsonl"
    write(src, 0, 300)
    live = follower(src, "job", store_dir)  # until it is told to end (SIGTERM: a clean end)
    wait_until(lambda: (RunStore(store_dir).list_runs() or [{}])[0].get("rows") == 300 if store_dir.exists()
               else False, 60, "the first 300 rows committed")
    rid = RunStore(store_dir).list_runs()[0]["run_id"]
    for args in (("rename", "job", "renamed"), ("tag", "renamed", "keep"), ("note", "renamed", "mine")):
        done = cli(*args, store=store_dir)
        assert done.returncode == 0, done.stderr
    write(src, 300, 700)  # more commits after the labels
    wait_until(lambda: RunStore(store_dir).meta(rid)["rows"] == 700, 60, "the later lines committed")
    live.send_signal(signal.SIGTERM)
    _o, err = live.communicate(timeout=120)
    assert live.returncode == 0, err
    meta = RunStore(store_dir).meta(rid)
    assert meta["rows"] == 700 and meta["follow"]["active"] is False
    assert (meta["name"], meta["tags"], meta["notes"]) == ("renamed", ["keep"], "mine")
    # a restart under the follow's first name resumes the same run and keeps its labels
    write(src, 700, 800)
    again = cli("ingest", str(src), "--follow", "--name", "job", "--until-idle", "1", store=store_dir)
    assert again.returncode == 0, again.stderr
    (run,) = RunStore(store_dir).list_runs()
    assert (run["run_id"], run["name"], run["tags"], run["notes"], run["rows"]) == (rid, "renamed", ["keep"],
                                                                                   "mine", 800)


# ------------------------------------------------------------------------ a Delta store


def test_a_delta_store_claims_the_run_and_keeps_its_labels(tmp_path):
    from regime_dash.store import labels
    from regime_dash.store.delta import DeltaRunStore

    fmt = ("--store-format", "delta")
    store_dir, src, other = tmp_path / "team", tmp_path / "job.diag.jsonl", tmp_path / "other.diag.jsonl"
    write(src, 0, 200)
    write(other, 0, 50)
    store = DeltaRunStore(str(store_dir))
    f = Follower(store, src, "job", commit_every=0)
    f.poll(force=True)
    for path in (src, other):  # the same run, then another file under its name: both refused, naming it
        out = cli("ingest", str(path), "--follow", "--name", "job", "--until-idle", "1", store=store_dir, fmt=fmt)
        assert out.returncode == 2 and f"pid {os.getpid()} on {socket.gethostname()}" in out.stderr, out.stderr
    with pytest.raises(StoreError, match="already followed"):
        Follower(store, src, "job")
    labels.rename(store, "job", "renamed")
    labels.tag(store, "renamed", ["keep"])
    labels.set_note(store, "renamed", "mine")
    write(src, 200, 400)
    f.poll(force=True)
    f.close()
    (run,) = store.list_runs()
    assert (run["name"], run["tags"], run["notes"], run["rows"]) == ("renamed", ["keep"], "mine", 400)
    # a follower killed with -9 leaves its claim behind: the next one takes it over
    write(src, 400, 600)
    crashed = subprocess.run([sys.executable, "-c", CRASH.replace("RunStore(sys.argv[1])",
                                                                 "DeltaRunStore(sys.argv[1])").replace(
        "from regime_dash.store.run_store import RunStore", "from regime_dash.store.delta import DeltaRunStore"),
        str(store_dir), str(src), str(other)], cwd=ROOT, capture_output=True, text=True, timeout=180,
        env=child_env())
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    done = cli("ingest", str(src), "--follow", "--name", "job", "--until-idle", "1", store=store_dir, fmt=fmt)
    assert done.returncode == 0, done.stderr
    (run,) = DeltaRunStore(str(store_dir)).list_runs()
    assert (run["name"], run["tags"], run["rows"]) == ("renamed", ["keep"], 650)
    frame = DeltaRunStore(str(store_dir)).load(run["run_id"], columns=["step", "_line"]).sort_values("_line")
    assert frame["_line"].tolist() == list(range(1, 651))  # no line twice, none lost
    assert frame["step"].tolist() == [*range(600), *range(50)]
