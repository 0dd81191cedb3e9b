"""`migrate`: a folder store of today's layout copied into a Delta store (local and s3://), nothing lost,
verified row for row; a difference is found and named."""
from __future__ import annotations

import pyarrow as pa
import pytest

pytest.importorskip("deltalake", reason="deltalake is not installed (requirements.txt)")

from regime_dash.diag.panel_set import Panel, PanelSet  # noqa: E402
from regime_dash.errors import StoreError  # noqa: E402
from regime_dash.ingest import Reject  # noqa: E402
from regime_dash.store import labels, layouts  # noqa: E402
from regime_dash.store.append import FollowedRun, FollowState  # noqa: E402
from regime_dash.store.delta import DeltaRunStore  # noqa: E402
from regime_dash.store.delta import layouts as delta_layouts  # noqa: E402
from regime_dash.store.delta.migrate import migrate, verify_run  # noqa: E402
from regime_dash.store.run_store import RunStore  # noqa: E402
from tests.s3_server import s3_server  # noqa: E402,F401  (the fixture)
from tests.test_store import diag, jsonl  # noqa: E402


@pytest.fixture
def folder(tmp_path) -> RunStore:
    """A folder store holding what a team's store holds: runs with rejects (bytes not UTF-8 among them),
    values set aside, an alias, tags, a note, a rename, a verdict cache, a followed run, layouts."""
    old = RunStore(tmp_path / "old", chunk_bytes=4096)
    data = diag(400, extra="x") + b"\xff\xfe\n" + jsonl(
        {"step": 500, "risk_stack": {"popart": {"sigma": "n/a"}}, "late": {"k": 1}, "n": None},
        b'{"step": 501, "x": NaN}', b'{"step": 502, "x": -0.0}')
    a = old.ingest(data, name="fold1")
    old.ingest(data, name="fold1-copy")  # an alias
    old.ingest(diag(50, start=1000, flag=True), name="fold2")
    labels.tag(old, "fold1", ["gold"])
    labels.set_note(old, "fold2", "the good one")
    labels.rename(old, "fold2", "fold-2")
    old.update_meta(a.run_id, lambda m: m.update(verdict={"status": "pass", "fail": 0}))
    run = FollowedRun.open(old, tmp_path / "live.jsonl", "live")
    for k in range(3):
        lines = list(range(1 + 5 * k, 6 + 5 * k))
        st = FollowState(str(tmp_path / "live.jsonl"), lines=lines[-1] + 1, rows=5 * (k + 1),
                         rejected_count=k + 1, columns={"step": "int64"}, parts=run.state.parts)
        table = pa.table({"_line": pa.array(lines, pa.int64()), "step": pa.array(lines, pa.int64())})
        run.commit(table, [Reject(lines[-1] + 1, "bad", b"?")], [], st)
    run.finish()
    layouts.save(old, "sigma", PanelSet((Panel("risk_stack.popart.sigma", True),), False))
    return old


def _check_everything_is_there(old: RunStore, new: DeltaRunStore) -> None:
    assert [r["run_id"] for r in new.list_runs()] == [r["run_id"] for r in old.list_runs()]
    assert new.list_runs() == old.list_runs()  # names, aliases, tags, notes, sha256, counts
    for r in old.list_runs():
        rid = r["run_id"]
        assert new.meta(rid) == old.meta(rid) and new.rejects(rid) == old.rejects(rid)
        assert new.conflicts(rid) == old.conflicts(rid)
        a, b = old.load(rid), new.load(rid)
        assert list(a.columns) == list(b.columns) or sorted(a.columns) == sorted(b.columns)
        assert a.equals(b[a.columns])
    assert delta_layouts.list_layouts(new) == ["sigma"]
    assert delta_layouts.load(new, "sigma") == layouts.load(old, "sigma")


def test_migrate_to_a_local_delta_store_loses_nothing(folder, tmp_path):
    report = migrate(folder.root, tmp_path / "new")
    new = DeltaRunStore(tmp_path / "new")
    assert report["runs"] == 3 and len(report["copied"]) == 3 and report["layouts"] == ["sigma"]
    assert report["rows"] == sum(r["rows"] for r in folder.list_runs())
    _check_everything_is_there(folder, new)
    fold1 = folder.resolve("fold1")
    assert new.rejects(fold1)[0]["raw_base64"] == "//4=" and new.meta(fold1)["aliases"] == ["fold1-copy"]
    again = migrate(folder.root, tmp_path / "new")  # interrupted and run again: verified, nothing copied twice
    assert again["copied"] == [] and len(again["verified"]) == 3
    assert new.open_dataset().count_rows() == report["rows"]


def test_migrate_to_s3_loses_nothing(folder, s3_server):
    uri = f"s3://{s3_server.bucket()}/team"
    report = migrate(folder.root, uri, storage_options=s3_server.options())
    assert len(report["verified"]) == 3
    _check_everything_is_there(folder, DeltaRunStore(uri, storage_options=s3_server.options()))


def test_a_difference_after_the_copy_is_found_and_named(folder, tmp_path):
    migrate(folder.root, tmp_path / "new")
    new = DeltaRunStore(tmp_path / "new")
    rid = folder.resolve("fold1")
    labels.tag(new, rid, ["changed"])
    with pytest.raises(StoreError, match=f"run '{rid}': its metadata differ"):
        verify_run(folder, new, rid)


def test_migrate_refuses_what_is_not_a_folder_store(tmp_path):
    with pytest.raises(StoreError, match="is not a store folder"):
        migrate(tmp_path / "nothing-here", tmp_path / "new")
