"""Plotly figures of regime signals: frames in, figures out.

No streamlit and no I/O here: the UI hands in pandas frames whose columns are
the canonical dotted diag names of :mod:`regime_dash.diag.catalogue` (after any alias
mapping) and gets a :class:`plotly.graph_objects.Figure` back. Importing
:mod:`regime_dash` does not import this module, so plotly is only loaded by
the dashboard and by whoever calls it.

Long runs are reduced before they reach the browser: each continuous trace is
cut to about the chart's pixel width with tsdownsample's MinMaxLTTB, and a
min/max band per bucket keeps the extremes the selected points skip. Flags are
never downsampled point-wise; they become shaded spans or markers computed from
every step, so an episode one step long still shows.
"""
from __future__ import annotations


import copy
import functools
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from regime_dash.diag import catalogue as diag
from regime_dash.figures import plotly_arrays
from regime_dash.errors import ValidationError
from regime_dash.figures.duty import DutyBins, band_xy, duty_bins, envelope_xy, fast_duty, hover_data
from regime_dash.figures.overlay import NONFINITE_COLOUR, all_finite, break_at_nonfinite, nonfinite_points

# The panels' signals are diag's catalogue columns (diag.FLAG, diag.KELLY, ...): one list of names.
#: The catalogue columns the seven panels draw (besides ``step``).
PANEL_COLUMNS: tuple[str, ...] = (
    diag.FLAG, diag.DURATION, diag.TIMEOUT, diag.MAX_DURATION, diag.LIVE, diag.EPS_MIN, diag.EPS_MAX,
    diag.FACTOR, diag.RECENCY, diag.VARIANCE, diag.SIGMA, diag.POPART_VAR, diag.ENVELOPE, diag.REMAINING,
    diag.SAFETY_FRAC, diag.TAU_MIN, diag.TAU_MIN_EFF, diag.KELLY, diag.KELLY_ANALYTIC)

#: 0/1 signals: drawn as spans or markers, never smoothed, never downsampled point-wise.
FLAG_COLUMNS = frozenset({diag.FLAG, diag.TIMEOUT})
#: Integer-valued counters: downsampled but never smoothed (a smoothed counter is a wrong count).
COUNTER_COLUMNS = frozenset({diag.DURATION, diag.RECENCY, diag.REMAINING, diag.COUNT, diag.FLAT_COUNT,
                             diag.B_SIZE, diag.COOLDOWN})

#: Panel titles, top to bottom; each names what its line styles mean.
PANELS: tuple[str, ...] = (
    "dead zone — duration (episodes shaded, ✕ timeout)",
    "ε recovery — live in [min, max] band; factor (dot)",
    "tail — recency + 1 (log), ◆ tail event; σ of Δworst (dot, right)",
    "σ envelope — PopArt σ vs envelope (dash); floor active shaded",
    "v9 transition — steps remaining; safety_frac (dot, right)",
    "IQN τ — τ_min (dash) vs effective",
    "kelly fraction — after resurrection; analytic (dash)",
)
#: Rows whose subplot has a right-hand y axis.
SECONDARY_ROWS = (3, 5)
#: y-axis titles with units, one per panel: (left axis, right axis or None).
PANEL_Y: tuple[tuple[str, str | None], ...] = (
    ("duration (steps)", None),
    ("ε, factor (fraction)", None),
    ("recency + 1 (steps, log)", "σ Δworst (pnl units)"),
    ("σ (reward units)", None),
    ("remaining (steps)", "safety_frac (fraction)"),
    ("τ (quantile level)", None),
    ("kelly_f (fraction)", None),
)

#: Distinct run colours (plotly's qualitative "Plotly" palette); a run takes the entry its id hashes to.
RUN_COLOURS: tuple[str, ...] = ("#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A",
                                "#19D3F3", "#FF6692", "#B6E880", "#FF97FF", "#FECB52")

#: Points per trace sent to the browser: about the plot width of a wide chart in pixels
#: (1,100–1,200 px); more points than pixels only cost the browser time.
DEFAULT_POINTS = 1200
#: Of a stretch where a line is flat, every ``HOVER_STRIDE``-th point is kept (see
#: :func:`thin_flat`): at about one point a pixel, a gap under plotly's 20 px hover
#: distance, so every series stays in the unified hover wherever the pointer is.
HOVER_STRIDE = 16


#: Runs of up to this many rows keep their columns as numbers in a ``memo`` of :func:`run_traces`
#: (25,000 rows: 0.2 MB a column; each column's conversion cost a millisecond or two a redraw).
MEMO_ROWS = 200_000

#: The signal panels' margins in pixels, wide enough for what the browser puts in them: the y
#: tick labels and titles (74 px left, 70 px right as drawn in chromium with the app's theme),
#: the legend above the top panel (65 px) and the x-axis title below it (67 px). Where a margin
#: is narrower than what it holds, plotly.js widens it and draws the whole figure a second
#: time (its ``automargin``): on every chart the browser draws, 0.1 s of a Replay slider move.
#: (A legend of so many runs that it wraps to a second row still widens the top margin.)
SIGNAL_MARGIN = {"l": 84, "r": 76, "t": 72, "b": 72}
#: Pixels between two signal panels: the upper one's lowest tick label and the lower one's title.
PANEL_GAP_PX = 36
#: The Live chart's margins, for the same reason (its legend row is empty; 74 px left, 67 px below).
LIVE_MARGIN = {"l": 80, "r": 20, "t": 30, "b": 70}


def run_colour(run: str) -> str:
    """Colour of the run ``run`` (its id, or a label where no id is known): one of :data:`RUN_COLOURS`
    chosen by a stable hash of ``run``, so a run keeps its colour on every page and in every
    selection (its place among the runs shown does not change it)."""
    import zlib

    return RUN_COLOURS[zlib.crc32(str(run).encode()) % len(RUN_COLOURS)]


def run_colours(runs: Sequence[str]) -> dict[str, str]:
    """``{run: colour}`` of runs drawn together: each its :func:`run_colour`, unless a run before it in
    sorted order holds that colour already (ten colours: two of five runs often hash alike); then
    the palette's next free colour. Only such a clash moves a run's colour, never its place among the
    runs; past ten runs colours repeat."""
    taken: set[str] = set()
    out: dict[str, str] = {}
    for run in sorted(dict.fromkeys(runs), key=str):
        k = RUN_COLOURS.index(run_colour(run))
        free = [RUN_COLOURS[(k + d) % len(RUN_COLOURS)] for d in range(len(RUN_COLOURS))]
        out[run] = next((c for c in free if c not in taken), free[0])
        taken.add(out[run])
        if len(taken) == len(RUN_COLOURS):
            taken.clear()
    return out


