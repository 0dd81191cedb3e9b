"""What a repair answers: its status in words, the run's failures and the ranked candidates.

Statuses (:data:`STATUSES`):

``passing``
    At least one candidate was replayed in full and its verdict has no failure.
``none_passes``
    No verified candidate passes: the result shows the closest (fewest failures, then
    nearest) and says how many configs of the domain were searched.
``config_cannot_help``
    A failure does not depend on config (a re-derivation or formula fault of the kernels
    or the logging, or a trainer's figure): it is named and nothing is searched.
``already_passes``
    The run (or the base config's replay) fails nothing: there is nothing to repair.
``not_reproduced``
    The replay of the given stream under the run's logged config does not fail as the
    stored run did: the stream may not be this run's input; nothing is searched.
``needs_stream``
    A stored run whose failures config may repair, but whose diag does not hold its input
    stream (the [T, b] rewards and lots a replay needs): ``--stream FILE`` is needed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import pandas as pd

from regime_dash.runs.repair.failures import Failure
from regime_dash.runs.sensitivity import format_value
from regime_dash.runs.repair.space import SearchSpace
from regime_dash.runs.repair.targets import Target

STATUSES = ("passing", "none_passes", "config_cannot_help", "already_passes", "not_reproduced", "needs_stream")
#: The exit status of ``repair`` for each status: 0 a passing config (or nothing to repair), 1 none found
#: or config cannot help, 2 input missing (``--stream``).
EXIT_CODES = {"passing": 0, "already_passes": 0, "none_passes": 1, "config_cannot_help": 1,
              "not_reproduced": 1, "needs_stream": 2}


@dataclass
class Candidate:
    """One candidate config and what is known of it.

    Attributes
    ----------
    config
        The config (every field).
    changes
        ``{field: (the run's value, the candidate's)}``.
    distance
        From the run's logged config (:mod:`regime_dash.runs.repair.space`).
    shortfall
        The search's prediction: 0 when its sweep row predicts every target passes.
    predicted
        The search's metrics of it (a sweep row, or a module's summary).
    verified
        True once it was replayed in full (on ``engine``) and judged by the verdict.
    failures
        The ids its verdict fails (empty when it passes).
    after
        The metrics that mattered, from its full replay.
    engine
        The engine its full replay ran on.
    """

    config: Any
    changes: dict[str, tuple[Any, Any]]
    distance: float
    shortfall: float
    predicted: Mapping[str, Any] = field(default_factory=dict)
    verified: bool = False
    failures: list[str] = field(default_factory=list)
    after: Mapping[str, Any] = field(default_factory=dict)
    engine: str = ""

    @property
    def passing(self) -> bool:
        """Verified, and its verdict fails nothing: the only candidates called passing."""
        return self.verified and not self.failures

    def changes_text(self) -> str:
        return ", ".join(f"{k} {_fmt(a)} → {_fmt(b)}" for k, (a, b) in self.changes.items()) or "(none)"

    def to_dict(self) -> dict[str, Any]:
        return {"passing": self.passing, "verified": self.verified, "engine": self.engine or None,
                "distance": self.distance, "changes": {k: [_plain(a), _plain(b)] for k, (a, b) in self.changes.items()},
                "predicted_pass": self.shortfall == 0.0, "shortfall": self.shortfall,
                "predicted": _plain(dict(self.predicted)), "failures": list(self.failures),
                "after": _plain(dict(self.after)), "config": _plain(self.config.as_dict())}


@dataclass
class RepairResult:
    """The answer of a repair (see the module docstring for ``status``).

    ``before`` is the metrics that mattered of the run's own config; each candidate's
    ``after`` the same metrics of its full replay. ``searched``: configs the search
    evaluated; ``screened_out``: ``{field: why it was not searched}``.
    """

    status: str
    message: str
    failures: list[Failure]
    candidates: list[Candidate] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    unpredicted: list[str] = field(default_factory=list)
    space: SearchSpace | None = None
    screened_out: dict[str, str] = field(default_factory=dict)
    before: Mapping[str, Any] = field(default_factory=dict)
    searched: int = 0
    rejected: int = 0
    sampler: str = ""
    seed: int | None = None
    engine: str = ""
    verify_engine: str = ""
    seconds: dict[str, float] = field(default_factory=dict)
    subject: str = "regime"

    @property
    def passing(self) -> list[Candidate]:
        return [c for c in self.candidates if c.passing]

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def table(self) -> pd.DataFrame:
        """One row per candidate, ranked: passing, distance, the changes, the metrics before → after."""
        keys = list(self.before)
        rows = []
        for rank, c in enumerate(self.candidates, 1):
            row = {"rank": rank, "passing": c.passing, "verified": c.verified, "distance": round(c.distance, 4),
                   "changes": c.changes_text(),
                   "fails": (", ".join(c.failures) or "-") if c.verified else "?"}
            for k in keys:
                row[k] = f"{_fmt(self.before[k])} → {_fmt(c.after[k])}" if k in c.after else \
                    f"{_fmt(self.before[k])} → ?"
            rows.append(row)
        return pd.DataFrame(rows, columns=["rank", "passing", "verified", "distance", "changes", "fails", *keys])

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "message": self.message, "subject": self.subject,
                "failures": [f.to_dict() for f in self.failures],
                "targets": [t.to_dict() for t in self.targets], "unpredicted": list(self.unpredicted),
                "space": None if self.space is None else self.space.to_dict(),
                "screened_out": dict(self.screened_out), "before": _plain(dict(self.before)),
                "candidates": [c.to_dict() for c in self.candidates], "searched": self.searched,
                "rejected": self.rejected, "sampler": self.sampler, "seed": self.seed, "engine": self.engine,
                "verify_engine": self.verify_engine, "seconds": dict(self.seconds)}


def _fmt(v: Any) -> str:
    """A value as the table writes it: a switch ``true``/``false``, a number ``%g`` (the sensitivity's form)."""
    return format_value(v) if isinstance(v, (bool, int, float)) else str(v)


def _plain(v: Any) -> Any:
    """``v`` in JSON's types (NumPy scalars as Python's; a non-finite float as its text)."""
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


__all__ = ["Candidate", "EXIT_CODES", "RepairResult", "STATUSES"]
