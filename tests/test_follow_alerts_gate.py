"""A follow's hostile cases: constant values, the CI gate after a killed follower, and alert delivery.

* A run whose logged values stay constant (a stalled trainer logging the same state each step, one
  frozen half way, one frozen at its peak, a constant column): the incremental verdict equals the
  whole run's at every cut, and a real follower of it runs to its clean end.
* ``check RUN --follow`` is a gate: a follower killed with SIGKILL mid-job makes it exit non-zero,
  naming why; a follow that ended cleanly on a passing run still exits 0 with "verdict pass".
* Alerts: a URL that is not http(s) is refused at start (exit 2, naming it, nothing followed); a
  webhook that never answers times out and each failure is printed; the sender survives a failure
  and delivers later alerts; a hook's process group is killed at its timeout and at the follow's end.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from polling import wait_until
from regime_dash.analysis.verdict import verdict
from regime_dash.diag.aliases import canonical_frame
from regime_dash.ingest import LINE_COLUMN, parse
from regime_dash.store.open import open_store
from test_incremental import assert_equal_at_cuts, key

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "data" / "samples" / "diag.jsonl"
WRITER = Path(__file__).with_name("follow_writer.py")
ENVELOPE = ("risk_stack", "regime", "popart_envelope", "max_abs_reward_ema")
pytestmark = pytest.mark.timeout(240)


def _sample() -> list[dict]:
    return [json.loads(x) for x in SAMPLE.read_text().splitlines()]


def _frozen(n: int, at: int, start: int = 0) -> list[dict]:
    """``n`` rows: the sample's rows from ``start`` for ``at`` steps, then its row ``start + at`` logged again
    at each later step."""
    rows = _sample()
    out = []
    for s in range(n):
        o = json.loads(json.dumps(rows[start + min(s, at)]))
        o["step"] = s
        out.append(o)
    return out


def _envelope(values) -> list[dict]:
    """The sample with its envelope column set to ``values`` (one per row)."""
    out = []
    for o, value in zip(_sample(), values):
        d = o
        for k in ENVELOPE[:-1]:
            d = d[k]
        d[ENVELOPE[-1]] = value
        out.append(o)
    return out


CONSTANT_RUNS = {
    "stalled-from-the-start": lambda: _frozen(400, 0, start=600),  # the same state (mid-run) at every step
    "frozen-at-its-peak": lambda: _frozen(600, 4),  # the envelope's largest value, then nothing moves
    "frozen-half-way": lambda: _frozen(1200, 599),
    "a-constant-column": lambda: _envelope([2.5] * 1200),
    "constant-then-decaying": lambda: _envelope([12.0 if i < 100 else 12.0 * 0.99 ** (i - 99) for i in range(800)]),
}


def _jsonl(rows: list[dict]) -> bytes:
    return ("\n".join(json.dumps(r) for r in rows) + "\n").encode()


def _frame(table) -> pd.DataFrame:
    frame = table.to_pandas()
    return canonical_frame(frame.drop(columns=[c for c in frame.columns if c.startswith("_")]))


@pytest.mark.parametrize("name", list(CONSTANT_RUNS))
def test_constant_values_judged_incrementally_equal_the_whole_run(name):
    table, *_rest = parse(_jsonl(CONSTANT_RUNS[name]()))
    frame = _frame(table)
    cuts = [*range(1, 12), 50, 99, 100, 101, 102, 150, 151, 300, 301, 599, 600, 601, 602, 900]
    inc = assert_equal_at_cuts(frame, [c for c in cuts if c < len(frame)])
    assert key(inc.current) == key(verdict(frame))


def _cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "regime_dash", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.slow  # a writer and a follower subprocess
@pytest.mark.parametrize("name", ["stalled-from-the-start", "frozen-at-its-peak", "a-constant-column"])
def test_a_follower_of_constant_values_runs_to_its_clean_end(tmp_path, name):
    src, dst, store_dir = tmp_path / "source.jsonl", tmp_path / "job.diag.jsonl", tmp_path / "store"
    rows = CONSTANT_RUNS[name]()
    src.write_bytes(_jsonl(rows))
    assert subprocess.run([sys.executable, str(WRITER), str(src), str(dst), "--to", "50"], timeout=60).returncode == 0
    follower = subprocess.Popen([sys.executable, "-m", "regime_dash", "ingest", str(dst), "--follow", "--name",
                                 "stalled", "--store", str(store_dir), "--commit-every", "0.05", "--until-idle", "3"],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    store = open_store(store_dir)
    wait_until(lambda: store.list_runs() or follower.poll() is not None, 120, "the follower's first commit")
    # the rest while it follows: commits of a few rows each, judged incrementally
    writer = subprocess.Popen([sys.executable, str(WRITER), str(src), str(dst), "--from", "50", "--rate", "1500"])
    assert writer.wait(120) == 0
    out, err = follower.communicate(timeout=180)
    assert follower.returncode == 0 and "Traceback" not in err, err
    assert "follow ended: no new line for 3 s" in err, err
    assert out.count(" rows (") >= 2, out  # several commits, each judged incrementally
    (run,) = store.list_runs()
    table = store.load_table(run["run_id"])
    assert sorted(table.column(LINE_COLUMN).to_pylist()) == list(range(1, len(rows) + 1))
    whole = verdict(_frame(table.sort_by(LINE_COLUMN)))
    meta = store.meta(run["run_id"])
    failing = sorted({c.id for c in whole.failed} | {f.id for f in whole.failing_findings})
    assert meta["verdict"]["status"] == whole.status and meta["verdict"]["failing"] == failing
    assert meta["follow"]["active"] is False


def _write(dst: Path, a: int, b: int, *extra: str, wait: bool = True) -> subprocess.Popen:
    """The sample's lines ``a..b-1`` appended to ``dst`` by a writer process (``tests/follow_writer.py``)."""
    proc = subprocess.Popen([sys.executable, str(WRITER), str(SAMPLE), str(dst), "--from", str(a), "--to", str(b),
                             *extra])
    if wait:
        assert proc.wait(60) == 0
    return proc


