"""Verdicts on the charts: failed checks, warnings and findings where they happen.

Functional like :mod:`regime_dash.figures.signals`: a figure and a
:class:`~regime_dash.analysis.verdict.Verdict` go in, the same figure comes out
with the verdict drawn on the panel of the signal each item concerns:

* a marker at each step an item names (▼ a check, ★ a finding), whose hover
  says what failed and why;
* a shaded band over each ``[start, end]`` stretch (a Kelly trap, a cycling dead zone, a resume's
  re-logged steps);
* a dashed line down every panel where the run resumed from a checkpoint (:func:`resume_lines`);
* colour by severity: red ``fail``, orange ``warn``, blue ``info``.

Also here, for :func:`regime_dash.figures.signals.signal_panels`: :func:`break_at_nonfinite`
(a line breaks at NaN/±Inf instead of being drawn through) and
:func:`nonfinite_points` (where the markers of those values go and what their hover says).
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from regime_dash.diag import catalogue as diag
from regime_dash.figures import plotly_arrays
from regime_dash.analysis.verdict import Verdict

P, R = diag.P, diag.R

#: Colour of each severity (a check's status ``fail``/``warn`` is its severity).
SEVERITY_COLOURS = {"fail": "#D62728", "warn": "#FF7F0E", "info": "#1F77B4"}
#: Colour of NaN/±Inf markers.
NONFINITE_COLOUR = "#9400D3"

#: Which signal panel (1-based row of :data:`regime_dash.figures.signals.PANELS`) a diag field belongs to,
#: by the longest matching prefix.
_PANEL_PREFIXES: tuple[tuple[str, int], ...] = (
    (R + "dead_zone.", 1), (R + "kelly_eps_recovery.", 2), (R + "tail.", 3), (P + "popart.", 4),
    (R + "popart_envelope.", 4), (R + "transition.", 5), (P + "kelly.safety_frac", 5), (P + "iqn.", 6),
    (R + "iqn_tau_boost.", 6), (P + "kelly.", 7), (P + "positions.", 7), (P + "session_pnl.", 3),
    ("eval.", 7),
)


def panel_of(column: str | None) -> int:
    """The panel row a column is drawn on (row 1, the dead zone, for a run-level item with no column)."""
    if not column:
        return 1
    best, row = -1, 1
    for prefix, r in _PANEL_PREFIXES:
        if column.startswith(prefix) and len(prefix) > best:
            best, row = len(prefix), r
    return row


def _panel_axes(fig) -> list[tuple[str, str]]:
    """``(xref, yref)`` of each panel, top to bottom, read from the layout (so a figure restored from
    JSON or a cache, which has lost its subplot grid, works too); secondary y axes are left out."""
    found = []
    layout = fig["layout"] if isinstance(fig, Mapping) else fig.layout.to_plotly_json()
    for key, val in layout.items():
        if key.startswith("yaxis") and isinstance(val, dict) and "overlaying" not in val:
            top = (val.get("domain") or [0, 1])[1]
            found.append((top, val.get("anchor", "x"), "y" + key[len("yaxis"):]))
    found.sort(key=lambda t: -t[0])
    return [(x, y) for _, x, y in found] or [("x", "y")]


def _numbers(values) -> np.ndarray:
    """A trace's y as float64: a sequence (``None`` as NaN), or plotly's typed-array form
    ``{"dtype", "bdata"}`` that a figure restored from JSON or a cache holds."""
    if plotly_arrays.is_typed(values):
        return plotly_arrays.decode(values).astype(np.float64)
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        return np.asarray([np.nan if v is None else v for v in values], dtype=np.float64)


def _y_extents(fig) -> dict[str, tuple[float, float]]:
    """``{yref: (lowest, highest)}``: the finite y of the traces on each y axis, in one pass over the
    traces (an axis without any has none; the caller takes (0, 1)). Once per figure, not once per
    item: a plotly trace's attributes are slow to read, and ten runs have 280 traces."""
    out: dict[str, tuple[float, float]] = {}
    dicts = isinstance(fig, Mapping)
    for tr in (fig["data"] if dicts else fig.data):
        ys = tr.get("y") if dicts else tr.y
        if ys is None:
            continue
        y = _numbers(ys)
        y = y[np.isfinite(y)]
        if y.size:
            ref = (tr.get("yaxis") if dicts else getattr(tr, "yaxis", None)) or "y"
            lo, hi = out.get(ref, (np.inf, -np.inf))
            out[ref] = (min(lo, float(y.min())), max(hi, float(y.max())))
    return out


