"""A pytest plugin for the browser tests: one streamlit server and one headless chromium per session.

Starting ``streamlit run app.py`` and its first page (imports, the fast engine's cache, the
first figure) costs tens of seconds on 2 shared cores; the browser tests pay it once. They
share the server's store (:attr:`Served.store`), so each test keeps to its own runs: content
of its own (no other test stores the same bytes, which the store would keep once, under the
first name), opened by run id or name. Each test gets a fresh page (a fresh streamlit session)
in the shared chromium. A test that needs another server (an environment variable of its own,
a store it must own) starts one with :func:`regime_dash.benchmarks.page_load.serve`.

The browser tests (marked ``browser``) run after every other test of the session, so the
server and chromium are up only for them.

:func:`settle` waits for the app to be quiet (no script run, no stale element); :func:`shot`
writes a screenshot among the session's artifacts (:mod:`artifacts`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from artifacts import artifact

ROOT = Path(__file__).resolve().parents[1]

#: Animation frames in a row with no script run and no stale element that :func:`settle` waits for:
#: a gap between a run and the rerun it triggers lasts less than one.
QUIET_FRAMES = 5
#: True once the app has been quiet for ``frames`` animation frames in a row (polled every frame).
QUIET_JS = """(frames) => {
    const busy = document.querySelector('[data-testid=stStatusWidget]') || document.querySelector('[data-stale=true]');
    window.__rdQuiet = busy ? 0 : (window.__rdQuiet || 0) + 1;
    return window.__rdQuiet >= frames;
}"""


@dataclass(frozen=True)
class Served:
    """A running ``streamlit run app.py``: its base URL and its store's folder."""

    url: str
    store: Path


def settle(page) -> None:
    """Wait until the app on ``page`` has finished its script runs and drawn what they sent.

    Call it after something that starts a run has shown its effect (an element the run draws):
    before the run has begun, the page is quiet too.
    """
    page.evaluate("() => { window.__rdQuiet = 0; }")
    page.wait_for_function(QUIET_JS, arg=QUIET_FRAMES, polling="raf")


def shot(page, name: str) -> Path:
    """A full-page screenshot of ``page`` among the artifacts, as ``name``.png."""
    path = artifact(f"{name}.png")
    page.screenshot(path=str(path), full_page=True)
    return path


@pytest.fixture(scope="session")
def app_server(tmp_path_factory) -> Served:
    """``streamlit run app.py`` on a free port over a store of its own, for the whole session."""
    from regime_dash.benchmarks.page_load import serve

    store = tmp_path_factory.mktemp("app-store")
    with serve(store, log=tmp_path_factory.mktemp("app-log") / "streamlit.log") as url:
        yield Served(url, store)


@pytest.fixture(scope="session")
def chromium_context():
    """Headless chromium on a fresh profile, for the whole session (each test opens its own pages)."""
    from regime_dash.benchmarks.page_load import chromium

    with chromium(viewport=(1400, 2400)) as ctx:
        yield ctx


@pytest.fixture
def browser_page(chromium_context):
    """A new page of the session's chromium, closed after the test."""
    page = chromium_context.new_page()
    yield page
    page.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The browser tests last (in their order), after every test that needs no server."""
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)
