"""The former dead ends in a real browser: a heatmap cell click opens that replay; two runs export as Parquet.

Same server and browser helpers as ``tests/test_browser.py`` (Debian's chromium
driven by Playwright against ``streamlit run``); screenshots go to
``test-artifacts/``.
"""
from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest

from regime_dash import RegimeConfig, replay
from regime_dash.diag import catalogue as diag
from regime_dash.sources import scenarios
from regime_dash.benchmarks.page_load import chromium, serve
from regime_dash.store.run_store import RunStore
from tests.test_browser import ROOT, pytestmark, shot  # noqa: F401  (pytestmark: the same marks and skips)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """A chromium page on ``streamlit run app.py`` over a store holding the sample and a replay."""
    store = tmp_path_factory.mktemp("store")
    runs = RunStore(store)
    runs.ingest(ROOT / "data" / "samples" / "diag.jsonl", source_name="sample")
    path = tmp_path_factory.mktemp("diag") / "tail_shock.jsonl"
    diag.write_jsonl(replay(scenarios.make("tail_shock", steps=400, accounts=64), RegimeConfig(),
                            engine="reference"), path)
    runs.ingest(path, source_name="tail_shock")
    with serve(store, log=tmp_path_factory.mktemp("log") / "streamlit.log") as url, \
            chromium(viewport=(1400, 2400)) as ctx:
        p = ctx.new_page()
        p.goto(url + "/")
        p.get_by_text("Stored runs (2)").wait_for()
        yield p


def test_a_heatmap_cell_click_opens_its_replay(page):
    page.get_by_role("link", name="Replay & what-if").click()
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


def test_two_runs_export_as_parquet(page):
    page.get_by_role("link", name="Explore").click()
    page.locator(".js-plotly-plot").first.wait_for()
    page.get_by_role("combobox", name="Runs", exact=True).click()
    page.get_by_role("option").first.click()  # the second run joins the first
    page.keyboard.press("Escape")
    page.get_by_role("tab", name="Download").click()
    page.get_by_role("button", name="Prepare download").click()
    button = page.get_by_role("button", name="Download regime-dash-view.parquet")
    button.wait_for()
    assert "(1,600 rows" in button.inner_text()
    with page.expect_download() as download:
        button.click()
    table = pd.read_parquet(io.BytesIO(Path(download.value.path()).read_bytes()))
    assert len(table) == 1600 and set(table["run"]) == {"sample", "tail_shock"}
    shot(page, "dead-ends-2-export")
