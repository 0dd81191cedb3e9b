"""A cluster run as it really is: its segments (resumes), its writers, its config over time and its steps.

A diag from a cluster job is rarely one clean sequence of steps: the job is preempted and
resumed from a checkpoint and logs some steps again, several ranks (or a restarted
launcher) write to one file, an operator changes a config slot at run time, the emitter
drops a field on some lines or its step counter slips. :func:`analyse` reads a frame's
rows in the order the file has them and returns a :class:`Structure`:

* the **writer** judged (:mod:`.writers`): where a row carries a writer field each value is
  a run of its own, the first in the file judged unless another is asked for; without a
  field, writers are told apart from the content on request (``split_writers``);
* its **segments** (:mod:`.segments`): each place the step goes back or repeats is a resume
  (clean, or failed at its first resumed row, naming the slots that did not continue), two
  writers interleaved, or a slipped step label;
* the **view** the checks judge: the run drawn once, a clean resume's re-logged rows left
  out, a failed resume's superseded rows set aside, the resumed row that did not continue
  marked so step-to-step rules do not run across it (``FrameView.breaks``, ``starts``);
* **config continuity** (:mod:`.config_changes`) and **step continuity** (:mod:`.steps`);
* ``coverage``: which of these ran, and why any did not.

Every statement is a :class:`~regime_dash.analysis.findings.Finding` with an id under
``structure.``, placed at its row (docs/STRUCTURE.md lists them).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from regime_dash.analysis.findings import Finding
from regime_dash.analysis.invariants import MAX_STEPS
from regime_dash.analysis.structure import continuity as ct
from regime_dash.analysis.structure import report
from regime_dash.analysis.structure.config_changes import Changes, config_columns, followed
from regime_dash.analysis.structure.lines import LINE_COLUMN, LINES_ATTR, file_lines, file_order
from regime_dash.analysis.structure.segments import MAX_BREAKS, Segments, classify
from regime_dash.analysis.structure.steps import Gaps, missing_fields, slip_skips
from regime_dash.analysis.structure.writers import (WRITER_FIELDS, content_writers, in_file_order, pick,
                                                    writer_field)
from regime_dash.analysis.view import FrameView, as_view
from regime_dash.errors import ValidationError

#: The structure findings: id, severities and when, in report order (docs/CHECKS.md lists them).
STRUCTURE: tuple[tuple[str, str, str], ...] = (
    ("structure.writers", "info / fail",
     "several writers in one file: told apart by a rank or writer field (each a run of its own, one judged: info), "
     "or interleaved with nothing to tell them apart, named at the first step logged twice (fail)"),
    ("structure.resume", "info / fail",
     "the job resumed from a checkpoint and logged steps again: where, from which checkpoint step and how many rows "
     "were re-logged; fail at the resumed row when its state did not continue the checkpoint's (the slots, before "
     "and after, and the bootstrap value they match) or the re-logged rows differ from the first copy"),
    ("structure.step_repeat", "warn",
     "the step counter repeated a step while the state went on (and the skip that caught it up, where one did)"),
    ("structure.step_back", "warn", "the step counter went back while the state went on (no resume)"),
    ("structure.step_skip", "info / warn",
     "steps not logged: a count, the first gap and the pattern (info where the diag is logged every k steps)"),
    ("structure.field_missing", "warn",
     "a field missing on some lines after the first that logs it: a count, the first line and the pattern"),
    ("structure.config_change", "info / fail",
     "a logged config column changed: the row, old and new values, at a fold boundary, with a reset or at a "
     "resume; fail where the kernels did not follow the logged value (the re-derivation that reads it "
     "diverges from there)"),
)
STRUCTURE_IDS = tuple(i for i, _, _ in STRUCTURE)
#: Columns that say when or where a line was written, not what the run did: left out when re-logged rows
#: are compared with their first copy.
WHEN_COLUMNS = ("step", LINE_COLUMN, "wall_time", "run")


@dataclass(frozen=True)
class Outline:
    """What a verdict keeps of a run's structure: counts, records and coverage, no frame (a verdict is
    cached, pickled and sent to workers).

    ``set_aside`` holds the file lines of the judged writer's rows the checks did not judge: a clean
    resume's re-logged copies, a failed resume's superseded rows; a chart draws the run without them
    (and, where a field names the writers, the judged writer's rows only) to draw it once."""

    segments: int
    resumes: tuple[dict, ...] = ()
    writers: dict[str, int] = field(default_factory=dict)
    writer: str | None = None
    writer_field: str | None = None
    coverage: dict[str, dict] = field(default_factory=dict)
    set_aside: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64), compare=False)

    def summary(self) -> dict:
        """Counts for a run's row in a table: segments, resumes and writers."""
        return {"segments": self.segments, "resumes": len(self.resumes), "writers": max(1, len(self.writers))}

    def to_dict(self) -> dict:
        return {**self.summary(), "writer": self.writer, "writer_field": self.writer_field,
                "writer_rows": dict(self.writers), "resume_list": list(self.resumes), "coverage": self.coverage,
                "set_aside_lines": int(len(self.set_aside))}