def tone(hex_colour: str, k: int) -> str:
    """The ``k``-th series tone of a run colour: 0 the colour, 1 lighter, 2 darker, 3 lighter still.

    Series of one run in one panel keep the run's hue (so a run reads as one
    colour on every panel) and differ in lightness as well as dash and width.
    """
    if k % 4 == 0:
        return hex_colour
    h = hex_colour.lstrip("#")
    rgb = [int(h[i:i + 2], 16) for i in (0, 2, 4)]
    mix = ((255, 0.0), (255, 0.45), (0, 0.35), (255, 0.65))[k % 4]
    out = [round(c + (mix[0] - c) * mix[1]) for c in rgb]
    return "#" + "".join(f"{c:02x}" for c in out)


def _rgba(hex_colour: str, alpha: float) -> str:
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[k:k + 2], 16) for k in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


# ---- numeric helpers (pure NumPy, tested on their own) ------------------------------
def ema_debiased(values: np.ndarray, weight: float) -> np.ndarray:
    """TensorBoard's smoothing: an EMA divided by its bias ``1 - weight**n``.

    ``weight`` is the slider value in ``[0, 1)``; 0 returns the values unchanged.
    Non-finite values pass through as they are and do not move the average
    (as TensorBoard does). The debiased EMA equals pandas' ``ewm(adjust=True)``
    with ``alpha = 1 - weight`` over the finite values, which is what runs here.
    """
    if not 0.0 <= weight < 1.0:
        raise ValidationError(f"smoothing weight {weight!r} is outside [0, 1)", field="smoothing",
                              value=weight)
    v = np.asarray(values, dtype=np.float64)
    if weight == 0.0 or v.size == 0:
        return v.copy()
    finite = np.isfinite(v)
    if finite.all():  # the usual case: no mask to apply and no copy to fill
        return pd.Series(v).ewm(alpha=1.0 - weight, adjust=True).mean().to_numpy()
    out = v.copy()
    if finite.any():
        out[finite] = pd.Series(v[finite]).ewm(alpha=1.0 - weight, adjust=True).mean().to_numpy()
    return out


