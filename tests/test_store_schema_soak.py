"""The store read whole with a column that first appears in a later part, the server's memory over a live
follow (the soak), and the named chart layouts file kept to its cap."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from regime_dash.follow.follower import FollowSet
from regime_dash.store.run_store import RunStore

ROOT = Path(__file__).resolve().parents[1]
LATE = "late_metric"


def diag_line(i: int, late: bool = False) -> str:
    o: dict = {"step": i, "risk_stack": {"regime": {"dead_zone": {"duration": float(i)}}}}
    if late:
        o[LATE] = i * 0.5
    return json.dumps(o) + "\n"


def follow_with_late_column(store, src: Path, name: str = "job") -> None:
    """A followed run whose first 50 lines lack ``late_metric`` and whose next 30 carry it: two parts."""
    src.write_text("".join(diag_line(i) for i in range(50)))
    fset = FollowSet(store, [src], name, commit_every=0)
    fset.poll(force=True)
    with open(src, "a") as fh:
        fh.write("".join(diag_line(i, late=True) for i in range(50, 80)))
    fset.poll(force=True)
    fset.poll(force=True)
    for f in fset.followers.values():
        f.close()


def readme_reads() -> str:
    """README's block of whole-store reads, as written there."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"```python\n(schema = pyarrow\.parquet\.read_schema\(.*?)```", text, re.S)
    assert m, "README lost its block of whole-store reads"
    return m.group(1)


def test_a_later_parts_new_column_reads_through_readmes_calls(tmp_path):
    root = tmp_path / "store"
    store = RunStore(root)
    follow_with_late_column(store, tmp_path / "job.diag.jsonl")
    # a second run (sorting first) lacking the column: the first file is not the one with it
    (tmp_path / "a.jsonl").write_text("".join(diag_line(i) for i in range(10)))
    store.ingest(tmp_path / "a.jsonl", name="a")
    parts = sorted(root.glob("run=*/part-*.parquet"))
    assert len(parts) >= 3 and LATE not in pq.read_schema(parts[0]).names

    import duckdb
    import pandas
    import polars
    import pyarrow
    import pyarrow.parquet  # noqa: F401  (README's block names it)

    ns: dict = {"pandas": pandas, "pyarrow": pyarrow, "duckdb": duckdb, "polars": polars}
    exec(readme_reads().replace('"data/store', f'"{root}').replace("'data/store", f"'{root}"), ns)
    late_of = {"job": 30, "a": 0}
    df = ns["df"]
    assert len(df) == 90 and int(df[LATE].notna().sum()) == 30
    assert df.loc[df[LATE].notna(), "step"].min() == 50
    table = ns["table"]
    assert table.num_rows == 90 and table.column(LATE).null_count == 60
    got = ns["rel"].aggregate(f"count({LATE}), count(*)").fetchall()
    assert got == [(30, 90)]
    pl_counts = ns["lf"].select(polars.col(LATE).count(), polars.len()).collect().row(0)
    assert pl_counts == (30, 90)
    by_run = df.groupby(df["run"].astype(str).str.split("-").str[0])[LATE].count().to_dict()
    assert by_run == late_of


def test_the_schema_file_is_rebuilt_where_missing_and_never_loses_a_column(tmp_path):
    from regime_dash.store import common_schema

    root = tmp_path / "store"
    store = RunStore(root)
    follow_with_late_column(store, tmp_path / "job.diag.jsonl")
    (root / common_schema.FILE).unlink()
    (tmp_path / "b.jsonl").write_text("".join(diag_line(i) for i in range(5)))
    store.ingest(tmp_path / "b.jsonl", name="b")  # rebuilt from every footer, the new run's joined
    assert LATE in pq.read_schema(root / common_schema.FILE).names
    assert not list(root.glob(".*tmp")), "the schema file's temporary copy was left behind"


def test_the_delta_store_merges_a_later_commits_new_column(tmp_path):
    import deltalake
    import polars

    from regime_dash.store.open import open_delta_store

    store = open_delta_store(tmp_path / "dstore")
    follow_with_late_column(store, tmp_path / "job.diag.jsonl")
    rows = str(tmp_path / "dstore" / "rows")
    df = deltalake.DeltaTable(rows).to_pandas()  # README's read of the Delta tables
    assert len(df) == 80 and int(df[LATE].notna().sum()) == 30
    assert polars.read_delta(rows).select(polars.col(LATE).count()).item() == 30
    assert deltalake.DeltaTable(rows).to_pyarrow_dataset().to_table().column(LATE).null_count == 50


