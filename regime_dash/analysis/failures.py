"""A verdict's failures, and one of them explained at one step: what Explore's failures table and
provenance panel show.

:func:`failures` lists every failed check and every finding of severity ``fail``
(:func:`marked` adds what the chart marks besides: warnings and the other
findings), each with its message in the words ``check`` prints
(:mod:`regime_dash.analysis.texts`). :func:`explain` answers "why is this item
here, at this step" from the frame, in one of three ways, by the item's id:

``rederive.<output>``
    The core re-derivation (:func:`regime_dash.analysis.provenance.provenance`):
    the formula with the logged inputs filled in, expected and logged, the rows
    t−1 and t, and a local replay of the recorded inputs around the step.
``structure.resume``
    A resume whose state did not continue: the checkpoint row (as t−1) and the first resumed row
    (as t), each slot that did not continue marked with what continuing gives and the bootstrap
    value it matches.
``<module>.rederive.<output>``
    A controller module's re-derivation: the same evidence, read from the
    check's ``evidence["divergences"]`` (the divergence at that step, or the
    nearest one listed). The local replay runs the core pipeline only, so none is drawn.
anything else
    A check of a bound or an identity, or a finding: its message and the rows
    t−1 and t with the field it concerns; it recomputes no formula.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from regime_dash.analysis import rederive as rd
from regime_dash.analysis.findings import Finding
from regime_dash.analysis.invariants import CheckResult
from regime_dash.analysis.provenance import Provenance, row_values, provenance
from regime_dash.analysis.rederive_formulas import BY_OUTPUT, PREV
from regime_dash.analysis.structure.lines import row_at_line
from regime_dash.analysis.texts import check_message, finding_message
from regime_dash.analysis.verdict import Verdict
from regime_dash.analysis.view import as_view
from regime_dash.errors import ValidationError

#: How a column of the rows table is used by the formula (shown, and highlighted where not empty).
OUTPUT, OUTPUT_READ, READ_PREV, READ_NOW, READ_BOTH, CHECKED = (
    "output", "output, read at t−1", "read at t−1", "read at t", "read at t−1 and t", "checked")


@dataclass(frozen=True)
class Failure:
    """One item of a verdict as the failures table lists it.

    ``kind`` is ``check`` or ``finding``; ``status`` the check's status or the finding's severity;
    ``steps`` every step it names (a span's first step included); ``message`` what ``check`` prints
    after its id.
    """

    kind: str
    id: str
    status: str
    first_step: int | None
    steps: tuple[int, ...]
    message: str
    column: str | None
    evidence: dict


def _of_check(c: CheckResult) -> Failure:
    steps = tuple(sorted({int(s) for s in c.steps} | {int(a) for a, _ in c.spans}))
    return Failure("check", c.id, c.status, c.first_step, steps, check_message(c), c.column, c.evidence)


def _of_finding(f: Finding) -> Failure:
    steps = tuple(sorted({int(s) for s in f.steps} | {int(a) for a, _ in f.spans}))
    first = int(f.spans[0][0]) if f.spans else (int(f.steps[0]) if f.steps else None)
    return Failure("finding", f.id, f.severity, first, steps, finding_message(f), f.column, f.evidence)


def failures(verdict: Verdict) -> list[Failure]:
    """Every failed check and every finding of severity ``fail``, checks first, in report order."""
    return [_of_check(c) for c in verdict.failed] + [_of_finding(f) for f in verdict.failing_findings]


def marked(verdict: Verdict) -> list[Failure]:
    """What the chart marks: every check that fails or warns, and every finding."""
    return ([_of_check(c) for c in verdict.checks if c.status in ("fail", "warn")]
            + [_of_finding(f) for f in verdict.findings])


def find_item(verdict: Verdict, item_id: str) -> Failure | None:
    """The marked item with id ``item_id`` (``None`` if the verdict has none)."""
    return next((x for x in marked(verdict) if x.id == item_id), None)


def source_of(item_id: str) -> str:
    """``rederive`` (the core's re-derivation), ``resume`` (a resume's continuity), ``module`` (a module's
    re-derivation) or ``bound`` (any other item)."""
    if item_id.startswith("rederive."):
        return "rederive"
    if item_id == "structure.resume":
        return "resume"
    return "module" if "rederive." in item_id else "bound"


@dataclass(frozen=True)
class Explanation:
    """One item explained at one step.

    Attributes
    ----------
    item, step, source
        The item, the step explained and how (:func:`source_of`).
    formula, filled
        The formula in words, and with this step's inputs and values (``None`` for a bound or a finding).
    expected, logged
        The re-derived and the logged value at ``step`` (``None`` where there is no formula).
    rows
        The logged rows t−1 and t as a table: ``field``, ``t−1``, ``t`` (as text) and ``use`` (how the
        formula uses the field, empty for the fields it does not read); the used fields first.
    replay, split_step
        The local replay (``step``, ``logged``, ``replayed``) and where it parts from the log; ``None``
        where none is drawn.
    note
        One sentence on what the panel shows and what it cannot.
    """

    item: Failure
    step: int
    source: str
    formula: str | None
    filled: str | None
    expected: float | None
    logged: float | None
    rows: pd.DataFrame
    replay: pd.DataFrame | None
    split_step: int | None
    note: str


def _text(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return rd.value_text(value) if np.isfinite(value) else rd.value_text(None)
    return str(value)


def rows_table(rows: dict, uses: dict[str, str]) -> pd.DataFrame:
    """The rows t−1 and t (``{"t-1": {col: value}, "t": {...}}``) as one table, one field a row:
    the fields in ``uses`` first (in its order), then the others in the row's order."""
    now, before = rows.get("t", {}), rows.get("t-1", {})
    fields = [c for c in uses if c in now] + [c for c in now if c not in uses]
    return pd.DataFrame({"field": fields, "t−1": [_text(before.get(c)) for c in fields],
                         "t": [_text(now.get(c)) for c in fields], "use": [uses.get(c, "") for c in fields]})


def _add(uses: dict[str, str], col: str, use: str) -> None:
    old = uses.get(col)
    if old in (READ_PREV, READ_NOW) and use in (READ_PREV, READ_NOW) and old != use:
        use = READ_BOTH
    if old in (OUTPUT, OUTPUT_READ):
        use = OUTPUT_READ if use == READ_PREV else old
    uses[col] = use


def _rows_at(frame, step: int) -> dict:
    view = as_view(frame)
    at = np.flatnonzero(view.step == int(step))
    if not len(at):
        raise ValidationError(f"step {step!r} is not a row of this run", field="step", value=step)
    i = int(at[0])
    return {"t-1": row_values(view.frame, i - 1) if i > 0 else {}, "t": row_values(view.frame, i)}


def _from_rederive(frame, item: Failure, step: int) -> Explanation:
    p: Provenance = provenance(frame, item.id, step)
    f = BY_OUTPUT[item.id[len("rederive."):]]
    uses = {f.column: OUTPUT}
    for col, lag in f.reads:
        _add(uses, col, READ_PREV if lag == PREV else READ_NOW)
    for col in f.needs:
        _add(uses, col, READ_NOW)
    first, last = int(p.replay["step"].iloc[0]), int(p.replay["step"].iloc[-1])
    split = (f"they part at step {p.split_step}" if p.split_step is not None
             else "they never part in this window")
    note = (f"The local replay runs the reference step functions from the logged state before step {first} "
            f"over the recorded inputs to step {last}, without the log's corrections: {split}.")
    return Explanation(item, p.step, "rederive", p.formula, p.filled, p.expected, p.logged,
                       rows_table(p.rows, uses), p.replay, p.split_step, note)


def _from_module(frame, item: Failure, step: int) -> Explanation:
    divs = list(item.evidence.get("divergences") or [])
    formula = item.evidence.get("formula")
    if not divs or formula is None:
        raise ValidationError(f"{item.id} carries no divergences with a formula in its evidence",
                              field="check", value=item.id)
    div = min(divs, key=lambda d: (abs(int(d["step"]) - int(step)), int(d["step"])))
    uses = {item.column: OUTPUT} if item.column else {}
    for key in div.get("inputs", {}):
        col, lagged = (key[:-len(" (t−1)")], True) if key.endswith(" (t−1)") else (key, False)
        _add(uses, col, READ_PREV if lagged else READ_NOW)
    filled = (f"{formula}; with {rd.inputs_text(div)}: expected {rd.value_text(div['expected'])}, "
              f"logged {rd.value_text(div['logged'])}")
    at = int(div["step"])
    note = ("A module's re-derivation: its formula, inputs and values come from the check's evidence. "
            "The local replay runs the core regime pipeline only, so none is drawn for a module.")
    if at != int(step):
        note = f"Step {step} is not among the divergences listed; the nearest, step {at}, is shown. " + note
    return Explanation(item, at, "module", formula, filled, div.get("expected"), div.get("logged"),
                       rows_table(_rows_at(frame, at), uses), None, None, note)


def _from_bound(frame, item: Failure, step: int) -> Explanation:
    uses = {item.column: CHECKED} if item.column else {}
    what = ("This check tests a bound or an identity on the logged values" if item.kind == "check"
            else "This finding compares what the run did with the spec's prose")
    note = (f"{what}; it recomputes no formula, so there is no formula with numbers and no replay. "
            "The rederive.* checks recompute each logged output from its inputs.")
    return Explanation(item, int(step), "bound", None, None, None, None,
                       rows_table(_rows_at(frame, step), uses), None, None, note)


def _slot_use(s: dict) -> str:
    boot = f"; the bootstrap value {_text(s['bootstrap'])}" if s.get("matches_bootstrap") else ""
    return f"did not continue: continuing gives {_text(s['expected'])}{boot}"


def _from_resume(frame, item: Failure, step: int) -> Explanation:
    ev = item.evidence
    if not ev.get("slots"):
        return _from_bound(frame, item, step)
    at = {"t": row_at_line(frame, ev["line"])}
    if ev.get("checkpoint_line") is not None:
        at["t-1"] = row_at_line(frame, ev["checkpoint_line"])
    if at["t"] is None:
        raise ValidationError(f"line {ev['line']} (the resumed row) is not a row of this frame", field="line",
                              value=ev["line"])
    rows = {k: ({} if i is None else row_values(frame, i)) for k, i in at.items()}
    uses = {s["column"]: _slot_use(s) for s in ev["slots"]}
    ckpt = ("the start (no checkpoint step in the file)" if ev.get("checkpoint_step") is None else
            f"the checkpoint row, step {ev['checkpoint_step']} (line {ev['checkpoint_line']})")
    note = (f"t−1 is {ckpt}; t is the first resumed row, step {ev['step']} (line {ev['line']}). The slots "
            "highlighted did not continue: a resume restores the ISV slots of its checkpoint, and the reference "
            "step functions run from the checkpoint row give the values named.")
    return Explanation(item, int(ev["step"]), "resume", None, None, None, None, rows_table(rows, uses), None,
                       None, note)


def explain(frame, item: Failure, step: int) -> Explanation:
    """``item`` of a frame's verdict explained at ``step`` (see the module's docstring for how).

    Raises
    ------
    ValidationError
        ``step`` is not a row of the frame (or, for a re-derivation, not a derivable one), or a
        module item has no divergences in its evidence.
    """
    how = {"rederive": _from_rederive, "resume": _from_resume, "module": _from_module,
           "bound": _from_bound}[source_of(item.id)]
    return how(frame, item, int(step))


__all__ = ["Explanation", "Failure", "explain", "failures", "find_item", "marked", "rows_table", "source_of"]
