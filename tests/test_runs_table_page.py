"""The Runs page's runs table under AppTest: its filter kept in the URL, and a rename from the page."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from regime_dash.sources.samples import SAMPLE_DIR  # noqa: E402
from regime_dash.store.run_store import RunStore  # noqa: E402

APP = str(Path(__file__).resolve().parents[1] / "app.py")
RUNS = "regime_dash/ui/pages/runs.py"


@pytest.fixture
def store(tmp_path, monkeypatch):
    """Two runs of the sample's bytes, one with max_duration 300 logged instead of 1000."""
    s = RunStore(tmp_path / "store")
    text = (SAMPLE_DIR / "diag.jsonl").read_bytes()
    s.ingest(text, name="base")
    s.ingest(text.replace(b'"max_duration":1000.0', b'"max_duration":300.0'), name="short")
    monkeypatch.setenv("REGIME_DASH_STORE", str(s.root))
    return s


def _table(at: AppTest):
    (frame,) = [d.value for d in at.dataframe if "max_duration" in d.value.columns]
    return frame


def _runs_page(**params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)
    for k, v in params.items():
        at.query_params[k] = v
    at.switch_page(RUNS).run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_the_filter_is_in_the_url_and_a_url_reopens_it(store):
    at = _runs_page()
    assert sorted(_table(at)["name"]) == ["base", "short"]
    at.text_input(key="runs.filter.range").set_value("max_duration:..500").run()
    assert list(_table(at)["name"]) == ["short"]
    assert at.query_params["range"] in ("max_duration:..500", ["max_duration:..500"])
    at.text_input(key="runs.filter.q").set_value("bas").run()
    assert _table(at).empty  # both tests apply
    # a copied URL, opened in a fresh session, filters the same
    fresh = _runs_page(range="max_duration:400..", q="")
    assert list(_table(fresh)["name"]) == ["base"]
    assert fresh.text_input(key="runs.filter.range").value == "max_duration:400.."


def test_rename_and_tag_from_the_page(store):
    at = _runs_page()
    rid = store.resolve("short")
    at.multiselect(key="runs.edit.runs").set_value([rid]).run()
    at.text_input(key=f"runs.edit.name.{rid}").set_value("short md").run()
    at.button(key="runs.edit.rename").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert store.meta(rid)["name"] == "short-md"
    assert "short-md" in list(_table(at)["name"])
    at.multiselect(key="runs.edit.runs").set_value([rid]).run()
    at.text_input(key="runs.edit.add").set_value("md300 sweep").run()
    at.button(key="runs.edit.tag").click().run()
    assert store.meta(rid)["tags"] == ["md300", "sweep"]
    fresh = _runs_page(tags="sweep")
    assert list(_table(fresh)["name"]) == ["short-md"]


def test_the_range_filter_compares_a_config_slot_at_float32(store):
    """Both runs log eps_min 0.05 as its float32 slot holds it (0.05000000074505806)."""
    assert sorted(_table(_runs_page(range="eps_min:0.05..0.05"))["name"]) == ["base", "short"]
    assert _table(_runs_page(range="eps_min:0.0500001.."))["name"].empty


def test_tag_and_rename_take_one_click(store):
    """Tag and Rename are never disabled: a box's text commits only as the click takes its focus,
    so the text and the click arrive in one run, and one click does it."""
    at = _runs_page()
    rid = store.resolve("base")
    at.multiselect(key="runs.edit.runs").set_value([rid]).run()
    assert not at.button(key="runs.edit.tag").disabled and not at.button(key="runs.edit.rename").disabled
    at.button(key="runs.edit.tag").click().run()  # nothing typed: said, and nothing tagged
    assert [w.value for w in at.warning] == ["Type the tags to add first."]
    assert store.meta(rid).get("tags", []) == []
    at.text_input(key="runs.edit.add").set_value("first")
    at.button(key="runs.edit.tag").click().run()
    assert store.meta(rid)["tags"] == ["first"]
    at.multiselect(key="runs.edit.runs").set_value([rid]).run()
    at.text_input(key=f"runs.edit.name.{rid}").set_value("base two")
    at.button(key="runs.edit.rename").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert store.meta(rid)["name"] == "base-two"


def test_compare_shows_only_for_two_selected_and_alerts_are_text(store):
    """With no row selected there is no "Compare the 2 selected"; a followed run's failing checks
    read as text ("FAIL: ..."), not as an emoji a machine without an emoji font draws as a box."""
    from regime_dash.store.append import FOLLOW_KEY

    rid = store.resolve("short")

    def followed(meta: dict) -> None:
        meta[FOLLOW_KEY] = {"active": False, "parts": 1, "lines": 10}
        meta["alerts"] = {"open": {"kelly_trap": {"check": "kelly_trap", "first_step": 3}}}

    store.update_meta(rid, followed)
    at = _runs_page()
    assert [b.label for b in at.button if b.key == "runs.open.compare"] == []
    table = _table(at)
    alerts = dict(zip(table["name"], table["alerts"]))
    assert alerts == {"base": "", "short": "FAIL: kelly_trap"}


def test_next_opens_the_runs_just_uploaded_on_explore(store):
    """After an upload, "Next: look at the runs on Explore" opens the run just stored, not the
    store's oldest run (the one Explore picks with nothing named)."""
    text = (SAMPLE_DIR / "diag.jsonl").read_bytes().replace(b'"max_duration":1000.0', b'"max_duration":600.0')
    at = _runs_page()
    at.file_uploader(key="runs.upload").set_value([("fresh.jsonl", text, "application/json")]).run()
    assert not at.exception, [e.message for e in at.exception]
    old = {store.resolve("base"), store.resolve("short")}
    (fresh,) = [r["run_id"] for r in store.list_runs() if r["run_id"] not in old]
    at.button(key="runs.explore").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.multiselect(key="explore.runs").value == [fresh]