# ---------------------------------------------------------------- named layouts: the file's cap

def plant_layouts(root: Path, count: int, pad: int = 0) -> Path:
    """``_layouts.json`` written by hand: ``count`` layouts, each with a ``pad``-character field name."""
    root.mkdir(parents=True, exist_ok=True)
    body = {f"L{i:06d}": {"spec": True, "panels": [{"field": "f" * (pad or 10), "log": False}]} for i in range(count)}
    path = root / "_layouts.json"
    path.write_text(json.dumps({"layouts": body}, indent=1), encoding="utf-8")
    return path


def test_a_huge_layouts_file_is_refused_at_once_on_every_read_naming_the_cap(tmp_path):
    import time

    from regime_dash.errors import StoreError
    from regime_dash.diag.panel_set import Panel, PanelSet

    store = RunStore(tmp_path / "store")
    path = plant_layouts(store.root, 400_000)
    size, before = path.stat().st_size, path.read_bytes()
    assert size > 30 << 20
    took = []
    for _ in range(10):  # ten Explore reruns' listings
        t0 = time.perf_counter()
        with pytest.raises(StoreError, match=r"past the cap of 1 MB and 1,000 layouts") as err:
            store.layouts.list_layouts()
        took.append(time.perf_counter() - t0)
    assert "_layouts.json" in str(err.value) and "move it aside" in str(err.value)
    assert sum(took) < 1.0, f"ten reads of a refused 36 MB file took {sum(took):.2f} s"
    with pytest.raises(StoreError, match="past the cap"):
        store.layouts.save("new", PanelSet((Panel("popart.sigma", True),)))
    assert path.read_bytes() == before  # the file is never lost or rewritten


def test_a_save_past_the_count_or_byte_cap_is_refused_and_the_file_kept(tmp_path):
    from regime_dash.errors import StoreError
    from regime_dash.diag.panel_set import Panel, PanelSet

    panels = PanelSet((Panel("popart.sigma", True),))
    store = RunStore(tmp_path / "full")
    path = plant_layouts(store.root, 1000)
    before = path.read_bytes()
    with pytest.raises(StoreError, match=r"at most 1,000 layouts"):
        store.layouts.save("one more", panels)
    assert path.read_bytes() == before
    assert store.layouts.save("L000007", panels) == "L000007"  # replacing one stays within the cap
    assert len(store.layouts.list_layouts()) == 1000

    big = RunStore(tmp_path / "big")
    pad = 50_000
    path = plant_layouts(big.root, 20, pad=pad)
    pad += ((1 << 20) - 2000 - path.stat().st_size) // 20
    path = plant_layouts(big.root, 20, pad=pad)  # 20 layouts, 2 kB short of the byte cap
    assert (1 << 20) - 2100 < path.stat().st_size < 1 << 20
    before = path.read_bytes()
    wide = PanelSet(tuple(Panel(f"{i:02d}" + "x" * 190, False) for i in range(20)))  # ~4 kB
    with pytest.raises(StoreError, match=r"past the cap of 1 MB"):
        big.layouts.save("wide", wide)
    assert path.read_bytes() == before and len(big.layouts.list_layouts()) == 20


def test_a_layouts_file_within_the_cap_is_parsed_once_per_version(tmp_path, monkeypatch):
    from regime_dash.diag.panel_set import Panel, PanelSet
    from regime_dash.store import layouts as store_layouts

    store = RunStore(tmp_path / "store")
    plant_layouts(store.root, 900)
    parsed = []
    real = json.loads

    def counting(text, *a, **kw):
        if isinstance(text, str) and '"layouts"' in text[:20]:
            parsed.append(len(text))
        return real(text, *a, **kw)

    monkeypatch.setattr(store_layouts.json, "loads", counting)
    for _ in range(5):
        assert len(store.layouts.list_layouts()) == 900
    assert len(parsed) == 1
    store.layouts.save("added", PanelSet((Panel("popart.sigma", True),)))
    assert "added" in store.layouts.list_layouts()  # a new version is read again


