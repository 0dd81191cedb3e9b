"""Following a file a real writer process is still writing (regime_dash.follow.follower, ``ingest --follow``).

Covers: appends; a partial last line that waits for its newline; rotation (the path replaced);
truncation (a new segment); kill -9 of the follower mid-commit and a restart (exact rows, no
duplicate, DuckDB reads the same count); a planted failure that runs the alert hook exactly
once; a webhook whose server times out while the follow goes on; gzip refused with exit 2.
"""
from __future__ import annotations

import gzip
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest

from polling import wait_until
from regime_dash.follow.alerts import Dispatch
from regime_dash.follow.follower import Follower, FollowSet, follow
from regime_dash.store.open import open_store
from regime_dash.store.run_store import RunStore

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "data" / "samples" / "diag.jsonl"
WRITER = Path(__file__).with_name("follow_writer.py")
pytestmark = pytest.mark.timeout(180)


def write(dst: Path, a: int, b: int, *extra: str, wait: bool = True) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, str(WRITER), str(SAMPLE), str(dst), "--from", str(a), "--to", str(b),
                             *extra])
    if wait:
        assert proc.wait(60) == 0
    return proc


def drive(f, until, timeout: float = 30.0):
    """Poll ``f`` (a Follower) until ``until()`` holds; the commits made."""
    out, end = [], time.monotonic() + timeout
    while time.monotonic() < end:
        out += f.poll(force=True)
        if until():
            return out
        time.sleep(0.05)  # a poll's interval
    raise AssertionError(f"not reached in {timeout} s; state {f.run.state}")


def steps(store: RunStore, run_id: str) -> list[int]:
    return store.load(run_id, columns=["step"])["step"].tolist()


def cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "regime_dash", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, **kw)


def test_appends_and_a_partial_last_line_wait_for_their_newline(tmp_path):
    store, src = RunStore(tmp_path / "store"), tmp_path / "job.diag.jsonl"
    f = Follower(store, src, "job", commit_every=0)
    assert f.poll(force=True) == [] and not f.run.exists  # the file does not exist yet: waited for
    writer = write(src, 0, 300, "--rate", "2000", "--partial", "--partial-wait", "1.5", wait=False)
    drive(f, lambda: f.run.state.rows >= 299)
    if writer.poll() is None:  # the last line is half written: it is not in the store
        assert f.run.state.rows == 299 and src.read_bytes()[-1:] != b"\n"
    assert writer.wait(30) == 0
    drive(f, lambda: f.run.state.rows == 300)
    write(src, 300, 420)
    drive(f, lambda: f.run.state.rows == 420)
    assert steps(store, f.run_id) == list(range(420))
    meta = store.meta(f.run_id)
    assert meta["follow"]["offset"] == src.stat().st_size and meta["rows"] == 420 and meta["lines"] == 420
    assert meta["sha256"] is None and meta["follow"]["segments"][0]["reason"] == "start"
    f.close()
    assert store.meta(f.run_id)["follow"]["active"] is False


def test_rotation_and_truncation_continue_the_run(tmp_path):
    store, src = RunStore(tmp_path / "store"), tmp_path / "job.diag.jsonl"
    write(src, 0, 200)
    f = Follower(store, src, "job", commit_every=0)
    drive(f, lambda: f.run.state.rows == 200)
    write(src, 200, 350, "--rotate")  # the trainer moved its log aside and began a new one
    drive(f, lambda: f.run.state.rows == 350)
    write(src, 350, 400, "--truncate")  # ... then reopened it with "w"
    drive(f, lambda: f.run.state.rows == 400)
    write(src, 400, 430)
    drive(f, lambda: f.run.state.rows == 430)
    assert steps(store, f.run_id) == list(range(430))
    segs = store.meta(f.run_id)["follow"]["segments"]
    assert [s["reason"] for s in segs] == ["start", "replaced", "truncated"]
    assert [s["first_line"] for s in segs] == [1, 201, 351]
    f.close()


def test_truncation_can_stop_the_follow(tmp_path):
    store, src = RunStore(tmp_path / "store"), tmp_path / "job.diag.jsonl"
    write(src, 0, 100)
    fset = FollowSet(store, [src], "job", commit_every=0, on_truncate="stop")
    fset.poll(force=True)
    write(src, 100, 120, "--truncate")
    why = follow(fset, until_idle=20, poll_every=0.05)
    assert "truncated" in why and steps(store, fset.followers[src].run_id) == list(range(100))


