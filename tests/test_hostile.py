"""Hostile uploads cannot take the server down, and every bad input gets a clear answer.

Memory: a gzip bomb (a few MB expanding to hundreds of MB with no line break) is
ingested through the CLI and through the Runs page (AppTest drives the real page in a
child process), alone and both at once; the peak RSS of each child comes from the
kernel (``os.wait4``). The figures are written to ``hostile.json`` among the session's artifacts.
"""
from __future__ import annotations

import gzip
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from regime_dash.errors import IngestError
from regime_dash.store.open import open_store
from regime_dash.store.run_store import RunStore

from hostile import (
    REPO,
    RSS_BOUND,
    app_upload,
    child_env,
    cli,
    finish_measured,
    good_lines,
    record_figure,
    run_measured,
    start_measured,
    write_bomb,
)

#: Expanded size of the test bomb: large enough that holding the line would show (the
#: peak over a small ingest stays far below it), small enough for CI (~10 s a pass).
BOMB_MB = 384
SAMPLE = REPO / "data" / "samples" / "diag.jsonl"


record = record_figure


def mb(n: int) -> float:
    return round(n / 2**20, 1)


@pytest.fixture(scope="module")
def bomb(tmp_path_factory) -> Path:
    return write_bomb(tmp_path_factory.mktemp("bomb") / "bomb.diag.jsonl.gz", BOMB_MB)


@pytest.fixture(scope="module")
def small_rss(tmp_path_factory) -> int:
    """Peak RSS of the CLI ingesting the 1,200-line sample with one junk line: imports plus
    a small ingest. The junk line takes the line-by-line reading, which loads what every
    hostile input here loads (a clean file's ingest loads no pandas: ~48 MB less)."""
    work = tmp_path_factory.mktemp("small")
    sample = work / "sample.diag.jsonl"
    sample.write_bytes(SAMPLE.read_bytes() + b"x\n")
    rc, _out, err, rss = run_measured(cli("ingest", str(sample), "--store", str(work / "store")))
    assert rc == 0, err
    return rss


# ------------------------------------------------------------------------ gzip bombs


@pytest.mark.slow
def test_gzip_bomb_through_the_cli_stays_bounded(bomb, small_rss, tmp_path):
    rc, out, err, rss = run_measured(cli("ingest", str(bomb), "--store", str(tmp_path / "s"), "--json"))
    assert rc == 0 and "Traceback" not in err, err
    (res,) = json.loads(out)
    assert res["rows"] == 100 and res["rejected_count"] == 1
    (rej,) = res["rejected"]
    assert rej["line"] == 51 and rej["reason"].startswith(f"line too long: {BOMB_MB << 20:,} bytes")
    record("cli_bomb", {"expanded_mb": BOMB_MB, "peak_rss_mb": mb(rss), "small_file_peak_rss_mb": mb(small_rss)})
    assert rss < RSS_BOUND
    # the 384 MB line is never held: the bomb costs at most the 64 MB line limit and chunks
    assert rss - small_rss < (BOMB_MB << 20) // 2, (mb(rss), mb(small_rss))


@pytest.mark.slow
def test_gzip_bomb_through_the_app_upload_stays_bounded(bomb, small_rss, tmp_path):
    rc, out, err, rss = run_measured(app_upload(tmp_path / "s", bomb), cwd=REPO)
    assert rc == 0, err
    assert "EXC []" in out and "ERRORS []" in out, out
    from regime_dash.text import markdown_literal

    assert repr(f"{markdown_literal(bomb.name)}: 100 rows, 1 rejected")[1:-1] in out, out  # the name as text
    record("app_bomb", {"expanded_mb": BOMB_MB, "peak_rss_mb": mb(rss)})
    assert rss < RSS_BOUND


