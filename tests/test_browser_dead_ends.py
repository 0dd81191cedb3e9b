"""The former dead ends in a real browser: a heatmap cell click opens that replay; two runs export as Parquet.

The session's server and chromium, as ``tests/test_browser.py`` uses them (:mod:`served_app`);
screenshots go to the session's artifacts folder.
"""
from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest

from regime_dash import RegimeConfig, replay
from regime_dash.diag import catalogue as diag
from regime_dash.sources import scenarios
from regime_dash.store.open import open_store
from served_app import settle, shot
from tests.test_browser import ROOT, pytestmark, traces_with  # noqa: F401  (pytestmark: the same marks and skips)


@pytest.fixture(scope="module")
def two_runs(app_server, tmp_path_factory) -> dict[str, str]:
    """``{name: run id}`` of this module's two runs in the session server's store: the sample's first
    1,000 lines and a replay of 400 steps (bytes no other test stores)."""
    runs, tmp = open_store(app_server.store), tmp_path_factory.mktemp("diag")
    cut = tmp / "dead-ends-sample.jsonl"
    cut.write_text("".join((ROOT / "data" / "samples" / "diag.jsonl").read_text().splitlines(keepends=True)[:1000]))
    path = tmp / "dead-ends-tail_shock.jsonl"
    diag.write_jsonl(replay(scenarios.make("tail_shock", steps=400, accounts=64), RegimeConfig(),
                            engine="reference"), path)
    return {name: runs.ingest(src, source_name=name).run_id
            for name, src in (("dead-ends-sample", cut), ("dead-ends-tail_shock", path))}


@pytest.fixture
def page(app_server, browser_page):
    """A fresh page on the session server's Replay page, its first run over."""
    browser_page.goto(app_server.url + "/replay")
    traces_with(browser_page, "baseline kelly_f")
    settle(browser_page)  # a tab picked while the page still runs may be reset by that run
    return browser_page


def test_a_heatmap_cell_click_opens_its_replay(page):
    page.get_by_role("tab", name="Sweep").click()
    page.get_by_label("points").first.fill("3")
    page.get_by_label("points").first.press("Enter")
    page.get_by_role("combobox", name="Field 2 (optional)").click()  # open the picker ...
    page.get_by_role("option", name="n_recovery").click()            # ... and sweep a second field
    page.get_by_label("points").nth(1).fill("2")
    page.get_by_label("points").nth(1).press("Enter")
    page.get_by_role("button", name="Run sweep (6 replays)").click()
    cells = page.locator(".js-plotly-plot:visible .scatterlayer .trace .points path")
    cells.first.wait_for()
    assert cells.count() == 6
    page.locator(".js-plotly-plot:visible .heatmaplayer").wait_for()
    # click the middle of the top-right cell: that cell's config opens
    box = cells.nth(5).bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    opened = page.get_by_text("Replay of max_duration=")
    opened.wait_for()
    # the top-right cell is the top of both sweeps: max_duration's default "to" (3000) and
    # the top of n_recovery's declared range
    n_top = next(s.hi for s in RegimeConfig.field_specs() if s.name == "n_recovery")
    assert opened.inner_text().startswith(f"Replay of max_duration=3000, n_recovery={n_top:g}")
    shot(page, "dead-ends-1-heatmap-cell-opened")


def test_two_runs_export_as_parquet(app_server, browser_page, two_runs):
    page = browser_page
    first, second = two_runs
    page.goto(f"{app_server.url}/explore?runs={two_runs[first]}")  # this module's run (the store is shared)
    page.locator(".js-plotly-plot").first.wait_for()
    settle(page)
    page.get_by_role("combobox", name="Runs", exact=True).click()
    page.keyboard.type(second)
    page.get_by_role("option", name=second).first.click()  # the second run joins the first
    page.keyboard.press("Escape")
    page.get_by_role("tab", name="Download").click()
    page.get_by_role("button", name="Prepare download").click()
    button = page.get_by_role("button", name="Download regime-dash-view.parquet")
    button.wait_for()
    assert "(1,400 rows" in button.inner_text()
    with page.expect_download() as download:
        button.click()
    table = pd.read_parquet(io.BytesIO(Path(download.value.path()).read_bytes()))
    assert len(table) == 1400 and set(table["run"]) == {first, second}
    shot(page, "dead-ends-2-export")
