"""SP14 ISV slots [383..396) and the SP13 input slot 373, as the commit note and registry give them.

The table is ``slots.csv`` beside this file; here are the names the twin and the replay use.

Reset categories map onto the registry's policies: FoldReset with a sentinel is
``re-bootstrap`` (the bootstrap is the sentinel), "NOT reset" is ``keep``.
Slot 388 has consumers but no producer: the note's KNOWN LIMITATION, which
:func:`regime_dash.modules.orphan_slots` flags.
"""
from __future__ import annotations

from regime_dash.core.slots import slot_defines, table_beside

SLOTS, IDX = table_beside(__file__)
AUX = IDX["AUX_DIR_ACC_SHORT_EMA_INDEX"]
Q_DIS = IDX["Q_DISAGREEMENT_SHORT_EMA_INDEX"]
K_AUX = IDX["K_AUX_ADAPTIVE_INDEX"]
K_Q = IDX["K_Q_ADAPTIVE_INDEX"]
BETA = IDX["BETA_RATE_LIMITER_ADAPTIVE_INDEX"]
VAR_AUX = IDX["AUX_DIR_ACC_VARIANCE_EMA_INDEX"]
VAR_Q = IDX["Q_DISAGREEMENT_VARIANCE_EMA_INDEX"]
VAR_ALPHA = IDX["ALPHA_GRAD_RAW_VARIANCE_EMA_INDEX"]
GATE1 = IDX["GATE1_OPEN_STATE_INDEX"]
RAW = IDX["ALPHA_GRAD_RAW_INDEX"]
SMOOTHED = IDX["ALPHA_GRAD_SMOOTHED_INDEX"]
#: The 7 outputs of step 8, in the note's order.
OUTPUTS = (K_AUX, K_Q, BETA, VAR_ALPHA, GATE1, RAW, SMOOTHED)


def defines() -> list[str]:
    """``-D`` options of ``kernels/sp14_alpha_grad_gate.cu``: one per slot."""
    return slot_defines(SLOTS)
