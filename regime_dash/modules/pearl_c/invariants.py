"""Pearl C checks: counts in range, the rate and deficit definitions, Pearl A's first observation, EMA bounds."""
from __future__ import annotations

import numpy as np
import pandas as pd

from regime_dash.analysis.invariants import CheckOptions, CheckResult
from regime_dash.modules.base import Checks, check_result, f32, fold_starts, frame_steps
from regime_dash.modules.pearl_c import rederive
from regime_dash.modules.pearl_c.replay import COL
from regime_dash.modules.pearl_c.twin import TARGET_RATE

CHECK_COLUMNS = (COL.rate, COL.deficit, COL.ema)
CHECK_IDS = ("pearl_c.count_range", "pearl_c.rate_definition", "pearl_c.deficit_definition",
             "pearl_c.first_observation", "pearl_c.ema_within_observations", *rederive.CHECK_IDS)


def invariants(frame: pd.DataFrame, options: CheckOptions | None = None) -> list[CheckResult]:
    """Every Pearl C check on ``frame``, the re-derivation of each output (:mod:`.rederive`) last."""
    opt = options or CheckOptions()
    steps = frame_steps(frame)
    out = Checks(frame)
    need = out.need

    if need("pearl_c.count_range", COL.count, COL.n):
        c, n = frame[COL.count].to_numpy(), frame[COL.n].to_numpy()
        out.append(check_result("pearl_c.count_range", (c < 0) | (c > n), steps,
                                "0 ≤ engaged count ≤ parameters"))
    if need("pearl_c.rate_definition", COL.count, COL.n, COL.rate):
        want = frame[COL.count].to_numpy().astype(np.float32) / frame[COL.n].to_numpy().astype(np.float32)
        out.append(check_result("pearl_c.rate_definition", f32(frame, COL.rate) != want, steps,
                                "engagement_rate = Σ per-block counts / parameters"))
    if need("pearl_c.deficit_definition", COL.rate, COL.deficit):
        out.append(check_result("pearl_c.deficit_definition",
                                f32(frame, COL.deficit) != f32(frame, COL.rate) - TARGET_RATE, steps,
                                "rate_deficit = engagement_rate − 0.01"))
    starts = fold_starts(frame)
    if need("pearl_c.first_observation", COL.deficit, COL.ema):
        bad = starts & (f32(frame, COL.ema) != f32(frame, COL.deficit))
        out.append(check_result("pearl_c.first_observation", bad, steps,
                                "the EMA takes the fold's first deficit as it is (Pearl A)"))
    if need("pearl_c.ema_within_observations", COL.deficit, COL.ema):
        d, e = f32(frame, COL.deficit), f32(frame, COL.ema)
        seg = np.cumsum(starts)
        s = pd.Series(d)
        lo = s.groupby(seg).cummin().to_numpy(np.float32)
        hi = s.groupby(seg).cummax().to_numpy(np.float32)
        tol = np.float32(opt.ulps) * np.finfo(np.float32).eps * np.maximum(np.abs(e), np.float32(1e-3))
        out.append(check_result("pearl_c.ema_within_observations", (e < lo - tol) | (e > hi + tol), steps,
                                "the EMA stays between the fold's smallest and largest deficit (α in [0, 1])"))
    out.extend(rederive.checks(frame, opt))
    return list(out)


def summary(frame: pd.DataFrame) -> dict[str, float]:
    """Sweep metrics: mean and max engagement rate, final deficit EMA, share of steps a Layer-B bump would fire."""
    return {"rate_mean": float(f32(frame, COL.rate).mean()), "rate_max": float(f32(frame, COL.rate).max()),
            "deficit_ema_final": float(f32(frame, COL.ema)[-1]),
            "bump_share": float(frame[COL.bump].to_numpy().mean())}