def test_the_upload_probe_stores_a_file_through_the_runs_page(tmp_path, monkeypatch, capsys):
    """The probe the bomb tests run as a child, here in this process on a small file."""
    from regime_dash.ui import upload_probe

    monkeypatch.setenv("REGIME_DASH_STORE", "")  # the probe points it at its store: put back after
    assert upload_probe.main([str(tmp_path / "store"), str(SAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "EXC []" in out and "ERRORS []" in out, out
    assert [r["rows"] for r in open_store(tmp_path / "store").list_runs()] == [1200]


@pytest.mark.slow
def test_gzip_bomb_cli_and_app_at_once_into_one_store(bomb, tmp_path):
    store = tmp_path / "s"
    a = start_measured(cli("ingest", str(bomb), "--store", str(store), "--json"))
    b = start_measured(app_upload(store, bomb), cwd=REPO)
    rc_a, out_a, err_a, rss_a = finish_measured(*a)
    rc_b, out_b, err_b, rss_b = finish_measured(*b)
    assert rc_a == 0 and rc_b == 0, (err_a, err_b)
    assert "EXC []" in out_b and "ERRORS []" in out_b
    record("cli_and_app_at_once", {"cli_peak_rss_mb": mb(rss_a), "app_peak_rss_mb": mb(rss_b)})
    assert rss_a < RSS_BOUND and rss_b < RSS_BOUND
    assert len(open_store(store).list_runs()) == 1  # same bytes, one run


@pytest.mark.slow
def test_a_flood_of_junk_lines_stays_bounded(small_rss, tmp_path):
    """A million one-byte junk lines: chunks are capped at 65,536 lines, so the rejects of
    one chunk never cost more than a few MB of objects (one 2 MB chunk of them used to
    cost hundreds)."""
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b"x\n" * 1_000_000 + good_lines(1))
    rc, out, err, rss = run_measured(cli("ingest", str(junk), "--store", str(tmp_path / "s"), "--json"))
    assert rc == 0, err
    (res,) = json.loads(out)
    assert res["rows"] == 1 and res["rejected_count"] == 1_000_000
    assert res["rejected"][0] == {"line": 1, "reason": "not JSON: Expecting value at column 1"}
    record("junk_flood", {"lines": 1_000_000, "peak_rss_mb": mb(rss)})
    assert rss - small_rss < 100 << 20, (mb(rss), mb(small_rss))


# ------------------------------------------------------------ no exception escapes


def test_numbers_outside_float64_through_the_cli(tmp_path):
    f = tmp_path / "big.jsonl"
    f.write_bytes(b'{"step":0,"x":' + b"9" * 400 + b"}\n" + good_lines(3000, start=1)
                  + b'{"step":5000,"x":1e400}\n')
    rc, out, err, _ = run_measured(cli("ingest", str(f), "--store", str(tmp_path / "s"), "--json"))
    assert rc == 0 and "Traceback" not in err, err
    (res,) = json.loads(out)
    assert res["rows"] == 3000 and [r["line"] for r in res["rejected"]] == [1, 3002]
    assert all(r["reason"].startswith("number out of float64 range") for r in res["rejected"])
    df = open_store(tmp_path / "s").load(res["run_id"])
    sig = df["risk_stack.popart.sigma"].to_numpy()
    assert np.isfinite(sig).all()  # never a silent inf


def _limit_file_size() -> None:  # runs in the child: a write past 1 MB fails with EFBIG
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))


