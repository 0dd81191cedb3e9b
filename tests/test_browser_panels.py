"""A shared Explore URL with custom panels opens the same view in a real browser.

Debian's chromium (Playwright) against ``streamlit run``, as :mod:`tests.test_browser` does: a
store of three runs (the committed sample diag, and two cut from it), Explore opened by a URL
naming the three runs and a custom panel on a log axis (``panels=<field>~log``), and the
browser's drawn chart read back: the panel is there, on a log y axis, with every run on it.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from regime_dash.benchmarks.page_load import chromium, serve

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
def served(tmp_path_factory):
    """``streamlit run app.py`` on a store of three runs; yields ``(base URL, {name: run id})``."""
    from regime_dash.store.run_store import RunStore

    store, tmp = tmp_path_factory.mktemp("store"), tmp_path_factory.mktemp("diag")
    lines = SAMPLE.read_text().splitlines(keepends=True)
    ids = {"sample": RunStore(store).ingest(SAMPLE, name="sample").run_id}  # three distinct contents
    for name, n in (("head", len(lines) // 3), ("most", 2 * len(lines) // 3)):
        path = tmp / f"{name}.jsonl"
        path.write_text("".join(lines[:n]))
        ids[name] = RunStore(store).ingest(path, name=name).run_id
    with serve(store, log=tmp_path_factory.mktemp("log") / "streamlit.log") as url:
        yield url, ids


@pytest.fixture(scope="module")
def browser_page():
    """A page of headless chromium on a fresh profile."""
    with chromium(viewport=(1400, 2400), timeout_ms=120_000) as ctx:
        yield ctx.new_page()


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
    ARTIFACTS = ROOT / "test-artifacts"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "explore-custom-panel.png"), full_page=True)
