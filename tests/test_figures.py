"""regime_dash.figures.signals: smoothing, downsampling, spans and the signal panels, without streamlit."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from regime_dash import RegimeConfig, replay
from regime_dash.diag import catalogue as diag
from regime_dash.sources import scenarios
from regime_dash.analysis import diagnose
from regime_dash.analysis.view import view
from regime_dash.errors import ValidationError

figures = pytest.importorskip("regime_dash.figures.signals")
go = pytest.importorskip("plotly.graph_objects")


@pytest.fixture(scope="module")
def trap_frame() -> pd.DataFrame:
    """kelly_trap_run8 without resurrection: one dead-zone episode that times out, tail events, a floor span."""
    return replay(scenarios.make("kelly_trap_run8"), RegimeConfig(resurrection=False, max_duration=100),
                  engine="reference")


def _tb_smooth(values, weight):
    """TensorBoard's loop, written out (the reference the vectorised version must match)."""
    last, n, out = 0.0, 0, []
    for v in values:
        if not np.isfinite(v):
            out.append(v)
            continue
        last = last * weight + (1 - weight) * v
        n += 1
        out.append(last / (1 - weight ** n))
    return np.array(out)


def _traces(fig, name):
    return [t for t in fig.data if t.name == name]


# ---- smoothing ------------------------------------------------------------------------
@pytest.mark.parametrize("weight", [0.0, 0.3, 0.9, 0.999])
def test_ema_matches_tensorboard_loop(rng, weight):
    v = rng.normal(size=500)
    v[[10, 200]] = np.nan
    got = figures.ema_debiased(v, weight)
    want = _tb_smooth(v, weight)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, equal_nan=True)


def test_ema_is_debiased_and_keeps_constants():
    out = figures.ema_debiased(np.full(50, 3.25), 0.95)
    np.testing.assert_allclose(out, 3.25)  # a biased EMA would start near 0


@pytest.mark.parametrize("weight", [-0.1, 1.0, 2.0])
def test_ema_rejects_bad_weight(weight):
    with pytest.raises(ValidationError, match=repr(weight)):
        figures.ema_debiased(np.ones(3), weight)


# ---- downsampling ---------------------------------------------------------------------
def test_short_trace_is_sent_whole():
    x, y = np.arange(100), np.sin(np.arange(100))
    red = figures.downsample(x, y, 200)
    np.testing.assert_array_equal(red.y, y)
    assert red.band_x.size == 0


def test_thin_flat_keeps_the_drawn_line():
    x = np.arange(100, dtype=float)
    y = np.r_[np.zeros(40), np.arange(20, dtype=float), np.full(39, 5.0), np.nan]
    tx, ty = figures.thin_flat(x, y, stride=0)
    # the flat stretches keep their ends only, the ramp and the NaN gap stay whole
    assert len(tx) < len(x) and tx[0] == 0 and tx[-1] == 99 and np.isnan(ty[-1])
    np.testing.assert_array_equal(np.interp(x[:-1], tx[:-1], ty[:-1]), y[:-1])  # same polyline
    sx, _ = figures.thin_flat(x, y, stride=16)
    assert np.diff(sx).max() <= 16 and set(tx) <= set(sx)  # hover stays within reach everywhere


def test_compact_halves_bytes_exactly_enough():
    steps = figures.compact(np.array([0.0, 7.0, 2.0e9]))
    assert steps.dtype == np.int32 and steps.tolist() == [0, 7, 2_000_000_000]
    assert figures.compact(np.array([0.0, 3.0e9])).dtype == np.float64  # beyond int32: kept as is
    vals = figures.compact(np.array([0.125, np.nan, 1e-5]))
    assert vals.dtype == np.float32 and np.isnan(vals[1]) and vals[2] == pytest.approx(1e-5, rel=1e-6)


def test_downsample_keeps_extremes_in_band(rng):
    n = 1_000_000
    x = np.arange(n, dtype=np.int64)
    y = rng.normal(size=n)
    y[123_457] = 50.0
    y[765_431] = -60.0
    red = figures.downsample(x, y, 2000)
    assert len(red.x) <= 2000
    assert np.all(np.diff(red.x) > 0)
    assert red.band_hi.max() == 50.0 and red.band_lo.min() == -60.0
    # MinMaxLTTB keeps the spikes themselves, not only the band
    assert 50.0 in red.y and -60.0 in red.y


