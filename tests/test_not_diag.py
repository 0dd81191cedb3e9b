"""A file that is not a diag is refused everywhere with one answer, and never passes.

Ingest, the store (so the Runs page's upload), ``check FILE``, ``check --all`` and the
Runs page ask one definition (:mod:`regime_dash.ingest.diag_rows`).
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from regime_dash.cli import main
from regime_dash.errors import NotDiagError
from regime_dash.ingest import NOT_DIAG_LINE, parse
from regime_dash.sources.samples import DIAG_NAME, SAMPLE_DIR
from regime_dash.store.run_store import RunStore

SAMPLE = SAMPLE_DIR / DIAG_NAME

#: name -> (bytes, words the reason must hold)
NOT_DIAGS = {
    "objects.jsonl": (b'{"a": 1}\n{"a": 2}\n{"b": {"c": "x"}}\n', "none of its 3 JSON object line(s) has a diag field"),
    "hello.jsonl": (b"hello\nhello\n", "no JSON object line (2 of 2 line(s) rejected; line 1: not JSON"),
    "empty.jsonl": (b"", "no lines"),
    "junk.jsonl.gz": (gzip.compress(b'hello\n{"a": 1}\n[1, 2]\n'), "none of its 1 JSON object line(s) has a diag field"),
    "nostep.jsonl": (b'{"risk_stack": {"kelly": {"fraction": 0.1}}}\n', "no 'step' field in its 1 row(s)"),
}


def _no_staging_left(store: RunStore) -> None:
    assert store.list_runs() == []
    leftovers = [p for p in store.root.parent.rglob("*") if "ingest-" in p.name]
    assert leftovers == []


@pytest.mark.parametrize("name", sorted(NOT_DIAGS))
def test_store_refuses_a_file_that_is_not_a_diag_and_writes_nothing(tmp_path, name):
    data, why = NOT_DIAGS[name]
    path = tmp_path / name
    path.write_bytes(data)
    store = RunStore(tmp_path / "store")
    with pytest.raises(NotDiagError) as err:
        store.ingest(path)
    msg = str(err.value)
    assert msg.startswith(f"'{name}' is not a diag file: ") and why in msg and "\n" not in msg
    assert err.value.path == name and why in err.value.reason
    _no_staging_left(store)


@pytest.mark.parametrize("name", sorted(NOT_DIAGS))
def test_cli_ingest_and_check_give_the_same_answer_and_exit_2(tmp_path, capsys, name):
    data, why = NOT_DIAGS[name]
    path = tmp_path / name
    path.write_bytes(data)
    store = tmp_path / "store"
    assert main(["ingest", str(path), "--store", str(store)]) == 2
    ingest_err = capsys.readouterr().err.strip()
    assert main(["check", str(path), "--store", str(store)]) == 2
    check_err = capsys.readouterr().err.strip()
    for err in (ingest_err, check_err):
        assert len(err.splitlines()) == 1 and name in err and "is not a diag file" in err and why in err
    # the same reason, whichever door the file came through
    assert ingest_err.split("is not a diag file: ")[1] == check_err.split("is not a diag file: ")[1]
    assert RunStore(store).list_runs() == []


def _mixed(tmp_path: Path) -> tuple[Path, list[int]]:
    """Three diag rows of the sample among lines with no diag field; the latter's line numbers."""
    diag = SAMPLE.read_text().splitlines()[:3]
    lines = ['{"a": 1}', diag[0], '{"only_here": [1, 2]}', diag[1], '{"step": null, "c": 1}', diag[2], "hello"]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path, [1, 3, 5]


def test_a_diag_with_non_diag_lines_keeps_its_diag_rows_and_quarantines_the_others(tmp_path):
    path, not_diag = _mixed(tmp_path)
    store = RunStore(tmp_path / "store")
    res = store.ingest(path)
    assert res.rows == 3 and res.rejected_count == 4
    by_line = {r["line"]: r["reason"] for r in res.rejected}
    assert [n for n, why in by_line.items() if why == NOT_DIAG_LINE] == not_diag
    assert by_line[7].startswith("not JSON")
    # the raw bytes are kept, as for any bad line
    raw = {r["line"]: r["raw"] for r in store.rejects(res.run_id)}
    assert raw[1] == '{"a": 1}' and raw[3] == '{"only_here": [1, 2]}'
    # columns only the quarantined lines carried are not the run's
    assert not {"a", "only_here", "c"} & set(res.columns)
    frame = store.load(res.run_id)
    assert list(frame["_line"]) == [2, 4, 6] and frame["step"].notna().all()
    assert store.list_runs()[0]["not_diag"] is None


