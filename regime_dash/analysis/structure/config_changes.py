"""Config continuity: every logged config column compared across rows; a change is a finding at its row.

The spec makes the config ISV-tunable ("raise via runtime config if needed"), so a change
is not a fault: the finding names the row, the old and new values, and whether the change
came at a fold boundary, with a reset (``reset_session_state`` inferred from the slots), or
at a resume. The re-derivation reads the config in force at each row, so a change the
kernels followed re-derives clean, and a logged value they did not follow fails the
re-derivation of the outputs that read it: :func:`followed` says which, once the checks ran.

:class:`Changes` is fed rows in step order, a whole run at once or batch by batch.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from regime_dash.analysis.findings import Finding
from regime_dash.analysis.invariants import MAX_STEPS, CheckResult
from regime_dash.analysis.rederive_formulas import FORMULAS
from regime_dash.analysis.view import FrameView
from regime_dash.diag.catalogue import LOGGED_CONFIG

_NAME_OF = {col: name for name, col in LOGGED_CONFIG.items()}
_CONFIG_PART = ".config."


def config_columns(vw: FrameView) -> list[str]:
    """The frame's logged config columns: the config fields of the diag catalogue, then any ``*.config.*``
    column (a controller module's)."""
    cols = [c for c in LOGGED_CONFIG.values() if vw.has(c)]
    return cols + [c for c in vw.frame.columns if _CONFIG_PART in c and c not in cols]


def _where(vw: FrameView, i: int, resumed: set[int]) -> str | None:
    reasons = [k for k, m in vw.boundary_reasons.items() if m[i]]
    if int(vw.step[i]) in resumed:
        return "at a resume"
    if "fold" in reasons or "phase" in reasons:
        return "at a fold boundary"
    if reasons:
        return "with a reset"
    return None


def _text(x: float) -> str:
    return f"{x:.9g}"


@dataclass
class Changes:
    """The config changes of the rows fed so far (the first :data:`MAX_STEPS` change rows kept)."""

    resumed: set[int] = field(default_factory=set)  # steps of resumed rows
    rows: list[dict] = field(default_factory=list)
    count: int = 0

    def add(self, vw: FrameView, lo: int = 1) -> None:
        """Rows ``lo`` on of ``vw`` against the row before each (row ``lo − 1`` their context)."""
        lo = max(lo, 1)
        if vw.n <= lo:
            return
        at: dict[int, list[dict]] = {}
        for col in config_columns(vw):
            a = vw.f32(col)[lo - 1:]
            if not (a[1:] != a[:-1]).any():  # the common case: constant (NaN aside, found below)
                continue
            idx = np.flatnonzero(np.isfinite(a))
            vals = a[idx]
            for k in np.flatnonzero(vals[1:] != vals[:-1]) + 1:
                row = lo - 1 + int(idx[k])
                if row >= lo:
                    at.setdefault(row, []).append({"column": col, "field": _NAME_OF.get(col, col),
                                                   "old": float(vals[k - 1]), "new": float(vals[k])})
        for row in sorted(at):
            self.count += 1
            if len(self.rows) < MAX_STEPS:
                self.rows.append({"step": int(vw.step[row]), "changes": at[row],
                                  "where": _where(vw, row, self.resumed)})

    def findings(self) -> list[Finding]:
        out = []
        for r in self.rows:
            what = ", ".join(f"{c['field']} {_text(c['old'])} → {_text(c['new'])}" for c in r["changes"])
            where = f" ({r['where']})" if r["where"] else ""
            msg = f"The config changed at step {r['step']:,}{where}: {what}."
            out.append(Finding("structure.config_change", "info", msg, [r["step"]], [],
                               {"step": r["step"], "changes": r["changes"], "where": r["where"],
                                "changes_in_run": self.count}, r["changes"][0]["column"]))
        return out


def _reading(column: str) -> list[str]:
    ids = [f.check_id for f in FORMULAS if column in (*(c for c, _ in f.reads), *f.needs)]
    return ids or [f.check_id for f in FORMULAS]  # a switch: every output may follow it


def followed(findings: list[Finding], checks: list[CheckResult]) -> list[Finding]:
    """The config changes among ``findings`` told whether the kernels followed them: a re-derivation that
    reads a changed column and diverges from the change's step on (before the column's next change) says
    the logged value was not followed (severity ``fail``); one that compared rows there and agrees says it was."""
    by_id = {c.id: c for c in checks}
    changes = [f for f in findings if f.id == "structure.config_change"]
    nxt: dict[str, list[int]] = {}
    for f in changes:
        for c in f.evidence["changes"]:
            nxt.setdefault(c["column"], []).append(f.evidence["step"])
    out = []
    for f in findings:
        if f.id != "structure.config_change":
            out.append(f)
            continue
        out.append(_judged(f, by_id, nxt))
    return out


def _judged(f: Finding, by_id: dict[str, CheckResult], nxt: dict[str, list[int]]) -> Finding:
    step = f.evidence["step"]
    failing, agreeing = {}, []
    for c in f.evidence["changes"]:
        later = [s for s in nxt[c["column"]] if s > step]
        end = min(later) if later else None
        for cid in _reading(c["column"]):
            r = by_id.get(cid)
            if r is None or r.status == "skip":
                continue
            bad = [s for s in r.steps if s >= step and (end is None or s < end)]
            bad += [max(a, step) for a, b in r.spans if b >= step and (end is None or a < end)]
            if bad:
                failing[cid] = min(bad)
            elif r.status == "pass":
                agreeing.append(cid)
    ev = {**f.evidence, "followed": None if not (failing or agreeing) else not failing, "failing": failing}
    if failing:
        first = min(failing.values())
        ids = ", ".join(sorted(failing))
        msg = (f"{f.message} The kernels did not follow the logged value: re-derived with it, {ids} "
               f"diverge{'s' if len(failing) == 1 else ''} from step {first:,}.")
        return replace(f, severity="fail", message=msg, evidence=ev)
    if agreeing:
        return replace(f, message=f"{f.message} The kernels followed it: every re-derived output that reads it "
                                  "agrees from this row on.", evidence=ev)
    return replace(f, message=f"{f.message} No re-derivation that reads it ran, so whether the kernels followed "
                              "it cannot be told here.", evidence=ev)


__all__ = ["Changes", "config_columns", "followed"]