def test_downsample_drops_nan(rng):
    y = rng.normal(size=5000)
    y[::7] = np.nan
    red = figures.downsample(np.arange(5000), y, 500)
    assert np.isfinite(red.y).all() and np.isfinite(red.band_lo).all()


def test_downsample_rejects_tiny_width():
    with pytest.raises(ValidationError, match="n_out=2"):
        figures.downsample(np.arange(10), np.arange(10.0), 2)


# ---- spans ----------------------------------------------------------------------------
def test_spans_and_merge():
    x = np.arange(10)
    flag = np.array([1, 1, 0, 0, 1, 0, 1, 1, 1, 0])
    assert figures.spans(x, flag) == [(0, 1), (4, 4), (6, 8)]
    assert figures.spans(x, flag, min_gap=2) == [(0, 1), (4, 8)]
    assert figures.spans(x, np.zeros(10)) == []


def _spans_by_loop(x, flag):
    """Each run of nonzero (NaN: off) values, found value by value (the reference)."""
    out, start = [], None
    for i, v in enumerate(flag):
        on = bool(v != 0 and v == v)
        if on and start is None:
            start = i
        if not on and start is not None:
            out.append((x[start], x[i - 1]))
            start = None
    return out + ([(x[start], x[len(flag) - 1])] if start is not None else [])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.bool_])
def test_spans_match_a_value_by_value_loop(rng, dtype):
    x = np.arange(400) * 2
    for flag in (rng.integers(0, 2, 400), np.ones(400), np.r_[1, np.zeros(398), 1], np.r_[0, np.ones(399)]):
        assert figures.spans(x, flag.astype(dtype)) == _spans_by_loop(x, flag)
    holed = rng.integers(0, 2, 400).astype(np.float64)
    holed[::13], holed[5::17] = np.nan, np.inf
    assert figures.spans(x, holed) == _spans_by_loop(x, holed)


def test_downsample_of_float32_picks_the_points_of_its_float64_image(rng):
    x = np.arange(200_000, dtype=np.float64)
    for y in (np.cumsum(rng.normal(size=x.size)), rng.integers(0, 4, x.size) * 1.0, np.exp(5 * rng.normal(size=x.size))):
        y32 = y.astype(np.float32)
        got, want = figures.downsample(x, y32, 700), figures.downsample(x, y32.astype(np.float64), 700)
        assert got.y.dtype == np.float32  # no float64 copy of the signal
        for name in ("x", "y", "band_x", "band_lo", "band_hi"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name))


def test_downsample_says_whether_the_trace_was_finite_as_a_read_of_every_value_does(rng):
    y = rng.normal(size=50_000).astype(np.float32)
    for bad in (None, np.nan, np.inf, -np.inf):
        z = y.copy()
        if bad is not None:
            z[12_345] = bad
        red = figures.downsample(np.arange(z.size), z, 700)
        assert red.finite is (bad is None)
        told = figures.downsample(np.arange(z.size), z, 700, finite=bad is None)
        for name in ("x", "y", "band_x", "band_lo", "band_hi"):
            np.testing.assert_array_equal(getattr(red, name), getattr(told, name))
    assert figures.downsample(np.arange(5), np.array([1.0, np.nan, 2, 3, 4]), 700).finite is False


def test_a_view_of_rows_in_step_order_keeps_no_row_positions_and_reads_nulls_as_before():
    from regime_dash.analysis.view import NULL_ROWS_ATTR

    frame = pd.DataFrame({"step": np.arange(6), diag.SIGMA: np.arange(6.0)})
    frame.attrs[NULL_ROWS_ATTR] = {diag.SIGMA: np.array([1, 4])}
    vw = view(frame)
    assert vw.source_rows is None
    assert vw.null(diag.SIGMA).tolist() == [False, True, False, False, True, False]
    shuffled = frame.iloc[[5, 0, 1, 2, 3, 4]]
    assert view(shuffled).source_rows.tolist() == [1, 2, 3, 4, 5, 0]
    # the nulls are rows 1 and 4 of the frame handed in (steps 0 and 3), in step order rows 0 and 3
    assert view(shuffled).null(diag.SIGMA).tolist() == [True, False, False, True, False, False]


