"""A module replay frame: its meta columns (``step``, ``fold``, ``phase``) and the config constants it carries."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd


def frame_of(step: np.ndarray, boundary: np.ndarray | None, columns: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """A module replay frame: ``step``, ``fold``, ``phase`` as in a core frame, then the given columns.

    ``fold`` and ``phase`` mean what they mean in the diag
    (:func:`regime_dash.diag.catalogue.fold_and_phase`): fold k is a train segment and
    the eval segment after it.
    """
    from regime_dash.diag.catalogue import fold_and_phase

    step = np.asarray(step, dtype=np.int64)
    fold, phase = fold_and_phase(np.zeros(len(step), dtype=bool) if boundary is None else boundary)
    cols = {"step": step, "fold": fold, "phase": phase}
    cols.update(columns)
    return pd.DataFrame(cols)



def fold_starts(frame: pd.DataFrame) -> np.ndarray:
    """True at the first row and wherever ``fold`` or ``phase`` changes (state was reset before that row)."""
    n = len(frame)
    starts = np.zeros(n, dtype=bool)
    if n:
        starts[0] = True
    for col in ("fold", "phase"):
        if col in frame.columns and n > 1:
            vals = frame[col].to_numpy()
            starts[1:] |= vals[1:] != vals[:-1]
    return starts


def config_value(frame: pd.DataFrame, name: str, default: float, prefix: str = "") -> float:
    """A config constant of the run behind ``frame``.

    In order: the column ``<prefix>config.<name>`` (replays write the constants
    their checks need as columns, so a saved diag file carries them), then
    ``frame.attrs['config']`` (a replay in memory), then ``default`` (the
    source's value, for a trainer's file that has neither).
    """
    col = f"{prefix}config.{name}"
    if col in frame.columns and len(frame):
        return float(frame[col].iloc[0])
    return float(frame.attrs.get("config", {}).get(name, default))


def config_columns(config: Any, names: Sequence[str], prefix: str, rows: int) -> dict[str, np.ndarray]:
    """Constant float32 columns ``<prefix>config.<name>`` holding config values (see :func:`config_value`)."""
    return {f"{prefix}config.{n}": np.full(rows, float(getattr(config, n)), dtype=np.float32) for n in names}


def frame_steps(frame: pd.DataFrame) -> np.ndarray:
    return frame["step"].to_numpy() if "step" in frame.columns else np.arange(len(frame))


__all__ = ["config_columns", "config_value", "fold_starts", "frame_of", "frame_steps"]
