"""Step continuity: steps not logged, a counter that repeated a step and later skipped one, and fields
missing on some lines, each named at its first row with a count and a pattern.

:class:`Gaps` is fed rows in step order, a whole run at once or batch by batch (a growing run:
only rows past ``lo`` are new, the row before them is their context), with the same result
either way.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from regime_dash.analysis.findings import Finding
from regime_dash.analysis.invariants import MAX_STEPS
from regime_dash.analysis.structure.lines import LINE_COLUMN, file_lines, pattern
from regime_dash.analysis.view import NULL_ROWS_ATTR, FrameView


@dataclass
class Gaps:
    """The rows after which steps were not logged (``gap > 1``), those a slip explains left out."""

    count: int = 0
    missing: int = 0
    first: list[tuple[int, int]] = field(default_factory=list)  # (last logged, next logged) of the first gaps
    sizes: set = field(default_factory=set)  # distinct gap sizes, up to two
    rows: int = 0  # rows after the first
    gapped: int = 0  # of them, rows after a gap

    def add(self, vw: FrameView, lo: int = 1, skip: np.ndarray | None = None) -> None:
        """Rows ``lo`` on of ``vw`` (row ``lo − 1`` their context); ``skip``: rows a slip explains."""
        lo = max(lo, 1)
        if vw.n <= lo or not vw.step_given:
            return
        gap = vw.gap[lo:]
        self.rows += len(gap)
        hit = gap > 1
        if skip is not None:
            hit &= ~skip[lo:]
        where = np.flatnonzero(hit) + lo
        self.gapped += len(where)
        if not len(where):
            return
        self.count += len(where)
        self.missing += int((vw.gap[where] - 1).sum())
        if len(self.sizes) < 2:
            self.sizes.update(int(g) for g in np.unique(vw.gap[where])[:2])
        room = MAX_STEPS - len(self.first)
        self.first.extend((int(vw.step[i - 1]), int(vw.step[i])) for i in where[:max(room, 0)])

    def findings(self) -> list[Finding]:
        if not self.count:
            return []
        steps = [b for _, b in self.first]
        spans = [(a + 1, b - 1) for a, b in self.first]
        regular = len(self.sizes) == 1 and self.gapped == self.rows
        if regular:
            k = next(iter(self.sizes))
            msg = (f"The diag is logged every {k} steps ({self.count:,} gaps of {k - 1} step(s)): a sampled run, "
                   f"its step-to-step rules widened to what {k} steps can do.")
            return [Finding("structure.step_skip", "info", msg, steps, spans,
                            {"gaps": self.count, "missing_steps": self.missing, "every": k}, None)]
        a, b = self.first[0]
        msg = (f"{self.count:,} gap(s) in the steps, {self.missing:,} step(s) not logged; the first after step {a:,} "
               f"(the next row is step {b:,}): {pattern(np.array(steps), 'step')}.")
        return [Finding("structure.step_skip", "warn", msg, steps, spans,
                        {"gaps": self.count, "missing_steps": self.missing, "first": [a, b],
                         "gap_sizes": sorted(self.sizes)}, None)]


def slip_skips(vw: FrameView, slips: list[dict], continues) -> list[dict]:
    """Each repeated step's later skip of one step whose row continues the row before it (a counter that
    slipped one step and caught up): the slip and the skip are one fault, the rows between labelled low."""
    out = []
    for slip in slips:
        if slip["kind"] != "repeat":
            continue
        after = np.flatnonzero((vw.step > slip["step"]) & (vw.gap == 2) & ~vw.restart)
        if len(after) and continues(int(after[0]) - 1, int(after[0])):
            i = int(after[0])
            out.append({**slip, "skipped": int(vw.step[i]) - 1, "skip_row": i,
                        "rows_between": int(i - (np.searchsorted(vw.step, slip["step"], side="right") - 1))})
    return out


_SKIPPED_COLUMNS = ("step", LINE_COLUMN)


def missing_fields(vw: FrameView, order: np.ndarray | None) -> list[Finding] | None:
    """A field missing on some lines after the first line that logs it (a field that first appears mid-run is
    not missing before), one finding a field; ``None`` where the frame does not say which values the file
    left out."""
    known = vw.frame.attrs.get(NULL_ROWS_ATTR)
    if known is None:
        return None
    renamed = dict(vw.frame.attrs.get("aliases_applied", {}))
    fo = np.arange(vw.n) if order is None else order
    lines = file_lines(vw)[fo]
    out = []
    for raw in known:
        col = renamed.get(raw, raw)
        if col in _SKIPPED_COLUMNS or col not in vw.frame.columns:
            continue
        gone = vw.null(col)[fo]
        have = np.flatnonzero(~gone)
        if not len(have):
            continue
        inside = np.flatnonzero(gone[have[0]:]) + have[0]
        if not len(inside):
            continue
        at = lines[inside]
        step = int(vw.step[fo[inside[0]]])
        msg = (f"{col} is missing on {len(inside):,} line(s) after the first that logs it, first at "
               f"line {at[0]:,} (step {step:,}): {pattern(at)}.")
        # warn: the emitter dropped the field there; what the kernels held on those lines is not in the file
        out.append(Finding("structure.field_missing", "warn", msg, [int(s) for s in vw.step[fo[inside[:MAX_STEPS]]]],
                           [], {"field": col, "lines": len(inside), "first_line": int(at[0]),
                                "pattern": pattern(at)}, col))
    return out[:MAX_STEPS]


__all__ = ["Gaps", "missing_fields", "slip_skips"]
