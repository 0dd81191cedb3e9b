"""SP18 re-derivation: the D-leg and B-leg outputs recomputed from the logged bars through the twins.

Each output is recomputed by the function the replay runs for it (:mod:`.twin`,
:mod:`.replay`'s host functions, :mod:`regime_dash.modules.f32`) from logged
values only, so one wrong formula shows in its own output:

* per bar: the vol-normalised return, the Hold rewards under the bar's logged
  caps, the Long/Short rewards, the chosen reward, the dones, the |TD errors|;
* per cap-producer window (``cap_update_every`` bars, cut at fold boundaries):
  the caps every bar of a window uses (from the logged state after the window
  before), and at the window's last bar the observation (p99 of the window's
  Long/Short step returns × safety_factor) and each Pearls A+D entry from the
  state before the window, the logged observation and the logged entries the
  update computed before it; rows inside a window repeat the state before;
* the λ-returns, from the logged rewards, dones and bootstrap values of the
  ``max_trace`` bars ahead (the twin's truncated forward view).

Not checkable: ``q_next_target`` and ``q_taken``, which need the online and
target Q tables (13 values per state, not logged). Check ids ``sp18.rederive.<output>``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from regime_dash.analysis.invariants import CheckOptions, CheckResult
from regime_dash.modules import f32
from regime_dash.modules.frames import fold_starts
from regime_dash.modules.rederive import Derived, Formula, config_of, results_repaired, skip
from regime_dash.modules.rederive import coverage as _coverage
from regime_dash.modules.sp18_hold import replay as R
from regime_dash.modules.sp18_hold import slots as S
from regime_dash.modules.sp18_hold import twin
from regime_dash.modules.sp18_hold.replay import COL, CONFIG_COLUMNS, P, STATE_COLUMNS
from regime_dash.core.slots import SlotLayout

OPP, CAP, TD, HOST = ("sp18_hold_opportunity_cost", "sp18_hold_reward_cap_update", "sp18_td_lambda",
                      "replay host (a model)")
_F = Formula
F = {f.output: f for f in (
    _F("vol_norm_return", COL.z, HOST, "z = next_log_return / max(vol_proxy, vol_floor)"),
    _F("hold_opp", COL.hold_opp, OPP, "r_hold = clamp(−2 · next_log_return / max(vol_proxy, vol_floor), NEG, POS) "
       "· shaping_scale, with the bar's caps"),
    _F("hold_opp_chosen", COL.hold_chosen, OPP, "the Hold reward above where the bar's pick is Hold, else 0"),
    _F("long", COL.long, HOST, "r_long = clamp(z, position_neg_cap, position_pos_cap)"),
    _F("short", COL.short, HOST, "r_short = clamp(−z, position_neg_cap, position_pos_cap)"),
    _F("chosen", COL.chosen, HOST, "the reward of the pick: r_hold_chosen, r_long, r_short, or 0 for Flat"),
    _F("cap_pos", COL.pos, CAP, "POS of the window = clamp(EMA after the window before, pos_min, pos_max) "
       "(sentinel 5 at a fold start or while unset; unchanged after a window with no close)"),
    _F("cap_neg", COL.neg, CAP, "NEG of the window = −neg_ratio · POS (sentinel −10 while unset)"),
    _F("cap_obs", COL.obs, CAP, "obs = p99|step_ret| of the window's Long/Short closes (nearest rank) · safety_factor"),
    _F("cap_updated", COL.updated, CAP, "the window's launch had a Long/Short close (its count moved)"),
    _F("cap_count", COL.count, CAP, "count = count before + 1 at a window with a close"),
    _F("cap_obs_mean", COL.obs_mean, CAP, "Welford mean of the observations (obs itself first)"),
    _F("cap_obs_m2", COL.obs_m2, CAP, "Welford M2 of the observations (0 first)", fma=True),
    _F("cap_diff_mean", COL.diff_mean, CAP, "Welford mean of successive observation differences (0 first)"),
    _F("cap_diff_m2", COL.diff_m2, CAP, "Welford M2 of successive observation differences (0 first)", fma=True),
    _F("cap_alpha", COL.alpha, CAP, "Pearl D: α = s / (s + r) in [alpha_min, alpha_max] (1 first)", fma=True),
    _F("cap_ema", COL.ema, CAP, "Pearls A+D EMA: obs first, else ema before + α · (obs − ema before)", fma=True),
    _F("done", COL.done, HOST, "done = 1 on the last bar and on the bar before each fold boundary"),
    _F("return_defect", COL.ret_defect, TD, "truncated λ-return with q_next = the rewards (the defect): "
       "G = r_e + γ(1 − d_e)·q_e at the trace's end e, then G = r_k + γ(1 − d_k)·((1 − λ)·q_k + λ·G) back to t",
       fma=True),
    _F("return_fixed", COL.ret_fixed, TD, "truncated λ-return with q_next = q_next_target (the fix): "
       "G = r_e + γ(1 − d_e)·q_e at the trace's end e, then G = r_k + γ(1 − d_k)·((1 − λ)·q_k + λ·G) back to t",
       fma=True),
    _F("abs_err_defect", COL.err_defect, HOST, "|R^λ defect − Q(s, a) taken|"),
    _F("abs_err_fixed", COL.err_fixed, HOST, "|R^λ fix − Q(s, a) taken|"),
)}
FORMULAS = tuple(F.values())
CHECK_IDS = tuple(f.check_id(P) for f in FORMULAS)
_Q_TABLES = "the online and target Q tables (13 values per state; not logged)"
NOT_CHECKABLE = {COL.q_next_target: _Q_TABLES, COL.q_taken: _Q_TABLES}
INPUTS = {COL.ret: "stream input: next-bar log return", COL.vol: "stream input: vol proxy",
          COL.action: "stream input: the picked direction", **{f"{P}config.{n}": "logged config" for n in CONFIG_COLUMNS}}
BOUNDED = {COL.pos: ("sp18.cap_bounds", "sp18.cap_neg_ratio"), COL.neg: ("sp18.cap_neg_ratio",),
           COL.hold_opp: ("sp18.hold_reward_bounds", "sp18.hold_width_match"),
           COL.hold_chosen: ("sp18.hold_only_on_hold",), COL.err_fixed: ("sp18.td_error_ratio",),
           COL.err_defect: ("sp18.td_error_ratio",), COL.q_next_target: ("sp18.q_next_target_p99",
                                                                          "sp18.q_next_minus_reward_p99")}
_ALL = frozenset(f.column for f in FORMULAS) | {COL.ret, COL.vol, COL.action, COL.q_next_target, COL.q_taken}


def _v(frame: pd.DataFrame, col: str) -> np.ndarray:
    return frame[col].to_numpy(dtype=np.float32)


def _derived(f: Formula, frame: pd.DataFrame, expected, reads: dict[str, tuple[int, ...]], rows=None) -> Derived:
    n = len(frame)
    return Derived(f, np.asarray(expected, dtype=np.float64), np.ones(n, bool) if rows is None else rows,
                   {c: frame[c].to_numpy(dtype=np.float64) for c in reads if c in frame.columns},
                   tuple(reads.items()))


def _per_bar(frame: pd.DataFrame, cfg: dict) -> list[Derived]:
    ret, vol, action, z = _v(frame, COL.ret), _v(frame, COL.vol), frame[COL.action].to_numpy(), _v(frame, COL.z)
    pos, neg = _v(frame, COL.pos), _v(frame, COL.neg)
    shaping, floor = np.float32(cfg["shaping_scale"]), np.float32(cfg["vol_floor"])
    lo, hi = cfg["position_neg_cap"], cfg["position_pos_cap"]
    all_hold = np.full(len(frame), S.DIR_HOLD, dtype=np.int32)
    now = (0,)
    return [
        _derived(F["vol_norm_return"], frame, R.vol_normalized(ret, vol, floor), {COL.ret: now, COL.vol: now}),
        _derived(F["hold_opp"], frame, twin.hold_cost_values(all_hold, ret, vol, pos, neg, shaping, floor),
                 {COL.ret: now, COL.vol: now, COL.pos: now, COL.neg: now}),
        _derived(F["hold_opp_chosen"], frame, twin.hold_cost_values(action, ret, vol, pos, neg, shaping, floor),
                 {COL.action: now, COL.ret: now, COL.vol: now, COL.pos: now, COL.neg: now}),
        _derived(F["long"], frame, R.position_reward(z, lo, hi), {COL.z: now}),
        _derived(F["short"], frame, R.position_reward(-z, lo, hi), {COL.z: now}),
        _derived(F["chosen"], frame, R.chosen_reward(action, _v(frame, COL.hold_chosen), _v(frame, COL.long),
                                                     _v(frame, COL.short)),
                 {COL.action: now, COL.hold_chosen: now, COL.long: now, COL.short: now}),
    ]


def _b_leg(frame: pd.DataFrame, cfg: dict) -> list[Derived]:
    n = len(frame)
    chosen, done, q_next = _v(frame, COL.chosen), _v(frame, COL.done), _v(frame, COL.q_next_target)
    taken = _v(frame, COL.q_taken)
    ahead = tuple(range(int(cfg["max_trace"])))
    td_args = (1, n, np.float32(cfg["gamma"]), np.float32(cfg["td_lambda"]), int(cfg["max_trace"]))
    defect = twin.td_lambda(chosen, done, chosen, *td_args)[0] if n else np.zeros(0, np.float32)
    fixed = twin.td_lambda(chosen, done, q_next, *td_args)[0] if n else np.zeros(0, np.float32)
    starts = fold_starts(frame)
    ends = np.append(starts[1:], True).astype(np.float64)  # what the dones read: the next bar starts a fold
    return [
        Derived(F["done"], R.td_dones(starts).astype(np.float64), np.ones(n, bool),
                {"next bar starts a fold, or there is none": ends}),
        _derived(F["return_defect"], frame, defect, {COL.chosen: ahead, COL.done: ahead}),
        _derived(F["return_fixed"], frame, fixed, {COL.chosen: ahead, COL.done: ahead, COL.q_next_target: ahead}),
        _derived(F["abs_err_defect"], frame, R.abs_td_error(_v(frame, COL.ret_defect), taken),
                 {COL.ret_defect: (0,), COL.q_taken: (0,)}),
        _derived(F["abs_err_fixed"], frame, R.abs_td_error(_v(frame, COL.ret_fixed), taken),
                 {COL.ret_fixed: (0,), COL.q_taken: (0,)}),
    ]


def _window_caps(lg: dict, cfg: dict, a: int, fresh: bool, boot: np.ndarray):
    """(pos, neg) every bar of the window from row ``a`` uses: the ISV's after the window before."""
    if fresh:
        return twin.effective_caps(boot)
    if not lg[COL.updated][a - 1]:  # no close then: the caps did not move
        return lg[COL.pos][a - 1], lg[COL.neg][a - 1]
    isv = boot.copy()
    isv[S.POS] = twin.cap_pos(lg[COL.ema][a - 1], cfg["pos_min"], cfg["pos_max"])
    isv[S.NEG] = twin.cap_neg(lg[COL.pos][a] if isv[S.POS] > 0 else isv[S.POS], cfg["neg_ratio"])
    return twin.effective_caps(isv)


