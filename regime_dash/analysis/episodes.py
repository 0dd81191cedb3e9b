"""Episodes and events found in a diag frame: what happened, and where.

Every function takes a :class:`~regime_dash.analysis.view.FrameView` (or a frame
with canonical column names) and returns a DataFrame, one row per episode or
event, with trainer step numbers. A function whose fields are missing raises
:class:`~regime_dash.errors.ValidationError` naming them; :func:`find_all`
collects those as skips instead.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from regime_dash.analysis import view as v
from regime_dash.analysis.view import FrameView, as_view
from regime_dash.errors import ValidationError

#: Flag-off steps between two dead-zone runs that still make one recovery episode.
#: Resurrection produces exactly one: kelly_f(t) = ε clears the flag at t+1 (the
#: observer reads the prior kelly_f); if no account opened, analytic Kelly is 0
#: again and the flag is back at t+2.
RESURRECTION_GAP = 1


def _need(vw: FrameView, what: str, *cols: str) -> None:
    missing = vw.missing(cols)
    if missing:
        raise ValidationError(f"{what} needs field(s) {', '.join(missing)}, missing from the frame",
                              field=missing[0], value=missing)


def run_bounds(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(first_rows, last_rows)`` int64 arrays of the runs of True in ``mask``."""
    idx = np.flatnonzero(mask)
    if not len(idx):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    breaks = np.flatnonzero(np.diff(idx) > 1)
    return np.r_[idx[0], idx[breaks + 1]].astype(np.int64), np.r_[idx[breaks], idx[-1]].astype(np.int64)


def true_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """``[(first_row, last_row)]`` of the runs of True in ``mask``."""
    a, b = run_bounds(mask)
    return list(zip(a.tolist(), b.tolist()))


