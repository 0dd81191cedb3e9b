"""regime_dash.figures.duty: per-column duty fractions from every step, and the bands drawn with them."""
from __future__ import annotations

import numpy as np
import pytest

from regime_dash import RegimeConfig, replay
from regime_dash.diag import catalogue as diag
from regime_dash.sources import scenarios
from regime_dash.figures import duty as fd
from regime_dash.errors import ValidationError


def _loop_columns(x, v, columns):
    """The columns written out step by step (the reference the vectorised cut must match)."""
    width = (x[-1] - x[0]) / columns
    out: dict[int, list[float]] = {}
    for xi, vi in zip(x, v):
        c = 0 if width <= 0 else min(int((xi - x[0]) / width), columns - 1)
        out.setdefault(c, []).append(vi)
    return [(np.mean(np.asarray(vals) != 0), min(vals), max(vals), len(vals)) for _, vals in sorted(out.items())]


@pytest.mark.parametrize("n, columns", [(3000, 700), (1001, 100), (50, 200), (7, 3), (1, 5)])
def test_columns_match_a_step_by_step_loop(rng, n, columns):
    x = np.cumsum(rng.integers(1, 4, size=n)).astype(np.float64)
    v = rng.integers(0, 3, size=n).astype(np.float64)
    cols = fd.duty_columns(x, v, columns)
    want = _loop_columns(x, v, columns)
    assert len(cols.on) == len(want) <= columns
    np.testing.assert_allclose(cols.on, [w[0] for w in want])
    np.testing.assert_array_equal(cols.lo, [w[1] for w in want])
    np.testing.assert_array_equal(cols.hi, [w[2] for w in want])
    assert cols.steps.sum() == n and list(cols.steps) == [w[3] for w in want]
    assert np.all(cols.x0 <= cols.x1) and np.all(cols.x1[:-1] < cols.x0[1:])


def test_alternating_flag_is_half_on_in_every_column():
    x = np.arange(1000, dtype=np.float64)
    flag = (np.arange(1000) % 2).astype(np.float64)
    cols = fd.duty_columns(x, flag, 100)  # ten steps a column: five on
    np.testing.assert_array_equal(cols.on, 0.5)
    assert cols.x0[0] == 0 and cols.x1[0] == 9 and cols.x0[-1] == 990 and cols.x1[-1] == 999
    assert fd.flips_fast(flag, 100) and fd.on_off_flips(flag) == 999


def test_n_not_a_multiple_of_the_columns_keeps_every_step():
    x = np.arange(1003, dtype=np.float64)
    flag = np.zeros(1003)
    flag[::3] = 1.0
    cols = fd.duty_columns(x, flag, 10)
    assert cols.steps.sum() == 1003
    assert (cols.on * cols.steps).sum() == pytest.approx(flag.sum())  # every on step counted once


def test_all_on_all_off_and_a_single_flip():
    x = np.arange(500, dtype=np.float64)
    np.testing.assert_array_equal(fd.duty_columns(x, np.ones(500), 50).on, 1.0)
    np.testing.assert_array_equal(fd.duty_columns(x, np.zeros(500), 50).on, 0.0)
    step = (x >= 255).astype(np.float64)
    cols = fd.duty_columns(x, step, 50)
    assert cols.on[25] == 0.5 and set(cols.on[:25]) == {0.0} and set(cols.on[26:]) == {1.0}
    for v in (np.ones(500), np.zeros(500), step):
        assert not fd.flips_fast(v, 50)  # slow: drawn as spans, not as a band


def test_counter_fraction_is_of_nonzero_steps_with_its_extremes():
    x = np.arange(8, dtype=np.float64)
    counter = np.array([0, 3, 0, 7, 2, 0, 0, 9], dtype=np.float64)
    cols = fd.duty_columns(x, counter, 2)
    np.testing.assert_array_equal(cols.on, [0.5, 0.5])
    np.testing.assert_array_equal(cols.hi, [7, 9])
    np.testing.assert_array_equal(cols.lo, [0, 0])


def test_nonfinite_steps_do_not_count_and_bad_input_is_refused():
    x = np.arange(6, dtype=np.float64)
    cols = fd.duty_columns(x, np.array([1, np.nan, 0, 1, np.inf, 1.0]), 1)
    assert cols.steps.tolist() == [4] and cols.on[0] == 0.75
    assert fd.duty_columns(np.empty(0), np.empty(0), 5).on.size == 0
    with pytest.raises(ValidationError, match="columns=0"):
        fd.duty_columns(x, x, 0)
    with pytest.raises(ValidationError, match="non-decreasing"):
        fd.duty_columns(x[::-1], x, 3)


