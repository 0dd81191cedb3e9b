"""One verdict per run: every check and every finding, the same everywhere.

:func:`verdict` is the single function that judges a diag frame: the core
invariants, the F6 success criteria, the checks of every controller module the
frame has columns for (registered in :mod:`regime_dash.analysis.registry`), and
the findings. ``check`` (CLI), Explore, the
Controllers page and the sweep all call it, so the same file gets the same
verdict wherever it is looked at.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

import pandas as pd

from regime_dash.analysis import registry
from regime_dash.analysis.findings import Finding, find, fused_mirror_drift
from regime_dash.analysis.invariants import STATUSES, CheckOptions, CheckResult, run_checks
from regime_dash.analysis.rederive import checks as rederive_checks
from regime_dash.analysis.rederive_formulas import FORMULAS
from regime_dash.analysis.structure import analyse, followed
from regime_dash.analysis.view import FrameView
from regime_dash.errors import ValidationError

if TYPE_CHECKING:
    from regime_dash.analysis.structure import Outline, Structure


@dataclass(frozen=True)
class Verdict:
    """The checks and findings of one run.

    Attributes
    ----------
    checks
        Core, success-criterion and module checks, in report order.
    findings
        Run-level findings (:mod:`regime_dash.analysis.findings`), the run's structure's among them
        (:mod:`regime_dash.analysis.structure`, ids ``structure.*``).
    structure
        The run's structure (segments, writers, the rows set aside), where the verdict read it.
    """

    checks: list[CheckResult]
    findings: list[Finding]
    structure: "Outline | None" = None

    @property
    def counts(self) -> dict[str, int]:
        """Checks per status, every status present (``{"fail": 1, "warn": 0, ...}``)."""
        out = {s: 0 for s in STATUSES}
        for c in self.checks:
            out[c.status] = out.get(c.status, 0) + 1
        return out

    @property
    def failed(self) -> list[CheckResult]:
        return [c for c in self.checks if c.status == "fail"]

    @property
    def failing_findings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "fail"]

    @property
    def status(self) -> str:
        """``fail`` when a check fails or a finding has severity ``fail``, else ``warn`` when
        anything warns, else ``pass``."""
        if self.failed or self.failing_findings:
            return "fail"
        if any(c.status == "warn" for c in self.checks) or any(f.severity == "warn" for f in self.findings):
            return "warn"
        return "pass"

    @property
    def ok(self) -> bool:
        """Nothing fails (warnings and skips do not fail a run)."""
        return self.status != "fail"

    @property
    def exit_code(self) -> int:
        """``check``'s exit status: 1 when the verdict fails, else 0."""
        return 0 if self.ok else 1

    @property
    def first_failure(self) -> CheckResult | None:
        """The failed check whose first violation comes earliest (None when none failed)."""
        failed = [c for c in self.failed if c.first_step is not None]
        return min(failed, key=lambda c: c.first_step) if failed else (self.failed[0] if self.failed else None)

    def to_dict(self) -> dict:
        first = self.first_failure
        doc = {"status": self.status, "counts": self.counts,
               "first_failure": None if first is None else {"id": first.id, "step": first.first_step},
               "checks": [c.to_dict() for c in self.checks],
               "findings": [f.to_dict() for f in self.findings]}
        if self.structure is not None:
            doc["structure"] = self.structure.to_dict()
        return doc


def verdict(frame: pd.DataFrame | FrameView, options: CheckOptions | None = None,
            ids: Iterable[str] | None = None, single: pd.DataFrame | FrameView | None = None, *,
            structure: "Structure | None" = None, writer: str | None = None,
            split_writers: bool = False) -> Verdict:
    """Judge one diag frame (canonical column names): every check, every finding.

    The rows judged are the run as it really is (:func:`regime_dash.analysis.structure.analyse`):
    one writer's, a clean resume's re-logged rows once, a failed resume's superseded rows set aside;
    the structure's findings come with the others.

    Parameters
    ----------
    frame
        A diag frame (see :func:`regime_dash.diag.aliases.canonical_frame`) or a prepared view.
    options
        The shared check options (ulp tolerance, trap limit, ...); module checks take them too.
    ids
        Check ids to run (core and module ids mixed); all when ``None``. Findings always run.
    single
        For a replay of the fused controller path: the single path's replay of the same inputs
        and config, for the finding ``fused_mirror_drift`` (:func:`~regime_dash.analysis.findings.fused_mirror_drift`).
    structure
        The frame's structure where the caller has it already (its view is the one judged).
    writer, split_writers
        Which writer to judge, and whether writers without a field are told apart by their content
        (:func:`~regime_dash.analysis.structure.analyse`).

    Raises
    ------
    ValidationError
        For an unknown check id, or a writer the frame does not have.
    """
    opt = options or CheckOptions()
    if structure is None:
        structure = analyse(frame, writer, split_writers, opt.rederive_ulps)
    vw = structure.view
    provided = registry.providers()  # the module checks (analysis.registry), loaded by name
    wanted, rederived = rederive_ids(ids)
    core_ids, provided_ids = registry.split_ids(wanted, provided)
    checks = run_checks(vw, core_ids, opt)
    if rederived is None or rederived:
        checks.extend(r for r in rederive_checks(vw, opt.rederive_ulps) if rederived is None or r.id in rederived)
    for provider, wanted_ids in zip(provided, provided_ids):
        checks.extend(provider.results(vw.frame, wanted_ids, opt))
    found = find(vw, opt)
    if single is not None:
        found.extend(fused_mirror_drift(vw, single))
    found.extend(structure.findings)
    return Verdict(checks, followed(found, checks), structure.outline())


def rederive_ids(ids: Iterable[str] | None) -> tuple[list[str] | None, list[str] | None]:
    """``ids`` split into (the others, the ``rederive.*`` ids); ``(None, None)`` for every check.

    Raises
    ------
    ValidationError
        For a ``rederive.*`` id no formula has.
    """
    if ids is None:
        return None, None
    ids = list(ids)
    ours = [i for i in ids if str(i).startswith("rederive.")]
    known = {f.check_id for f in FORMULAS}
    for i in ours:
        if i not in known:
            raise ValidationError(f"unknown check id {i!r}; re-derivation ids: {', '.join(sorted(known))}",
                                  field="check", value=i)
    return [i for i in ids if i not in ours], ours


def flat_sweep_note(values, fields, judged: Verdict) -> str | None:
    """Why a sweep's metric did not move, or ``None`` when it moved.

    Parameters
    ----------
    values
        The metric's value at every swept config.
    fields
        The swept RegimeConfig fields.
    judged
        The verdict of a replay at the sweep's base config: a finding whose ``fields``
        name a swept field explains the flat line (``timeout_unreachable`` for ``max_duration``).
    """
    import numpy as np

    vals = np.asarray(list(values), dtype=np.float64)
    if len(vals) < 2 or not (np.all(vals == vals[0]) or np.all(np.isnan(vals))):
        return None
    text = f"A flat line: the metric is {vals[0]:g} at every value swept."
    why = [f for f in judged.findings if set(f.fields) & set(fields)]
    if why:
        return f"{text} {why[0].id}: {why[0].message}"
    return f"{text} Nothing in this replay depends on {', '.join(fields)} here."
