"""The follower's reading edge, planted for real: a file rewritten longer under a follower (live, and while the
follower was down), long lines (the one ``--max-line-mb`` limit, bounded excerpts, exact line numbers, a line
still being written keeps ``--until-idle`` waiting), a file that is not a diag, symbolic links, and a backlog's
memory against a whole-file ingest of the same file.
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from regime_dash.errors import IngestError, NotDiagError
from regime_dash.follow.follower import Follower, FollowSet, follow
from regime_dash.store.open import open_store
from regime_dash.store.run_store import RunStore
from test_follow import drive

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "data" / "samples" / "diag.jsonl"
LINES = SAMPLE.read_bytes().splitlines()
pytestmark = pytest.mark.timeout(240)


def diag_lines(a: int, b: int, step_offset: int = 0) -> bytes:
    """Lines ``a..b-1`` of the sample with their steps moved by ``step_offset`` (monotonic steps)."""
    out = []
    for i in range(a, b):
        raw = LINES[i % len(LINES)]
        cut = raw.index(b",")
        out.append(b'{"step":%d' % (i + step_offset) + raw[cut:] + b"\n")
    return b"".join(out)


def cli(*args: str, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "regime_dash", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=180, env=env, **kw)


def rejects_of(store_dir: Path) -> list[dict]:
    (path,) = store_dir.glob("run=*/_rejects.jsonl")
    return [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]


def stored(store_dir: Path) -> tuple[list[int], list[int]]:
    store = open_store(store_dir)
    (run,) = store.list_runs()
    table = store.load_table(run["run_id"])
    return table.column("_line").to_pylist(), table.column("step").to_pylist()


# ------------------------------------------------------------------------ 4. identity


def test_a_file_rewritten_longer_under_the_follower_starts_a_new_segment_and_loses_nothing(tmp_path):
    store, src = RunStore(tmp_path / "store"), tmp_path / "job.diag.jsonl"
    src.write_bytes(diag_lines(0, 200))
    f = Follower(store, src, "job", commit_every=0)
    drive(f, lambda: f.run.state.rows == 200, 60)
    new = tmp_path / "restarted.jsonl"
    new.write_bytes(diag_lines(0, 300, step_offset=1000))  # longer than what was read
    ino = src.stat().st_ino
    assert subprocess.run(["cp", str(new), str(src)]).returncode == 0
    assert src.stat().st_ino == ino  # cp wrote over the same file
    commits = drive(f, lambda: f.run.state.rows == 500, 60)
    assert [c.event for c in commits if c.event] == ["rewritten"]
    steps = store.load(f.run_id, columns=["step"])["step"].tolist()
    assert steps == list(range(200)) + list(range(1000, 1300))
    segs = store.meta(f.run_id)["follow"]["segments"]
    assert [(s["reason"], s["first_line"]) for s in segs] == [("start", 1), ("rewritten", 201)]
    assert f.run.state.rejected_count == 0  # no mangled fragment
    f.close()


def test_a_file_rewritten_while_the_follower_was_down_is_read_from_its_first_line(tmp_path):
    store, src = tmp_path / "store", tmp_path / "job.diag.jsonl"
    src.write_bytes(diag_lines(0, 150))
    args = ("ingest", str(src), "--follow", "--name", "job", "--store", str(store), "--until-idle", "1",
            "--commit-every", "0.2", "--store-format", "folder")  # its _meta.json's follow state is read below
    first = cli(*args)
    assert first.returncode == 0, first.stderr
    state = json.loads(next(store.glob("run=*/_meta.json")).read_text())["follow"]
    assert state["file"]["head_bytes"] == 4096 and state["file"]["inode"] == src.stat().st_ino
    with open(src, "r+b") as fh:  # the trainer restarted: the same file, truncated and written longer
        fh.truncate(0)
        fh.write(diag_lines(0, 260, step_offset=5000))
    second = cli(*args)
    assert second.returncode == 0, second.stderr
    assert "rewritten: new segment" in second.stdout
    lines, steps = stored(store)
    assert steps == list(range(150)) + list(range(5000, 5260)) and lines == list(range(1, 411))
    meta = json.loads(next(store.glob("run=*/_meta.json")).read_text())
    assert [(s["reason"], s["first_line"]) for s in meta["follow"]["segments"]] == [("start", 1), ("rewritten", 151)]
    assert meta["rejected_count"] == 0


# ------------------------------------------------------------------------ 5. long lines


WRITER = r"""
import sys, time
path, piece, pieces = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
head, tail = open(sys.argv[4], 'rb').read(), open(sys.argv[5], 'rb').read()
with open(path, 'ab', buffering=0) as fh:
    fh.write(head)
    for i in range(pieces):
        fh.write(b'x' * piece)
        time.sleep(0.15)  # a line written slowly, as a job that logs a huge value does
    fh.write(tail)