def test_a_failed_write_leaves_the_store_as_it_was_and_says_why(tmp_path):
    from regime_dash.benchmarks.ingest import make_diag_file

    store = RunStore(tmp_path / "s")
    first = store.ingest(SAMPLE)
    before = {p.name: p.read_bytes() for p in store.root.iterdir() if p.is_file()}  # the lock, the store's schema
    big = tmp_path / "big.jsonl"
    make_diag_file(big, 8, seed=3)
    rc, out, err, _ = run_measured(cli("ingest", str(big), "--store", str(store.root)),
                                   preexec_fn=_limit_file_size)
    assert rc == 2 and "Traceback" not in err, err
    (line,) = err.strip().splitlines()  # one line
    assert line.startswith(f"error: cannot store the run in {str(store.root)!r}: ")
    assert "File too large (EFBIG)" in line
    assert "the run needs about" in line and "MB free there" in line and "unchanged" in line
    assert [r["run_id"] for r in store.list_runs()] == [first.run_id]
    assert len(store.load(first.run_id)) == 1200
    staging = store.staging_dir()
    assert not list(staging.iterdir()) and sorted(p.name for p in store.root.iterdir()) == \
        sorted([*before, f"run={first.run_id}"])
    assert {p.name: p.read_bytes() for p in store.root.iterdir() if p.is_file()} == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through file permissions (CI runs as "
                    "root); test_a_failed_write_leaves_the_store_as_it_was_and_says_why covers a "
                    "refused write")
def test_a_read_only_store_is_refused_in_one_line(tmp_path):
    store = RunStore(tmp_path / "s")
    first = store.ingest(SAMPLE)
    os.chmod(store.root, 0o555)
    try:
        (tmp_path / "x.jsonl").write_bytes(good_lines(10))
        rc, out, err, _ = run_measured(cli("ingest", str(tmp_path / "x.jsonl"), "--store", str(store.root)))
    finally:
        os.chmod(store.root, 0o755)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "Permission denied" in err
    assert [r["run_id"] for r in store.list_runs()] == [first.run_id]


def _no_root_override() -> list[str]:
    """A command prefix under which file permissions hold, root or not (root without
    CAP_DAC_OVERRIDE: CI runs as root)."""
    if os.geteuid() != 0:
        return []
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]


@pytest.mark.skipif(os.geteuid() == 0 and not shutil.which("setpriv"), reason="root without setpriv "
                    "writes through file permissions")
def test_rm_on_a_read_only_store_is_refused_in_one_line(tmp_path):
    store = RunStore(tmp_path / "s")
    first = store.ingest(SAMPLE)
    store.staging_dir()
    os.chmod(store.root, 0o555)
    try:
        out = subprocess.run([*_no_root_override(), *cli("rm", first.run_id, "--store", str(store.root))],
                             capture_output=True, text=True, env=child_env(), cwd=REPO, timeout=120)
    finally:
        os.chmod(store.root, 0o755)
    assert out.returncode == 2, out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("error: cannot delete run") and "Permission denied" in line, line
    assert [r["run_id"] for r in store.list_runs()] == [first.run_id]


# ------------------------------------------------------------------- the Runs page


def test_a_failed_upload_is_reported_once_and_the_others_store(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("REGIME_DASH_STORE", str(tmp_path / "store"))
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=300).run()
    huge = b'{"step":0,"x":' + b"9" * 400 + b"}\n" + good_lines(20, start=1)
    at.file_uploader(key="runs.upload").set_value([
        ("junk.jsonl", b"\x00garbage\nnot json\n", "application/json"),
        ("huge.jsonl", huge, "application/json"),
        ("good.jsonl", good_lines(30, start=100), "application/json"),
    ]).run()
    assert not at.exception
    (err,) = [e.value for e in at.error]
    assert err.startswith(r"junk\.jsonl: not ingested") and "What to do:" in err  # the name as text
    assert "/" not in err.split("What to do:")[0]  # no server path in the message
    details = [c.value for c in at.code]
    assert details and not any(str(tmp_path) in d or str(REPO) in d for d in details)
    runs = open_store(tmp_path / "store").list_runs()
    assert sorted(r["name"] for r in runs) == ["good", "huge"]
    # a rerun does not retry the failed file, and shows its error once
    at.run()
    assert len(at.error) == 1 and len(open_store(tmp_path / "store").list_runs()) == 2


# ----------------------------------------------------- readers and killed ingests


