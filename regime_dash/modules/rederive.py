"""Re-derivation of a module frame: each logged output recomputed from logged values and compared.

A module's ``rederive`` module recomputes every output its frame logs through the
twin functions its replay runs (one function per logged output), feeding each
one the logged values it reads: row ``t``'s for a value written earlier in the
same step, row ``t−1``'s (the reset value at a fold start) otherwise. So one
wrong formula shows in its own output only, at the rows it is wrong.

This module holds what the three modules share: :class:`Formula` (an output, the
formula in words and its kernel), :func:`result` (the check result, with the
evidence layout of the core's ``rederive.*`` checks:
``{"formula", "kernel", "compared", "tolerance_ulps", "divergences": [{"step",
"expected", "logged", "inputs"}]}``), :func:`lagged` (row ``t−1`` with the fold
reset applied) and :func:`coverage` (one entry per logged field).

Tolerance. The twins and kernels compute in float32 with ``--fmad=false``, so a
re-derived output is compared exactly; ``fma`` marks the formulas with a multiply
followed by an add (or a subtract), the only ones
:attr:`~regime_dash.analysis.invariants.CheckOptions.rederive_ulps` loosens.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

import numpy as np
import pandas as pd

from regime_dash.analysis.invariants import MAX_STEPS, CheckResult
from regime_dash.modules.frames import fold_starts, frame_steps

#: Divergences listed in a check's evidence (as the core's re-derivation lists).
MAX_DIVERGENCES = 200
#: Columns of every module frame that are not logged fields of the controller.
META_COLUMNS = ("step", "fold", "phase")


@dataclass(frozen=True)
class Formula:
    """One re-derived output of a module frame.

    Attributes
    ----------
    output
        The check id's last part: ``<prefix>rederive.<output>``.
    column
        The logged column it recomputes.
    kernel
        The kernel (or host function) that writes it.
    text
        The formula in words.
    fma
        Holds a multiply-add that a build with FMA contraction may round once instead of twice.
    """

    output: str
    column: str
    kernel: str
    text: str
    fma: bool = False

    def check_id(self, prefix: str) -> str:
        return f"{prefix}rederive.{self.output}"


@dataclass
class Derived:
    """A formula's expected values over a frame, the rows compared and the inputs behind them.

    ``inputs`` maps a label (``column`` or ``column (t−1)``) to the values the formula read, row by row.
    ``reads`` lists the logged columns it read and at which rows, as offsets from ``t`` (−1 the row
    before, 0 the row itself, k > 0 rows ahead). ``explain`` (given ``{column: (expected, divergent)}``
    of every output) returns ``{input label: rows}`` where a divergence is explained by that input
    diverging itself; without it, a divergence is explained where another column it read diverges at
    the row it was read from (:func:`results`).
    """

    formula: Formula
    expected: np.ndarray
    rows: np.ndarray
    inputs: Mapping[str, np.ndarray]
    reads: tuple[tuple[str, tuple[int, ...]], ...] = ()
    explain: Callable[[Mapping[str, tuple[np.ndarray, np.ndarray]]], dict[str, np.ndarray]] | None = None


@dataclass(frozen=True)
class Unit:
    """A formula computed row by row by one scalar twin function.

    ``args`` name what the function is called with, in order: a logged column (row ``t``),
    ``"prev:" + column`` (row ``t−1``; the column's entry of ``resets`` at a fold start) or
    ``"config:" + name`` (the run's config constant, :func:`config_of`).
    """

    formula: Formula
    fn: Callable
    args: tuple[str, ...]


def config_of(frame: pd.DataFrame, prefix: str, name: str) -> float | None:
    """A config constant of the run: the column ``<prefix>config.<name>``, else ``frame.attrs['config']``,
    else None (a re-derivation does not guess a constant the frame does not carry)."""
    col = f"{prefix}config.{name}"
    if col in frame.columns and len(frame):
        return float(frame[col].iloc[0])
    value = frame.attrs.get("config", {}).get(name)
    return None if value is None else float(value)


def _arg(frame: pd.DataFrame, prefix: str, spec: str, starts: np.ndarray, resets: Mapping[str, float]):
    """(label, float32 values per row) of one argument, or (the missing field, None)."""
    kind, _, name = spec.rpartition(":")
    if kind == "config":
        value = config_of(frame, prefix, name)
        label = f"{prefix}config.{name}"
        return (label, None) if value is None else (label, np.full(len(frame), value, dtype=np.float32))
    if name not in frame.columns:
        return name, None
    values = frame[name].to_numpy(dtype=np.float32)
    if kind == "prev":
        return f"{name} (t−1)", lagged(values, starts, np.float32(resets[name]))
    return name, values


def run_units(frame: pd.DataFrame, prefix: str, units: Iterable[Unit], resets: Mapping[str, float],
              ulps: float = 0.0, more: Iterable[Derived | CheckResult] = ()) -> list[CheckResult]:
    """The check result of every unit on ``frame`` (a ``skip`` naming what a unit needs and the frame lacks),
    judged together with ``more`` (derived by the module's own code) by :func:`results`."""
    starts = fold_starts(frame)
    out: list[Derived | CheckResult] = []
    for u in units:
        args = [_arg(frame, prefix, a, starts, resets) for a in u.args]
        missing = list(dict.fromkeys(label for label, v in args if v is None))
        if u.formula.column not in frame.columns:
            missing.insert(0, u.formula.column)
        if missing:
            out.append(skip(prefix, u.formula, "not checkable: needs " + ", ".join(missing)
                            + " (not in this frame)", missing))
            continue
        cols = [v for _, v in args]
        expected = np.array([u.fn(*row) for row in zip(*cols)], dtype=np.float64).reshape(len(frame))
        reads = tuple((a.rpartition(":")[2], (-1,) if a.startswith("prev:") else (0,))
                      for a in u.args if not a.startswith("config:"))
        out.append(Derived(u.formula, expected, np.ones(len(frame), bool), dict(zip((l for l, _ in args), cols)),
                           reads, _recompute(frame, u, cols, starts, ulps)))
    return results(prefix, frame, [*out, *more], ulps)


def _recompute(frame: pd.DataFrame, u: Unit, cols: list[np.ndarray], starts: np.ndarray, ulps: float):
    """A unit's ``explain``: where an input it read diverges itself, the unit is run again with that
    input's expected value; a row that then equals its logged value was wrong only through the input."""
    def explain(outputs: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, np.ndarray]:
        subs = []  # (arg position, label, rows where the input diverges, its expected value per row)
        for j, a in enumerate(u.args):
            col = a.rpartition(":")[2]
            if a.startswith("config:") or col not in outputs:
                continue
            exp, bad = outputs[col]
            k = -1 if a.startswith("prev:") else 0
            subs.append((j, col if k == 0 else f"{col} (t−1)", _shifted(bad, k, starts),
                         lagged(exp, starts, np.nan) if k else exp))
        if not subs:
            return {}
        own_bad = outputs[u.formula.column][1]
        rows = own_bad & np.logical_or.reduce([m for _, _, m, _ in subs])
        logged = frame[u.formula.column].to_numpy(dtype=np.float64)
        fixed = np.zeros(len(frame), dtype=bool)
        for t in np.flatnonzero(rows):
            args = [c[t] for c in cols]
            for j, _label, m, exp in subs:
                if m[t]:
                    args[j] = np.float32(exp[t])
            fixed[t] = bool(_equal(np.array([u.fn(*args)], dtype=np.float64), logged[t:t + 1],
                                   ulps if u.formula.fma else 0.0)[0])
        return {label: fixed & m for _, label, m, _ in subs if (fixed & m).any()}

    return explain


def results_repaired(prefix: str, frame: pd.DataFrame, derive: Callable[[pd.DataFrame], list[Derived | CheckResult]],
                     ulps: float = 0.0) -> list[CheckResult]:
    """The results of ``derive(frame)``, each divergence explained where its input diverges itself.

    For formulas whose inputs are not one row apart (windows, traces ahead): ``derive`` runs again
    on the frame with every divergent logged value replaced by its expected one. A divergence that
    is gone then, compared with the logged value, was caused by a wrong input, not by its formula,
    and is listed under ``evidence["explained"]``; a wrong formula still diverges, since its inputs
    were right. One wrong logged value is so reported once, at its step and field.
    """
    first = derive(frame)
    derived = [d for d in first if isinstance(d, Derived) and d.formula.column in frame.columns]
    bad = {d.formula.column: _divergent(frame, d, ulps) for d in derived}
    if not any(m.any() for m in bad.values()):
        return [d if isinstance(d, CheckResult) else result(prefix, frame, d, ulps) for d in first]
    repaired = frame.copy()
    for d in derived:
        m = bad[d.formula.column]
        if m.any():
            col = repaired[d.formula.column].to_numpy(dtype=np.float64).copy()
            col[m] = np.asarray(d.expected, dtype=np.float64)[m]
            repaired[d.formula.column] = col
    again = {d.formula.column: d for d in derive(repaired) if isinstance(d, Derived)}
    out = []
    for d in first:
        if isinstance(d, CheckResult) or d.formula.column not in frame.columns:
            out.append(d if isinstance(d, CheckResult) else result(prefix, frame, d, ulps))
            continue
        still = _divergent(frame, again[d.formula.column], ulps) if d.formula.column in again else bad[d.formula.column]
        gone = bad[d.formula.column] & ~still
        out.append(result(prefix, frame, d, ulps, {"an input that diverges itself": gone} if gone.any() else None))
    return out


def _divergent(frame: pd.DataFrame, d: Derived, ulps: float) -> np.ndarray:
    logged = frame[d.formula.column].to_numpy(dtype=np.float64)
    return np.asarray(d.rows, dtype=bool) & ~_equal(np.asarray(d.expected), logged, ulps if d.formula.fma else 0.0)


def _shifted(mask: np.ndarray, offset: int, starts: np.ndarray) -> np.ndarray:
    """``out[t] = mask[t + offset]``; a read of the row before at a fold start read the reset value instead."""
    out = np.zeros_like(mask)
    if offset < 0:
        out[-offset:] = mask[:offset]
        out &= ~starts
    elif offset > 0:
        out[:-offset] = mask[offset:]
    else:
        out[:] = mask
    return out


def results(prefix: str, frame: pd.DataFrame, items: Iterable[Derived | CheckResult],
            ulps: float = 0.0) -> list[CheckResult]:
    """Every re-derived output judged, each divergence blamed on an input when the input diverges itself.

    A logged value that is wrong (not the formula that wrote it) makes its own re-derivation diverge,
    and also every formula that reads it. Those readers' divergences are *explained* (listed in
    their evidence, not counted; see :class:`Derived` for when), so one wrong value is reported once,
    at its step and field. A wrong formula is not hidden so: its readers took its logged outputs and
    agree with them. Results that are already :class:`CheckResult` (skips) pass through.
    """
    items = list(items)
    starts = fold_starts(frame)
    outputs = {d.formula.column: (np.asarray(d.expected, dtype=np.float64), _divergent(frame, d, ulps))
               for d in items if isinstance(d, Derived) and d.formula.column in frame.columns}
    out = []
    for d in items:
        if isinstance(d, CheckResult):
            out.append(d)
        elif d.explain is not None:
            out.append(result(prefix, frame, d, ulps, d.explain(outputs)))
        else:
            explained: dict[str, np.ndarray] = {}
            for col, offsets in d.reads:
                if col in outputs and col != d.formula.column:  # a recurrence's own wrong formula stays counted
                    for k in offsets:
                        label = col if k == 0 else f"{col} (t{k:+d})"
                        explained[label] = explained.get(label, False) | _shifted(outputs[col][1], k, starts)
            out.append(result(prefix, frame, d, ulps, explained))
    return out


def lagged(values: np.ndarray, starts: np.ndarray, reset) -> np.ndarray:
    """Row ``t−1``'s values for every row; ``reset`` at the rows where a fold starts (row 0 included)."""
    values = np.asarray(values)
    out = np.empty_like(values)
    out[1:] = values[:-1]
    out[np.asarray(starts, dtype=bool)] = reset
    return out


def _equal(expected: np.ndarray, logged: np.ndarray, ulps: float) -> np.ndarray:
    exp = expected.astype(np.float64)
    got = logged.astype(np.float64)
    same = (exp == got) | (np.isnan(exp) & np.isnan(got))
    if ulps > 0:
        spacing = np.spacing(np.abs(expected.astype(np.float32))).astype(np.float64)
        same |= np.abs(exp - got) <= ulps * spacing
    return same


def _value(x) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


def _fmt(x: float | None) -> str:
    return "NaN" if x is None else f"{x:.9g}"


def spans(steps: np.ndarray, bad: np.ndarray) -> list[tuple[int, int]]:
    """``[first, last]`` runs of consecutive bad rows, as their steps."""
    rows = np.flatnonzero(bad)
    if not len(rows):
        return []
    breaks = np.flatnonzero(np.diff(rows) != 1)
    starts = np.concatenate(([0], breaks + 1))
    ends = np.concatenate((breaks, [len(rows) - 1]))
    return [(int(steps[rows[a]]), int(steps[rows[b]])) for a, b in zip(starts, ends)]


def skip(prefix: str, formula: Formula, why: str, missing: Iterable[str] = ()) -> CheckResult:
    """A ``skip`` that says what the output needs and the frame lacks."""
    return CheckResult(formula.check_id(prefix), "skip", 0, None, [], why, list(missing), column=formula.column,
                       evidence={"formula": formula.text, "kernel": formula.kernel})


def result(prefix: str, frame: pd.DataFrame, d: Derived, ulps: float = 0.0,
           explained: Mapping[str, np.ndarray] | None = None) -> CheckResult:
    """The ``pass``/``fail``/``skip`` of one re-derived output, with every divergence as evidence.

    ``explained`` maps an input's label to the rows where that input itself diverges: a divergence
    there is listed under ``evidence["explained"]`` and not counted.
    """
    f = d.formula
    if f.column not in frame.columns:
        return skip(prefix, f, f"not checkable: needs {f.column} (not in this frame)", [f.column])
    steps = frame_steps(frame)
    logged = frame[f.column].to_numpy(dtype=np.float64)
    rows = np.asarray(d.rows, dtype=bool)
    tol = float(ulps) if f.fma else 0.0
    bad = _divergent(frame, d, ulps)
    n_rows = int(rows.sum())
    evidence = {"formula": f.text, "kernel": f.kernel, "compared": n_rows, "tolerance_ulps": tol}
    blamed = {k: m & bad for k, m in (explained or {}).items() if (m & bad).any()}
    if blamed:
        any_blamed = np.logical_or.reduce(list(blamed.values()))
        evidence["explained"] = [{"step": int(steps[i]), "input": next(k for k, m in blamed.items() if m[i])}
                                 for i in np.flatnonzero(any_blamed)[:MAX_DIVERGENCES]]
        bad = bad & ~any_blamed
    if not n_rows:
        return CheckResult(f.check_id(prefix), "skip", 0, None, [], "not checkable here: no row with its inputs",
                           column=f.column, evidence=evidence)
    where = np.flatnonzero(bad)
    how = "exactly" if tol == 0 else f"within {tol:g} ulps"
    if not len(where):
        note = (f"; {len(evidence['explained'])} rows differ because an input they read diverges itself"
                if "explained" in evidence else "")
        return CheckResult(f.check_id(prefix), "pass", 0, None, [], f"re-derived on {n_rows} rows, equal {how}"
                           + note, column=f.column, evidence=evidence)
    starts = fold_starts(frame)
    evidence["divergences"] = [
        {"step": int(steps[i]), "expected": _value(d.expected[i]), "logged": _value(logged[i]),
         "boundary": bool(starts[i]), "inputs": {k: _value(v[i]) for k, v in d.inputs.items()}}
        for i in where[:MAX_DIVERGENCES]]
    first = evidence["divergences"][0]
    shown = ", ".join(f"{k.rsplit('.', 1)[-1]}={_fmt(v)}" for k, v in first["inputs"].items())
    detail = (f"{len(where)} of {n_rows} rows differ; first at step {first['step']}: logged "
              f"{_fmt(first['logged'])}, expected {_fmt(first['expected'])} ({f.text}; {shown})")
    bad_steps = steps[where]
    return CheckResult(f.check_id(prefix), "fail", int(len(where)), int(bad_steps[0]),
                       [int(s) for s in bad_steps[:MAX_STEPS]], detail, spans=spans(steps, bad)[:MAX_STEPS],
                       column=f.column, evidence=evidence)


def coverage(frame: pd.DataFrame, prefix: str, formulas: Iterable[Formula], inputs: Mapping[str, str],
             not_checkable: Mapping[str, str], bounded: Mapping[str, Iterable[str]] = {}) -> list[dict]:
    """One entry per logged field of ``frame``: how it is checked.

    Parameters
    ----------
    formulas
        The re-derived outputs (status ``rederived``, their check id).
    inputs
        ``{column: what it is}``: stream inputs and logged config (status ``input``).
    not_checkable
        ``{column: what it needs}``: outputs whose inputs are not logged (status ``not checkable``).
    bounded
        ``{column: check ids}``: outputs only range or identity checks cover (status ``bounded only``).

    A frame column none of these name is ``not checkable`` with ``needs`` saying it is unknown to the module.
    """
    by_col = {f.column: f for f in formulas}
    out = []
    for col in frame.columns:
        if col in META_COLUMNS:
            continue
        if col in by_col:
            out.append({"field": col, "status": "rederived",
                        "checks": [by_col[col].check_id(prefix), *bounded.get(col, ())], "needs": []})
        elif col in inputs:
            out.append({"field": col, "status": "input", "checks": [], "needs": [], "what": inputs[col]})
        elif col in not_checkable:
            out.append({"field": col, "status": "not checkable", "checks": list(bounded.get(col, ())),
                        "needs": [not_checkable[col]]})
        elif col in bounded:
            out.append({"field": col, "status": "bounded only", "checks": list(bounded[col]), "needs": []})
        else:
            out.append({"field": col, "status": "not checkable", "checks": [],
                        "needs": ["a formula: the module does not know this field"]})
    return out


__all__ = ["Derived", "Formula", "MAX_DIVERGENCES", "Unit", "config_of", "coverage", "lagged", "result", "results",
           "results_repaired", "run_units", "skip", "spans"]
