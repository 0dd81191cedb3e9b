"""A shared Explore URL with custom panels opens the same view in a real browser.

Debian's chromium (Playwright) against the session's ``streamlit run`` (:mod:`served_app`): three
runs cut from the committed sample diag in the server's store, Explore opened by a URL
naming the three runs and a custom panel on a log axis (``panels=<field>~log``), and the
browser's drawn chart read back: the panel is there, on a log y axis, with every run on it.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from artifacts import artifact

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "samples" / "diag.jsonl"

from tests.test_browser import pytestmark  # noqa: F401  (the same marks and skips: chromium, playwright)

#: The custom panel of each graph on the page whose subplot title is ``title``: its y axis's type,
#: its title, and the runs (legend groups) drawn on it; null while no graph has that panel.
PANEL_JS = """(title) => {
    for (const gd of document.querySelectorAll('.js-plotly-plot')) {
        const L = gd._fullLayout;
        if (!L || !L.annotations) continue;
        const k = L.annotations.findIndex(a => a.text === title);
        if (k < 0) continue;
        const ya = 'y' + (k ? k + 1 : ''), axis = L['yaxis' + (k ? k + 1 : '')];
        const runs = gd._fullData.filter(t => t.yaxis === ya && (t.y || []).length > 0).map(t => t.legendgroup);
        return {type: axis.type, title: axis.title.text, runs: [...new Set(runs)].sort()};
    }
    return null;
}"""


@pytest.fixture(scope="module")
def served(app_server, tmp_path_factory):
    """Three runs in the session server's store; ``(base URL, {name: run id})``."""
    from regime_dash.store.open import open_store

    tmp = tmp_path_factory.mktemp("diag")
    lines = SAMPLE.read_text().splitlines(keepends=True)
    ids = {}
    for name, n in (("panels-head", 300), ("panels-half", 700), ("panels-most", 1100)):  # bytes no other test stores
        path = tmp / f"{name}.jsonl"
        path.write_text("".join(lines[:n]))
        ids[name] = open_store(app_server.store).ingest(path, name=name).run_id
    return app_server.url, ids


def test_a_shared_url_opens_three_runs_with_a_log_scale_custom_panel(served, browser_page):
    from regime_dash.diag import catalogue as diag

    base, ids = served
    page = browser_page
    page.goto(f"{base}/explore?runs={','.join(ids.values())}&panels={diag.SIGMA}~log")
    title = "popart.sigma (log)"
    page.wait_for_function(f"() => ({PANEL_JS})({title!r}) !== null", timeout=120_000)
    panel = page.evaluate(PANEL_JS, title)
    assert panel["type"] == "log", panel
    assert panel["title"] == "sigma (reward units)"
    assert len(panel["runs"]) == 3, panel  # every run of the URL on the panel, each under its label
    assert all(any(label.startswith(name) for label in panel["runs"]) for name in ids), panel
    assert f"panels={diag.SIGMA}~log" in page.url.replace("%7E", "~")  # the view stays shareable
    page.screenshot(path=str(artifact("explore-custom-panel.png")), full_page=True)
