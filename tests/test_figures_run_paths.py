"""regime_dash.figures.signals: every way of building a run's traces gives the same traces, on awkward runs.

The signal panels are drawn from one run at a time (:func:`regime_dash.figures.signals.run_traces`), either
fresh, through a caller's ``memo`` (the dashboard's per-run cache, smoothing moving back and forth)
or through a caller's ``traces_of`` (the Replay page's kept baseline). Each run here takes one of the
drawing's side paths: duty bands, NaN/±Inf, a wall clock that steps back, rows out of order,
fractional steps, a run too long for the memo to keep its columns.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from regime_dash import RegimeConfig, replay
from regime_dash.diag import catalogue as diag
from regime_dash.sources import scenarios

figures = pytest.importorskip("regime_dash.figures.signals")

COLOUR = "#EF553B"


@pytest.fixture(scope="module")
def trap() -> pd.DataFrame:
    return replay(scenarios.make("kelly_trap_run8"), RegimeConfig(resurrection=False, max_duration=100),
                  engine="reference")


def _flipping(trap: pd.DataFrame, n: int = 20_000) -> pd.DataFrame:
    """A dead zone (and the counters and Kelly with it) that flips every other step: duty bands."""
    s = np.arange(n)
    frame = trap.iloc[s % len(trap)].reset_index(drop=True)
    return frame.assign(**{"step": s, diag.FLAG: (s % 2).astype(np.float32),
                           diag.DURATION: (s % 2).astype(np.float32),
                           diag.TIMEOUT: (s % 4 == 3).astype(np.float32),
                           diag.RECENCY: (s % 3).astype(np.float32),
                           diag.REMAINING: ((s // 2) % 2 * 5).astype(np.float32),
                           diag.KELLY: np.where(s % 2 == 0, 0.0, 0.25).astype(np.float32)})


def _nonfinite(trap: pd.DataFrame) -> pd.DataFrame:
    """NaN and ±Inf in float32 and float64 columns, an all-NaN column and a column of text."""
    frame = trap.copy()
    sigma = frame[diag.SIGMA].to_numpy().copy()
    sigma[[5, 6, 700]] = [np.nan, np.inf, -np.inf]
    kelly = frame[diag.KELLY].to_numpy(dtype=np.float64).copy()
    kelly[[10, len(kelly) - 1]] = [np.nan, np.inf]
    factor = frame[diag.FACTOR].astype(str).astype(object)
    factor.iloc[7] = "not a number"
    return frame.assign(**{diag.SIGMA: sigma, diag.KELLY: kelly, diag.ENVELOPE: np.nan, diag.FACTOR: factor})


def _clock_back(trap: pd.DataFrame) -> pd.DataFrame:
    """A wall clock that steps back 40 s halfway: its rows are drawn sorted by time, not by step."""
    wall = 1.7e9 + 0.5 * np.arange(len(trap))
    wall[len(trap) // 2:] -= 40.0
    return trap.assign(wall_time=wall)


CASES = {
    "flipping": (_flipping, "step"),
    "nonfinite": (_nonfinite, "step"),
    "clock back": (_clock_back, "wall_time"),
    "rows shuffled": (lambda f: f.sample(frac=1.0, random_state=3), "step"),
    "fractional steps": (lambda f: f.assign(step=f["step"] + 0.5), "step"),
}


def _canonical(traces: list[dict]) -> list[dict]:
    """The traces with every array as its dtype and bytes: equal exactly when the JSON sent is."""
    def value(v):
        if isinstance(v, np.ndarray):
            return (v.dtype.str, v.shape, v.tobytes() if v.dtype.kind != "O" else repr(v.tolist()))
        if isinstance(v, dict):
            return {k: value(w) for k, w in v.items()}
        return repr(v)
    return [{k: value(v) for k, v in t.items()} for t in traces]


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_memo_gives_the_fresh_traces_as_smoothing_moves_back_and_forth(trap, case):
    make, x = CASES[case]
    frame = make(trap)
    memo: dict = {}
    for weight in (0.0, 0.6, 0.0, 0.3, 0.6):
        kept = figures.run_traces("r", frame, COLOUR, x=x, smoothing=weight, widen=1.7, memo=memo)
        fresh = figures.run_traces("r", frame, COLOUR, x=x, smoothing=weight, widen=1.7)
        assert _canonical(kept) == _canonical(fresh), weight
    assert {k[0] for k in memo} >= {"line", "col"}


def test_a_run_too_long_to_keep_its_columns_keeps_its_traces_and_draws_the_same(trap, monkeypatch):
    monkeypatch.setattr(figures, "MEMO_ROWS", len(trap) - 1)
    memo: dict = {}
    for weight in (0.5, 0.0, 0.5):
        kept = figures.run_traces("r", trap, COLOUR, smoothing=weight, memo=memo)
        assert _canonical(kept) == _canonical(figures.run_traces("r", trap, COLOUR, smoothing=weight))
    assert not any(k[0] == "col" for k in memo) and ("line", 1, "duration") in memo


@pytest.mark.parametrize("case", sorted(CASES))
def test_traces_of_keeping_a_baseline_gives_the_plain_figure(trap, case):
    make, x = CASES[case]
    runs = {"baseline": make(trap), "what-if": trap.assign(wall_time=1.7e9 + np.arange(len(trap)))}
    kept: dict = {}

    def traces_of(label, frame, colour, **kw):
        if label != "baseline":
            return figures.run_traces(label, frame, colour, **kw)
        return kept.setdefault("baseline", figures.run_traces(label, frame, colour, **kw))

    plain = figures.signal_spec(runs, x=x, smoothing=0.4, n_out=500)
    for _ in range(2):  # the second figure takes the kept baseline
        hooked = figures.signal_spec(runs, x=x, smoothing=0.4, n_out=500, traces_of=traces_of)
        assert _canonical(hooked["data"]) == _canonical(plain["data"]) and hooked["layout"] == plain["layout"]


def test_the_cases_reach_the_paths_they_are_here_for(trap):
    """Duty bands where the flags flip, NaN markers where values are not finite, time-sorted x."""
    flipping = figures.run_traces("r", _flipping(trap), COLOUR)
    banded = {t["name"] for t in flipping if "customdata" in t and t.get("fill") == "tozeroy"}
    # "r": the duration, the run's first series, carries the legend entry
    assert banded == {"r", "r dead-zone episode", "r timeout", "r recency+1", "r transition remaining", "r kelly_f"}
    nonfinite = {t["name"] for t in figures.run_traces("r", _nonfinite(trap), COLOUR)
                 if t["name"].endswith("non-finite")}
    assert nonfinite == {"r σ non-finite", "r kelly_f non-finite", "r recovery factor non-finite"}
    clock = figures.run_traces("r", _clock_back(trap), COLOUR, x="wall_time")
    line = next(t for t in clock if t["name"] == "r ε live")
    assert np.all(np.diff(line["x"].astype(np.int64)) >= 0) and len(line["x"]) > 2
    shuffled = figures.run_traces("r", trap.sample(frac=1.0, random_state=3), COLOUR)
    assert _canonical(shuffled) == _canonical(figures.run_traces("r", trap, COLOUR))
