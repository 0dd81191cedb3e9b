"""SP18 checks on a frame with the ``sp18.*`` columns.

Per-row invariants (cap bounds, NEG = −2 × POS, the Hold reward inside its
caps and zero off Hold) and the design's run-level gates: the Hold reward
distribution width ("mean |r_hold_opp| > 0.5 × mean |r| of Long/Short"), B-DD9's
TD-error ratio in [0.5, 5.0], q_next_target p99 ≤ 50 and
0.1 < p99 |q_next_target − reward| < 100. A run-level gate that fails marks its
last row. Constants come from the ``sp18.config.*`` columns, ``frame.attrs['config']`` or the design's values.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from regime_dash.analysis.invariants import CheckOptions, CheckResult
from regime_dash.modules.base import Checks, check_result, check_skip, config_value, f32, frame_steps
from regime_dash.modules.sp18_hold import rederive
from regime_dash.modules.sp18_hold import slots as S
from regime_dash.modules.sp18_hold.replay import COL, P

CHECK_COLUMNS = (COL.hold_opp, COL.pos, COL.neg)
CHECK_IDS = ("sp18.cap_bounds", "sp18.cap_neg_ratio", "sp18.hold_reward_bounds", "sp18.hold_only_on_hold",
             "sp18.hold_width_match", "sp18.td_error_ratio", "sp18.q_next_target_p99",
             "sp18.q_next_minus_reward_p99", *rederive.CHECK_IDS)
#: B-DD9 gate on mean |TD error| post-fix / pre-fix.
TD_RATIO_RANGE = (0.5, 5.0)
Q_NEXT_P99_MAX = 50.0
Q_DIFF_P99_RANGE = (0.1, 100.0)


def _gate(check_id: str, ok: bool, steps: np.ndarray, detail: str) -> CheckResult:
    bad = np.zeros(len(steps), dtype=bool)
    if not ok and len(bad):
        bad[-1] = True
    return check_result(check_id, bad, steps, detail)


def _p99(x: np.ndarray) -> float:
    return float(np.percentile(x, 99)) if len(x) else float("nan")


def invariants(frame: pd.DataFrame, options: CheckOptions | None = None) -> list[CheckResult]:
    """Every SP18 check on ``frame``, the re-derivation of each output (:mod:`.rederive`) last."""
    steps = frame_steps(frame)
    out = Checks(frame)
    need = out.need

    lo, hi = config_value(frame, "pos_min", 0.01, P), config_value(frame, "pos_max", 5.0, P)
    if need("sp18.cap_bounds", COL.pos):
        pos = f32(frame, COL.pos)
        sentinel = pos == np.float32(S.POS_FALLBACK)
        out.append(check_result("sp18.cap_bounds", ~(sentinel | ((pos >= np.float32(lo)) & (pos <= np.float32(hi)))),
                                steps, f"POS cap in [{lo:g}, {hi:g}] (or the sentinel {S.POS_FALLBACK:g})"))
    ratio = np.float32(config_value(frame, "neg_ratio", 2.0, P))
    if need("sp18.cap_neg_ratio", COL.pos, COL.neg):
        pos, neg = f32(frame, COL.pos), f32(frame, COL.neg)
        sentinel = (pos == np.float32(S.POS_FALLBACK)) & (neg == np.float32(S.NEG_FALLBACK))
        out.append(check_result("sp18.cap_neg_ratio", ~(sentinel | (neg == -ratio * pos)), steps,
                                f"NEG = −{ratio:g} × POS exactly"))
    shaping = np.float32(config_value(frame, "shaping_scale", 1.0, P))
    if need("sp18.hold_reward_bounds", COL.hold_opp, COL.pos, COL.neg):
        r = f32(frame, COL.hold_opp)
        lo_r, hi_r = f32(frame, COL.neg) * shaping, f32(frame, COL.pos) * shaping
        out.append(check_result("sp18.hold_reward_bounds", ~((r >= lo_r) & (r <= hi_r)), steps,
                                "Hold opportunity cost inside [NEG, POS] × shaping_scale"))
    if need("sp18.hold_only_on_hold", COL.hold_chosen, COL.hold_opp, COL.action):
        act = frame[COL.action].to_numpy()
        chosen, cf = f32(frame, COL.hold_chosen), f32(frame, COL.hold_opp)
        bad = np.where(act == S.DIR_HOLD, chosen != cf, chosen != 0)
        out.append(check_result("sp18.hold_only_on_hold", bad, steps,
                                "compute_sp18_hold_opportunity_cost is 0.0 exactly off Hold (T1)"))
    if need("sp18.hold_width_match", COL.hold_opp, COL.chosen, COL.action):
        act = frame[COL.action].to_numpy()
        hold = np.abs(f32(frame, COL.hold_opp)[act == S.DIR_HOLD])
        ls = np.abs(f32(frame, COL.chosen)[(act == S.DIR_LONG) | (act == S.DIR_SHORT)])
        if len(hold) == 0 or len(ls) == 0:
            out.append(check_skip("sp18.hold_width_match", "needs both Hold and Long/Short picks"))
        else:
            h, w = float(hold.mean()), float(ls.mean())
            out.append(_gate("sp18.hold_width_match", h > 0.5 * w, steps,
                             f"mean |r_hold_opp| = {h:.4g} vs 0.5 × mean |r_long/short| = {0.5 * w:.4g}"))
    if need("sp18.td_error_ratio", COL.err_fixed, COL.err_defect):
        pre, post = float(f32(frame, COL.err_defect).mean()), float(f32(frame, COL.err_fixed).mean())
        ratio_td = post / pre if pre > 0 else float("inf")
        a, b = TD_RATIO_RANGE
        out.append(_gate("sp18.td_error_ratio", a <= ratio_td <= b, steps,
                         f"mean |TD error| post-fix / pre-fix = {ratio_td:.4g}, gate [{a:g}, {b:g}] (B-DD9)"))
    if need("sp18.q_next_target_p99", COL.q_next_target):
        p = _p99(np.abs(f32(frame, COL.q_next_target)))
        out.append(_gate("sp18.q_next_target_p99", p <= Q_NEXT_P99_MAX, steps,
                         f"p99 |q_next_target| = {p:.4g} ≤ {Q_NEXT_P99_MAX:g}"))
    if need("sp18.q_next_minus_reward_p99", COL.q_next_target, COL.chosen):
        p = _p99(np.abs(f32(frame, COL.q_next_target) - f32(frame, COL.chosen)))
        a, b = Q_DIFF_P99_RANGE
        out.append(_gate("sp18.q_next_minus_reward_p99", a < p < b, steps,
                         f"p99 |q_next_target − reward| = {p:.4g}, gate ({a:g}, {b:g})"))
    out.extend(rederive.checks(frame, options))  # its multiply-adds take options.rederive_ulps
    return list(out)


def summary(frame: pd.DataFrame) -> dict[str, float]:
    """Sweep metrics: Hold/Long-Short reward width ratio, mean rewards, TD-error ratio, final caps, q_next p99."""
    act = frame[COL.action].to_numpy()
    hold = f32(frame, COL.hold_opp)[act == S.DIR_HOLD]
    ls = f32(frame, COL.chosen)[(act == S.DIR_LONG) | (act == S.DIR_SHORT)]
    nan = float("nan")
    ls_width = float(np.abs(ls).mean()) if len(ls) else nan
    return {"hold_width_ratio": float(np.abs(hold).mean()) / ls_width if len(hold) and ls_width > 0 else nan,
            "hold_reward_mean": float(hold.mean()) if len(hold) else nan,
            "long_short_reward_mean": float(ls.mean()) if len(ls) else nan,
            "td_error_ratio": float(f32(frame, COL.err_fixed).mean() / f32(frame, COL.err_defect).mean()),
            "pos_cap_final": float(f32(frame, COL.pos)[-1]), "neg_cap_final": float(f32(frame, COL.neg)[-1]),
            "q_next_target_p99": _p99(np.abs(f32(frame, COL.q_next_target)))}