def thin_flat(x: np.ndarray, y: np.ndarray, stride: int = HOVER_STRIDE) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)`` without the inner points of stretches where ``y`` stays the same.

    The polyline drawn through what is left is the same as through every point
    (a flat stretch is one segment), so a step-shaped or constant series costs
    the browser a few points instead of one a pixel. ``stride > 0`` keeps every
    ``stride``-th inner point as well (for hover, see :data:`HOVER_STRIDE`);
    ``stride=0`` keeps only each stretch's ends. NaN gaps are kept (NaN equals
    nothing).
    """
    x, y = np.asarray(x), np.asarray(y)
    if len(y) < 3:
        return x, y
    inner = np.zeros(len(y), dtype=bool)
    inner[1:-1] = (y[1:-1] == y[:-2]) & (y[1:-1] == y[2:])
    if stride > 0:
        inner &= np.arange(len(y)) % stride != 0
    return x[~inner], y[~inner]


def compact(values: np.ndarray) -> np.ndarray:
    """``values`` in the smallest exact-enough dtype for the browser: whole numbers in int32
    range as int32, other floats as float32 (the diag slots are float32; the hover shows 6
    digits). Plotly sends arrays as base64 of their bytes, which halves the chart's payload
    and what the browser has to parse."""
    a = np.asarray(values)
    if a.dtype.kind not in "fiu" or a.size == 0:
        return a
    if a.dtype.kind in "iu" or (np.isfinite(a).all() and np.array_equal(a, np.round(a))):
        if np.abs(a).max() < 2**31:
            return a.astype(np.int32)
        return a
    return a.astype(np.float32)


@dataclass(frozen=True)
class Reduced:
    """A trace cut to about ``n_out`` points, with its per-bucket min/max band.

    ``band_x`` is empty when the trace was short enough to send whole. ``finite``: whether every
    value of the trace given was finite (its non-finite ones were dropped).
    """

    x: np.ndarray
    y: np.ndarray
    band_x: np.ndarray
    band_lo: np.ndarray
    band_hi: np.ndarray
    finite: bool = True


def downsample(x: np.ndarray, y: np.ndarray, n_out: int = DEFAULT_POINTS, *, finite: bool | None = None) -> Reduced:
    """MinMaxLTTB-select about ``n_out`` points of ``(x, y)`` plus a min/max band.

    ``x`` must be non-decreasing. Non-finite ``y`` are dropped first. The band
    has ``n_out // 4`` equal-count buckets; each holds the minimum and maximum
    of every ``y`` in it, so the extremes the selection skipped stay visible.
    A float32 ``y`` stays float32 (no [T] float64 copy): tsdownsample's LTTB reads each
    value as a float64, which a float32 converts to exactly, so it picks the same points.
    ``finite``: whether every ``y`` is finite, when the caller has read it already (None: read here).
    """
    if n_out < 4:
        raise ValidationError(f"n_out={n_out!r} must be at least 4", field="n_out", value=n_out)
    x = np.asarray(x)
    y = np.asarray(y)
    y = np.ascontiguousarray(y, dtype=np.float32 if y.dtype == np.float32 else np.float64)
    band = None
    if finite is None and len(y) > n_out:
        # the band's minima and maxima carry any NaN or ±Inf: read from them, not by two more passes
        band = _band(y, n_out)
        finite = bool(np.isfinite(band[1]).all() and np.isfinite(band[2]).all())
    elif finite is None:
        finite = all_finite(y)
    if not finite:
        keep = np.isfinite(y)
        x, y, band = x[keep], y[keep], None
    empty = np.empty(0)
    if len(y) <= n_out:
        return Reduced(x, y, empty, empty, empty, finite)
    from tsdownsample import MinMaxLTTBDownsampler

    xf = np.asarray(x, dtype=np.float64)
    idx = MinMaxLTTBDownsampler().downsample(xf, y, n_out=n_out)
    starts, lo, hi = band if band is not None else _band(y, n_out)
    ends = np.append(starts[1:], len(y)) - 1
    bx = x[(starts + ends) // 2]
    return Reduced(x[idx], y[idx], bx, lo, hi, finite)


def _band(y: np.ndarray, n_out: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first row, minimum, maximum) of each of :func:`downsample`'s ``n_out // 4`` equal-count buckets."""
    buckets = max(2, n_out // 4)
    starts = np.linspace(0, len(y), buckets + 1).astype(np.int64)[:-1]
    return starts, np.minimum.reduceat(y, starts), np.maximum.reduceat(y, starts)


def spans(x: np.ndarray, flag: np.ndarray, min_gap: float = 0.0) -> list[tuple[float, float]]:
    """``[(x_start, x_end)]`` of each run of consecutive nonzero ``flag`` values.

    Spans closer than ``min_gap`` in ``x`` are merged, so a run with thousands
    of short episodes still draws about a pixel's worth of shapes each.
    """
    v = np.asarray(flag)
    if v.dtype.kind in "biu" or (v.dtype.kind == "f" and all_finite(v)):
        f = v != 0  # no NaN to read as off: no [T] float64 copy
    else:
        f = np.nan_to_num(np.asarray(flag, dtype=np.float64)) != 0.0
    if not f.any():
        return []
    change = np.flatnonzero(f[1:] != f[:-1]) + 1  # the first row of each run after the first
    rises = change[f[change]]
    starts = rises if not f[0] else np.concatenate(([0], rises))
    falls = change[~f[change]] - 1
    stops = falls if not f[-1] else np.concatenate((falls, [len(f) - 1]))
    xs = np.asarray(x)
    a, b = xs[starts], xs[stops]
    if min_gap > 0 and len(a) > 1:
        # a span merges into the one before when it starts within min_gap of that one's end; a merged
        # span ends where its last member ends, so each gap is measured from the span just before
        gap = a[1:].astype(np.float64) - b[:-1].astype(np.float64)
        first = np.concatenate(([True], gap > min_gap))
        last = np.concatenate((first[1:], [True]))
        a, b = a[first], b[last]
    return list(zip(a, b))


def duty_traces(xs: np.ndarray, values: np.ndarray, what: str, colour: str, *, columns: int,
                top: float | None = None, off: float = 0.0, steps: bool = True,
                x_out: Callable[[np.ndarray], object] | None = None, bins: DutyBins | None = None,
                **legend) -> list[dict] | None:
    """A flag or counter that flips on and off faster than ``columns`` as a duty-cycle band
    (:mod:`regime_dash.figures.duty`): each pixel column filled up to its fraction of steps on,
    the hover saying the fraction and the steps. None when it flips slower: spans, markers or a
    line show it as they are.

    ``top`` is a flag's band height at 100 % on; a counter (``top`` None) fills up to its column
    maximum times the fraction, inside a light min/max envelope. ``off`` is the value that counts
    as off (a counter drawn shifted, recency + 1). ``what`` names it in the hover; ``legend`` goes
    on the band (``name``, default ``what``; ``legendgroup``, ``showlegend``). ``bins``:
    :func:`regime_dash.figures.duty.duty_bins` of ``xs`` and ``columns``, when the caller draws
    several signals against the same ``xs``.
    """
    cols = fast_duty(xs, values, columns, off=off, bins=bins)
    if cols is None:
        return None
    x_out = x_out or compact
    out = []
    if top is None:
        ex, ey = envelope_xy(cols)
        out.append(dict(type="scatter", x=x_out(ex), y=compact(ey + off), mode="lines", fill="toself",
                        line=dict(width=0), fillcolor=_rgba(colour, 0.12), hoverinfo="skip", showlegend=False,
                        legendgroup=legend.get("legendgroup"), name=f"{what} min/max"))
    height = cols.on * (cols.hi if top is None else top) + (off if top is None else 0.0)
    bx, by = band_xy(cols, height)
    custom, template = hover_data(cols, what, steps)  # the band's closing point hovers as its last column
    out.append(dict(type="scatter", x=x_out(bx), y=compact(by), mode="lines", line=dict(width=0.8, color=colour,
                    shape="hv"), fill="tozeroy", fillcolor=_rgba(colour, 0.35),
                    customdata=np.vstack([custom, custom[-1:]]), hovertemplate=template,
                    **{"name": what, "showlegend": False, **legend}))
    return out


def x_values(frame: pd.DataFrame, x: str = "step") -> np.ndarray:
    """The x column of ``frame``: ``step`` as numbers, ``wall_time`` (unix seconds) as numbers."""
    if x not in ("step", "wall_time"):
        raise ValidationError(f"x axis {x!r} is not 'step' or 'wall_time'", field="x", value=x)
    if x not in frame.columns:
        raise ValidationError(f"the frame has no {x!r} column to use as the x axis", field="x", value=x)
    return pd.to_numeric(frame[x], errors="coerce").to_numpy(dtype=np.float64)


def plot_x(xs: np.ndarray, x: str):
    """x values as plotly draws them: dates on a wall-clock axis (``x="wall_time"``), else as they are."""
    return pd.to_datetime(xs, unit="s").to_numpy() if x == "wall_time" else xs


# ---- the signal panels ------------------------------------------------------------
def signal_panels(runs: Mapping[str, pd.DataFrame], *, x: str = "step", smoothing: float = 0.0,
                  n_out: int = DEFAULT_POINTS, x_range: Sequence[float] | None = None,
                  height: int = 1400, colours: Mapping[str, str] | None = None,
                  x_offsets: Mapping[str, float] | None = None,
                  traces_of: Callable[..., list[dict]] | None = None):
    """The seven regime panels of every run in ``runs``, on one shared, zoomable x axis.

    Parameters
    ----------
    runs
        ``{label: frame}``; each frame has ``step`` (or ``wall_time``) and the
        canonical diag columns it has data for. Missing columns leave their
        traces out; nothing else is required.
    x
        ``"step"`` or ``"wall_time"`` (unix seconds, drawn as dates).
    smoothing
        Debiased-EMA weight in ``[0, 1)`` for continuous signals; flags and
        counters are never smoothed.
    n_out
        Points per trace after MinMaxLTTB downsampling.
    x_range
        Initial x window ``(lo, hi)`` in x units (e.g. to jump to a violation).
    height
        Figure height in pixels.
    colours
        ``{label: colour}``; default: :func:`run_colours` of the labels.
    x_offsets
        ``{label: step}`` subtracted from that run's steps (``x="step"`` only): with
        each run's first step, runs that started at different steps line up.
    traces_of
        Called as :func:`run_traces` is (same arguments) to get each run's traces;
        default :func:`run_traces`. A caller that keeps a run's traces between
        figures (the dashboard's cache: the baseline of a what-if chart does not
        change when a slider moves) passes its own.

    Returns
    -------
    plotly.graph_objects.Figure
        :func:`signal_spec` as a figure, with ``x_range`` applied.
    """
    import plotly.graph_objects as go

    # the traces are plain dicts built from checked values, and the layout was validated
    # once when it was cached: plotly's per-property validation of ~60 traces was most
    # of a slider move's figure time
    fig = go.Figure(_signal_dict(runs, x=x, smoothing=smoothing, n_out=n_out, height=height, colours=colours,
                                 x_offsets=x_offsets, traces_of=traces_of), _validate=False)
    if x_range is not None:
        lo, hi = x_range
        fig.update_xaxes(range=list(plot_x(np.array([lo, hi], dtype=np.float64), x)))
    return fig


def signal_spec(runs: Mapping[str, pd.DataFrame], *, x: str = "step", smoothing: float = 0.0,
                n_out: int = DEFAULT_POINTS, height: int = 1400, colours: Mapping[str, str] | None = None,
                x_offsets: Mapping[str, float] | None = None,
                traces_of: Callable[..., list[dict]] | None = None) -> dict:
    """:func:`signal_panels` (without ``x_range``) as a plain plotly figure dict, ``{"data", "layout"}``.

    The Replay page draws this dict as it is (its in-place chart sends it to the
    browser); as ``st.plotly_chart``'s input it cost 0.6–4.8 ms a slider move, against
    7.8–16.7 ms for a :class:`~plotly.graph_objects.Figure`, whose ``to_dict``
    deep-copies every array. Arrays
    go as plotly's typed arrays (base64 of their bytes), which plotly reads from 6.0 on.
    Parameters as :func:`signal_panels` takes them.
    """
    spec = _signal_dict(runs, x=x, smoothing=smoothing, n_out=n_out, height=height, colours=colours,
                        x_offsets=x_offsets, traces_of=traces_of)
    # on copies of the trace dicts, which the caller's traces_of may keep
    spec["data"] = [{k: plotly_arrays.encode(v) for k, v in trace.items()} for trace in spec["data"]]
    return spec


def _signal_dict(runs: Mapping[str, pd.DataFrame], *, x: str, smoothing: float, n_out: int, height: int,
                 colours: Mapping[str, str] | None, x_offsets: Mapping[str, float] | None,
                 traces_of: Callable[..., list[dict]] | None) -> dict:
    """The figure of :func:`signal_panels` as a dict, its arrays still numpy arrays."""
    if x_offsets and x != "step":
        raise ValidationError(f"runs can be aligned at their first step on the step axis only, not {x!r}",
                              field="x_offsets", value=x)
    x_title = "wall time" if x == "wall_time" else ("steps since each run's first step" if x_offsets else "step")
    layout, _ = _panel_layout(height, x, x_title)
    n = len(runs)
    traces_of = traces_of or run_traces
    data: list[dict] = []
    colours = {**run_colours(list(runs)), **(colours or {})}
    for i, (label, frame) in enumerate(runs.items()):
        colour = colours[label]
        # earlier runs draw wider, so a later run drawn exactly on top leaves a rim of the earlier one
        data += traces_of(label, frame, colour, x=x, smoothing=smoothing, n_out=n_out,
                          offset=float((x_offsets or {}).get(label, 0.0)), widen=1.0 + 0.7 * (n - 1 - i))
    return {"data": data, "layout": copy.deepcopy(layout)}


def signal_x_domain() -> list[float]:
    """The signal panels' x domain (a fraction of the plot width): their right-hand y axes take room
    at the right, so a figure drawn below them at the same width lines its x axes up on this."""
    return list(_panel_layout(1400, "step", "step")[0]["xaxis"]["domain"])


@functools.lru_cache(maxsize=16)
def _panel_layout(height: int, x: str, x_title: str) -> tuple[dict, dict[tuple[int, bool], dict[str, str]]]:
    """The seven panels' layout (validated plotly JSON) and ``{(row, secondary): {"xaxis", "yaxis"}}``."""
    from plotly.subplots import make_subplots

    specs = [[{"secondary_y": (r + 1) in SECONDARY_ROWS}] for r in range(len(PANELS))]
    # room between two panels for the lower one's title above it and the upper one's lowest tick
    # label (each about 16 px): at a fixed fraction the title sat on the tick of a short chart
    plot_height = height - SIGNAL_MARGIN["t"] - SIGNAL_MARGIN["b"]
    fig = make_subplots(rows=len(PANELS), cols=1, shared_xaxes=True, subplot_titles=PANELS, specs=specs,
                        vertical_spacing=min(0.06, max(0.025, PANEL_GAP_PX / max(plot_height, 1))))
    fig.update_yaxes(type="log", row=3, col=1, secondary_y=False)
    for r, (left, right) in enumerate(PANEL_Y, start=1):
        kw = dict(row=r, col=1, title_font=dict(size=11))
        fig.update_yaxes(title_text=left, **kw, **({"secondary_y": False} if right else {}))
        if right:
            fig.update_yaxes(title_text=right, secondary_y=True, **kw)
    fig.update_layout(height=height, margin=SIGNAL_MARGIN, hovermode="x unified",
                      legend=dict(orientation="h", yanchor="bottom", y=1.01, x=0, title_text="runs: "),
                      uirevision="signals")
    for ann in fig.layout.annotations:  # subplot titles: smaller and left-aligned
        ann.update(font=dict(size=12), x=0, xanchor="left")
    fig.update_xaxes(title_text=x_title, row=len(PANELS), col=1)
    if x == "step":  # whole step numbers on the ticks and in the hover, never "10.998k"
        fig.update_xaxes(tickformat="d", hoverformat="d")
    axes = {}
    for r in range(1, len(PANELS) + 1):
        for secondary in ((False, True) if r in SECONDARY_ROWS else (False,)):
            fig.add_scatter(x=[], y=[], row=r, col=1, secondary_y=secondary)  # where plotly puts it
            axes[(r, secondary)] = {"xaxis": fig.data[-1].xaxis, "yaxis": fig.data[-1].yaxis}
    return fig.layout.to_plotly_json(), axes


def run_traces(label: str, frame: pd.DataFrame, colour: str, *, x: str = "step", smoothing: float = 0.0,
               n_out: int = DEFAULT_POINTS, offset: float = 0.0, widen: float = 1.0,
               memo: dict | None = None) -> list[dict]:
    """One run's traces on the seven panels, as plain plotly dicts placed on their subplots' axes.

    Parameters
    ----------
    label
        The run's name in the legend and the hover.
    frame
        The run (``step`` or ``wall_time`` and the canonical diag columns it has).
    colour
        The run's colour.
    x, smoothing, n_out
        As :func:`signal_panels` takes them.
    offset
        Subtracted from the run's x values (its first step, to align runs).
    widen
        Line width factor (earlier runs of an overlay draw wider).
    memo
        A dict the caller keeps for this run and every argument but ``smoothing``: the traces
        that do not depend on the smoothing (counters, flags, events, and every series at
        smoothing 0) are kept in it and taken from it next time, so a smoothing change
        rebuilds only the smoothed series (of ten runs overlaid, a quarter of the work).

    Returns
    -------
    list of dict
        ``scatter`` traces, in drawing order; :func:`signal_panels` puts them on its layout.
    """
    # the axes' names do not depend on the height or the x axis: any cached layout gives them
    batch = _TraceBatch(_panel_layout(1400, "step", "step")[1])
    if len(frame):
        _RunPanels(batch, label, frame, colour, x=x, smoothing=smoothing, n_out=n_out, offset=offset, widen=widen,
                   memo=memo).draw()
    return batch.data


class _TraceBatch:
    """Collects the panels' traces as plain dicts, each placed on its subplot's axes."""

    def __init__(self, axes: Mapping[tuple[int, bool], Mapping[str, str]]) -> None:
        self.data: list[dict] = []
        self._axes = axes

    def add_trace(self, trace: dict, row: int, col: int = 1, secondary_y: bool = False) -> None:
        self.data.append({"type": "scatter", **trace, **self._axes[(row, secondary_y)]})


def _plot_order(vw, x: str, offset: float) -> tuple[np.ndarray, np.ndarray | None]:
    """The x values of a view's rows in plotting order, and the order (None: the rows' own).

    On the step axis with whole-number steps these are the view's steps, sorted already; any
    other x (a wall clock can step back) is sorted here, as downsampling needs."""
    frame = vw.frame
    if x == "step" and "step" in frame.columns and frame["step"].dtype.kind in "iu":
        xs = vw.step.astype(np.float64)
        return (xs - offset if offset else xs), None
    xs = x_values(frame, x)
    if offset:
        xs = xs - offset
    if np.any(np.diff(xs) < 0):
        order = np.argsort(xs, kind="stable")
        return xs[order], order
    return xs, None


def _finite_max(*series: np.ndarray) -> float:
    """The largest finite value of any of ``series``, 1.0 when there is none."""
    if all(all_finite(a) for a in series):
        return float(max(a.max() for a in series)) if any(a.size for a in series) else 1.0
    finite = np.concatenate([a[np.isfinite(a)] for a in series])
    return float(finite.max()) if finite.size else 1.0


class _RunPanels:
    """One run's drawing on the seven panels: the run's view, its x values in plotting order, the
    ``memo`` (see :func:`run_traces`), the duty bands' columns and whether the legend entry is drawn yet.

    :meth:`draw` adds every panel's traces to ``fig``; each panel is a method of its own, drawn
    with the series helpers :meth:`line`, :meth:`shade` and :meth:`markers`.
    """

    def __init__(self, fig: _TraceBatch, label: str, frame: pd.DataFrame, colour: str, *, x: str,
                 smoothing: float, n_out: int, offset: float = 0.0, widen: float = 1.0,
                 memo: dict | None = None) -> None:
        from regime_dash.analysis.view import view

        self.fig, self.label, self.colour, self.x = fig, label, colour, x
        self.smoothing, self.n_out, self.widen, self.memo = smoothing, n_out, widen, memo
        self.vw = view(frame)  # sorted by step: the row order every analysis mask is in
        self.frame = self.vw.frame
        self.xs, self.order = _plot_order(self.vw, x, offset)
        xs = self.xs
        # sorted: a finite x's extent is its ends
        extent = (xs[-1] - xs[0]) if all_finite(xs) else (np.nanmax(xs) - np.nanmin(xs))
        self.span_gap = extent / max(n_out, 1) if len(xs) else 0.0
        self.first = True  # the next series drawn carries the run's legend entry
        self.bins: DutyBins | None = None  # the duty bands' columns of xs, cut once for every flag and counter
        self.at = " (step %{x:d})" if x == "step" else ""

    def draw(self) -> None:
        """Every panel of the run, top to bottom."""
        self.dead_zone()
        self.eps_recovery()
        self.tail()
        self.sigma_envelope()
        self.transition()
        self.iqn_tau()
        self.kelly()

    # ---- the run's values ----------------------------------------------------------
    def reorder(self, a: np.ndarray) -> np.ndarray:
        """``a`` (one value a row, in step order) in plotting order."""
        return a[self.order] if self.order is not None else a

    def col(self, name: str) -> np.ndarray | None:
        """A column as numbers: a float32 one as it is (read only, no [T] copy: every trace of it
        reads float32 exactly as its float64 image), any other as float64."""
        if name not in self.frame.columns:
            return None
        memo = self.memo
        if memo is not None and ("col", name) in memo:
            return memo[("col", name)]
        series = self.frame[name]
        if series.dtype == np.float32:
            values = self.reorder(series.to_numpy())
        else:
            values = self.reorder(pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64))
        if memo is not None and len(values) <= MEMO_ROWS:
            values.setflags(write=False)  # shared by every later call: never changed in place
            memo[("col", name)] = values
        return values

    def rows_of(self, steps) -> np.ndarray:
        """Row positions (in plotting order) of the given trainer steps."""
        rows = np.searchsorted(self.vw.step, np.asarray(steps, dtype=np.int64))
        if self.order is None:
            return rows
        return np.sort(np.argsort(self.order)[rows])

    def x_out(self, values: np.ndarray):
        """x values as sent: dates on a wall-clock axis, else the compact numbers."""
        return plot_x(values, self.x) if self.x == "wall_time" else compact(values)

    # ---- the memo -----------------------------------------------------------------------
    def replayed(self, key) -> bool:
        """Whether the traces kept under ``key`` (see ``memo``) were added again."""
        if self.memo is None or key not in self.memo:
            return False
        self.fig.data.extend(self.memo[key])
        return True

    def keep(self, key, n0: int) -> None:
        """Keep the traces added since there were ``n0`` under ``key``."""
        if self.memo is not None:
            self.memo[key] = self.fig.data[n0:]

    # ---- the series helpers ------------------------------------------------------------
    def banded(self, row: int, values: np.ndarray, name: str, *, top: float | None = None, off: float = 0.0,
               secondary: bool = False, legend: bool = False) -> bool:
        """The duty band of a flag or counter flipping faster than the pixel columns; False if it does not."""
        label = self.label
        shown = dict(name=label if legend and self.first else f"{label} {name}", legendgroup=label,
                     showlegend=legend and self.first)
        if self.bins is None:
            self.bins = duty_bins(self.xs, self.n_out)
        traces = duty_traces(self.xs, values, f"{label} {name}", self.colour, columns=self.n_out, top=top,
                             off=off, steps=self.x == "step", x_out=self.x_out, bins=self.bins, **shown)
        for trace in traces or ():
            self.fig.add_trace(trace, row=row, col=1, secondary_y=secondary)
        return traces is not None

    def line(self, row: int, y: np.ndarray | None, name: str, *, dash: str | None = None, secondary: bool = False,
             smooth: bool = True, width: float = 1.5, band: bool = True, k: int = 0, off: float | None = None) -> None:
        """One series; ``k`` is its tone (0 the run's main series, then lighter/darker variants). A counter
        (``off``: its value when off) flipping faster than the pixel columns is drawn as a duty band."""
        if y is None:
            return
        smoothed = smooth and self.smoothing > 0
        key = None if smoothed else ("line", row, name)
        if key is not None and self.replayed(key):
            self.first = False
            return
        n0 = len(self.fig.data)
        if off is not None and self.banded(row, y, name, off=off, secondary=secondary, legend=True):
            self.first = False
            if key is not None:
                self.keep(key, n0)
            return
        if smoothed:
            y = ema_debiased(y, self.smoothing)
        red = downsample(self.xs, y, self.n_out)
        shade_colour = tone(self.colour, k)
        if band and len(red.band_x) and not np.array_equal(red.band_lo, red.band_hi):
            # a band as thin as the line (a series constant within every bucket) is left out
            self.min_max_band(row, red, name, shade_colour, secondary)
        self.series(row, red, y, name, shade_colour, width=width, dash=dash, secondary=secondary)
        self.first = False
        if not red.finite:  # read once: most lines have no NaN/±Inf to drop, break at or mark
            self.nonfinite_markers(row, y, name, secondary)
        if key is not None:
            self.keep(key, n0)

    def min_max_band(self, row: int, red: Reduced, name: str, shade_colour: str, secondary: bool) -> None:
        """The per-bucket minima and maxima of a downsampled series as one closed polygon (the maxima
        forward, the minima back), not two traces and a fill between them: half the traces for the
        browser to draw."""
        hx, hy = thin_flat(red.band_x, red.band_hi, stride=0)
        lx, ly = thin_flat(red.band_x[::-1], red.band_lo[::-1], stride=0)
        self.fig.add_trace(dict(x=self.x_out(np.concatenate([hx, lx])), y=compact(np.concatenate([hy, ly])),
                                mode="lines",
                                line=dict(width=0, color=shade_colour), fill="toself",
                                fillcolor=_rgba(shade_colour, 0.15), hoverinfo="skip",
                                showlegend=False, legendgroup=self.label, name=f"{self.label} {name} min/max"),
                           row=row, col=1, secondary_y=secondary)

    def series(self, row: int, red: Reduced, y: np.ndarray, name: str, shade_colour: str, *, width: float,
               dash: str | None, secondary: bool) -> None:
        """The line of a downsampled series ``red`` of ``y``, the run's legend entry if it is the first."""
        label = self.label
        # the line breaks at NaN/±Inf, never drawn through
        lx, ly = thin_flat(*((red.x, red.y) if red.finite else break_at_nonfinite(red.x, red.y, self.xs, y)))
        self.fig.add_trace(dict(x=self.x_out(lx), y=compact(ly), mode="lines",
                                line=dict(color=shade_colour, width=width * self.widen,
                                          **({"dash": dash} if dash else {})),
                                name=label if self.first else f"{label} {name}",
                                legendgroup=label, showlegend=self.first,
                                hovertemplate=f"{label} {name}: %{{y:.6g}}{self.at}<extra></extra>"),
                           row=row, col=1, secondary_y=secondary)

    def nonfinite_markers(self, row: int, y: np.ndarray, name: str, secondary: bool) -> None:
        """A visible marker at each NaN/±Inf of ``y`` whose hover says what the value was."""
        nx, ny, words = nonfinite_points(self.xs, y)
        if not len(nx):
            return
        label = self.label
        self.fig.add_trace(dict(x=plot_x(nx, self.x), y=ny, mode="markers", text=words,
                                marker=dict(symbol="x", size=9, color=NONFINITE_COLOUR),
                                name=f"{label} {name} non-finite", legendgroup=label, showlegend=False,
                                hovertemplate=f"{label} {name}: %{{text}}<extra></extra>"),
                           row=row, col=1, secondary_y=secondary)

    def shade(self, row: int, flag, top: float | None, name: str) -> None:
        """Shaded spans where ``flag`` (an array, or a function that makes it) is set."""
        if flag is None or top is None or not np.isfinite(top) or self.replayed(("shade", row, name)):
            return
        n0 = len(self.fig.data)
        flag = flag() if callable(flag) else flag
        if self.banded(row, flag, name, top=top):
            self.keep(("shade", row, name), n0)
            return
        sp = spans(self.xs, flag, self.span_gap)
        if not sp:
            return
        # one trace of rectangles separated by None gaps, not one shape per span: a run
        # with thousands of episodes stays one trace
        px, py = [], []
        for a, b in sp:
            b = b if b > a else a + max(self.span_gap, 1e-9)  # a one-step span still gets a width
            corners = plot_x(np.array([a, a, b, b], dtype=np.float64), self.x)
            px += [*corners, None]
            py += [0.0, top, top, 0.0, None]
        self.fig.add_trace(dict(x=px, y=py, mode="lines", fill="toself", line=dict(width=0),
                                fillcolor=_rgba(self.colour, 0.18), hoverinfo="skip", legendgroup=self.label,
                                showlegend=False, name=f"{self.label} {name}"), row=row, col=1)
        self.keep(("shade", row, name), n0)

    def markers(self, row: int, pos, y: np.ndarray | None, name: str, symbol: str, secondary: bool = False,
                flag: np.ndarray | None = None, top: float = 1.0) -> None:
        """Markers at the rows ``pos`` (an array, or a function that finds them); the duty band of
        ``flag`` (the flag they mark) where it flips faster than the pixel columns."""
        key = ("markers", row, name)
        if self.replayed(key):
            return
        n0 = len(self.fig.data)
        if flag is not None and self.banded(row, flag, name, top=top, secondary=secondary):
            self.keep(key, n0)
            return
        pos = pos() if callable(pos) else pos
        if pos is None or len(pos) == 0:
            self.keep(key, n0)
            return
        if len(pos) > self.n_out:  # thousands of events: keep an even sample, the band shows density
            pos = pos[np.linspace(0, len(pos) - 1, self.n_out).astype(np.int64)]
        step_format = ":d" if self.x == "step" else ""
        self.fig.add_trace(dict(x=self.x_out(self.xs[pos]),
                                y=compact(y[pos] if y is not None else np.ones(len(pos))),
                                mode="markers", marker=dict(symbol=symbol, size=8, color=self.colour,
                                                            line=dict(width=1, color="black")),
                                name=f"{self.label} {name}", legendgroup=self.label, showlegend=False,
                                hovertemplate=f"{self.label} {name} @ %{{x{step_format}}}<extra></extra>"),
                           row=row, col=1, secondary_y=secondary)
        self.keep(key, n0)

    # ---- the panels, top to bottom -------------------------------------------------------
    def dead_zone(self) -> None:
        """Panel 1: the duration, the episodes shaded, the timeouts marked."""
        from regime_dash.analysis import episodes as ep

        duration = self.col(diag.DURATION)
        self.line(1, duration, "duration", smooth=False, off=0.0)
        top = np.float64(np.nanmax(duration)) if duration is not None and np.isfinite(duration).any() else 1.0
        self.shade(1, self.col(diag.FLAG), max(top, 1.0), "dead-zone episode")
        if diag.TIMEOUT in self.frame.columns:
            self.markers(1, lambda: self.rows_of(ep.timeouts(self.vw)["step"]), duration, "timeout", "x",
                         flag=self.col(diag.TIMEOUT), top=max(top, 1.0))

    def eps_recovery(self) -> None:
        """Panel 2: ε live in its [min, max] band; the recovery factor."""
        eps_lo, eps_hi = self.col(diag.EPS_MIN), self.col(diag.EPS_MAX)
        if eps_lo is not None and eps_hi is not None:
            self.line(2, eps_lo, "ε min", dash="dot", smooth=False, width=0.8, band=False, k=3)
            self.line(2, eps_hi, "ε max", dash="dot", smooth=False, width=0.8, band=False, k=3)
            self.fig.data[-1].update(fill="tonexty", fillcolor=_rgba(self.colour, 0.08))
        self.line(2, self.col(diag.LIVE), "ε live")
        self.line(2, self.col(diag.FACTOR), "recovery factor", dash="dashdot", width=1, k=2)

    def tail(self) -> None:
        """Panel 3: recency + 1 (log axis), the tail events marked; σ of Δworst on the right."""
        from regime_dash.analysis import episodes as ep

        recency = self.col(diag.RECENCY)
        if recency is not None:
            self.line(3, np.add(recency, 1.0, dtype=np.float64), "recency+1", smooth=False, off=1.0)
            self.markers(3, lambda: self.rows_of(self.vw.step[ep.tail_event_rows(self.vw)]), None, "tail event",
                         "diamond")
        tail_var = self.col(diag.VARIANCE)
        if tail_var is not None:
            self.line(3, np.sqrt(np.maximum(tail_var, 0.0, dtype=np.float64)), "σ Δworst", dash="dot",
                      secondary=True, k=2)

    def sigma_envelope(self) -> None:
        """Panel 4: PopArt σ against its envelope, the rows where the floor is active shaded."""
        from regime_dash.analysis import episodes as ep

        sigma, envelope, var = self.col(diag.SIGMA), self.col(diag.ENVELOPE), self.col(diag.POPART_VAR)
        self.line(4, sigma, "σ")
        self.line(4, envelope, "envelope", dash="dash", k=2, width=2.5)
        if sigma is not None and envelope is not None and var is not None:
            self.shade(4, lambda: self.reorder(ep.floor_active(self.vw)), _finite_max(sigma, envelope),
                       "floor active")

    def transition(self) -> None:
        """Panel 5: the v9 transition's steps remaining; safety_frac on the right."""
        self.line(5, self.col(diag.REMAINING), "transition remaining", smooth=False, off=0.0)
        self.line(5, self.col(diag.SAFETY_FRAC), "safety_frac", dash="dot", secondary=True, k=2)

    def iqn_tau(self) -> None:
        """Panel 6: IQN τ_min against the effective τ_min."""
        self.line(6, self.col(diag.TAU_MIN), "τ_min", dash="dash", k=1, width=2.5)
        self.line(6, self.col(diag.TAU_MIN_EFF), "τ_min effective")

    def kelly(self) -> None:
        """Panel 7: the Kelly fraction after resurrection; the analytic one."""
        self.line(7, self.col(diag.KELLY), "kelly_f", off=0.0)  # zeroed step after step in a dead zone: its duty band
        self.line(7, self.col(diag.KELLY_ANALYTIC), "analytic", dash="dash", width=1, k=2)


