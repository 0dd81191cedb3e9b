"""Replay SP18 over a bar stream: the D-leg rewards and cap producer, then the B-leg TD(λ) comparison.

Host side (identical for both engines; a model of what the trainer's other
kernels supply): Long/Short per-bar rewards are the position-side capped pnl of
±next_log_return / vol_proxy (a Long or Short pick is a one-bar trade closing on
the next bar, so every such bar is a "Long/Short close" for the cap producer);
a Flat pick earns 0; the synthetic Q nets are linear in the last three
vol-normalised returns (``q_scale`` × an untrained, HD0-like net; the target
net is the online net plus a ``target_lag`` offset). The kernels (or their
twins) do the rest: the Hold opportunity cost of every bar (counterfactual and
chosen), the cap producer every ``cap_update_every`` bars and at fold ends, the
per-branch DDQN bootstrap on next states, and the TD(λ) returns with
q_next = rewards (the defect) and q_next = the bootstrap (the fix).
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from regime_dash.modules.base import config_columns, frame_of
from regime_dash.modules.sp18_hold import slots as S
from regime_dash.modules.sp18_hold import twin
from regime_dash.modules.sp18_hold.config import Sp18Config
from regime_dash.modules.sp18_hold.stream import Sp18Stream
from regime_dash.core.slots import SlotLayout

P = "sp18."
COL = SimpleNamespace(
    ret=P + "bar.next_log_return", vol=P + "bar.vol_proxy", action=P + "bar.action_dir",
    z=P + "bar.vol_norm_return",
    hold_opp=P + "reward.hold_opp", hold_chosen=P + "reward.hold_opp_chosen", long=P + "reward.long",
    short=P + "reward.short", chosen=P + "reward.chosen",
    pos=P + "cap.pos", neg=P + "cap.neg", alpha=P + "cap.alpha", ema=P + "cap.ema", obs=P + "cap.obs",
    count=P + "cap.count", updated=P + "cap.updated",
    q_next_target=P + "td.q_next_target", q_taken=P + "td.q_taken", done=P + "td.done",
    ret_defect=P + "td.return_defect", ret_fixed=P + "td.return_fixed",
    err_defect=P + "td.abs_err_defect", err_fixed=P + "td.abs_err_fixed",
)
#: The Welford accumulators of the cap producer's Pearls A+D state (alpha, ema, obs and count are above), so
#: each state entry can be re-derived.
COL.obs_mean, COL.obs_m2 = P + "cap.obs_mean", P + "cap.obs_m2"
COL.diff_mean, COL.diff_m2 = P + "cap.diff_mean", P + "cap.diff_m2"
COLUMNS: tuple[str, ...] = tuple(vars(COL).values())
#: The cap producer's state columns in the Pearls A+D order (:data:`regime_dash.modules.f32.PEARLS_AD_STATE`).
STATE_COLUMNS = (COL.ema, COL.alpha, COL.obs_mean, COL.obs_m2, COL.diff_mean, COL.diff_m2, COL.obs, COL.count)
#: Config constants written as ``sp18.config.<name>`` columns: what the checks and the re-derivation read
#: (the synthetic Q nets' knobs are not: their Q tables are not logged).
CONFIG_COLUMNS = ("pos_min", "pos_max", "neg_ratio", "shaping_scale", "safety_factor", "alpha_min", "alpha_max",
                  "cap_update_every", "position_pos_cap", "position_neg_cap", "vol_floor", "gamma", "td_lambda",
                  "max_trace")

def twin_ops() -> SimpleNamespace:
    """The four kernels' twins (looked up when called, so a copy of this module can run other twins)."""
    def cap(isv, step_ret, mask, cap_params):
        out = isv.copy()
        twin.hold_reward_cap_update(out, step_ret, mask, *cap_params)
        return out

    return SimpleNamespace(opp=twin.hold_opportunity_cost_batch, cap=cap, ddqn=twin.ddqn_branch_bootstrap,
                           td=twin.td_lambda)


def cuda_ops() -> SimpleNamespace:
    from regime_dash.modules.sp18_hold import cuda

    return SimpleNamespace(opp=cuda.hold_opportunity_cost, cap=cuda.hold_reward_cap_update,
                           ddqn=cuda.ddqn_branch_bootstrap, td=cuda.td_lambda)


