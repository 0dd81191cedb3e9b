"""The evidence behind one re-derivation failure: the formula with its numbers, the rows, a local replay.

:func:`provenance` answers "why does ``rederive.<output>`` fail at step s": the
formula with the logged inputs filled in, the expected and the logged value,
the logged rows ``t−1`` and ``t``, and a local replay of the recorded inputs
around ``s`` on the reference step functions, started from the logged state
``half_window`` steps before and running free from there
(:func:`regime_dash.engine.rederive.run` with ``resync=False``), so a chart can
draw it over the logged trajectory and show where they split.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from regime_dash.analysis import rederive as rd
from regime_dash.analysis.rederive_formulas import BY_OUTPUT, FORMULAS, Formula
from regime_dash.analysis.view import as_view
from regime_dash.errors import ValidationError

#: Steps either side of the failing step that the local replay covers.
HALF_WINDOW = 200


@dataclass(frozen=True)
class Provenance:
    """One failing step of one re-derived formula, explained.

    Attributes
    ----------
    check_id, column, step
        The check, the diag column it recomputes, the step.
    formula
        The formula in words; ``filled`` is it with this step's logged inputs and the two values.
    expected, logged
        The re-derived and the logged value at ``step``.
    rows
        The logged rows ``t−1`` and ``t`` (``{"t-1": {col: value}, "t": {...}}``), every column.
    replay
        The window around ``step``: ``step``, the logged column and ``replayed`` (the local replay).
    split_step
        The first step of the window where the local replay and the log part (``None`` if they never do).
    """

    check_id: str
    column: str
    step: int
    formula: str
    filled: str
    expected: float | None
    logged: float | None
    rows: dict
    replay: pd.DataFrame
    split_step: int | None


def _formula_of(check_id: str) -> Formula:
    out = check_id[len("rederive."):] if check_id.startswith("rederive.") else check_id
    if out not in BY_OUTPUT:
        raise ValidationError(f"no re-derived formula has the check id {check_id!r}; ids: "
                              f"{', '.join(f.check_id for f in FORMULAS)}", field="check", value=check_id)
    return BY_OUTPUT[out]


def row_dict(frame: pd.DataFrame, i: int) -> dict:
    """Row ``i`` of ``frame`` as ``{column: value}`` (NaN and ±Inf as ``None``)."""
    out = {}
    for col, val in frame.iloc[i].items():
        if isinstance(val, (float, np.floating)):
            out[col] = float(val) if np.isfinite(val) else None
        elif isinstance(val, (np.integer,)):
            out[col] = int(val)
        else:
            out[col] = val
    return out


def _from(p: rd.Prepared, state: tuple, a: int, b: int, resync: bool) -> np.ndarray:
    """Rows ``a`` to ``b − 1`` from ``state`` (a copy of it), row ``a − 1`` the one before: every output."""
    exp, _, _ = p.run(a - 1, b, first=1, state=(state[0].copy(), state[1].copy()), resync=resync)
    return exp[1:]


def provenance(frame_or_view, check_id: str, step: int, half_window: int = HALF_WINDOW) -> Provenance:
    """Explain re-derivation check ``check_id`` at ``step`` of a diag frame.

    Raises
    ------
    ValidationError
        ``check_id`` is not a re-derivation check, or ``step`` is not a derivable row of the frame.
    """
    f = _formula_of(check_id)
    view = as_view(frame_or_view)
    rows = np.flatnonzero(view.step == int(step))
    if not len(rows) or not view.has(f.column):
        raise ValidationError(f"step {step!r} is not a row of this diag with {f.column}", field="step", value=step)
    row = int(rows[0])
    p = rd.prepare(view)
    if p.skip[row]:
        raise ValidationError(f"step {step} cannot be re-derived: the row before it is not step {step - 1}",
                              field="step", value=step)
    k = [x.output for x in FORMULAS].index(f.output)
    a, b = max(1, row - int(half_window)), min(view.n, row + int(half_window) + 1)
    # the rows before the window run once; the re-derivation of the step and the local replay start there
    state = p.state_at(a)  # after row a − 1: the carried Welford state comes from the rows before
    exp_all = np.full(view.n, np.nan, dtype=np.float32)
    exp_all[a:row + 1] = _from(p, state, a, row + 1, resync=True)[:, k]
    if row < a:  # the first row: nothing before it to start a window from
        exp_all[:row + 1] = p.run(0, row + 1)[0][:, k]
    got = view.f32(f.column)
    div = rd._divergence(view, p, f, exp_all, got, row)
    replayed = _from(p, state, a, b, resync=False)[:, k]
    window = pd.DataFrame({"step": view.step[a:b], "logged": got[a:b], "replayed": replayed})
    parted = ~((window["logged"] == window["replayed"]) | (window["logged"].isna() & window["replayed"].isna()))
    split = int(window["step"][parted].iloc[0]) if parted.any() else None
    filled = (f"{f.text}; with {rd._inputs_text(div)}: expected {rd._fmt(div['expected'])}, "
              f"logged {rd._fmt(div['logged'])}")
    before = row_dict(view.frame, row - 1) if row > 0 else {}
    return Provenance(check_id if check_id.startswith("rederive.") else f.check_id, f.column, int(step), f.text,
                      filled, div["expected"], div["logged"], {"t-1": before, "t": row_dict(view.frame, row)},
                      window, split)


__all__ = ["Provenance", "provenance", "HALF_WINDOW"]
