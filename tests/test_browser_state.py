"""What a person does in a real browser keeps its state: a what-if config through a source switch,
a page that answers after fast slider moves, a delete confirmed in one tab and pressed in another.

Each test drives Debian's chromium (Playwright) against ``streamlit run``, as
:mod:`tests.test_browser` does; these paths differ from AppTest's because the browser
keeps its own copy of every widget's value. The server is this module's own (an empty numba
cache and a store whose runs it deletes); the chromium is the session's (:mod:`served_app`).
"""
from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from regime_dash.benchmarks.page_load import make_run, serve
from polling import wait_until
from served_app import settle

ROOT = Path(__file__).resolve().parents[1]

from tests.test_browser import pytestmark  # noqa: F401  (the same marks and skips: chromium, playwright)


SAMPLE = ROOT / "data" / "samples" / "diag.jsonl"


def add_delete_runs(store: Path, tmp: Path) -> None:
    """Two more runs for the delete test: ``keep`` (the sample) and ``victim`` (its first 600 lines)."""
    from regime_dash.store.open import open_store

    victim = tmp / "victim.jsonl"
    victim.write_text("".join(SAMPLE.read_text().splitlines(keepends=True)[:600]))
    open_store(store).ingest(SAMPLE, name="keep")
    open_store(store).ingest(victim, name="victim")


def stored_names(store: Path) -> list[str]:
    from regime_dash.store.open import open_store

    return sorted(r["name"] for r in open_store(store).list_runs())


#: Steps of the stored run Explore draws (the size the dead page was seen at).
LONG_RUN_STEPS = 25_000


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """``streamlit run app.py`` on a free port, its store holding one run of LONG_RUN_STEPS steps and
    numba's cache empty (so the fast engine compiles in the background, as on a fresh clone), and two
    small runs; yields ``(base URL, store)``."""
    store = tmp_path_factory.mktemp("store")
    make_run(store, LONG_RUN_STEPS, 16)
    add_delete_runs(store, tmp_path_factory.mktemp("diag"))
    env = {"NUMBA_CACHE_DIR": str(tmp_path_factory.mktemp("numba-cache"))}
    with serve(store, log=tmp_path_factory.mktemp("log") / "streamlit.log", env=env) as url:
        yield url, store


@pytest.fixture
def context(chromium_context):
    """The session's headless chromium (each test opens its own pages)."""
    return chromium_context


def slider_value(page, name: str) -> str:
    return page.locator(f"input[type=range][aria-label='{name}']").get_attribute("aria-valuetext")


def test_replay_keeps_the_what_if_config_through_a_source_switch(served, context):
    """Scenario → Stream file (no file: the sliders go) → Simulator → Scenario: every what-if field
    is what it was (not its slider's minimum, not its toggle's off), in the sliders and the URL."""
    server = served[0]
    page = context.new_page()
    page.goto(server + "/replay?max_duration=700&eps_max=0.3")
    page.locator("input[type=range][aria-label=max_duration]").wait_for()
    settle(page)
    before = {n: slider_value(page, n) for n in ("max_duration", "eps_max", "eps_min")}
    f2 = page.locator("input[aria-label='F2 Kelly resurrection']")
    assert before["max_duration"] == "700" and before["eps_max"] == "0.3" and f2.is_checked()
    for source in ("Stream file", "Simulator", "Stream file", "Scenario"):
        page.get_by_test_id("stRadio").get_by_text(source, exact=True).click()
        if source == "Stream file":
            page.get_by_text("Upload a stream file to replay it.").wait_for()
            settle(page)
            continue
        page.locator("input[type=range][aria-label=max_duration]").wait_for()
        settle(page)
        assert {n: slider_value(page, n) for n in before} == before, source
        assert f2.is_checked(), source
        assert "max_duration=700" in page.url and "eps_max=0.3" in page.url, page.url
    # the kept values are the server's too: one more run (a slider step) moves only that slider
    slider = page.locator("input[type=range][aria-label=eps_min]")
    slider.focus()
    slider.press("ArrowRight")
    page.wait_for_url(lambda url: "eps_min=" in url)
    settle(page)
    assert slider_value(page, "max_duration") == "700" and "max_duration=700" in page.url
    page.close()