"""


def test_a_long_line_in_follow_is_rejected_as_whole_file_ingest_rejects_it(tmp_path):
    store, whole, src = tmp_path / "store", tmp_path / "whole", tmp_path / "job.diag.jsonl"
    (tmp_path / "head").write_bytes(diag_lines(0, 3))
    obj = diag_lines(3, 4).rstrip(b"\n")
    # junk then a valid object on one line over the limit; a line without a diag field; good lines after
    (tmp_path / "tail").write_bytes(obj + b"\n" + b'{"a": 1}\n' + diag_lines(4, 8))
    follower = subprocess.Popen([sys.executable, "-m", "regime_dash", "ingest", str(src), "--follow", "--name", "job",
                                 "--store", str(store), "--max-line-mb", "1", "--until-idle", "1.5",
                                 "--commit-every", "0.2", "--store-format", "folder"], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    writer = subprocess.run([sys.executable, "-c", WRITER, str(src), str(1 << 20), "14", str(tmp_path / "head"),
                             str(tmp_path / "tail")], timeout=60)
    assert writer.returncode == 0
    out, err = follower.communicate(timeout=120)
    assert follower.returncode == 0, err
    ref = cli("ingest", str(src), "--store", str(whole), "--max-line-mb", "1", "--store-format", "folder")  # _rejects.jsonl
    assert ref.returncode == 0, ref.stderr
    assert stored(store) == stored(whole)
    lines, steps = stored(store)
    assert lines == [1, 2, 3, 6, 7, 8, 9] and steps == [0, 1, 2, 4, 5, 6, 7]
    got, want = rejects_of(store), rejects_of(whole)
    assert [(r["line"], r["reason"], r["raw"]) for r in got] == [(r["line"], r["reason"], r["raw"]) for r in want]
    long = got[0]
    size = 14 * (1 << 20) + len(obj)
    assert long["line"] == 4 and long["reason"].startswith(f"line too long: {size:,} bytes, over the 1,048,576")
    assert long["raw"] == "x" * 256  # a bounded excerpt, never the line
    assert got[1]["line"] == 5 and "diag field" in got[1]["reason"]
    assert next(store.glob("run=*/_rejects.jsonl")).stat().st_size < 4096


# ------------------------------------------------------------------------ 7. not a diag


def test_following_a_file_that_is_not_a_diag_is_refused_as_whole_file_ingest_refuses_it(tmp_path):
    src = tmp_path / "passwd.jsonl"
    src.write_text("root:x:0:0:root:/root:/bin/bash\n" * 40 + '{"user": "x"}\n')
    ref = cli("ingest", str(src), "--store", str(tmp_path / "whole"))
    got = cli("ingest", str(src), "--follow", "--name", "job", "--store", str(tmp_path / "store"),
              "--until-idle", "1", "--commit-every", "0.2")
    assert ref.returncode == got.returncode == 2
    said = [ln for ln in got.stderr.splitlines() if ln.startswith("error:")]
    assert said == [ln for ln in ref.stderr.splitlines() if ln.startswith("error:")]
    assert "is not a diag file" in said[0] and "Traceback" not in got.stderr
    assert not RunStore(tmp_path / "store").list_runs()


def test_a_long_not_diag_file_is_refused_before_its_end_without_holding_its_lines(tmp_path):
    src = tmp_path / "log.jsonl"
    src.write_bytes(b"plain log text, not json\n" * 200_000)
    f = Follower(RunStore(tmp_path / "store"), src, "job", commit_every=0)
    with pytest.raises(NotDiagError, match="is not a diag file"):
        drive(f, lambda: False, 60)
    assert f.run.state.lines < 200_000 and len(f.run._held[0]) <= f.run.state.lines
    assert not f.run.exists


# ------------------------------------------------------------------------ 8. symlinks


def test_a_symlinked_path_is_refused_naming_its_target_unless_asked(tmp_path):
    real = tmp_path / "real.jsonl"
    real.write_bytes(diag_lines(0, 20))
    link = tmp_path / "job.jsonl"
    link.symlink_to(real)
    got = cli("ingest", str(link), "--follow", "--name", "job", "--store", str(tmp_path / "store"), "--until-idle", "1")
    assert got.returncode == 2 and "symbolic link" in got.stderr and str(real) in got.stderr
    assert not open_store(tmp_path / "store").list_runs()
    ok = cli("ingest", str(link), "--follow", "--follow-symlinks", "--name", "job", "--store", str(tmp_path / "s2"),
             "--until-idle", "1", "--commit-every", "0.2")
    assert ok.returncode == 0, ok.stderr
    assert stored(tmp_path / "s2")[1] == list(range(20))


def test_a_path_swapped_for_a_symlink_mid_follow_stops_with_nothing_of_the_target_stored(tmp_path):
    store, src = RunStore(tmp_path / "store"), tmp_path / "job.jsonl"
    src.write_bytes(diag_lines(0, 50))
    secret = tmp_path / "secret.jsonl"
    secret.write_bytes(diag_lines(0, 30, step_offset=9000) + b"root:x:0:0\n")
    fset = FollowSet(store, [src], "job", commit_every=0)
    fset.poll(force=True)
    with open(src, "ab") as fh:
        fh.write(diag_lines(50, 60))
    tmp = tmp_path / "swap"
    tmp.symlink_to(secret)
    os.replace(tmp, src)  # the path is now a link to another file
    why = follow(fset, until_idle=20, poll_every=0.05)
    assert "symbolic link" in why and str(secret) in why
    run_id = fset.followers[src].run_id
    assert store.load(run_id, columns=["step"])["step"].tolist() == list(range(60))
    assert store.meta(run_id)["rejected_count"] == 0


# ------------------------------------------------------------------------ 6. backlog memory

MEASURE = "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, capture_output=True); " \
          "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"


def peak_kb(*args: str) -> int:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", MEASURE, sys.executable, "-m", "regime_dash", *args], cwd=ROOT,
                         capture_output=True, text=True, timeout=200, env=env)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.split()[-1])


@pytest.mark.slow
def test_following_a_large_backlog_peaks_within_twice_a_whole_file_ingest(tmp_path):
    src = tmp_path / "big.diag.jsonl"
    with open(src, "wb") as fh:
        for a in range(0, 80_000, 10_000):
            fh.write(diag_lines(a, a + 10_000))
    whole = peak_kb("ingest", str(src), "--store", str(tmp_path / "whole"))
    followed = peak_kb("ingest", str(src), "--follow", "--name", "big", "--store", str(tmp_path / "store"),
                       "--until-idle", "1")
    assert stored(tmp_path / "store")[0] == list(range(1, 80_001))
    assert followed <= 2 * whole, (followed >> 10, whole >> 10)


def test_a_backlog_is_committed_a_bounded_piece_at_a_time_whatever_commit_every_says(tmp_path, monkeypatch):
    from regime_dash.follow import follower as fw

    monkeypatch.setattr(fw, "COMMIT_BYTES", 256 << 10)
    data = diag_lines(0, 2000)
    src = tmp_path / "job.diag.jsonl"
    src.write_bytes(data)
    sizes = [len(ln) for ln in data.splitlines(keepends=True)]
    f = Follower(RunStore(tmp_path / "store"), src, "job", commit_every=3600)  # never due: only the bytes cut
    commits = f.poll() + f.close()
    rows = [c.rows for c in commits if c.rows]
    assert sum(rows) == 2000 and len(rows) >= len(data) // (fw.COMMIT_BYTES + fw.MIN_READ)
    done = 0
    for n in rows:  # a read adds MIN_READ at most, after the line the last read ended inside
        assert sum(sizes[done:done + n]) <= fw.COMMIT_BYTES + fw.MIN_READ + max(sizes), rows
        done += n
    assert stored(tmp_path / "store") == (list(range(1, 2001)), list(range(2000)))


FOLLOW_IN_PROCESS = """
import runpy, sys
sys.argv = ['regime_dash', *sys.argv[1:]]
try:
    runpy.run_module('regime_dash', run_name='__main__')
