"""SP14 α-grad gate (Earned Gradient Flow, commit note B.4) as a replayable controller module.

Single-thread state machine: adaptive k_aux/k_q (floor K_MIN), a Schmitt-trigger
Gate 1 (target ± 0.03), two clipped sigmoids, α_raw = gate1 × gate2 × warmup, a
variance EMA of α_raw driving β in [0.5, 0.95], rate-limited smoothing, 7 ISV
outputs at slots 385..387 and 390..393. Kernel: ``kernels/sp14_alpha_grad_gate.cu``;
twin: :mod:`.twin`. Slot 388 has no producer in the trainer (the note's KNOWN
LIMITATION); the ``var_aux_producer`` switch replays the missing producer as a what-if.
:func:`coverage` says how each logged field of a frame is checked.
"""
from __future__ import annotations

from regime_dash.modules.base import ControllerModule
from regime_dash.modules.sp14_alpha_grad_gate.config import Sp14Config
from regime_dash.modules.sp14_alpha_grad_gate.rederive import coverage
from regime_dash.modules.sp14_alpha_grad_gate.stream import Sp14Stream

MODULE = ControllerModule.of_package(__name__, title="SP14 α-grad gate", doc=__doc__, stream_type=Sp14Stream,
                                     config_type=Sp14Config)

__all__ = ["MODULE", "Sp14Config", "Sp14Stream", "coverage"]
