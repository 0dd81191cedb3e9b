"""A followed run held by a reader and grown by each commit's rows (regime_dash.follow.live_frame).

Covers: after every commit the held frame equals the run read whole (the Explore data layer's
frame), while each refresh reads only the new rows (merged parts included); a refresh with no
commit reads nothing; a step going back (a restart from a checkpoint) and a new column read the
run whole again, once.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from regime_dash.store import append as store_append
from regime_dash.follow.follower import Follower
from regime_dash.follow.live_frame import LiveFrame, run_frame
from regime_dash.store.run_store import RunStore

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "samples" / "diag.jsonl"
LINES = SAMPLE.read_bytes().splitlines(keepends=True)


def append(f: Follower, src: Path, lines: list[bytes]) -> None:
    with open(src, "ab") as fh:
        fh.write(b"".join(lines))
    f.poll(force=True)


def whole(store: RunStore, run_id: str) -> pd.DataFrame:
    return run_frame(store.load(run_id))


def test_the_held_frame_grows_by_the_new_rows_and_equals_a_whole_read(tmp_path, monkeypatch):
    monkeypatch.setattr(store_append, "COMPACT_FANOUT", 4)  # merges happen between the refreshes
    store, src = RunStore(tmp_path / "store"), tmp_path / "job.diag.jsonl"
    f = Follower(store, src, "job", commit_every=0)
    append(f, src, LINES[:50])
    live = LiveFrame(store, f.run_id)
    assert live.refresh() == 50 and live.reloads == 1
    for a in range(50, 400, 25):
        append(f, src, LINES[a:a + 25])
        assert live.refresh() == 25  # the commit's rows, not the run
        pd.testing.assert_frame_equal(live.frame, whole(store, f.run_id))
    assert live.reloads == 1 and live.lines == 400
    assert live.refresh() == 0  # nothing committed since
    assert len(store.parts(f.run_id)) < 14  # 15 commits, merged


def test_a_step_going_back_or_a_new_column_reads_the_run_whole_once(tmp_path):
    store, src = RunStore(tmp_path / "store"), tmp_path / "job.diag.jsonl"
    f = Follower(store, src, "job", commit_every=0)
    append(f, src, LINES[:100])
    live = LiveFrame(store, f.run_id)
    live.refresh()
    append(f, src, LINES[50:60])  # a restart from step 50: rows sort in among the earlier ones
    live.refresh()
    assert live.reloads == 2
    pd.testing.assert_frame_equal(live.frame, whole(store, f.run_id))
    extra = [json.dumps({**json.loads(line), "new_field": 1.5}).encode() + b"\n" for line in LINES[100:110]]
    append(f, src, extra)
    live.refresh()
    assert live.reloads == 3 and "new_field" in live.frame.columns
    pd.testing.assert_frame_equal(live.frame, whole(store, f.run_id))
    append(f, src, LINES[110:120])
    assert live.refresh() == 10 and live.reloads == 3
    pd.testing.assert_frame_equal(live.frame, whole(store, f.run_id))


def test_an_unknown_run_is_a_store_error(tmp_path):
    from regime_dash.errors import StoreError

    store = RunStore(tmp_path / "store")
    store.ingest(SAMPLE, name="x")
    with pytest.raises(StoreError, match="no run"):
        LiveFrame(store, "nope").refresh()


def test_the_content_version_moves_with_each_commit_and_a_whole_read_holds_its_rows(tmp_path):
    from regime_dash.follow.live_frame import read_whole
    from regime_dash.store.labels import tag

    store, src = RunStore(tmp_path / "store"), tmp_path / "job.diag.jsonl"
    f = Follower(store, src, "job", commit_every=0)
    append(f, src, LINES[:50])
    first = store.content_version(f.run_id)
    assert len(read_whole(store, f.run_id)) == 50
    tag(store, f.run_id, ["tagged"])  # a label is not the run's rows: the version stays
    assert store.content_version(f.run_id) == first
    append(f, src, LINES[50:80])
    assert store.content_version(f.run_id) != first
    assert int(read_whole(store, f.run_id)["step"].max()) == 79
