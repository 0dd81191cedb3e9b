"""``python -m regime_dash ingest | runs | rm | bench ingest``."""
from __future__ import annotations

import gzip
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from regime_dash.cli import main

REPO = Path(__file__).resolve().parents[1]


def child_env(**extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


@pytest.fixture
def files(tmp_path):
    good = tmp_path / "diag.jsonl"
    good.write_bytes(b"".join(b'{"step": %d, "risk_stack": {"regime": {"tail": {"recency": %d}}}}\n'
                              % (i, i % 5) for i in range(100)) + b'{"step": 100, "trunc')
    gz = tmp_path / "other.jsonl.gz"
    gz.write_bytes(gzip.compress(b'{"step": 7, "x": NaN}\n{"step": 8, "x": 1.5}\n[1]\n'))
    return good, gz


def test_ingest_json_output(tmp_path, files, capsys):
    good, gz = files
    store = tmp_path / "store"
    rc = main(["ingest", str(good), str(gz), "--store", str(store), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and len(out) == 2
    a, b = out
    for obj in out:
        assert {"run_id", "rows", "rejected", "columns", "first_step", "last_step",
                "duplicate_of"} <= set(obj)
    assert a["rows"] == 100 and a["first_step"] == 0 and a["last_step"] == 99
    assert a["rejected"] == [{"line": 101, "reason": a["rejected"][0]["reason"]}]
    assert a["rejected"][0]["reason"].startswith("truncated last line")
    assert "risk_stack.regime.tail.recency" in a["columns"] and a["duplicate_of"] is None
    assert b["rows"] == 2 and [r["line"] for r in b["rejected"]] == [3]
    assert a["run_id"].startswith("diag-") and b["run_id"].startswith("other-")
    # again: same bytes, same runs
    rc = main(["ingest", str(good), "--store", str(store), "--json", "--name", "again"])
    (dup,) = json.loads(capsys.readouterr().out)
    assert rc == 0 and dup["duplicate_of"] == a["run_id"] and dup["run_id"] == a["run_id"]


def test_ingest_exit_2_when_a_file_cannot_be_read(tmp_path, files, capsys):
    good, _ = files
    store = tmp_path / "store"
    rc = main(["ingest", str(tmp_path / "missing.jsonl"), str(good), "--store", str(store),
               "--json"])
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    assert rc == 2
    assert out[0]["run_id"] is None and "missing.jsonl" in out[0]["error"]
    assert out[1]["rows"] == 100  # the readable file is still stored
    assert "missing.jsonl" in cap.err
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert main(["ingest", str(empty), "--store", str(store)]) == 2


def test_ingest_human_output_and_name(tmp_path, files, capsys):
    good, _ = files
    rc = main(["ingest", str(good), "--store", str(tmp_path / "s"), "--name", "exp 42"])
    out = capsys.readouterr().out
    assert rc == 0 and "stored run exp-42-" in out and "100 rows" in out and "line 101" in out


def test_store_env_var_runs_and_rm(tmp_path, files, capsys, monkeypatch):
    good, gz = files
    monkeypatch.setenv("REGIME_DASH_STORE", str(tmp_path / "envstore"))
    monkeypatch.setenv("REGIME_DASH_STORE_FORMAT", "folder")  # the runs' folders are looked at below
    assert main(["ingest", str(good), str(gz), "--json"]) == 0
    ids = [o["run_id"] for o in json.loads(capsys.readouterr().out)]
    assert sorted(p.name for p in (tmp_path / "envstore").glob("run=*")) == \
        sorted(f"run={i}" for i in ids)
    assert main(["runs", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert [r["run_id"] for r in runs] == ids
    assert {"name", "run_id", "rows", "first_step", "last_step", "ingested_at", "source",
            "sha256"} <= set(runs[0])
    assert main(["runs"]) == 0
    table = capsys.readouterr().out
    assert ids[0] in table and ids[1] in table
    assert main(["rm", ids[0]]) == 0
    capsys.readouterr()
    assert main(["runs", "--json"]) == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)] == [ids[1]]
    assert main(["rm", ids[0]]) == 2
    assert ids[0] in capsys.readouterr().err
    assert main(["rm", "../../etc"]) == 2


def test_python_dash_m_entry_point(tmp_path, files):
    good, _ = files
    env = child_env(REGIME_DASH_STORE=str(tmp_path / "s"))
    r = subprocess.run([sys.executable, "-m", "regime_dash", "ingest", str(good), "--json"],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)[0]["rows"] == 100
    assert "\r" not in r.stderr  # no progress bar when stderr is not a terminal
    r = subprocess.run([sys.executable, "-m", "regime_dash", "ingest", str(tmp_path / "nope")],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 2 and "nope" in r.stderr


def test_progress_bar_on_a_terminal(tmp_path):
    src = tmp_path / "d.jsonl"
    src.write_bytes(b"".join(b'{"step": %d, "pad": "%s"}\n' % (i, b"x" * 200) for i in range(20000)))
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "regime_dash", "ingest", str(src),
                                 "--store", str(tmp_path / "s")],
                                stdout=subprocess.PIPE, stderr=slave, env=child_env())
        os.close(slave)
        slave = None
        err = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            err += chunk
        out, _ = proc.communicate(timeout=60)
    finally:
        os.close(master)
        if slave is not None:
            os.close(slave)
    assert proc.returncode == 0
    text = err.decode()
    assert "d.jsonl [" in text and "100%" in text and "MB/s" in text
    assert b"stored run" in out


@pytest.mark.slow  # the ingest benchmark's child processes: ~1.7 s of CPU
def test_bench_ingest_smoke(tmp_path, capsys):
    out = tmp_path / "bench.json"
    rc = main(["bench", "ingest", "--size-mb", "0.3", "--repeat", "1", "--json",
               "--out", str(out), "--workdir", str(tmp_path)])
    res = json.loads(capsys.readouterr().out)
    assert rc == 0 and json.loads(out.read_text()) == res
    for k in ("ours", "ours_with_rejects", "duckdb_read_json_to_parquet", "pyarrow_read_json"):
        assert res["mb_per_s"][k] > 0
    assert "ratio_vs_duckdb" in res
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("rd-bench-")]  # cleaned up


def test_bench_rejects_bad_sizes(capsys):
    assert main(["bench", "ingest", "--size-mb", "0"]) == 2
    assert "size-mb" in capsys.readouterr().err


def test_the_command_freezes_its_objects_at_the_end_and_its_output_is_whole(tmp_path, files, capsys):
    """``script`` (the command's entry) runs ``main`` and then freezes the objects (the exit skips its
    collections); the run is stored and the JSON printed all the same, in-process and in a fresh process."""
    import gc

    from regime_dash.cli import script

    good, _ = files
    before = gc.get_freeze_count()
    try:
        assert script(["ingest", str(good), "--store", str(tmp_path / "a"), "--json"]) == 0
        assert gc.get_freeze_count() > before
    finally:
        gc.unfreeze()
    first = json.loads(capsys.readouterr().out)[0]
    assert first["rows"] == 100 and first["rejected"][0]["line"] == 101
    proc = subprocess.run([sys.executable, "-m", "regime_dash", "ingest", str(good), "--store",
                           str(tmp_path / "b"), "--json"], capture_output=True, text=True, env=child_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0] == first  # the same report (the run id is the file's name and hash)
    assert main(["runs", "--store", str(tmp_path / "b"), "--json"]) == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)] == [first["run_id"]]