_SLOW_INGEST = textwrap.dedent("""
    import sys, time
    from regime_dash.ingest import pipeline as ingest  # where iter_batches looks them up
    from regime_dash.store.run_store import RunStore
    real = ingest.parse_chunk
    def slow(*a, **k):
        time.sleep(0.02)  # stretch the ingest so kills land at many points of it
        return real(*a, **k)
    ingest.parse_chunk = slow
    RunStore(sys.argv[1], chunk_bytes=1 << 18).ingest(sys.argv[2])
""")


def _counts(root: Path) -> tuple[int, int, int]:
    """Rows of the whole store through DuckDB's recursive glob, the README's pattern and
    pyarrow.dataset, read one after the other (none may fail on a half-written file)."""
    glob = duckdb.sql(f"SELECT count(*) FROM read_parquet('{root}/**/*.parquet', "
                      "hive_partitioning=true, union_by_name=true)").fetchall()[0][0]
    readme = duckdb.sql(f"SELECT count(*) FROM read_parquet('{root}/run=*/*.parquet', "
                        "hive_partitioning=true, union_by_name=true)").fetchall()[0][0]
    arrow = ds.dataset(str(root), format="parquet", partitioning="hive").count_rows()
    return glob, readme, arrow


def _read_everywhere(root: Path) -> int:
    """The store's rows, read three ways that must agree: for a store no ingest is writing."""
    glob, readme, arrow = _counts(root)
    assert glob == readme == arrow
    return glob


@pytest.mark.slow
def test_readers_work_during_an_ingest_and_after_kill_9_at_random_points(tmp_path):
    from regime_dash.benchmarks.ingest import make_diag_file

    root = tmp_path / "store"
    store = RunStore(root)
    store.ingest(SAMPLE)
    src = tmp_path / "big.jsonl"
    make_diag_file(src, 10, seed=5)
    rng = random.Random(14)
    reads = 0
    for _ in range(4):
        proc = subprocess.Popen([sys.executable, "-c", _SLOW_INGEST, str(root), str(src)], env=child_env())
        deadline = time.monotonic() + rng.uniform(0.3, 2.5)
        try:
            while time.monotonic() < deadline and proc.poll() is None:
                # the live ingest may commit between two of the reads, so each reader sees
                # the store either before or after that commit, never a part of it
                before = sum(r["rows"] for r in store.list_runs())
                counts = _counts(root)
                after = sum(r["rows"] for r in store.list_runs())
                assert set(counts) <= {before, after}, (counts, before, after)
                reads += 1
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        assert _read_everywhere(root) == sum(r["rows"] for r in store.list_runs())
        for r in store.list_runs():  # whatever landed is whole
            assert len(store.load(r["run_id"])) == r["rows"]
    assert reads > 0
    res = store.ingest(src)  # the dead ingests' leftovers are cleared
    assert not list(store.staging_dir().glob("ingest-*"))
    assert _read_everywhere(root) == 1200 + res.rows


# ------------------------------------------------------ one type per column, store-wide


def _clean_and_messy(tmp_path: Path) -> tuple[Path, Path]:
    lines = [json.loads(x) for x in good_lines(3000).splitlines()]
    for i, obj in enumerate(lines):
        obj["fold"] = i // 1000
        obj["extra"] = {"count": i}
    clean = tmp_path / "clean.jsonl"
    clean.write_text("".join(json.dumps(o) + "\n" for o in lines))
    lines[1500]["fold"] = "1"  # one text fold among integers: the same value
    messy = tmp_path / "messy.jsonl"
    messy.write_text("".join(json.dumps(o) + "\n" for o in lines))
    return clean, messy


