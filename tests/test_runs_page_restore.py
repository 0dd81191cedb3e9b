"""The Runs page on a Delta store (AppTest): a delete offers "Restore", which brings the run back;
a folder store's delete offers nothing (its deletes are final)."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")
pytest.importorskip("deltalake")
from streamlit.testing.v1 import AppTest  # noqa: E402

from regime_dash.sources.samples import SAMPLE_DIR  # noqa: E402
from regime_dash.store.delta import DeltaRunStore  # noqa: E402
from regime_dash.store.run_store import RunStore  # noqa: E402

APP = str(Path(__file__).resolve().parents[1] / "app.py")
RUNS = "regime_dash/ui/pages/runs.py"


def _runs_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)
    at.switch_page(RUNS).run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def _delete_the_picked_run(at: AppTest) -> str:
    rid = at.selectbox(key="runs.delete.run").value
    at.checkbox(key="runs.delete.sure").check().run()
    at.button(key="runs.delete.go").click().run()
    assert not at.exception, [e.message for e in at.exception]
    return rid


@pytest.mark.parametrize("kind", ["delta", "folder"])
def test_a_delete_offers_restore_on_a_delta_store(kind, tmp_path, monkeypatch):
    store = (DeltaRunStore if kind == "delta" else RunStore)(tmp_path / "store")
    text = (SAMPLE_DIR / "diag.jsonl").read_bytes()
    store.ingest(text, name="base")
    store.ingest(text.replace(b'"max_duration":1000.0', b'"max_duration":300.0'), name="short")
    monkeypatch.setenv("REGIME_DASH_STORE", str(tmp_path / "store"))
    at = _runs_page()
    rid = _delete_the_picked_run(at)
    assert rid not in [r["run_id"] for r in store.list_runs()]
    offered = [b for b in at.button if b.key == "runs.delete.restore"]
    if kind == "folder":
        assert not offered
        return
    assert offered and any(rid in i.value for i in at.info)
    at.button(key="runs.delete.restore").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert rid in [r["run_id"] for r in store.list_runs()] and len(store.list_runs()) == 2
    assert not [b for b in at.button if b.key == "runs.delete.restore"]  # offered once