@pytest.mark.slow  # three followers started and killed: ~3.4 s of CPU
def test_kill_9_mid_commit_and_restart_lose_and_repeat_nothing(tmp_path):
    store_dir, src = tmp_path / "store", tmp_path / "job.diag.jsonl"
    writer = write(src, 0, 1200, "--rate", "600", wait=False)
    args = ["ingest", str(src), "--follow", "--name", "job", "--store", str(store_dir), "--commit-every", "0.05",
            "--store-format", "folder"]  # a folder store's part caught mid-write (run=*/*.parquet.tmp)
    caught = 0
    for _ in range(3):  # three kills, each while a part is being written when the timing allows it
        proc = subprocess.Popen([sys.executable, "-m", "regime_dash", *args, "--until-idle", "30"], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.monotonic() + 8
        run_dirs = []
        while time.monotonic() < end and not run_dirs:
            run_dirs = list(store_dir.glob("run=*")) if store_dir.exists() else []
            time.sleep(0.01)  # a poll's interval
        while time.monotonic() < end:
            if any(p.name.endswith(".parquet.tmp") for d in run_dirs for p in d.iterdir()):
                caught += 1
                break
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert writer.wait(60) == 0
    done = cli(*args, "--until-idle", "2")
    assert done.returncode == 0, done.stderr
    store = RunStore(store_dir)
    (run,) = store.list_runs()
    got = steps(store, run["run_id"])
    assert got == list(range(1200)), (len(got), len(set(got)))
    assert run["rows"] == 1200
    lines = store.load(run["run_id"], columns=["_line"])["_line"].tolist()
    assert sorted(lines) == list(range(1, 1201))
    n = duckdb.sql(f"SELECT count(*) FROM read_parquet('{store_dir}/run=*/*.parquet', hive_partitioning=true, "
                   "union_by_name=true)").fetchall()[0][0]
    assert n == 1200
    print(f"kills that landed while a part was written: {caught} of 3")


@pytest.mark.slow  # a follower and hook subprocesses: ~2.7 s of CPU
def test_a_planted_failure_runs_the_hook_exactly_once(tmp_path):
    store_dir, src, out = tmp_path / "store", tmp_path / "job.diag.jsonl", tmp_path / "alerts.jsonl"
    write(src, 0, 300, "--bad-at", "120", "--bad-at", "121", "--bad-at", "250")
    proc = subprocess.Popen([sys.executable, "-m", "regime_dash", "ingest", str(src), "--follow", "--name", "job",
                             "--store", str(store_dir), "--commit-every", "0.2", "--until-idle", "3",
                             "--on-alert", f"{sys.executable} -c \"import sys; open({str(out)!r}, 'a')"
                             f".write(sys.stdin.read() + chr(10))\""],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # the first failure's alerts are out before more lines come
    wait_until(lambda: out.exists() and sum(1 for x in out.read_text().splitlines() if x.strip()) >= 3, 60,
               "the first failure's three alerts")
    write(src, 300, 500, "--bad-at", "400")  # fails again while still failing: no second alert
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    alerts = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
    # one alert per failing check, once: the flag check and the re-derivations the bad flag breaks
    checks = [a["check"] for a in alerts]
    assert sorted(checks) == ["flag_binary", "rederive.duration", "rederive.flag"], alerts
    assert all(a["first_step"] == 120 for a in alerts)
    a = alerts[checks.index("flag_binary")]
    assert a["run"].startswith("job-") and {x["run"] for x in alerts} == {a["run"]}
    assert "explore?runs=" + a["run"] in a["url"] and a["message"]
    assert stdout.count("ALERT") == len(alerts)
    meta = open_store(store_dir).meta(a["run"])
    assert set(meta["alerts"]["open"]) == set(checks) and meta["verdict"]["status"] == "fail"
    # a restart of the same follow resumes: the open alert is not sent again
    again = cli("ingest", str(src), "--follow", "--name", "job", "--store", str(store_dir), "--until-idle", "1",
                "--on-alert", f"{sys.executable} -c \"open({str(out)!r}, 'a').write('again' + chr(10))\"")
    assert again.returncode == 0 and "again" not in out.read_text()


class _Slow(http.server.BaseHTTPRequestHandler):
    hits: list[float] = []

    def do_POST(self):  # noqa: N802 - the stdlib's name
        _Slow.hits.append(time.monotonic())
        time.sleep(2.0)  # longer than the webhook's timeout
        self.send_response(200)
        self.end_headers()

    def log_message(self, *a):
        pass


def test_a_webhook_that_times_out_never_holds_the_follow_up(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    warnings: list[str] = []
    dispatch = Dispatch(webhook=url, webhook_timeout=0.3, attempts=3, backoff=0.1, warn=warnings.append)
    store, src = RunStore(tmp_path / "store"), tmp_path / "job.diag.jsonl"
    write(src, 0, 200, "--bad-at", "50")
    f = Follower(store, src, "job", commit_every=0)
    t0 = time.monotonic()
    for c in drive(f, lambda: f.run.state.rows == 200):
        for a in c.alerts:
            dispatch.send(a.to_dict())
    writer = write(src, 200, 600, "--rate", "400", wait=False)
    drive(f, lambda: f.run.state.rows == 600)
    assert writer.wait(30) == 0
    took = time.monotonic() - t0
    dispatch.close(wait=10)
    server.shutdown()
    sent = dispatch.failed["webhook"]  # one alert per failing check (the flag's and its re-derivations)
    assert sent >= 1 and len(_Slow.hits) == 3 * sent  # three attempts each, each timed out
    assert len(warnings) == sent and all("not delivered after 3 attempt(s)" in w for w in warnings)
    assert steps(store, f.run_id) == list(range(600))
    assert took < 10, took  # the follow took no notice of the hung server
    f.close()


@pytest.mark.slow  # CLI subprocesses: ~1.8 s of CPU
def test_gzip_cannot_be_followed(tmp_path):
    gz = tmp_path / "job.diag.jsonl.gz"
    gz.write_bytes(gzip.compress(SAMPLE.read_bytes()[:5000]))
    done = cli("ingest", str(gz), "--follow", "--store", str(tmp_path / "store"), "--until-idle", "1")
    assert done.returncode == 2 and "gzip" in done.stderr and "Traceback" not in done.stderr
    disguised = tmp_path / "plain.jsonl"
    disguised.write_bytes(gz.read_bytes())
    assert cli("ingest", str(disguised), "--follow", "--store", str(tmp_path / "store")).returncode == 2


def test_the_folder_form_follows_each_matching_file_as_one_run(tmp_path):
    d, store = tmp_path / "logs", RunStore(tmp_path / "store")
    d.mkdir()
    write(d / "fold0.diag.jsonl", 0, 100)
    (d / "notes.txt").write_text("not a diag\n")
    fset = FollowSet(store, [d], "job", pattern="*.diag.jsonl", commit_every=0)
    fset.poll(force=True)
    write(d / "fold1.diag.jsonl", 100, 180)  # a worker that starts later is picked up
    end = time.monotonic() + 20
    while len(store.list_runs()) < 2 and time.monotonic() < end:
        fset.poll(force=True)
        time.sleep(0.05)  # a poll's interval
    fset.close()
    runs = {r["name"]: r["rows"] for r in store.list_runs()}
    assert runs == {"job-fold0.diag": 100, "job-fold1.diag": 80}


def test_check_follow_exits_1_at_the_first_failure_and_0_on_a_clean_end(tmp_path, capsys):
    from regime_dash.cli import main  # the commands in this process: what they print, and their exit codes

    store_dir, src = tmp_path / "store", tmp_path / "clean.diag.jsonl"
    write(src, 0, 300)
    assert main(["ingest", str(src), "--follow", "--name", "clean", "--store", str(store_dir),
                 "--until-idle", "1"]) == 0
    capsys.readouterr()
    assert main(["check", "clean", "--follow", "--store", str(store_dir)]) == 0
    out = capsys.readouterr().out
    assert "300 rows" in out and "verdict pass" in out
    bad = tmp_path / "bad.diag.jsonl"
    write(bad, 0, 300, "--bad-at", "77")
    assert main(["ingest", str(bad), "--follow", "--name", "bad", "--store", str(store_dir),
                 "--until-idle", "1"]) == 0
    capsys.readouterr()
    assert main(["check", "bad", "--follow", "--store", str(store_dir)]) == 1
    assert "flag_binary from step 77" in capsys.readouterr().err


def _alert_urls(store: RunStore, src: Path, **kw) -> list[str]:
    """The Explore links of the alerts a follow of ``src`` (a failure planted at line 20) raises."""
    write(src, 0, 40, "--bad-at", "20")
    f = Follower(store, src, src.stem.split(".")[0], commit_every=0, **kw)
    return [a.url for c in f.poll(force=True) for a in c.alerts]


def test_alert_links_go_to_the_dashboard_the_store_recorded_else_the_default_port(tmp_path):
    urls = _alert_urls(RunStore(tmp_path / "plain"), tmp_path / "a.diag.jsonl")
    assert urls and all(u.startswith("http://localhost:8501/explore?runs=") for u in urls), urls
    store = RunStore(tmp_path / "served")
    store.record_dashboard_url("http://localhost:8765/")  # what a dashboard on port 8765 records
    assert store.dashboard_url() == "http://localhost:8765"
    urls = _alert_urls(store, tmp_path / "b.diag.jsonl")
    assert urls and all(u.startswith("http://localhost:8765/explore?runs=") for u in urls), urls
    named = _alert_urls(store, tmp_path / "c.diag.jsonl", dashboard="http://ci:9000")
    assert named and all(u.startswith("http://ci:9000/explore?") for u in named), named  # --dashboard-url wins


def test_a_dashboard_url_that_is_not_http_is_refused(tmp_path):
    from regime_dash.errors import StoreError

    with pytest.raises(StoreError, match="ftp://x"):
        RunStore(tmp_path / "s").record_dashboard_url("ftp://x")
