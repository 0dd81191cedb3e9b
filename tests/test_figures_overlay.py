"""Verdicts and non-finite values on the signal panels (regime_dash.figures.overlay)."""
from __future__ import annotations

import numpy as np
import pytest

from regime_dash.analysis import verdict
from regime_dash.analysis import view as v
from regime_dash.figures.signals import signal_panels
from regime_dash.figures.overlay import SEVERITY_COLOURS, break_at_nonfinite, nonfinite_points, overlay, panel_of
from test_invariants import STEP0, rich_frame

pytest.importorskip("plotly")


def trace(fig, name):
    (t,) = [t for t in fig.data if t.name == name]
    return t


def test_nan_and_inf_break_the_line_and_hover_says_what_they_were():
    f = rich_frame()
    f.loc[300, v.SIGMA] = np.nan
    f.loc[900, v.SIGMA] = np.inf
    fig = signal_panels({"r": f})
    line = trace(fig, "r σ")
    xs, ys = np.asarray(line.x, dtype=float), np.asarray(line.y, dtype=float)
    for k in (300, 900):
        at = np.flatnonzero(xs == STEP0 + k)
        assert len(at) == 1 and np.isnan(ys[at[0]])  # a gap there: the line is not drawn through it
    marks = trace(fig, "r σ non-finite")
    assert list(marks.x) == [STEP0 + 300, STEP0 + 900] and list(marks.text) == ["NaN", "+Inf"]
    assert "%{text}" in marks.hovertemplate and all(np.isfinite(marks.y))


def test_a_field_not_yet_recorded_is_no_nan_to_mark():
    y = np.r_[np.full(5, np.nan), 1.0, np.nan, 2.0]
    x, _, words = nonfinite_points(np.arange(8), y)
    assert x.tolist() == [6] and words == ["NaN"]
    rx, ry = break_at_nonfinite(np.array([5, 7]), np.array([1.0, 2.0]), np.arange(8), y)
    assert rx.tolist() == [5, 6, 7] and np.isnan(ry[1])


def test_overlay_marks_failed_checks_and_shades_traps_on_their_panel():
    f = rich_frame()
    a = 1900
    f.loc[a:a + 300, v.KELLY] = np.float32(0)
    f.loc[a:a + 300, v.FLAT] = f.loc[a:a + 300, v.B_SIZE]
    f.loc[500, v.DURATION] = 7.0
    vd = verdict(f)
    assert {c.id for c in vd.failed} >= {"kelly_trap", "dead_zone_duration"}
    fig = overlay(signal_panels({"r": f}), vd)
    trap = trace(fig, "verdict:kelly_trap")
    assert list(trap.x) == [STEP0 + a] and trap.marker.color == SEVERITY_COLOURS["fail"]
    assert trap.yaxis == trace(fig, "r kelly_f").yaxis  # the kelly panel
    assert "kelly_trap" in trap.hovertemplate and "FAIL" in trap.hovertemplate
    shaded = [s for s in fig.layout.shapes if s.fillcolor == SEVERITY_COLOURS["fail"]]
    assert any(s.x0 == STEP0 + a - 0.5 and s.x1 == STEP0 + a + 300 + 0.5 for s in shaded)
    dz = trace(fig, "verdict:dead_zone_duration")
    assert STEP0 + 500 in list(dz.x) and dz.yaxis == trace(fig, "r").yaxis  # the duration line, first of the run


def test_findings_are_drawn_in_their_severity_colour_and_wall_time_axes_are_left_alone():
    from test_findings import dead_zone_frame

    f = dead_zone_frame(cycling=True)
    vd = verdict(f)
    fig = overlay(signal_panels({"r": f}), {"r": vd})
    star = trace(fig, "verdict:timeout_unreachable")
    assert star.marker.symbol == "star" and star.marker.color == SEVERITY_COLOURS["fail"]
    assert "r: FAIL timeout_unreachable" in star.hovertemplate
    before = len(signal_panels({"r": f}).data)
    assert len(overlay(signal_panels({"r": f}), vd, x="wall_time").data) == before


def test_panel_of_places_signals_on_their_panel():
    assert panel_of(v.DURATION) == 1 and panel_of(v.LIVE) == 2 and panel_of(v.RECENCY) == 3
    assert panel_of(v.SIGMA) == 4 and panel_of(v.ENVELOPE) == 4 and panel_of(v.REMAINING) == 5
    assert panel_of(v.TAU_MIN_EFF) == 6 and panel_of(v.KELLY) == 7 and panel_of(None) == 1