def _launch(logged: dict, cfg: dict, e: int, prior: dict, obs) -> dict:
    """Each Pearls A+D entry after a launch with observation ``obs``, from the state before and the logged
    entries the update computed before it (row ``e``)."""
    lg = {c: logged[c][e] for c in STATE_COLUMNS}
    count, x = lg[COL.count], lg[COL.obs]
    return {COL.count: f32.ad_count(prior[COL.count]),
            COL.obs_mean: f32.ad_mean(prior[COL.obs_mean], x, count),
            COL.obs_m2: f32.ad_m2(prior[COL.obs_m2], prior[COL.obs_mean], lg[COL.obs_mean], x, count),
            COL.diff_mean: f32.ad_diff_mean(prior[COL.diff_mean], x, prior[COL.obs], count),
            COL.diff_m2: f32.ad_diff_m2(prior[COL.diff_m2], prior[COL.diff_mean], lg[COL.diff_mean], x,
                                        prior[COL.obs], count),
            COL.alpha: f32.ad_alpha(lg[COL.obs_m2], lg[COL.diff_m2], count, np.float32(cfg["alpha_min"]),
                                    np.float32(cfg["alpha_max"])),
            COL.ema: f32.ad_ema(prior[COL.ema], lg[COL.alpha], x, count),
            COL.obs: f32.ad_prev(obs)}