def _follower(src: Path, store_dir: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "regime_dash", "ingest", str(src), "--follow", "--name", "job",
                             "--store", str(store_dir), "--commit-every", "0.05", *extra],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _rows(store) -> int:
    runs = store.list_runs()
    return runs[0]["rows"] if runs else 0


@pytest.mark.slow  # a writer, a follower and the gate as subprocesses
def test_the_gate_fails_after_a_follower_killed_mid_job(tmp_path):
    store_dir, src = tmp_path / "store", tmp_path / "job.diag.jsonl"
    _write(src, 0, 300)
    follower = _follower(src, store_dir)  # no --until-idle: it follows until stopped
    store = open_store(store_dir)
    wait_until(lambda: _rows(store) >= 300, 120, "the follower's first rows")
    writer = _write(src, 300, 1200, "--rate", "300", wait=False)  # the job goes on
    wait_until(lambda: _rows(store) > 300, 60, "a commit of the job's later lines")
    follower.send_signal(signal.SIGKILL)  # mid-job: the writer still writes
    follower.communicate(timeout=30)
    assert writer.wait(60) == 0
    gate = _cli("check", "job", "--follow", "--store", str(store_dir))
    assert gate.returncode == 1, (gate.stdout, gate.stderr)
    assert "stopped without ending its follow (killed or crashed)" in gate.stderr, gate.stderr
    assert "Traceback" not in gate.stderr
    # the same command restarted reads the rest and ends at its --until-idle end: the gate passes
    again = _follower(src, store_dir, "--until-idle", "1")
    assert again.wait(120) == 0
    gate = _cli("check", "job", "--follow", "--store", str(store_dir))
    assert gate.returncode == 0 and "1200 rows" in gate.stdout and "verdict pass" in gate.stdout, gate


