"""What every replay starts from: the initial ISV buffer, the bootstrap row of boundary resets,
the slot layout and the snapshot's slot indices (:class:`StartState`, one per config)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from regime_dash.core.config import RegimeConfig
from regime_dash.core.slots import SlotLayout
from regime_dash.diag import catalogue as diag
from regime_dash.errors import ValidationError


def initial_isv(config: RegimeConfig, isv: Mapping[str, float] | None,
                layout: SlotLayout) -> tuple[np.ndarray, np.ndarray]:
    """(isv0, boot): the buffer a replay starts from, and the one boundaries re-bootstrap from.

    ``boot`` is the spec's bootstrap with ``config`` applied; ``isv0`` adds the
    caller's ``isv`` overrides on top, which a boundary does not bring back.
    """
    overrides = dict(isv or {})
    for name, value in overrides.items():
        if name not in layout:
            raise ValidationError(f"isv override names unknown slot {name!r}", field=name, value=value)
        if not isinstance(value, (int, float, np.floating, np.integer)) or not math.isfinite(float(value)):
            raise ValidationError(f"isv override {name}={value!r} is not a finite number",
                                  field=name, value=value)
    boot = layout.bootstrap_vector(config.to_isv())
    isv0 = boot.copy()
    for name, value in overrides.items():
        isv0[layout.index(name)] = np.float32(value)
    return isv0, boot


def snapshot_indices(layout: SlotLayout) -> np.ndarray:
    """int32: the layout's indices of the diag snapshot slots (:data:`regime_dash.diag.catalogue.SNAPSHOT_SLOTS`)."""
    return np.array([layout.index(n) for n in diag.SNAPSHOT_SLOTS], dtype=np.int32)


@dataclass(frozen=True)
class StartState:
    """The already-checked inputs every backend gets beside the stream: ``isv0`` (float32 [n_isv], the
    buffer the replay starts from), ``boot`` (the row boundary resets re-bootstrap from), the slot
    ``layout`` and ``snap_idx`` (:func:`snapshot_indices`)."""

    isv0: np.ndarray
    boot: np.ndarray
    layout: SlotLayout
    snap_idx: np.ndarray

    @classmethod
    def of(cls, config: RegimeConfig, isv: Mapping[str, float] | None, layout: SlotLayout) -> "StartState":
        """The start of a replay of ``config`` with the ``isv`` overrides on ``layout`` (validated)."""
        isv0, boot = initial_isv(config, isv, layout)
        return cls(isv0, boot, layout, snapshot_indices(layout))


__all__ = ["StartState", "initial_isv", "snapshot_indices"]
