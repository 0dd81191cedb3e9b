"""File text on every page that shows it is text: keys, file names, run names, notes, aliases,
tags refused, layout file names and the exceptions that echo them, run through the Runs,
Explore (with its provenance panel), Compare, Slots and Replay pages under AppTest. (A run's
name and aliases keep letters, digits and ``._-`` only, which still make emphasis: ``__bold__``.)

Each element whose body or label streamlit renders as Markdown (markdown, captions, alerts,
toasts, progress text, widget and expander labels, tab labels, help, dialog titles) is read,
and none may hold the hostile text's Markdown live: no inline code it closes, no image or link
(the browser fetched the image from the other host), no emphasis, no HTML.
"""
from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("streamlit")

from regime_dash.sources.samples import DIAG_NAME, SAMPLE_DIR  # noqa: E402
from regime_dash.store.open import open_store  # noqa: E402
from regime_dash.store.run_store import RunStore  # noqa: E402
from regime_dash.text import markdown_literal  # noqa: E402
from tests.test_app_pages import APP, TIMEOUT, no_exception, open_app, page, shown  # noqa: E402

#: Closes the inline code it was put in and fetches an image from another host.
BREAKOUT = "a` ![i](http://host/x.png) `b"
#: The same in a file name (which has no ``/``: the run's name is the name's last part).
FILE_BREAKOUT = "a` ![i](x.png) `b"
#: Emphasis and HTML.
BOLD_HTML = "**bold** <img src=x>"
#: A run name (``._-`` and alphanumerics) that is emphasis, and one that is italics.
BOLD_NAME, ITALIC_NAME = "__bold__", "_it_"
#: Fragments of the two that only their live, unescaped form holds (their escaped form has a
#: backslash inside each): the closing backtick, the image, the link, the emphasis, the tag.
LIVE = ("a` ", " `b", "![i]", "](http", "**bold**", "<img src=x>", BOLD_NAME, f" {ITALIC_NAME}")
#: Markdown that renders, wherever it is: an image or a link (an escaped one has ``\\]\\(``).
ANY_LINK = re.compile(r"(?<!\\)(?:\\\\)*(?:!\[|\]\()")
#: The element types whose ``value`` streamlit renders as Markdown.
MARKDOWN_VALUES = {"markdown", "caption", "error", "warning", "info", "success", "toast", "exception"}


def rendered(at) -> list[str]:
    """Every Markdown body and label on the page (main area and sidebar), dialogs included."""
    out = []
    for node in [*at.main, *at.sidebar]:
        kind = getattr(node, "type", "")
        if kind in MARKDOWN_VALUES and isinstance(node.value, str):
            out.append(node.value)
        for attr in ("label", "help", "placeholder"):
            try:
                text = getattr(node, attr)
            except AttributeError:
                continue
            if isinstance(text, str):
                out.append(text)
        proto = getattr(node, "proto", None)
        if kind == "progress":
            out.append(proto.text)
        if kind == "dialog":
            out.append(proto.dialog.title)
    return out


def assert_shown_as_text(at, where: str, *expected: str) -> None:
    """No hostile Markdown is live on the page; each of ``expected`` is shown (escaped) somewhere."""
    no_exception(at, where)
    bodies = rendered(at)
    for body in bodies:
        live = [f for f in LIVE if f in body]
        assert not live, f"{where}: live Markdown {live} in {body!r}"
        assert not ANY_LINK.search(body), f"{where}: an image or a link in {body!r}"
    for text in expected:  # the test saw the text it planted (each body shown as the reader sees it)
        assert any(text in shown(b) for b in bodies), f"{where}: {text!r} not shown; bodies: {bodies}"


def hostile_diag(lines: int = 200) -> bytes:
    """The sample diag's first ``lines`` lines with both hostile texts as extra keys."""
    rows = [json.loads(x) for x in (SAMPLE_DIR / DIAG_NAME).read_text().splitlines()[:lines]]
    for row in rows:
        row[BREAKOUT] = 1.0
        row[BOLD_HTML] = 2.0
    return "\n".join(json.dumps(r) for r in rows).encode()


