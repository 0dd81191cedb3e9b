"""The Delta store (DeltaRunStore), the same suite on a local path and on s3:// against a real
S3-compatible server on 127.0.0.1 (moto's standalone server, reached by delta-rs's own object
store): ingest, runs, rows read back, rejects, aliases and labels, follow appends and their
resume, rm, restore, layouts, direct readers, concurrent writers and kill -9 mid-commit."""
from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import textwrap
import threading

import pyarrow as pa
import pytest

pytest.importorskip("deltalake", reason="deltalake is not installed (requirements.txt)")

from regime_dash.errors import IngestError, StoreError  # noqa: E402
from regime_dash.ingest import Reject  # noqa: E402
from regime_dash.store import labels  # noqa: E402
from regime_dash.store.append import FollowState  # noqa: E402
from regime_dash.store.delta import DeltaRunStore  # noqa: E402
from regime_dash.store.delta import layouts as delta_layouts  # noqa: E402
from regime_dash.store.delta.follow import DeltaFollowedRun, follow_status, rows_after  # noqa: E402
from tests.s3_server import child_env, s3_server  # noqa: E402,F401  (the fixture)
from tests.test_store import diag, jsonl  # noqa: E402  (the same diag lines as the folder store's tests)


class Where:
    """A store location and what reaches it: storage options here, the environment in a child."""

    def __init__(self, uri: str, env: dict[str, str] | None = None):
        self.uri, self.env = uri, env or {}

    def store(self, **kw) -> DeltaRunStore:
        return DeltaRunStore(self.uri, storage_options=self.env or None, **kw)

    def reader_options(self) -> dict[str, str]:
        """Storage options for pandas' (deltalake) and polars' readers."""
        return {**self.env, "AWS_ALLOW_HTTP": "true"} if self.env else {}


@pytest.fixture(params=["local", "s3"])
def where(request, tmp_path) -> Where:
    if request.param == "local":
        return Where(str(tmp_path / "store"))
    server = request.getfixturevalue("s3_server")
    return Where(f"s3://{server.bucket()}/team/runs", server.env())


# ----------------------------------------------------------------------- ingest and read


def test_ingest_runs_rows_rejects_and_asides(where):
    store = where.store(chunk_bytes=4096)
    data = diag(300, extra_col="x") + b"broken {\n" + b"\xff\xfe\n" + jsonl(
        {"step": 400, "risk_stack": {"popart": {"sigma": "n/a"}}, "late": {"k": 1}, "run": "trainer-7"},
        b'{"step": 401, "x": NaN}', b'{"step": 402, "x": -Infinity}')
    res = store.ingest(data, name="my run")
    assert res.run_id.startswith("my-run-") and res.rows == 303 and res.rejected_count == 2
    assert res.aside == [{"line": 303, "field": "risk_stack.popart.sigma", "value": '"n/a"', "type": "double"}]
    (run,) = store.list_runs()
    assert run["run_id"] == res.run_id and run["rows"] == 303 and run["rejected"] == 2
    assert run["first_step"] == 0 and run["last_step"] == 402 and run["sha256"] == res.sha256
    rej = store.rejects(res.run_id)
    assert [r["line"] for r in rej] == [301, 302] and rej[0]["raw"] == "broken {"
    assert rej[1]["raw_base64"] == "//4="  # the exact bytes are kept
    assert store.conflicts(res.run_id) == res.aside
    df = store.load(res.run_id)
    assert len(df) == 303 and df["step"].tolist()[:3] == [0, 1, 2]
    assert df["late.k"].iloc[300] == 1 and df["late.k"].isna().sum() == 302
    assert df["run_"].iloc[300] == "trainer-7" and "run" not in df.columns  # the partition key stays the store's
    x = df["x"].tolist()
    assert math.isnan(x[301]) and x[302] == -math.inf
    sigma = df["risk_stack.popart.sigma"]
    assert str(sigma.dtype) == "float64" and math.isnan(sigma.iloc[300]) and sigma.iloc[0] == 1.0
    assert list(store.load(res.run_id, columns=["extra_col"]).columns) == ["extra_col"]
    with pytest.raises(StoreError, match="'nope'"):
        store.load(res.run_id, columns=["nope"])
    table = store.load_table(res.run_id)
    assert table.column_names[0] == "_line" and table.column("_line").to_pylist() == sorted(
        table.column("_line").to_pylist())