@pytest.mark.slow  # a writer, a follower and the gate as subprocesses
def test_the_gate_fails_after_a_follow_ended_before_the_files_end(tmp_path):
    store_dir, src = tmp_path / "store", tmp_path / "job.diag.jsonl"
    _write(src, 0, 200)
    follower = _follower(src, store_dir, "--on-truncate", "stop", "--until-idle", "60")
    store = open_store(store_dir)
    wait_until(lambda: _rows(store) >= 200, 120, "the follower's rows")
    _write(src, 200, 260, "--truncate")  # the job restarts its log: the follow stops, 60 lines unread
    out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0 and "truncated" in err, err
    gate = _cli("check", "job", "--follow", "--store", str(store_dir))
    assert gate.returncode == 1 and "verdict pass" not in gate.stdout.splitlines()[-1:], gate
    assert "the follow ended before the file's end" in gate.stderr and "--on-truncate stop" in gate.stderr, gate.stderr


@pytest.mark.slow  # a follower and the gate as subprocesses
def test_the_gate_passes_a_clean_follow_of_a_passing_run(tmp_path):
    store_dir, src = tmp_path / "store", tmp_path / "job.diag.jsonl"
    _write(src, 0, 400)
    follower = _follower(src, store_dir, "--until-idle", "1")
    assert follower.wait(120) == 0
    gate = _cli("check", "job", "--follow", "--store", str(store_dir))
    assert gate.returncode == 0, gate
    assert "400 rows" in gate.stdout and "verdict pass" in gate.stdout and "FAIL" not in gate.stderr


# ---- alerts ---------------------------------------------------------------------------------------------


@pytest.mark.slow  # three refused CLI runs
@pytest.mark.parametrize("url", ["notaurl", "file:///etc/passwd", "ftp://example.com/hook"])
def test_a_webhook_url_that_is_not_http_is_refused_before_anything_is_followed(tmp_path, url):
    store_dir, src = tmp_path / "store", tmp_path / "job.diag.jsonl"
    _write(src, 0, 50)
    done = _cli("ingest", str(src), "--follow", "--name", "job", "--store", str(store_dir), "--until-idle", "1",
                "--alert-webhook", url)
    assert done.returncode == 2 and url in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert "not a webhook URL" in done.stderr and "following" not in done.stderr
    assert not store_dir.exists() or open_store(store_dir).list_runs() == []


def test_the_dispatch_refuses_a_url_that_is_not_http():
    from regime_dash.errors import ValidationError
    from regime_dash.follow.alerts import Dispatch

    for url in ("notaurl", "file:///etc/passwd", "ftp://x/y", "http://", "https://host:99999/x"):
        with pytest.raises(ValidationError, match="not a webhook URL"):
            Dispatch(webhook=url)


class _Server:
    """A real local TCP server: ``reply(n, request)`` gives the bytes to send for the n-th connection
    (``None``: accept it and never answer). The requests' bodies are kept."""

    def __init__(self, reply):
        import socket
        import threading

        self.reply, self.bodies, self.accepted, self._held = reply, [], 0, []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/hook"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            n, self.accepted = self.accepted, self.accepted + 1
            answer = self.reply(n)
            if answer is None:
                self._held.append(conn)  # accepted, never answered, never closed
                continue
            request = self._request(conn)
            self.bodies.append(request.split(b"\r\n\r\n", 1)[1])
            conn.sendall(answer)
            conn.close()

    @staticmethod
    def _request(conn) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data:
            data += conn.recv(65536)
        head, body = data.split(b"\r\n\r\n", 1)
        length = next(int(x.split(b":")[1]) for x in head.split(b"\r\n") if x.lower().startswith(b"content-length"))
        while len(body) < length:
            body += conn.recv(65536)
        return head + b"\r\n\r\n" + body

    def close(self):
        self.sock.close()
        for c in self._held:
            c.close()


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def test_a_webhook_that_never_answers_times_out_and_each_failure_is_reported():
    import time

    from regime_dash.follow.alerts import Dispatch

    server = _Server(lambda n: None)
    warnings: list[str] = []
    dispatch = Dispatch(webhook=server.url, webhook_timeout=0.5, attempts=2, backoff=0.05, warn=warnings.append)
    t0 = time.monotonic()
    for check in ("a", "b", "c"):
        dispatch.send({"check": check})
    dispatch.close(wait=20)
    server.close()
    assert time.monotonic() - t0 < 15
    assert sorted(w.split(": ")[1].split()[0] for w in warnings) == ["a", "b", "c"], warnings
    assert all(server.url in w and "timed out" in w for w in warnings), warnings
    assert server.accepted == 6 and dispatch.failed["webhook"] == 3


