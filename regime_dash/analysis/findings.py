"""Findings: run-level statements where the spec's text and its code part ways, shown where it happens.

A check asks "does this row obey the spec's code?"; a finding asks "does what the
code did here keep the promise the spec's prose makes?". The kernels can be
exactly right and a promise still not hold: with Kelly resurrection (F2) on, the
dead zone cycles (flag 1, 0, 1, ...), DURATION restarts at every cycle, and the
TIMEOUT_FLAG safety net that Theorem 3's loss bound relies on can never fire.

Each finder takes a :class:`~regime_dash.analysis.view.FrameView` and the shared
:class:`~regime_dash.analysis.invariants.CheckOptions` and returns zero or more
:class:`Finding`; :func:`find` runs them all. docs/SPEC_NOTES.md lists every
reading of the spec these statements rest on, and each finding's severity and why.

Severity means one thing everywhere: ``fail`` where the run disagrees with the spec
(a promise broken in this run, a value its formula cannot give); ``info`` for
behaviour the spec allows (its code does this, only its prose says otherwise);
``warn`` only where the data cannot tell which of the two it is (and the message
names what is missing).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from regime_dash.analysis import view as v
from regime_dash.analysis.episodes import RESURRECTION_GAP, true_runs, dead_zone_episodes
from regime_dash.diag import catalogue as diag
from regime_dash.analysis.invariants import CheckOptions, within_ulps, ulp_tolerance
from regime_dash.analysis.view import ONE, FrameView, as_view

#: Finding severities, worst first. A ``fail`` finding makes ``check`` exit 1.
SEVERITIES = ("fail", "warn", "info")


@dataclass(frozen=True)
class Finding:
    """One run-level statement with its place and its numbers.

    Attributes
    ----------
    id
        Stable id, e.g. ``timeout_unreachable``.
    severity
        ``fail`` (the run disagrees with the spec), ``info`` (behaviour the spec allows) or
        ``warn`` (the data cannot tell which); see the module docstring.
    message
        One sentence a user understands.
    steps
        Steps it concerns (markers on a chart).
    spans
        ``(start, end)`` step stretches, inclusive (shaded on a chart).
    evidence
        The numbers behind it (JSON-ready).
    column
        The diag column (signal) it concerns, for drawing.
    fields
        RegimeConfig fields this finding makes ineffective (``timeout_unreachable``
        → ``("max_duration",)``): a sweep over them moves nothing here.
    """

    id: str
    severity: str
    message: str
    steps: list[int]
    spans: list[tuple[int, int]]
    evidence: dict
    column: str | None
    fields: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"id": self.id, "severity": self.severity, "message": self.message,
                "steps": [int(s) for s in self.steps], "spans": [[int(a), int(b)] for a, b in self.spans],
                "evidence": {k: _plain(x) for k, x in self.evidence.items()}, "column": self.column,
                "fields": list(self.fields)}


def _plain(x):
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        f = float(x)
        return f if math.isfinite(f) else None
    if isinstance(x, (list, tuple)):
        return [_plain(y) for y in x]
    return x


# ---- timeout_unreachable ----------------------------------------------------------------
def _timeout_unreachable(vw: FrameView, opt: CheckOptions) -> list[Finding]:
    """A dead zone that cycles longer than the trap limit while DURATION never nears max_duration."""
    if not vw.has(v.FLAG, v.DURATION, v.MAX_DURATION) or vw.n == 0:
        return []
    eps = dead_zone_episodes(vw, RESURRECTION_GAP)
    mx = vw.f32(v.MAX_DURATION)
    out = []
    for e in eps.itertuples(index=False):
        a, b = int(np.searchsorted(vw.step, e.start)), int(np.searchsorted(vw.step, e.end))
        limit = float(np.nanmax(mx[a:b + 1])) if np.isfinite(mx[a:b + 1]).any() else math.nan
        seen = float(e.max_duration)
        if e.cycles < 2 or e.timed_out or e.steps <= opt.trap_steps or not seen < limit:
            continue
        if _duration_carried(vw, a, b):  # the model switch duration_across_cycles ran: the timeout is reachable
            continue
        out.append(timeout_finding(int(e.start), int(e.end), int(e.cycles), int(e.steps), seen, limit,
                                   e.ended == "end_of_run"))
    return out


def timeout_finding(start: int, end: int, cycles: int, steps: int, seen: float, limit: float,
                    open_at_end: bool) -> Finding:
    """The ``timeout_unreachable`` finding of one cycling dead-zone episode (steps ``start``–``end``,
    DURATION at most ``seen`` against ``max_duration`` ``limit``; ``open_at_end``: the run ends inside it)."""
    # the episode outlived max_duration: a dead zone that did not cycle would have timed out
    outlived = steps > limit
    severity, why = _timeout_severity(outlived, open_at_end, limit)
    msg = (f"The dead zone cycled {cycles} times over steps {start}–{end} ({steps} steps) and "
           f"DURATION never exceeded {seen:g}, so TIMEOUT_FLAG (max_duration {limit:g}) could not fire: "
           f"{why} (replay with the model switch duration_across_cycles on to see the timeout the "
           f"spec's prose expects).")
    return Finding("timeout_unreachable", severity, msg, [start], [(start, end)],
                   {"cycles": cycles, "max_DURATION": seen, "max_duration": limit, "span": [start, end],
                    "steps": steps, "outlived_max_duration": bool(outlived)}, v.DURATION, ("max_duration",))


def _timeout_severity(outlived: bool, open_at_end: bool, limit: float) -> tuple[str, str]:
    """``fail`` when the cycling dead zone outlived max_duration (Theorem 3's bound broken here);
    ``warn`` when it was still open at the run's end, shorter so far (the data cannot tell whether
    it would have outlived it); ``info`` when it ended within max_duration (the bound held)."""
    if outlived:
        return "fail", "the dead-zone loss is not bounded as Theorem 3 claims"
    if open_at_end:
        return "warn", (f"the run ends inside it, before max_duration {limit:g}, so the data cannot tell "
                        f"whether Theorem 3's bound would have broken")
    return "info", f"the dead zone ended within max_duration {limit:g}, so Theorem 3's bound held in this run"


def _duration_carried(vw: FrameView, a: int, b: int) -> bool:
    """Whether DURATION counted on across a flag-off row of rows ``[a, b]``: the model switch
    ``duration_across_cycles`` ran there (the file says so), or the rows show it (no column)."""
    on = vw.switch("duration_across_cycles")
    if on is not None:
        return bool(on[a:b + 1].any())
    off = vw.f32(v.FLAG)[a:b + 1] == 0
    return bool((vw.f32(v.DURATION)[a:b + 1][off] > 0).any())


# ---- tail_on_drift ----------------------------------------------------------------------
#: Consecutive tail events that make a drift, not a shock.
DRIFT_RUN = 10


def _tail_on_drift(vw: FrameView, opt: CheckOptions) -> list[Finding]:
    """Tail events on many consecutive steps: the |Δworst| > kσ test firing on a steady drift."""
    if not vw.has(v.RECENCY) or vw.n == 0:
        return []
    tail = vw.f32(v.RECENCY) == 0
    deviation = vw.switch("tail_on_deviation")
    if deviation is not None:  # the literal |Δworst| test only: rows under the model switch tested the deviation
        tail &= ~deviation
    runs = [(a, b) for a, b in true_runs(tail) if b - a + 1 >= DRIFT_RUN]
    if not runs:
        return []
    spans = [(int(vw.step[a]), int(vw.step[b])) for a, b in runs]
    total = sum(b - a + 1 for a, b in runs)
    ev = {"runs": len(runs), "tail_steps": int(total), "longest": int(max(b - a + 1 for a, b in runs)),
          "spans": [list(sp) for sp in spans[:20]]}
    if vw.has(v.WORST, v.VARIANCE):
        d = np.abs(vw.f32(v.WORST) - vw.prev(v.WORST)).astype(np.float64)
        sig = np.sqrt(np.maximum(vw.f32(v.VARIANCE).astype(np.float64), 0.0))
        a, b = runs[0]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = d[a:b + 1] / sig[a:b + 1]
        ev["median_abs_dworst"] = float(np.nanmedian(d[a:b + 1]))
        ev["median_sigma"] = float(np.nanmedian(sig[a:b + 1]))
        ev["median_ratio"] = float(np.nanmedian(ratio[np.isfinite(ratio)])) if np.isfinite(ratio).any() else None
    msg = (f"A tail event fired on {ev['longest']} consecutive steps (from step {spans[0][0]}): the spec's test "
           f"compares |Δworst| with 3σ of Δworst's own spread, so a steady drift (Δworst about constant, σ "
           f"shrinking) reads as a tail every step and keeps ε at ε_min and τ boosted, although nothing shocked "
           f"(the model switch tail_on_deviation tests |Δworst − mean| instead).")
    # info: the spec's code and G22's words define this test; a drift tripping it is what they allow
    return [Finding("tail_on_drift", "info", msg, [sp[0] for sp in spans], spans, ev, v.RECENCY)]


# ---- tail_at_boundary -------------------------------------------------------------------
def _tail_at_boundary(vw: FrameView, opt: CheckOptions) -> list[Finding]:
    """A tail event on a boundary row or the one after: PREV_WORST was not aligned (issue γ)."""
    if not vw.has(v.RECENCY) or vw.n < 2 or not vw.boundary.any():
        return []
    tail = vw.f32(v.RECENCY) == 0
    after = np.zeros(vw.n, dtype=bool)
    after[1:] = vw.boundary[:-1] & vw.contiguous[1:]
    hit = tail & (vw.boundary | after)
    if not hit.any():
        return []
    steps = [int(s) for s in vw.step[hit]]
    msg = (f"A tail event fired at {len(steps)} fold/phase boundary(ies) (first at step {steps[0]}): the spec "
           f"aligns PREV_WORST_PNL with the session worst \"= 0 after session reset\", but its code copies "
           f"whatever the worst holds when the reset runs; where that is the old session's worst, |Δworst| "
           f"jumps and the first step of the new regime reads as a tail (the spurious event issue γ meant to stop).")
    # warn: the diag does not log PREV_WORST_PNL, so an unaligned copy and a real shock on the new
    # regime's first step look alike
    return [Finding("tail_at_boundary", "warn", msg, steps, [], {"boundaries": int(vw.boundary.sum()),
                                                                  "tails_at_boundary": len(steps)}, v.RECENCY)]


# ---- envelope_decay_horizon -------------------------------------------------------------
#: The spec's "What we explicitly accept" sentence: "keeps popart_σ conservatively high for ~500 steps (3 half-lives at α_d=0.01)".
SPEC_ENVELOPE_CLAIM_STEPS = 500


def _envelope_decay_horizon(vw: FrameView, opt: CheckOptions) -> list[Finding]:
    """The envelope's real decay horizon against the spec's "~500 steps (3 half-lives)".

    Measured from the run's largest capture: the steps until the envelope has closed 7/8 of the gap
    between that peak and its resting level before it (three half-lives of the excess).
    """
    if not vw.has(v.DECAY_ALPHA, v.ENVELOPE) or vw.n < 2:
        return []
    alpha = vw.f32(v.DECAY_ALPHA)
    alpha = float(np.nanmedian(alpha)) if np.isfinite(alpha).any() else math.nan
    env = vw.f32(v.ENVELOPE).astype(np.float64)
    if not (0 < alpha < 1) or not np.isfinite(env).any():
        return []
    peak = int(np.nanargmax(env))
    before = env[:peak][np.isfinite(env[:peak])]
    # the level the envelope rests at: before the shock where the run shows it, else the lowest after
    base = float(np.median(before)) if len(before) >= 10 else float(np.nanmin(env[peak:]))
    if not env[peak] > base > 0 or env[peak] < 2 * base:  # no shock worth the name
        return []
    target = base + (env[peak] - base) / 8.0
    below = np.flatnonzero(env[peak:] <= target)
    end = peak + int(below[0]) if len(below) else vw.n - 1
    bad = _decay_divergence(vw, opt, peak, end)
    return decay_finding(opt, alpha, int(vw.step[peak]), float(env[peak]), base, int(vw.step[end]),
                         bool(len(below)), bad, vw.has(diag.INPUT_COLUMNS["batch_max_abs"]))


def decay_finding(opt: CheckOptions, alpha: float, peak_step: int, peak: float, base: float, end_step: int,
                  decayed: bool, bad: dict | None, has_batch_max: bool) -> list[Finding]:
    """The envelope_decay_horizon finding from what the run showed: its peak, resting level, the step
    its excess closed 7/8 (``decayed``; else the run's last step) and its first divergent row
    (:func:`_decay_divergence`); shared by the full finder and the incremental carry."""
    half = math.log(2.0) / -math.log1p(-alpha)
    three = 3 * half
    ev = {"decay_alpha": alpha, "half_life": half, "three_half_lives": three,
          "spec_claim": SPEC_ENVELOPE_CLAIM_STEPS, "peak_step": peak_step, "peak": peak,
          "resting_envelope": base}
    if decayed:
        ev["measured_steps"] = int(end_step - peak_step)
        seen = f"here the envelope took {ev['measured_steps']} steps after its peak at step {peak_step}"
    else:
        seen = f"the run ends before the envelope's peak at step {peak_step} has decayed"
    msg = (f"At α_d = {alpha:g} the envelope's half-life is {half:.0f} steps, so three half-lives are "
           f"{three:.0f} steps, not the ~{SPEC_ENVELOPE_CLAIM_STEPS} of the spec's \"What we explicitly accept\" note (its Theorem 6 says ~200); {seen} to close "
           f"7/8 of its excess.")
    severity, why = _decay_severity(opt, bad, has_batch_max, ev)
    return [Finding("envelope_decay_horizon", severity, f"{msg} {why}", [peak_step], [(peak_step, end_step)], ev,
                    v.ENVELOPE)]


#: How much longer than three half-lives the envelope may take to close 7/8 of its excess before, without
#: the batch max, the data cannot tell a decay slower than α_d from batch maxima that stayed high.
SLOW_DECAY_FACTOR = 1.5


def _decay_severity(opt: CheckOptions, bad: dict | None, has_batch_max: bool, ev: dict) -> tuple[str, str]:
    """The envelope_decay_horizon's severity given the first divergent row of ``[peak, end]``, and the
    sentence that says why.

    ``fail``: a row where the envelope provably did not decay at its configured rate
    (:func:`_decay_divergence`). ``info``: the decay the kernel's formula gives at α_d (the spec's
    code allows it; only its prose's step counts are off). ``warn``: slower than
    :data:`SLOW_DECAY_FACTOR` × three half-lives, or not decayed by the run's end, without the
    per-step batch max that would tell a slow decay from high batch maxima.
    """
    if bad is not None:
        ev.update(bad)
        return "fail", (f"The envelope does not decay at its configured rate: at step {bad['step']} "
                        f"{bad['why']}.")
    if has_batch_max:
        return "info", "Every decay step matches (1 − α_d)·ema + α_d·max|r| on the logged batch max."
    slow = ev.get("measured_steps")
    if slow is None or slow > SLOW_DECAY_FACTOR * ev["three_half_lives"]:
        return "warn", (f"That is slower than α_d gives (or not seen), and the diag has no per-step batch max "
                        f"({diag.INPUT_COLUMNS['batch_max_abs']}) to tell a slow decay from batch maxima "
                        f"that stayed high.")
    return "info", "The envelope never fell faster than (1 − α_d) a step: the decay the spec's code gives."


def _decay_divergence(vw: FrameView, opt: CheckOptions, peak: int, end: int) -> dict | None:
    """The first row of ``(peak, end]`` where the envelope provably did not decay at α_d, or ``None``.

    Always provable: a fall below (1 − α_d)·previous (max|r| ≥ 0 keeps the EMA above it). With the
    batch max logged (``risk_stack.inputs.batch_max_abs``): any decay row (max|r| ≤ previous) whose
    envelope is not the kernel's float32 (1 − α_d)·ema + α_d·max|r|, within ``opt.ulps``.
    """
    rows = np.zeros(vw.n, dtype=bool)
    rows[peak + 1:end + 1] = True
    too_fast, off, floor, expect = decay_divergence_rows(vw, opt, rows)
    bad = too_fast | off
    if not bad.any():
        return None
    return decay_divergence_at(vw, int(np.flatnonzero(bad)[0]), too_fast, floor, expect, int(bad.sum()))


def decay_divergence_rows(vw: FrameView, opt: CheckOptions, rows: np.ndarray):
    """``(too_fast, off, floor, expect)`` over the rows of mask ``rows``: each row's divergence reads only
    it and the row before it (:func:`_decay_divergence` says what diverges)."""
    env, prev, alpha = vw.f32(v.ENVELOPE), vw.prev(v.ENVELOPE), vw.f32(v.DECAY_ALPHA)
    rows = rows & vw.contiguous & ~vw.boundary & ~vw.restart & np.isfinite(env) & np.isfinite(prev) \
        & np.isfinite(alpha)
    on = vw.switch("envelope")
    if on is not None:
        rows &= on
    floor = (ONE - alpha) * prev
    too_fast = rows & (env.astype(np.float64) < floor - ulp_tolerance(floor, opt.ulps))
    expect = np.full(vw.n, np.nan, dtype=np.float32)
    off = np.zeros(vw.n, dtype=bool)
    col = diag.INPUT_COLUMNS["batch_max_abs"]
    if vw.has(col):
        m = vw.f32(col)
        decay = rows & np.isfinite(m) & ~(m > prev)
        expect = (ONE - alpha) * prev + alpha * m  # the kernel's slow-decay line, float32
        off = decay & ~within_ulps(env, expect, opt.ulps)
    return too_fast, off, floor, expect


def decay_divergence_at(vw: FrameView, i: int, too_fast: np.ndarray, floor: np.ndarray, expect: np.ndarray,
                        count: int) -> dict:
    """The evidence of divergent row ``i`` (of :func:`decay_divergence_rows`), ``count`` divergent rows in all."""
    env, prev = vw.f32(v.ENVELOPE), vw.prev(v.ENVELOPE)
    logged = float(env[i])
    if too_fast[i]:
        why = (f"it fell from {float(prev[i]):.6g} to {logged:.6g}, below (1 − α_d)·previous = "
               f"{float(floor[i]):.6g}, faster than any batch allows")
        want = float(floor[i])
    else:
        col = diag.INPUT_COLUMNS["batch_max_abs"]
        why = (f"(1 − α_d)·{float(prev[i]):.6g} + α_d·max|r| {float(vw.f32(col)[i]):.6g} gives "
               f"{float(expect[i]):.6g}, the file logs {logged:.6g}")
        want = float(expect[i])
    return {"step": int(vw.step[i]), "why": why, "expected": want, "logged": logged, "divergent_steps": count}


# ---- tau_unclamped ----------------------------------------------------------------------
def _tau_unclamped(vw: FrameView, opt: CheckOptions) -> list[Finding]:
    """τ above 1: the "final τ clamp" the spec inserts its boost before is not in its code."""
    cols = [c for c in (v.TAU_ACTION, v.TAU_MIN_EFF) if vw.has(c)]
    if not cols or vw.n == 0:
        return []
    over = np.zeros(vw.n, dtype=bool)
    top = -math.inf
    for c in cols:
        a = vw.f32(c)
        over |= np.isfinite(a) & (a > 1)
        if np.isfinite(a).any():
            top = max(top, float(np.nanmax(a)))
    if not over.any():
        return []
    steps = [int(s) for s in vw.step[over]]
    spans = [(int(vw.step[a]), int(vw.step[b])) for a, b in true_runs(over)][:20]
    msg = (f"τ exceeded 1 on {len(steps)} step(s) (max {top:.4g}, first at step {steps[0]}): the spec inserts "
           f"its boost \"before the final τ clamp\", but its code ends in τ = max(τ, τ_min·boost) and no "
           f"clamp to a quantile level follows, so τ_min·boost above 1 passes through.")
    # warn: the diag logs τ as the spec's kernel leaves it; whether the trainer's "final τ clamp" the
    # prose names runs after it, the data cannot tell
    return [Finding("tau_unclamped", "warn", msg, steps[:20], spans, {"max_tau": top, "steps_over_1": len(steps)},
                    v.TAU_MIN_EFF)]


# ---- fused_mirror_drift -------------------------------------------------------------------
#: The controllers each mirror switch guards: (switch, the block it mirrors, the column it writes).
_MIRRORS = (("fused_mirror_resurrection", "Layer-4 branch's F2 resurrection", v.KELLY),
            ("fused_mirror_tau_boost", "Layer-2 branch's F5 τ boost", v.TAU_MIN_EFF))


def fused_mirror_drift(fused: pd.DataFrame | FrameView, single: pd.DataFrame | FrameView) -> list[Finding]:
    """The first step where a fused-path replay parts from the single path's replay of the same inputs.

    The spec's step 8, ``rl_fused_controllers``, "mirrors single-controller
    behavior"; a mirror switch off (``fused_mirror_*``) is a fused copy that
    never got the F2 or F5 block. This finding takes both frames, since one
    frame cannot say what the other path would have done after the paths part:
    a caller that holds the stream replays it on both paths
    (``replay --controllers fused``, the Replay page) or is handed both files
    (``check FUSED --single SINGLE``). Every column but the config ones
    (``risk_stack.config.*``) is compared, step by step (:func:`~regime_dash.analysis.diff.diff_runs`).

    Returns
    -------
    One ``fail`` finding where the frames differ, none where they agree (bit for bit).

    Raises
    ------
    ValidationError
        ``fused`` does not say it ran the fused path, or ``single`` says it did.
    """
    from regime_dash.diag import catalogue as diag
    from regime_dash.analysis.diff import diff_runs
    from regime_dash.errors import ValidationError

    fv, sv = as_view(fused), as_view(single)
    for name, vw, want in (("fused", fv, True), ("single", sv, False)):
        ran = vw.has(diag.FUSED_COLUMN) and bool((vw.f32(diag.FUSED_COLUMN) == 1).all())
        if ran != want:
            raise ValidationError(f"the {name} frame {'does not say' if want else 'says'} it ran the fused "
                                  f"controllers ({diag.FUSED_COLUMN})", field=name, value=ran)
    cols = [c for c in fv.frame.columns if c in sv.frame.columns and not c.startswith(diag.P + "config.")]
    d = diff_runs(fv.frame, sv.frame, cols)
    if d.identical or d.first_step is None:
        return []
    first = int(d.first_step)
    row_f, row_s = int(np.searchsorted(fv.step, first)), int(np.searchsorted(sv.step, first))
    at_first = [f.column for f in d.fields if f.first_step == first]
    off = [(name, what, col) for name, what, col in _MIRRORS if (s := fv.switch(name)) is not None and not s.all()]
    ev = {"first_step": first, "columns_at_first_step": at_first,
          "fused_at_first_step": {c: float(fv.f32(c)[row_f]) for c in at_first if fv.has(c)},
          "single_at_first_step": {c: float(sv.f32(c)[row_s]) for c in at_first if sv.has(c)},
          "mirrors_off": [name for name, _, _ in off], "rows_compared": d.rows_compared,
          "differing_columns": {f.column: f.rows for f in d.fields}}
    ev.update(_drift_consequences(fv, sv))
    column = next((c for _, _, c in _MIRRORS if c in at_first), at_first[0] if at_first else None)
    why = (" and ".join(f"its {what} is off ({name})" for name, what, _ in off)
           or "no mirror switch is off, so the fused copy itself differs")
    msg = (f"The fused controller path parts from the single one at step {first} "
           f"({', '.join(at_first[:3])}): rl_fused_controllers should mirror the single controllers, but {why}. "
           f"After that, kelly_f stays 0 on {ev['kelly_zero_where_single_resurrects']} step(s) the single path "
           f"resurrects (the trap is not escaped) and τ_min is not boosted on {ev['tau_not_boosted']} step(s).")
    return [Finding("fused_mirror_drift", "fail", msg, [first], [(first, int(fv.step[-1]))], ev, column,
                    tuple(name for name, _, _ in off))]


def _drift_consequences(fv: FrameView, sv: FrameView) -> dict:
    """Steps (both frames' shared steps) where the fused kelly_f is 0 and the single one is not, and where
    the fused τ_min_eff is below the single one's."""
    common, ia, ib = np.intersect1d(fv.step, sv.step, return_indices=True)
    out = {"kelly_zero_where_single_resurrects": 0, "tau_not_boosted": 0}
    if fv.has(v.KELLY) and sv.has(v.KELLY):
        kf, ks = fv.f32(v.KELLY)[ia], sv.f32(v.KELLY)[ib]
        out["kelly_zero_where_single_resurrects"] = int(((kf == 0) & (ks > 0)).sum())
    if fv.has(v.TAU_MIN_EFF) and sv.has(v.TAU_MIN_EFF):
        out["tau_not_boosted"] = int((fv.f32(v.TAU_MIN_EFF)[ia] < sv.f32(v.TAU_MIN_EFF)[ib]).sum())
    return out


#: Every finder, in report order.
FINDERS: tuple[tuple[str, Callable[[FrameView, CheckOptions], list[Finding]]], ...] = (
    ("timeout_unreachable", _timeout_unreachable),
    ("tail_on_drift", _tail_on_drift),
    ("tail_at_boundary", _tail_at_boundary),
    ("envelope_decay_horizon", _envelope_decay_horizon),
    ("tau_unclamped", _tau_unclamped),
)
#: Finding ids in report order; ``fused_mirror_drift`` last, the one that needs a second frame
#: (:func:`fused_mirror_drift`, run by :func:`~regime_dash.analysis.verdict.verdict` when given ``single``).
FINDING_IDS: tuple[str, ...] = (*(i for i, _ in FINDERS), "fused_mirror_drift")


def find(frame: pd.DataFrame | FrameView, options: CheckOptions | None = None) -> list[Finding]:
    """Every finding on one diag frame (canonical column names), in :data:`FINDING_IDS` order.

    Parameters
    ----------
    frame
        A diag frame or a prepared :class:`FrameView`.
    options
        The checks' shared options (``trap_steps`` is the limit a cycling dead zone is measured against).
    """
    vw, opt = as_view(frame), options or CheckOptions()
    out: list[Finding] = []
    for _id, fn in FINDERS:
        out.extend(fn(vw, opt))
    return out
