"""Hostile text, stream files and config values.

* **Text**: what a command prints (and the Runs page's table) shows control, newline and bidi
  characters escaped: a file named with a newline forges no row of ``runs``' table, a right-to-left
  override shows as ``\\u202e``.
* **Ragged streams**: a Parquet stream whose per-step lists hold the right total but a value shifted
  between steps is refused, naming the step and the lengths, by ``replay --stream`` and by the
  dashboard's upload path (one reader).
* **Config values past float32**: a value its float32 slot would hold as ±inf, as 0 or a subnormal,
  or (a whole-number field) as another number is refused naming the slot, the value and what the slot
  holds, wherever a config is built; no diag the tool writes holds ``Infinity`` for a config value.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from regime_dash.core.config import FIELD_SLOTS, RegimeConfig
from regime_dash.errors import ConfigError

from hostile import REPO, child_env
from hostile import cli_in_process as _run


def _cli(*args: str, cwd=REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "regime_dash", *args], capture_output=True, text=True,
                          cwd=cwd, env=child_env(), timeout=300)


# ------------------------------------------------------------- config values past float32

#: (setting, what the refusal says the float32 does to it)
PAST_FLOAT32 = [
    ("max_duration=1e39", "overflows to inf in float32"),
    ("tau_boost_factor=1e39", "overflows to inf in float32"),
    ("tau_boost_factor=-1e39", "overflows to -inf in float32"),
    ("popart_alpha=1e-46", "underflows to 0 in float32"),
    ("kelly_cap=1e-46", "underflows to 0 in float32"),
    ("tail_sigma_threshold=1e-40", "underflows to the subnormal"),
    ("max_duration=16777217", "is held as 16777216.0 in float32"),
]


@pytest.mark.parametrize("setting,problem", PAST_FLOAT32)
def test_set_past_float32_is_refused_naming_the_slot_and_its_range(tmp_path, setting, problem):
    """``replay --set`` in a real process: exit 2, one line naming the field, the value, its slot and
    what the slot holds; no diag is written (the start commit wrote one with ``Infinity``)."""
    out = tmp_path / "out.jsonl"
    proc = _cli("replay", "--scenario", "calm", "--steps", "20", "--accounts", "4", "--engine", "reference",
                "--set", setting, "--out", str(out))
    field = setting.split("=")[0]
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith(f"error: {field}=") and problem in line, line
    assert FIELD_SLOTS[field] in line and ("3.4028235e+38" in line or "16,777,216" in line), line
    assert not out.exists()


def test_every_entry_point_that_builds_a_config_refuses_the_same_values(capsys):
    """The constructor (the sliders' and the repair search's configs), ``replace``, ``--set``'s parser,
    ``from_isv`` (stored slot values), a sweep's ``--grid`` and a live run's ``--change``."""
    from regime_dash.engine.config_grid import ConfigGrid

    for build in (lambda: RegimeConfig(tau_boost_factor=1e39), lambda: RegimeConfig().replace(kelly_cap=1e-46),
                  lambda: RegimeConfig().with_settings(["max_duration=1e39"]),
                  lambda: RegimeConfig.from_isv({FIELD_SLOTS["popart_alpha"]: 1e-46}),
                  lambda: ConfigGrid.of({"max_duration": [100, 1e39]})):
        with pytest.raises(ConfigError, match="float32"):
            build()
    rc, text = _run(capsys, "sweep", "--scenario", "calm", "--steps", "20", "--accounts", "4",
                    "--grid", "tau_boost_factor=1.5,1e39")
    assert rc == 2 and "tau_boost_factor=1e+39 overflows to inf" in text, text
    rc, text = _run(capsys, "replay", "--scenario", "calm", "--steps", "20", "--accounts", "4", "--live",
                    "--change", "5:max_duration=1e39")
    assert rc == 2 and "max_duration=1e+39 overflows to inf" in text, text


def test_values_the_float32_slot_holds_still_pass():
    """The edges that fit: the largest float32, the smallest normal one, 0, a whole number float32 holds
    exactly past 2**24; each is kept as given."""
    assert RegimeConfig(tau_boost_factor=3.4028234e38).tau_boost_factor == 3.4028234e38
    assert RegimeConfig(popart_alpha=1.2e-38).popart_alpha == 1.2e-38
    assert RegimeConfig(eps_min=0.0, max_duration=2.0 ** 30).max_duration == 2.0 ** 30


def test_a_module_config_refuses_a_value_its_float32_flushes():
    from regime_dash.modules.sp14_alpha_grad_gate.config import Sp14Config

    with pytest.raises(ConfigError, match=r"hysteresis=1e-46 underflows to 0 in float32"):
        Sp14Config(hysteresis=1e-46)
    assert Sp14Config(hysteresis=0.0).hysteresis == 0.0


@pytest.mark.parametrize("bootstrap", ["1e39", "1e-46", "inf", "nan"])
def test_a_slot_table_bootstrap_the_float32_buffer_would_not_hold_is_refused(tmp_path, bootstrap):
    """A slot table (the registry's ``slots.csv``, a user's own) whose bootstrap the float32 ISV buffer
    would hold as ±inf, NaN or 0: refused naming the file, the line and the value."""
    from regime_dash.core.slots import read_table
    from regime_dash.errors import SlotLayoutError

    lines = (REPO / "regime_dash" / "core" / "slots.csv").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line and not line.startswith(("#", "name,")))
    cells = lines[at].split(",")
    cells[3] = bootstrap
    lines[at] = ",".join(cells)
    table = tmp_path / "slots.csv"
    table.write_text("\n".join(lines) + "\n")
    with pytest.raises(SlotLayoutError, match=rf"slots.csv:{at + 1}: bootstrap '{bootstrap}' is not a number "
                                              r"a float32 slot holds"):
        read_table(table)


# ------------------------------------------------------------- ragged stream files


def _ragged_parquet(tmp_path, lengths=(3, 4, 2), field="lots"):
    """A Parquet stream as :meth:`Stream.save` writes it (3 steps × 3 accounts), then ``field``'s per-step
    lists rewritten with ``lengths`` values: the same 9 values in all, one shifted between steps."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from regime_dash.core.streams import Stream

    path = tmp_path / "stream.parquet"
    steps = len(lengths)
    Stream.make(rewards=np.linspace(-1, 1, 3 * steps, dtype=np.float32).reshape(steps, 3),
                lots=np.arange(3 * steps, dtype=np.int32).reshape(steps, 3)).save(path)
    table = pq.read_table(path)
    flat = table.column(field).combine_chunks().flatten().to_pylist()
    assert sum(lengths) == len(flat)  # the planted case: the total is right
    cut = np.cumsum((0, *lengths))
    kind = table.schema.field(field).type.value_type
    rows = pa.array([flat[a:b] for a, b in zip(cut[:-1], cut[1:])], type=pa.list_(kind))
    pq.write_table(table.set_column(table.column_names.index(field), field, rows), path)
    return path


