"""The Parquet run store: layout, atomicity, idempotence, concurrency, reading back."""
from __future__ import annotations

import gzip
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from regime_dash.errors import IngestError, StoreError
from regime_dash.store.run_store import RunStore, default_store, sanitize_name

REPO = Path(__file__).resolve().parents[1]


def jsonl(*objs) -> bytes:
    return b"".join((o if isinstance(o, bytes) else json.dumps(o).encode()) + b"\n" for o in objs)


def diag(n: int, start: int = 0, **extra) -> bytes:
    return jsonl(*[{"step": i, "risk_stack": {"regime": {"tail": {"recency": i % 7}},
                                              "popart": {"sigma": 1.0 / (i + 1)}}, **extra}
                   for i in range(start, start + n)])


@pytest.fixture
def store(tmp_path) -> RunStore:
    return RunStore(tmp_path / "store", chunk_bytes=4096)


def child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


# ----------------------------------------------------------------------------- layout


def test_layout_is_hive_with_meta_and_rejects(store):
    res = store.ingest(diag(50) + b"broken {\n", name="my run")
    d = store.root / f"run={res.run_id}"
    names = sorted(p.name for p in d.iterdir())
    assert names[:3] == ["_conflicts.jsonl", "_meta.json", "_rejects.jsonl"]
    assert all(n.startswith("part-") and n.endswith(".parquet") for n in names[3:])
    meta = json.loads((d / "_meta.json").read_text())
    for key in ("source", "sha256", "lines", "rows", "rejected_count", "columns", "first_step",
                "last_step", "ingested_at"):
        assert key in meta
    assert meta["rows"] == 50 and meta["rejected_count"] == 1 and meta["lines"] == 51
    rej = [json.loads(x) for x in (d / "_rejects.jsonl").read_text().splitlines()]
    assert rej == [{"line": 51, "reason": rej[0]["reason"], "raw": "broken {"}]
    assert res.run_id.startswith("my-run-") and res.first_step == 0 and res.last_step == 49
    # nothing else at the store root that a reader would pick up (`_common_metadata`, the store's
    # schema, is skipped by dataset readers and matched by no `*.parquet` glob)
    assert sorted(p.name for p in store.root.iterdir() if not p.name.startswith(".")) == ["_common_metadata", d.name]


def test_whole_store_reads_as_one_table_everywhere(store):
    a = store.ingest(diag(30), name="a")
    # a second run with a late extra column and a conflicting type
    b = store.ingest(diag(20, extra_col="x") + jsonl({"step": 99, "risk_stack": {"popart": {"sigma": "n/a"}}}),
                     name="b")
    total = 51

    t = store.open_dataset().to_table()
    assert t.num_rows == total and set(t.column("run").unique().to_pylist()) == {a.run_id, b.run_id}
    assert "extra_col" in t.column_names and t.schema.field("step").type == pa.int64()

    import duckdb

    q = (f"SELECT run, count(*) AS n, count(extra_col) AS e FROM read_parquet("
         f"'{store.root}/run=*/*.parquet', hive_partitioning=true, union_by_name=true) "
         "GROUP BY run ORDER BY run")
    assert duckdb.sql(q).fetchall() == sorted([(a.run_id, 30, 0), (b.run_id, 21, 20)])

    df = pd.read_parquet(store.root, schema=store.schema())
    assert len(df) == total and set(df["run"].astype(str)) == {a.run_id, b.run_id}

    raw = ds.dataset(store.root, format="parquet", partitioning="hive", schema=store.schema())
    assert raw.count_rows() == total


def test_late_column_and_type_conflict_across_parts(store):
    # chunk_bytes=4096: the late key and the conflicting type land in later parts
    data = diag(300) + jsonl({"step": 300, "late": {"k": 1}},
                             {"step": 301, "risk_stack": {"popart": {"sigma": "inf?"}}})
    res = store.ingest(data)
    assert len(store.parts(res.run_id)) >= 2
    df = store.load(res.run_id)
    assert len(df) == 302 and df["late.k"].iloc[300] == 1 and df["late.k"].isna().sum() == 301
    sig = df["risk_stack.popart.sigma"]
    # sigma keeps its canonical float64: the text is set aside, the row is kept
    assert str(sig.dtype) == "float64" and pd.isna(sig.iloc[301]) and sig.iloc[0] == 1.0
    assert res.rows == 302 and res.aside == [{"line": 302, "field": "risk_stack.popart.sigma",
                                              "value": '"inf?"', "type": "double"}]
    assert store.conflicts(res.run_id) == res.aside