@pytest.mark.slow  # CLI subprocesses: ~1.9 s of CPU
def test_a_text_fold_does_not_retype_the_run_and_diff_sees_no_change(tmp_path):
    clean, messy = _clean_and_messy(tmp_path)
    store = RunStore(tmp_path / "s")
    a = store.ingest(clean, name="clean")
    b = store.ingest(messy, name="messy")
    assert b.coerced == {"fold": {"string": 1}} and b.aside_count == 0
    assert store.meta(b.run_id)["columns"]["fold"] == "int64"
    for args in (["clean", "messy", "--store", str(store.root)], [str(clean), str(messy)]):
        rc, out, err, _ = run_measured(cli("diff", *args, "--json"))
        assert rc == 0, (out, err)
        doc = json.loads(out)
        assert doc["identical"] and doc["fields"] == []
    assert a.rows == b.rows == 3000


def test_store_of_mixed_runs_reads_as_one_typed_table(tmp_path):
    clean, messy = _clean_and_messy(tmp_path)
    store = RunStore(tmp_path / "s")
    store.ingest(SAMPLE)
    store.ingest(clean)
    store.ingest(messy)
    # an unknown field typed int64 by the first run that has it; text in a later run
    later = [{"step": i, "extra": {"count": "n/a" if i == 3 else str(i)}, "fold": "2"} for i in range(10)]
    res = store.ingest(("".join(json.dumps(o) + "\n" for o in later)).encode(), name="later")
    assert res.aside == [{"line": 4, "field": "extra.count", "value": '"n/a"', "type": "int64"}]
    schemas = [pq.read_schema(f) for f in sorted(store.root.glob("run=*/*.parquet"))]
    unified = pa.unify_schemas(schemas)  # default promotion: fails on any type conflict
    for name, typ in [("step", pa.int64()), ("fold", pa.int64()), ("phase", pa.string()),
                      ("extra.count", pa.int64()), ("risk_stack.popart.sigma", pa.float64()),
                      ("risk_stack.positions.flat_count", pa.int64())]:
        assert unified.field(name).type == typ, name
    rel = (f"read_parquet('{store.root}/**/*.parquet', hive_partitioning=true, "
           "union_by_name=true)")
    types = {r[0]: r[1] for r in duckdb.sql(f"DESCRIBE SELECT * FROM {rel}").fetchall()}
    assert types["fold"] == "BIGINT" and types["step"] == "BIGINT" and types["extra.count"] == "BIGINT"
    assert types["risk_stack.popart.sigma"] == "DOUBLE"
    n = duckdb.sql(f"SELECT count(*), sum(fold) FROM {rel}").fetchall()[0]
    assert n[0] == 1200 + 3000 + 3000 + 10
    table = ds.dataset(str(store.root), format="parquet", partitioning="hive", schema=unified).to_table()
    assert table.num_rows == n[0] and table.schema.field("fold").type == pa.int64()


def _spark_reason() -> str | None:
    if shutil.which("java") is None:
        return "Spark needs Java, and there is no java on PATH"
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed (it is not a test requirement: a 300 MB download)"
    return None


@pytest.mark.slow
@pytest.mark.skipif(_spark_reason() is not None, reason=str(_spark_reason()))
def test_spark_merge_schema_reads_the_mixed_store(tmp_path):
    from pyspark.sql import SparkSession

    clean, messy = _clean_and_messy(tmp_path)
    store = RunStore(tmp_path / "s")
    for src in (SAMPLE, clean, messy):
        store.ingest(src)
    later = [{"step": i, "extra": {"count": "n/a" if i == 3 else str(i)}, "fold": "2"} for i in range(10)]
    store.ingest(("".join(json.dumps(o) + "\n" for o in later)).encode(), name="later")
    spark = SparkSession.builder.master("local[1]").appName("regime-dash").getOrCreate()
    try:
        df = spark.read.option("mergeSchema", "true").parquet(str(store.root))
        assert df.count() == 7210
        types = dict(df.dtypes)
        assert types["fold"] == types["step"] == types["extra.count"] == "bigint"
        assert types["risk_stack.popart.sigma"] == "double" and types["phase"] == "string"
    finally:
        spark.stop()


