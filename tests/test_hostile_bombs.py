"""Memory and time bombs: a stream ``.npz`` that inflates to gigabytes, an ``isv_slots.rs``
with huge slot indices, a diag file with tens of thousands of keys. Each is refused (or
ingested) with a clear message, and the peak RSS of the child process that meets it stays
under the 1 GB bound (``os.wait4``: the kernel's figure for that process)."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from regime_dash.errors import StreamError

from hostile import REPO, RSS_BOUND, cli, record_figure, run_measured, write_npz_bomb

SAMPLE_STREAM = REPO / "data" / "samples" / "recorded_stream.npz"


def _load_child(path: Path) -> list[str]:
    return [sys.executable, "-c", "import sys; from regime_dash.core.streams import load\n"
            "from regime_dash.errors import StreamError\n"
            "try:\n    load(sys.argv[1])\nexcept StreamError as e:\n    print('refused:', e); sys.exit(2)\n",
            str(path)]


@pytest.mark.slow  # deflates 3 GiB of zeros into a 14 MB file: a few seconds
def test_an_npz_bomb_of_unknown_members_is_refused_before_it_inflates(tmp_path):
    bomb = write_npz_bomb(tmp_path / "bomb.npz", {"junk.npy": ((3 << 28,), "<f4"), "rewards.npy": ((10, 2), "<f4")})
    t0 = time.perf_counter()
    rc, out, err, rss = run_measured(_load_child(bomb))
    record_figure("npz_bomb", {"file_mb": round(bomb.stat().st_size / 1e6, 1), "inflates_gib": (3 << 28) * 4 / 2**30,
                               "peak_rss_mb": round(rss / 1e6, 1), "seconds": round(time.perf_counter() - t0, 2)})
    assert rc == 2, err
    assert "unknown stream field(s) ['junk']" in out
    assert rss < RSS_BOUND, rss


def test_an_npz_whose_headers_declare_gigabytes_is_refused_from_the_headers(tmp_path):
    from regime_dash.core.streams import MAX_STREAM_BYTES, load

    bomb = write_npz_bomb(tmp_path / "big.npz", {"rewards.npy": ((1 << 26, 64), "<f4"),
                                                   "lots.npy": ((1 << 26, 64), "<i4")}, fill_mb=1)
    with pytest.raises(StreamError, match="over the .*-byte limit") as e:
        load(bomb)
    assert e.value.value > MAX_STREAM_BYTES
    rc, out, err, rss = run_measured(_load_child(bomb))
    assert rc == 2 and "limit" in out
    assert rss < RSS_BOUND


@pytest.mark.parametrize("members, match", [
    ({"rewards.npy": ((10, 2, 3), "<f4")}, "3 dimension"),
    ({"rewards.npy": ((10, 2), "|O")}, "not a number"),
    ({"rewards.npy": ((10, 2), "<f4"), "lots.npy": ((11, 2), "<i4")}, "disagree on the step count"),
])
def test_an_npz_with_bad_headers_names_the_field(tmp_path, members, match):
    from regime_dash.core.streams import load

    path = write_npz_bomb(tmp_path / "bad.npz", members)
    with pytest.raises(StreamError, match=match):
        load(path)


def test_an_npz_whose_data_is_shorter_than_its_header_says(tmp_path):
    from regime_dash.core.streams import load

    path = write_npz_bomb(tmp_path / "short.npz", {"rewards.npy": ((1 << 20, 64), "<f4")}, fill_mb=1)
    with pytest.raises(StreamError, match="rewards: cannot be read"):
        load(path)


def test_the_sample_stream_still_loads():
    from regime_dash.core.streams import load

    assert load(SAMPLE_STREAM).rewards.shape == (1200, 64)


# ------------------------------------------------------------- isv_slots.rs

_SLOT_CHILD = """import sys
from regime_dash import RegimeConfig, replay
from regime_dash.sources import scenarios
from regime_dash.errors import SlotLayoutError
from regime_dash.core.slots import import_rust
try:
    layout = import_rust(open(sys.argv[1]).read()).layout
except SlotLayoutError as e:
    print("refused:", e); sys.exit(2)