def test_load_projection_and_sorting(store):
    data = jsonl(*[{"step": s, "v": s * 10, "w": "x"} for s in (5, 3, 9, 1)])
    res = store.ingest(data)
    df = store.load(res.run_id, columns=["v"])
    assert list(df.columns) == ["v"] and df["v"].tolist() == [10, 30, 50, 90]
    full = store.load(res.run_id)
    assert full["step"].tolist() == [1, 3, 5, 9] and full.index.tolist() == [0, 1, 2, 3]
    assert full["_line"].tolist() == [4, 2, 1, 3]
    with pytest.raises(StoreError, match="'nope'"):
        store.load(res.run_id, columns=["nope"])


def test_nan_and_inf_survive_the_store(store):
    res = store.ingest(b'{"step": 0, "x": NaN}\n{"step": 1, "x": Infinity}\n{"step": 2, "x": -Infinity}\n')
    x = store.load(res.run_id)["x"].tolist()
    assert math.isnan(x[0]) and x[1:] == [math.inf, -math.inf]


def test_source_field_named_run_does_not_clash_with_partition(store):
    res = store.ingest(jsonl({"step": 1, "run": "trainer-7"}))
    assert "run_" in res.columns and "run" not in res.columns
    t = store.open_dataset().to_table()
    assert t.column("run").to_pylist() == [res.run_id] and t.column("run_").to_pylist() == ["trainer-7"]


# ------------------------------------------------------------------ atomic, idempotent


def test_failed_ingest_leaves_nothing(store):
    class Exploding:
        def __init__(self):
            self.n = 0

        def read(self, size=-1):
            self.n += 1
            if self.n > 3:
                raise OSError("disk went away")
            return diag(100, start=self.n * 100)

    with pytest.raises(IngestError, match="disk went away"):
        store.ingest(Exploding())
    assert list(store.root.iterdir()) == [store.root / ".lock"] or \
        [p.name for p in store.root.iterdir()] == []
    assert store.list_runs() == []
    assert store.ingest(diag(10)).rows == 10


def test_kill_during_ingest_leaves_no_partial_run_and_next_ingest_succeeds(tmp_path):
    root = tmp_path / "store"
    src = tmp_path / "big.jsonl"
    from regime_dash.benchmarks.ingest import make_diag_file

    make_diag_file(src, 12, seed=5)
    code = textwrap.dedent("""
        import sys, time
        from regime_dash.ingest import pipeline as ingest  # where iter_batches looks them up
        from regime_dash.store.run_store import RunStore
        real = ingest.parse_chunk
        def slow(*a, **k):
            time.sleep(0.05)  # stretch the ingest so the kill lands mid-way
            return real(*a, **k)
        ingest.parse_chunk = slow
        RunStore(sys.argv[1], chunk_bytes=1 << 18).ingest(sys.argv[2])
    """)
    proc = subprocess.Popen([sys.executable, "-c", code, str(root), str(src)], env=child_env())
    try:
        deadline = time.time() + 60
        # wait until the child is writing Parquet parts into its work directory
        while time.time() < deadline:
            staging = tmp_path / ".store.staging"  # beside the store, out of every glob
            work = list(staging.glob("ingest-*")) if staging.exists() else []
            if work and list(work[0].glob("part-*.parquet*")):
                break
            assert proc.poll() is None, "ingest finished before it could be killed"
            time.sleep(0.02)  # a poll's interval
        else:
            pytest.fail("the ingest never started writing")
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    store = RunStore(root)
    assert store.list_runs() == []
    assert not list(root.glob("run=*"))
    assert store.open_dataset().to_table().num_rows == 0  # readers skip the dot dir
    res = store.ingest(src)
    assert res.rows > 1000 and res.duplicate_of is None
    assert not list((tmp_path / ".store.staging").glob("ingest-*"))  # the dead ingest's leftovers are gone
    assert [r["run_id"] for r in store.list_runs()] == [res.run_id]


