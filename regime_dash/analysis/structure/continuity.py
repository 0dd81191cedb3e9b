"""Does one logged row continue another? Pairs of rows re-derived as consecutive steps.

The state that must survive a resume is the ISV slots: a row continues row ``a`` when
every output the reference step functions re-derive from ``a`` as the step before is
what the row logs (:mod:`regime_dash.analysis.rederive`, each pair on its own, the
steps relabelled so the pairs are consecutive). The pair's own fold and phase say
whether ``reset_session_state`` ran between them; a reset is never inferred from the
values here, since a job that came back at the bootstrap values looks like one.

Outputs carried through the Welford mean and M2, which a diag does not log (the
variance), cannot be compared from two rows and are left out.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from regime_dash.analysis import rederive as rd
from regime_dash.analysis.rederive_formulas import FORMULAS
from regime_dash.analysis.view import FrameView, view
from regime_dash.core.slots import DEFAULT_LAYOUT
from regime_dash.engine.rederive import OUTPUTS

_SLOT_OF = dict(OUTPUTS)


@dataclass(frozen=True)
class Outcome:
    """One row against the row it should continue (or against the bootstrap).

    ``ok`` is None where no output could be compared; ``diverged`` lists each output that does not
    continue: ``output``, ``slot``, ``column``, ``before`` (the earlier row's value), ``after`` (the
    row's) and ``expected`` (what continuing gives)."""

    ok: bool | None
    compared: tuple[str, ...]
    diverged: list[dict] = field(default_factory=list)


def _value(x) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


def _stacked(vw: FrameView, rows: np.ndarray, steps: np.ndarray, same_session: bool) -> FrameView:
    sub = vw.frame.iloc[rows].reset_index(drop=True)
    sub.attrs = {}
    sub["step"] = steps
    for col in ("fold", "phase"):
        if same_session or col not in sub.columns:
            sub[col] = 0  # told, never inferred from the values
    return view(sub)


def _outcomes(v2: FrameView, rows: np.ndarray, before: np.ndarray | None, ulps: float) -> list[Outcome]:
    p = rd.prepare(v2)
    exp, chain_ok = p.expected()
    out: list[list[dict]] = [[] for _ in rows]
    seen: list[list[str]] = [[] for _ in rows]
    for k, f in enumerate(FORMULAS):
        if rd.missing(v2, f) or rd.chained(v2, f):
            continue
        at = rd.compared(v2, p, f, chain_ok, False)[rows]
        got = v2.f32(f.column)[rows]
        same = rd.equal(exp[rows, k], got, rd.tolerance(f, ulps))
        for j in np.flatnonzero(at):
            seen[j].append(f.output)
        for j in np.flatnonzero(at & ~same):
            out[j].append({"output": f.output, "slot": _SLOT_OF[f.output], "column": f.column,
                           "before": None if before is None else _value(v2.f32(f.column)[before[j]]),
                           "after": _value(got[j]), "expected": _value(exp[rows[j], k])})
    return [Outcome(None if not names else not d, tuple(names), d) for names, d in zip(seen, out)]


def continues(vw: FrameView, before: np.ndarray, rows: np.ndarray, ulps: float = 0.0) -> list[Outcome]:
    """Whether each view row ``rows[j]`` continues view row ``before[j]`` as its next step."""
    before, rows = np.asarray(before, dtype=np.int64), np.asarray(rows, dtype=np.int64)
    if not len(rows):
        return []
    k = len(rows)
    order = np.empty(2 * k, dtype=np.int64)
    order[0::2], order[1::2] = before, rows
    steps = np.empty(2 * k, dtype=np.int64)
    steps[0::2] = 3 * np.arange(k) + 1  # a gap between the pairs: each pair is derived on its own
    steps[1::2] = steps[0::2] + 1
    v2 = _stacked(vw, order, steps, same_session=False)
    return _outcomes(v2, 2 * np.arange(k) + 1, 2 * np.arange(k), ulps)


def from_bootstrap(vw: FrameView, rows: np.ndarray, ulps: float = 0.0) -> list[Outcome]:
    """Whether each view row of ``rows`` is the first step of a run from the bootstrap state."""
    rows = np.asarray(rows, dtype=np.int64)
    if not len(rows):
        return []
    v2 = _stacked(vw, rows, 2 * np.arange(len(rows)) + 1, same_session=True)
    v2 = v2.subset(np.arange(v2.n), starts=np.ones(v2.n, dtype=bool))
    return _outcomes(v2, np.arange(len(rows)), None, ulps)


def bootstrap_value(slot: str) -> float:
    """The slot's bootstrap value (the slot registry's)."""
    return float(np.float32(DEFAULT_LAYOUT[slot].bootstrap))


def did_not_continue(vw: FrameView, before: int, row: int, outcome: Outcome, ulps: float = 0.0) -> list[dict]:
    """``outcome``'s divergent slots, each with its bootstrap value and whether the row's value is the bootstrap's
    (the slot's bootstrap value itself, or what one step from the bootstrap gives)."""
    if not outcome.diverged:
        return []
    fresh = from_bootstrap(vw, np.array([row]), ulps)[0]
    off_boot = {d["output"] for d in fresh.diverged}
    out = []
    for d in outcome.diverged:
        boot = bootstrap_value(d["slot"])
        # the row's value is one step from the bootstrap where that start re-derives it
        from_boot = d["output"] in fresh.compared and d["output"] not in off_boot
        matches = d["after"] is not None and (d["after"] == boot or from_boot)
        out.append({**d, "bootstrap": boot, "matches_bootstrap": bool(matches)})
    return out


__all__ = ["Outcome", "bootstrap_value", "continues", "did_not_continue", "from_bootstrap"]
