"""``bench ui``'s first-view stamp, in chromium: it marks the frame after the view appears, not before,
and not when a busy page next lets Playwright look."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from regime_dash.benchmarks.page_load import CHROMIUM
from regime_dash.benchmarks.ui import FIRST_VIEW, STAMP_JS, _stamped

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(),
                       reason=f"{CHROMIUM} is not installed (.ci/run installs it with apt)"),
]
pytest.importorskip("playwright.sync_api", reason="playwright is in requirements-test.txt")

#: A page that shows a "chart" after 300 ms and, once it is painted, keeps its main thread busy for 800 ms.
PAGE = """<html><body><script>
setTimeout(() => {
    const g = document.createElement('div'); g.className = 'js-plotly-plot';
    g.innerHTML = '<svg width="200" height="100"><g class="cartesianlayer"><g class="subplot">'
        + '<rect width="100" height="50"></rect></g></g></svg>';
    document.body.appendChild(g);
    window.__shownAt = performance.timeOrigin + performance.now();
    // busy from the frame after the one that painted it: as a page drawing more after its first chart
    requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(() => {
        const end = performance.now() + 800; while (performance.now() < end) {}
    }, 0)));
}, 300);
</script></body></html>"""


def test_the_stamp_is_the_painted_frame_after_the_view_appears(browser_page):
    _, selector, shown = FIRST_VIEW["compare"]
    page = browser_page  # a page of the session's chromium
    page.set_viewport_size({"width": 800, "height": 600})
    page.add_init_script(f"({STAMP_JS})({json.dumps(shown)})")
    page.route("http://bench.test/", lambda route: route.fulfill(body=PAGE, content_type="text/html"))
    t0 = time.time()
    page.goto("http://bench.test/")
    page.locator(selector).first.wait_for()
    painted, seen = _stamped(page, t0)
    shown_at = page.evaluate("() => window.__shownAt") / 1000.0 - t0
    assert shown_at <= painted < shown_at + 0.5  # two frames after, before the busy loop ends
    assert seen > painted + 0.3  # Playwright, polling, saw it only after the busy loop
