"""Building blocks of a module's invariants.

Module checks return the one result type of every check
(:class:`regime_dash.analysis.invariants.CheckResult`) and take the shared
:class:`~regime_dash.analysis.invariants.CheckOptions` (the ulp tolerance included).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from regime_dash.analysis.invariants import MAX_STEPS, ULPS, CheckResult


def check_result(check_id: str, bad: np.ndarray, steps: np.ndarray, detail: str,
                 column: str | None = None) -> CheckResult:
    """A ``pass``/``fail`` result: ``bad`` marks the violating rows, ``steps`` their step numbers."""
    bad = np.asarray(bad, dtype=bool)
    where = np.asarray(steps)[bad]
    return CheckResult(check_id, "fail" if bad.any() else "pass", int(bad.sum()),
                       int(where[0]) if len(where) else None, [int(s) for s in where[:MAX_STEPS]], detail,
                       column=column)


def check_skip(check_id: str, why: str, missing: Sequence[str] = ()) -> CheckResult:
    """A ``skip`` result saying why."""
    return CheckResult(check_id, "skip", 0, None, [], why, list(missing))


def missing_columns(frame: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    return [c for c in columns if c not in frame.columns]


def skip_if_missing(check_id: str, frame: pd.DataFrame, *columns: str) -> CheckResult | None:
    """A ``skip`` result naming the columns ``frame`` lacks, or None when it has them all."""
    miss = missing_columns(frame, columns)
    return check_skip(check_id, f"missing column(s) {miss}", miss) if miss else None


class Checks(list):
    """The results of one frame's checks; :meth:`need` records a skip for missing columns."""

    def __init__(self, frame: pd.DataFrame):
        super().__init__()
        self.frame = frame

    def need(self, check_id: str, *columns: str) -> bool:
        """True when ``frame`` has ``columns``; otherwise appends the skip and returns False."""
        skip = skip_if_missing(check_id, self.frame, *columns)
        if skip is not None:
            self.append(skip)
        return skip is None


def f32(frame: pd.DataFrame, column: str) -> np.ndarray:
    """A frame column as float32 (the ISV's type)."""
    return frame[column].to_numpy(dtype=np.float32)



def close_f32(actual: np.ndarray, expected: np.ndarray, ulps: float = ULPS) -> np.ndarray:
    """Elementwise: within ``ulps`` float32 ulps of ``expected`` (scaled by max(|expected|, 1))."""
    scale = np.maximum(np.abs(expected), np.float32(1.0))
    return np.abs(actual - expected) <= np.float32(ulps) * np.float32(np.finfo(np.float32).eps) * scale



__all__ = ["Checks", "check_result", "check_skip", "close_f32", "f32", "missing_columns", "skip_if_missing"]
