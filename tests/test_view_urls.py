"""An alert's link opens the view it names: the window is written as the pages write it."""
from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from regime_dash.core.view_urls import explore_url, range_text


@pytest.mark.parametrize("step", [0, 57, 2_999, 1_000_000])
def test_an_alert_link_decodes_with_the_pages_own_reader(step):
    from regime_dash.ui import state

    url = explore_url("http://127.0.0.1:8600/", "run-1", step)
    assert url.startswith("http://127.0.0.1:8600/explore?")
    query = parse_qs(urlparse(url).query)
    assert query["runs"] == ["run-1"]
    assert state.decode(query["window"][0], "range") == (max(0, step - 100), step + 100)
    assert state.encode((max(0, step - 100), step + 100), "range") == query["window"][0]


def test_a_link_without_a_step_opens_the_whole_run():
    assert explore_url("http://h:1", "r") == "http://h:1/explore?runs=r"
    assert range_text(3, 9) == "3..9"
