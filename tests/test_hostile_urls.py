"""Hostile input the app renders: URL values that are no numbers a widget takes, and Markdown in
file names and keys. Each page stays up, says what it dropped, and shows file text as text."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("streamlit")

from regime_dash.text import markdown_literal  # noqa: E402
from tests.test_app_pages import SAMPLE_DIR, DIAG_NAME, no_exception, open_app, page  # noqa: E402

HUGE = "9" * 10_000

#: (page, parameter, value): each raised OverflowError (int(float('inf'))) or was dropped in silence.
BAD_URLS = [
    ("replay", "seed", "1e400"),
    ("replay", "seed", HUGE),
    ("replay", "steps", "inf"),
    ("replay", "max_duration", "nan"),
    ("replay", "eps_max", "-inf"),
    ("replay", "src", "no such source"),
    ("explore", "window", "inf..5"),
    ("explore", "window", f"0..{HUGE}"),
    ("explore", "smooth", "1e400"),
    ("explore", "panels", HUGE),
    ("explore", "panels", "risk_stack.popart.sigma~sqrt"),
    ("explore", "layout", HUGE),
    ("explore", "layout", "no such layout"),
]


def dropped_notices(at) -> list[str]:
    return [w.value for w in at.warning if "URL parameter" in w.value and "dropped" in w.value]


@pytest.mark.parametrize("name,param,value", BAD_URLS, ids=[f"{p}-{q}-{v[:12]}" for p, q, v in BAD_URLS])
def test_a_bad_url_value_is_said_and_dropped(tmp_path, monkeypatch, name, param, value):
    at = open_app(tmp_path / "store", monkeypatch)
    if name == "explore":
        at.button(key="runs.samples").click().run()  # Explore needs a run
    at.query_params[param] = value
    at.switch_page(page(name)).run()
    no_exception(at, f"{name}?{param}={value[:20]}")
    notices = dropped_notices(at)
    assert len(notices) == 1 and markdown_literal(param) in notices[0], [w.value for w in at.warning]
    assert len(notices[0]) < 400  # the 10,000 digits are clipped, not echoed
    assert param not in at.query_params  # dropped: the next link is clean


def test_markdown_in_a_file_name_and_a_key_is_shown_as_text(tmp_path, monkeypatch):
    """A key closing the inline code and an image from another host, and a file name that is a
    link: the ingest report shows them escaped (no image fetched, no link drawn)."""
    key = "a` ![i](http://host/x.png) `b"
    name = "[click](http://host/).jsonl"
    lines = [json.loads(x) for x in (SAMPLE_DIR / DIAG_NAME).read_text().splitlines()[:50]]
    for row in lines:
        row[key] = 1.0
    at = open_app(tmp_path / "store", monkeypatch)
    at.file_uploader(key="runs.upload").set_value(
        (name, "\n".join(json.dumps(r) for r in lines).encode(), "application/json")).run()
    no_exception(at, "upload")
    rendered = [m.value for m in at.markdown] + [e.label for e in at.expander]
    assert any(markdown_literal(key) in r for r in rendered), rendered
    assert any(markdown_literal(name) in r for r in rendered), rendered
    for r in rendered:
        assert "](http" not in r.replace("\\]\\(http", ""), r  # no unescaped link or image
