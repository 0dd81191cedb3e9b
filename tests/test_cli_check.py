"""``python -m regime_dash check`` and ``diff``: files, stored runs, JSON, exit codes for CI."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from regime_dash.analysis import CHECK_IDS
from regime_dash.analysis.rederive_formulas import FORMULAS
from regime_dash.analysis import view as v
from regime_dash.cli import main
from regime_dash.diag.catalogue import write_jsonl
from regime_dash.store.run_store import RunStore
from test_invariants import STEP0, rich_frame, timeout_frame

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("check")
    clean = rich_frame()
    bad = clean.copy()
    bad.loc[500, v.RECENCY] = bad.loc[500, v.RECENCY] + np.float32(5)  # a skipped count at row 500
    out = {"clean": write_jsonl(clean, d / "clean.jsonl"), "bad": write_jsonl(bad, d / "bad.jsonl"),
           "timeout": write_jsonl(timeout_frame(), d / "timeout.jsonl")}
    out["clean_parquet"] = d / "clean.parquet"
    clean.to_parquet(out["clean_parquet"])
    out["bad_step"] = STEP0 + 500
    return out


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_check_clean_file_exits_0_and_lists_every_check(files, capsys):
    code, out, _ = run_cli(capsys, "check", files["clean"])
    assert code == 0
    for cid in CHECK_IDS:
        assert cid in out
    assert "no check failed" in out and "dead-zone episodes: 3" in out


def test_check_json_document_shape(files, capsys):
    code, out, _ = run_cli(capsys, "check", files["timeout"], "--json")
    assert code == 0
    doc = json.loads(out)
    assert {"checks", "episodes", "events"} <= set(doc)
    assert [c["id"] for c in doc["checks"]] == list(CHECK_IDS) + [f.check_id for f in FORMULAS]
    for c in doc["checks"]:
        assert set(c) == {"id", "status", "violations", "first_step", "steps", "spans", "column", "detail",
                          "evidence"}
        assert c["status"] in ("pass", "skip")
    assert [e["ended"] for e in doc["episodes"]["dead_zone"]] == ["exit", "timeout", "timeout"]
    assert len(doc["events"]["timeouts"]) == 2 and doc["events"]["tail"][0]["step"] >= STEP0
    assert doc["source"] == {"file": "timeout.jsonl", "rejected_lines": 0}


def test_check_planted_violation_exits_1_and_names_the_step(files, capsys):
    code, out, _ = run_cli(capsys, "check", files["bad"], "--json")
    assert code == 1
    failed = [c for c in json.loads(out)["checks"] if c["status"] == "fail"]
    # the bound check and the re-derivation of the same formula both see it, at the same step
    assert [c["id"] for c in failed] == ["tail_recency", "rederive.recency"]
    assert failed[0]["first_step"] == files["bad_step"] and failed[0]["steps"][0] == files["bad_step"]
    code, text, _ = run_cli(capsys, "check", files["bad"])
    assert code == 1 and "FAIL  tail_recency" in text and str(files["bad_step"]) in text


def test_check_only_and_options(files, capsys):
    code, out, _ = run_cli(capsys, "check", files["bad"], "--json", "--only", "flag_binary,timeout_flag")
    assert code == 0 and [c["id"] for c in json.loads(out)["checks"]] == ["flag_binary", "timeout_flag"]
    # the first dead zone (stream rows 200..259, no timeout) is a 60-step kelly_f=0 all-flat stretch;
    # the two longer ones are excused by their timeout
    code, out, _ = run_cli(capsys, "check", files["timeout"], "--json", "--only", "kelly_trap",
                           "--trap-steps", "60")
    assert code == 0
    code, out, _ = run_cli(capsys, "check", files["timeout"], "--json", "--only", "kelly_trap",
                           "--trap-steps", "10")
    (trap,) = json.loads(out)["checks"]
    assert code == 1 and trap["violations"] == 1 and trap["first_step"] == STEP0 + 200
    assert trap["spans"] == [[STEP0 + 200, STEP0 + 259]]  # the whole trap, from its start
    code, _, err = run_cli(capsys, "check", files["clean"], "--only", "nope")
    assert code == 2 and "nope" in err
    code, _, err = run_cli(capsys, "check", files["clean"], "--trap-steps", "0")
    assert code == 2 and "trap_steps" in err


def test_check_parquet_and_gzip_files(files, capsys, tmp_path):
    assert run_cli(capsys, "check", files["clean_parquet"])[0] == 0
    gz = tmp_path / "bad.jsonl.gz"
    gz.write_bytes(gzip.compress(Path(files["bad"]).read_bytes()))
    assert run_cli(capsys, "check", gz)[0] == 1


def test_check_keeps_going_past_rejected_lines(files, capsys, tmp_path):
    lines = Path(files["clean"]).read_text().splitlines(keepends=True)
    broken = tmp_path / "broken.jsonl"
    broken.write_text("".join(lines[:10]) + "{not json\n" + "".join(lines[10:]))
    code, out, _ = run_cli(capsys, "check", broken, "--json")
    assert code == 0 and json.loads(out)["source"]["rejected_lines"] == 1


def test_check_a_stored_run_by_id(files, capsys, tmp_path):
    store = tmp_path / "store"
    res = RunStore(store).ingest(files["bad"])
    code, out, _ = run_cli(capsys, "check", res.run_id, "--store", store, "--json")
    assert code == 1
    doc = json.loads(out)
    assert doc["source"] == {"run_id": res.run_id}
    assert [c["first_step"] for c in doc["checks"] if c["status"] == "fail"] == [files["bad_step"]] * 2


def test_check_unknown_run_or_file_exits_2(capsys, tmp_path):
    code, _, err = run_cli(capsys, "check", "no-such-run", "--store", tmp_path / "empty")
    assert code == 2 and "no-such-run" in err


def test_check_with_user_aliases(files, capsys, tmp_path):
    frame = rich_frame().rename(columns={v.FLAG: "dz_flag_custom"})
    path = write_jsonl(frame, tmp_path / "renamed.jsonl")
    code, out, _ = run_cli(capsys, "check", path, "--json", "--only", "flag_binary")
    assert code == 0 and json.loads(out)["checks"][0]["status"] == "skip"
    aliases = tmp_path / "aliases.json"
    aliases.write_text(json.dumps({v.FLAG: ["dz_flag_custom"]}))
    code, out, _ = run_cli(capsys, "check", path, "--json", "--only", "flag_binary", "--aliases", aliases)
    doc = json.loads(out)
    assert code == 0 and doc["checks"][0]["status"] == "pass"
    assert doc["aliases_applied"] == {"dz_flag_custom": v.FLAG}
    aliases.write_text("[1]")
    code, _, err = run_cli(capsys, "check", path, "--aliases", aliases)
    assert code == 2 and "alias" in err


def test_diff_identical_and_different(files, capsys):
    code, out, _ = run_cli(capsys, "diff", files["clean"], files["clean_parquet"])
    assert code == 0 and out.startswith("identical") and "not byte-identical" in out
    code, out, _ = run_cli(capsys, "diff", files["clean"], files["clean"])
    assert code == 0 and "files are byte-identical" in out
    code, out, _ = run_cli(capsys, "diff", files["clean"], files["bad"], "--json")
    doc = json.loads(out)
    assert code == 1 and doc["first_step"] == files["bad_step"] and doc["same_bytes"] is False
    assert [(f["column"], f["rows"], f["max_abs"]) for f in doc["fields"]] == [(v.RECENCY, 1, 5.0)]
    code, out, _ = run_cli(capsys, "diff", files["clean"], files["bad"], "--columns", v.FLAG)
    assert code == 0


@pytest.mark.slow  # CLI subprocesses: ~2.3 s of CPU
def test_module_entry_point_exit_code_gates_ci(files):
    """The real ``python -m regime_dash`` process: exit 1 on a failed check, JSON on stdout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    bad = subprocess.run([sys.executable, "-m", "regime_dash", "check", str(files["bad"]), "--json"],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert bad.returncode == 1, bad.stderr
    assert json.loads(bad.stdout)["checks"][0]["id"] == "flag_binary"
    ok = subprocess.run([sys.executable, "-m", "regime_dash", "diff", str(files["clean"]), str(files["clean"])],
                        capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert ok.returncode == 0, ok.stderr


def test_check_list_names_every_check(capsys):
    code, out, _ = run_cli(capsys, "check", "--list")
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == list(CHECK_IDS)
    code, out, _ = run_cli(capsys, "check", "--list", "--json")
    assert [c["id"] for c in json.loads(out)] == list(CHECK_IDS)
    code, _, err = run_cli(capsys, "check")
    assert code == 2 and "RUN_ID or FILE" in err


def test_the_committed_sample_diag_passes_every_check(capsys):
    """data/samples/diag.jsonl is a closed-loop live run (resurrection on, a boundary, tails)."""
    code, out, _ = run_cli(capsys, "check", ROOT / "data" / "samples" / "diag.jsonl", "--json")
    doc = json.loads(out)
    assert code == 0, [c for c in doc["checks"] if c["status"] == "fail"]
    assert len(doc["events"]["boundaries"]) >= 1 and len(doc["events"]["tail"]) >= 1
