"""A followed run's verdict on Explore follows the store: it turns from PASS to FAIL while the page is
open, and a reload after the follow ended shows the whole run.

A writer process writes the sample's first 300 lines, Explore opens on the run while ``ingest --follow``
commits (PASS: nothing failed yet); the writer then goes on to the end at 300 lines a second with a
failure planted late (line 900). The verdict strip must read FAIL without a reload, and once the
follow has ended a reload must draw every step of the file and still read FAIL. Every cache of what
is read from a run keys on the run's content version, so none of this can come from a read made
while the run was shorter.
"""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from regime_dash.store.append import follow_run_id
from regime_dash.store.open import open_store
from tests.test_browser_follow import LAST_X_JS, SAMPLE, WRITER, pytestmark  # noqa: F401  (the same marks)

ROOT = Path(__file__).resolve().parents[1]
LINES = 1200  # the sample's lines, steps 0..LINES-1
BAD_AT = 900
VERDICT_JS = "(word) => document.body.innerText.includes('verdict ' + word)"


def wait_for_last_step(store: Path, run_id: str, step: int, timeout: float = 30.0) -> None:
    """Until the follower has committed the run up to ``step``."""
    deadline = time.monotonic() + timeout
    while open_store(store).follow_status().get(run_id, {}).get("last_step") != step:
        assert time.monotonic() < deadline, f"the follower did not commit step {step} in {timeout} s"
        time.sleep(0.2)


def test_explore_verdict_follows_a_growing_run_and_a_reload_shows_it_whole(app_server, browser_page, tmp_path):
    store, src = app_server.store, tmp_path / "verdictjob.diag.jsonl"
    subprocess.run([sys.executable, str(WRITER), str(SAMPLE), str(src), "--to", "300"], check=True)
    follower = subprocess.Popen([sys.executable, "-m", "regime_dash", "ingest", str(src), "--follow", "--name", "verdictjob",
                                 "--store", str(store), "--commit-every", "0.3"], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    writer = None
    run_id = follow_run_id("verdictjob", src)
    try:
        url, page = app_server.url, browser_page
        wait_for_last_step(store, run_id, 299, timeout=120)  # the run is in the store before the page opens on it
        page.goto(f"{url}/explore?runs={run_id}")
        page.wait_for_function(VERDICT_JS, arg="PASS", timeout=60_000)
        # the dashboard recorded where it serves: the follower's alerts link there
        recorded = open_store(store).dashboard_url() or ""
        assert recorded.startswith("http://") and recorded.rsplit(":", 1)[1] == url.rsplit(":", 1)[1], recorded
        assert not page.evaluate(VERDICT_JS, "FAIL")
        writer = subprocess.Popen([sys.executable, str(WRITER), str(SAMPLE), str(src), "--from", "300",
                                   "--bad-at", str(BAD_AT), "--rate", "300"])
        page.wait_for_function(VERDICT_JS, arg="FAIL", timeout=30_000)  # no reload: the page follows
        assert writer.wait(30) == 0
        wait_for_last_step(store, run_id, LINES - 1)
        follower.send_signal(signal.SIGTERM)  # the follow ends as on Ctrl-C: its run marked ended
        follower.wait(30)
        page.reload()
        page.wait_for_function(f"() => {{ const r = ({LAST_X_JS})(); return r && r.x === {LINES - 1}; }}",
                               timeout=30_000)
        page.wait_for_function(VERDICT_JS, arg="FAIL", timeout=10_000)
        assert not page.evaluate(VERDICT_JS, "PASS")
    finally:
        for p in (writer, follower):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(10)