def test_a_column_only_null_in_a_run_keeps_its_type_and_a_later_run_types_it(where):
    store = where.store()
    a = store.ingest(jsonl({"step": 1, "c": None}, {"step": 2, "c": None}), name="a")
    assert store.load_table(a.run_id).schema.field("c").type == pa.null()
    b = store.ingest(jsonl({"step": 1, "c": 2.5}), name="b")
    assert store.load(b.run_id)["c"].tolist() == [2.5]
    assert store.load_table(a.run_id).column("c").null_count == 2


def test_same_bytes_give_one_run_and_an_alias_and_labels_land(where):
    store = where.store()
    data = diag(40) + b"junk\n"
    first = store.ingest(data, name="one")
    again = store.ingest(data, name="two")
    assert again.duplicate_of == first.run_id and again.alias_added == "two"
    assert store.resolve("two") == first.run_id and len(store.list_runs()) == 1
    other = store.ingest(data + b'{"step": 41}\n', name="three")
    assert other.duplicate_of is None
    assert labels.tag(store, "one", ["gold", "fold:1"]) == ["fold:1", "gold"]
    assert labels.set_note(store, "one", "  looks right  ") == "looks right"
    assert labels.rename(store, "one", "uno") == {"run_id": first.run_id, "old": "one", "name": "uno"}
    with pytest.raises(StoreError, match="already has that name"):
        labels.rename(store, "three", "uno")
    row = next(r for r in store.list_runs() if r["run_id"] == first.run_id)
    assert (row["name"], row["aliases"], row["tags"], row["notes"]) == ("uno", ["two"], ["fold:1", "gold"],
                                                                       "looks right")


