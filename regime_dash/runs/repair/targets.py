"""What a sweep row predicts of a failure: the summary metric that decides it, and the value it must reach.

A sweep keeps no trajectory, only the summary metrics of :mod:`regime_dash.engine.summary`,
so the search ranks candidates by these predictions and only a full replay and its
verdict (:mod:`regime_dash.runs.repair.regime`) calls a candidate passing.

* ``kelly_trap`` (success criterion 1) fails for an all-flat stretch longer than the
  trap limit in which the timeout flag never fires; each failing trap needs a timeout
  inside it, so the prediction is ``timeouts >= the failing traps``.
* ``timeout_unreachable`` fails where a dead zone cycles past ``max_duration`` and its
  timeout cannot fire; the prediction is ``timeouts >= the failing episodes``.

A failure with no entry here has no sweep predictor: the search then judges every
candidate by its full replay's verdict instead (slower; each candidate is then verified).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from regime_dash.runs.repair.failures import CONFIG, Failure

#: failure id -> the summary metric whose value at least the failure's count predicts it passes.
PREDICTORS: dict[str, str] = {
    "kelly_trap": "timeouts",
    "timeout_unreachable": "timeouts",
}


@dataclass(frozen=True)
class Target:
    """One failure's prediction from a sweep row: ``metric >= need``.

    :meth:`shortfall` is how far a row falls short, as a fraction of ``need``: 0 when
    the row predicts a pass, 1 when the metric is 0.
    """

    failure: str
    metric: str
    need: float

    def shortfall(self, row: Mapping[str, Any]) -> float:
        value = float(row[self.metric])
        return max(0.0, self.need - value) / self.need if self.need > 0 else 0.0

    def text(self) -> str:
        return f"{self.failure}: {self.metric} >= {self.need:g}"

    def to_dict(self) -> dict[str, Any]:
        return {"failure": self.failure, "metric": self.metric, "need": self.need}


def targets_of(failures: Sequence[Failure]) -> tuple[list[Target], list[str]]:
    """``(the sweep targets, the ids of config failures no sweep metric predicts)`` of ``failures``."""
    targets, unpredicted = [], []
    for f in failures:
        if f.cause != CONFIG:
            continue
        if f.id in PREDICTORS:
            targets.append(Target(f.id, PREDICTORS[f.id], float(max(1, f.count))))
        else:
            unpredicted.append(f.id)
    return targets, unpredicted


def shortfall(targets: Sequence[Target], row: Mapping[str, Any]) -> float:
    """The sum of every target's shortfall on ``row`` (0: the row predicts every target passes)."""
    return float(sum(t.shortfall(row) for t in targets))


__all__ = ["PREDICTORS", "Target", "shortfall", "targets_of"]