# ---- sweeps -------------------------------------------------------------------------
def sweep_heatmap(table: pd.DataFrame, x_field: str, y_field: str, metric: str):
    """Heatmap of ``metric`` over a two-field sweep table (one row per config).

    Plotly selects points, not heatmap cells, so each cell also carries a
    transparent square marker at its centre whose ``customdata[0]`` is the
    row's position in ``table``: clicking a cell selects its marker, and the
    page opens that replay. The marker draws a light square on the chosen cell.
    """
    import plotly.graph_objects as go

    for name in (x_field, y_field, metric):
        if name not in table.columns:
            raise ValidationError(f"sweep table has no column {name!r}", field=name, value=name)
    xs = np.sort(table[x_field].unique())
    ys = np.sort(table[y_field].unique())
    z = np.full((len(ys), len(xs)), np.nan)
    row_of = np.full((len(ys), len(xs)), -1, dtype=np.int64)
    xi = np.searchsorted(xs, table[x_field].to_numpy())
    yi = np.searchsorted(ys, table[y_field].to_numpy())
    values = table[metric].to_numpy(dtype=np.float64)
    z[yi, xi] = values
    row_of[yi, xi] = np.arange(len(table))
    fig = go.Figure(go.Heatmap(x=xs, y=ys, z=z, customdata=row_of, colorscale="Viridis",
                               colorbar=dict(title=metric), hoverinfo="skip"))
    # a marker about the size of a cell (on a plot some 600 × 380 px), so a click anywhere near
    # the cell's centre selects it
    size = int(max(10, min(60, 0.9 * min(600 / len(xs), 380 / len(ys)))))
    fig.add_trace(go.Scatter(
        x=table[x_field].to_numpy(), y=table[y_field].to_numpy(), mode="markers", showlegend=False,
        # plain lists, not an array: the browser's selection event then carries [row, value] per point
        name="cells", customdata=[[i, float(v)] for i, v in enumerate(values)],
        marker=dict(symbol="square", size=size,
                    color="rgba(255,255,255,0)", line=dict(width=0)),
        selected=dict(marker=dict(color="rgba(255,255,255,0.45)")),
        unselected=dict(marker=dict(opacity=1)),
        hovertemplate=f"{x_field}=%{{x}}<br>{y_field}=%{{y}}<br>{metric}=%{{customdata[1]:g}}"
                      "<br>click to open this replay<extra></extra>"))
    fig.update_layout(xaxis_title=x_field, yaxis_title=y_field, height=460, clickmode="event+select",
                      margin=dict(l=60, r=20, t=30, b=50))
    return fig