def test_band_and_envelope_shapes():
    x = np.arange(100, dtype=np.float64)
    cols = fd.duty_columns(x, (x % 2), 10)
    bx, by = fd.band_xy(cols, cols.on)
    assert len(bx) == len(cols.on) + 1 and bx[-1] == 99 and np.all(np.diff(bx) > 0)
    ex, ey = fd.envelope_xy(cols)
    assert len(ex) == 4 * len(cols.on) and ey.max() == 1 and ey.min() == 0
    assert fd.hover_texts(cols, "flag")[0] == "flag: on 50% of steps 0–9"


def test_hover_data_holds_the_numbers_the_hover_texts_word():
    """A band sends numbers and one template, not a sentence a column: the same words once the
    template's fields are filled in (its d3 formats ``.3~g`` and ``.0f`` as Python's ``.3g``, ``.0f``)."""
    x = np.arange(3000, dtype=np.float64) + 40_000
    flag = (np.sin(x / 7.0) > 0.3).astype(np.float64)
    cols = fd.duty_columns(x, flag, 70)
    for steps, template in ((True, fd.HOVER_STEPS), (False, fd.HOVER_ROWS)):
        rows, said = fd.hover_data(cols, "flag", steps)
        assert said == "flag" + template and rows.dtype == np.float32 and rows.shape == (len(cols.on), 3 if steps else 2)
        filled = [f"flag: on {r[0]:.3g}% " + (f"of steps {r[1]:.0f}–{r[2]:.0f}" if steps else f"of its {r[1]:.0f} rows")
                  for r in rows.astype(np.float64)]
        assert filled == fd.hover_texts(cols, "flag", steps)
    far = fd.duty_columns(x + 2**25, flag, 70)  # steps past float32's whole numbers: sent as float64
    rows, _ = fd.hover_data(far, "flag")
    assert rows.dtype == np.float64 and rows[0, 1] == far.x0[0]


# ---- the bands on the figures --------------------------------------------------------
figures = pytest.importorskip("regime_dash.figures.signals")


@pytest.fixture(scope="module")
def replay_default():
    """Replay's default scenario under the spec's config: the dead-zone flag flips every step."""
    return replay(scenarios.make("kelly_trap_run8"), RegimeConfig(), engine="reference")


def test_replay_default_dead_zone_is_a_duty_band_not_a_solid_block(replay_default):
    flag = replay_default[diag.FLAG].to_numpy()
    assert fd.on_off_flips(flag) > 700  # the pattern this is about
    traces = figures.run_traces("base", replay_default, "#636EFA", n_out=700)
    (band,) = [t for t in traces if t["name"] == "base dead-zone episode"]
    assert band["fill"] == "tozeroy" and band["line"]["shape"] == "hv"
    top = replay_default[diag.DURATION].max()
    frac = np.asarray(band["y"][:-1], dtype=np.float64) / top
    cols = fd.duty_columns(replay_default["step"].to_numpy(), flag, 700)
    np.testing.assert_allclose(frac, cols.on, rtol=1e-6)
    alternating = cols.on[(cols.lo == 0) & (cols.hi == 1)]
    assert alternating.size > 100 and np.all((alternating > 0) & (alternating < 1))
    assert band["hovertemplate"] == "base dead-zone episode" + fd.HOVER_STEPS
    np.testing.assert_array_equal(band["customdata"][:-1, 0], np.float32(100.0 * cols.on))
    np.testing.assert_array_equal(band["customdata"][-1], band["customdata"][-2])  # the closing point
    (duration,) = [t for t in traces if t.get("fill") == "tozeroy" and "duration:" in t["hovertemplate"]]
    assert duration["name"] == "base"  # the run's first series carries its legend entry


def test_replay_default_kelly_zeroed_step_after_step_is_a_duty_band(replay_default):
    """kelly_f, zeroed on every other step of the dead zone, filled per column to its maximum times
    the fraction of steps it is not zero (the band of a counter), not a solid min/max block."""
    kelly = replay_default[diag.KELLY].to_numpy()
    assert fd.on_off_flips(kelly) > 700
    traces = figures.run_traces("base", replay_default, "#636EFA", n_out=700)
    (band,) = [t for t in traces if t["name"] == "base kelly_f" and t.get("fill") == "tozeroy"]
    cols = fd.duty_columns(replay_default["step"].to_numpy(), kelly, 700)
    np.testing.assert_allclose(np.asarray(band["y"][:-1], dtype=np.float64), cols.on * cols.hi, rtol=1e-6)
    assert np.any((cols.on > 0) & (cols.on < 1))