@pytest.mark.parametrize("field", ["lots", "rewards"])
def test_replay_refuses_a_ragged_parquet_stream_naming_the_row_and_the_lengths(tmp_path, field):
    """``replay --stream`` in a real process: exit 2, the row, the length found and the one expected; no
    diag written (the start commit replayed it, each account after the shift reading another's lots)."""
    path = _ragged_parquet(tmp_path, field=field)
    out = tmp_path / "out.jsonl"
    proc = _cli("replay", "--stream", str(path), "--engine", "reference", "--out", str(out))
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert f"error: {field} is ragged: row 1 (step index 1) holds 4 value(s), expected 3" in line, line
    assert "2 of the 3 rows read differ (lengths 3, 4, 2 from row 0)" in line, line
    assert not out.exists()


def test_every_stream_reader_refuses_the_ragged_file(tmp_path):
    """The whole-file load, the block reader (the upload path's and the light replay's), at any block
    size, and a null list: each names the first odd row; the rectangular file still reads."""
    import numpy as np

    from regime_dash.core.streams import StreamFile, load
    from regime_dash.engine import file_phase1
    from regime_dash.errors import StreamError

    ragged = _ragged_parquet(tmp_path, lengths=(3, 3, 3, 3, 2, 4))
    for read in (lambda: load(ragged), lambda: file_phase1.open_light(ragged),
                 lambda: list(StreamFile(ragged).blocks(rows=1)), lambda: list(StreamFile(ragged).blocks(rows=4))):
        with pytest.raises(StreamError, match=r"lots is ragged: row 4 \(step index 4\) holds 2 value\(s\), "
                                              r"expected 3"):
            read()
    good = _ragged_parquet(tmp_path, lengths=(3, 3, 3))
    assert np.array_equal(load(good).lots, np.arange(9).reshape(3, 3))
    assert file_phase1.open_light(good).accounts == 3