def sweep_line(table: pd.DataFrame, x_field: str, metric: str):
    """``metric`` against one swept field; ``customdata`` is each point's row in ``table``."""
    import plotly.graph_objects as go

    for name in (x_field, metric):
        if name not in table.columns:
            raise ValidationError(f"sweep table has no column {name!r}", field=name, value=name)
    order = np.argsort(table[x_field].to_numpy(), kind="stable")
    fig = go.Figure(go.Scatter(x=table[x_field].to_numpy()[order], y=table[metric].to_numpy()[order],
                               mode="lines+markers", customdata=order,
                               hovertemplate=f"{x_field}=%{{x}}<br>{metric}=%{{y}}<extra></extra>"))
    fig.update_layout(xaxis_title=x_field, yaxis_title=metric, height=420,
                      margin=dict(l=60, r=20, t=30, b=50))
    return fig


#: Colour of each kind of mark :func:`mark_steps` draws (config changes, injections).
MARK_COLOURS = {"config": "#7f7f7f", "shock": "#d62728", "flat": "#ff7f0e", "boundary": "#9467bd"}


def mark_steps(fig, marks: Sequence[tuple[float, str, str]]):
    """Draw a vertical line through every panel at each ``(step, kind, label)`` of ``marks``.

    ``kind`` picks the colour (:data:`MARK_COLOURS`); ``label`` is written at the
    top of the figure, so a live run's chart shows where each config change or
    injection took effect. Returns ``fig``.
    """
    for shape, note in _marks(marks):
        fig.add_shape(**shape)
        fig.add_annotation(**note)
    return fig