def _items(verdict: Verdict) -> list[dict]:
    """Every drawable item: failed/warning checks and all findings, with severity, steps, spans, column."""
    out = []
    for c in verdict.checks:
        if c.status in ("fail", "warn") and (c.steps or c.spans):
            out.append({"kind": "check", "id": c.id, "severity": c.status, "steps": list(c.steps),
                        "spans": list(c.spans), "column": c.column, "text": c.detail})
    for f in verdict.findings:
        out.append({"kind": "finding", "id": f.id, "severity": f.severity, "steps": list(f.steps),
                    "spans": list(f.spans), "column": f.column, "text": f.message})
    return out


def overlay(fig, verdicts: Verdict | Mapping[str, Verdict], *, x: str = "step"):
    """Draw each run's verdict on ``fig`` (from :func:`regime_dash.figures.signals.signal_panels`, or its
    figure dict, :func:`regime_dash.figures.signals.signal_spec`).

    Parameters
    ----------
    fig
        The signal panels: a plotly ``Figure`` (drawn on in place) or a figure dict (left as it is:
        a new dict is returned, its traces and shapes those of ``fig`` and the verdicts').
    verdicts
        One :class:`Verdict`, or ``{run label: Verdict}`` when several runs share the figure.
    x
        The figure's x axis; items are placed by step, so only ``"step"`` draws them.

    Returns
    -------
    plotly.graph_objects.Figure or dict
        ``fig`` (as it came), with one marker trace per item (named ``verdict:<id>``, its ``meta``
        ``{"verdict": id, "run": label}`` for a click to name) and a shaded band per span.
    """
    if x != "step":
        return fig
    traces, shapes = _verdict_marks(fig, {"": verdicts} if isinstance(verdicts, Verdict) else dict(verdicts))
    if isinstance(fig, Mapping):  # a dict skips plotly's objects: ten runs' 280 traces cost 0.1 s in them
        layout = dict(fig["layout"])
        layout["shapes"] = [*layout.get("shapes", ()), *shapes]
        return {**fig, "data": [*fig["data"], *traces], "layout": layout}
    for shape in shapes:
        fig.add_shape(**shape)
    fig.add_traces(traces)
    return fig


def _verdict_marks(fig, runs: Mapping[str, Verdict]) -> tuple[list[dict], list[dict]]:
    """The marker traces and span shapes of :func:`overlay`, as plotly dicts."""
    axes = _panel_axes(fig)
    # the markers sit at an axis's highest y: each later item's extent is the same
    extents = _y_extents(fig)
    traces, shapes = [], []
    for label, verdict in runs.items():
        prefix = f"{label}: " if label else ""
        for item in _items(verdict):
            xref, yref = axes[min(panel_of(item["column"]), len(axes)) - 1]
            hi = extents.get(yref, (0.0, 1.0))[1]
            colour = SEVERITY_COLOURS.get(item["severity"], SEVERITY_COLOURS["info"])
            for a, b in item["spans"]:
                shapes.append(dict(type="rect", xref=xref, yref=f"{yref} domain", x0=a - 0.5, x1=b + 0.5, y0=0,
                                   y1=1, fillcolor=colour, opacity=0.14, line=dict(width=0), layer="below"))
            steps = sorted(set(item["steps"]) | {a for a, _ in item["spans"]})
            if not steps:
                continue
            word = item["severity"].upper()
            traces.append(dict(
                type="scatter", x=steps, y=[hi] * len(steps), xaxis=xref, yaxis=yref, mode="markers",
                name=f"verdict:{item['id']}",
                marker=dict(symbol="triangle-down" if item["kind"] == "check" else "star", size=12, color=colour,
                            line=dict(width=1, color="black")),
                showlegend=False, legendgroup="verdict", meta={"verdict": item["id"], "run": label},
                hovertemplate=f"{prefix}{word} {item['id']} @ step %{{x}}<br>{_wrap(item['text'])}<extra></extra>"))
        shapes.extend(resume_lines(axes, verdict))
    return traces, shapes


