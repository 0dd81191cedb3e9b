"""The words of a verdict: each check and finding as ``check`` prints it, and as the dashboard shows it.

One function per item writes what follows its id on ``check``'s line (the
violation count, the spans, the detail; a finding's steps and message), so the
terminal and Explore say the same thing in the same words: :func:`check_line`
and :func:`finding_line` are the CLI's lines, :func:`check_message` and
:func:`finding_message` the text the failures table and the provenance panel show.
"""
from __future__ import annotations

from regime_dash.analysis.findings import Finding
from regime_dash.analysis.invariants import CheckResult


def _check_tail(c: CheckResult) -> str:
    first = "" if c.first_step is None else f" first step {c.first_step}"
    count = f" {c.violations} violation(s){first}" if c.status in ("fail", "warn") and c.violations else ""
    spans = "".join(f" [{a}..{b}]" for a, b in c.spans[:3])
    return f"{count}{spans}  {c.detail}"


def _finding_tail(f: Finding) -> str:
    where = ", ".join(f"{a}..{b}" for a, b in f.spans[:3]) or ", ".join(map(str, f.steps[:5]))
    return f" (steps {where}): {f.message}"


def check_message(c: CheckResult) -> str:
    """What ``check`` prints after a check's id: its violations, first step, spans and detail."""
    return _check_tail(c).strip()


def finding_message(f: Finding) -> str:
    """What ``check`` prints after a finding's id: the steps it concerns and its message."""
    return _finding_tail(f).strip()


def check_line(c: CheckResult, width: int = 0) -> str:
    """``check``'s line of one check, its id padded to ``width``."""
    return f"{c.status.upper():4}  {c.id:<{width}}{_check_tail(c)}"


def finding_line(f: Finding) -> str:
    """``check``'s line of one finding."""
    return f"{f.severity.upper():4}  {f.id}{_finding_tail(f)}"


__all__ = ["check_line", "check_message", "finding_line", "finding_message"]
