"""Small stream builders shared by the spec tests."""
from __future__ import annotations

import numpy as np

import regime_dash as rd


def stream(steps: int = 1, accounts: int = 4, **fields) -> rd.Stream:
    """A stream of ``steps`` × ``accounts``: zero rewards, all flat, unless ``fields`` say otherwise.

    Scalars given for a per-step field are broadcast over the steps.
    """
    rewards = fields.pop("rewards", np.zeros((steps, accounts), np.float32))
    lots = fields.pop("lots", np.zeros((steps, accounts), np.int32))
    kw = {}
    for name, value in fields.items():
        arr = np.asarray(value)
        kw[name] = np.full(steps, value) if arr.ndim == 0 and name != "v_pred" else arr
    return rd.Stream.make(rewards=rewards, lots=lots, **kw)


def col(frame, name: str) -> np.ndarray:
    """A diag column by its short name under risk_stack (e.g. 'regime.dead_zone.flag')."""
    return frame[f"risk_stack.{name}"].to_numpy()


def by_id(results) -> dict:
    """Check results keyed by their id."""
    return {r.id: r for r in results}