def test_the_sender_survives_a_reply_that_is_not_http_and_delivers_later_alerts():
    from regime_dash.follow.alerts import Dispatch

    server = _Server(lambda n: b"NOT HTTP AT ALL\r\n\r\n" if n == 0 else OK)
    warnings: list[str] = []
    dispatch = Dispatch(webhook=server.url, webhook_timeout=5, attempts=1, warn=warnings.append)
    for check in ("first", "second", "third"):
        dispatch.send({"check": check})
    dispatch.close(wait=20)
    server.close()
    assert [json.loads(b)["check"] for b in server.bodies] == ["first", "second", "third"]
    assert dispatch.delivered["webhook"] == 2 and dispatch.failed["webhook"] == 1
    (w,) = warnings
    assert server.url in w and "first" in w and "BadStatusLine" in w, w


def _live_members(pgid: int) -> list[int]:
    """The processes of group ``pgid`` that are not zombies (read from /proc)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(d.name))
    return out


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _hook(record: Path) -> str:
    """A hook that notes its shell's pid (its group's id when it leads a group of its own), starts a long
    ``sleep`` child, notes the child's pid and waits on it."""
    return f"echo $$ >> {record}; sleep 300 & echo $! >> {record}.children; wait"


def _gone(record: Path) -> None:
    """Every hook of ``record``: its shell and its ``sleep`` are gone, and no process is left in its group."""
    shells = [int(x) for x in record.read_text().split()]
    children = [int(x) for x in Path(f"{record}.children").read_text().split()]
    assert len(children) == len(shells)
    for pid in shells + children:
        wait_until(lambda: not _alive(pid), 10, f"the hook's process {pid} gone")
    for pgid in shells:
        assert os.getpgid(os.getpid()) != pgid
        wait_until(lambda: not _live_members(pgid), 10, f"no process left in the hook's group {pgid}")


def test_a_hook_past_its_timeout_is_killed_with_its_group(tmp_path):
    from regime_dash.follow.alerts import Dispatch

    record = tmp_path / "groups"
    warnings: list[str] = []
    dispatch = Dispatch(command=_hook(record), hook_timeout=1.0, warn=warnings.append)
    dispatch.send({"check": "flag_binary"})
    wait_until(lambda: warnings, 30, "the hook's timeout")
    assert "timed out after 1 s" in warnings[0], warnings
    _gone(record)
    dispatch.close(wait=5)


@pytest.mark.slow  # a follower subprocess whose end waits for its hooks
def test_hooks_still_running_when_the_follow_ends_are_killed_with_their_groups(tmp_path):
    store_dir, src, record = tmp_path / "store", tmp_path / "job.diag.jsonl", tmp_path / "groups"
    _write(src, 0, 300, "--bad-at", "120")
    follower = _follower(src, store_dir, "--until-idle", "1", "--on-alert", _hook(record))
    out, err = follower.communicate(timeout=180)
    assert follower.returncode == 0 and "ALERT" in out, err
    assert len(record.read_text().split()) == out.count("ALERT")  # one hook a failing check, each its own group
    _gone(record)


@pytest.mark.slow  # a follower subprocess whose end waits for its webhook
def test_a_follow_whose_webhook_never_answers_reports_every_alert(tmp_path):
    server = _Server(lambda n: None)
    store_dir, src = tmp_path / "store", tmp_path / "job.diag.jsonl"
    _write(src, 0, 300, "--bad-at", "120")
    follower = _follower(src, store_dir, "--until-idle", "1", "--alert-webhook", server.url)
    out, err = follower.communicate(timeout=180)
    server.close()
    assert follower.returncode == 0 and "Traceback" not in err, err
    alerted = sorted(line.split(": ")[1].split()[0] for line in out.splitlines() if line.startswith("ALERT"))
    warned = sorted(line.split(": ")[2].split()[0] for line in err.splitlines()
                    if line.startswith(f"warning: alert webhook {server.url}"))
    assert alerted and warned == alerted, (out, err)  # no alert swallowed: each one's failure printed
    assert server.accepted >= 1
