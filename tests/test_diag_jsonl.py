"""The column-wise diag.jsonl writer writes the bytes of the row-by-row writer it replaced."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from regime_dash import replay
from regime_dash.diag import catalogue as diag
from regime_dash.diag import jsonl as diag_jsonl
from regime_dash.sources import scenarios
from regime_dash.sources import simulator
from regime_dash.modules import MODULES, get
from tests.diag_writer_oracle import jsonl_bytes

# A few hundred steps each (kelly_trap_run8 needs its 1,737 trap steps and 200 more).
SCENARIO_STEPS = {"kelly_trap_run8": 1990, "tail_shock": 300, "recorded": 400}


def _written(frame: pd.DataFrame, tmp_path, **kw) -> bytes:
    return diag.write_jsonl(frame, tmp_path / "out.jsonl", **kw).read_bytes()


def _same_as_oracle(frame: pd.DataFrame, tmp_path) -> None:
    want = jsonl_bytes(frame)
    got = _written(frame, tmp_path)
    assert got == want
    assert diag_jsonl.write(frame, tmp_path / "small.jsonl", skip_nan=diag.META_COLUMNS,
                            chunk_rows=97).read_bytes() == want  # chunk edges change nothing


@pytest.mark.parametrize("name", sorted(scenarios.SCENARIOS))
def test_every_scenario_is_written_byte_for_byte(name, tmp_path):
    stream = scenarios.make(name, steps=SCENARIO_STEPS.get(name, 250), accounts=32)
    _same_as_oracle(replay(stream, engine="reference"), tmp_path)


@pytest.mark.parametrize("name", sorted(simulator.PRESETS))
def test_every_simulator_preset_is_written_byte_for_byte(name, tmp_path):
    _same_as_oracle(simulator.simulate(name, steps=300, accounts=16).frame(), tmp_path)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_frame_is_written_byte_for_byte(name, tmp_path):
    m = get(name)
    frame = m.replay(m.demo_stream(0, None), None, "reference")
    _same_as_oracle(frame, tmp_path)


def _float32_bits(rng, n: int) -> np.ndarray:
    """float32 values of every exponent: random bit patterns, with the special values."""
    x = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32).copy()
    x[:12] = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-5, 1e-4, 1e16, 3.4028235e38, 1e-45, 123.0, -1.5e-5]
    return x


@pytest.mark.slow  # a million floats written and compared: ~1.2 s of CPU
def test_floats_of_every_magnitude_are_pythons_repr(tmp_path, rng):
    x32 = _float32_bits(rng, 200_000)
    x64 = rng.integers(0, 2 ** 64, 200_000, dtype=np.uint64).view(np.float64)
    with np.errstate(invalid="ignore"):  # signalling NaN patterns
        wide = x32.astype(np.float64)
    for x in (wide, x64):
        want = [{"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}.get(r, r) for r in map(repr, x.tolist())]
        assert diag_jsonl.float_tokens(x).to_pylist() == want
    frame = pd.DataFrame({"risk_stack.popart.var": x32[:5000], "risk_stack.f64": x64[:5000]})
    _same_as_oracle(frame, tmp_path)


def test_missing_values_and_odd_columns(tmp_path, rng):
    n = 300
    step = np.arange(n, dtype=np.float64)
    step[[3, 50, 51]] = np.nan  # a meta NaN leaves "step" out of the row
    phase = np.array(["train", "eval", None, "é\"\\\n\u2028"] * (n // 4), dtype=object)
    mixed = np.array([1, True, 2.5, None, "x", np.float32(0.1), np.int64(-7), False, np.nan] * 34,
                     dtype=object)[:n]
    frame = pd.DataFrame({
        "step": step, "phase": phase,
        "a.x": mixed,  # a.x missing in some rows moves group "a" after "b" there, as unflatten does
        "b.y": rng.normal(size=n).astype(np.float32),
        "a.z": rng.integers(-2 ** 63, 2 ** 63 - 1, n, dtype=np.int64),
        "a.flag": rng.random(n) < 0.5,
        "c.u": rng.integers(0, 2 ** 64, n, dtype=np.uint64),
        "c.const": np.full(n, -0.0, np.float32),
        "c.zero": np.zeros(n, np.float32),
        "c.nan": np.full(n, np.nan, np.float32),  # NaN outside the meta columns is written
        "wall_time": np.where(rng.random(n) < 0.3, np.nan, 1.7e9 + np.arange(n)),
    })
    frame["c.zero"] = frame["c.zero"].astype(np.float32)
    _same_as_oracle(frame, tmp_path)


def test_constant_and_empty_frames(tmp_path):
    _same_as_oracle(pd.DataFrame({"step": np.arange(5), "k": np.ones(5, np.float32)}), tmp_path)
    _same_as_oracle(pd.DataFrame({"step": np.arange(0)}), tmp_path)


def test_a_failed_write_leaves_no_file(tmp_path):
    frame = pd.DataFrame({"step": np.arange(200), "x": [1.0] * 199 + [object()]})
    with pytest.raises(TypeError):
        diag_jsonl.write(frame, tmp_path / "out.jsonl", chunk_rows=50)
    assert list(tmp_path.iterdir()) == []


def test_progress_follows_the_chunks(tmp_path):
    seen = []
    diag_jsonl.write(pd.DataFrame({"step": np.arange(250)}), tmp_path / "p.jsonl", chunk_rows=100,
                     progress=lambda done, total: seen.append((done, total)))
    assert seen == [(100, 250), (200, 250), (250, 250)]