@dataclass
class Structure:
    """What :func:`analyse` found (see the module doc)."""

    view: FrameView
    #: The findings of the rows analysed at once: writers, segments, slips, missing fields.
    static: list[Finding]
    segments: Segments
    #: Steps not logged, and the config changes: fed again by a growing run's new rows.
    gaps: Gaps
    changes: Changes
    writers: dict[str, int] = field(default_factory=dict)
    writer: str | None = None
    writer_field: str | None = None
    coverage: dict[str, dict] = field(default_factory=dict)
    set_aside: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))

    @property
    def findings(self) -> list[Finding]:
        """Every structure finding, in report order."""
        return [*self.static, *self.gaps.findings(), *self.changes.findings()]

    @property
    def resumes(self) -> list[dict]:
        return self.segments.resumes

    def outline(self) -> Outline:
        """What a verdict keeps of it."""
        strip = ("row", "checkpoint_row")
        resumes = tuple({k: v for k, v in r.items() if k not in strip} for r in self.resumes)
        return Outline(self.segments.count, resumes, dict(self.writers), self.writer, self.writer_field,
                       self.coverage, self.set_aside)

    def summary(self) -> dict:
        return self.outline().summary()


def compared_columns(vw: FrameView, writer: str | None) -> list[str]:
    """The columns a re-logged row is compared on with its first copy."""
    return [c for c in vw.frame.columns if c not in WHEN_COLUMNS and c != writer]


def _writer_rows(vw: FrameView, order, writer, split_writers, ulps):
    """``(view of the judged writer's rows, its file order, field, {writer: rows}, judged writer)``."""
    name, labels = writer_field(vw)
    if labels is None and split_writers:
        labels = content_writers(vw, order, ulps)
    if labels is None:
        if writer is not None:
            raise ValidationError(f"writer {writer!r} asked for, but no row names its writer (a field "
                                  f"{', '.join(WRITER_FIELDS)}) and writers were not split by their content",
                                  field="writer", value=writer)
        return vw, order, None, {}, None
    names = in_file_order(labels, order)
    counts = {w: int((labels == w).sum()) for w in names}
    chosen = pick(names, writer, name or "content")
    if len(names) > 1:
        vw = vw.subset(np.flatnonzero(labels == chosen))
        order = file_order(vw)
    return vw, order, name, counts, chosen


def _judged(vw: FrameView, seg: Segments) -> FrameView:
    if seg.kept.all() and not seg.breaks.any():
        return vw  # nothing set aside: the view as it is (a view already judged keeps its marks)
    kept = np.flatnonzero(seg.kept)
    breaks, starts = seg.breaks[kept], seg.starts[kept]
    return vw.subset(kept, breaks if breaks.any() else None, starts if starts.any() else None)


