"""Spec invariants and success criteria, checked on a diag frame.

Each check has a stable id (CI scripts gate on it), reads canonical columns
through a :class:`~regime_dash.analysis.view.FrameView`, and returns a
:class:`CheckResult`: ``pass``, ``fail`` or ``skip`` (skip names the missing
fields), the number of violating rows, the first violating step, up to
:data:`MAX_STEPS` violating steps and a one-line detail.

Numerics. Formulas are recomputed in float32, operation by operation as the
kernels write them (a separate multiply and add, as with ``--fmad=false``).
Counters and flags are compared exactly: they are whole numbers far below 2²⁴,
so float32 holds them exactly. Continuous formulas allow :data:`ULPS` float32
ulps of the expected value (at least of 1.0; ``CheckOptions.ulps`` changes it): the regime-dash engines agree
bit for bit, and the slack covers a trainer built with FMA contraction or
fast-math division, which move a result by one or two ulps.

Boundaries and gaps. A step-to-step rule is checked only where a row follows
the previous one by exactly one step and is not a boundary. At a boundary the
rule becomes "the reset value, or the ordinary successor" (so a boundary is never
a violation); across a gap in ``step`` (a file logged every k steps) the rule is
widened to what k steps can do. Where ``step`` does not increase (a trainer that
restarted from a checkpoint logs steps again) only per-row rules apply. A row
whose inputs are NaN or infinite is not judged by a formula check; that is
the job of ``finite_regime_fields``, so one bad value is blamed once.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np
import pandas as pd

from regime_dash.diag import catalogue as diag
from regime_dash.analysis import view as v
from regime_dash.analysis.episodes import true_runs
from regime_dash.analysis.view import F32, ONE, FrameView, as_view, countdown_next
from regime_dash.errors import ValidationError

#: Violating steps listed per check.
MAX_STEPS = 20
#: Tolerance of recomputed continuous formulas, in float32 ulps.
ULPS = 4
_EPS = np.float32(np.finfo(np.float32).eps)
#: Success criterion 1: longest allowed stretch of kelly_f = 0 with every account flat.
TRAP_STEPS = 200
#: Success criterion 2: v8 fold-1 eval pnl baseline, dollars.
EVAL_PNL_BASELINE = -507_000.0
#: Success criterion 5: allowed throughput loss against the v9 baseline.
THROUGHPUT_TOLERANCE = 0.05

#: Check statuses, worst first: ``warn`` is a result the file cannot settle (it passes the exit code).
STATUSES = ("fail", "warn", "pass", "skip")


@dataclass(frozen=True)
class CheckOptions:
    """Knobs of the success-criterion checks (the invariants have none).

    Attributes
    ----------
    trap_steps
        Criterion 1: a stretch longer than this many steps is a Kelly trap.
    eval_pnl_baseline
        Criterion 2: the eval pnl each fold must reach.
    baseline_sps
        Criterion 5: the v9 baseline in steps per second; ``None`` skips the check.
    throughput_window
        Criterion 5: steps per measured window.
    ulps
        Tolerance of the recomputed continuous formulas in float32 ulps (default
        :data:`ULPS`); raise it for a trainer that logs floats with fewer digits.
    rederive_ulps
        Slack of the re-derived formulas that hold a multiply-add, in float32 ulps (default 0: exact, as
        the kernels are built with ``--fmad=false``); 1 or 2 for a trainer built with FMA contraction.
    """

    trap_steps: int = TRAP_STEPS
    eval_pnl_baseline: float = EVAL_PNL_BASELINE
    baseline_sps: float | None = None
    throughput_window: int = 1000
    ulps: float = ULPS
    rederive_ulps: float = 0.0

    def __post_init__(self):
        if isinstance(self.trap_steps, bool) or not isinstance(self.trap_steps, (int, np.integer)) \
                or self.trap_steps < 1:
            raise ValidationError(f"trap_steps must be a whole number >= 1, got {self.trap_steps!r}",
                                  field="trap_steps", value=self.trap_steps)
        if self.baseline_sps is not None and not (np.isfinite(self.baseline_sps) and self.baseline_sps > 0):
            raise ValidationError(f"baseline_sps must be a positive number, got {self.baseline_sps!r}",
                                  field="baseline_sps", value=self.baseline_sps)
        if not np.isfinite(self.eval_pnl_baseline):
            raise ValidationError(f"eval_pnl_baseline must be finite, got {self.eval_pnl_baseline!r}",
                                  field="eval_pnl_baseline", value=self.eval_pnl_baseline)
        if isinstance(self.ulps, bool) or not isinstance(self.ulps, (int, float, np.integer, np.floating)) \
                or not np.isfinite(self.ulps) or self.ulps < 0:
            raise ValidationError(f"ulps must be a finite number >= 0, got {self.ulps!r}", field="ulps",
                                  value=self.ulps)
        if isinstance(self.rederive_ulps, bool) or not isinstance(self.rederive_ulps, (int, float, np.integer,
                                                                                       np.floating)) \
                or not np.isfinite(self.rederive_ulps) or self.rederive_ulps < 0:
            raise ValidationError(f"rederive_ulps must be a finite number >= 0, got {self.rederive_ulps!r}",
                                  field="rederive_ulps", value=self.rederive_ulps)
        if isinstance(self.throughput_window, bool) or not isinstance(self.throughput_window, (int, np.integer)) \
                or self.throughput_window < 2:
            raise ValidationError(f"throughput_window must be a whole number >= 2, got {self.throughput_window!r}",
                                  field="throughput_window", value=self.throughput_window)


@dataclass(frozen=True)
class CheckResult:
    """Outcome of one check: the one result type of core invariants, success criteria and modules.

    Attributes
    ----------
    id, status
        Stable check id; ``pass``, ``fail``, ``warn`` (the file cannot settle it)
        or ``skip`` (``missing`` names the absent fields).
    violations, first_step, steps
        Violating rows, the first one's step, up to :data:`MAX_STEPS` steps.
    detail
        One line a user reads.
    spans
        ``[start, end]`` step stretches (inclusive) where the fault is a stretch
        (a Kelly trap), up to :data:`MAX_STEPS`.
    column
        The diag column (signal) the check concerns, so a chart can place it.
    evidence
        Numbers behind the verdict (JSON-ready).
    """

    id: str
    status: str
    violations: int
    first_step: int | None
    steps: list[int]
    detail: str
    missing: list[str] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)
    column: str | None = None
    evidence: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"id": self.id, "status": self.status, "violations": self.violations,
                "first_step": self.first_step, "steps": list(self.steps),
                "spans": [[int(a), int(b)] for a, b in self.spans], "column": self.column,
                "detail": self.detail, "evidence": dict(self.evidence)}


@dataclass(frozen=True)
class Check:
    """One registered check: the columns it needs and the function that finds violations.

    ``fn(view, options)`` returns ``(violating rows as bool[T], detail)``, or a
    ``str`` to skip with that reason although every needed column is present.
    ``any_of`` names columns of which at least one must be present (``prefix*``
    matches any column under the prefix).
    """

    id: str
    title: str
    needs: tuple[str, ...]
    fn: Callable[[FrameView, CheckOptions], "tuple[np.ndarray, str] | Found | str"]
    any_of: tuple[str, ...] = ()
    column: str | None = None


@dataclass
class Found:
    """What a check function found, when more than violating rows and a detail line.

    ``spans`` are row ranges ``(first_row, last_row)``; ``status`` overrides the
    pass/fail that ``bad`` implies (``warn``); ``column`` overrides the check's.
    """

    bad: np.ndarray
    detail: str
    spans: list[tuple[int, int]] = field(default_factory=list)
    status: str | None = None
    evidence: dict = field(default_factory=dict)
    column: str | None = None


def ulp_tolerance(expected: np.ndarray, ulps: float) -> np.ndarray:
    """The absolute tolerance of ``ulps`` float32 ulps around ``expected`` (at least ``ulps`` ulps of 1.0)."""
    return np.float64(ulps) * np.float64(_EPS) * np.maximum(np.abs(expected.astype(np.float64)), 1.0)


def within_ulps(actual: np.ndarray, expected: np.ndarray, ulps: float) -> np.ndarray:
    """Where ``actual`` is within :func:`ulp_tolerance` of ``expected`` (in float64)."""
    return np.abs(actual.astype(np.float64) - expected.astype(np.float64)) <= ulp_tolerance(expected, ulps)


def _finite(*arrays: np.ndarray) -> np.ndarray:
    ok = np.ones(len(arrays[0]), dtype=bool)
    for a in arrays:
        ok &= np.isfinite(a)
    return ok


def _fmt(x: float) -> str:
    return f"{float(x):.9g}"


def _first(view: FrameView, bad: np.ndarray, what: Callable[[int], str]) -> str:
    i = int(np.flatnonzero(bad)[0])
    return f"first at step {int(view.step[i])}: {what(i)}"


def _note_unverified(view: FrameView, finite: np.ndarray) -> str:
    n = int((~finite).sum())
    return f"; {n} row(s) with non-finite inputs not verified here (see finite_regime_fields)" if n else ""


# ---- invariants ---------------------------------------------------------------------
def _flag_binary(view: FrameView, _opt: CheckOptions):
    cols = [c for c in (v.FLAG, v.TIMEOUT) if view.has(c)]
    bad = np.zeros(view.n, dtype=bool)
    per = {}
    for c in cols:
        a = view.f32(c)
        b = np.isfinite(a) & ~((a == 0) | (a == 1))  # NaN/inf: finite_regime_fields blames those
        per[c] = b
        bad |= b
    if not bad.any():
        return bad, f"{', '.join(c.rsplit('.', 1)[1] for c in cols)} hold only 0 and 1"

    def what(i):
        return ", ".join(f"{c.rsplit('.', 1)[1]}={_fmt(view.f32(c)[i])}" for c in cols if per[c][i])
    return bad, _first(view, bad, what)


def _flat_count_range(view: FrameView, _opt: CheckOptions):
    flat, b = view.f32(v.FLAT), view.f32(v.B_SIZE)
    finite = _finite(flat, b)
    bad = finite & ~((flat >= 0) & (flat <= b) & (flat == np.floor(flat)))
    if not bad.any():
        return bad, "flat_count is a whole number in [0, b_size] on every row" + _note_unverified(view, finite)
    return bad, _first(view, bad, lambda i: f"flat_count={_fmt(flat[i])} with b_size={_fmt(b[i])}")


def _select(view: FrameView, step, gap, boundary_step, boundary_gap, first) -> np.ndarray:
    """Pick each row's rule by its kind: consecutive, after a gap, boundary (either), or a
    restart (row 0, or a step that does not increase), where only per-row rules apply."""
    cont = view.contiguous
    ok = np.where(view.boundary, np.where(cont, boundary_step, boundary_gap), np.where(cont, step, gap))
    return np.where(view.restart, first, ok)


def duration_carried(view: FrameView) -> tuple[np.ndarray, np.ndarray]:
    """``(sure, maybe)``: flag-off rows where the model switch ``duration_across_cycles`` counts DURATION on.

    The file must carry the switch, on at that row; the previous row's flag is 1 and its timeout 0, F2
    is on, every account is flat and there is no cooldown (the observer's condition). ``sure`` where
    the file holds every one of those fields, ``maybe`` where some are missing (either value passes).
    """
    none = np.zeros(view.n, dtype=bool)
    model = view.switch("duration_across_cycles")
    if model is None or not view.has(v.FLAG):
        return none, none
    cond = model & (view.f32(v.FLAG) == 0) & (view.prev(v.FLAG) == 1) & view.contiguous
    unknown = none.copy()
    f2 = view.switch("resurrection")
    tests = [((v.TIMEOUT,), lambda: view.prev(v.TIMEOUT) == 0),
             ((diag.SWITCH_COLUMNS["resurrection"],), lambda: f2),
             ((v.FLAT, v.B_SIZE), lambda: view.f32(v.FLAT) == view.f32(v.B_SIZE)),
             ((diag.COOLDOWN,), lambda: view.f32(diag.COOLDOWN) == 0)]
    for cols, test in tests:
        if view.has(*cols):
            cond = cond & test()
        else:
            unknown[:] = True
    return cond & ~unknown, cond & unknown


def _dead_zone_duration(view: FrameView, _opt: CheckOptions):
    flag = view.f32(v.FLAG)
    on, off = flag == 1, flag == 0
    dur, prev = view.f32(v.DURATION), view.prev(v.DURATION)
    carried, maybe = duration_carried(view)
    # duration = flag ? prev+1 : 0; with the model switch on, a carried flag-off row also counts on
    rule = dur == np.where(on | carried, prev + ONE, F32(0))
    rule |= maybe & ((dur == 0) | (dur == prev + ONE))
    reset_rule = dur == np.where(on, ONE, F32(0))             # after reset_session_state cleared it
    weak = np.where(on, (dur >= 1) & (dur == np.floor(dur)), dur == 0)
    # across a gap of k steps the dead zone may have started anywhere inside it
    gap_rule = weak & np.where(on, dur <= prev + view.gap.astype(np.float32), True)
    ok = _select(view, rule, gap_rule, rule | reset_rule, weak, weak)
    considered = (on | off) & np.isfinite(dur) & (view.restart | np.isfinite(prev))
    bad = considered & ~ok
    if not bad.any():
        model = (f"; {int(carried.sum() + maybe.sum())} flag-off row(s) after an F2 override counted on "
                 f"(model switch duration_across_cycles, from the file)") if (carried | maybe).any() else ""
        return bad, (f"duration = flag ? prev+1 : 0 holds on {int(view.checked.sum())} consecutive rows "
                     f"(exact float32)" + model + _note_unverified(view, np.isfinite(dur) & np.isfinite(flag)))
    return bad, _first(view, bad, lambda i: f"flag={_fmt(flag[i])} duration={_fmt(dur[i])}, "
                                            f"previous duration={_fmt(prev[i])}")


def _timeout_flag(view: FrameView, _opt: CheckOptions):
    dur, to, mx = view.f32(v.DURATION), view.f32(v.TIMEOUT), view.f32(v.MAX_DURATION)
    finite = _finite(dur, to, mx)
    expected = (dur > mx).astype(np.float32)
    bad = finite & (to != expected)
    if not bad.any():
        return bad, "timeout = duration > max_duration on every row" + _note_unverified(view, finite)
    return bad, _first(view, bad, lambda i: f"timeout_flag={_fmt(to[i])} with duration={_fmt(dur[i])}, "
                                            f"max_duration={_fmt(mx[i])}")


def expected_recovery_factor(recency: np.ndarray, n_recovery: np.ndarray) -> np.ndarray:
    """``min(1, recency / max(n_recovery, 1))`` in float32, as rl_regime_observer computes it."""
    return np.minimum(ONE, recency.astype(F32) / np.maximum(n_recovery.astype(F32), ONE))


def expected_eps_live(eps_min: np.ndarray, eps_max: np.ndarray, factor: np.ndarray) -> np.ndarray:
    """``min + (max − min)·factor`` in float32, multiply and add rounded separately."""
    scaled = (eps_max.astype(F32) - eps_min.astype(F32)) * factor.astype(F32)
    return eps_min.astype(F32) + scaled


def _formula(view: FrameView, opt: CheckOptions, name: str, got, exp, finite, formula: str, inputs):
    """A recomputed float32 formula: violations where ``name`` (``got``) is over ``opt.ulps`` from ``exp``.

    ``inputs(i)`` names the operands of row ``i`` for the detail line.
    """
    bad = finite & ~within_ulps(got, exp, opt.ulps)
    if not bad.any():
        return bad, f"{formula} within {opt.ulps:g} float32 ulps" + _note_unverified(view, finite)
    return bad, _first(view, bad, lambda i: f"{name}={_fmt(got[i])}, expected {_fmt(exp[i])} ({inputs(i)})")


def _recovery_factor(view: FrameView, opt: CheckOptions):
    fac, rec, n = view.f32(v.FACTOR), view.f32(v.RECENCY), view.f32(v.N_RECOVERY)
    return _formula(view, opt, "factor", fac, expected_recovery_factor(rec, n), _finite(fac, rec, n),
                    "factor = min(1, recency/max(n_recovery,1))",
                    lambda i: f"recency={_fmt(rec[i])}, n_recovery={_fmt(n[i])}")


def _eps_live(view: FrameView, opt: CheckOptions):
    live, lo, hi, fac = (view.f32(c) for c in (v.LIVE, v.EPS_MIN, v.EPS_MAX, v.FACTOR))
    return _formula(view, opt, "live", live, expected_eps_live(lo, hi, fac), _finite(live, lo, hi, fac),
                    "live = min + (max-min)*factor",
                    lambda i: f"min={_fmt(lo[i])}, max={_fmt(hi[i])}, factor={_fmt(fac[i])}")


def _tail_recency(view: FrameView, _opt: CheckOptions):
    rec, prev = view.f32(v.RECENCY), view.prev(v.RECENCY)
    gap = view.gap.astype(np.float32)
    s = v.RECENCY_SENTINEL
    whole = (rec >= 0) & (rec == np.floor(rec))
    tail = rec == 0
    rule = tail | (rec == prev + ONE)
    # a tail somewhere inside a gap of k steps leaves recency below k
    gap_rule = whole & ((rec == prev + gap) | (rec < gap))
    # re-bootstrapped to the sentinel, then +1 per step (more than one across a gap)
    sentinel = whole & (rec >= s) & (rec <= s + np.maximum(gap, ONE))
    ok = _select(view, rule, gap_rule, rule | sentinel, gap_rule | sentinel, whole)
    gated = np.zeros(view.n, dtype=bool)
    if view.has(v.COUNT):
        # G23: no tail event while the Welford count is below 10
        gated = tail & (view.f32(v.COUNT) < F32(10))
    finite = np.isfinite(rec) & (view.restart | np.isfinite(prev))
    bad = finite & (~ok | gated)
    if not bad.any():
        extra = " and no tail before welford_count reaches 10" if view.has(v.COUNT) else ""
        return bad, (f"recency is 0 at a tail and previous+1 otherwise on {int(view.checked.sum())} "
                     f"consecutive rows{extra}" + _note_unverified(view, finite))
    # the reason made for the rows shown only (a [T] array of strings costs more than the rule)
    return bad, _first(view, bad, lambda i: f"recency={_fmt(rec[i])}, previous={_fmt(prev[i])}: " + (
        "tail event while welford_count < 10" if gated[i] else "not 0 and not previous+1"))


def _welford_count(view: FrameView, _opt: CheckOptions):
    cnt, prev = view.f32(v.COUNT), view.prev(v.COUNT)
    d = cnt - prev
    # the count is kept across boundaries, so a boundary row follows the step rule too
    step_ok = (d == 0) | (d == 1)
    gap_ok = (d >= 0) & (d <= view.gap.astype(np.float32))
    first_ok = (cnt >= 0) & (cnt == np.floor(cnt))
    ok = np.where(view.restart, first_ok, np.where(view.contiguous, step_ok, gap_ok))
    finite = np.isfinite(cnt) & (view.restart | np.isfinite(prev))
    bad = finite & ~ok
    if not bad.any():
        return bad, ("welford_count grows by 0 or 1 per step, boundaries included"
                     + _note_unverified(view, finite))
    return bad, _first(view, bad, lambda i: f"welford_count={_fmt(cnt[i])} after {_fmt(prev[i])}")


def numeric_columns_under(view: FrameView, prefix: str, exclude: str | None = None) -> list[str]:
    """Columns under ``prefix`` (not under ``exclude``) that hold numbers (text-only columns are not fields
    of the numeric diag)."""
    out = []
    for c in view.frame.columns:
        c = str(c)
        if not c.startswith(prefix) or (exclude and c.startswith(exclude)):
            continue
        col = view.frame[c]
        if pd.api.types.is_bool_dtype(col) or not (pd.api.types.is_numeric_dtype(col) or
                                                   pd.to_numeric(col, errors="coerce").notna().any()):
            continue
        out.append(c)
    return out


def _steps_text(steps: np.ndarray, limit: int = 5) -> str:
    shown = ", ".join(str(int(s)) for s in steps[:limit])
    return shown + (f", … ({len(steps)} in all)" if len(steps) > limit else "")


def _nonfinite(view: FrameView, prefix: str, exclude: str | None = None) -> Found:
    """NaN/±Inf in every numeric field under ``prefix``, each with its exact steps.

    Rows before a field's first appearance are "not recorded" (a field added mid-run), not
    violations. A null inside its span (the key absent, or JSON null) is reported apart from
    NaN/±Inf, as a warning, where the frame says which is which (:meth:`FrameView.null`).
    """
    cols = numeric_columns_under(view, prefix, exclude)
    bad = np.zeros(view.n, dtype=bool)
    gaps = np.zeros(view.n, dtype=bool)
    per: dict[str, dict] = {}
    late: dict[str, int] = {}
    told = True
    for c in cols:
        a = view.f32(c)
        null = view.null(c)
        told &= null is not None
        if (null is None or not null.any()) and np.isfinite(a).all():
            continue  # recorded from the first row and finite on every one: nothing to say (the common case)
        nan = np.isnan(a)
        seen = ~null if null is not None else ~nan  # without null info a leading NaN is "not recorded"
        if not seen.any():
            continue
        first = int(np.argmax(seen))
        if first:
            late[c] = int(view.step[first])
        span = np.arange(view.n) >= first
        kinds = {"NaN": span & nan & (~null if null is not None else True),
                 "+Inf": np.isposinf(a), "-Inf": np.isneginf(a)}
        holes = span & null if null is not None else np.zeros(view.n, dtype=bool)
        found = {k: view.steps_at(m) for k, m in kinds.items() if m.any()}
        if holes.any():
            found["null"] = view.steps_at(holes)
        if not found:
            continue
        per[c] = found
        for m in kinds.values():
            bad |= m
        gaps |= holes
    short = {c: c[len(prefix):] for c in cols}
    late_text = (f"; {len(late)} field(s) first recorded mid-run (earlier rows not recorded): "
                 + ", ".join(f"{short[c]} from step {s}" for c, s in list(late.items())[:4])) if late else ""
    evidence = {"fields": {c: {k: [int(x) for x in st[:MAX_STEPS]] for k, st in f.items()} for c, f in per.items()},
                "counts": {c: {k: int(len(st)) for k, st in f.items()} for c, f in per.items()},
                "first_recorded": late}
    if not per:
        return Found(bad, f"{len(cols)} {prefix}* field(s) finite on every recorded row" + late_text,
                     evidence=evidence)
    worst = max(per, key=lambda c: sum(len(x) for k, x in per[c].items() if k != "null"))
    nan_word = "NaN" if told else "NaN or null (this frame does not tell them apart)"
    parts = [f"{short[c]} " + "; ".join(f"{nan_word if k == 'NaN' else k} at step(s) {_steps_text(st)}"
                                        for k, st in f.items()) for c, f in per.items()]
    detail = f"{len(per)} field(s) with non-finite or missing values: " + " | ".join(parts[:4]) + late_text
    if not bad.any():  # nulls only: the trainer did not log a value there; nothing says it was bad
        return Found(gaps, "no NaN/Inf; " + detail, status="warn", evidence=evidence, column=worst)
    return Found(bad, detail, evidence=evidence, column=worst)


def _finite_regime(view: FrameView, _opt: CheckOptions):
    return _nonfinite(view, v.R)


def _finite_risk_stack(view: FrameView, _opt: CheckOptions):
    return _nonfinite(view, v.P, exclude=v.R)


def _envelope_floor(view: FrameView, _opt: CheckOptions):
    sig, env = view.f32(v.SIGMA), view.f32(v.ENVELOPE)
    finite = _finite(sig, env)
    # σ is written as fmaxf(σ, envelope): exact, no tolerance
    bad = finite & (sig < env)
    if not bad.any():
        active = int((finite & (env > 0)).sum())
        return bad, (f"popart sigma >= envelope on every row (envelope tracked on {active} rows; "
                     f"0 everywhere means F4 is off)" + _note_unverified(view, finite))
    return bad, _first(view, bad, lambda i: f"sigma={_fmt(sig[i])} < envelope={_fmt(env[i])}")


def _transition_ramp(view: FrameView, _opt: CheckOptions):
    rem, prev = view.f32(v.REMAINING), view.prev(v.REMAINING)
    domain = (rem >= -1) & (rem == np.floor(rem))
    cont = domain & (rem == countdown_next(prev, view.gap))
    if view.has(v.STEPS_CONFIG):
        n = view.f32(v.STEPS_CONFIG)
        # the reset aligns remaining to N; eval_warmup_decay counts it down in the same step
        restart = domain & np.where(n > 0, (rem == n - ONE) | (rem == n), rem == -1)
    else:
        restart = domain
    ok = _select(view, cont, cont, restart | cont, domain, domain)
    finite = np.isfinite(rem) & (view.restart | np.isfinite(prev))
    bad = finite & ~ok
    if not bad.any():
        return bad, (f"remaining counts N -> 0 -> -1 between boundaries ({int(view.boundary.sum())} "
                     f"boundaries)" + _note_unverified(view, finite))
    return bad, _first(view, bad, lambda i: f"remaining={_fmt(rem[i])} after {_fmt(prev[i])} "
                                            f"({int(view.gap[i])} step(s) later)")


def resurrection_rows(view: FrameView) -> dict[str, np.ndarray]:
    """The row masks ``kelly_resurrection`` judges by: ``override`` (a dead-zone row before a timeout),
    ``outside`` (kelly_f not analytic outside one), ``overridden`` (eps_live took over), ``kept`` (another
    value than eps_live kept), ``analytic`` / ``live`` (kelly_f equals that) and ``finite``."""
    frac, analytic, flag = view.f32(v.KELLY), view.f32(v.KELLY_ANALYTIC), view.f32(v.FLAG)
    live = view.f32(v.LIVE)
    timeout = view.f32(v.TIMEOUT) if view.has(v.TIMEOUT) else np.zeros(view.n, np.float32)
    finite = _finite(frac, analytic, flag, live, timeout)
    override = finite & (flag == 1) & (timeout == 0)
    # G18/G21: no override outside the dead zone or once timed out
    return {"finite": finite, "override": override, "outside": finite & ~override & (frac != analytic),
            "overridden": override & (frac == live) & (frac != analytic),
            "kept": override & (frac != live),  # a dead-zone row that kept another value than eps_live
            "analytic": frac == analytic, "live": frac == live}


def _kelly_resurrection(view: FrameView, _opt: CheckOptions):
    frac, analytic, flag = view.f32(v.KELLY), view.f32(v.KELLY_ANALYTIC), view.f32(v.FLAG)
    live = view.f32(v.LIVE)
    timeout = view.f32(v.TIMEOUT) if view.has(v.TIMEOUT) else np.zeros(view.n, np.float32)
    rows = resurrection_rows(view)
    finite, override, outside = rows["finite"], rows["override"], rows["outside"]
    overridden, kept = rows["overridden"], rows["kept"]

    def what(i):
        return (f"kelly_f={_fmt(frac[i])}, analytic={_fmt(analytic[i])}, eps_live={_fmt(live[i])}, "
                f"flag={_fmt(flag[i])}, timeout={_fmt(timeout[i])}")

    switch = diag.SWITCH_COLUMNS["resurrection"]
    if view.has(switch):  # the file says whether F2 ran: G17 applies exactly where it did
        on = view.f32(switch) == 1
        bad = outside | (override & on & (frac != live)) | (override & ~on & (frac != analytic))
        if not bad.any():
            return bad, (f"F2 {'on' if on.all() else 'off' if not on.any() else 'switched'} (from the file): "
                         f"kelly_f = eps_live on {int((override & on).sum())} dead-zone rows before a timeout, "
                         f"analytic elsewhere" + _note_unverified(view, finite))
        return bad, _first(view, bad, what)
    n_over, n_kept = int(overridden.sum()), int((kept & (frac == analytic)).sum())
    if n_over:  # F2 inferred on: every dead-zone row before a timeout must be overridden
        bad = outside | kept
        if not bad.any():
            return bad, (f"F2 inferred on (the file does not carry the switch): eps_live overrode kelly_f on "
                         f"{n_over} dead-zone rows, analytic elsewhere" + _note_unverified(view, finite))
        return bad, (f"F2 inferred on ({n_over} dead-zone row(s) overridden) but not on every one; "
                     + _first(view, bad, what))
    if outside.any() or (kept & (frac != analytic)).any():
        bad = outside | (kept & (frac != analytic))
        return bad, _first(view, bad, what)
    if n_kept:
        return Found(kept, f"F2 off, or resurrection broken: the file cannot tell. kelly_f stayed analytic on "
                     f"{n_kept} dead-zone row(s) before a timeout (first at step "
                     f"{int(view.step[np.argmax(kept)])}) and the file does not carry the F2 switch "
                     f"({switch})", status="warn")
    return outside, ("kelly_f = analytic on every row; no dead-zone row tells whether F2 ran"
                     + _note_unverified(view, finite))


def _tau_boost(view: FrameView, _opt: CheckOptions):
    tmin, eff, rec = view.f32(v.TAU_MIN), view.f32(v.TAU_MIN_EFF), view.f32(v.RECENCY)
    factor, window = view.f32(v.BOOST_FACTOR), view.f32(v.BOOST_WINDOW)
    finite = _finite(tmin, eff, rec, factor, window)
    boosted = tmin * factor  # float32 multiply, as the kernel's tau_min_eff *= boost
    recent = rec < window
    # G24/G25: boosted while a tail is recent, plain otherwise; where the file says whether F5 ran
    # (a replay's switch column), exactly where it did, else F5 may have been off (unboosted) on any row
    f5 = view.switch("tau_boost")
    if f5 is None:
        ok = np.where(recent, (eff == boosted) | (eff == tmin), eff == tmin)
    else:
        ok = np.where(recent & f5, eff == boosted, eff == tmin)
    clamp = np.zeros(view.n, dtype=bool)
    if view.has(v.TAU_ACTION):
        act = view.f32(v.TAU_ACTION)
        clamp = np.isfinite(act) & (act < eff)  # τ = max(τ, τ_min_eff)
        ok &= ~clamp
    bad = finite & ~ok
    if not bad.any():
        return bad, (f"tau_min_effective = tau_min*factor while recency < n_window ({int((finite & recent).sum())} "
                     f"rows), tau_min otherwise; tau_action >= tau_min_effective" + _note_unverified(view, finite))
    return bad, _first(view, bad, lambda i: "tau_action below tau_min_effective" if clamp[i] else
                       f"tau_min_effective={_fmt(eff[i])} with tau_min="
                       f"{_fmt(tmin[i])}, factor={_fmt(factor[i])}, recency={_fmt(rec[i])}, "
                       f"n_window={_fmt(window[i])}")


def _boundary_reset(view: FrameView, _opt: CheckOptions):
    zeros = np.zeros(view.n, dtype=bool)
    labelled = view.boundary_reasons.get("phase", zeros) | view.boundary_reasons.get("fold", zeros)
    rows = np.flatnonzero(labelled)
    if not len(rows):
        return zeros, "no phase or fold change in the run: no boundary to check"
    cont = view.contiguous
    why: dict[int, list[str]] = {int(i): [] for i in rows}
    parts = []
    if view.has(v.RECENCY):
        parts.append("tail recency back to the sentinel")
        rec, gap = view.f32(v.RECENCY), view.gap.astype(np.float32)
        s = v.RECENCY_SENTINEL
        ok = (rec >= s) & (rec <= s + np.maximum(gap, ONE)) & (rec == np.floor(rec))
        for i in rows:
            if np.isfinite(rec[i]) and not ok[i]:
                why[int(i)].append(f"recency={_fmt(rec[i])} not re-bootstrapped to {_fmt(s)}")
    if view.has(v.FLAG, v.DURATION):
        parts.append("dead-zone duration cleared")
        flag, dur = view.f32(v.FLAG), view.f32(v.DURATION)
        for i in rows:
            if cont[i] and flag[i] in (0, 1) and np.isfinite(dur[i]) and dur[i] != flag[i]:
                why[int(i)].append(f"duration={_fmt(dur[i])} not cleared (flag={_fmt(flag[i])})")
    if view.has(v.REMAINING, v.STEPS_CONFIG):
        parts.append("v9 transition restarted")
        rem, n = view.f32(v.REMAINING), view.f32(v.STEPS_CONFIG)
        for i in rows:
            if not (cont[i] and np.isfinite(rem[i]) and np.isfinite(n[i])):
                continue
            ok = rem[i] in (n[i] - 1, n[i]) if n[i] > 0 else rem[i] == -1
            if not ok:
                why[int(i)].append(f"transition remaining={_fmt(rem[i])}, expected {_fmt(n[i] - 1)} "
                                   f"(steps_config={_fmt(n[i])})")
    if not parts:
        return "no recency, duration or transition field to check the reset with"
    bad = zeros.copy()
    for i, reasons in why.items():
        bad[i] = bool(reasons)
    if not bad.any():
        return bad, f"{len(rows)} phase/fold change(s): " + ", ".join(parts)
    return bad, _first(view, bad, lambda i: "; ".join(why[i]))


# ---- success criteria ------------------------------------------------------------------
def trap_stretches(view: FrameView) -> list[tuple[int, int]]:
    """Row ranges ``[a, b]`` of Kelly traps: every account flat (flat_count = b, from the diag) while
    kelly_f = 0 or the dead-zone flag is up (consecutive rows).

    A resurrection cycle (kelly_f 0/ε, flag and DURATION 0/1) stays inside one trap: the ε row has
    the flag up, the next row kelly_f = 0, so the accounts' flatness alone ends a trap.
    """
    trapped = (view.f32(v.KELLY) == 0)
    if view.has(v.FLAG):
        trapped |= view.f32(v.FLAG) == 1
    trapped &= view.f32(v.FLAT) == view.f32(v.B_SIZE)
    return true_runs(trapped)


def _kelly_trap(view: FrameView, opt: CheckOptions):
    timeout = view.f32(v.TIMEOUT) == 1 if view.has(v.TIMEOUT) else np.zeros(view.n, dtype=bool)
    bad = np.zeros(view.n, dtype=bool)
    failing, excused, longest = [], [], 0
    for a, b in trap_stretches(view):
        length = int(view.step[b] - view.step[a] + 1)
        longest = max(longest, length)
        if length <= opt.trap_steps:
            continue
        if timeout[a:b + 1].any():
            excused.append((a, b))
            continue
        failing.append((a, b))
        bad[a] = True  # a trap is reported at its start; its span says how long it lasted

    def spans_text(rows):
        return ", ".join(f"{int(view.step[a])}..{int(view.step[b])} ({int(view.step[b] - view.step[a] + 1)} steps)"
                         for a, b in rows[:3]) + (f", … ({len(rows)} in all)" if len(rows) > 3 else "")

    evidence = {"limit": opt.trap_steps, "longest": longest,
                "traps": [[int(view.step[a]), int(view.step[b]), int(view.step[b] - view.step[a] + 1)]
                          for a, b in failing[:MAX_STEPS]],
                "excused_by_timeout": [[int(view.step[a]), int(view.step[b])] for a, b in excused[:MAX_STEPS]]}
    note = "" if view.has(v.TIMEOUT) else " (timeout_flag missing: no trap is excused)"
    if not failing:
        return Found(bad, f"longest all-flat stretch with kelly_f=0 or the dead zone up: {longest} steps "
                     f"(limit {opt.trap_steps})" + (f"; trap(s) {spans_text(excused)} excused: the timeout "
                                                     f"flag fired inside" if excused else "") + note,
                     evidence=evidence)
    return Found(bad, f"{len(failing)} Kelly trap(s) longer than {opt.trap_steps} steps with every account "
                 f"flat and no timeout: steps {spans_text(failing)}" + note, spans=failing, evidence=evidence)


def _envelope_tracking(view: FrameView, opt: CheckOptions):
    env, prev, alpha = view.f32(v.ENVELOPE), view.prev(v.ENVELOPE), view.f32(v.DECAY_ALPHA)
    # max_r_ema only falls by its decay: (1-α)·ema + α·max|r| >= (1-α)·ema, since max|r| >= 0
    floor_one = (ONE - alpha) * prev
    k = view.gap.astype(np.float64)
    floor_gap = (1.0 - alpha.astype(np.float64)) ** k * prev.astype(np.float64)
    floor = np.where(view.contiguous, floor_one.astype(np.float64), floor_gap)
    tracked = ~view.boundary & ~view.restart & _finite(prev, alpha)
    negative = env < 0
    too_fast = tracked & (env.astype(np.float64) < floor - ulp_tolerance(floor, opt.ulps))
    bad = np.isfinite(env) & (negative | too_fast)
    if not bad.any():
        return bad, ("popart envelope rises to each batch max and falls no faster than (1-alpha) per "
                     "step, so sigma_effective tracks per-account tails (with envelope_floor)")
    return bad, _first(view, bad, lambda i: f"envelope={_fmt(env[i])} is negative" if negative[i] else
                       f"envelope={_fmt(env[i])} fell below (1-alpha)^k*previous={_fmt(floor[i])}")


def _eval_pnl(view: FrameView, opt: CheckOptions):
    pnl = view.f32("eval.pnl").astype(np.float64)
    have = np.isfinite(pnl)
    if "phase" in view.frame.columns:
        have &= (view.frame["phase"].to_numpy(dtype=object) == "eval")
    if not have.any():
        return "no eval-phase eval.pnl value in the run"
    rows = np.flatnonzero(have)
    if "fold" in view.frame.columns:
        folds = view.frame["fold"].to_numpy(dtype=object)[rows]
        last = [rows[np.flatnonzero(folds == f)[-1]] for f in pd.unique(folds)]
    else:
        last = [rows[-1]]
    bad = np.zeros(view.n, dtype=bool)
    for i in last:
        bad[i] = pnl[i] < opt.eval_pnl_baseline
    vals = ", ".join(f"{pnl[i]:,.0f}" for i in last[:6])
    if not bad.any():
        return bad, f"final eval pnl per fold {vals} >= baseline {opt.eval_pnl_baseline:,.0f}"
    return bad, f"final eval pnl per fold {vals}; below baseline {opt.eval_pnl_baseline:,.0f} " + \
        _first(view, bad, lambda i: f"{pnl[i]:,.0f}")


def _throughput(view: FrameView, opt: CheckOptions):
    if opt.baseline_sps is None:
        return "no v9 baseline given (CheckOptions.baseline_sps, CLI --baseline-sps)"
    wall = view.frame["wall_time"].to_numpy(dtype=np.float64)
    ok = np.flatnonzero(np.isfinite(wall))
    if len(ok) < 2:
        return "fewer than 2 rows with wall_time"
    limit = (1.0 - THROUGHPUT_TOLERANCE) * opt.baseline_sps
    bad = np.zeros(view.n, dtype=bool)
    rates = []
    w = opt.throughput_window
    for a in range(0, len(ok) - 1, w):
        i, j = ok[a], ok[min(a + w, len(ok) - 1)]
        dt = wall[j] - wall[i]
        if j == i or dt <= 0:
            continue
        sps = (view.step[j] - view.step[i]) / dt
        rates.append(sps)
        bad[j] = sps < limit
    if not rates:
        return "wall_time does not increase"
    msg = f"steps/s per {w}-row window: min {min(rates):.3g}, median {np.median(rates):.3g}; limit {limit:.3g}"
    return bad, msg


CHECKS: tuple[Check, ...] = (
    Check("flag_binary", "dead-zone flag and timeout flag are 0 or 1", (v.FLAG,), _flag_binary, column=v.FLAG),
    Check("flat_count_range", "0 <= flat_count <= b_size, a whole number (its input, the lots, is not logged)",
          (v.FLAT, v.B_SIZE), _flat_count_range, column=v.FLAT),
    Check("dead_zone_duration", "duration = flag ? prev+1 : 0", (v.FLAG, v.DURATION), _dead_zone_duration,
          column=v.DURATION),
    Check("timeout_flag", "timeout = duration > max_duration", (v.DURATION, v.TIMEOUT, v.MAX_DURATION),
          _timeout_flag, column=v.DURATION),
    Check("recovery_factor_formula", "factor = min(1, recency / max(n_recovery, 1))",
          (v.FACTOR, v.RECENCY, v.N_RECOVERY), _recovery_factor, column=v.FACTOR),
    Check("eps_live_formula", "live = min + (max - min)·factor", (v.LIVE, v.EPS_MIN, v.EPS_MAX, v.FACTOR),
          _eps_live, column=v.LIVE),
    Check("tail_recency", "recency is 0 at a tail and prev+1 otherwise", (v.RECENCY,), _tail_recency,
          column=v.RECENCY),
    Check("welford_count_monotone", "Welford count grows by 0 or 1 per step and is kept at boundaries",
          (v.COUNT,), _welford_count, column=v.RECENCY),
    Check("finite_regime_fields", "no NaN or Inf in risk_stack.regime.* (success criterion 4)", (),
          _finite_regime, any_of=(v.R + "*",)),
    Check("finite_risk_stack_fields", "no NaN or Inf in the other numeric risk_stack.* fields (kelly, "
          "positions, session_pnl, PopArt, IQN)", (), _finite_risk_stack, any_of=(v.P + "*",)),
    Check("envelope_floor", "popart sigma >= envelope (F4)", (v.SIGMA, v.ENVELOPE), _envelope_floor,
          column=v.SIGMA),
    Check("transition_ramp", "v9 remaining N -> 0 -> -1 after each boundary", (v.REMAINING,), _transition_ramp,
          column=v.REMAINING),
    Check("boundary_reset", "at each phase/fold change reset_session_state ran: recency re-bootstrapped, "
          "duration cleared, v9 transition restarted", (), _boundary_reset, any_of=("phase", "fold"),
          column=v.RECENCY),
    Check("kelly_resurrection", "kelly_f = eps_live in the dead zone before a timeout where F2 is on, analytic "
          "otherwise (G17, G18, G21); warns when the file cannot tell F2 off from a broken override",
          (v.KELLY, v.KELLY_ANALYTIC, v.FLAG, v.LIVE), _kelly_resurrection, column=v.KELLY),
    Check("tau_boost", "tau_min_effective = tau_min*factor while recency < n_window (G24, G25)",
          (v.TAU_MIN, v.TAU_MIN_EFF, v.RECENCY, v.BOOST_FACTOR, v.BOOST_WINDOW), _tau_boost, column=v.TAU_MIN_EFF),
    Check("kelly_trap", "success criterion 1: no Kelly trap (every account flat while kelly_f = 0 or the dead "
          "zone persists, resurrection cycles included) over 200 steps without the timeout flag",
          (v.KELLY, v.FLAT, v.B_SIZE), _kelly_trap, column=v.KELLY),
    Check("eval_pnl_baseline", "success criterion 2: eval pnl >= -$507k per fold", ("eval.pnl",), _eval_pnl,
          column="eval.pnl"),
    Check("throughput", "success criterion 5: steps/s within 5% of the v9 baseline", ("wall_time",),
          _throughput),
    Check("envelope_tracking", "success criterion 7: the σ envelope follows per-account tails "
          "(falls only by its decay)", (v.ENVELOPE, v.DECAY_ALPHA), _envelope_tracking, column=v.ENVELOPE),
)
#: Check ids in report order.
CHECK_IDS: tuple[str, ...] = tuple(c.id for c in CHECKS)
_BY_ID = {c.id: c for c in CHECKS}


def evaluate(check: Check, view: FrameView, opt: CheckOptions) -> "Found | CheckResult":
    """What ``check`` finds on ``view``: its :class:`Found` (violating rows by position), or the skip
    :class:`CheckResult` when a field is missing or the check has nothing to judge."""
    missing = view.missing(check.needs)
    if check.any_of and not any(str(c).startswith(a[:-1]) if a.endswith("*") else c == a
                                for c in view.frame.columns for a in check.any_of):
        missing.append(" or ".join(check.any_of))
    if missing:
        return CheckResult(check.id, "skip", 0, None, [], "missing field(s): " + ", ".join(missing), missing,
                           column=check.column)
    if view.n == 0:
        return CheckResult(check.id, "skip", 0, None, [], "the frame has no rows", column=check.column)
    out = check.fn(view, opt)
    if isinstance(out, str):
        return CheckResult(check.id, "skip", 0, None, [], out, column=check.column)
    return out if isinstance(out, Found) else Found(*out)


def result_of(check: Check, view: FrameView, opt: CheckOptions) -> CheckResult:
    """``check`` run on ``view``: its :class:`CheckResult` (a skip, a pass, or a fail with its first steps and spans)."""
    found = evaluate(check, view, opt)
    if isinstance(found, CheckResult):
        return found
    steps = view.steps_at(found.bad)
    spans = [(int(view.step[a]), int(view.step[b])) for a, b in found.spans[:MAX_STEPS]]
    column = found.column or check.column
    status = found.status or ("fail" if len(steps) else "pass")
    return CheckResult(check.id, status, int(len(steps)), int(steps[0]) if len(steps) else None,
                       [int(s) for s in steps[:MAX_STEPS]], found.detail, spans=spans, column=column,
                       evidence=dict(found.evidence))


def run_checks(frame_or_view: pd.DataFrame | FrameView, ids: Iterable[str] | None = None,
               options: CheckOptions | None = None) -> list[CheckResult]:
    """Run the checks on a diag frame with canonical column names.

    Parameters
    ----------
    frame_or_view
        A frame (see :func:`regime_dash.diag.aliases.canonical_frame`) or a prepared view.
    ids
        Check ids to run, in :data:`CHECK_IDS` order; all when ``None``.
    options
        Success-criterion knobs.

    Raises
    ------
    ValidationError
        For an unknown check id.
    """
    vw, opt = as_view(frame_or_view), options or CheckOptions()
    wanted = list(CHECK_IDS) if ids is None else list(ids)
    for i in wanted:
        if i not in _BY_ID:
            raise ValidationError(f"unknown check id {i!r}; valid ids: {', '.join(CHECK_IDS)}",
                                  field="check", value=i)
    return [result_of(_BY_ID[i], vw, opt) for i in CHECK_IDS if i in wanted]