def test_the_runs_page_shows_hostile_names_keys_and_tags_as_text(tmp_path, monkeypatch):
    data = hostile_diag()
    at = open_app(tmp_path / "store", monkeypatch)
    at.file_uploader(key="runs.upload").set_value([(f"{FILE_BREAKOUT}.jsonl", data, "application/json"),
                                                   (f"{BOLD_HTML}.jsonl", data, "application/json")]).run()
    # the ingest report (name, columns), the same content under a second name (an alias)
    assert_shown_as_text(at, "upload", f"{FILE_BREAKOUT}.jsonl: 200 rows", f"{BOLD_HTML}.jsonl: ", BREAKOUT,
                         BOLD_HTML, "added the name bold-img-src-x")
    ((rid, name),) = [(r["run_id"], r["name"]) for r in open_store(tmp_path / "store").list_runs()]

    # the edit panel: its label names the run; a tag that is not one is refused in words that echo it
    at.multiselect(key="runs.edit.runs").set_value([rid]).run()
    at.text_input(key="runs.edit.add").set_value(BOLD_HTML).run()
    at.button(key="runs.edit.tag").click().run()
    assert_shown_as_text(at, "tag refused", f"Edit 1 selected run(s): {name}", "tag '**bold**' is not a tag")

    # a note and a new name: the table shows them as cells; the labels that name the run show them as text
    at.text_input(key="runs.edit.add").set_value("").run()  # the refusal above left the panel's rest undrawn
    at.text_area(key=f"runs.edit.note.{rid}").set_value(f"{BREAKOUT} {BOLD_HTML}").run()
    at.button(key="runs.edit.save_note").click().run()
    at.text_input(key=f"runs.edit.name.{rid}").set_value(BOLD_NAME).run()
    at.button(key="runs.edit.rename").click().run()
    assert_shown_as_text(at, "renamed", f"Yes, delete {BOLD_NAME} ({rid}) from the store", f"Delete {BOLD_NAME}",
                         f"Edit 1 selected run(s): {BOLD_NAME}")
    meta = open_store(tmp_path / "store").meta(rid)
    assert meta["name"] == BOLD_NAME and meta["notes"] == f"{BREAKOUT} {BOLD_HTML}"  # stored as given


def test_explore_and_its_provenance_panel_show_a_hostile_run_name_and_key_as_text(tmp_path, monkeypatch):
    """A run named with Markdown, a key with Markdown in its rows, a planted failure opened from the
    URL: the verdict strip, the tables' headings, the panel's title and text and its rows table."""
    from helpers import planted_diag

    path, _ = planted_diag(tmp_path / "planted.jsonl", steps=800)
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    for row in rows:
        row[BOLD_HTML] = 1.0
    store = RunStore(tmp_path / "store")
    rid = store.ingest("\n".join(json.dumps(r) for r in rows).encode(), name=BOLD_NAME).run_id
    monkeypatch.setenv("REGIME_DASH_STORE", str(store.root))
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"runs": rid, "failure": "rederive.popart_mean@700", "failure_run": rid})
    at.switch_page(page("explore")).run()
    assert_shown_as_text(at, "explore with the panel open", BOLD_NAME)
    assert any(f"— {markdown_literal(BOLD_NAME)}" in m.value for m in at.markdown)  # the panel names the run
    (rows_table,) = [e.proto.body for e in at.get("html") if "rd-rows" in e.proto.body]
    assert "&lt;img src=x&gt;" in rows_table and "<img" not in rows_table  # the key, HTML-escaped
    at.session_state["explore.tabs"] = "Invariants"
    at.run()
    assert_shown_as_text(at, "invariants", BOLD_NAME)


def test_compare_shows_hostile_run_names_as_text(tmp_path, monkeypatch):
    store = RunStore(tmp_path / "store")
    data = hostile_diag()
    a = store.ingest(data, name=BOLD_NAME).run_id
    b = store.ingest(data.replace(b'"max_duration": 1000.0', b'"max_duration": 300.0'), name=ITALIC_NAME).run_id
    assert a != b
    monkeypatch.setenv("REGIME_DASH_STORE", str(store.root))
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    at.switch_page(page("compare")).run()
    assert_shown_as_text(at, "compare", "differ: first at step")


def test_a_hostile_layout_file_name_is_text_on_slots_and_replay(tmp_path, monkeypatch):
    at = open_app(tmp_path / "store", monkeypatch)
    at.switch_page(page("slots")).run()
    at.file_uploader(key="slots.upload").set_value((f"{FILE_BREAKOUT}.rs", b"fn main() {}\n", "text/plain")).run()
    assert_shown_as_text(at, "a layout refused", f"{FILE_BREAKOUT}.rs: ")
    rs = b"pub const RL_REGIME_DEAD_ZONE_FLAG_INDEX: usize = 900;\n"
    at.file_uploader(key="slots.upload").set_value((f"{BOLD_HTML}.rs", rs, "text/plain")).run()
    assert_shown_as_text(at, "a layout used", f"{BOLD_HTML}.rs: 1 index(es) moved",
                         f"Replays use this layout ({BOLD_HTML}.rs)")
    at.switch_page(page("replay")).run()
    assert_shown_as_text(at, "replay with the layout", f"Slot layout: {BOLD_HTML}.rs")
    at.switch_page(page("slots")).run()
    assert_shown_as_text(at, "slots again", f"Replays use the layout of {BOLD_HTML}.rs")