def test_a_lock_held_by_a_killed_process_does_not_block_the_next_ingest(tmp_path):
    root = tmp_path / "store"
    code = textwrap.dedent("""
        import sys, time
        from regime_dash.store.run_store import RunStore
        with RunStore(sys.argv[1]).lock():
            print("held", flush=True)
            time.sleep(120)  # holds the lock until the test kills it
    """)
    proc = subprocess.Popen([sys.executable, "-c", code, str(root)], env=child_env(),
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        blocked: list[bool] = []
        waiter = threading.Thread(target=lambda: blocked.append(RunStore(root).ingest(diag(5)).rows == 5),
                                  daemon=True)  # a lock that never frees must fail the test, not hang it
        waiter.start()
        waiter.join(1.0)
        assert waiter.is_alive() and not blocked  # the commit waits for the live holder
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        waiter.join(30)
        assert blocked == [True]  # the dead holder's lock went with it
    finally:
        if proc.poll() is None:
            proc.kill()


def test_same_bytes_give_one_run(store, tmp_path):
    data = diag(40) + b"junk\n"
    first = store.ingest(data, name="one")
    again = store.ingest(data, name="two")
    assert again.duplicate_of == first.run_id and again.run_id == first.run_id
    assert again.rows == 40 and again.rejected == first.rejected
    gz = tmp_path / "diag.jsonl.gz"
    gz.write_bytes(gzip.compress(data))
    assert store.ingest(gz).duplicate_of == first.run_id  # same content, compressed
    assert len(store.list_runs()) == 1
    other = store.ingest(data + b'{"step": 41}\n')
    assert other.duplicate_of is None and len(store.list_runs()) == 2


@pytest.mark.slow  # concurrent ingest processes: ~2.7 s of CPU
def test_concurrent_ingests_same_and_different_bytes(tmp_path):
    root = tmp_path / "store"
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(diag(3000))
    b.write_bytes(diag(3000, start=5000))
    code = ("import sys, json; from regime_dash.store.run_store import RunStore; "
            "r = RunStore(sys.argv[1], chunk_bytes=1 << 16).ingest(sys.argv[2]); "
            "print(json.dumps([r.run_id, r.duplicate_of]))")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(root), str(p)],
                              stdout=subprocess.PIPE, env=child_env()) for p in (a, a, b)]
    outs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    runs = RunStore(root).list_runs()
    assert len(runs) == 2
    (id_a1, dup1), (id_a2, dup2), (id_b, dup_b) = outs
    assert id_a1 == id_a2 and sorted([dup1, dup2], key=str) == [None, id_a1] and dup_b is None
    assert RunStore(root).open_dataset().count_rows() == 6000


def test_concurrent_ingest_threads(tmp_path):
    store = RunStore(tmp_path / "s", chunk_bytes=1 << 14)
    datas = [diag(500, start=i * 1000) for i in range(4)] * 2
    results = [None] * len(datas)

    def work(i):
        results[i] = store.ingest(datas[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(datas))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store.list_runs()) == 4
    assert sum(r.duplicate_of is not None for r in results) == 4


# -------------------------------------------------------------------- list, load, rm


def test_list_meta_rejects_delete(store):
    r1 = store.ingest(diag(10), source_name="cluster/diag-1.jsonl.gz")
    r2 = store.ingest(diag(5, start=100) + b"\xff\xfe\n")
    runs = store.list_runs()
    assert [r["run_id"] for r in runs] == [r1.run_id, r2.run_id]
    assert runs[0]["name"] == "diag-1" and runs[0]["source"] == "cluster/diag-1.jsonl.gz"
    assert runs[1]["first_step"] == 100 and runs[1]["last_step"] == 104
    for key in ("rows", "ingested_at", "sha256"):
        assert key in runs[0]
    assert store.meta(r1.run_id)["rows"] == 10
    (rej,) = store.rejects(r2.run_id)
    assert rej["line"] == 6 and "UTF-8" in rej["reason"]
    assert rej["raw_base64"] == "//4="  # the exact bytes are kept
    store.delete(r1.run_id)
    assert [r["run_id"] for r in store.list_runs()] == [r2.run_id]
    assert not (store.root / f"run={r1.run_id}").exists()
    with pytest.raises(StoreError, match=r1.run_id):
        store.load(r1.run_id)
    with pytest.raises(StoreError):
        store.delete(r1.run_id)