def vol_normalized(ret: np.ndarray, vol: np.ndarray, vol_floor: float) -> np.ndarray:
    return (ret.astype(np.float32) / np.maximum(vol.astype(np.float32), np.float32(vol_floor))).astype(np.float32)


def position_reward(x: np.ndarray, neg_cap, pos_cap) -> np.ndarray:
    """A one-bar Long (x = z) or Short (x = −z) trade's reward: the position-side capped pnl."""
    return np.clip(x, np.float32(neg_cap), np.float32(pos_cap)).astype(np.float32)


def trade_returns(action: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(step_ret, is_ls_close) of every bar: ±z on a Long/Short pick (each closes on the next bar), 0 else."""
    sign = np.where(action == S.DIR_LONG, 1.0, np.where(action == S.DIR_SHORT, -1.0, 0.0)).astype(np.float32)
    return (sign * z).astype(np.float32), (sign != 0).astype(np.int32)


def chosen_reward(action: np.ndarray, hold_chosen: np.ndarray, r_long: np.ndarray, r_short: np.ndarray) -> np.ndarray:
    """The reward of the picked direction (Flat earns 0)."""
    return np.where(action == S.DIR_HOLD, hold_chosen,
                    np.where(action == S.DIR_LONG, r_long,
                             np.where(action == S.DIR_SHORT, r_short, np.float32(0.0)))).astype(np.float32)


def td_dones(boundary: np.ndarray) -> np.ndarray:
    """1 on the last bar and on each bar before a fold boundary (a rollout ends there), else 0."""
    dones = np.zeros(len(boundary), np.float32)
    if len(dones):
        dones[-1] = 1.0
        dones[:-1][np.asarray(boundary)[1:]] = 1.0
    return dones


def abs_td_error(returns: np.ndarray, taken: np.ndarray) -> np.ndarray:
    """|R^λ − Q(s, a)|."""
    return np.abs(returns - taken).astype(np.float32)


def hold_segment_bars(action: np.ndarray) -> np.ndarray:
    """Consecutive Hold bars up to and including each bar (0 off Hold)."""
    out = np.zeros(len(action), dtype=np.int32)
    run = 0
    for t, a in enumerate(action):
        run = run + 1 if a == S.DIR_HOLD else 0
        out[t] = run
    return out


def synthetic_q(z: np.ndarray, config: Sp18Config) -> tuple[np.ndarray, np.ndarray]:
    """Model: (Q_online, Q_target) float32 [T, 13] of the state before each bar.

    Features: 1 and the three previous vol-normalised returns; weights
    N(0, 1/4) from ``net_seed``; the target net adds ``target_lag`` × N(0, 1/4).
    """
    rng = np.random.default_rng(config.net_seed)
    t_steps = len(z)
    feats = np.ones((t_steps, 4))
    for lag in (1, 2, 3):
        feats[lag:, lag] = z[:-lag]
        feats[:lag, lag] = 0.0
    w = rng.normal(0.0, 0.5, (4, S.N_ACTIONS))
    w_target = w + config.target_lag * rng.normal(0.0, 0.5, (4, S.N_ACTIONS))
    return ((config.q_scale * feats @ w).astype(np.float32),
            (config.q_scale * feats @ w_target).astype(np.float32))


def q_taken(q_online: np.ndarray, action_dir: np.ndarray) -> np.ndarray:
    """Σ over branches of Q_online at the taken action: the stream's direction, greedy elsewhere."""
    best = twin.branch_argmax(q_online)
    best[:, 0] = action_dir
    rows = np.arange(q_online.shape[0])
    total = np.zeros(q_online.shape[0], dtype=np.float32)
    for j in range(best.shape[1]):
        total = total + q_online[rows, best[:, j]]
    return total


def windows(boundary: np.ndarray, every: int) -> list[tuple[int, int]]:
    """[a, b) bar windows: a new one at every fold boundary and every ``every`` bars within a fold."""
    t_steps = len(boundary)
    cuts = {0, t_steps}
    start = 0
    for t in range(1, t_steps + 1):
        if t == t_steps or boundary[t]:
            cuts.update(range(start, t, every))
            cuts.add(t)
            start = t
    edges = sorted(cuts)
    return list(zip(edges[:-1], edges[1:]))


def _d_leg(stream: Sp18Stream, config: Sp18Config, ops, z: np.ndarray) -> dict[str, np.ndarray]:
    """The Hold rewards under each window's caps, the cap producer after each window, its state per bar."""
    t_steps, ret, vol, action = stream.steps, stream.next_log_return, stream.vol_proxy, stream.action_dir
    bars = hold_segment_bars(action)
    step_ret, ls_close = trade_returns(action, z)
    layout = SlotLayout(S.SLOTS)
    isv = layout.bootstrap_vector()
    reset_idx, _code, _src = layout.reset_plan()
    boot = isv.copy()
    out = {c: np.zeros(t_steps, np.float32) for c in (COL.hold_opp, COL.hold_chosen, COL.pos, COL.neg,
                                                        *STATE_COLUMNS)}
    out[COL.updated] = np.zeros(t_steps, dtype=bool)
    all_hold = np.full(t_steps, S.DIR_HOLD, dtype=np.int32)
    shaping, floor = np.float32(config.shaping_scale), np.float32(config.vol_floor)
    for a, b in windows(stream.boundary, config.cap_update_every):
        if stream.boundary[a]:
            isv[reset_idx] = boot[reset_idx]
        out[COL.pos][a:b], out[COL.neg][a:b] = twin.effective_caps(isv)
        both = ops.opp(np.concatenate([all_hold[a:b], action[a:b]]), np.tile(ret[a:b], 2), np.tile(vol[a:b], 2),
                       np.tile(bars[a:b], 2), isv, shaping, floor)
        out[COL.hold_opp][a:b], out[COL.hold_chosen][a:b] = both[: b - a], both[b - a:]
        new = ops.cap(isv, step_ret[a:b], ls_close[a:b], config.cap_params())
        out[COL.updated][b - 1] = new[S.IDX["HRC_SAMPLE_COUNT_INDEX"]] != isv[S.IDX["HRC_SAMPLE_COUNT_INDEX"]]
        isv = new
        for col, slot in zip(STATE_COLUMNS, S.PEARLS_AD):
            out[col][b - 1] = isv[slot]
            if b - 1 > a:  # rows inside a window show the state from before its launch
                out[col][a:b - 1] = out[col][a - 1] if a > 0 and not stream.boundary[a] else boot[slot]
    return out


def run(stream: Sp18Stream, config: Sp18Config, engine: str) -> pd.DataFrame:
    """The replay behind :meth:`ControllerModule.replay` for SP18."""
    ops = cuda_ops() if engine == "cuda" else twin_ops()
    t_steps = stream.steps
    ret, vol, action = stream.next_log_return, stream.vol_proxy, stream.action_dir
    z = vol_normalized(ret, vol, config.vol_floor)
    r_long = position_reward(z, config.position_neg_cap, config.position_pos_cap)
    r_short = position_reward(-z, config.position_neg_cap, config.position_pos_cap)
    cols = {COL.ret: ret, COL.vol: vol, COL.action: action, COL.z: z, COL.long: r_long, COL.short: r_short}
    cols.update(_d_leg(stream, config, ops, z))
    chosen = cols[COL.chosen] = chosen_reward(action, cols[COL.hold_chosen], r_long, r_short)

    # B-leg: DDQN bootstrap on the next state, TD(λ) with both q_next sources.
    q_on, q_tg = synthetic_q(z, config)
    nxt = np.minimum(np.arange(t_steps) + 1, t_steps - 1)
    q_next_target = ops.ddqn(q_on[nxt], q_tg[nxt])
    dones = td_dones(stream.boundary)
    td_args = (1, t_steps, np.float32(config.gamma), np.float32(config.td_lambda), int(config.max_trace))
    ret_defect, _ = ops.td(chosen, dones, chosen, *td_args)
    ret_fixed, _ = ops.td(chosen, dones, q_next_target, *td_args)
    taken = q_taken(q_on, action)
    cols.update({COL.q_next_target: q_next_target, COL.q_taken: taken, COL.done: dones,
                 COL.ret_defect: ret_defect, COL.ret_fixed: ret_fixed,
                 COL.err_defect: abs_td_error(ret_defect, taken), COL.err_fixed: abs_td_error(ret_fixed, taken)})
    cols = {c: cols[c] for c in COLUMNS}  # the columns in their declared order
    cols.update(config_columns(config, CONFIG_COLUMNS, P, t_steps))
    frame = frame_of(stream.step, stream.boundary, cols)
    frame.attrs["config"] = config.as_dict()
    return frame
