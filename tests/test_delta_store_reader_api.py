"""A Delta store answers what the dashboard asks of any store: a run's content version (moved by a commit of
rows, not by a label) and the URL of the dashboard serving it (recorded and read back)."""
from __future__ import annotations

from pathlib import Path

import pytest

from regime_dash.errors import StoreError
from regime_dash.store.open import open_store

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "samples" / "diag.jsonl"


@pytest.fixture()
def delta_store(tmp_path):
    return open_store(str(tmp_path / "store"), store_format_asked="delta")


def test_the_content_version_moves_with_rows_not_with_labels(delta_store, tmp_path):
    delta_store.ingest(SAMPLE)
    run_id = delta_store.list_runs()[0]["run_id"]
    before = delta_store.content_version(run_id)
    delta_store.update_meta(run_id, lambda m: m.update(tags=["look"]))
    assert delta_store.content_version(run_id) == before
    shorter = tmp_path / "shorter.jsonl"
    shorter.write_bytes(b"".join(SAMPLE.read_bytes().splitlines(keepends=True)[:600]))
    delta_store.delete(run_id)
    delta_store.ingest(shorter)
    again = delta_store.list_runs()[0]["run_id"]
    assert delta_store.content_version(again) != before


def test_the_dashboard_url_is_recorded_and_read_back(delta_store):
    assert delta_store.dashboard_url() is None
    delta_store.record_dashboard_url("http://127.0.0.1:8600/")
    assert delta_store.dashboard_url() == "http://127.0.0.1:8600"
    with pytest.raises(StoreError, match="file:///etc/passwd"):
        delta_store.record_dashboard_url("file:///etc/passwd")
