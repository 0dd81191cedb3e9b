"""A damaged run store explains itself: damaged parts, orphan folders, stray files, symlinks,
staging debris; readers during a concurrent ``rm``; and ``doctor [--repair]``.

After every case, nothing is lost or counted twice: DuckDB's row count over the store's
globs equals the ``runs`` total.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import duckdb
import pytest

from regime_dash.runs.check_all import check_all, store_check
from regime_dash.errors import StoreError
from regime_dash.store.run_store import RunStore
from regime_dash.store.doctor import repair, survey

from hostile import REPO, child_env, good_lines
from hostile import cli_in_process as _run_cli


def duck_rows(root: Path, pattern: str = "**/*.parquet") -> int:
    if not list(root.glob(pattern)):
        return 0
    return duckdb.sql(f"SELECT count(*) FROM read_parquet('{root}/{pattern}', hive_partitioning=true, "
                      "union_by_name=true)").fetchall()[0][0]


def runs_total(store: RunStore) -> int:
    return sum(r["rows"] for r in store.list_runs())


def cli(*args: str, store: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "regime_dash", *args, "--store", str(store)],
                          capture_output=True, text=True, cwd=REPO, env=child_env(), timeout=300)


@pytest.fixture
def two_runs(tmp_path):
    store = RunStore(tmp_path / "store")
    src = tmp_path / "a.jsonl"
    src.write_bytes(good_lines(3300))
    good = store.ingest(good_lines(600, start=5000), name="good")
    bad = store.ingest(src)
    return store, good.run_id, bad.run_id, src


# ------------------------------------------------------------- orphan folders


def test_a_run_whose_meta_went_is_not_counted_twice_after_a_new_ingest(two_runs):
    store, good, first, src = two_runs
    (store.root / f"run={first}" / "_meta.json").unlink()
    assert duck_rows(store.root) == 3900  # the hidden copy: DuckDB reads it, `runs` does not
    again = store.ingest(src)
    assert again.duplicate_of is None and again.rows == 3300
    assert runs_total(store) == 3900
    assert duck_rows(store.root) == 3900 == duck_rows(store.root, "run=*/*.parquet")
    kept = list((store.root / "_quarantine").rglob("*.parquet.quarantined"))
    assert kept, "the orphan copy is moved aside, not deleted"


def test_doctor_lists_and_moves_an_orphan(two_runs):
    store, good, first, _ = two_runs
    (store.root / f"run={first}" / "_meta.json").unlink()
    out = cli("doctor", store=store.root)
    assert out.returncode == 1, out.stderr
    assert "orphan" in out.stdout and first in out.stdout
    out = cli("doctor", "--repair", store=store.root)
    assert out.returncode == 0, out.stderr
    assert "moved" in out.stdout
    assert duck_rows(store.root) == runs_total(store) == 600
    assert cli("doctor", store=store.root).returncode == 0


# ------------------------------------------------------------- damaged parts

DAMAGE = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
    "zero-byte": lambda p: p.write_bytes(b""),
    "fake": lambda p: p.write_bytes(b"PAR1 this is not parquet at all PAR1"),
}


@pytest.mark.slow  # CLI subprocesses: ~2 s of CPU each
@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_a_damaged_part_is_one_line_and_whole_store_operations_go_on(two_runs, how):
    store, good, bad, _ = two_runs
    (part,) = store.parts(bad)
    DAMAGE[how](part)
    with pytest.raises(StoreError, match="is damaged: part-00000.parquet"):
        store.load(bad)
    assert len(store.load(good)) == 600
    out = cli("check", bad, store=store.root)
    assert out.returncode == 2
    (line,) = out.stderr.strip().splitlines()
    assert "damaged" in line and bad in line and "Traceback" not in out.stderr
    # check --all: a row for the damaged run, the good one still checked
    table = check_all([good, bad], lambda r: store_check(r, store=str(store.root)))
    assert list(table["status"]) != ["error", "error"]
    assert table.set_index("run").loc[bad, "status"] == "error"
    assert table.set_index("run").loc[good, "status"] != "error"
    out = cli("check", "--all", store=store.root)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert good in out.stdout and bad in out.stdout
    # doctor lists it; --repair moves the run aside, and every reader agrees again
    problems = survey(store)
    assert [(q.kind, q.path.name) for q in problems] == [("damaged", f"run={bad}")]
    repair(store, problems)
    assert [r["run_id"] for r in store.list_runs()] == [good]
    assert duck_rows(store.root) == runs_total(store) == 600
    assert survey(store) == []


def test_doctor_lists_strays_symlinks_and_staging_debris(two_runs, tmp_path):
    store, good, bad, _ = two_runs
    (store.root / "notes.txt").write_text("mine")
    (store.root / f"run={good}" / "extra.parquet").write_bytes(b"x")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (store.root / "run=linked-0123456789ab").symlink_to(outside)
    debris = store.staging_dir() / "ingest-otherhost~1~abc"
    debris.mkdir()
    import os
    os.utime(debris, (0, 0))  # another host's, older than a day
    kinds = {(q.kind, q.path.name) for q in survey(store)}
    assert {("stray", "notes.txt"), ("stray", "extra.parquet"), ("symlink", "run=linked-0123456789ab"),
            ("staging", "ingest-otherhost~1~abc")} <= kinds
    out = cli("doctor", "--repair", "--json", store=store.root)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert all(d["moved_to"] for d in doc)
    assert outside.is_dir()  # a symlink's target is never touched
    assert (store.root / "_quarantine").is_dir() and not (store.root / "notes.txt").exists()
    assert survey(store) == []
    assert duck_rows(store.root) == runs_total(store) == 3900


# ------------------------------------------------------------- concurrent rm


@pytest.mark.slow  # readers racing deletes: ~5.7 s of CPU
def test_readers_during_concurrent_rm_get_the_stores_own_error(tmp_path):
    store = RunStore(tmp_path / "store")
    data = good_lines(2000)
    stop = threading.Event()
    raw: list[BaseException] = []
    clear = [0]

    def reader():
        r = RunStore(store.root)
        while not stop.is_set():
            for run in r.list_runs():
                try:
                    r.load(run["run_id"])
                    r.meta(run["run_id"])
                except StoreError:
                    clear[0] += 1
                except Exception as e:  # noqa: BLE001 - what the test is looking for
                    raw.append(e)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for k in range(150):
            rid = store.ingest(data, name=f"r{k % 3}").run_id
            store.delete(rid)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not raw, f"{len(raw)} raw errors, first: {raw[0]!r}"


# ------------------------------------------------------------- escape sequences


def test_escape_sequences_in_names_and_keys_are_printed_escaped(tmp_path):
    src = tmp_path / "evil\x1b[31mred.jsonl"
    src.write_text("\n".join(json.dumps({"step": i, "x\x1b[2Jy": 1.0, "k": "v"}) for i in range(5)) + "\n"
                   + json.dumps({"step": 9, "x\x1b[2Jy": "text"}) + "\n")
    store = tmp_path / "store"
    out = cli("ingest", str(src), store=store)
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout and "\\x1b[31mred" in out.stdout
    assert "\\x1b[2Jy" in out.stdout  # the key, in the set-aside value's line
    listed = cli("runs", store=store)
    assert "\x1b" not in listed.stdout and "\\x1b[31mred" in listed.stdout


def test_runs_says_when_folders_are_hidden(two_runs):
    store, good, first, _ = two_runs
    (store.root / f"run={first}" / "_meta.json").unlink()
    out = cli("runs", store=store.root)
    assert "1 run folder(s) without a readable _meta.json" in out.stderr and "doctor --repair" in out.stderr


@pytest.mark.parametrize("step", [2 ** 63 - 1, 2 ** 53, -(2 ** 53), 1e300, -1e300])
def test_a_step_beyond_2_53_is_a_rejected_line_with_its_reason(tmp_path, step):
    """One line's step past what a browser or a float holds exactly: that line is rejected with the
    step named (its bytes kept), the others are stored, and check reports the true last step."""
    lines = good_lines(100).splitlines(keepends=True)
    lines[40] = json.dumps({"step": step, "risk_stack": {"popart": {"sigma": 2.0}}}).encode() + b"\n"
    src = tmp_path / "big.jsonl"
    src.write_bytes(b"".join(lines))
    store = RunStore(tmp_path / "store")
    result = store.ingest(src)
    assert result.rows == 99 and [r["line"] for r in result.rejected] == [41], result.rejected
    assert "beyond ±9,007,199,254,740,991" in result.rejected[0]["reason"]
    assert store.conflicts(result.run_id) == []  # not kept aside as a null step
    assert duck_rows(store.root) == runs_total(store) == 99
    proc = cli("check", result.run_id, "--json", store=store.root)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    summary = json.loads(proc.stdout)["summary"]
    assert (summary["first_step"], summary["last_step"], summary["rows_without_step"]) == (0, 99, 0)


#: Raw control characters (tab and newline aside): what must never reach the terminal.
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: Clear the screen, set the window title (OSC ... BEL), and a C1 CSI that recolours.
ESC, CSI = "\x1b[2J\x1b]0;owned\x07", "\x9b31m"


def test_control_characters_from_files_are_printed_escaped_by_every_command(tmp_path, capsys, monkeypatch):
    """File names, keys, set-aside values, stray files, refused arguments and the errors that echo
    them, through ingest, runs, check (file and run), diff, tag, note, doctor, rm and argparse."""
    monkeypatch.setenv("REGIME_DASH_STORE_FORMAT", "folder")  # doctor's survey of a folder store's stray files
    store = str(tmp_path / "store")
    lines = [json.dumps({"step": i, f"k{ESC}": float(i), f"c{CSI}": 1.0}) for i in range(6)]
    lines.append(json.dumps({"step": 6, f"k{ESC}": f"text{ESC}", f"c{CSI}": 1.0}))  # set aside: a string
    src = tmp_path / f"evil{ESC}.jsonl"
    src.write_text("\n".join(lines) + "\n")
    other = tmp_path / f"other{CSI}.jsonl"
    other.write_text("\n".join(lines[:-1]).replace('"k\\u001b[2J\\u001b]0;owned\\u0007": 5.0',
                                                   '"k\\u001b[2J\\u001b]0;owned\\u0007": 9.0') + "\n")
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / f"stray{ESC}.txt").write_text("x")
    printed = {}
    printed["ingest"] = _run_cli(capsys, "ingest", str(src), "--store", store)
    rid = RunStore(store).list_runs()[0]["run_id"]
    printed["runs"] = _run_cli(capsys, "runs", "--store", store)
    printed["check file"] = _run_cli(capsys, "check", str(src), "--store", store)
    printed["check run"] = _run_cli(capsys, "check", rid, "--store", store)
    printed["diff"] = _run_cli(capsys, "diff", str(src), str(other), "--store", store)
    printed["tag"] = _run_cli(capsys, "tag", rid, f"t{ESC}", "--store", store)
    printed["note"] = _run_cli(capsys, "note", rid, f"n{ESC}\x7f", "--store", store)
    printed["runs --json"] = _run_cli(capsys, "runs", "--json", "--store", store)  # JSON, DEL in the note
    printed["doctor"] = _run_cli(capsys, "doctor", "--store", store)
    printed["rm"] = _run_cli(capsys, "rm", f"gone{CSI}", "--store", store)
    printed["ingest missing"] = _run_cli(capsys, "ingest", str(tmp_path / f"none{ESC}.jsonl"), "--store", store)
    printed["argparse"] = _run_cli(capsys, "runs", f"--x{ESC}")
    for what, (rc, text) in printed.items():
        assert not RAW_CONTROL.findall(text), f"{what} (exit {rc}) printed raw {RAW_CONTROL.findall(text)}: {text!r}"
    escaped = "\\x1b[2J\\x1b]0;owned\\x07"
    assert printed["ingest"][0] == 0 and f"evil{escaped}.jsonl" in printed["ingest"][1]
    assert f"line 7: k{escaped} = " in printed["ingest"][1]  # the set-aside value's key (its value: JSON text)
    assert f"evil{escaped}.jsonl" in printed["check file"][1]  # the report names the file
    assert printed["diff"][0] == 1 and f"k{escaped}" in printed["diff"][1]  # the differing column
    assert printed["tag"][0] == 2 and printed["rm"][0] == 2 and printed["ingest missing"][0] == 2
    assert f"stray{escaped}.txt" in printed["doctor"][1]
    assert printed["argparse"][0] == 2 and f"--x{escaped}" in printed["argparse"][1]
    assert json.loads(printed["runs --json"][1])[0]["notes"] == f"n{ESC}\x7f"  # JSON's own escapes, still JSON
    assert RunStore(store).meta(rid)["notes"] == f"n{ESC}\x7f"  # stored as given; only its printing is escaped


def test_every_cli_line_is_printed_through_say():
    """:func:`regime_dash.cli.say` (and ``say_json``) is how a command prints (a bare print would let
    a file's escape sequence through): no module of ``cli/`` calls ``print`` or ``json.dump``."""
    for path in sorted((REPO / "regime_dash" / "cli").glob("*.py")):
        text = path.read_text()
        assert not re.findall(r"(?<![\w.])print\(", text), f"{path.name} calls print(); use say()"
        assert "json.dump(" not in text, f"{path.name} writes JSON itself; use say_json()"
