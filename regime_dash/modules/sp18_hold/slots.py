"""SP18 ISV slots: D-leg [483..493) and B-leg [493..505) (design DD6, B-DD13).

The table is ``slots.csv`` beside this file; here are the names and the action layout the kernels use.

The design names 483/484 (the Hold reward caps), the B-leg table names
493..504, and says the D-leg Wiener-α Welford accumulators live in [487..493).
The names of 485..492 are a model: 485 the α in use, 486 the unclamped EMA of
the cap observation, 487..492 the Welford accumulators, mirroring the B-leg's
TDB_* layout. B-leg slots other than 493..495 are registered for the layout but
not produced by this replay.
"""
from __future__ import annotations

from regime_dash.core.slots import slot_defines, table_beside

SLOTS, IDX = table_beside(__file__)
POS = IDX["HOLD_REWARD_POS_CAP_INDEX"]
NEG = IDX["HOLD_REWARD_NEG_CAP_INDEX"]
ALPHA = IDX["HOLD_REWARD_CAP_ALPHA_INDEX"]
EMA = IDX["HOLD_REWARD_CAP_EMA_INDEX"]
#: The Pearls A+D state in slot order [ema, alpha, mean, m2, dmean, dm2, prev, count] (f32.PEARLS_AD_STATE).
PEARLS_AD = (EMA, ALPHA, IDX["HRC_OBS_MEAN_INDEX"], IDX["HRC_OBS_M2_INDEX"], IDX["HRC_DIFF_MEAN_INDEX"],
             IDX["HRC_DIFF_M2_INDEX"], IDX["HRC_PREV_OBS_INDEX"], IDX["HRC_SAMPLE_COUNT_INDEX"])

#: Direction branch order Short, Hold, Long, Flat (the dir Q-mean slots' order; a model of DIR_*).
DIR_SHORT, DIR_HOLD, DIR_LONG, DIR_FLAT = 0, 1, 2, 3
DIRECTIONS = ("short", "hold", "long", "flat")
#: Factored action branches of the 13-wide Q table (T8): dir, mag, ord, urg.
BRANCHES: tuple[tuple[int, int], ...] = ((0, 4), (4, 7), (7, 10), (10, 13))
N_ACTIONS = 13
#: Sentinel fallbacks of the caps (design: isv[483] or 5.0, isv[484] or −10.0).
POS_FALLBACK = 5.0
NEG_FALLBACK = -10.0


def defines() -> list[str]:
    """``-D`` options of the SP18 kernels: the slot indices and the action layout."""
    out = slot_defines(SLOTS)
    out += [f"-DSP18_DIR_HOLD={DIR_HOLD}", f"-DSP18_N_ACTIONS={N_ACTIONS}",
            f"-DSP18_DIR_END={BRANCHES[0][1]}", f"-DSP18_MAG_END={BRANCHES[1][1]}",
            f"-DSP18_ORD_END={BRANCHES[2][1]}", f"-DSP18_POS_FALLBACK={POS_FALLBACK!r}f",
            f"-DSP18_NEG_FALLBACK={NEG_FALLBACK!r}f"]
    return out