def test_concurrent_tags_from_threads_all_land(where):
    store = where.store()
    rid = store.ingest(diag(5), name="t").run_id
    threads = [threading.Thread(target=labels.tag, args=(store, rid, [f"t{i}"])) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.meta(rid)["tags"] == sorted(f"t{i}" for i in range(6))


def test_bad_input_gets_our_errors(where):
    store = where.store()
    with pytest.raises(IngestError, match="is not a diag file"):
        store.ingest(b"")
    with pytest.raises(StoreError, match="invalid run id"):
        store.meta("../etc")
    with pytest.raises(StoreError, match="no run named 'ghost'"):
        store.resolve("ghost")
    assert store.list_runs() == []


# ------------------------------------------------------------------------ rm and restore


def test_rm_then_restore_brings_the_run_back_bit_for_bit(where):
    store = where.store()
    keep = store.ingest(diag(20, start=500), name="keep")
    res = store.ingest(diag(100) + b"oops\n", name="gone")
    labels.tag(store, "gone", ["kept-tag"])
    before = store.load_table(res.run_id)
    store.delete(res.run_id)
    assert [r["run_id"] for r in store.list_runs()] == [keep.run_id]
    assert store.open_dataset().count_rows() == 20  # a direct reader no longer sees its rows
    with pytest.raises(StoreError, match=res.run_id):
        store.load(res.run_id)
    (removed,) = store.removed_runs()
    assert removed["run_id"] == res.run_id and removed["restorable_until"] > removed["removed_at"]
    assert store.restore("gone") == res.run_id
    assert store.load_table(res.run_id).equals(before)
    assert store.meta(res.run_id)["tags"] == ["kept-tag"] and store.rejects(res.run_id)[0]["raw"] == "oops"
    assert store.removed_runs() == [] and store.open_dataset().count_rows() == 120
    with pytest.raises(StoreError, match="no removed run named 'gone'"):
        store.restore("gone")


def test_restore_past_the_retention_window_is_refused(where):
    store = where.store(retention_hours=0)
    res = store.ingest(diag(10), name="short")
    store.delete(res.run_id)
    with pytest.raises(StoreError, match="no removed run named 'short' within the last 0 h"):
        store.restore("short")


# -------------------------------------------------------------------------------- follow


def _batch(lines: range) -> pa.Table:
    return pa.table({"_line": pa.array(list(lines), pa.int64()), "step": pa.array([i - 1 for i in lines], pa.int64()),
                     "v": pa.array([float(i) for i in lines])})


def _grow(run: DeltaFollowedRun, lines: range, rejects=()) -> FollowState:
    st = run.state
    new = FollowState(**{**st.__dict__, "segments": list(st.segments), "columns": {"step": "int64", "v": "double"}})
    new.lines, new.rows = lines.stop - 1 + len(rejects), st.rows + len(lines)
    new.offset = new.lines * 10
    new.first_step = 0 if new.first_step is None else new.first_step
    new.last_step, new.rejected_count = lines.stop - 2, st.rejected_count + len(rejects)
    run.commit(_batch(lines), [Reject(n, "bad", b"x") for n in rejects], [], new, {"verdict": {"n": new.rows}})
    return new


def test_follow_appends_compact_and_rows_after(where, tmp_path):
    store = where.store()
    src = tmp_path / "diag.jsonl"
    run = DeltaFollowedRun.open(store, src, "live")
    run.commit(None, [Reject(1, "bad", b"{")], [], FollowState(str(src), lines=1, rejected_count=1))
    assert not run.exists and store.list_runs() == []  # a run appears with its first row
    start = 2
    for _ in range(17):
        _grow(run, range(start, start + 5))
        start += 5
    (row,) = store.list_runs()
    assert row["rows"] == 85 and store.meta(run.run_id)["verdict"] == {"n": 85}
    assert [r["line"] for r in store.rejects(run.run_id)] == [1]
    assert len(store.files(run.run_id)) < 17  # compacted: Delta's optimize on the run's partition
    assert store.load_table(run.run_id).column("_line").to_pylist() == list(range(2, 87))
    table, reach = rows_after(store, run.run_id, 80)
    assert table.column("_line").to_pylist() == list(range(81, 87)) and reach == 86
    assert rows_after(store, run.run_id, 86) == (None, 86)
    assert follow_status(store)[run.run_id]["live"] is True
    run.finish()
    assert follow_status(store)[run.run_id]["live"] is False


def test_a_follower_killed_after_its_rows_commit_resumes_from_it(where, tmp_path, monkeypatch):
    store = where.store()
    src = tmp_path / "diag.jsonl"
    run = DeltaFollowedRun.open(store, src, "resume")
    _grow(run, range(1, 11))
    monkeypatch.setattr(DeltaFollowedRun, "_write_meta", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):  # the rows are committed, the metadata never written
        _grow(run, range(11, 16), rejects=[16])
    monkeypatch.undo()
    assert store.meta(run.run_id)["rows"] == 10
    run.release()  # the death this stands for frees the run's claim (a dead process's claim is taken over)
    again = DeltaFollowedRun.open(store, src, "resume")
    assert again.state.rows == 15 and again.state.lines == 16 and again.state.parts == 2
    assert store.meta(run.run_id)["rows"] == 15
    _grow(again, range(17, 20))
    assert store.load_table(run.run_id).column("_line").to_pylist() == [*range(1, 16), 17, 18, 19]


def test_rejects_of_a_commit_that_never_happened_are_dropped_on_resume(where, tmp_path, monkeypatch):
    store = where.store()
    src = tmp_path / "diag.jsonl"
    run = DeltaFollowedRun.open(store, src, "trim")
    _grow(run, range(1, 6))
    from regime_dash.store.delta import store as store_module

    real = store_module.DeltaRunStore.commit_rows
    monkeypatch.setattr(store_module.DeltaRunStore, "commit_rows",
                        lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):  # the rejects are committed, the rows never were
        _grow(run, range(6, 9), rejects=[9])
    monkeypatch.setattr(store_module.DeltaRunStore, "commit_rows", real)
    assert [r["line"] for r in store.rejects(run.run_id)] == [9]
    run.release()  # the death this stands for frees the run's claim (a dead process's claim is taken over)
    again = DeltaFollowedRun.open(store, src, "trim")
    assert again.state.lines == 5 and store.rejects(run.run_id) == []


# ------------------------------------------------------------------------------ layouts


def test_layouts_save_load_list_delete(where):
    from regime_dash.diag.panel_set import Panel, PanelSet

    store = where.store()
    panels = PanelSet((Panel("risk_stack.popart.sigma", True),), False)
    assert delta_layouts.save(store, "sigma only", panels) == "sigma only"
    assert delta_layouts.list_layouts(store) == ["sigma only"]
    assert delta_layouts.load(store, "sigma only") == panels
    assert delta_layouts.delete(store, "sigma only") is True and delta_layouts.list_layouts(store) == []
    with pytest.raises(StoreError, match="no layout 'sigma only'"):
        delta_layouts.load(store, "sigma only")


# ------------------------------------------------------------------------------- readers


def test_pandas_and_polars_read_the_rows_with_the_counts_runs_reports(where):
    store = where.store()
    store.ingest(diag(30), name="a")
    store.ingest(diag(20, start=100, extra="x"), name="b")
    gone = store.ingest(diag(7, start=900), name="c")
    store.delete(gone.run_id)
    counts = {r["run_id"]: r["rows"] for r in store.list_runs()}

    from deltalake import DeltaTable

    frame = DeltaTable(f"{where.uri}/rows", storage_options=where.reader_options() or None).to_pandas()
    assert frame.groupby("run").size().to_dict() == counts

    pl = pytest.importorskip("polars")
    lf = pl.read_delta(f"{where.uri}/rows", storage_options=where.reader_options() or None)
    assert dict(lf.group_by("run").len().iter_rows()) == counts


# ---------------------------------------------------------------- several processes


INGEST = ("import sys, json; from regime_dash.store.delta import DeltaRunStore; "
          "r = DeltaRunStore(sys.argv[1], chunk_bytes=1 << 16).ingest(sys.argv[2]); "
          "print(json.dumps([r.run_id, r.duplicate_of]))")


def test_concurrent_ingests_from_several_processes_each_land_whole(where, tmp_path):
    a, b, c = (tmp_path / f"{n}.jsonl" for n in "abc")
    a.write_bytes(diag(3000))
    b.write_bytes(diag(3000, start=5000))
    c.write_bytes(diag(1000, start=9000, other=1))
    procs = [subprocess.Popen([sys.executable, "-c", INGEST, where.uri, str(p)], stdout=subprocess.PIPE,
                              env=child_env(where.env)) for p in (a, a, b, c)]
    outs = [json.loads(p.communicate(timeout=300)[0]) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0]
    (id_a1, dup1), (id_a2, dup2), (_, dup_b), (_, dup_c) = outs
    assert id_a1 == id_a2 and sorted([dup1, dup2], key=str) == [None, id_a1] and dup_b is None and dup_c is None
    store = where.store()
    runs = store.list_runs()
    assert len(runs) == 3 and store.open_dataset().count_rows() == 7000
    assert sorted(r["rows"] for r in runs) == [1000, 3000, 3000]


KILLABLE = textwrap.dedent("""
    import sys, time
    from regime_dash.store.delta import writing
    step = sys.argv[3]
    real = writing._commit_rows if step == "before-rows" else writing._mark_live
    def held(*a, **k):
        print("holding", flush=True)
        time.sleep(120)
        return real(*a, **k)
    if step == "before-rows":
        writing._commit_rows = held
    else:
        writing._mark_live = held
    from regime_dash.store.delta import DeltaRunStore
    DeltaRunStore(sys.argv[1], chunk_bytes=1 << 16).ingest(sys.argv[2])
""")


@pytest.mark.parametrize("step", ["before-rows", "after-rows"])
def test_kill_9_mid_commit_leaves_no_partial_run(where, tmp_path, step):
    src = tmp_path / "big.jsonl"
    src.write_bytes(diag(4000) + b"bad line\n")
    proc = subprocess.Popen([sys.executable, "-c", KILLABLE, where.uri, str(src), step], stdout=subprocess.PIPE,
                            text=True, env=child_env(where.env))
    try:
        assert proc.stdout.readline().strip() == "holding"  # claimed, rejects committed; rows next (or done)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    store = where.store()
    if step == "before-rows":
        assert store.list_runs() == [] and store.open_dataset().count_rows() == 0
        res = store.ingest(src)  # the dead claim is dropped; the run lands whole
        assert res.duplicate_of is None and res.rows == 4000
        assert [r["line"] for r in store.rejects(res.run_id)] == [4001]  # the dead claim's rejects went
    else:  # the rows commit landed: the run is whole, listed, and the next writer marks it live
        (run,) = store.list_runs()
        assert run["rows"] == 4000 and store.open_dataset().count_rows() == 4000
        assert store.ingest(src).duplicate_of == run["run_id"]
    assert len(store.list_runs()) == 1 and store.open_dataset().count_rows() == 4000
