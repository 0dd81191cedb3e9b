"""Tags, notes, renames and aliases of stored runs: the store's side and the CLI's."""
from __future__ import annotations

import json
import threading

import pytest

from regime_dash.cli import main
from regime_dash.errors import StoreError, ValidationError
from regime_dash.store.open import open_store
from regime_dash.store.paths import run_dir
from regime_dash.store.run_store import RunStore
from regime_dash.store.labels import remove_alias, rename, set_note, tag, untag


def _diag(path, n: int, seed: int = 0):
    path.write_bytes(b"".join(b'{"step": %d, "risk_stack": {"regime": {"tail": {"recency": %d}}}}\n'
                              % (i, (i + seed) % 7) for i in range(n)))
    return path


@pytest.fixture
def two(tmp_path):
    store = RunStore(tmp_path / "store")
    a = store.ingest(_diag(tmp_path / "alpha.jsonl", 30))
    b = store.ingest(_diag(tmp_path / "beta.jsonl", 40, seed=3))
    return store, a.run_id, b.run_id


def test_copy_under_a_new_name_becomes_an_alias(tmp_path, two):
    store, a, _ = two
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes((tmp_path / "alpha.jsonl").read_bytes())
    res = store.ingest(copy)
    assert res.duplicate_of == a and res.alias_added == "copy"
    assert res.duplicate_text() == f"same content as run alpha ({a}); added the name copy"
    assert store.meta(a)["aliases"] == ["copy"]
    assert store.resolve("copy") == a and store.resolve_ref("copy") == (a, "alias")
    assert len(store.list_runs()) == 2
    again = store.ingest(copy)  # the same name again: nothing new, said so
    assert again.alias_added is None and "copy is already one of its names" in again.duplicate_text()
    assert store.meta(a)["aliases"] == ["copy"]


def test_an_alias_another_run_holds_is_not_added(tmp_path, two):
    store, a, b = two
    res = store.ingest((tmp_path / "alpha.jsonl").read_bytes(), name="beta")
    assert res.alias_added is None and res.alias_taken_by == b
    assert "run " + b + " already has it" in res.duplicate_text()
    assert store.meta(a).get("aliases", []) == [] and store.resolve("beta") == b


def test_tags_untag_and_notes(two):
    store, a, b = two
    assert tag(store, "alpha", ["seed1", "fold:2", "seed1"]) == ["fold:2", "seed1"]
    assert untag(store, a, ["seed1", "nope"]) == (["fold:2"], ["nope"])
    assert store.list_runs()[0]["tags"] == ["fold:2"] and store.list_runs()[1]["tags"] == []
    with pytest.raises(ValidationError, match="'a,b'") as e:
        tag(store, a, ["a,b"])
    assert e.value.field == "tag"
    assert set_note(store, b, "  lr too high \n") == "lr too high"
    assert store.meta(b)["notes"] == "lr too high"
    assert set_note(store, b, "") == "" and store.list_runs()[1]["notes"] == ""
    with pytest.raises(ValidationError, match="at most"):
        set_note(store, b, "x" * 10_001)


def test_rename_keeps_the_id_and_refuses_a_taken_name(tmp_path, two):
    store, a, b = two
    store.ingest((tmp_path / "alpha.jsonl").read_bytes(), name="copy")
    assert rename(store, "alpha", "first run") == {"run_id": a, "old": "alpha", "name": "first-run"}
    assert store.resolve("first-run") == a and store.meta(a)["run_id"] == a
    with pytest.raises(StoreError, match="no run named 'alpha'"):
        store.resolve("alpha")
    with pytest.raises(StoreError, match=f"run {b} already has"):
        rename(store, a, "beta")
    rename(store, a, "copy")  # its own alias becomes its name, and is no alias any more
    assert store.meta(a)["name"] == "copy" and store.meta(a)["aliases"] == []
    with pytest.raises(ValidationError):
        rename(store, a, "  ")


def test_remove_alias_keeps_the_run(tmp_path, two):
    store, a, _ = two
    store.ingest((tmp_path / "alpha.jsonl").read_bytes(), name="copy")
    assert remove_alias(store, "copy") == a
    assert store.meta(a)["aliases"] == [] and store.resolve("alpha") == a
    with pytest.raises(StoreError, match="not an alias"):
        remove_alias(store, "alpha")


def test_concurrent_tags_all_land(two):
    """Each change is a read-modify-replace under the store's lock: none overwrites another."""
    store, a, _ = two
    threads = [threading.Thread(target=tag, args=(RunStore(store.root), a, [f"t{i}"])) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.meta(a)["tags"] == sorted(f"t{i}" for i in range(8))
    assert not list(run_dir(store.root, a).glob("*.tmp"))


# ---- the CLI ------------------------------------------------------------------------------
def test_cli_ingest_says_alias_and_check_resolves_it(tmp_path, capsys):
    s = ["--store", str(tmp_path / "st")]
    a = _diag(tmp_path / "alpha.jsonl", 30)
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(a.read_bytes())
    assert main(["ingest", str(a), *s]) == 0
    rid = open_store(tmp_path / "st").resolve("alpha")
    capsys.readouterr()
    assert main(["ingest", str(copy), *s]) == 0
    assert f"same content as run alpha ({rid}); added the name copy" in capsys.readouterr().out
    assert main(["check", "copy", "--json", *s]) in (0, 1)  # a verdict, not "no run named" (exit 2)
    doc = json.loads(capsys.readouterr().out)
    assert "status" in doc and "checks" in doc


def test_cli_tag_untag_note_rename_runs_json(tmp_path, capsys):
    s = ["--store", str(tmp_path / "st")]
    main(["ingest", str(_diag(tmp_path / "alpha.jsonl", 30)), *s])
    rid = open_store(tmp_path / "st").resolve("alpha")
    assert main(["tag", "alpha", "seed1", "grid", *s]) == 0
    assert capsys.readouterr().out.strip().endswith("tags grid, seed1")
    assert main(["untag", "alpha", "grid", *s]) == 0
    assert main(["note", "alpha", "baseline", *s]) == 0
    assert main(["rename", "alpha", "base", *s]) == 0
    assert f"renamed alpha to base (run id {rid} unchanged)" in capsys.readouterr().out
    assert main(["tag", "alpha", "x", *s]) == 2  # the old name is gone
    assert "no run named 'alpha'" in capsys.readouterr().err
    assert main(["tag", "base", "bad tag", *s]) == 2
    assert "'bad tag'" in capsys.readouterr().err
    assert main(["runs", "--json", *s]) == 0
    (run,) = json.loads(capsys.readouterr().out)
    assert (run["name"], run["tags"], run["notes"], run["aliases"]) == ("base", ["seed1"], "baseline", [])


def test_cli_rm_of_an_alias_and_of_the_run(tmp_path, capsys):
    s = ["--store", str(tmp_path / "st")]
    a = _diag(tmp_path / "alpha.jsonl", 30)
    main(["ingest", str(a), *s])
    for n in ("c1", "c2"):
        main(["ingest", str(a), "--name", n, *s])
    rid = open_store(tmp_path / "st").resolve("alpha")
    capsys.readouterr()
    assert main(["rm", "c1", *s]) == 0
    assert f"removed the alias c1 of run {rid} (the run stays)" in capsys.readouterr().out
    assert open_store(tmp_path / "st").meta(rid)["aliases"] == ["c2"]
    assert main(["rm", "alpha", *s]) == 0
    assert f"deleted {rid} (and its aliases c2)" in capsys.readouterr().out
    assert open_store(tmp_path / "st").list_runs() == []
    assert main(["check", "c2", *s]) == 2