def _cap_windows(frame: pd.DataFrame, cfg: dict) -> list[Derived]:
    """The caps of every bar and the cap producer's state, window by window."""
    n = len(frame)
    starts = fold_starts(frame)
    boot = SlotLayout(S.SLOTS).bootstrap_vector()
    step_ret, ls_close = R.trade_returns(frame[COL.action].to_numpy(), _v(frame, COL.z))
    out_cols = (*STATE_COLUMNS, COL.pos, COL.neg, COL.updated)
    lg = {c: _v(frame, c) for c in out_cols}
    lg[COL.updated] = frame[COL.updated].to_numpy(dtype=bool)
    exp = {c: np.full(n, np.nan) for c in out_cols}
    before = {c: np.full(n, np.nan) for c in STATE_COLUMNS}
    for a, b in R.windows(starts, int(cfg["cap_update_every"])):
        e, fresh = b - 1, a == 0 or bool(starts[a])
        prior = {c: (boot[slot] if fresh else lg[c][a - 1]) for c, slot in zip(STATE_COLUMNS, S.PEARLS_AD)}
        exp[COL.pos][a:b], exp[COL.neg][a:b] = _window_caps(lg, cfg, a, fresh, boot)
        for c in STATE_COLUMNS:
            exp[c][a:b] = before[c][a:b] = prior[c]
        exp[COL.updated][a:b] = 0.0
        obs = twin.cap_observation(step_ret[a:b], ls_close[a:b], cfg["safety_factor"])
        if obs is not None:
            exp[COL.updated][e] = 1.0
            for c, v in _launch(lg, cfg, e, prior, obs).items():
                exp[c][e] = v
    inputs = {f"{c} (before the window)": before[c] for c in STATE_COLUMNS}
    inputs.update({COL.obs: frame[COL.obs].to_numpy(dtype=np.float64), COL.count: frame[COL.count].to_numpy(np.float64)})
    rows = np.ones(n, dtype=bool)
    names = {COL.pos: "cap_pos", COL.neg: "cap_neg", COL.updated: "cap_updated", COL.count: "cap_count",
             COL.obs_mean: "cap_obs_mean", COL.obs_m2: "cap_obs_m2", COL.diff_mean: "cap_diff_mean",
             COL.diff_m2: "cap_diff_m2", COL.alpha: "cap_alpha", COL.ema: "cap_ema", COL.obs: "cap_obs"}
    return [Derived(F[names[c]], exp[c], rows, inputs) for c in out_cols]


