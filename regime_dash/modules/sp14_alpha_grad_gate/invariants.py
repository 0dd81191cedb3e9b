"""SP14 invariants on a frame with the ``sp14.*`` columns (a replay or a trainer's diag).

Constants come from the ``sp14.config.*`` columns a replay writes, else
``frame.attrs['config']``, else the note's values (K_MIN 1, BETA_BASE 0.5, BETA_MAX 0.95,
target 0.55 ± 0.03).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from regime_dash.analysis.invariants import CheckOptions, CheckResult
from regime_dash.modules.base import (check_result, close_f32, config_value, f32, fold_starts,
                                      frame_steps, skip_if_missing)
from regime_dash.modules.sp14_alpha_grad_gate import rederive
from regime_dash.modules.sp14_alpha_grad_gate.replay import COLUMNS as C
from regime_dash.modules.sp14_alpha_grad_gate.replay import PREFIX

RAW, SMOOTH, BETA = C["alpha_raw"], C["alpha_smoothed"], C["beta"]
K_AUX, K_Q, GATE1, AUX, VAR_AUX = C["k_aux"], C["k_q"], C["gate1_state"], C["aux_dir_acc"], C["var_aux"]
#: Columns whose presence means the SP14 checks apply.
CHECK_COLUMNS = (RAW, SMOOTH, BETA)
CHECK_IDS = ("sp14.alpha_raw_bounded", "sp14.k_floor", "sp14.beta_bounds", "sp14.schmitt_hysteresis",
             "sp14.rate_limiter", "sp14.var_aux_producer", *rederive.CHECK_IDS)


def invariants(frame: pd.DataFrame, options: CheckOptions | None = None) -> list[CheckResult]:
    """Every SP14 check on ``frame``, the re-derivation of each output (:mod:`.rederive`) last."""
    opt = options or CheckOptions()
    steps = frame_steps(frame)
    out = []

    cid = CHECK_IDS[0]
    out.append(skip_if_missing(cid, frame, RAW) or (lambda raw: check_result(
        cid, ~((raw >= 0) & (raw <= 1)), steps, "α_raw = gate1·gate2·warmup lies in [0, 1] (no runtime clamp)"))(
        f32(frame, RAW)))

    cid = CHECK_IDS[1]
    k_min = np.float32(config_value(frame, "k_min", 1.0, PREFIX))
    out.append(skip_if_missing(cid, frame, K_AUX, K_Q) or check_result(
        cid, ~((f32(frame, K_AUX) >= k_min) & (f32(frame, K_Q) >= k_min)), steps,
        f"k_aux and k_q stay at or above K_MIN = {k_min:g}"))

    cid = CHECK_IDS[2]
    lo = np.float32(config_value(frame, "beta_base", 0.5, PREFIX))
    hi = np.float32(config_value(frame, "beta_max", 0.95, PREFIX))
    out.append(skip_if_missing(cid, frame, BETA) or check_result(
        cid, ~((f32(frame, BETA) >= lo) & (f32(frame, BETA) <= hi)), steps,
        f"β stays in [BETA_BASE, BETA_MAX] = [{lo:g}, {hi:g}]"))

    cid = CHECK_IDS[3]
    miss = skip_if_missing(cid, frame, GATE1, AUX)
    if miss:
        out.append(miss)
    else:
        target = np.float32(config_value(frame, "target", 0.55, PREFIX))
        h = np.float32(config_value(frame, "hysteresis", 0.03, PREFIX))
        open_th, close_th = target + h, target - h
        state, aux = f32(frame, GATE1), f32(frame, AUX)
        prev = np.concatenate([[np.float32(0)], state[:-1]])
        prev[fold_starts(frame)] = 0.0  # fold reset closes the gate
        expect = np.where(prev < 0.5, np.where(aux >= open_th, 1.0, 0.0),
                          np.where(aux <= close_th, 0.0, 1.0)).astype(np.float32)
        out.append(check_result(cid, state != expect, steps,
                                f"Gate 1 opens only at aux ≥ {open_th:g}, closes only at aux ≤ {close_th:g}"))

    cid = CHECK_IDS[4]
    miss = skip_if_missing(cid, frame, SMOOTH, RAW, BETA)
    if miss:
        out.append(miss)
    else:
        sm, raw, beta = f32(frame, SMOOTH), f32(frame, RAW), f32(frame, BETA)
        prev = np.concatenate([[np.float32(0)], sm[:-1]])
        prev[fold_starts(frame)] = 0.0
        one = np.float32(1.0)
        expect = beta * prev + (one - beta) * raw
        out.append(check_result(cid, ~close_f32(sm, expect, opt.ulps), steps,
                                "α_smoothed = β·α_smoothed(t−1) + (1−β)·α_raw"))

    cid = CHECK_IDS[5]
    miss = skip_if_missing(cid, frame, VAR_AUX, AUX)
    if miss:
        out.append(miss)
    else:
        var_aux, aux = f32(frame, VAR_AUX), f32(frame, AUX)
        dead = bool((var_aux == 0).all() and np.ptp(aux) > 0)
        bad = np.zeros(len(frame), dtype=bool)
        if dead:
            bad[:] = True
        detail = ("slot 388 (AUX_DIR_ACC_VARIANCE_EMA) has no producer: var_aux stayed at its sentinel 0 "
                  "while aux_dir_acc moved, so k_aux is pinned at K_BASE_AUX (the note's KNOWN LIMITATION)"
                  if dead else "var_aux (slot 388) is written: k_aux adapts")
        out.append(check_result(cid, bad, steps, detail))
    out.extend(rederive.checks(frame, opt))
    return out


def summary(frame: pd.DataFrame) -> dict[str, float]:
    """Sweep metrics: mean α (raw, smoothed), share of steps with Gate 1 open, its toggles, β mean/max, k_aux min."""
    state = f32(frame, GATE1)
    return {"alpha_raw_mean": float(f32(frame, RAW).mean()), "alpha_smoothed_mean": float(f32(frame, SMOOTH).mean()),
            "gate1_open_share": float((state > 0.5).mean()),
            "gate1_toggles": float(np.count_nonzero(np.diff(state) != 0)),
            "beta_mean": float(f32(frame, BETA).mean()), "beta_max": float(f32(frame, BETA).max()),
            "k_aux_min": float(f32(frame, K_AUX).min())}
