"""Pearl C panels: engagement rate against the 1% target, deficit and its EMA, per-block counts."""
from __future__ import annotations

import numpy as np
import pandas as pd

from regime_dash.modules import plots
from regime_dash.modules.pearl_c.replay import COL, P


def figures(frame: pd.DataFrame, baseline: pd.DataFrame | None = None) -> list:
    """Three figures: rate vs 0.01, rate_deficit and its EMA, a per-block count heatmap (when kept)."""
    import plotly.graph_objects as go

    rate = plots.lines(frame, [COL.rate], "Clamp engagement rate", baseline=baseline, labels=["rate"],
                       hlines=[(0.01, "target 1%")])
    deficit = plots.lines(frame, [COL.deficit, COL.ema], "rate_deficit = rate − 0.01 and its Pearls A+D EMA",
                          baseline=baseline, labels=["rate_deficit", "EMA"], hlines=[(0.0, "")])
    block_cols = sorted(c for c in frame.columns if c.startswith(P + "block."))
    heat = go.Figure()
    if block_cols:
        z = frame[block_cols].to_numpy(dtype=np.float64).T
        heat.add_trace(go.Heatmap(z=z, x=frame["step"].to_numpy(), y=list(range(len(block_cols))),
                                  colorscale="Viridis", colorbar=dict(title="count")))
    heat.update_layout(title="Per-block engagement counts (block leader writes, no atomics)",
                       xaxis_title="step", yaxis_title="block", height=320, margin=dict(plots.MARGIN))
    return [rate, deficit, heat]