@pytest.fixture(scope="module")
def long_frame() -> pd.DataFrame:
    """60,000 steps of kelly_trap_run8 with resurrection: flags and counters that flip every few steps."""
    return replay(scenarios.make("kelly_trap_run8", steps=60_000, accounts=16), RegimeConfig(max_duration=300),
                  engine="fast")


def test_float32_columns_draw_as_their_float64_images(long_frame):
    """The panels read a float32 column as it is: the figure is the one of the same frame with every
    column widened to float64 (the values the panels once copied out of it), duty bands, lines with
    NaN and ±Inf, and the smoothing included."""
    holed = long_frame.copy()
    for col, bad in ((diag.SIGMA, np.nan), (diag.LIVE, np.inf), (diag.DURATION, np.nan), (diag.KELLY, -np.inf)):
        values = holed[col].to_numpy().copy()
        values[5_000:5_003] = bad
        holed[col] = values
    for frame, smoothing in ((long_frame, 0.0), (holed, 0.0), (holed, 0.6)):
        assert frame[diag.SIGMA].dtype == np.float32
        wide = frame.astype({c: np.float64 for c in frame.columns if frame[c].dtype == np.float32})
        got = figures.signal_spec({"a": frame, "b": long_frame}, n_out=200, smoothing=smoothing)
        want = figures.signal_spec({"a": wide, "b": long_frame}, n_out=200, smoothing=smoothing)
        assert got == want
    names = [t["name"] for t in got["data"]]
    assert "a dead-zone episode" in names and "a kelly_f min/max" in names  # a duty band and a line's band


def test_whole_number_steps_view_and_draw_as_their_float_image(long_frame):
    shuffled = long_frame.sample(frac=1.0, random_state=3)
    floats = shuffled.astype({"step": np.float64})
    vw, vf = view(shuffled), view(floats)
    assert vw.step.dtype == vf.step.dtype == np.int64 and vw.step.tobytes() == vf.step.tobytes()
    assert (vw.source_rows == vf.source_rows).all()
    assert figures.signal_spec({"a": shuffled}, n_out=300) == figures.signal_spec({"a": floats}, n_out=300)


# ---- signal panels --------------------------------------------------------------------
def test_panels_layout_and_markers(trap_frame):
    report = diagnose(trap_frame)
    fig = figures.signal_panels({"trap": trap_frame})
    assert len(fig.layout.annotations) == len(figures.PANELS) == 7
    assert [a.text for a in fig.layout.annotations] == list(figures.PANELS)
    # one shared x axis: every subplot's x axis matches the bottom one
    xaxes = [k for k in fig.layout if k.startswith("xaxis")]
    assert len(xaxes) == 7
    assert all(fig.layout[k].matches == "x7" for k in xaxes if k != "xaxis7")
    (recency,) = _traces(fig, "trap recency+1")
    assert fig.layout["yaxis" + recency.yaxis[1:]].type == "log"
    (timeout,) = _traces(fig, "trap timeout")
    assert list(timeout.x) == list(report.events["timeouts"]["step"])
    (tail,) = _traces(fig, "trap tail event")
    assert list(tail.x) == list(report.events["tail"]["step"])
    (shade,) = _traces(fig, "trap dead-zone episode")
    ep = report.episodes["dead_zone"].iloc[0]
    xs = [v for v in shade.x if v is not None]
    assert min(xs) == ep["start"] and max(xs) == ep["end"]
    (floor,) = _traces(fig, "trap floor active")
    span = report.events["floor_spans"].iloc[0]
    xs = [v for v in floor.x if v is not None]
    assert min(xs) == span["start"] and max(xs) == span["end"]


def test_smoothing_changes_continuous_signals_only(trap_frame):
    raw = figures.signal_panels({"r": trap_frame}, smoothing=0.0)
    smooth = figures.signal_panels({"r": trap_frame}, smoothing=0.95)
    kelly_raw, = [t for t in raw.data if t.name == "r kelly_f"]
    kelly_s, = [t for t in smooth.data if t.name == "r kelly_f"]
    a, b = np.asarray(kelly_raw.y, dtype=float), np.asarray(kelly_s.y, dtype=float)
    assert len(a) != len(b) or not np.allclose(a, b)  # flat stretches are thinned: lengths may differ
    # counters (duration, recency, transition) and flag-derived shapes are never smoothed
    for name in ("r", "r recency+1", "r transition remaining", "r dead-zone episode", "r timeout"):
        a, = [t for t in raw.data if t.name == name]
        b, = [t for t in smooth.data if t.name == name]
        assert list(a.y) == list(b.y), name