def _marks(marks: Sequence[tuple[float, str, str]]) -> list[tuple[dict, dict]]:
    """``(shape, annotation)`` dicts of :func:`mark_steps`'s vertical lines, one pair per mark."""
    out = []
    for step, kind, label in marks:
        colour = MARK_COLOURS.get(kind, "#7f7f7f")
        short = label if len(label) <= 32 else label[:31] + "…"
        out.append((dict(type="line", x0=step, x1=step, xref="x", y0=0, y1=1, yref="paper",
                         line=dict(color=colour, width=1, dash="dot"), name=f"{kind} at {step}: {label}"),
                    dict(x=step, xref="x", y=1, yref="paper", yanchor="bottom", xanchor="left", text=short,
                         showarrow=False, font=dict(size=10, color=colour), hovertext=label,
                         name=f"mark {kind}")))
    return out


# ---- the live chart ---------------------------------------------------------------------
#: The Live page's panels: (title, y-axis title with units, [(column, series name, dash)]).
LIVE_PANELS: tuple[tuple[str, str, tuple[tuple[str, str, str], ...]], ...] = (
    ("dead zone", "duration (steps)", ((diag.DURATION, "duration", "solid"),)),
    ("ε recovery", "ε (fraction)", ((diag.LIVE, "ε live", "solid"), (diag.EPS_MIN, "ε min", "dot"))),
    ("σ envelope", "σ (reward units)", ((diag.SIGMA, "σ", "solid"), (diag.ENVELOPE, "envelope", "dash"))),
    ("kelly fraction", "kelly_f (fraction)", ((diag.KELLY, "kelly_f", "solid"), (diag.KELLY_ANALYTIC, "analytic", "dash"))),
)