def arm_delete(page, server: str, name: str) -> None:
    """On Runs: open "Delete a run", pick the run called ``name`` and tick the confirmation."""
    page.goto(server + "/")
    page.get_by_text("Delete a run").click()
    settle(page)
    picker = page.get_by_test_id("stExpander").filter(has_text="Delete a run").get_by_test_id("stSelectbox")
    picker.click()
    page.keyboard.type(name)
    page.keyboard.press("Enter")
    page.get_by_text(re.compile(rf"^Yes, delete {name} ")).click()  # the pick has taken: the tick names it
    page.wait_for_function("(name) => { const b = Array.from(document.querySelectorAll('button'))"
                           ".find(b => b.innerText.trim() === 'Delete ' + name); return b && !b.disabled; }", arg=name)
    settle(page)


def delete_button(page):
    return page.get_by_role("button", name=re.compile(r"^Delete"))


def test_a_delete_confirmed_in_two_tabs_deletes_only_that_run(served, context):
    """Two tabs pick ``victim`` and tick. Delete in tab A deletes it; Delete in tab B (its list has
    fallen back to another run, the tick still on) deletes nothing and says why."""
    server, store = served
    assert "victim" in stored_names(store)
    tab_a, tab_b = context.new_page(), context.new_page()
    arm_delete(tab_a, server, "victim")
    arm_delete(tab_b, server, "victim")
    others = [n for n in stored_names(store) if n != "victim"]
    delete_button(tab_a).click()
    # the store says when it is done (the toast saying so may be gone before it is looked for)
    wait_until(lambda: "victim" not in stored_names(store), 60, "victim deleted")
    assert stored_names(store) == others
    delete_button(tab_b).click()
    tab_b.get_by_text(re.compile("no longer selected|was not deleted")).first.wait_for(state="attached")
    settle(tab_b)
    assert stored_names(store) == others  # nothing else went with it
    tab_a.close()
    tab_b.close()


def count_references(page) -> dict[str, int]:
    """From now on, ``{"messages", "references"}`` the page's websocket has received: a reference
    (``ref_hash``) asks the browser for its cached copy of a message, which it may have dropped."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    seen = {"messages": 0, "references": 0}

    def on_frame(payload) -> None:
        if isinstance(payload, (bytes, bytearray)):
            msg = ForwardMsg.FromString(bytes(payload))
            seen["messages"] += 1
            seen["references"] += msg.WhichOneof("type") == "ref_hash"

    page.on("websocket", lambda ws: ws.on("framereceived", on_frame))
    return seen


#: Walks of ten fast steps of Explore's smoothing slider, and the seconds they may take in all.
WALKS, WALKS_BUDGET_S = 6, 150


def test_explore_answers_after_fast_slider_moves(served, context):
    """Replay first (the fast engine compiling, its badge rerunning each second), then Explore on a
    long run: ten quick ArrowRight presses on Smoothing, then a tab switch (a whole-page rerun),
    walked many times. The page never dies ("Connection error", "Cached ForwardMsg MISS"), no message
    reaches the browser as a reference to its cache, and the page still answers at the end."""
    server = served[0]
    page = context.new_page()
    seen = count_references(page)
    page.goto(server + "/replay")
    page.locator("input[type=range][aria-label=max_duration]").wait_for()
    page.get_by_role("link", name="Explore").click()
    smoothing = page.locator("input[type=range][aria-label^='Smoothing']")
    smoothing.wait_for()
    settle(page)
    start, walks = time.monotonic(), 0
    while walks < WALKS and time.monotonic() - start < WALKS_BUDGET_S:
        smoothing.focus()
        for _ in range(10):
            smoothing.press("ArrowRight")
            page.wait_for_timeout(50)  # the pace of a person's quick presses: what is tested, not a wait
        page.get_by_role("tab", name=("Events", "Episodes")[walks % 2]).click()
        settle(page)
        body = page.inner_text("body")
        assert "Connection error" not in body and "ForwardMsg" not in body, (walks, body[:2000])
        walks += 1
    assert walks >= 3, f"only {walks} walks in {WALKS_BUDGET_S} s"
    assert seen["messages"] > 0 and seen["references"] == 0, seen
    # still answering: one more step reaches the server (the URL names the new smoothing)
    before = smoothing.get_attribute("aria-valuetext")
    smoothing.focus()
    smoothing.press("ArrowRight")
    page.wait_for_url(lambda url: f"smooth={float(before) + 0.001:g}" in url)
    page.close()
