"""Findings: run-level statements where the spec's text and its code part ways, shown where it happens.

A check asks "does this row obey the spec's code?"; a finding asks "does what the
code did here keep the promise the spec's prose makes?". The kernels can be
exactly right and a promise still not hold: with Kelly resurrection (F2) on, the
dead zone cycles (flag 1, 0, 1, ...), DURATION restarts at every cycle, and the
TIMEOUT_FLAG safety net that Theorem 3's loss bound relies on can never fire.

Each finder takes a :class:`~regime_dash.analysis.view.FrameView` and the shared
:class:`~regime_dash.analysis.invariants.CheckOptions` and returns zero or more
:class:`Finding`; :func:`find` runs them all. docs/SPEC_NOTES.md lists every
reading of the spec these statements rest on.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from regime_dash.analysis import view as v
from regime_dash.analysis.episodes import RESURRECTION_GAP, dead_zone_episodes
from regime_dash.analysis.invariants import CheckOptions
from regime_dash.analysis.view import FrameView

#: Finding severities, worst first. A ``fail`` finding makes ``check`` exit 1.
SEVERITIES = ("fail", "warn", "info")


@dataclass(frozen=True)
class Finding:
    """One run-level statement with its place and its numbers.

    Attributes
    ----------
    id
        Stable id, e.g. ``timeout_unreachable``.
    severity
        ``fail`` (a promise of the spec does not hold here), ``warn`` or ``info``.
    message
        One sentence a user understands.
    steps
        Steps it concerns (markers on a chart).
    spans
        ``(start, end)`` step stretches, inclusive (shaded on a chart).
    evidence
        The numbers behind it (JSON-ready).
    column
        The diag column (signal) it concerns, for drawing.
    fields
        RegimeConfig fields this finding makes ineffective (``timeout_unreachable``
        → ``("max_duration",)``): a sweep over them moves nothing here.
    """

    id: str
    severity: str
    message: str
    steps: list[int]
    spans: list[tuple[int, int]]
    evidence: dict
    column: str | None
    fields: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"id": self.id, "severity": self.severity, "message": self.message,
                "steps": [int(s) for s in self.steps], "spans": [[int(a), int(b)] for a, b in self.spans],
                "evidence": {k: _plain(x) for k, x in self.evidence.items()}, "column": self.column,
                "fields": list(self.fields)}


def _plain(x):
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        f = float(x)
        return f if math.isfinite(f) else None
    if isinstance(x, (list, tuple)):
        return [_plain(y) for y in x]
    return x


# ---- timeout_unreachable ----------------------------------------------------------------
def _timeout_unreachable(vw: FrameView, opt: CheckOptions) -> list[Finding]:
    """A dead zone that cycles longer than the trap limit while DURATION never nears max_duration."""
    if not vw.has(v.FLAG, v.DURATION, v.MAX_DURATION) or vw.n == 0:
        return []
    eps = dead_zone_episodes(vw, RESURRECTION_GAP)
    mx = vw.f32(v.MAX_DURATION)
    out = []
    for e in eps.itertuples(index=False):
        a, b = int(np.searchsorted(vw.step, e.start)), int(np.searchsorted(vw.step, e.end))
        limit = float(np.nanmax(mx[a:b + 1])) if np.isfinite(mx[a:b + 1]).any() else math.nan
        seen = float(e.max_duration)
        if e.cycles < 2 or e.timed_out or e.steps <= opt.trap_steps or not seen < limit:
            continue
        # the episode outlived max_duration: a dead zone that did not cycle would have timed out
        outlived = e.steps > limit
        msg = (f"The dead zone cycled {e.cycles} times over steps {e.start}–{e.end} ({e.steps} steps) and "
               f"DURATION never exceeded {seen:g}, so TIMEOUT_FLAG (max_duration {limit:g}) could not fire: "
               f"the dead-zone loss is not bounded as Theorem 3 claims.")
        out.append(Finding(
            "timeout_unreachable", "fail" if outlived else "warn", msg, [int(e.start)],
            [(int(e.start), int(e.end))],
            {"cycles": int(e.cycles), "max_DURATION": seen, "max_duration": limit, "span": [int(e.start), int(e.end)],
             "steps": int(e.steps), "outlived_max_duration": bool(outlived)},
            v.DURATION, ("max_duration",)))
    return out


#: Every finder, in report order.
FINDERS: tuple[tuple[str, Callable[[FrameView, CheckOptions], list[Finding]]], ...] = (
    ("timeout_unreachable", _timeout_unreachable),
)
#: Finding ids in report order.
FINDING_IDS: tuple[str, ...] = tuple(i for i, _ in FINDERS)


def find(frame: pd.DataFrame | FrameView, options: CheckOptions | None = None) -> list[Finding]:
    """Every finding on one diag frame (canonical column names), in :data:`FINDING_IDS` order.

    Parameters
    ----------
    frame
        A diag frame or a prepared :class:`FrameView`.
    options
        The checks' shared options (``trap_steps`` is the limit a cycling dead zone is measured against).
    """
    from regime_dash.analysis.view import view as make_view

    vw = frame if isinstance(frame, FrameView) else make_view(frame)
    opt = options or CheckOptions()
    out: list[Finding] = []
    for _id, fn in FINDERS:
        out.extend(fn(vw, opt))
    return out