def test_runs_get_distinct_colours(trap_frame):
    fig = figures.signal_panels({"a": trap_frame, "b": trap_frame, "c": trap_frame})
    colours = {t.legendgroup: t.line.color for t in fig.data if t.showlegend}
    assert set(colours) == {"a", "b", "c"}
    assert len(set(colours.values())) == 3


def test_traces_of_builds_each_run_once_and_the_same_figure(trap_frame):
    """A caller's ``traces_of`` (the dashboard's per-run cache) gets each run once, with the
    arguments :func:`run_traces` takes, and the figure is the one built without it."""
    other = trap_frame.assign(**{diag.KELLY: trap_frame[diag.KELLY] * 0.5})
    runs = {"baseline": trap_frame, "what-if": other}
    calls = []

    def traces_of(label, frame, colour, **kw):
        calls.append((label, colour, kw["widen"], kw["n_out"]))
        return figures.run_traces(label, frame, colour, **kw)

    plain = figures.signal_panels(runs, smoothing=0.5, n_out=300, height=900)
    hooked = figures.signal_panels(runs, smoothing=0.5, n_out=300, height=900, traces_of=traces_of)
    assert plain.to_plotly_json() == hooked.to_plotly_json()
    # with no colours given, a run takes the colour of its label (run_colours), not of its place
    colour = figures.run_colours(["baseline", "what-if"])
    assert calls == [("baseline", colour["baseline"], 1.7, 300), ("what-if", colour["what-if"], 1.0, 300)]
    kelly = [t for t in hooked.data if t.name == "what-if kelly_f"]
    assert len(kelly) == 1 and len(kelly[0].y) <= 300  # the points per trace asked for, not the default


def _same_traces(a: list[dict], b: list[dict]) -> bool:
    if len(a) != len(b):
        return False
    for ta, tb in zip(a, b):
        if ta.keys() != tb.keys():
            return False
        for k in ta:
            va, vb = ta[k], tb[k]
            if isinstance(va, np.ndarray) or isinstance(vb, np.ndarray):
                if not np.array_equal(np.asarray(va), np.asarray(vb), equal_nan=True):
                    return False
            elif va != vb:
                return False
    return True


def test_a_memo_keeps_what_smoothing_does_not_change_and_gives_the_same_traces(trap_frame):
    """``run_traces(memo=...)``: at any smoothing the same traces as without it; what it kept does not
    depend on the smoothing, and it is what a later call takes (a memo is kept per run)."""
    memo: dict = {}
    for weight in (0.3, 0.9, 0.0, 0.6):
        kept = figures.run_traces("r", trap_frame, "#636EFA", smoothing=weight, memo=memo)
        assert _same_traces(kept, figures.run_traces("r", trap_frame, "#636EFA", smoothing=weight)), weight
    kinds = {k[0] for k in memo}
    assert kinds == {"line", "shade", "markers", "col"}
    assert ("line", 1, "duration") in memo and ("markers", 3, "tail event") in memo
    assert ("line", 7, "kelly_f") in memo  # kept at smoothing 0: the raw series
    assert not memo[("col", diag.KELLY)].flags.writeable  # shared by later calls: read-only
    # what it kept is what a later call takes, whatever frame it is given (a caller keeps one memo per run)
    other = trap_frame.assign(**{diag.KELLY: trap_frame[diag.KELLY] * 0.5,
                                 diag.DURATION: trap_frame[diag.DURATION] * 0 + 3})
    mixed = {t["name"]: t for t in figures.run_traces("r", other, "#636EFA", smoothing=0.6, memo=memo)}
    fresh = {t["name"]: t for t in figures.run_traces("r", other, "#636EFA", smoothing=0.6)}
    before = {t["name"]: t for t in figures.run_traces("r", trap_frame, "#636EFA", smoothing=0.6)}
    for name in ("r kelly_f", "r"):  # a smoothed series and duration (the legend's trace)
        assert np.array_equal(mixed[name]["y"], before[name]["y"]) and not np.array_equal(mixed[name]["y"],
                                                                                          fresh[name]["y"])