def _in_range_sums(values: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``values[a_i:b_i + 1].sum()`` for every i, from one cumulative sum."""
    cs = np.concatenate(([0], np.cumsum(values, dtype=np.int64)))
    return cs[b + 1] - cs[a]


def _episode_groups(vw: FrameView, on: np.ndarray, merge_gap: int):
    """``(first_rows, last_rows, cycles)`` of the flag runs merged across gaps of at most ``merge_gap`` steps."""
    a, b = run_bounds(on)
    if not len(a):
        return a, b, np.zeros(0, np.int64)
    opens = np.r_[True, (vw.step[a[1:]] - vw.step[b[:-1]] - 1) > merge_gap]
    first = np.flatnonzero(opens)
    last = np.r_[first[1:] - 1, len(a) - 1]
    return a[first], b[last], (last - first + 1).astype(np.int64)


def _col_at(vw: FrameView, col: str, rows) -> list:
    if col not in vw.frame.columns:
        return [None] * len(rows)
    return [vw.frame[col].iloc[r] for r in rows]


def dead_zone_episodes(frame: pd.DataFrame | FrameView, merge_gap: int = RESURRECTION_GAP) -> pd.DataFrame:
    """Dead-zone episodes: start, end, steps, how each ended, resurrection cycles.

    Runs of ``dead_zone.flag == 1`` separated by at most ``merge_gap`` flag-off
    steps are one recovery episode (the one-step on/off cycle of resurrection);
    ``cycles`` counts the runs merged into it.

    Returns
    -------
    DataFrame
        ``start``, ``end`` (steps of the first and last flagged row), ``steps``
        (``end - start + 1``), ``on_steps`` (flagged rows), ``cycles``,
        ``max_duration`` (largest duration value seen), ``timed_out``, ``ended``
        (``"timeout"`` when the timeout flag fired in it, ``"end_of_run"`` when the
        run ends inside it, else ``"exit"``), ``fold`` and ``phase`` at the start.
    """
    vw = as_view(frame)
    _need(vw, "dead_zone_episodes", v.FLAG)
    if isinstance(merge_gap, bool) or not isinstance(merge_gap, (int, np.integer)) or merge_gap < 0:
        raise ValidationError(f"merge_gap must be a whole number >= 0, got {merge_gap!r}",
                              field="merge_gap", value=merge_gap)
    key = ("dead_zone_episodes", int(merge_gap))
    # the summary, the findings and the finders all ask for it
    return vw.memo(key, lambda: _dead_zone_table(vw, int(merge_gap))).copy()


def _dead_zone_table(vw: FrameView, merge_gap: int) -> pd.DataFrame:
    on = vw.f32(v.FLAG) == 1
    dur = vw.f32(v.DURATION) if vw.has(v.DURATION) else np.full(vw.n, np.nan, np.float32)
    to = vw.f32(v.TIMEOUT) == 1 if vw.has(v.TIMEOUT) else np.zeros(vw.n, dtype=bool)
    a, b, cycles = _episode_groups(vw, on, merge_gap)
    timed_out = _in_range_sums(to, a, b) > 0
    tail_off = vw.n - 1 - b  # flag-off rows after each episode
    at_end = (b == vw.n - 1) | ((tail_off <= merge_gap) & (vw.step[-1] - vw.step[b] <= merge_gap)) if vw.n else b
    inside = np.zeros(vw.n + 1, np.int64)
    np.add.at(inside, a, 1)
    np.add.at(inside, b + 1, -1)
    masked = np.where(np.cumsum(inside[:-1]) > 0, dur, np.nan)
    with np.errstate(invalid="ignore"):
        max_dur = np.fmax.reduceat(masked, a).astype(np.float64) if len(a) else np.zeros(0)
    out = pd.DataFrame({"start": vw.step[a].astype(int), "end": vw.step[b].astype(int),
                        "steps": (vw.step[b] - vw.step[a] + 1).astype(int),
                        "on_steps": _in_range_sums(on, a, b).astype(int), "cycles": cycles.astype(int),
                        "max_duration": max_dur, "timed_out": timed_out.astype(bool),
                        "ended": np.where(timed_out, "timeout", np.where(at_end, "end_of_run", "exit")).astype(object)},
                       columns=["start", "end", "steps", "on_steps", "cycles", "max_duration", "timed_out", "ended"])
    out["fold"] = _col_at(vw, "fold", a.tolist())
    out["phase"] = _col_at(vw, "phase", a.tolist())
    return out


def tail_event_rows(frame: pd.DataFrame | FrameView) -> np.ndarray:
    """Row positions (in step order) of the tail events: where the observer reset tail recency to 0.

    The rows alone, without :func:`tail_events`' columns, which need the view's boundaries
    (a chart marking the events draws none of them: at 1M rows the boundaries were most of it)."""
    vw = as_view(frame)
    _need(vw, "tail_events", v.RECENCY)
    return np.flatnonzero(vw.f32(v.RECENCY) == 0)


def tail_events(frame: pd.DataFrame | FrameView) -> pd.DataFrame:
    """Tail events: rows where the observer reset tail recency to 0.

    Returns
    -------
    DataFrame
        ``step``, ``abs_dworst`` = |worst_t − worst_{t−1}| (NaN where the previous
        row is not the previous step, or at a boundary, where PREV_WORST was
        aligned), ``sigma`` = sqrt(Welford variance) the observer compared with,
        ``threshold`` = sigma_threshold·sigma, ``ratio`` = abs_dworst / sigma,
        ``popart_sigma`` (σ_effective at that step, success criterion 7).
    """
    vw = as_view(frame)
    rows = tail_event_rows(vw)
    out = pd.DataFrame({"step": vw.step[rows].astype(np.int64)})

    def col(name: str) -> np.ndarray:
        return vw.f32(name)[rows].astype(np.float64) if vw.has(name) else np.full(len(rows), np.nan)

    if vw.has(v.WORST):
        d = np.abs(vw.f32(v.WORST) - vw.prev(v.WORST)).astype(np.float64)
        d[~vw.checked] = np.nan
        out["abs_dworst"] = d[rows]
    else:
        out["abs_dworst"] = np.nan
    sigma = np.sqrt(col(v.VARIANCE).astype(np.float32)).astype(np.float64)
    out["sigma"] = sigma
    out["threshold"] = col(v.SIGMA_THR) * sigma
    with np.errstate(divide="ignore", invalid="ignore"):
        out["ratio"] = out["abs_dworst"].to_numpy() / sigma
    out["popart_sigma"] = col(v.SIGMA)
    return out


def timeouts(frame: pd.DataFrame | FrameView) -> pd.DataFrame:
    """Steps where the dead-zone timeout flag turned on: ``step``, ``duration``, ``max_duration``."""
    vw = as_view(frame)
    _need(vw, "timeouts", v.TIMEOUT)
    rows = [a for a, _ in true_runs(vw.f32(v.TIMEOUT) == 1)]
    return pd.DataFrame({
        "step": vw.step[rows].astype(np.int64),
        "duration": vw.f32(v.DURATION)[rows].astype(np.float64) if vw.has(v.DURATION) else np.nan,
        "max_duration": vw.f32(v.MAX_DURATION)[rows].astype(np.float64) if vw.has(v.MAX_DURATION) else np.nan,
    })


def floor_active(frame: pd.DataFrame | FrameView) -> np.ndarray:
    """Rows where the F4 floor sets σ: σ equals the envelope and the envelope is above the EMA σ."""
    vw = as_view(frame)
    _need(vw, "floor_active", v.SIGMA, v.ENVELOPE, v.POPART_VAR)
    sig, env = vw.f32(v.SIGMA), vw.f32(v.ENVELOPE)
    ema_sigma = np.sqrt(vw.f32(v.POPART_VAR))  # float32 sqrt, as the kernel takes it
    return (sig == env) & (env > ema_sigma)


def floor_spans(frame: pd.DataFrame | FrameView) -> pd.DataFrame:
    """Spans where the envelope floor is active: ``start``, ``end``, ``steps``, ``peak_envelope``,
    ``ema_sigma`` (the PopArt EMA σ at the start, what σ would have been)."""
    vw = as_view(frame)
    active = floor_active(vw)
    env = vw.f32(v.ENVELOPE)
    ema_sigma = np.sqrt(vw.f32(v.POPART_VAR))
    rows = [{"start": int(vw.step[a]), "end": int(vw.step[b]), "steps": int(vw.step[b] - vw.step[a] + 1),
             "peak_envelope": float(env[a:b + 1].max()), "ema_sigma": float(ema_sigma[a])}
            for a, b in true_runs(active)]
    return pd.DataFrame(rows, columns=["start", "end", "steps", "peak_envelope", "ema_sigma"])


def boundaries(frame: pd.DataFrame | FrameView) -> pd.DataFrame:
    """Detected boundaries: ``step``, ``reasons`` (comma-joined, see :mod:`.view`), ``fold``, ``phase``."""
    vw = as_view(frame)
    rows = np.flatnonzero(vw.boundary)
    reasons = [",".join(r for r, m in vw.boundary_reasons.items() if m[i]) for i in rows]
    return pd.DataFrame({"step": vw.step[rows].astype(np.int64), "reasons": reasons,
                         "fold": _col_at(vw, "fold", rows), "phase": _col_at(vw, "phase", rows)})


def transitions(frame: pd.DataFrame | FrameView) -> pd.DataFrame:
    """v9 transitions: one per run of ``remaining >= 0``.

    Returns
    -------
    DataFrame
        ``start`` (step), ``start_value``, ``steps`` (steps with remaining >= 0),
        ``end`` (last step with remaining >= 0), ``end_value`` (remaining on the
        row after: −1 when the ramp completed, else the last value when a new
        boundary or the end of the run cut it), ``completed``.
    """
    vw = as_view(frame)
    _need(vw, "transitions", v.REMAINING)
    rem = vw.f32(v.REMAINING)
    active = rem >= 0
    rows = []
    # a restart inside a run (a boundary during a transition) starts a new transition
    cut = active & vw.boundary
    for a, b in true_runs(active):
        starts = [a] + [i for i in np.flatnonzero(cut[a + 1:b + 1]) + a + 1]
        ends = [s - 1 for s in starts[1:]] + [b]
        for s, e in zip(starts, ends):
            nxt = e + 1
            completed = nxt < vw.n and rem[nxt] == -1
            rows.append({"start": int(vw.step[s]), "start_value": float(rem[s]),
                         "steps": int(vw.step[e] - vw.step[s] + 1),
                         "end": int(vw.step[e]),
                         "end_value": -1.0 if completed else float(rem[e]), "completed": bool(completed)})
    return pd.DataFrame(rows, columns=["start", "start_value", "steps", "end", "end_value", "completed"])


#: name -> finder, in report order.
EVENT_FINDERS: dict[str, Callable[[FrameView], pd.DataFrame]] = {
    "tail": tail_events,
    "timeouts": timeouts,
    "floor_spans": floor_spans,
    "transitions": transitions,
    "boundaries": boundaries,
}


def find_all(frame: pd.DataFrame | FrameView) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame],
                                                         dict[str, str]]:
    """``(episodes, events, skipped)``: every finder's table; ``skipped`` says why a finder did not run."""
    vw = as_view(frame)
    skipped: dict[str, str] = {}
    episodes: dict[str, pd.DataFrame] = {}
    events: dict[str, pd.DataFrame] = {}
    try:
        episodes["dead_zone"] = dead_zone_episodes(vw)
    except ValidationError as exc:
        skipped["dead_zone"] = str(exc)
    for name, fn in EVENT_FINDERS.items():
        try:
            events[name] = fn(vw)
        except ValidationError as exc:
            skipped[name] = str(exc)
    return episodes, events, skipped


def summary(frame: pd.DataFrame | FrameView) -> dict:
    """Headline counts the UI shows; a value is ``None`` when its fields are missing.

    Keys: ``rows``, ``rows_without_step`` (left out: no numeric step), ``first_step``, ``last_step``, ``boundaries``,
    ``dead_zone_steps``, ``dead_zone_episodes``, ``longest_duration``,
    ``timeouts``, ``tail_events``, ``floor_active_steps``, ``kelly_min``,
    ``kelly_mean``, ``sigma_max``.
    """
    vw = as_view(frame)

    def stat(col: str, fn) -> float | None:
        if not vw.has(col):
            return None
        a = vw.f32(col)
        a = a[np.isfinite(a)]
        return float(fn(a.astype(np.float64))) if len(a) else None

    def count(fn) -> int | None:
        try:
            return int(len(fn(vw)))
        except ValidationError:
            return None

    out = {
        "rows": vw.n,
        "rows_without_step": vw.rows_without_step,
        "first_step": int(vw.step[0]) if vw.n else None,
        "last_step": int(vw.step[-1]) if vw.n else None,
        "boundaries": int(vw.boundary.sum()),
        "dead_zone_steps": int((vw.f32(v.FLAG) == 1).sum()) if vw.has(v.FLAG) else None,
        "dead_zone_episodes": count(dead_zone_episodes),
        "longest_duration": stat(v.DURATION, np.max),
        "timeouts": count(timeouts),
        "tail_events": int((vw.f32(v.RECENCY) == 0).sum()) if vw.has(v.RECENCY) else None,
        "floor_active_steps": None,
        "kelly_min": stat(v.KELLY, np.min),
        "kelly_mean": stat(v.KELLY, np.mean),
        "sigma_max": stat(v.SIGMA, np.max),
    }
    try:
        out["floor_active_steps"] = int(floor_active(vw).sum())
    except ValidationError:
        pass
    return out