except SystemExit as e:
    assert not e.code, e.code
print('numba loaded:', 'numba' in sys.modules)
"""


@pytest.mark.slow
def test_a_follower_loads_no_numba_and_judges_as_a_whole_file_check(tmp_path):
    from regime_dash.ingest import shapes

    if shapes.native() is None:
        pytest.skip("without the built-in scanner, ingest itself may load numba's")
    src = tmp_path / "job.diag.jsonl"
    src.write_bytes(diag_lines(0, 6000))  # past the rows where the re-derivation would compile its loop
    store = tmp_path / "store"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    got = subprocess.run([sys.executable, "-c", FOLLOW_IN_PROCESS, "ingest", str(src), "--follow", "--name", "job",
                          "--store", str(store), "--until-idle", "1", "--commit-every", "0.2"], cwd=ROOT,
                         capture_output=True, text=True, timeout=200, env=env)
    assert got.returncode == 0, got.stderr
    assert got.stdout.splitlines()[-1] == "numba loaded: False"
    followed = json.loads(next(store.glob("run=*/_meta.json")).read_text())["verdict"]
    whole = cli("check", "job", "--store", str(store), "--json")
    report = json.loads(whole.stdout)
    failing = {c["id"] for c in report["checks"] if c["status"] == "fail"}
    failing |= {f["id"] for f in report["findings"] if f["severity"] == "fail"}
    assert (followed["status"], followed["counts"]) == (report["status"], report["counts"])
    assert followed["failing"] == sorted(failing) and "rederive.variance" in failing  # the loop's checks ran


COMPACT_IN_PROCESS = """
import json, sys
from pathlib import Path
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
from regime_dash.store import append
run_dir, rows, cols = Path(sys.argv[1]), 10_000, 128
rng, tiers = np.random.default_rng(0), []
for k in range(append.COMPACT_FANOUT):  # a follow's parts, of one level, one merge's worth
    meta = {append.PART_KEY: json.dumps({"part": k}).encode(), append.LEVEL_KEY: b"0"}
    name = f"part-{k:08d}.parquet"
    pq.write_table(pa.table({f"c{j}": rng.random(rows) for j in range(cols)}).replace_schema_metadata(meta),
                   run_dir / name)
    tiers.append((name, 0, rows))