def resume_lines(axes: list[tuple[str, str]], verdict: Verdict) -> list[dict]:
    """A dashed line down each panel at every resume of the verdict's run (:mod:`regime_dash.analysis.structure`),
    blue where the run went on as before, red where its state did not continue or it re-logged other rows."""
    out = []
    for r in (verdict.structure.resumes if verdict.structure is not None else ()):
        clean = r["identical"] or (r["continued"] is True and r["first_difference"] is None)
        colour = SEVERITY_COLOURS["info" if clean else "fail"]
        x = r["step"] - 0.5  # between the checkpoint step and the first resumed one
        out += [dict(type="line", xref=xref, yref=f"{yref} domain", x0=x, x1=x, y0=0, y1=1,
                     line=dict(color=colour, width=1.5, dash="dash")) for xref, yref in axes]
    return out


def provenance_figure(replay, step: int, split_step: int | None, column: str, *, height: int = 340) -> dict:
    """The local replay of a re-derivation drawn over the logged trajectory, as a plotly figure dict.

    Parameters
    ----------
    replay
        :attr:`regime_dash.analysis.failures.Explanation.replay`: ``step``, ``logged``, ``replayed``.
    step
        The step explained (a ring on the logged line).
    split_step
        Where the replay parts from the log (a dotted vertical line), or ``None``.
    column
        The diag column both lines are (the y axis title).

    Returns
    -------
    dict
        ``{"data", "layout"}``: traces ``logged`` and ``replayed`` (named so) and the step's ring;
        the split line is a shape with its annotation. A dict, not a ``Figure``: a click waits on
        this, and building a validated ``Figure`` costs more than the replay behind it.
    """
    x = replay["step"].to_numpy()
    logged = replay["logged"].to_numpy(dtype=np.float64)
    data = [{"type": "scatter", "x": x, "y": logged, "name": "logged", "mode": "lines",
             "line": {"color": "#1F77B4", "width": 3}},
            {"type": "scatter", "x": x, "y": replay["replayed"].to_numpy(dtype=np.float64), "name": "replayed",
             "mode": "lines", "line": {"color": SEVERITY_COLOURS["fail"], "width": 1.5, "dash": "dash"}}]
    at = np.flatnonzero(x == step)
    if len(at):
        data.append({"type": "scatter", "x": [int(step)], "y": [float(logged[at[0]])], "name": f"step {step}",
                     "mode": "markers", "marker": {"symbol": "circle-open", "size": 14, "color": "black",
                                                   "line": {"width": 2}}})
    layout = {"height": height, "margin": {"l": 70, "r": 20, "t": 36, "b": 48}, "hovermode": "x unified",
              "legend": {"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
              "xaxis": {"title": {"text": "step"}, "tickformat": "d", "hoverformat": "d"},
              "yaxis": {"title": {"text": column.rsplit(".", 1)[-1]}, "hoverformat": ".9g"}}
    if split_step is not None:
        layout["shapes"] = [{"type": "line", "xref": "x", "yref": "paper", "x0": split_step, "x1": split_step,
                             "y0": 0, "y1": 1, "line": {"color": SEVERITY_COLOURS["fail"], "dash": "dot", "width": 1}}]
        layout["annotations"] = [{"xref": "x", "yref": "paper", "x": split_step, "y": 1, "xanchor": "right",
                                  "yanchor": "bottom", "showarrow": False, "text": f"split at {split_step}"}]
    return {"data": data, "layout": layout}


def _wrap(text: str, width: int = 90) -> str:
    words, lines, cur = text.replace("<", "‹").split(), [], ""
    for w in words:
        if len(cur) + len(w) + 1 > width and cur:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    lines.append(cur)
    return "<br>".join(lines[:6])


# ---- NaN / ±Inf on the signal lines -------------------------------------------------------
#: Most NaN/±Inf markers drawn per line (an even sample beyond that).
MAX_NONFINITE_MARKERS = 2000


def all_finite(y: np.ndarray) -> bool:
    """Whether every value is finite, read with a min and a max (no [T] mask; a NaN or ±Inf carries into them)."""
    y = np.asarray(y)
    if y.dtype.kind in "biu":
        return True
    if y.dtype.kind not in "fc":
        y = np.asarray(y, dtype=np.float64)
    return y.size == 0 or bool(np.isfinite(y.min()) and np.isfinite(y.max()))


def _nonfinite(y: np.ndarray) -> np.ndarray:
    """Non-finite values of a line, leaving out a leading run of NaN: a field that first appears
    mid-run was not recorded before, which is no value to mark."""
    y = np.asarray(y, dtype=np.float64)
    bad = ~np.isfinite(y)
    lead = int(np.argmax(~np.isnan(y))) if (~np.isnan(y)).any() else len(y)
    bad[:lead] = False
    return bad


def nonfinite_points(xs: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Where a line's NaN/±Inf values are: their x, a y to draw a marker at (the last finite value
    before it, else the first after, else 0) and the word their hover shows (``NaN``, ``+Inf``, ``-Inf``)."""
    if all_finite(np.asarray(y)):  # read in its own dtype: no [T] float64 copy of a finite line
        return np.empty(0), np.empty(0), []
    y = np.asarray(y, dtype=np.float64)
    bad = _nonfinite(y)
    if not bad.any():
        return np.empty(0), np.empty(0), []
    pos = np.flatnonzero(bad)
    if len(pos) > MAX_NONFINITE_MARKERS:
        pos = pos[np.linspace(0, len(pos) - 1, MAX_NONFINITE_MARKERS).astype(np.int64)]
    fin = np.isfinite(y)
    idx = np.arange(len(y))
    last = np.maximum.accumulate(np.where(fin, idx, -1))
    nxt = np.minimum.accumulate(np.where(fin, idx, len(y))[::-1])[::-1]
    at = np.where(last[pos] >= 0, last[pos], np.where(nxt[pos] < len(y), nxt[pos], -1))
    ym = np.where(at >= 0, y[np.clip(at, 0, len(y) - 1)], 0.0)
    words = ["NaN" if np.isnan(v) else "+Inf" if v > 0 else "-Inf" for v in y[pos]]
    return np.asarray(xs)[pos], ym, words


def break_at_nonfinite(rx: np.ndarray, ry: np.ndarray, xs: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The reduced line ``(rx, ry)`` with a gap (y = NaN) at the start of every stretch where ``y`` is
    not finite, so that plotly breaks the line there instead of drawing it through."""
    if all_finite(np.asarray(y)):
        return rx, ry
    bad = _nonfinite(y)
    if not bad.any():
        return rx, ry
    starts = bad & ~np.r_[False, bad[:-1]]
    gx = np.asarray(xs)[starts]
    x_all = np.concatenate([np.asarray(rx), gx])
    y_all = np.concatenate([np.asarray(ry, dtype=np.float64), np.full(len(gx), np.nan)])
    order = np.argsort(x_all, kind="stable")
    return x_all[order], y_all[order]
