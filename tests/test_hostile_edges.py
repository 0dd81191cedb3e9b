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

from regime_dash.cli import main
from regime_dash.core.config import FIELD_SLOTS, RegimeConfig
from regime_dash.errors import ConfigError

from hostile import REPO, child_env


def _cli(*args: str, cwd=REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "regime_dash", *args], capture_output=True, text=True,
                          cwd=cwd, env=child_env(), timeout=300)


def _run(capsys, *argv: str) -> tuple[int, str]:
    """One command in this process: its exit status and all it printed."""
    try:
        rc = main(list(argv))
    except SystemExit as exc:  # argparse's refusals
        rc = exc.code
    got = capsys.readouterr()
    return rc, got.out + got.err


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