def test_the_dashboards_stream_upload_refuses_the_ragged_file(tmp_path, monkeypatch):
    """The Replay page's "Stream file" upload (a real AppTest run): the refusal is shown, naming the row;
    no exception reaches the page."""
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("REGIME_DASH_STORE", str(tmp_path / "store"))
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=300)
    at.switch_page("regime_dash/ui/pages/replay.py").run()
    at.radio(key="replay.source.kind").set_value("Stream file").run()
    ragged = _ragged_parquet(tmp_path)
    at.file_uploader(key="replay.source.file").set_value(
        ("ragged.parquet", ragged.read_bytes(), "application/octet-stream")).run()
    assert not at.exception, [e.message for e in at.exception]
    shown = " ".join(e.value for e in at.error)
    assert "ragged" in shown and "row 1" in shown and "expected 3" in shown, shown


# ------------------------------------------------------------- text: newlines and bidi controls

RLO, LRI, PDI, RLM = "\u202e", "\u2066", "\u2069", "\u200f"
#: What must never reach a terminal or a table raw: the bidi controls the escaping covers.
RAW_BIDI = __import__("re").compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")


def _diag(path, steps: int = 6):
    path.write_text("".join(json.dumps({"step": i, "risk_stack": {"popart": {"sigma": 1.0 + i}}}) + "\n"
                            for i in range(steps)))
    return path


def test_a_newline_in_a_source_files_name_forges_no_row_of_the_runs_table(tmp_path):
    """A real file named ``a\\n<a forged row>.jsonl`` ingested and listed in real processes: ``runs`` prints
    one header and one row a run (the start commit printed the forged line as a row of its own)."""
    store = tmp_path / "store"
    forged = "run=ffffffffffff  forged  -  -  999  0  0..998  2001-01-01  passwd.jsonl"
    src = _diag(tmp_path / f"a\n{forged}\r.jsonl")
    assert _cli("ingest", str(src), "--store", str(store)).returncode == 0
    _diag(tmp_path / f"b{RLO}lmth.exe", steps=3)
    assert _cli("ingest", str(tmp_path / f"b{RLO}lmth.exe"), "--store", str(store)).returncode == 0
    listed = _cli("runs", "--store", str(store))
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert len(lines) == 3 and lines[0].startswith("RUN "), lines  # the header and the two runs
    assert not any(line.startswith("run=ffffffffffff") for line in lines), lines
    assert f"a\\n{forged}\\r.jsonl" in lines[1], lines[1]  # the name and source, escaped in their cells
    assert "b\\u202elmth.exe" in lines[2] and not RAW_BIDI.search(listed.stdout), lines[2]


