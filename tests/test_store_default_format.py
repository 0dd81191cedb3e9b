"""The format a store gets: a new local store gets the default format (one constant for every shell)
or the one asked (``--store-format`` or ``REGIME_DASH_STORE_FORMAT``); an existing store keeps its own;
ingest reports the same on either.

Each case runs the CLI on real folders and looks at what landed on disk: the Delta tables' logs, or
the folder store's ``run=*`` folders.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("deltalake", reason="deltalake is not installed (requirements.txt)")

from regime_dash.cli import main  # noqa: E402
from regime_dash.store.open import DEFAULT_FORMAT, FORMAT_ENV_VAR, open_store  # noqa: E402
from regime_dash.store.run_store import RunStore  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "samples" / "diag.jsonl"


def _head(tmp_path: Path, lines: int) -> Path:
    """The sample's first ``lines`` lines, a file of its own (bytes no other run here has)."""
    path = tmp_path / f"head{lines}.jsonl"
    path.write_bytes(b"".join(SAMPLE.read_bytes().splitlines(keepends=True)[:lines]))
    return path


def _layout(store: Path) -> str:
    """What is on disk: ``delta`` (a table log), ``folder`` (run folders), or both, or nothing."""
    delta = any((store / t / "_delta_log").is_dir() for t in ("runs", "rows"))
    folder = any(store.glob("run=*"))
    return {(True, False): "delta", (False, True): "folder", (False, False): "none"}.get((delta, folder), "both")


def _ingest(capsys, *args: str) -> list[dict]:
    capsys.readouterr()
    assert main(["ingest", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_new_local_store_asked_as_delta_is_one_and_every_command_reads_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(FORMAT_ENV_VAR, "delta")
    store = tmp_path / "store"
    made = _ingest(capsys, str(_head(tmp_path, 300)), "--name", "first", "--store", str(store))
    assert _layout(store) == "delta"
    monkeypatch.delenv(FORMAT_ENV_VAR)  # a Delta folder is known as one, whatever a new store would get
    assert open_store(store).format == "delta"
    assert main(["runs", "--json", "--store", str(store)]) == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)] == [made[0]["run_id"]]
    assert main(["rm", "first", "--store", str(store)]) == 0
    assert main(["restore", "first", "--store", str(store)]) == 0  # undo: a Delta store's
    capsys.readouterr()
    assert main(["runs", "--json", "--store", str(store)]) == 0
    assert [r["rows"] for r in json.loads(capsys.readouterr().out)] == [300]


def test_the_working_directorys_store_gets_the_default_format_and_the_variable_flips_it(tmp_path, capsys,
                                                                                          monkeypatch):
    monkeypatch.delenv(FORMAT_ENV_VAR, raising=False)
    monkeypatch.delenv("REGIME_DASH_STORE", raising=False)
    plain, flipped = tmp_path / "plain", tmp_path / "flipped"
    for cwd, fmt in ((plain, None), (flipped, "folder" if DEFAULT_FORMAT == "delta" else "delta")):
        cwd.mkdir()
        monkeypatch.chdir(cwd)
        if fmt:
            monkeypatch.setenv(FORMAT_ENV_VAR, fmt)
        _ingest(capsys, str(_head(tmp_path, 200)))
        assert _layout(cwd / "data" / "store") == (fmt or DEFAULT_FORMAT)


def test_a_folder_store_stays_a_folder_store(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(FORMAT_ENV_VAR, raising=False)
    store = tmp_path / "old"
    RunStore(store).ingest(_head(tmp_path, 100), name="old")
    _ingest(capsys, str(_head(tmp_path, 200)), "--store", str(store))
    _ingest(capsys, str(_head(tmp_path, 250)), "--store", str(store), "--store-format", "delta")
    assert _layout(store) == "folder" and len(list(store.glob("run=*"))) == 3
    assert main(["runs", "--json", "--store", str(store)]) == 0
    assert sorted(r["rows"] for r in json.loads(capsys.readouterr().out)) == [100, 200, 250]


def test_the_folder_layout_is_had_by_asking(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(FORMAT_ENV_VAR, raising=False)
    by_flag, by_env = tmp_path / "flag", tmp_path / "env"
    _ingest(capsys, str(_head(tmp_path, 100)), "--store", str(by_flag), "--store-format", "folder")
    assert _layout(by_flag) == "folder"
    monkeypatch.setenv(FORMAT_ENV_VAR, "folder")
    _ingest(capsys, str(_head(tmp_path, 100)), "--store", str(by_env))
    assert _layout(by_env) == "folder"
    assert main(["ingest", str(_head(tmp_path, 50)), "--store", str(by_flag), "--store-format", "parquet"]) == 2
    assert "'parquet'" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["delta", "folder"])
def test_ingest_reports_where_the_steps_go_back_in_either_format(tmp_path, capsys, fmt):
    """A resumed file (lines 101..200 again after 300 lines): ingest says where its steps first go back."""
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    resumed = tmp_path / "resumed.jsonl"
    resumed.write_bytes(b"".join(lines[:300] + lines[100:200]))
    (ing,) = _ingest(capsys, str(resumed), "--store", str(tmp_path / fmt), "--store-format", fmt)
    assert _layout(tmp_path / fmt) == fmt
    assert ing["structure"]["goes_back"] == 1
    assert ing["structure"]["first"] == {"row": 300, "line": 301, "step": 100.0, "after": 299.0}
