"""Coverage: for every logged field, whether a check recomputes it, only bounds it, or cannot check it.

One entry per column of the frame (``step``, ``fold`` and ``phase`` aside), with
``status``:

``rederived``       a ``rederive.*`` check recomputed it from the logged inputs;
``bounded only``    no formula could run here (``needs`` names the missing input), but
                    a check bounds it (a range, a floor, a monotone rule);
``not checkable``   nothing here checks it (``needs`` says what would);
``input``           an input or config value of the pipeline, recorded, not computed.

A field reported ``rederived`` was compared on every derivable row; ``checks``
lists the check ids that looked at it. Module checks add their own entries
(:func:`merge`).
"""
from __future__ import annotations

from typing import Iterable

from regime_dash.diag import catalogue as diag
from regime_dash.analysis.invariants import CheckResult
from regime_dash.analysis.rederive_formulas import FORMULAS, INPUT_FIELDS

#: Checks that bound a field without recomputing it (ids of :data:`invariants.CHECKS`).
BOUNDS: dict[str, tuple[str, ...]] = {
    diag.FLAG: ("flag_binary",), diag.TIMEOUT: ("flag_binary", "timeout_flag"),
    diag.DURATION: ("dead_zone_duration",), diag.FACTOR: ("recovery_factor_formula",),
    diag.LIVE: ("eps_live_formula",), diag.RECENCY: ("tail_recency",), diag.COUNT: ("welford_count_monotone",),
    diag.SIGMA: ("envelope_floor",), diag.ENVELOPE: ("envelope_tracking", "envelope_floor"),
    diag.REMAINING: ("transition_ramp", "boundary_reset"), diag.KELLY: ("kelly_resurrection", "kelly_trap"),
    diag.TAU_MIN_EFF: ("tau_boost",), diag.TAU_ACTION: ("tau_boost",), diag.FLAT_COUNT: ("flat_count_range",),
}
#: What a field that no formula covers would need.
NEEDS: dict[str, str] = {diag.FLAT_COUNT: "the per-account lots, which a diag does not log"}
_META = {"step", "fold", "phase"}
_BY_COLUMN = {f.column: f for f in FORMULAS}


def _entry(col: str, results: dict[str, CheckResult]) -> dict:
    bounds = [c for c in BOUNDS.get(col, ()) if c in results and results[c].status != "skip"]
    f = _BY_COLUMN.get(col)
    if f is not None and f.check_id in results:
        r = results[f.check_id]
        if r.status in ("pass", "fail"):
            return {"field": col, "status": "rederived", "checks": [f.check_id, *bounds], "needs": []}
        needs = list(r.missing) or [r.detail]
        return {"field": col, "status": "bounded only" if bounds else "not checkable", "checks": bounds,
                "needs": needs}
    if col in INPUT_FIELDS:
        return {"field": col, "status": "input", "checks": [], "needs": []}
    if bounds:
        return {"field": col, "status": "bounded only", "checks": bounds, "needs": [NEEDS.get(col, "")]}
    readers = [r.id for r in results.values() if r.column == col and r.status != "skip"]
    return {"field": col, "status": "bounded only" if readers else "not checkable", "checks": readers,
            "needs": [NEEDS.get(col, "no formula: not a field of the regime pipeline")]}


def coverage(columns: Iterable[str], checks: Iterable[CheckResult]) -> list[dict]:
    """One coverage entry per column (see the module doc), from a verdict's check results."""
    results = {c.id: c for c in checks}
    return [_entry(c, results) for c in columns if c not in _META]


def merge(core: list[dict], extra: Iterable[dict]) -> list[dict]:
    """``core`` with the entries of ``extra`` (module coverage) replacing those of the same field."""
    by_field = {e["field"]: e for e in core}
    for e in extra:
        by_field[e["field"]] = e
    return list(by_field.values())


def counts(entries: Iterable[dict]) -> dict[str, int]:
    """Entries per status."""
    out = {s: 0 for s in ("rederived", "bounded only", "not checkable", "input")}
    for e in entries:
        out[e["status"]] = out.get(e["status"], 0) + 1
    return out


__all__ = ["coverage", "merge", "counts", "BOUNDS"]
