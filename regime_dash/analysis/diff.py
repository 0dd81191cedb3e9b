"""Run diff: are two runs the same, and if not, where do they first part?

This is the spec's F3 check ("diff diag.jsonl — must be byte-identical for a
fixed seed") made useful when it fails: rows are matched by ``step``, each shared
column is compared value by value, and the report gives the first differing
step overall and, per field, the number of differing rows, the first differing
step and the max |Δ|.

Equality is exact: two floats are equal when they are the same number (both NaN
counts as equal, as it prints the same). A float32 column against a float64 one
compares the values, not the dtypes, so a run re-read from JSON matches its
Parquet twin; so do booleans against 0/1 and numbers stored as text against
numbers. Internal columns (:data:`INTERNAL_COLUMNS`, such as the store's
``_line``) are not compared: they say where a row came from, not what it holds.
:func:`field_deltas` gives A − B of each numeric field at the shared steps, by the same rule.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from regime_dash.errors import ValidationError
from regime_dash.text import terminal_safe

#: Columns the store adds that are not run data (``_line``: the row's source line number).
INTERNAL_COLUMNS = frozenset({"_line"})


@dataclass(frozen=True)
class FieldDiff:
    """How one column differs: ``rows`` differing, ``first_step``, ``max_abs`` (None if not numeric)."""

    column: str
    rows: int
    first_step: int
    max_abs: float | None

    def to_dict(self) -> dict:
        # a NaN against a number has no finite |Δ|; JSON gets null for it
        finite = self.max_abs is not None and np.isfinite(self.max_abs)
        return {"column": self.column, "rows": self.rows, "first_step": self.first_step,
                "max_abs": self.max_abs if finite else None}


@dataclass(frozen=True)
class RunDiff:
    """The result of :func:`diff_runs`.

    Attributes
    ----------
    identical
        Same steps, same columns, every value equal.
    first_step
        First step at which the runs differ (a value, or a step only one run has).
    fields
        Differing columns, in order of their first differing step.
    only_a, only_b
        Columns present in one run only.
    steps_only_a, steps_only_b
        Number of steps present in one run only; ``first_step_only_a/b`` the first.
    rows_compared
        Steps both runs have.
    """

    identical: bool
    first_step: int | None
    fields: list[FieldDiff]
    only_a: list[str]
    only_b: list[str]
    steps_only_a: int
    steps_only_b: int
    first_step_only_a: int | None
    first_step_only_b: int | None
    rows_compared: int
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"identical": self.identical, "first_step": self.first_step,
                "fields": [f.to_dict() for f in self.fields], "only_a": self.only_a, "only_b": self.only_b,
                "steps_only_a": self.steps_only_a, "steps_only_b": self.steps_only_b,
                "first_step_only_a": self.first_step_only_a, "first_step_only_b": self.first_step_only_b,
                "rows_compared": self.rows_compared, "notes": list(self.notes)}

    def lines(self) -> list[str]:
        """A human report."""
        if self.identical:
            return [f"identical: {self.rows_compared} steps, every field equal"]
        where = f"first at step {self.first_step}" if self.first_step is not None else "in their columns"
        out = [f"differ: {where} ({self.rows_compared} shared steps compared)"]
        for f in self.fields:
            mx = "-" if f.max_abs is None else f"{f.max_abs:.9g}"
            out.append(f"  {terminal_safe(f.column)}: {f.rows} row(s) differ, first at step {f.first_step}, max |d| {mx}")
        if self.only_a:
            out.append(f"  only in A: {', '.join(map(terminal_safe, self.only_a))}")
        if self.only_b:
            out.append(f"  only in B: {', '.join(map(terminal_safe, self.only_b))}")
        if self.steps_only_a:
            out.append(f"  {self.steps_only_a} step(s) only in A, first {self.first_step_only_a}")
        if self.steps_only_b:
            out.append(f"  {self.steps_only_b} step(s) only in B, first {self.first_step_only_b}")
        out += [f"  note: {n}" for n in self.notes]
        return out


def steps_of(frame: pd.DataFrame, name: str) -> np.ndarray:
    """``frame``'s ``step`` column as int64; :class:`ValidationError` naming run ``name`` when it has
    none, holds a non-number or repeats a step (rows are matched on it)."""
    if "step" not in frame.columns:
        raise ValidationError(f"run {name} has no 'step' column to match rows on", field="step", value=name)
    s = pd.to_numeric(frame["step"], errors="coerce").to_numpy(dtype=np.float64)
    if np.isnan(s).any():
        raise ValidationError(f"run {name}: step holds a non-number at row {int(np.flatnonzero(np.isnan(s))[0])}",
                              field="step", value=name)
    s = s.astype(np.int64)
    if len(np.unique(s)) != len(s):
        dup = int(pd.Series(s)[pd.Series(s).duplicated()].iloc[0])
        raise ValidationError(f"run {name}: step {dup} appears more than once", field="step", value=dup)
    return s


def _numeric(a: pd.Series) -> np.ndarray | None:
    if pd.api.types.is_bool_dtype(a.dtype) or not pd.api.types.is_numeric_dtype(a.dtype):
        return None
    return a.to_numpy(dtype=np.float64, na_value=np.nan)


def _as_numbers(a: pd.Series) -> np.ndarray | None:
    """``a``'s values as float64 when every value is a number, a boolean or a number written as text."""
    if pd.api.types.is_bool_dtype(a.dtype):
        return a.astype("float64").to_numpy(na_value=np.nan) if a.hasnans else a.to_numpy(dtype=np.float64)
    if a.dtype != object and not pd.api.types.is_string_dtype(a.dtype):
        return None
    values = a.map(lambda v: float(v) if isinstance(v, (bool, np.bool_)) else v)
    numbers = pd.to_numeric(values, errors="coerce")
    if (numbers.isna() & values.notna()).any():
        return None
    return numbers.to_numpy(dtype=np.float64, na_value=np.nan)


