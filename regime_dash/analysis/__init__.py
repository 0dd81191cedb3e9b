"""Diagnostics on a diag frame: episodes, events, spec invariants, success criteria, run diff.

Pure functions on DataFrames with the canonical column names (docs/CONTRACTS.md); rename
a real file's columns first with :func:`regime_dash.diag.aliases.canonical_frame`.

``verdict(frame)`` (:mod:`.verdict`) is the one function that judges a run:
core invariants, success criteria, module checks and findings.
``diagnose(frame)`` adds the episodes and events and returns a :class:`Report`
whose ``to_dict()`` is the CLI's ``check --json`` document::

    {"status", "counts", "first_failure",
     "checks": [{"id", "status", "violations", "first_step", "steps", "spans", "column",
                 "detail", "evidence"}, ...],
     "findings": [{"id", "severity", "message", "steps", "spans", "evidence", "column", "fields"}, ...],
     "episodes": {"dead_zone": [...]},
     "events": {"tail": [...], "timeouts": [...], "floor_spans": [...],
                "transitions": [...], "boundaries": [...]},
     "skipped": {finder: why}, "summary": {...}}

Modules: :mod:`.view` (sorting, float32 columns, boundary detection; ``view.view(frame)``),
:mod:`.episodes`, :mod:`.invariants`, :mod:`.findings`, :mod:`.verdict`, :mod:`.diff`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import pandas as pd

from regime_dash.diag import catalogue as diag
from regime_dash.analysis.coverage import counts as coverage_counts
from regime_dash.analysis.coverage import coverage
from regime_dash.analysis.coverage import merge as merge_coverage
from regime_dash.analysis.diff import FieldDiff, RunDiff, diff_runs
from regime_dash.analysis.episodes import (boundaries, dead_zone_episodes, find_all, floor_active,
                                           floor_spans, summary, tail_events, timeouts, transitions)
from regime_dash.analysis.findings import FINDING_IDS, Finding, find
from regime_dash.analysis.invariants import (CHECK_IDS, CHECKS, MAX_STEPS, STATUSES, ULPS, CheckOptions,
                                             CheckResult, run_checks)
from regime_dash.analysis.structure import Structure, analyse
from regime_dash.analysis.verdict import Verdict, verdict
from regime_dash.analysis.view import FrameView

__all__ = [
    "CHECK_IDS", "CHECKS", "FINDING_IDS", "MAX_STEPS", "STATUSES", "ULPS", "CheckOptions", "CheckResult",
    "FieldDiff", "Finding", "FrameView", "Report", "RunDiff", "Structure", "Verdict", "analyse", "boundaries",
    "dead_zone_episodes", "diagnose", "diff_runs", "find", "find_all", "floor_active", "floor_spans", "run_checks",
    "summary",
    "tail_events", "timeouts", "transitions", "verdict",
]


def _plain(value: Any) -> Any:
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        f = float(value)
        return f if math.isfinite(f) else None
    if value is pd.NA or value is None:
        return None
    return value


def records(frame: pd.DataFrame) -> list[dict]:
    """A table as JSON-ready dicts (NaN and ±inf become ``None``)."""
    return [{k: _plain(x) for k, x in row.items()} for row in frame.to_dict(orient="records")]


@dataclass
class Report:
    """Everything :func:`diagnose` found: the :class:`Verdict`, episodes, events, summary."""

    verdict: Verdict
    episodes: dict[str, pd.DataFrame]
    events: dict[str, pd.DataFrame]
    skipped: dict[str, str]
    summary: dict
    aliases_applied: dict[str, str] = field(default_factory=dict)
    #: One entry per logged field: rederived, bounded only, not checkable or input (:mod:`.coverage`).
    coverage: list[dict] = field(default_factory=list)

    @property
    def checks(self) -> list[CheckResult]:
        return self.verdict.checks

    @property
    def findings(self) -> list[Finding]:
        return self.verdict.findings

    @property
    def failed(self) -> list[CheckResult]:
        return self.verdict.failed

    @property
    def ok(self) -> bool:
        """No check failed and no finding has severity ``fail`` (skips and warnings do not fail a run)."""
        return self.verdict.ok

    def to_dict(self) -> dict:
        doc = self.verdict.to_dict()
        doc.update({
            "episodes": {k: records(t) for k, t in self.episodes.items()},
            "events": {k: records(t) for k, t in self.events.items()},
            "skipped": dict(self.skipped),
            "summary": {k: _plain(x) for k, x in self.summary.items()},
            "aliases_applied": dict(self.aliases_applied),
            "coverage": {"counts": coverage_counts(self.coverage), "fields": list(self.coverage),
                         "structure": {} if self.verdict.structure is None else self.verdict.structure.coverage},
        })
        return doc


def diagnose(frame: pd.DataFrame, ids: Iterable[str] | None = None,
             options: CheckOptions | None = None, single: pd.DataFrame | None = None, *,
             writer: str | None = None, split_writers: bool = False) -> Report:
    """The :func:`verdict` of one frame, with every episode/event finder's tables.

    Parameters
    ----------
    frame
        A diag frame with canonical column names.
    ids
        Check ids to run (core and module ids); all when ``None``.
    options
        The shared check options (:class:`CheckOptions`).
    single
        For a fused-path replay: the single path's replay of the same inputs (finding
        ``fused_mirror_drift``; see :func:`verdict`).
    writer, split_writers
        Which writer to judge, and whether writers without a field are told apart by their content
        (:func:`regime_dash.analysis.structure.analyse`).
    """
    st = analyse(frame, writer, split_writers, (options or CheckOptions()).rederive_ulps)
    vw = st.view
    judged = verdict(vw, options, ids, single, structure=st)
    episodes, events, skipped = find_all(vw)
    if single is None and vw.has(diag.FUSED_COLUMN) and (vw.f32(diag.FUSED_COLUMN) == 1).any():
        skipped["fused_mirror_drift"] = ("the run replayed the fused controllers; the single path's replay of the "
                                         "same inputs shows where they part (check RUN --single FILE)")
    return Report(judged, episodes, events, skipped, {**summary(vw), **st.summary()},
                  dict(frame.attrs.get("aliases_applied", {})), field_coverage(vw, judged))


def field_coverage(vw, judged: Verdict) -> list[dict]:
    """One coverage entry per logged field: the core's, with each check provider's (the modules') over it."""
    from regime_dash.analysis import registry

    who = None if judged.structure is None else judged.structure.writer_field  # says who wrote a line: no signal
    entries = coverage([c for c in vw.frame.columns if c != who], judged.checks)
    for provider in registry.providers():
        if provider.coverage is not None:
            entries = merge_coverage(entries, provider.coverage(vw.frame))
    return entries