def test_the_delta_store_refuses_a_layout_past_the_cap(tmp_path):
    from regime_dash.errors import StoreError
    from regime_dash.diag.panel_set import Panel, PanelSet
    from regime_dash.store.open import open_delta_store

    store = open_delta_store(tmp_path / "dstore")
    body = {"spec": True, "panels": [{"field": "popart.sigma", "log": True}]}
    store.settings.change(lambda docs: docs.update({f"layout:L{i:04d}": {"name": f"L{i:04d}", "panels": body}
                                                    for i in range(1000)}), "plant")
    with pytest.raises(StoreError, match=r"at most 1,000 layouts"):
        store.layouts.save("one more", PanelSet((Panel("popart.sigma", True),)))
    assert len(store.layouts.list_layouts()) == 1000


# ---------------------------------------------------------------- soak: the server's caches and the bench

def test_every_cache_of_the_dashboard_with_arguments_is_bounded():
    import ast

    unbounded = []
    for path in sorted((ROOT / "regime_dash" / "ui").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef) or not node.args.args:
                continue  # a cached function of no argument holds one entry
            for dec in node.decorator_list:
                call = dec if isinstance(dec, ast.Call) else None
                name = ast.unparse(call.func if call else dec)
                if name in ("st.cache_data", "st.cache_resource"):
                    kws = {k.arg for k in (call.keywords if call else [])}
                    if "max_entries" not in kws:
                        unbounded.append(f"{path.name}:{node.name}")
    assert unbounded == []


def test_a_live_runs_older_versions_leave_the_run_caches(tmp_path, monkeypatch):
    """A followed run committed ten times, its frame and verdict read at each version as Explore does:
    only the newest versions stay cached (an old one is computed again when asked)."""
    from regime_dash.follow import live_frame
    from regime_dash.ui import cache

    root = tmp_path / "store"
    monkeypatch.setenv(cache.STORE_ENV, str(root))
    store, src = RunStore(root), tmp_path / "job.diag.jsonl"
    src.write_text("".join(diag_line(i) for i in range(20)))
    fset = FollowSet(store, [src], "job", commit_every=0)
    fset.poll(force=True)
    rid = next(iter(fset.followers.values())).run_id
    reads = []
    real = live_frame.read_whole
    monkeypatch.setattr(live_frame, "read_whole", lambda *a, **kw: reads.append(a[1]) or real(*a, **kw))
    versions = []
    for k in range(10):
        with open(src, "a") as fh:
            fh.write("".join(diag_line(i) for i in range(20 + 10 * k, 30 + 10 * k)))
        fset.poll(force=True)
        versions.append(cache.run_version(str(root), rid))
        frame = cache.load_run(str(root), rid)
        assert len(frame) == 30 + 10 * k
        cache.analyse_run(str(root), rid)
    for f in fset.followers.values():
        f.close()
    assert len(set(versions)) == 10
    n = len(reads)
    cache.load_run(str(root), rid, (), versions[-1])
    cache.load_run(str(root), rid, (), versions[-2])
    assert len(reads) == n, "the newest versions were dropped"
    cache.load_run(str(root), rid, (), versions[0])
    assert len(reads) == n + 1, "the oldest version was still cached"


def test_a_live_runs_older_trace_memos_are_let_go(tmp_path):
    """The memo of a run's traces (its columns, views that keep the frame's blocks alive) under ten keys a
    live run's commits give it: only the newest keys' memos stay, an old one is a new empty memo."""
    from regime_dash.follow.live_frame import read_whole
    from regime_dash.ui import cache

    store = RunStore(tmp_path / "store")
    rid = store.ingest(ROOT / "data" / "samples" / "diag.jsonl", name="live").run_id
    whole = read_whole(store, rid)
    keys, options = [], (("n_out", 300), ("smoothing", 0.0), ("x", "step"))
    fixed = tuple(kv for kv in options if kv[0] != "smoothing")
    for k in range(10):
        n = 200 + 50 * k
        frame = whole.iloc[:n]  # the run as it grows
        keys.append(f"root|live-run|()|0|{n - 1}|False|v{k}")
        assert cache._run_traces(keys[-1], frame, "live", "#123456", options)
    assert cache._trace_memo(keys[-1], "live", "#123456", fixed), "the newest memo was dropped"
    assert cache._trace_memo(keys[-2], "live", "#123456", fixed), "the memo a commit back was dropped"
    assert cache._trace_memo(keys[0], "live", "#123456", fixed) == {}, "the oldest memo was kept"
    assert cache._trace_memo(keys[5], "live", "#123456", fixed) == {}