def test_check_reads_a_mixed_file_as_the_store_does(tmp_path, capsys):
    path, _ = _mixed(tmp_path)
    main(["check", str(path), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["source"]["rejected_lines"] == 4 and doc["summary"]["rows"] == 3
    assert "not_diag" not in doc["source"]


def test_parse_keeps_every_object_line_unless_asked_for_diag_lines_only():
    data = b'{"a": 1}\n{"step": 1, "a": 2}\n{"kelly_f": 0.5}\n'
    table, report = parse(data)
    assert table.num_rows == 3 and report.not_diag_lines == 0
    table, report = parse(data, diag_only=True)
    # an alias of a diag field counts (kelly_f is risk_stack.kelly.fraction under another name)
    assert table.column("_line").to_pylist() == [2, 3] and report.not_diag_lines == 1
    assert [r.line for r in report.rejected] == [1]
    table, report = parse(b'{"mine": 1, "step": 0}\n{"mine": 2}\n', diag_only=True,
                          aliases={"risk_stack.kelly.fraction": "mine"})
    assert table.num_rows == 2 and report.not_diag_lines == 0


def test_a_diag_value_set_aside_still_makes_its_line_a_diag_line():
    table, report = parse(b'{"step": 0}\n{"step": "abc", "a": 1}\n', diag_only=True)
    assert table.num_rows == 2 and report.not_diag_lines == 0 and report.aside_count == 1


def write_old_run(root: Path, run_id: str = "old-notes-0123456789ab") -> str:
    """A run without any diag field, written into the store directly, as an older version
    (which stored any JSON object line) could have."""
    d = root / f"run={run_id}"
    d.mkdir(parents=True)
    pq.write_table(pa.table({"_line": [1, 2], "a": [1, 2]}), d / "part-00000.parquet")
    meta = {"format_version": 1, "run_id": run_id, "name": "old-notes", "source": "notes.jsonl",
            "sha256": "0123456789ab" * 5, "lines": 2, "rows": 2, "rejected_count": 0,
            "columns": {"a": "int64"}, "first_step": None, "last_step": None,
            "ingested_at": "2020-01-01T00:00:00+00:00"}
    (d / "_meta.json").write_text(json.dumps(meta))
    (d / "_rejects.jsonl").write_text("")
    (d / "_conflicts.jsonl").write_text("")
    return run_id


def test_a_stored_run_without_diag_fields_is_not_a_diag_in_check_all(tmp_path, capsys):
    root = tmp_path / "store"
    store = RunStore(root)
    good = store.ingest(SAMPLE).run_id
    old = write_old_run(root)
    (listed,) = [r for r in store.list_runs() if r["run_id"] == old]
    assert listed["not_diag"].startswith("no diag field")
    assert main(["check", "--all", "--store", str(root), "--json"]) == 2
    rows = {r["run"]: r for r in json.loads(capsys.readouterr().out)["runs"]}
    assert rows[old]["status"] == "not a diag" and "is not a diag file: no diag field" in rows[old]["first_failure"]
    assert rows[good]["status"] != "not a diag"
    assert main(["check", old, "--store", str(root)]) == 2
    assert "is not a diag file: no diag field" in capsys.readouterr().err
    # without it, the same store's exit is the verdict of the good run alone
    store.delete(old)
    assert main(["check", "--all", "--store", str(root)]) in (0, 1)


def test_check_all_exit_code_orders_not_a_diag_above_a_failure():
    from regime_dash.usecases.check import check_all_exit_code

    assert check_all_exit_code(["ok", "ok"]) == 0
    assert check_all_exit_code(["ok", "fail"]) == 1
    assert check_all_exit_code(["fail", "not a diag"]) == 2


# ---- the Runs page ---------------------------------------------------------------------------
st = pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def test_runs_page_refuses_an_upload_that_is_not_a_diag(tmp_path, monkeypatch):
    monkeypatch.setenv("REGIME_DASH_STORE", str(tmp_path / "store"))
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.file_uploader(key="runs.upload").set_value(("objects.jsonl", NOT_DIAGS["objects.jsonl"][0],
                                                   "application/json")).run()
    assert not at.exception
    (err,) = [e.value for e in at.error]
    assert err.startswith(r"objects\.jsonl: not ingested") and "is not a diag file" in err  # the name as text
    assert RunStore(tmp_path / "store").list_runs() == []


def test_runs_page_shows_a_stored_run_without_diag_fields_as_not_a_diag(tmp_path, monkeypatch):
    root = tmp_path / "store"
    good = RunStore(root).ingest(SAMPLE).run_id
    old = write_old_run(root)
    monkeypatch.setenv("REGIME_DASH_STORE", str(root))
    at = AppTest.from_file(APP, default_timeout=300).run()
    assert not at.exception, [e.message for e in at.exception]
    (table,) = [d.value for d in at.dataframe if "ingested_at" in d.value.columns]
    diag = dict(zip(table["run_id"], table["diag"]))
    assert diag[good] == "diag" and diag[old].startswith("not a diag: no diag field")
    at.button(key="runs.check_all").click().run()
    assert not at.exception, [e.message for e in at.exception]
    (summary,) = [d.value for d in at.dataframe if "first_failure" in d.value.columns]
    status = dict(zip(summary["run"], summary["status"]))
    assert status[old] == "not a diag" and status[good] != "not a diag"