def live_figure(frame: pd.DataFrame, marks: Sequence[tuple[float, str, str]] = (), *,
                window: int = 2000, colour: str = RUN_COLOURS[0]) -> dict:
    """The Live page's chart of the last ``window`` steps of ``frame``, as a plain Plotly dict.

    A dict, not a :class:`plotly.graph_objects.Figure`: it is rebuilt every tick
    while a run plays, and building it without plotly's validation takes a few
    milliseconds. Flat stretches are thinned (:func:`thin_flat`) and values sent
    as float32/int32 (:func:`compact`). The layout carries a fixed ``uirevision``.

    Parameters
    ----------
    frame
        The live run so far (``step`` and the canonical diag columns).
    marks
        ``(step, kind, label)`` of each config change and injection: a vertical
        line through every panel with its label, as :func:`mark_steps` draws them.
    window
        Trailing steps shown.
    colour
        The run's colour.
    """
    tail = frame.iloc[-window:] if len(frame) > window else frame
    x = tail["step"].to_numpy(dtype=np.int64) if "step" in tail.columns else np.arange(len(tail))
    n = len(LIVE_PANELS)
    gap = 0.04
    height = (1.0 - gap * (n - 1)) / n
    data: list[dict] = []
    layout: dict = {"height": 760, "margin": dict(LIVE_MARGIN), "hovermode": "x unified",
                    "uirevision": "live", "showlegend": True,
                    "legend": dict(orientation="h", yanchor="bottom", y=1.01, x=0), "annotations": []}
    for i, (title, ytitle, series) in enumerate(LIVE_PANELS):
        top = 1.0 - i * (height + gap)
        ax = "" if i == 0 else str(i + 1)
        layout[f"yaxis{ax}"] = dict(domain=[max(0.0, round(top - height, 6)), min(1.0, round(top, 6))], title=dict(text=ytitle, font=dict(size=11)),
                                    anchor=f"x{ax}")
        layout[f"xaxis{ax}"] = dict(anchor=f"y{ax}", tickformat="d", hoverformat="d",
                                    **({"matches": "x"} if i else {}), showticklabels=i == n - 1,
                                    **({"title": dict(text="step")} if i == n - 1 else {}))
        layout["annotations"].append(dict(text=title, x=0, xanchor="left", y=top, yanchor="bottom",
                                          xref="paper", yref="paper", showarrow=False, font=dict(size=12)))
        for k, (column, name, dash) in enumerate(series):
            if column not in tail.columns:
                continue
            y = pd.to_numeric(tail[column], errors="coerce").to_numpy(dtype=np.float64)
            band = (duty_traces(x, y, name, tone(colour, 2 * k), columns=DEFAULT_POINTS)
                    if column in COUNTER_COLUMNS else None)
            if band is not None:  # a counter flipping faster than the pixel columns
                data += [{**trace, "xaxis": f"x{ax}", "yaxis": f"y{ax}"} for trace in band]
                continue
            tx, ty = thin_flat(x, y)  # flat stretches (ε min, a counter at rest) cost two points
            data.append(dict(type="scatter", mode="lines", x=compact(tx), y=compact(ty), name=name, xaxis=f"x{ax}", yaxis=f"y{ax}",
                             line=dict(color=tone(colour, 2 * k), dash=dash, width=1.5 + (k == 0)),
                             showlegend=False, hovertemplate=f"{name}: %{{y:.6g}}<extra></extra>"))
    shown = [m for m in marks if len(x) and x[0] <= m[0] <= x[-1]]  # those in the trailing window
    pairs = _marks(shown)
    layout["shapes"] = [shape for shape, _ in pairs]
    layout["annotations"] += [note for _, note in pairs]
    return {"data": data, "layout": layout}