def _pair_numbers(x: pd.Series, y: pd.Series) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Both columns as float64 where they compare as numbers (one side may be booleans or numbers
    written as text when the other holds numbers); ``None`` for a side that does not."""
    xn, yn = _numeric(x), _numeric(y)
    if (xn is None) != (yn is None):  # one side numbers, the other booleans or text: compare values
        xn = xn if xn is not None else _as_numbers(x)
        yn = yn if yn is not None else _as_numbers(y)
    return xn, yn


def _differ(xn: np.ndarray, yn: np.ndarray) -> np.ndarray:
    """Where two value arrays differ: not the same number, both NaN counting as the same."""
    return ~((xn == yn) | (np.isnan(xn) & np.isnan(yn)))


def diff_runs(a: pd.DataFrame, b: pd.DataFrame, columns: list[str] | None = None) -> RunDiff:
    """Compare two runs step by step.

    Parameters
    ----------
    a, b
        Frames with a ``step`` column (canonical names, see :mod:`regime_dash.diag.aliases`).
    columns
        Columns to compare; all shared columns when ``None``.

    Raises
    ------
    ValidationError
        When a run has no ``step``, repeats a step, or ``columns`` names a
        column neither run has.
    """
    sa, sb = steps_of(a, "A"), steps_of(b, "B")
    cols_a = [c for c in a.columns if c != "step" and c not in INTERNAL_COLUMNS]
    cols_b = [c for c in b.columns if c != "step" and c not in INTERNAL_COLUMNS]
    if columns is not None:
        unknown = [c for c in columns if c not in a.columns and c not in b.columns]
        if unknown:
            raise ValidationError(f"column(s) {unknown} in neither run", field="columns", value=unknown)
        cols_a = [c for c in cols_a if c in columns]
        cols_b = [c for c in cols_b if c in columns]
    only_a = [c for c in cols_a if c not in set(cols_b)]
    only_b = [c for c in cols_b if c not in set(cols_a)]
    shared = [c for c in cols_a if c in set(cols_b)]

    common, ia, ib = np.intersect1d(sa, sb, assume_unique=True, return_indices=True)
    a_only = np.setdiff1d(sa, sb, assume_unique=True)
    b_only = np.setdiff1d(sb, sa, assume_unique=True)
    fields: list[FieldDiff] = []
    notes: list[str] = []
    for c in shared:
        x, y = a[c].iloc[ia], b[c].iloc[ib]
        xn, yn = _pair_numbers(x, y)
        if xn is not None and yn is not None:
            differ = _differ(xn, yn)
            d = np.abs(xn - yn)
            d = d[differ & np.isfinite(d)]
            max_abs = float(d.max()) if len(d) else (float("inf") if differ.any() else 0.0)
        else:
            xo, yo = x.to_numpy(dtype=object), y.to_numpy(dtype=object)
            differ = ~np.array([(p == q) or (pd.isna(p) and pd.isna(q)) if not isinstance(p, (list, dict))
                                else p == q for p, q in zip(xo, yo)], dtype=bool)
            max_abs = None
        if differ.any():
            fields.append(FieldDiff(c, int(differ.sum()), int(common[np.flatnonzero(differ)[0]]), max_abs))
        if x.dtype != y.dtype and xn is not None and yn is not None:
            notes.append(f"{c}: dtypes {x.dtype} and {y.dtype} (compared by value)")
    fields.sort(key=lambda f: (f.first_step, f.column))
    firsts = [f.first_step for f in fields]
    if len(a_only):
        firsts.append(int(a_only[0]))
    if len(b_only):
        firsts.append(int(b_only[0]))
    identical = not fields and not only_a and not only_b and not len(a_only) and not len(b_only)
    return RunDiff(identical, min(firsts) if firsts else None, fields, only_a, only_b,
                   int(len(a_only)), int(len(b_only)),
                   int(a_only[0]) if len(a_only) else None, int(b_only[0]) if len(b_only) else None,
                   int(len(common)), notes)


@dataclass(frozen=True)
class FieldDelta:
    """One numeric column of two runs, A − B at the steps both have.

    ``steps`` the shared steps (sorted), ``delta`` A − B there (float64: 0 where both are NaN,
    NaN where one is, ±Inf or NaN as the arithmetic gives for infinities), ``differ`` where the
    values are not the same (:func:`diff_runs`' rule), ``first_step`` the first of those (None
    when none differs).
    """

    column: str
    steps: np.ndarray
    delta: np.ndarray
    differ: np.ndarray
    first_step: int | None

    @property
    def rows(self) -> int:
        return int(self.differ.sum())


def field_deltas(a: pd.DataFrame, b: pd.DataFrame, columns: list[str] | None = None) -> dict[str, FieldDelta]:
    """A − B of each numeric column both runs have (or of ``columns``), matched by step.

    Columns that hold text in either run have no difference and are left out; booleans count as
    0/1. Each field's ``first_step`` is the one :func:`diff_runs` reports for it.

    Raises
    ------
    ValidationError
        As :func:`diff_runs`: a run without ``step``, a repeated step, a column in neither run.
    """
    sa, sb = steps_of(a, "A"), steps_of(b, "B")
    if columns is not None:
        unknown = [c for c in columns if c not in a.columns and c not in b.columns]
        if unknown:
            raise ValidationError(f"column(s) {unknown} in neither run", field="columns", value=unknown)
    wanted = [c for c in (a.columns if columns is None else columns)
              if c != "step" and c not in INTERNAL_COLUMNS and c in a.columns and c in b.columns]
    common, ia, ib = np.intersect1d(sa, sb, assume_unique=True, return_indices=True)
    out: dict[str, FieldDelta] = {}
    for c in wanted:
        xn, yn = _pair_numbers(a[c].iloc[ia], b[c].iloc[ib])
        if xn is None or yn is None:
            continue
        differ = _differ(xn, yn)
        with np.errstate(invalid="ignore"):
            delta = np.where(differ, xn - yn, 0.0)
        first = int(common[np.flatnonzero(differ)[0]]) if differ.any() else None
        out[c] = FieldDelta(c, common, delta, differ, first)
    return out