def test_zoomed_in_the_same_flag_is_spans_again(replay_default):
    window = replay_default[(replay_default["step"] >= 1000) & (replay_default["step"] < 1300)]
    traces = figures.run_traces("z", window, "#636EFA", n_out=700)
    (shade,) = [t for t in traces if t["name"] == "z dead-zone episode"]
    assert shade["fill"] == "toself"  # the rectangles of spans: 300 steps fit the columns
    assert not any(t.get("fill") == "tozeroy" for t in traces)


def test_slow_flag_keeps_its_spans():
    frame = replay(scenarios.make("kelly_trap_run8"), RegimeConfig(resurrection=False, max_duration=100),
                   engine="reference")
    traces = figures.run_traces("s", frame, "#636EFA", n_out=700)
    (shade,) = [t for t in traces if t["name"] == "s dead-zone episode"]
    assert shade["fill"] == "toself" and None in shade["x"]


def test_live_chart_bands_a_fast_counter(replay_default):
    spec = figures.live_figure(replay_default, window=3000)
    (band,) = [t for t in spec["data"] if t.get("fill") == "tozeroy"]
    assert band["name"] == "duration" and band["yaxis"] == "y"
    y = np.asarray(band["y"], dtype=np.float64)
    assert np.any((y > 0) & (y < 1))


# ---- one cut of x for every signal of a run --------------------------------------------
def _full_pass_cut(x, columns):
    """Each non-empty column's first row and steps, every row's column computed (the reference)."""
    width = (x[-1] - x[0]) / columns
    col = np.zeros(x.size, np.int64) if width <= 0 else np.minimum(((x - x[0]) / width).astype(np.int64), columns - 1)
    counts = np.bincount(col, minlength=columns)
    counts = counts[counts > 0]
    return np.concatenate(([0], np.cumsum(counts)[:-1])), counts


@pytest.mark.parametrize("n, columns", [(100_003, 700), (3000, 700), (1001, 100), (50, 200), (7, 3), (1, 5)])
def test_bins_cut_x_as_every_row_cut_does(rng, n, columns):
    x = np.cumsum(rng.integers(0, 4, size=n)).astype(np.float64) + 0.1  # repeated x too
    bins = fd.duty_bins(x, columns)
    starts, counts = _full_pass_cut(x, columns)
    np.testing.assert_array_equal(bins.starts, starts)
    np.testing.assert_array_equal(bins.counts, counts)
    np.testing.assert_array_equal(bins.x0, x[starts])
    np.testing.assert_array_equal(bins.x1, x[starts + counts - 1])
    assert fd.duty_bins(np.full(9, 3.0), 4).counts.tolist() == [9]  # no width: one column


def test_bins_are_none_where_x_is_not_finite_and_refuse_a_falling_x():
    assert fd.duty_bins(np.array([0.0, np.nan, 2.0]), 2) is None
    assert fd.duty_bins(np.empty(0), 2) is None
    with pytest.raises(ValidationError, match="non-decreasing"):
        fd.duty_bins(np.array([0.0, 2.0, 1.0]), 2)


def _same_columns(a, b):
    for name in ("x0", "x1", "steps", "on", "lo", "hi"):
        got, want = getattr(a, name), getattr(b, name)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), name


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.bool_])
@pytest.mark.parametrize("off", [0.0, 1.0, 0.3])
def test_columns_read_through_bins_are_those_of_the_shifted_signal(rng, dtype, off):
    x = np.arange(20_000, dtype=np.float64) * 1.5
    v = (rng.integers(0, 3, size=x.size) * rng.normal(size=x.size) * 7).astype(dtype)
    got = fd.duty_columns(x, v, 300, off=off, bins=fd.duty_bins(x, 300))
    _same_columns(got, fd.duty_columns(x, v.astype(np.float64) - off, 300))


def test_fast_duty_is_flips_fast_then_the_columns(rng):
    x = np.arange(30_000, dtype=np.float64)
    bins = fd.duty_bins(x, 200)
    slow = np.repeat(rng.integers(0, 2, size=100), 300).astype(np.float32)  # 300-step stretches
    fast = rng.integers(0, 2, size=x.size).astype(np.float32)
    holed = fast.astype(np.float64)
    holed[::97] = np.nan  # not finite: each signal cut on its own rows
    for v in (slow, fast, holed, fast + np.float32(1.0)):
        for off in (0.0, 1.0):
            shifted = v.astype(np.float64) - off
            got = fd.fast_duty(x, v, 200, off=off, bins=bins)
            if not fd.flips_fast(shifted, 200):
                assert got is None
                continue
            _same_columns(got, fd.duty_columns(x, shifted, 200))
    assert fd.fast_duty(x, fast, 200, bins=bins) is not None and fd.fast_duty(x, slow, 200, bins=bins) is None
