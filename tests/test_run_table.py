"""The runs table: config and summary per run (cached in the metadata), ``runs --json --tag --where``."""
from __future__ import annotations

import json

import pytest

import regime_dash as rd
from regime_dash.cli import main
from regime_dash.diag.jsonl import write as write_diag_jsonl
from regime_dash.errors import ValidationError
from regime_dash.runs.run_table import TABLE_KEY, filter_rows, parse_where, run_facts, table
from regime_dash.sources.scenarios import kelly_trap_run8
from regime_dash.store.run_store import RunStore
from regime_dash.store.labels import tag


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Two replays of one scenario under max_duration 300 and 900, stored as runs."""
    d = tmp_path_factory.mktemp("table")
    s = RunStore(d / "store")
    stream = kelly_trap_run8(seed=1, steps=2000)
    for md in (300, 900):
        path = d / f"md{md}.jsonl"
        write_diag_jsonl(rd.replay(stream, rd.RegimeConfig(max_duration=md), engine="reference"), path)
        s.ingest(path)
    return s


def test_config_and_summary_come_from_the_frame_and_are_cached(store):
    rows = table(store)
    by = {r["name"]: r for r in rows}
    assert by["md300"]["config"]["max_duration"] == 300 and by["md900"]["config"]["max_duration"] == 900
    assert by["md300"]["config"]["resurrection"] == 1.0 and by["md300"]["config_varies"] == []
    frame = store.load(by["md300"]["run_id"])
    summ = by["md300"]["summary"]
    assert summ["dead_zone_steps"] == int((frame["risk_stack.regime.dead_zone.flag"] == 1).sum())
    from regime_dash.runs.check_all import store_check

    doc = store_check(by["md300"]["run_id"], str(store.root))
    assert summ["verdict"] == doc["status"] and summ["fail"] == doc["counts"]["fail"]
    cached = store.meta(by["md300"]["run_id"])[TABLE_KEY]
    assert cached["rows"] == 2000 and cached["summary"] == summ
    # a cache for other rows (a followed run that grew) is computed again
    store.update_meta(by["md300"]["run_id"], lambda m: m[TABLE_KEY].update(rows=1, summary={"verdict": "stale"}))
    assert run_facts(store, by["md300"]["run_id"])["summary"] == summ


def test_filters(store):
    rows = table(store)
    assert [r["name"] for r in filter_rows(rows, where=["max_duration>500"])] == ["md900"]
    assert [r["name"] for r in filter_rows(rows, where=["max_duration<=300", "rows==2000"])] == ["md300"]
    assert filter_rows(rows, where=["name==md900"])[0]["config"]["max_duration"] == 900
    tag(store, "md300", ["short"])
    assert [r["name"] for r in filter_rows(table(store), tags=["short"])] == ["md300"]
    with pytest.raises(ValidationError, match="no run has a field 'nope'"):
        filter_rows(rows, where=["nope>1"])
    for bad in ("max_duration", "max_duration>abc", "=3"):
        with pytest.raises(ValidationError) as e:
            parse_where(bad)
        assert e.value.value == bad


def test_cli_runs_json_tag_where(store, capsys):
    s = ["--store", str(store.root)]
    tag(store, "md900", ["long"])
    assert main(["runs", "--json", *s]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {"name", "aliases", "tags", "notes", "config", "summary"} <= set(rows[0])
    assert main(["runs", "--json", "--where", "max_duration>500", *s]) == 0
    assert [r["name"] for r in json.loads(capsys.readouterr().out)] == ["md900"]
    assert main(["runs", "--tag", "long", *s]) == 0
    out = capsys.readouterr().out
    assert "md900" in out and "md300" not in out
    assert main(["runs", "--where", "max_duration>>1", *s]) == 2
    assert "max_duration>>1" in capsys.readouterr().err


def test_cli_where_compares_a_config_slot_at_float32(tmp_path, capsys):
    """The sample logs eps_min as its float32 slot holds it (0.05000000074505806): ``eps_min==0.05``
    matches it, and ``>``/``!=`` do not, as for any other value the slot holds exactly."""
    from regime_dash.sources.samples import DIAG_NAME, SAMPLE_DIR

    assert '"min":0.05000000074505806' in (SAMPLE_DIR / DIAG_NAME).read_text()[:2000]
    s = RunStore(tmp_path / "store")
    s.ingest(SAMPLE_DIR / DIAG_NAME, name="sample")
    args = ["--store", str(s.root)]

    def names(*where: str) -> list[str]:
        assert main(["runs", "--json", *[a for w in where for a in ("--where", w)], *args]) == 0
        return [r["name"] for r in json.loads(capsys.readouterr().out)]

    assert names("eps_min==0.05") == ["sample"]
    assert names("eps_min=0.05", "tau_min==0.1", "envelope_decay_alpha==0.01", "popart_alpha==0.001") == ["sample"]
    assert names("eps_min>=0.05", "eps_min<=0.05") == ["sample"]
    assert names("eps_min>0.05") == [] and names("eps_min<0.05") == [] and names("eps_min!=0.05") == []
    assert names("eps_min==0.051") == []  # another float32 value
    # a summary metric is not a config slot: compared as it is (the sample's σ max is 19.45199966430664)
    assert names("sigma_max==19.45199966430664") == ["sample"] and names("sigma_max==19.452") == []
    assert main(["runs", "--where", "eps_min==0.05", *args]) == 0
    assert "sample" in capsys.readouterr().out


def test_logged_config_alone_is_the_rows_config_without_judging_the_run(store):
    from regime_dash.runs.run_table import logged_config

    for r in store.list_runs():
        assert logged_config(store, r["run_id"]) == run_facts(store, r["run_id"])["config"]
    fresh = [r["run_id"] for r in store.list_runs()][0]
    store.update_meta(fresh, lambda m: m.pop(TABLE_KEY, None))
    assert logged_config(store, fresh)["max_duration"] in (300, 900)
    assert TABLE_KEY not in store.meta(fresh)  # read from the config columns: no verdict, nothing cached