replay(scenarios.make("tail_shock", steps=50, accounts=4), RegimeConfig(), engine="reference", layout=layout)
"""


@pytest.mark.parametrize("index", ["250_000_000", "9" * 200, "9" * 10_000], ids=["250M", "200-digits", "10000-digits"])
def test_a_slot_index_bomb_is_refused_in_a_short_message(tmp_path, index):
    rs = tmp_path / "isv_slots.rs"
    rs.write_text(f"pub const RL_REGIME_DEAD_ZONE_FLAG_INDEX: usize = {index};\n")
    rc, out, err, rss = run_measured([sys.executable, "-c", _SLOT_CHILD, str(rs)])
    record_figure(f"slot_bomb_{len(index)}_chars", {"peak_rss_mb": round(rss / 1e6, 1), "exit": rc})
    assert rc == 2, err[-2000:]
    assert "past the largest slot index 65,535" in out
    assert len(out) < 300  # the value is cut, not echoed whole
    assert rss < RSS_BOUND


def test_the_slots_page_refuses_a_huge_index_and_replay_still_works(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("REGIME_DASH_STORE", str(tmp_path / "store"))
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=300).run()
    at.switch_page("regime_dash/ui/pages/slots.py").run()
    at.file_uploader(key="slots.upload").set_value(
        ("isv_slots.rs", b"pub const RL_REGIME_DEAD_ZONE_FLAG_INDEX: usize = " + b"9" * 200 + b";\n",
         "text/plain")).run()
    assert not at.exception, [e.message for e in at.exception]
    (err,) = [e.value for e in at.error]
    assert "past the largest slot index" in err and len(err) < 300
    at.switch_page("regime_dash/ui/pages/replay.py").run()
    assert not at.exception, [e.message for e in at.exception]


# ------------------------------------------------------------- wide files

_WIDE_CHILD = """import sys, time
from regime_dash.errors import IngestError
from regime_dash.store.run_store import RunStore
t = time.perf_counter()
try:
    res = RunStore(sys.argv[1]).ingest(sys.argv[2])
    print("stored", len(res.columns), round(time.perf_counter() - t, 2))
except IngestError as e:
    print("refused:", e, round(time.perf_counter() - t, 2)); sys.exit(2)
"""


def _wide(path: Path, keys: int, per_line: int) -> Path:
    lines = [json.dumps({"step": i, **{f"k{i * per_line + j}": 1.0 for j in range(per_line)}})
             for i in range(keys // per_line)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow  # measured child processes: up to 5 s of CPU
@pytest.mark.parametrize("per_line", [20_000, 10], ids=["one-line", "2000-lines"])
def test_a_file_of_20000_keys_is_refused_quickly_and_bounded(tmp_path, per_line):
    src = _wide(tmp_path / "wide.jsonl", 20_000, per_line)
    t0 = time.perf_counter()
    rc, out, err, rss = run_measured([sys.executable, "-c", _WIDE_CHILD, str(tmp_path / "store"), str(src)])
    seconds = time.perf_counter() - t0
    record_figure(f"wide_20000_keys_{per_line}_per_line", {"file_kb": round(src.stat().st_size / 1e3),
                                                           "seconds": round(seconds, 2), "peak_rss_mb": round(rss / 1e6, 1)})
    assert rc == 2, err[-2000:]
    assert "more than 4,096 columns" in out
    assert rss < RSS_BOUND
    assert seconds < 30  # was 43 s (one line) and 66 s (2,000 lines) on two cores


@pytest.mark.slow  # timed ingests of growing files: ~1.3 s of CPU
def test_ingest_time_grows_linearly_with_the_key_count(tmp_path):
    """Twice the keys (spread over twice the lines) costs about twice the time, not four times."""
    from regime_dash.store.run_store import RunStore

    def best(keys: int) -> float:
        src = _wide(tmp_path / f"w{keys}.jsonl", keys, 10)
        times = []
        for k in range(3):
            t = time.perf_counter()
            RunStore(tmp_path / f"s{keys}-{k}").ingest(src)
            times.append(time.perf_counter() - t)
        return min(times)

    small, large = best(1000), best(4000)
    assert large / small < 8, (small, large)  # quadratic gave 16-25x (0.25 s -> 6.1 s)


def test_a_run_at_the_column_cap_is_stored(tmp_path):
    from regime_dash.store.run_store import MAX_COLUMNS, RunStore

    src = _wide(tmp_path / "cap.jsonl", MAX_COLUMNS - 1, 5)  # plus step: exactly the cap
    assert len(RunStore(tmp_path / "s").ingest(src).columns) == MAX_COLUMNS
