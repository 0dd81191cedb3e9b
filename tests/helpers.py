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


def planted_diag(path, steps: int = 1000, step: int = 700, factor: float = 1.5):
    """A correct replay of ``tail_shock`` (its inputs logged) with one logged value made wrong: PopArt's
    mean at ``step`` times ``factor``. Only ``rederive.popart_mean`` sees it (no bound covers the mean).

    Returns ``(path of the diag.jsonl written, the frame before the change)``.
    """
    from regime_dash.diag import catalogue as diag
    from regime_dash.sources import scenarios

    frame = rd.replay(scenarios.make("tail_shock", steps=steps, accounts=64), rd.RegimeConfig(),
                      engine="reference", log_inputs=True)
    bad = frame.copy()
    row = int(np.flatnonzero(bad["step"].to_numpy() == step)[0])
    bad.loc[bad.index[row], diag.POPART_MEAN] = float(np.float32(bad[diag.POPART_MEAN].iloc[row]) * np.float32(factor))
    return diag.write_jsonl(bad, path), frame