def _coverage(judged: FrameView, seg: Segments, name, counts, split, cfg_cols, missing) -> dict[str, dict]:
    no_step = "the rows have no step field: their order is the only order"
    seen = ("" if seg.total_breaks <= MAX_BREAKS else
            f"; the first {MAX_BREAKS} of {seg.total_breaks:,} places the step goes back examined")
    return {
        "segments": {"ran": judged.step_given, "why": None if judged.step_given else no_step,
                     "detail": f"{seg.count} segment(s), {len(seg.resumes)} resume(s){seen}"},
        "writers": {"ran": True, "why": None,
                    "detail": (f"{len(counts)} writer(s) by the field {name}" if name else
                               f"{len(counts)} writer(s) told apart by their content" if split else
                               "no writer field: writers looked for where a step is logged again")},
        "config_continuity": {"ran": bool(cfg_cols), "why": None if cfg_cols else "no config column logged",
                              "detail": f"{len(cfg_cols)} config column(s) compared across rows"},
        "step_continuity": {"ran": judged.step_given, "why": None if judged.step_given else no_step,
                            "detail": "repeated, skipped and backward steps"},
        "fields": {"ran": missing is not None,
                   "why": None if missing is not None else
                   "the frame does not say which values its file left out (a NaN and a missing field read alike)",
                   "detail": "fields missing on some lines"},
    }


def analyse(frame: pd.DataFrame | FrameView, writer: str | None = None, split_writers: bool = False,
            ulps: float = 0.0) -> Structure:
    """The structure of one diag frame (canonical columns), and the view its checks judge.

    Parameters
    ----------
    frame
        A diag frame, or a view of one (:func:`~regime_dash.analysis.view.view`).
    writer
        The writer to judge where rows name their writer (default: the first in the file).
    split_writers
        Without a writer field, tell the writers apart by the continuity of their state.
    ulps
        Slack of the continuity tests' multiply-add formulas (``CheckOptions.rederive_ulps``).

    Raises
    ------
    ValidationError
        ``writer`` is not a writer of this frame.
    """
    vw = as_view(frame)
    order = file_order(vw)
    vw, order, name, counts, chosen = _writer_rows(vw, order, writer, split_writers, ulps)
    seg = classify(vw, order, compared_columns(vw, name), ulps)
    judged = _judged(vw, seg)
    found = [report.writers(name, counts, chosen)] if len(counts) > 1 else []
    if seg.interleave is not None:
        found.append(report.interleaved(seg.interleave))
    found += [report.resume(r) for r in seg.resumes[:MAX_STEPS]]
    slips = slip_skips(judged, seg.slips, lambda a, b: bool(ct.continues(judged, [a], [b], ulps)[0].ok))
    explained = {s["step"] for s in slips}
    found += report.slips(sorted(slips + [s for s in seg.slips if s["step"] not in explained],
                                 key=lambda s: s["step"]))
    skip = np.zeros(judged.n, dtype=bool)
    skip[[s["skip_row"] for s in slips]] = True
    if skip.any():  # the step label skipped, the state did not: no step-to-step rule across the label's gap
        judged = judged.subset(np.arange(judged.n), skip if judged.breaks is None else judged.breaks | skip,
                               judged.starts)
    missing = missing_fields(judged, file_order(judged))
    found += missing or []
    gaps = Gaps()
    gaps.add(judged, 1, skip)
    changes = Changes(resumed={r["step"] for r in seg.resumes if not r["identical"]})
    changes.add(judged)
    cov = _coverage(judged, seg, name, counts, split_writers, config_columns(judged), missing)
    set_aside = np.empty(0, dtype=np.int64) if seg.kept.all() else file_lines(vw)[~seg.kept]
    return Structure(judged, found, seg, gaps, changes, counts, chosen,
                     name or ("content" if split_writers and counts else None), cov, set_aside)


__all__ = ["LINES_ATTR", "Outline", "STRUCTURE", "STRUCTURE_IDS", "Structure", "WHEN_COLUMNS", "WRITER_FIELDS",
           "analyse", "followed"]