def mem(key):
    return next(int(ln.split()[1]) << 10 for ln in open('/proc/self/status') if ln.startswith(key))

open('/proc/self/clear_refs', 'w').write('5')  # the peak from here
before = mem('VmRSS')
after = append.compact_parts(run_dir, tiers)
print(json.dumps({"added": mem('VmHWM') - before, "tiers": after}))
"""


@pytest.mark.slow
def test_a_merge_of_a_follows_parts_holds_a_part_at_a_time_not_the_merge(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    got = subprocess.run([sys.executable, "-c", COMPACT_IN_PROCESS, str(tmp_path)], cwd=ROOT, capture_output=True,
                         text=True, timeout=200, env=env)
    assert got.returncode == 0, got.stderr
    out = json.loads(got.stdout)
    merged = 16 * 10_000 * 128 * 8  # the merged part's values: 164 MB
    assert out["tiers"] == [["part-00000000.parquet", 1, 160_000]]
    table = pq.read_table(tmp_path / "part-00000000.parquet")
    assert table.num_rows == 160_000 and json.loads(table.schema.metadata[b"regime_dash.follow.follower"]) == {
        "part": 15}  # the last part's follow state, as a resume reads it
    assert out["added"] < merged // 2, (out["added"] >> 20, merged >> 20)
