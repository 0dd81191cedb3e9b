"""What a person does in a real browser keeps its state: a what-if config through a source switch,
a page that answers after fast slider moves, a delete confirmed in one tab and pressed in another.

Each test drives Debian's chromium (Playwright) against ``streamlit run``, as
:mod:`tests.test_browser` does; these paths differ from AppTest's because the browser
keeps its own copy of every widget's value.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from regime_dash.benchmarks.page_load import CHROMIUM, chromium, serve

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,  # a streamlit server and a browser
    pytest.mark.skipif(not Path(CHROMIUM).exists(),
                       reason=f"{CHROMIUM} is not installed (.ci/run installs it with apt)"),
]
pytest.importorskip("playwright.sync_api", reason="playwright is in requirements-test.txt")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``streamlit run app.py`` on a free port with an empty temporary store; yields the base URL."""
    with serve(tmp_path_factory.mktemp("store"), log=tmp_path_factory.mktemp("log") / "streamlit.log") as url:
        yield url


@pytest.fixture(scope="module")
def context():
    """A headless chromium context on a fresh profile (each test opens its own pages)."""
    with chromium(viewport=(1400, 2400), timeout_ms=60_000) as ctx:
        yield ctx


def idle(page) -> None:
    """Wait until the app has finished its run (no running-man status widget), and a little after."""
    page.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')")
    page.wait_for_timeout(500)


def slider_value(page, name: str) -> str:
    return page.locator(f"input[type=range][aria-label='{name}']").get_attribute("aria-valuetext")


def test_replay_keeps_the_what_if_config_through_a_source_switch(server, context):
    """Scenario → Stream file (no file: the sliders go) → Simulator → Scenario: every what-if field
    is what it was (not its slider's minimum, not its toggle's off), in the sliders and the URL."""
    page = context.new_page()
    page.goto(server + "/replay?max_duration=700&eps_max=0.3")
    page.locator("input[type=range][aria-label=max_duration]").wait_for()
    idle(page)
    before = {n: slider_value(page, n) for n in ("max_duration", "eps_max", "eps_min")}
    f2 = page.locator("input[aria-label='F2 Kelly resurrection']")
    assert before["max_duration"] == "700" and before["eps_max"] == "0.3" and f2.is_checked()
    for source in ("Stream file", "Simulator", "Stream file", "Scenario"):
        page.get_by_test_id("stRadio").get_by_text(source, exact=True).click()
        if source == "Stream file":
            page.get_by_text("Upload a stream file to replay it.").wait_for()
            idle(page)
            continue
        page.locator("input[type=range][aria-label=max_duration]").wait_for()
        idle(page)
        assert {n: slider_value(page, n) for n in before} == before, source
        assert f2.is_checked(), source
        assert "max_duration=700" in page.url and "eps_max=0.3" in page.url, page.url
    # the kept values are the server's too: one more run (a slider step) moves only that slider
    slider = page.locator("input[type=range][aria-label=eps_min]")
    slider.focus()
    slider.press("ArrowRight")
    page.wait_for_url(lambda url: "eps_min=" in url)
    idle(page)
    assert slider_value(page, "max_duration") == "700" and "max_duration=700" in page.url
    page.close()
