from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from regime_dash.errors import StreamError, StreamErrors
from regime_dash.modules.pearl_c.stream import PearlCStream
from regime_dash.core.streams import Stream, load, validate


def _stream(rng, t=6, b=3, v_pred=False):
    return Stream.make(
        rewards=rng.normal(size=(t, b)), lots=rng.integers(0, 3, (t, b)),
        kelly_analytic=rng.normal(size=t), cooldown=np.zeros(t), session_pnl_worst=-np.arange(t, dtype=float),
        tau_action=rng.random(t), boundary=np.arange(t) == 3, step=np.arange(100, 100 + t),
        v_pred=rng.normal(size=(t, b)) if v_pred else None)


@pytest.mark.parametrize("suffix", [".parquet", ".npz"])
@pytest.mark.parametrize("v_pred", [False, True])
def test_round_trip(tmp_path, rng, suffix, v_pred):
    s = _stream(rng, v_pred=v_pred)
    back = load(s.save(tmp_path / f"s{suffix}"))
    assert back.arrays().keys() == s.arrays().keys()
    for name, arr in s.arrays().items():
        got = getattr(back, name)
        assert got.dtype == arr.dtype and np.array_equal(got, arr), name


def test_parquet_is_one_row_per_step_readable_by_pandas(tmp_path, rng):
    s = _stream(rng)
    frame = pd.read_parquet(s.save(tmp_path / "s.parquet"))
    assert len(frame) == 6 and list(frame["step"]) == list(range(100, 106))
    assert np.allclose(np.stack(frame["rewards"].to_numpy()), s.rewards)


@pytest.mark.parametrize("mutate, match", [
    (lambda kw: kw.update(rewards=np.zeros((0, 3))), "T = 0 steps"),
    (lambda kw: kw.update(rewards=np.zeros((4, 0)), lots=np.zeros((4, 0))), r"stream has 0 accounts \(rewards shape \(4, 0\)\)"),
    (lambda kw: kw.update(lots=np.zeros((4, 2))), r"lots has shape \(4, 2\), expected \(4, 3\)"),
    (lambda kw: kw.update(lots=np.full((4, 3), 0.5)), "lots must hold whole numbers.*0.5"),
    (lambda kw: kw.update(lots=-np.ones((4, 3))), "lots must be >= 0.*-1"),
    (lambda kw: kw.update(kelly_analytic=np.array([0, np.nan, 0, 0])), "kelly_analytic holds a non-finite value nan at step index 1"),
    (lambda kw: kw.update(rewards=np.where(np.eye(4, 3) > 0, np.inf, 0.0)), "rewards holds a non-finite value inf"),
    (lambda kw: kw.update(step=np.array([0, 1, 1, 2])), r"step\[1\]=1 is followed by step\[2\]=1"),
    (lambda kw: kw.update(boundary=np.array([0, 2, 0, 0])), "boundary must be boolean"),
    (lambda kw: kw.update(cooldown=np.array(["a", "b", "c", "d"])), "cooldown must be numeric"),
])
def test_validation_names_the_bad_value(mutate, match):
    kw = {"rewards": np.zeros((4, 3)), "lots": np.zeros((4, 3))}
    mutate(kw)
    with pytest.raises(StreamError, match=match):
        Stream.make(**kw)


def test_lazy_validation_collects_every_problem_at_once():
    bad = dict(rewards=np.zeros((4, 3)), lots=np.array([[0, 1, 0], [0, -2, 0], [0, 0, 0], [1, 1, 1]]),
               kelly_analytic=np.array([0, np.nan, 0, 0]), cooldown=np.zeros(5), boundary=np.array([0, 2, 0, 0]),
               step=np.array([0, 1, 1, 2]))
    with pytest.raises(StreamError) as eager:
        Stream.make(**bad)
    assert not isinstance(eager.value, StreamErrors)
    with pytest.raises(StreamErrors) as lazy:
        Stream.make(**bad, lazy=True)
    found = {e.field: e.value for e in lazy.value.errors}
    assert found.keys() == {"boundary", "lots", "kelly_analytic", "cooldown", "step"}
    assert found["lots"] == -2 and np.isnan(found["kelly_analytic"]) and found["cooldown"] == (5,)
    assert found["step"] == 1 and found["boundary"] == "int64"
    text = str(lazy.value)
    assert text.startswith("5 problem(s) in the stream") and "account 1 it holds -2" in text
    assert "cooldown has shape (5,), expected (4,)" in text


def test_lazy_validation_of_a_built_stream_and_a_module_stream():
    s = Stream.make(rewards=np.zeros((3, 2)), lots=np.zeros((3, 2)))
    validate(s, lazy=True)  # a good stream passes
    object.__setattr__(s, "rewards", np.full((3, 2), np.inf, np.float32))
    object.__setattr__(s, "tau_action", np.zeros(3))
    with pytest.raises(StreamErrors) as exc:
        validate(s, lazy=True)
    assert [e.field for e in exc.value.errors] == ["rewards", "tau_action"]
    with pytest.raises(StreamErrors) as exc:
        PearlCStream.make(updates=np.array([[0.0, np.inf], [1.0, 2.0]]), step=[5, 4], lazy=True)
    assert [(e.field, e.value) for e in exc.value.errors] == [("updates", np.inf), ("step", 4)]
    assert "at step index 0, column 1" in str(exc.value)


def test_direct_construction_checks_dtypes():
    with pytest.raises(StreamError, match="rewards must have dtype float32, got float64"):
        Stream(rewards=np.zeros((2, 2)), lots=np.zeros((2, 2), np.int32),
               kelly_analytic=np.zeros(2, np.float32), cooldown=np.zeros(2, np.float32),
               session_pnl_worst=np.zeros(2, np.float32), tau_action=np.zeros(2, np.float32),
               boundary=np.zeros(2, bool), step=np.arange(2))


def test_load_errors(tmp_path):
    with pytest.raises(StreamError, match="does not exist"):
        load(tmp_path / "missing.npz")
    np.savez(tmp_path / "x.npz", rewards=np.zeros((2, 2)), lots=np.zeros((2, 2)), bogus=np.zeros(2))
    with pytest.raises(StreamError, match=r"unknown stream field\(s\) \['bogus'\]"):
        load(tmp_path / "x.npz")
    with pytest.raises(StreamError, match="unknown stream file type '.csv'"):
        load((tmp_path / "x.csv").resolve()) if (tmp_path / "x.csv").write_text("a") else None


def test_fields_keep_the_schema_order():
    """Stream and StepStream share their per-step fields' declaration; their fields (and so their
    constructors' positional order and a saved file's columns) stay in the schema's order."""
    from dataclasses import fields

    from regime_dash.core.streams import SCHEMA, STEP_FIELDS, StepStream

    assert [f.name for f in fields(Stream)] == list(SCHEMA)
    assert [f.name for f in fields(StepStream)] == [*STEP_FIELDS, "accounts"]
    s = Stream.make(rewards=np.zeros((3, 2), np.float32), lots=np.zeros((3, 2), np.int32))
    assert list(s.arrays()) == [n for n in SCHEMA if n != "v_pred"]
    assert list(s.per_step().arrays()) == list(STEP_FIELDS)