def _derive(frame: pd.DataFrame, cfg: dict) -> list[Derived]:
    return [*_per_bar(frame, cfg), *_cap_windows(frame, cfg), *_b_leg(frame, cfg)]


def checks(frame: pd.DataFrame, options: CheckOptions | None = None) -> list[CheckResult]:
    """The ``sp18.rederive.*`` results of ``frame``."""
    opt = options or CheckOptions()
    cfg = {name: config_of(frame, P, name) for name in CONFIG_COLUMNS}
    missing = [c for c in sorted(_ALL) if c not in frame.columns]
    missing += [f"{P}config.{k}" for k, v in cfg.items() if v is None]
    if missing:
        why = "not checkable: needs " + ", ".join(missing) + " (not in this frame)"
        return [skip(P, f, why, missing) for f in FORMULAS]
    order = {f.output: k for k, f in enumerate(FORMULAS)}
    res = results_repaired(P, frame, lambda fr: _derive(fr, cfg), opt.rederive_ulps)
    return sorted(res, key=lambda r: order[r.id.rpartition(".")[2]])


def coverage(frame: pd.DataFrame) -> list[dict]:
    """One entry per logged field of an SP18 frame: ``{"field", "status", "checks", "needs"}``."""
    return _coverage(frame, P, FORMULAS, INPUTS, NOT_CHECKABLE, BOUNDED)


__all__ = ["CHECK_IDS", "FORMULAS", "checks", "coverage"]