def trimmed_rss(code: str) -> dict:
    """Run ``code`` (which sets ``before``, ``held`` and ``after`` in MB) in a fresh interpreter; its figures."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


RSS_SNIPPET = """
import json
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024
before = rss()
blocks = [bytearray(20_000) for _ in range(10_000)]  # 200 MB of 20 kB blocks, each touched
for i, b in enumerate(blocks):
    b[::4096] = b'x' * len(b[::4096])
kept = blocks[::50]  # a few live blocks spread through the heap: no arena can shrink from its top
del blocks
held = rss()
"""


def test_the_servers_freed_memory_goes_back_to_the_system():
    """What the redraws free stays in glibc's arenas (the server's RSS rose with nothing held);
    :func:`memory_trim.trim` hands it back, and the app keeps a thread doing so once a process."""
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("glibc's malloc_trim: Linux only")
    r = trimmed_rss(RSS_SNIPPET + """
from regime_dash.ui import memory_trim
assert memory_trim.trim()
print(json.dumps({"before": before, "held": held, "after": rss()}))
""")
    assert r["held"] - r["before"] > 150, f"the freed blocks were handed back without a trim: {r}"
    assert r["held"] - r["after"] > 120, f"the trim handed back {r['held'] - r['after']:.0f} MB only: {r}"


def test_big_blocks_freed_go_back_without_a_trim_once_the_allocator_is_tuned():
    """glibc raises its mmap threshold to the largest block freed, so the redraws' big blocks (a few MB,
    each a little bigger as a live run grows) came from the arenas and stayed there when freed;
    :func:`memory_trim.tune` fixes the threshold: the same blocks are unmapped as they are freed."""
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("glibc's mallopt: Linux only")
    code = """
import json, sys
from regime_dash.ui import memory_trim
tuned = memory_trim.tune() if sys.argv[1:] == ["tune"] else None
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024
big = bytearray(30_000_000); del big  # a 30 MB block freed (under glibc's 32 MB cap): its threshold rises past what follows
before = rss()
blocks, pins = [], []
for i in range(150):  # 150 MB of 1 MB blocks, a small live block after each
    blocks.append(bytearray(b'x') * 1_000_000)
    pins.append(bytearray(b'p') * 2000)