def test_bidi_controls_and_newlines_in_labels_paths_and_keys_are_printed_escaped(tmp_path, capsys):
    """A run's name, tag, note and alias, a source path, a key and a set-aside value carrying bidi
    controls and newlines, through ingest, runs, tag, untag, note, rename, rm, check, diff and
    argparse: nothing prints them raw, and a newline inside one starts no line."""
    from regime_dash.store.open import open_store

    store = str(tmp_path / "store")
    lines = [json.dumps({"step": i, f"k{RLO}\ny": float(i)}) for i in range(6)]
    lines.append(json.dumps({"step": 6, f"k{RLO}\ny": f"text{LRI}\nFORGED{PDI}"}))  # set aside: a string
    src = tmp_path / f"evil{RLO}\nFORGED.jsonl"
    src.write_text("\n".join(lines) + "\n")
    other = tmp_path / f"other{RLM}.jsonl"
    other.write_text("\n".join(lines[:-1]).replace(': 5.0', ': 9.0') + "\n")
    printed = {"ingest": _run(capsys, "ingest", str(src), "--store", store)}
    rid = open_store(store).list_runs()[0]["run_id"]
    printed["tag"] = _run(capsys, "tag", rid, f"t{RLO}\nFORGED", "--store", store)
    printed["untag"] = _run(capsys, "untag", rid, f"u{LRI}\nFORGED", "--store", store)
    printed["note"] = _run(capsys, "note", rid, f"n{RLO}\nFORGED", "--store", store)
    printed["rename"] = _run(capsys, "rename", rid, f"name{RLO}x", "--store", store)
    printed["runs"] = _run(capsys, "runs", "--store", store)
    printed["check file"] = _run(capsys, "check", str(src), "--store", store)
    printed["diff"] = _run(capsys, "diff", str(src), str(other), "--store", store)
    printed["rm"] = _run(capsys, "rm", f"gone{RLO}\nFORGED", "--store", store)
    printed["argparse"] = _run(capsys, "runs", f"--x{RLO}\nFORGED")
    for what, (rc, text) in printed.items():
        assert not RAW_BIDI.search(text), f"{what} (exit {rc}) printed a raw bidi control: {text!r}"
        assert not any(line.startswith("FORGED") for line in text.splitlines()), f"{what}: {text!r}"
    assert "evil\\u202e\\nFORGED.jsonl" in printed["ingest"][1]
    assert "k\\u202e\\ny = " in printed["ingest"][1] and "line 7" in printed["ingest"][1]
    assert "t\\u202e\\nFORGED" in printed["tag"][1] and "u\\u2066\\nFORGED" in printed["untag"][1]
    assert printed["tag"][0] == 2 and printed["rename"][0] == 0  # refused, echoed escaped; a slug name
    assert "evil\\u202e\\nFORGED.jsonl" in printed["runs"][1]  # the source, in its cell
    assert "evil\\u202e\\nFORGED.jsonl" in printed["check file"][1]
    assert printed["diff"][0] == 1 and "k\\u202e\\ny" in printed["diff"][1]
    assert printed["rm"][0] == 2 and printed["argparse"][0] == 2
    meta = open_store(store).meta(rid)
    assert meta["notes"] == f"n{RLO}\nFORGED"  # stored as given; only its printing is escaped


def test_the_runs_page_table_shows_names_and_sources_escaped(tmp_path, monkeypatch):
    """The Runs page (a real AppTest run) over a run whose source path and note hold a right-to-left
    override, an isolate and newlines: the table's cells hold the escapes, not the raw characters (a
    run's name is a slug the store makes and a tag is refused: no control reaches them)."""
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    from regime_dash.store.run_store import RunStore

    store = RunStore(tmp_path / "store")
    src = _diag(tmp_path / f"src{RLO}\nx.jsonl")
    rid = store.ingest(src).run_id
    from regime_dash.store.labels import set_note

    set_note(store, rid, f"line one\nline{LRI} two")
    monkeypatch.setenv("REGIME_DASH_STORE", str(store.root))
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=300)
    at.switch_page("regime_dash/ui/pages/runs.py").run()
    assert not at.exception, [e.message for e in at.exception]
    frames = [d.value for d in at.dataframe if "name" in getattr(d.value, "columns", [])]
    assert frames, "no runs table on the page"
    row = frames[0].set_index("run_id").loc[rid]
    assert "src\\u202e\\nx.jsonl" in row["source"], dict(row)
    assert row["notes"] == "line one\\nline\\u2066 two", row["notes"]


def test_the_escaping_function_covers_every_bidi_control_and_keeps_composed_lines():
    from regime_dash.text import markdown_literal, terminal_safe

    bidi = "".join(chr(c) for c in [*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C])
    assert terminal_safe(f"a{bidi}\n\t\r\x1bb") == ("a" + "".join(f"\\u{ord(c):04x}" for c in bidi)
                                                  + "\\n\\t\\r\\x1bb")
    assert terminal_safe(f"report\n\tline{RLO}", lines=True) == "report\n\tline\\u202e"
    assert RLO not in markdown_literal(f"x{RLO}y") and "u202e" in markdown_literal(f"x{RLO}y")
