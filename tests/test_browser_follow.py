"""A followed run drawn live in Explore: new steps appear in the same chart, in place.

A writer process appends diag lines, ``ingest --follow`` commits them every half second,
and Explore (opened on the run) redraws the chart with the new steps: the highest step
drawn grows while the chart's element stays the same one (it is updated in place, not
replaced by a page rerun). The Runs page shows the run's "live" badge. The session's server and
chromium (:mod:`served_app`): the follow writes into that server's store, under a run id of its own.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from artifacts import artifact
from regime_dash.benchmarks.page_load import CHROMIUM
from regime_dash.store.append import follow_run_id
from regime_dash.store.open import open_store
from polling import wait_until

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "samples" / "diag.jsonl"
WRITER = Path(__file__).with_name("follow_writer.py")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is not installed"),
]
pytest.importorskip("playwright.sync_api", reason="playwright is in requirements-test.txt")

#: The highest x of the kelly_f trace of the chart, and whether that chart's element is the one
#: tagged before (``window.__tagged``): null while no such chart is drawn.
LAST_X_JS = """() => {
    for (const gd of document.querySelectorAll('.js-plotly-plot')) {
        const t = (gd._fullData || []).find(t => (t.name || '').endsWith(' kelly_f') && (t.x || []).length);
        if (t) return {x: Math.max(...Array.from(t.x).map(Number)), same: gd === window.__tagged};
    }
    return null;
}"""
TAG_JS = """() => { for (const gd of document.querySelectorAll('.js-plotly-plot'))
    if ((gd._fullData || []).some(t => (t.name || '').endsWith(' kelly_f'))) { window.__tagged = gd; return true; }
    return false; }"""


def test_a_live_run_draws_its_new_steps_in_explore(app_server, browser_page, tmp_path):
    store, src = app_server.store, tmp_path / "job.diag.jsonl"
    writer = subprocess.Popen([sys.executable, str(WRITER), str(SAMPLE), str(src), "--to", "300", "--rate", "100"])
    follower = subprocess.Popen([sys.executable, "-m", "regime_dash", "ingest", str(src), "--follow", "--name", "job",
                                 "--store", str(store), "--commit-every", "0.5"], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run_id = follow_run_id("job", src)
    url, page = app_server.url, browser_page
    try:
        # the run is in the store before the Runs page is drawn (the page shows the runs of its run)
        wait_until(lambda: open_store(store).follow_status().get(run_id, {}).get("live"), 120, f"{run_id} followed")
        page.goto(url + "/")
        page.get_by_text("● live", exact=False).first.wait_for(state="attached", timeout=60_000)  # the Runs badge (a grid cell)
        page.goto(f"{url}/explore?runs={run_id}")
        page.wait_for_function(f"() => ({LAST_X_JS})() !== null", timeout=90_000)
        page.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')")
        assert page.evaluate(TAG_JS)
        writer.wait(30)
        first = page.evaluate(LAST_X_JS)["x"]
        writer = subprocess.Popen([sys.executable, str(WRITER), str(SAMPLE), str(src), "--from", "300",
                                   "--to", "1200", "--rate", "30"])  # the job goes on while the page is open
        page.wait_for_function(f"() => {{ const r = ({LAST_X_JS})(); return r && r.x >= {first + 40}; }}",
                               timeout=30_000)
        later = page.evaluate(LAST_X_JS)
        assert later["x"] >= first + 40 and later["same"], (first, later)
        page.screenshot(path=str(artifact("follow-explore-live.png")), full_page=True)
    finally:
        for p in (writer, follower):
            p.kill()
            p.wait(10)