def test_unreadable_or_empty_sources(store, tmp_path):
    with pytest.raises(IngestError, match="missing.jsonl"):
        store.ingest(tmp_path / "missing.jsonl")
    with pytest.raises(IngestError, match="is not a diag file: no lines"):
        store.ingest(b"")
    with pytest.raises(IngestError, match="line 1"):
        store.ingest(b"\x89PNG\r\n\x1a\n\x00\x00garbage\n")
    assert store.list_runs() == []
    assert not [p for p in store.root.iterdir() if p.name.startswith(".ingest")]


def test_progress_callback(store, tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_bytes(diag(2000))
    calls = []
    store.ingest(p, progress=lambda done, total: calls.append((done, total)))
    assert len(calls) > 3
    assert all(t == p.stat().st_size for _, t in calls)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    assert calls[-1][0] == p.stat().st_size


# -------------------------------------------------------------------------- names


@pytest.mark.parametrize("bad", ["../../etc/passwd", "/abs/path", "..", ".hidden", "a/b\\c",
                                 "-rf", "", "run=x", "名前", "a" * 300])
def test_run_names_are_sanitized(store, bad):
    res = store.ingest(diag(3, start=len(bad)), name=bad)
    d = store.root / f"run={res.run_id}"
    assert d.is_dir() and d.parent == store.root
    name = res.run_id.rsplit("-", 1)[0]
    assert name == sanitize_name(bad)
    assert not name.startswith((".", "-")) and "/" not in name and ".." not in name
    assert len(name) <= 64


@pytest.mark.parametrize("rid", ["../x", "..", "/etc", "a/../../b", ".ingest-x", "", "a b"])
def test_bad_run_ids_rejected(store, rid):
    store.ingest(diag(2))
    for op in (store.load, store.delete, store.meta, store.rejects):
        with pytest.raises(StoreError, match="run"):
            op(rid)


def test_default_store_env(monkeypatch, tmp_path):
    monkeypatch.setenv("REGIME_DASH_STORE", str(tmp_path / "elsewhere"))
    assert default_store() == tmp_path / "elsewhere"
    assert RunStore().root == tmp_path / "elsewhere"
    monkeypatch.delenv("REGIME_DASH_STORE")
    monkeypatch.chdir(tmp_path)
    assert default_store() == tmp_path / "data" / "store"


# ------------------------------------------------------------------------ memory

_PEAK = textwrap.dedent("""
    import resource, sys
    from regime_dash.ingest import pipeline as ingest  # where iter_batches looks them up
    from regime_dash.store.run_store import RunStore
    ingest._default_workers = lambda: 2  # the same pipeline depth on any machine
    RunStore(sys.argv[2], chunk_bytes=1 << 20).ingest(sys.argv[1])
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
""")


def _peak(path: Path, root: Path) -> int:
    out = subprocess.run([sys.executable, "-c", _PEAK, str(path), str(root)], env=child_env(),
                         capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


@pytest.mark.slow  # ingests of a growing file, measured: ~1.8 s of CPU
def test_memory_does_not_grow_with_file_size(tmp_path):
    """Peak RSS of ingesting 50 MB stays within 16 MB of ingesting 10 MB (1 MB chunks).

    Memory is bounded by the chunks in flight, which a 10 MB file already fills; reading
    the whole file or holding its rows would add at least the 40 MB difference in size.
    """
    from regime_dash.benchmarks.ingest import make_diag_file

    small, big = tmp_path / "small.jsonl", tmp_path / "big.jsonl"
    make_diag_file(small, 10, seed=1)
    make_diag_file(big, 50, seed=2)
    p_small = _peak(small, tmp_path / "s1")
    p_big = _peak(big, tmp_path / "s2")
    growth = (p_big - p_small) / 2**20
    assert growth < 16, f"peak RSS grew by {growth:.1f} MB from a 10 MB to a 50 MB file"


def test_narrow_load_gives_float32_only_where_every_value_is_one(tmp_path):
    from regime_dash.store.run_store import RunStore

    src = tmp_path / "n.jsonl"
    lines = [{"step": 2 - i if i < 3 else i, "risk_stack.a": float(i) + 0.5, "risk_stack.b": 0.1 * i}
             for i in range(6)]  # steps 2, 1, 0, 3, 4, 5: out of order, so the load sorts
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    store = RunStore(tmp_path / "store")
    run_id = store.ingest(src).run_id
    wide, narrow = store.load(run_id), store.load(run_id, narrow=True)
    assert list(narrow["step"]) == [0, 1, 2, 3, 4, 5] == list(wide["step"])
    assert narrow["risk_stack.a"].dtype == "float32"  # i + 0.5: float32 values
    assert narrow["risk_stack.b"].dtype == "float64"  # 0.1·i: not, kept as they were
    assert (narrow["risk_stack.a"].astype("float64") == wide["risk_stack.a"]).all()
    assert narrow["risk_stack.b"].equals(wide["risk_stack.b"])


def _bits(frame: pd.DataFrame) -> dict:
    import numpy as np

    return {c: (str(frame[c].dtype), frame[c].to_numpy().view(f"u{frame[c].dtype.itemsize}")
                if frame[c].dtype.kind == "f" else frame[c].to_numpy()) for c in frame.columns}


def _narrowed_whole(table: pa.Table) -> pa.Table:
    """The oracle: each float64 column of the whole table as float32 where every value (nulls aside, NaN
    kept) comes back from float32 as it was."""
    import pyarrow.compute as pc

    for i, f in enumerate(table.schema):
        if pa.types.is_float64(f.type):
            col = table.column(i)
            small = pc.cast(col, pa.float32(), safe=False)
            if pc.all(pc.or_kleene(pc.equal(pc.cast(small, pa.float64()), col), pc.is_nan(col))).as_py() is not False:
                table = table.set_column(i, pa.field(f.name, pa.float32()), small)
    return table


def test_narrow_load_reads_a_few_row_groups_at_a_time_with_the_whole_read_bits(tmp_path, monkeypatch):
    """Across parts and pieces: a column wide only in the last piece read again as float64, one a part lacks
    null there, int64 joined with float64; every bit as narrowing the whole table gives it."""
    import numpy as np
    import pyarrow.parquet as pq

    import regime_dash.store.reader as store_reader

    monkeypatch.setattr(store_reader, "_NARROW_ROWS", 3)  # several pieces a part
    src = tmp_path / "n.jsonl"
    src.write_text("".join(json.dumps({"step": i, "risk_stack.a": i + 0.5, "risk_stack.b": float(i),
                                       "risk_stack.c": i}) + "\n" for i in range(6)))
    store = RunStore(tmp_path / "store")
    run_id = store.ingest(src).run_id
    nan = np.array([0x7FF8000000000123], dtype=np.uint64).view(np.float64)[0]  # a NaN with a payload
    second = pa.table({"step": pa.array(range(6, 14), pa.int64()),
                       "risk_stack.a": [6.5, nan, 8.5, None, 10.5, 11.5, 12.5, 13.5],
                       "risk_stack.b": [6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 0.1],  # 0.1: not a float32
                       "risk_stack.c": [6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0],
                       "risk_stack.d": [0.25] * 8})
    pq.write_table(second, store.parts(run_id)[0].with_name("part-00001.parquet"), row_group_size=2)
    got = store.load(run_id, narrow=True)
    whole = _narrowed_whole(store.load_table(run_id)).to_pandas()
    assert list(got.columns) == list(whole.columns)
    for c, (dtype, values) in _bits(whole).items():
        assert str(got[c].dtype) == dtype, c
        assert np.array_equal(_bits(got)[c][1], values), c
    assert [str(got[c].dtype) for c in ("risk_stack.a", "risk_stack.b", "risk_stack.c", "risk_stack.d")] == [
        "float32", "float64", "float32", "float32"]
    assert got["risk_stack.d"].isna().sum() == 6 and got["risk_stack.b"].iloc[-1] == 0.1
    picked = store.load(run_id, ["risk_stack.b", "risk_stack.c"], narrow=True)
    assert list(picked.columns) == ["risk_stack.b", "risk_stack.c"]
    assert np.array_equal(_bits(picked)["risk_stack.b"][1], _bits(whole)["risk_stack.b"][1])
