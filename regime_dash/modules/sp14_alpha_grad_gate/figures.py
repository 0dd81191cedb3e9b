"""SP14 panels: the Schmitt gate on aux_dir_acc, α raw vs smoothed, the adaptive k and β."""
from __future__ import annotations

import pandas as pd

from regime_dash.modules import plots
from regime_dash.modules.base import config_value
from regime_dash.modules.sp14_alpha_grad_gate.replay import COLUMNS as C
from regime_dash.modules.sp14_alpha_grad_gate.replay import PREFIX


def figures(frame: pd.DataFrame, baseline: pd.DataFrame | None = None) -> list:
    """Three figures: Gate 1 (aux and thresholds), α_raw/α_smoothed, adaptive k_aux/k_q/β."""
    target = config_value(frame, "target", 0.55, PREFIX)
    h = config_value(frame, "hysteresis", 0.03, PREFIX)
    gate = plots.lines(frame, [C["aux_dir_acc"], C["gate1_state"], C["gate1"], C["gate2"]],
                       "Gate 1 Schmitt trigger on aux_dir_acc", baseline=baseline,
                       labels=["aux_dir_acc", "gate1 state", "gate1", "gate2"],
                       hlines=[(target + h, "open"), (target - h, "close")],
                       step_shape=[C["gate1_state"]])
    alpha = plots.lines(frame, [C["alpha_raw"], C["alpha_smoothed"], C["warmup_gate"]],
                        "α_grad: raw vs rate-limited", baseline=baseline,
                        labels=["α raw", "α smoothed", "warmup gate"])
    adapt = plots.lines(frame, [C["k_aux"], C["k_q"], C["beta"], C["var_alpha"], C["var_aux"]],
                        "Adaptive k_aux, k_q (slot 388 drives k_aux) and β", baseline=baseline,
                        labels=["k_aux", "k_q", "β", "var(α_raw)", "var_aux (388)"])
    return [gate, alpha, adapt]