del blocks
print(json.dumps({"tuned": tuned, "before": before, "held": rss()}))
"""
    import subprocess

    def run(*args: str) -> dict:
        out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                             cwd=ROOT)
        assert out.returncode == 0, out.stderr[-2000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    untuned, tuned = run(), run("tune")
    if untuned["held"] - untuned["before"] < 120:
        # seen in whole-suite runs on a 2-core CI-class machine, never with the file alone: the child's glibc kept its
        # threshold low, so freed blocks went back untuned and the tuning has nothing to show here
        pytest.skip(f"glibc handed the 1 MB blocks back untuned in this environment: {untuned}")
    assert tuned["tuned"] is True
    assert tuned["held"] - tuned["before"] < 20, f"the tuned allocator kept the freed blocks: {tuned}"


def test_the_app_keeps_one_trimming_thread_a_process(monkeypatch):
    import ast
    import threading
    import time

    from regime_dash.ui import memory_trim

    monkeypatch.setattr(memory_trim, "TRIM_SECONDS", 0.02)
    memory_trim.keep_trimmed.clear()
    box = memory_trim.keep_trimmed()
    try:
        assert memory_trim.keep_trimmed() is box  # once a process
        deadline = time.monotonic() + 30
        while box["trims"] < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert box["trims"] >= 3 and box["thread"].is_alive() and box["tuned"] is True
        # an app run earlier in this process may have its thread (its cache since cleared): count, then ask again
        threads = [t for t in threading.enumerate() if t.name == memory_trim.THREAD_NAME]
        assert box["thread"] in threads
        assert memory_trim.keep_trimmed() is box
        assert [t for t in threading.enumerate() if t.name == memory_trim.THREAD_NAME] == threads
    finally:
        box["stop"].set()
        box["thread"].join(10)
        memory_trim.keep_trimmed.clear()
    main = next(n for n in ast.walk(ast.parse((ROOT / "regime_dash" / "ui" / "app_main.py").read_text()))
                if isinstance(n, ast.FunctionDef) and n.name == "main")
    assert "memory_trim.keep_trimmed()" in ast.unparse(main), "the app's run does not start the trimming thread"


def test_the_soak_growth_says_a_leak_from_caches_filling_up():
    from regime_dash.benchmarks.soak import LEVEL_SLOPE_MB_MIN, growth

    filling = [(t, 200 + min(t, 120) * 2.0) for t in range(0, 601, 10)]  # +240 MB, then flat
    r = growth(filling, 180)
    assert r["first_window_growth_mb"] == 240 and r["last_window_growth_mb"] == 0 and r["levelled_off"]
    assert r["last_window_mb_min"] == 0 and r["first_window_mb_min"] > 60
    leak = [(t, 200 + t * 0.8) for t in range(0, 601, 10)]  # the same MB every minute
    r = growth(leak, 180)
    assert r["first_window_growth_mb"] == r["last_window_growth_mb"] == 144 and not r["levelled_off"]
    assert r["first_window_mb_min"] == r["last_window_mb_min"] == 48
    quiet = [(t, 300 + (t % 20) * 0.5) for t in range(0, 601, 10)]  # a 5 MB sawtooth, no trend
    assert growth(quiet, 180)["levelled_off"]
    with pytest.raises(ValueError, match="two windows"):
        growth(filling[:5], 180)


def test_the_soak_growth_fails_a_series_still_rising_at_its_end():
    """What the old rule (the last window's growth under 25 MB or a fifth of the first's) passed."""
    from regime_dash.benchmarks.soak import LEVEL_SLOPE_MB_MIN, growth

    # caches filling (+60 MB in the first minutes), then a steady leak a little over the floor
    creep = [(t, 300 + min(t, 120) * 0.5 + t / 60 * (LEVEL_SLOPE_MB_MIN + 0.5)) for t in range(0, 1801, 5)]
    r = growth(creep, 300)
    assert not r["levelled_off"] and r["last_window_mb_min"] > LEVEL_SLOPE_MB_MIN
    # the soak the run caches alone gave: 338 -> 418 MB in 6 min, its last 2 min (+36) above its first (+23)
    rising = [(t, 338 + 23 * min(t, 120) / 120 + (21 * (t - 120) / 120 if t > 120 else 0)
               + (36 * (t - 240) / 120 - 21 * (t - 240) / 120 if t > 240 else 0)) for t in range(0, 361, 5)]
    r = growth(rising, 120)
    assert round(r["end_mb"]) == 418 and r["last_window_growth_mb"] == 36 and not r["levelled_off"]
    # a slow leak from the start, under the absolute floor but as steep at the end as at the start
    slow = [(t, 300 + t / 60 * 1.5) for t in range(0, 1801, 5)]
    r = growth(slow, 300)
    assert r["last_window_mb_min"] == 1.5 < LEVEL_SLOPE_MB_MIN and not r["levelled_off"]
    # and the same three level once flat after the caches fill: the rule is not "never pass"
    for series in (creep, rising, slow):
        knee = series[len(series) // 2][0]
        flat = [(t, mb if t <= knee else series[len(series) // 2][1]) for t, mb in series]
        assert growth(flat, series[-1][0] / 3 if series is rising else 300)["levelled_off"]


@pytest.mark.browser
@pytest.mark.slow  # a served app, two chromium tabs and a follower for a minute and a half
def test_a_short_soak_samples_the_real_server_rss(tmp_path):
    import subprocess
    import sys

    # in a process of its own: the suite's shared chromium runs Playwright's loop in this one
    code = ("import json, sys; from regime_dash.benchmarks.soak import measure; "
            "print(json.dumps(measure(1.5, rate=20, tabs=2, every=3, window_min=0.5, workdir=sys.argv[1])))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=600,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    mbs = [mb for _, mb in r["series"]]
    assert len(mbs) >= 20 and all(60 < mb < 4000 for mb in mbs), mbs  # a streamlit server's RSS, not zero
    assert r["series"][-1][0] >= 90 and r["tabs"] == 2 and r["run_id"].startswith("soak-")
    assert r["peak_mb"] == max(mbs) and r["samples"] == len(mbs)