def test_signal_spec_is_the_figure_as_plotly_json(trap_frame):
    """The dict the Replay page draws is the figure's JSON, arrays as base64 typed arrays, and
    building it leaves the traces a caller's ``traces_of`` handed in as they were."""
    import json

    import plotly.io as pio

    other = trap_frame.assign(**{diag.KELLY: trap_frame[diag.KELLY] * 0.5})
    runs = {"baseline": trap_frame, "what-if": other}
    kept = figures.run_traces("baseline", trap_frame, figures.run_colour("baseline"), smoothing=0.3, n_out=300, widen=1.7)

    def traces_of(label, frame, colour, **kw):
        return kept if label == "baseline" else figures.run_traces(label, frame, colour, **kw)

    spec = figures.signal_spec(runs, smoothing=0.3, n_out=300, height=900, traces_of=traces_of)
    fig = figures.signal_panels(runs, smoothing=0.3, n_out=300, height=900)
    assert json.loads(pio.to_json(spec, validate=False)) == json.loads(pio.to_json(fig, validate=False))
    assert set(spec["data"][1]["y"]) == {"dtype", "bdata"}  # sent as bytes, not as a list of numbers
    assert all(isinstance(t["y"], np.ndarray) for t in kept if "y" in t and not isinstance(t["y"], list))


def test_signal_spec_on_the_wall_time_axis_is_the_figure_as_plotly_json(trap_frame):
    """Datetimes are not typed arrays: they go as plotly writes them (dates, not nanosecond integers)."""
    import json

    import plotly.io as pio

    frame = trap_frame.copy()
    frame["wall_time"] = 1.7e9 + frame["step"] * 0.5
    spec = figures.signal_spec({"w": frame}, x="wall_time", n_out=200, height=900)
    fig = figures.signal_panels({"w": frame}, x="wall_time", n_out=200, height=900)
    got = json.loads(pio.to_json(spec, validate=False))
    assert got == json.loads(pio.to_json(fig, validate=False))
    xs = next(t["x"] for t in got["data"] if isinstance(t.get("x"), list))
    assert isinstance(xs[0], str) and xs[0].startswith("2023-11-14")


def test_a_signal_spec_passes_plotly_validation(trap_frame):
    """st.plotly_chart validates a dict figure (``return_figure_from_figure_or_data``): the typed arrays pass."""
    import plotly.tools

    spec = figures.signal_spec({"a": trap_frame}, n_out=200, height=900)
    checked = plotly.tools.return_figure_from_figure_or_data(spec, validate_figure=True)
    assert len(checked["data"]) == len(spec["data"])