# ----------------------------------------------------------------- run addressing


@pytest.mark.slow  # a dozen CLI subprocesses: about 10 s
def test_check_diff_rm_accept_the_ingest_name_and_report_missing_files(tmp_path):
    s = str(tmp_path / "s")
    gz = tmp_path / "run.diag.jsonl.gz"
    gz.write_bytes(gzip.compress(SAMPLE.read_bytes()))
    assert run_measured(cli("ingest", str(gz), "--name", "fold1", "--store", s))[0] == 0
    rc, out, err, _ = run_measured(cli("check", "fold1", "--json", "--store", s))
    assert rc in (0, 1) and json.loads(out)["source"]["run_id"].startswith("fold1-"), err
    # the same name again, other bytes: ambiguous, and the ids are listed
    other = tmp_path / "other.jsonl"
    other.write_bytes(good_lines(10))
    assert run_measured(cli("ingest", str(other), "--name", "fold1", "--store", s))[0] == 0
    ids = sorted(r["run_id"] for r in open_store(s).list_runs())
    rc, out, err, _ = run_measured(cli("check", "fold1", "--store", s))
    assert rc == 2 and "ambiguous" in err and all(i in err for i in ids)
    rc, out, err, _ = run_measured(cli("check", ids[0], "--store", s))  # the full id always works
    assert rc in (0, 1), err
    rc, out, err, _ = run_measured(cli("diff", "before.jsonl", "after.jsonl", "--store", s))
    assert rc == 2 and "no such file: 'before.jsonl'" in err
    rc, out, err, _ = run_measured(cli("check", "/etc/hostname", "--store", s))
    assert rc == 2 and "is not a diag file" in err
    rc, out, err, _ = run_measured(cli("rm", "fold1", "--store", s))
    assert rc == 2 and "ambiguous" in err
    rc, out, err, _ = run_measured(cli("rm", ids[1], ids[0], "--store", s))
    assert rc == 0 and open_store(s).list_runs() == []


# ------------------------------------------------------------- the hostile-input suite

from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from diag_lines import bad_lines, check_against_model  # noqa: E402
from diag_lines import good_lines as good_line  # noqa: E402

#: The line limit of the suite: small, so "bombs" (long runs of zeros or padding) and
#: long lines cost little; the reader's skipping path is the same at any limit.
MAX_LINE = 16 << 10

hostile_line = st.one_of(
    good_line(), good_line(), bad_lines(),
    st.integers(310, 600).map(lambda n: b'{"step": 1, "x": ' + b"9" * n + b"}"),  # past float64
    st.sampled_from([b'{"x": 1e400}', b'{"x": -1E+999}', b'{"x": 2.5e-400}', b'{"x": NaN}',
                     b'{"x": -Infinity}', b'{"x": Inf}', b'{"x": -NaN}', b'{"x": 1e308}']),
    st.binary(max_size=40),  # junk (its own CR/LF bytes make more lines)
    st.sampled_from([b'\xef\xbb\xbf{"a": 1}', b'{"a": "\xff"}', b"\xff\xfe\x00{", b'{"\xc3": 1}']),
    st.integers(2, 40).map(lambda d: b'{"a":' * d + b"1" + b"}" * d),  # nested: flattened
    st.integers(2500, 3000).map(lambda d: b'{"a":' * d + b"1" + b"}" * d),  # too deep: rejected
    st.sampled_from([b'{"fold": "1"}', b'{"fold": 1.5}', b'{"step": "x"}', b'{"step": 7.0}',
                     b'{"phase": 3}', b'{"x": [1, "a"]}', b'{"x": {"y": 1}}', b'{"x": "1"}',
                     b'{"risk_stack": {"popart": {"sigma": "n/a"}}}',
                     b'{"risk_stack": {"regime": {"dead_zone": {"flag": true}}}}']),  # type changes
    st.sampled_from([b'{"a": 1, "a": "b"}', b'{"a": {"b": 1}, "a": 2}', b'{"x": 1, "x": [2]}']),
    st.integers(MAX_LINE + 1, 3 * MAX_LINE).map(lambda n: b'{"pad": "' + b"x" * n + b'"}'),
    st.integers(MAX_LINE + 1, 8 * MAX_LINE).map(bytes),  # a run of zeros, no line break: a bomb
)


