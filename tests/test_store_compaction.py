"""A followed run's small parts merged as it grows (regime_dash.store.append.compact_parts).

Covers: the part count stays at the log of the commits while every row stays, once, in file
order (pyarrow, DuckDB and the store read the same); a reader listing the run at every step of
a merge sees a prefix of the rows, never a gap or a row twice; a kill after the merged part is
complete is finished by the next follow's start, one before it leaves the parts as they were;
``rows_after`` returns exactly the rows past a line, across merged parts.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from regime_dash.store import append as store_append
from regime_dash.follow.follower import Follower
from regime_dash.store.run_store import RunStore
from regime_dash.store.append import LEVEL_KEY, rows_after

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "samples" / "diag.jsonl"
LINES = SAMPLE.read_bytes().splitlines(keepends=True)


class Killed(Exception):
    """Stands in for a kill -9 at a chosen point of a merge."""


def grow(f: Follower, src: Path, a: int, b: int, per: int) -> None:
    """Lines a..b-1 of the sample appended ``per`` at a time, each batch one commit."""
    for i in range(a, b, per):
        with open(src, "ab") as fh:
            fh.write(b"".join(LINES[i:min(b, i + per)]))
        f.poll(force=True)


def visible_steps(run_dir: Path) -> list[int]:
    """What a reader globbing ``*.parquet`` sees now, in name order."""
    out: list[int] = []
    for part in sorted(run_dir.glob("*.parquet")):
        out += pq.read_table(part, columns=["step"]).column("step").to_pylist()
    return out


@pytest.fixture
def fanout4(monkeypatch):
    monkeypatch.setattr(store_append, "COMPACT_FANOUT", 4)


@pytest.mark.slow  # hundreds of appends and merges: ~2.2 s of CPU
def test_parts_stay_few_and_every_row_stays_once(tmp_path, fanout4):
    store, src = RunStore(tmp_path / "store"), tmp_path / "job.diag.jsonl"
    f = Follower(store, src, "job", commit_every=0)
    grow(f, src, 0, 700, 10)  # 70 commits: one level-3 part (64 commits), one level-1 (4), two level-0
    parts = store.parts(f.run_id)
    levels = [int(pq.read_schema(p).metadata[LEVEL_KEY]) for p in parts]
    assert levels == [3, 1, 0, 0], levels
    assert [p.name for p in parts] == sorted(p.name for p in parts)
    assert store.load(f.run_id, columns=["step"])["step"].tolist() == list(range(700))
    assert visible_steps(f.run.dir) == list(range(700))  # file order kept in name order
    n = duckdb.sql(f"SELECT count(*), count(DISTINCT step) FROM read_parquet('{tmp_path}/store/run=*/*.parquet', "
                   "hive_partitioning=true, union_by_name=true)").fetchall()[0]
    assert n == (700, 700)
    assert store.meta(f.run_id)["rows"] == 700 and store.meta(f.run_id)["verdict"]["rows"] == 700
    # the follow goes on after a restart: numbering continues past the merged names
    f.close()
    g = Follower(store, src, "job", commit_every=0)
    grow(g, src, 700, 760, 10)
    assert store.load(g.run_id, columns=["step"])["step"].tolist() == list(range(760))
    assert len(store.parts(g.run_id)) < 12


def test_a_reader_during_a_merge_sees_a_prefix(tmp_path, fanout4, monkeypatch):
    store, src = RunStore(tmp_path / "store"), tmp_path / "job.diag.jsonl"
    f = Follower(store, src, "job", commit_every=0)
    grow(f, src, 0, 30, 10)  # three parts: the fourth commit merges
    seen: list[list[int]] = []
    unlink, replace = Path.unlink, os.replace

    def unlink_seen(self, *a, **kw):
        unlink(self, *a, **kw)
        seen.append(visible_steps(f.run.dir))

    def replace_seen(a, b):
        replace(a, b)
        seen.append(visible_steps(f.run.dir))

    monkeypatch.setattr(Path, "unlink", unlink_seen)
    monkeypatch.setattr(store_append.os, "replace", replace_seen)
    grow(f, src, 30, 40, 10)
    monkeypatch.undo()
    assert len(seen) >= 4  # the part's rename, three covered parts gone, the merged part in place
    for s in seen:
        assert s == list(range(len(s))), s  # a prefix: no gap, no row twice
    assert seen[-1] == list(range(40)) and len(store.parts(f.run_id)) == 1


@pytest.mark.parametrize("at", ["merge_complete", "merge_written"])
def test_a_kill_mid_merge_is_finished_or_undone_on_the_next_start(tmp_path, fanout4, monkeypatch, at):
    store, src = RunStore(tmp_path / "store"), tmp_path / "job.diag.jsonl"
    f = Follower(store, src, "job", commit_every=0)
    grow(f, src, 0, 30, 10)
    unlink, replace = Path.unlink, os.replace

    def unlink_dies(self, *a, **kw):
        if self.name.endswith(".parquet") and self.parent == f.run.dir:
            unlink(self, *a, **kw)  # one covered part gone, then the process dies
            raise Killed
        unlink(self, *a, **kw)

    def replace_dies(a, b):
        if str(a).endswith(".merge.tmp"):
            raise Killed  # the merged part written, not yet complete under its name
        replace(a, b)

    if at == "merge_complete":
        monkeypatch.setattr(Path, "unlink", unlink_dies)
    else:
        monkeypatch.setattr(store_append.os, "replace", replace_dies)
    with open(src, "ab") as fh:
        fh.write(b"".join(LINES[30:40]))
    with pytest.raises(Killed):
        f.poll(force=True)
    monkeypatch.undo()
    f.run.release()  # the death this stands for frees the run's claim (the kernel drops a dead process's flock)
    left = sorted(p.name for p in f.run.dir.iterdir() if ".merge" in p.name)
    assert left == (["part-00000000.parquet.merge"] if at == "merge_complete" else
                    ["part-00000000.parquet.merge.tmp"])
    seen = visible_steps(f.run.dir)
    assert seen == list(range(len(seen)))  # a prefix meanwhile
    g = Follower(store, src, "job", commit_every=0)  # the restart
    assert not [p for p in g.run.dir.iterdir() if ".merge" in p.name]
    grow(g, src, 40, 60, 10)
    assert store.load(g.run_id, columns=["step"])["step"].tolist() == list(range(60))
    assert sorted(store.load(g.run_id, columns=["_line"])["_line"].tolist()) == list(range(1, 61))


def test_rows_after_reads_exactly_the_rows_past_a_line(tmp_path, fanout4):
    store, src = RunStore(tmp_path / "store"), tmp_path / "job.diag.jsonl"
    f = Follower(store, src, "job", commit_every=0)
    grow(f, src, 0, 230, 10)  # merged and small parts both
    for line in (0, 5, 10, 159, 160, 161, 229):
        table, reach = rows_after(store, f.run_id, line)
        assert reach == 230
        assert table.column("_line").to_pylist() == list(range(line + 1, 231))
        assert table.column("step").to_pylist() == list(range(line, 230))
    assert rows_after(store, f.run_id, 230) == (None, 230)
    # a run ingested whole is read once, at line 0
    rid = store.ingest(SAMPLE, name="whole").run_id
    table, reach = rows_after(store, rid, 0)
    assert table.num_rows == len(LINES) and reach == len(LINES)
    assert rows_after(store, rid, reach) == (None, reach)
    assert json.loads(pq.read_schema(store.parts(f.run_id)[-1]).metadata[store_append.PART_KEY])["lines"] == 230