def test_million_steps_are_downsampled(trap_frame):
    reps = 1_000_000 // len(trap_frame) + 1
    big = pd.concat([trap_frame] * reps, ignore_index=True)
    big["step"] = np.arange(len(big), dtype=np.int64)
    fig = figures.signal_panels({"big": big}, n_out=2000)
    assert len(big) >= 1_000_000
    assert max(len(t.x) for t in fig.data if t.mode == "lines" and t.fill is None) <= 2000
    (band,) = [t for t in fig.data if t.name == "big kelly_f min/max"]
    # 2000 // 4 buckets, each a maximum forward and a minimum back; flat stretches thinned
    assert band.fill == "toself" and len(band.x) == len(band.y) <= 2 * (2000 // 4)
    kelly = big[diag.KELLY].to_numpy(dtype=float)
    assert np.nanmax(band.y) == pytest.approx(np.nanmax(kelly), rel=1e-6)
    assert np.nanmin(band.y) == pytest.approx(np.nanmin(kelly), rel=1e-6, abs=1e-12)
    assert len(fig.to_json()) < 5_000_000  # what the browser receives stays small


def test_wall_time_axis_and_missing_columns(trap_frame):
    frame = trap_frame[["step", diag.KELLY, diag.SIGMA, diag.FLAG, diag.RECENCY]].copy()
    frame["wall_time"] = 1.7e9 + frame["step"] * 0.5
    fig = figures.signal_panels({"w": frame}, x="wall_time")
    first, = [t for t in fig.data if t.name == "w"]  # no duration column: the first line is recency
    assert np.issubdtype(np.asarray(first.x).dtype, np.datetime64)
    assert pd.Timestamp(first.x[0]) == pd.Timestamp(1.7e9, unit="s")
    assert not [t for t in fig.data if "duration" in (t.name or "")]
    (shade,) = [t for t in fig.data if t.name == "w dead-zone episode"]
    start = trap_frame.loc[trap_frame[diag.FLAG] == 1, "step"].iloc[0]
    assert pd.Timestamp(shade.x[0]) == pd.Timestamp(1.7e9 + start * 0.5, unit="s")
    with pytest.raises(ValidationError, match="wall_time"):
        figures.signal_panels({"s": trap_frame}, x="wall_time")
    with pytest.raises(ValidationError, match="'tick'"):
        figures.signal_panels({"s": trap_frame}, x="tick")


def test_x_range_sets_initial_window(trap_frame):
    fig = figures.signal_panels({"r": trap_frame}, x_range=(400, 500))
    assert list(fig.layout.xaxis7.range) == [400, 500]


# ---- sweeps -------------------------------------------------------------------------------
def test_sweep_heatmap_cells_and_rows():
    table = pd.DataFrame({"a": [1.0, 2.0, 1.0, 2.0], "b": [10.0, 10.0, 20.0, 20.0],
                          "m": [0.0, 1.0, 2.0, 3.0]})
    fig = figures.sweep_heatmap(table, "a", "b", "m")
    hm = fig.data[0]
    np.testing.assert_array_equal(np.asarray(hm.z), [[0.0, 1.0], [2.0, 3.0]])
    np.testing.assert_array_equal(np.asarray(hm.customdata), [[0, 1], [2, 3]])
    with pytest.raises(ValidationError, match="'nope'"):
        figures.sweep_heatmap(table, "a", "b", "nope")


def test_sweep_line_orders_points():
    table = pd.DataFrame({"a": [3.0, 1.0, 2.0], "m": [30.0, 10.0, 20.0]})
    fig = figures.sweep_line(table, "a", "m")
    assert list(fig.data[0].x) == [1.0, 2.0, 3.0]
    assert list(fig.data[0].customdata) == [1, 2, 0]


@pytest.mark.slow  # a fresh interpreter importing the figures
def test_figures_does_not_import_streamlit():
    code = "import regime_dash.figures.signals, sys; print('streamlit' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---- readable charts ---------------------------------------------------------------------
def test_a_run_keeps_its_colour_whatever_else_is_drawn(trap_frame):
    """A run's colour is a stable hash of its id, not its place among the runs drawn: the same alone,
    first or last; runs drawn together differ (a clash moves the later one in id order); a colour
    given explicitly wins."""
    ids = [f"run-{k:02d}" for k in range(10)]
    assert {figures.run_colour(r) for r in ids} <= set(figures.RUN_COLOURS)
    assert len({figures.run_colour(r) for r in ids}) > 3  # the hash spreads runs over the palette
    together = figures.run_colours(ids)
    assert len(set(together.values())) == 10 and together == figures.run_colours(ids[::-1])
    first = min(ids)  # nothing before it in id order: it keeps its hashed colour in any company
    assert together[first] == figures.run_colour(first) == figures.run_colours([first])[first]
    # runs whose hashed colours differ keep them, whatever else is drawn
    apart = {}
    for r in ids:
        apart.setdefault(figures.run_colour(r), r)
    assert figures.run_colours(list(apart.values())) == {r: c for c, r in apart.items()}

    def colour_of(runs: dict, label: str, **kw) -> str:
        spec = figures.signal_spec(runs, n_out=100, **kw)
        return next(t["line"]["color"] for t in spec["data"] if t["name"] == f"{label} σ")

    alone = colour_of({first: trap_frame}, first)
    last = colour_of({**{r: trap_frame for r in ids[1:6]}, first: trap_frame}, first)
    assert alone == last == figures.run_colour(first)
    assert colour_of({first: trap_frame}, first, colours={first: "#123456"}) == "#123456"


def test_every_panel_has_a_y_title_with_units(trap_frame):
    fig = figures.signal_panels({"r": trap_frame})
    titles = {k: fig.layout[k].title.text for k in fig.layout if k.startswith("yaxis")}
    want = [t for pair in figures.PANEL_Y for t in pair if t]
    assert sorted(t for t in titles.values() if t) == sorted(want)
    assert all("(" in t and t.endswith(")") for t in want)  # each names its unit
    assert fig.layout.hovermode == "x unified"
    assert fig.layout.xaxis7.tickformat == "d" and fig.layout.xaxis7.hoverformat == "d"


def test_series_of_a_run_share_its_hue_but_not_its_tone(trap_frame):
    fig = figures.signal_panels({"r": trap_frame})
    sigma, = _traces(fig, "r σ")
    envelope, = _traces(fig, "r envelope")
    assert sigma.line.color == figures.run_colour("r")
    assert envelope.line.color != sigma.line.color and envelope.line.width != sigma.line.width
    # identical runs: the first is drawn wider, so the second cannot hide it
    fig2 = figures.signal_panels({"a": trap_frame, "b": trap_frame})
    a, = _traces(fig2, "a kelly_f")
    b, = _traces(fig2, "b kelly_f")
    assert a.line.width > b.line.width and a.line.color != b.line.color


def test_runs_align_at_their_first_step(trap_frame):
    later = trap_frame.assign(step=trap_frame["step"] + 5000)
    fig = figures.signal_panels({"a": trap_frame, "b": later},
                                x_offsets={"a": int(trap_frame["step"].min()), "b": int(later["step"].min())})
    a, = _traces(fig, "a kelly_f")
    b, = _traces(fig, "b kelly_f")
    assert list(a.x) == list(b.x) and a.x[0] == 0
    assert fig.layout.xaxis7.title.text == "steps since each run's first step"


def test_live_figure_is_light_valid_and_marked(trap_frame):
    fig = figures.live_figure(trap_frame, [(100, "shock", "tail shock"), (10**9, "config", "off the chart")],
                              window=500)
    checked = go.Figure(fig)  # plotly accepts it as it is
    assert [t.title.text for t in (checked.layout.yaxis, checked.layout.yaxis2, checked.layout.yaxis3,
                                   checked.layout.yaxis4)] == [y for _, y, _ in figures.LIVE_PANELS]
    assert max(len(t["x"]) for t in fig["data"]) == 500  # the trailing window only
    assert [s["name"] for s in fig["layout"]["shapes"]] == []  # step 100 is before the last 500 steps
    fig = figures.live_figure(trap_frame, [(int(trap_frame["step"].iloc[-10]), "shock", "tail shock")], window=500)
    assert [s["name"].split(":")[0] for s in fig["layout"]["shapes"]] == [f"shock at {int(trap_frame['step'].iloc[-10])}"]


def test_tail_event_markers_come_from_the_rows_alone_as_from_tail_events(trap_frame):
    """The chart finds its tail-event markers without tail_events' boundary columns; on a frame out of
    step order with repeated steps and an odd width, the markers are still tail_events' steps."""
    from regime_dash.analysis import episodes
    from regime_dash.analysis.view import view

    awkward = pd.concat([trap_frame, trap_frame.iloc[100:1103]]).sample(frac=1.0, random_state=3)
    vw = view(awkward)
    expected = episodes.tail_events(vw)["step"].to_numpy()
    assert len(expected) > 2
    assert np.array_equal(vw.step[episodes.tail_event_rows(vw)], expected)
    (tail,) = [t for t in figures.run_traces("odd", awkward, "#636EFA", n_out=37) if t["name"] == "odd tail event"]
    pos = np.searchsorted(vw.step, expected)
    if len(pos) > 37:
        pos = pos[np.linspace(0, len(pos) - 1, 37).astype(np.int64)]
    assert np.array_equal(np.asarray(tail["x"]), vw.step[pos])


@pytest.mark.parametrize("height", [900, 1400])
def test_panels_leave_room_between_them_for_a_title_and_a_tick_label(trap_frame, height):
    """Between two signal panels: the lower one's title and the upper one's lowest tick label
    (the Replay chart, 900 px, had its titles on the tick labels above them)."""
    layout = figures.signal_spec({"r": trap_frame}, n_out=100, height=height)["layout"]
    plot_height = height - figures.SIGNAL_MARGIN["t"] - figures.SIGNAL_MARGIN["b"]
    domains = sorted((layout[k]["domain"] for k in layout if k.startswith("yaxis") and "domain" in layout[k]),
                     key=lambda d: d[0])
    gaps = [(b[0] - a[1]) * plot_height for a, b in zip(domains, domains[1:]) if b[0] > a[0]]
    assert len(gaps) == len(figures.PANELS) - 1 and min(gaps) >= figures.PANEL_GAP_PX - 1
