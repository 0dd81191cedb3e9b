"""Sp14Stream: the per-step driver signals the α-grad gate reads from the ISV bus."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from regime_dash.modules.base import ModuleStream
from regime_dash.core.streams import ArraySpec


@dataclass(frozen=True, eq=False)
class Sp14Stream(ModuleStream):
    """Inputs of an SP14 replay (T steps).

    ``aux_dir_acc`` (slot 373), ``q_disagreement`` (383) and ``var_q`` (389) are
    written into the ISV before each step, as their producers do in the
    trainer. ``var_aux`` (388) is optional: absent, the slot stays at its
    sentinel 0 (the KNOWN LIMITATION). ``warmup_gate`` is optional: absent, the
    config's warmup model computes it. ``boundary`` marks fold resets.
    """

    SCHEMA = {
        "aux_dir_acc": ArraySpec(np.float32, 1, "aux_dir_acc fast EMA (slot 373)", lo=0.0, hi=1.0),
        "q_disagreement": ArraySpec(np.float32, 1, "Q disagreement fast EMA (slot 383)", lo=0.0, hi=1.0),
        "var_q": ArraySpec(np.float32, 1, "Q disagreement variance EMA (slot 389)", default=0.0, lo=0.0),
        "var_aux": ArraySpec(np.float32, 1, "aux_dir_acc variance EMA (slot 388): what-if producer",
                             optional=True, lo=0.0),
        "warmup_gate": ArraySpec(np.float32, 1, "host warmup gate in [0, 1]", optional=True, lo=0.0, hi=1.0),
        "boundary": ArraySpec(np.bool_, 1, "fold reset before this step", default=False),
        "step": ArraySpec(np.int64, 1, "trainer step"),
    }

    aux_dir_acc: np.ndarray
    q_disagreement: np.ndarray
    var_q: np.ndarray
    var_aux: np.ndarray | None
    warmup_gate: np.ndarray | None
    boundary: np.ndarray
    step: np.ndarray