@st.composite
def hostile_files(draw) -> bytes:
    """Good lines mixed with everything hostile, each line ended by LF, CRLF or a lone CR."""
    parts = draw(st.lists(hostile_line, max_size=30))
    eols = draw(st.lists(st.sampled_from([b"\n", b"\r\n", b"\r"]), min_size=len(parts),
                         max_size=len(parts)))
    data = b"".join(p + e for p, e in zip(parts, eols))
    if data and draw(st.booleans()):
        data = data[:-1]  # no final line break
    return data


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # resets VmHWM, the peak RSS (Linux)
        return True
    except OSError:
        return False


def _peak_rss(field: str = "VmHWM:") -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    return 0


_SUITE = {"inputs": 0, "lines": 0, "rows": 0, "rejects": 0, "aside": 0, "gzip": 0, "max_rss_mb": 0.0}


@pytest.mark.slow  # 80 hostile files, some gzip: about 6 s
@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.large_base_example])
@given(data=hostile_files(), gz=st.booleans(), chunk=st.sampled_from([7, 64, 4096, 1 << 20]),
       workers=st.sampled_from([1, 2]))
# plain text that merely starts with gzip's magic bytes: read as lines, not "corrupt gzip"
@example(data=b"\x1f\x8b\n{}\n", gz=False, chunk=7, workers=1)
@example(data=b"\x1f\x8b\n", gz=False, chunk=7, workers=1)
@example(data=b"\x1f\x8b\x08\x00{}\n", gz=False, chunk=7, workers=1)
def test_hostile_suite(data, gz, chunk, workers):
    """Rows plus rejects equal the non-blank lines, every good line's values survive
    (stored, or set aside exactly), and the peak RSS stays under the bound."""
    from regime_dash.ingest import parse

    if not gz and len(data) >= 4 and data[:3] == b"\x1f\x8b\x08" and not data[3] & 0xE0:
        # a whole gzip member header, then no gzip: there are no lines to reject, so
        # the file is refused as corrupt gzip, with our error and never a traceback
        with pytest.raises(IngestError, match="gzip"):
            parse(data, chunk_bytes=chunk, workers=workers, max_line_bytes=MAX_LINE)
        return
    measured = _reset_peak_rss()
    before = _peak_rss("VmRSS:") if measured else 0  # the test process's own RSS (the suite's imports, late in a run)
    table, rep = parse(gzip.compress(data) if gz else data, chunk_bytes=chunk, workers=workers,
                       max_line_bytes=MAX_LINE)
    peak = _peak_rss() - before if measured else 0  # what the parse of this input added at its peak
    check_against_model(data, table, rep, MAX_LINE)
    long = [r for r in rep.rejected if r.reason.startswith("line too long")]
    assert all(f"over the {MAX_LINE:,}-byte limit" in r.reason for r in long)
    assert peak < RSS_BOUND // 4, f"parsing {len(data):,} hostile bytes added {peak >> 20} MB at its peak"
    _SUITE.update(inputs=_SUITE["inputs"] + 1, lines=_SUITE["lines"] + rep.lines,
                  rows=_SUITE["rows"] + rep.rows, rejects=_SUITE["rejects"] + rep.rejected_count,
                  aside=_SUITE["aside"] + rep.aside_count, gzip=_SUITE["gzip"] + gz,
                  max_rss_mb=max(_SUITE["max_rss_mb"], mb(peak)))
    record("hostile_suite", _SUITE)
