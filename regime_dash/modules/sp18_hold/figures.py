"""SP18 panels: Hold vs Long/Short reward widths, the adaptive caps, the TD(λ) defect vs fix."""
from __future__ import annotations

import numpy as np
import pandas as pd

from regime_dash.modules import plots
from regime_dash.modules.sp18_hold import slots as S
from regime_dash.modules.sp18_hold.replay import COL


def figures(frame: pd.DataFrame, baseline: pd.DataFrame | None = None) -> list:
    """Four figures: reward histograms by pick, caps over time, |TD error| defect vs fix, λ-returns."""
    act = frame[COL.action].to_numpy()
    hist = plots.histograms(
        {"Hold (opportunity cost)": frame[COL.hold_opp].to_numpy()[act == S.DIR_HOLD],
         "Long/Short picks": frame[COL.chosen].to_numpy()[(act == S.DIR_LONG) | (act == S.DIR_SHORT)]},
        "Reward distribution width: Hold vs Long/Short", xaxis="per-bar reward")
    caps = plots.lines(frame, [COL.pos, COL.neg, COL.ema, COL.alpha], "Hold reward caps (slots 483/484)",
                       baseline=baseline, labels=["POS cap", "NEG cap", "EMA of p99 × 1.5", "Wiener α"],
                       step_shape=[COL.pos, COL.neg, COL.alpha])
    smooth = frame.copy()
    for col in (COL.err_defect, COL.err_fixed):
        smooth[col] = pd.Series(frame[col].to_numpy(dtype=np.float64)).rolling(50, min_periods=1).mean().to_numpy()
    base_s = None
    if baseline is not None:
        base_s = baseline.copy()
        for col in (COL.err_defect, COL.err_fixed):
            base_s[col] = pd.Series(baseline[col].to_numpy(dtype=np.float64)).rolling(50, min_periods=1).mean().to_numpy()
    ratio = float(frame[COL.err_fixed].mean() / max(frame[COL.err_defect].mean(), 1e-30))
    td = plots.lines(smooth, [COL.err_defect, COL.err_fixed],
                     f"|TD error| (50-bar mean): q_next = rewards vs target-Q bootstrap — ratio {ratio:.3g}",
                     baseline=base_s, labels=["defect (q_next = rewards)", "fix (DDQN target bootstrap)"],
                     hlines=[])
    rets = plots.lines(frame, [COL.ret_defect, COL.ret_fixed, COL.q_taken, COL.q_next_target],
                       "λ-returns and Q", baseline=None,
                       labels=["R^λ defect", "R^λ fix", "Q(s, a) taken", "q_next target"])
    return [hist, caps, td, rets]
