"""SP18 ISV slots: D-leg [483..493) and B-leg [493..505) (design DD6, B-DD13).

The design names 483/484 (the Hold reward caps), the B-leg table names
493..504, and says the D-leg Wiener-α Welford accumulators live in [487..493).
The names of 485..492 are a model: 485 the α in use, 486 the unclamped EMA of
the cap observation, 487..492 the Welford accumulators, mirroring the B-leg's
TDB_* layout. B-leg slots other than 493..495 are registered for the layout but
not produced by this replay.
"""
from __future__ import annotations

from regime_dash.slots import Slot
from regime_dash.slots import slot as _s

CAP_KERNEL = "sp18_hold_reward_cap_update"
OPP_KERNEL = "compute_sp18_hold_opportunity_cost (experience_kernels.cu Hold sites)"
TD_PRODUCER = "B-leg diagnostics producer (model; replay computes from the TD(λ) pass)"
HEALTH = "HEALTH_DIAG"


SLOTS: tuple[Slot, ...] = (
    _s("HOLD_REWARD_POS_CAP_INDEX", 483, "signal", 5.0, "re-bootstrap",
       "Hold reward positive cap = clamp(EMA(p99|step_ret| × 1.5)); sentinel 5.0", CAP_KERNEL,
       (OPP_KERNEL, HEALTH)),
    _s("HOLD_REWARD_NEG_CAP_INDEX", 484, "signal", -10.0, "re-bootstrap",
       "Hold reward negative cap = −2 × POS (DD5 mirrored asymmetry); sentinel −10", CAP_KERNEL,
       (OPP_KERNEL, HEALTH)),
    _s("HOLD_REWARD_CAP_ALPHA_INDEX", 485, "state", 0.0, "re-bootstrap",
       "Wiener α of the cap EMA in use (model name)", CAP_KERNEL, (HEALTH,)),
    _s("HOLD_REWARD_CAP_EMA_INDEX", 486, "state", 0.0, "re-bootstrap",
       "EMA of p99|step_ret| × 1.5 before the bounds (model name)", CAP_KERNEL, (CAP_KERNEL,)),
    _s("HRC_OBS_MEAN_INDEX", 487, "state", 0.0, "re-bootstrap", "Welford mean of the cap observations",
       CAP_KERNEL, (CAP_KERNEL,)),
    _s("HRC_OBS_M2_INDEX", 488, "state", 0.0, "re-bootstrap", "Welford M2 of the cap observations",
       CAP_KERNEL, (CAP_KERNEL,)),
    _s("HRC_DIFF_MEAN_INDEX", 489, "state", 0.0, "re-bootstrap", "Welford mean of successive differences",
       CAP_KERNEL, (CAP_KERNEL,)),
    _s("HRC_DIFF_M2_INDEX", 490, "state", 0.0, "re-bootstrap", "Welford M2 of successive differences",
       CAP_KERNEL, (CAP_KERNEL,)),
    _s("HRC_PREV_OBS_INDEX", 491, "state", 0.0, "re-bootstrap", "last cap observation (p99 × 1.5)",
       CAP_KERNEL, (CAP_KERNEL,)),
    _s("HRC_SAMPLE_COUNT_INDEX", 492, "state", 0.0, "re-bootstrap",
       "observations so far; 0 is Pearl A's first-observation sentinel", CAP_KERNEL, (CAP_KERNEL,)),
    _s("TD_ERROR_MAG_EMA_INDEX", 493, "signal", 0.0, "re-bootstrap", "avg |TD error| post-fix", TD_PRODUCER,
       (HEALTH,)),
    _s("Q_NEXT_TARGET_P99_INDEX", 494, "signal", 0.0, "re-bootstrap", "p99 of the target-Q bootstrap",
       TD_PRODUCER, (HEALTH,)),
    _s("Q_NEXT_MINUS_REWARD_P99_INDEX", 495, "signal", 0.0, "re-bootstrap",
       "p99 |q_next_target − reward| (should be O(1))", TD_PRODUCER, (HEALTH,)),
    _s("V_SHARE_TREND_DIAG_INDEX", 496, "signal", 0.0, "re-bootstrap",
       "slope of V_SHARE over the last 4 epochs (not modelled here)"),
    _s("POPART_RESET_FLAG_INDEX", 497, "config", 0.0, "keep",
       "1.0 in the first SP18 epoch: gates the PopArt EMA reset (B-DD11; not modelled here)"),
    _s("TDB_TARGET_MEAN_INDEX", 498, "state", 0.0, "re-bootstrap", "Welford of q_next_target (not modelled)"),
    _s("TDB_TARGET_M2_INDEX", 499, "state", 0.0, "re-bootstrap", "Welford of q_next_target (not modelled)"),
    _s("TDB_DIFF_MEAN_INDEX", 500, "state", 0.0, "re-bootstrap", "Welford of differences (not modelled)"),
    _s("TDB_DIFF_M2_INDEX", 501, "state", 0.0, "re-bootstrap", "Welford of differences (not modelled)"),
    _s("TDB_PREV_TARGET_INDEX", 502, "state", 0.0, "re-bootstrap", "previous q_next_target (not modelled)"),
    _s("TDB_SAMPLE_COUNT_INDEX", 503, "state", 0.0, "re-bootstrap", "sample count (not modelled)"),
    _s("SP18_RESERVED_INDEX", 504, "state", 0.0, "keep", "reserved for a B-leg follow-up"),
)

IDX: dict[str, int] = {s.name: s.index for s in SLOTS}
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
    out = [f"-D{s.name}={s.index}" for s in SLOTS]
    out += [f"-DSP18_DIR_HOLD={DIR_HOLD}", f"-DSP18_N_ACTIONS={N_ACTIONS}",
            f"-DSP18_DIR_END={BRANCHES[0][1]}", f"-DSP18_MAG_END={BRANCHES[1][1]}",
            f"-DSP18_ORD_END={BRANCHES[2][1]}", f"-DSP18_POS_FALLBACK={POS_FALLBACK!r}f",
            f"-DSP18_NEG_FALLBACK={NEG_FALLBACK!r}f"]
    return out
