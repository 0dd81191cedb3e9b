"""Segments: the places, in the file's order, where a run's step goes back or repeats, and what each one is.

Walking the rows as the file has them, a *break* is a row whose step is not above the
step of the line before it. Each break is one of:

``resume``       the job came back from a checkpoint and logged the steps from there again.
                 Clean when the re-logged rows are the first copy bit for bit (the first copy is
                 kept, the run is drawn and judged once); otherwise the run continues from the new
                 copy (the rows of the first copy from the resumed step on are set aside), and it
                 fails at the resumed row: its state did not continue the logged state of the
                 checkpoint step, or it did but the re-logged rows differ from the first copy.
``interleave``   two or more writers in one file: the rows past the break's overlap continue the
                 *first* copy, not the re-logged one (the first writer is still writing).
``slip``         the step counter went back or repeated while the state went on: the row continues
                 the line before it as its next step. Rows are kept as logged.

"Continues" is :mod:`.continuity`'s test: the re-derivation of the row from the row it
should follow. A resume's *checkpoint step* is the step before its first resumed row.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from regime_dash.analysis.structure import continuity as ct
from regime_dash.analysis.structure.lines import file_lines
from regime_dash.analysis.view import FrameView

#: Breaks examined per run; a file with more is reported as far as that.
MAX_BREAKS = 100
#: Differing columns named per re-logged row.
MAX_COLUMNS = 5


@dataclass
class Segments:
    """What the breaks of one writer's rows are (see the module doc).

    ``kept`` (over the view's rows) is the run as judged; ``breaks`` and ``starts`` the resumed rows
    whose state did not continue, and those of them that came back at the bootstrap.
    """

    kept: np.ndarray
    breaks: np.ndarray
    starts: np.ndarray
    resumes: list[dict] = field(default_factory=list)
    slips: list[dict] = field(default_factory=list)
    interleave: dict | None = None
    total_breaks: int = 0

    @property
    def count(self) -> int:
        """Segments of the run: one, and one more per resume."""
        return 1 + len(self.resumes)


def _equal_values(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype.kind in "fc" and y.dtype.kind in "fc":
        return (x == y) | (np.isnan(x) & np.isnan(y))
    if x.dtype.kind in "iub" and y.dtype.kind in "iub":
        return x == y
    nx, ny = pd.isna(x), pd.isna(y)
    return np.array([bool(a == b) if not (p or q) else bool(p and q) for a, b, p, q in zip(x, y, nx, ny)],
                    dtype=bool)


def differing(vw: FrameView, old: np.ndarray, new: np.ndarray, columns: list[str]) -> np.ndarray:
    """bool [k, len(columns)]: where view rows ``new[j]`` and ``old[j]`` log different values."""
    out = np.zeros((len(old), len(columns)), dtype=bool)
    for c, col in enumerate(columns):
        a = vw.frame[col].to_numpy()
        out[:, c] = ~_equal_values(a[old], a[new])
    return out


class _Prior:
    """The rows kept before a break (view rows, file order) with step ≥ ``lo``: the last of them with a step."""

    def __init__(self, vw: FrameView, rows: np.ndarray, lo: int):
        rows = rows[vw.step[rows] >= lo]
        order = np.lexsort((np.arange(len(rows)), vw.step[rows]))
        self.rows, self.steps = rows[order], vw.step[rows[order]]

    def at(self, steps) -> np.ndarray:
        """The last kept row of each step (−1 where none)."""
        steps = np.asarray(steps, dtype=np.int64)
        out = np.full(len(steps), -1, dtype=np.int64)
        if len(self.steps):
            i = np.searchsorted(self.steps, steps, side="right") - 1
            ok = (i >= 0) & (self.steps[np.maximum(i, 0)] == steps)
            out[ok] = self.rows[i[ok]]
        return out


def _overlap(vw: FrameView, seg: np.ndarray, last: int, prior: _Prior, columns: list[str]):
    """The new segment's re-logged rows, their first copies, and whether they are the same."""
    over = seg[vw.step[seg] <= last]
    old = prior.at(vw.step[over])
    have = old >= 0
    diff = differing(vw, old[have], over[have], columns)
    bad = diff.any(axis=1)
    first = None
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        first = {"step": int(vw.step[over[have][j]]),
                 "columns": [columns[c] for c in np.flatnonzero(diff[j])[:MAX_COLUMNS]]}
    identical = bool(have.all() and not bad.any() and len(over))
    return over, identical, first


def _interleaved(vw: FrameView, seg: np.ndarray, over: np.ndarray, p: int, last: int, ulps: float) -> bool:
    """The row past the overlap continues the first copy (row ``p``) and not the re-logged one."""
    beyond = seg[vw.step[seg] > last]
    if not len(beyond) or vw.step[beyond[0]] != last + 1:
        return False
    j = int(beyond[0])
    mine = over[vw.step[over] == last]
    before = [p] + ([int(mine[-1])] if len(mine) else [])
    tests = ct.continues(vw, np.array(before), np.full(len(before), j), ulps)
    return bool(tests[0].ok) and not (len(tests) > 1 and tests[1].ok)


def _resume_record(vw: FrameView, lines: np.ndarray, row: int, ckpt: int, reached: int, over: np.ndarray,
                   identical: bool, first: dict | None, cont: ct.Outcome | None, slots: list[dict]) -> dict:
    return {"step": int(vw.step[row]), "line": int(lines[row]), "row": int(row),
            "checkpoint_step": None if ckpt < 0 else int(vw.step[ckpt]),
            "checkpoint_line": None if ckpt < 0 else int(lines[ckpt]),
            "checkpoint_row": None if ckpt < 0 else int(ckpt),
            "reached": int(reached), "relogged": int(len(over)), "identical": identical,
            "first_difference": first, "continued": None if cont is None else cont.ok,
            "compared": [] if cont is None else list(cont.compared), "slots": slots,
            "bootstrap": bool(slots) and all(s["matches_bootstrap"] for s in slots)}


def _continuity(vw: FrameView, row: int, ckpt: int, first_step: int, ulps: float) -> ct.Outcome | None:
    """The resumed row against the logged state of its checkpoint step (a fresh start: the bootstrap)."""
    if ckpt >= 0:
        return ct.continues(vw, np.array([ckpt]), np.array([row]), ulps)[0]
    if vw.step[row] <= first_step:
        return ct.from_bootstrap(vw, np.array([row]), ulps)[0]
    return None  # the checkpoint step is not in the file


def classify(vw: FrameView, order: np.ndarray | None, columns: list[str], ulps: float = 0.0) -> Segments:
    """The breaks of ``vw``'s rows (``order``: its rows in file order, None for the view's own)."""
    n = vw.n
    fo = np.arange(n) if order is None else np.asarray(order, dtype=np.int64)
    steps = vw.step[fo]
    brk = np.flatnonzero(steps[1:] <= steps[:-1]) + 1
    out = Segments(np.ones(n, dtype=bool), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool),
                   total_breaks=len(brk))
    if not len(brk):
        return out
    lines, first_step = file_lines(vw), int(vw.step.min())
    for i, e in zip(brk[:MAX_BREAKS], np.append(brk[1:], n)[:MAX_BREAKS]):
        seg, p, s = fo[i:e], int(fo[i - 1]), int(steps[i])
        before = fo[:i]
        prior = _Prior(vw, before[out.kept[before]], s - 1)
        last = int(vw.step[p])
        over, identical, first = _overlap(vw, seg, last, prior, columns)
        if identical:  # the first copy is kept: the same values
            out.kept[over] = False
            ckpt = int(prior.at([s - 1])[0])
            out.resumes.append(_resume_record(vw, lines, int(seg[0]), ckpt, last, over, True, None, None, []))
            continue
        if _interleaved(vw, seg, over, p, last, ulps):
            out.interleave = {"step": s, "line": int(lines[seg[0]]), "row": int(seg[0]), "after_step": last,
                              "breaks": len(brk)}
            break
        ckpt = int(prior.at([s - 1])[0])
        cont = _continuity(vw, int(seg[0]), ckpt, first_step, ulps)
        if not (cont is not None and cont.ok) and ct.continues(vw, np.array([p]), seg[:1], ulps)[0].ok:
            out.slips.append({"kind": "repeat" if s == last else "back", "step": s, "previous_step": last,
                              "line": int(lines[seg[0]]), "row": int(seg[0])})
            continue
        out.kept[prior.rows[prior.steps >= s]] = False  # the run went on from the new copy
        slots = []
        if cont is not None and cont.ok is False:
            out.breaks[seg[0]] = True
            slots = ct.did_not_continue(vw, ckpt, int(seg[0]), cont, ulps) if ckpt >= 0 else cont.diverged
            out.starts[seg[0]] = ckpt >= 0 and all(x["matches_bootstrap"] for x in slots)
        out.resumes.append(_resume_record(vw, lines, int(seg[0]), ckpt, last, over, False, first, cont, slots))
    return out


__all__ = ["MAX_BREAKS", "Segments", "classify", "differing"]
