"""Re-derivation: every logged output recomputed from the logged rows t−1 and t, and compared.

:func:`rederive` prepares a diag frame for :mod:`regime_dash.engine.rederive` (the
reference step functions run from the logged state), compares each output with
the logged value (:mod:`regime_dash.analysis.rederive_formulas` says how) and
returns one :class:`~regime_dash.analysis.invariants.CheckResult` per formula,
``rederive.<output>``, whose evidence carries every divergence: the step, the
expected and the logged value, the formula and the inputs it used.

Which rows are derived. A row is derived from the row before it when that row
is its step minus one; the first row only when it is step 0 (the bootstrap state
is known). Boundaries (``reset_session_state`` ran before the row) are the
changes of ``fold`` or ``phase``; a diag with neither has them inferred from the
reset signatures (:mod:`regime_dash.analysis.view`), which the evidence says.
Switches a diag does not log are the spec's: F2, F4, F5 on, the model switches off.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from regime_dash.diag import catalogue as diag
from regime_dash.analysis.invariants import MAX_STEPS, CheckResult
from regime_dash.analysis.rederive_formulas import BY_OUTPUT, FORMULAS, NOW, Formula
from regime_dash.analysis.view import FrameView, as_view
from regime_dash.core.config import FIELD_SLOTS, RegimeConfig, derived_bootstraps
from regime_dash.engine import rederive as engine
from regime_dash.engine.reference import SLOT_ORDER

#: Divergences listed in a check's evidence.
MAX_DIVERGENCES = 200
_SLOT_COLUMN = {src: col for col, src in diag.DIAG_FIELDS if src.endswith("_INDEX")}
_SLOT_COLUMN.update({FIELD_SLOTS[name]: col for name, col in diag.CONFIG_COLUMNS.items()})
_CONFIG_SLOTS = {s.name for s in engine.COMPACT.slots if s.role == "config"}
_ALWAYS_READ = ("RL_SESSION_PNL_WORST_INDEX", "RL_COOLDOWN_REMAINING_STEPS_INDEX")


def _stack(columns: list[np.ndarray | None], a: int, b: int) -> np.ndarray:
    out = np.full((b - a, len(columns)), np.nan, dtype=np.float32)
    for j, col in enumerate(columns):
        if col is not None:
            out[:, j] = col[a:b]
    return out


#: Rows the loop takes at a time: the logged matrix of one chunk is all that is laid out at once.
CHUNK_ROWS = 1 << 17


@dataclass
class Prepared:
    """A frame laid out for the engine loop, one chunk of rows at a time (:meth:`run`)."""

    columns: list[np.ndarray]
    col_of: np.ndarray
    cfg_pos: np.ndarray
    flat: np.ndarray
    bsz: np.ndarray
    extras: list[np.ndarray | None]
    start: np.ndarray
    skip: np.ndarray
    boundary: np.ndarray
    boot: np.ndarray
    inferred_boundaries: bool

    @property
    def n(self) -> int:
        return len(self.start)

    def logged(self, a: int, b: int) -> np.ndarray:
        """float32 [b − a, columns]: the logged slot values of rows ``a..b−1`` (NaN where not logged)."""
        return _stack(self.columns, a, b)

    def extra(self, a: int, b: int) -> np.ndarray:
        """float32 [b − a, len(EXTRA)]: the logged inputs of rows ``a..b−1`` (NaN where not logged)."""
        return _stack(self.extras, a, b)

    def run(self, a: int, b: int, first: int = 0, state=None, resync: bool = True, compiled: bool | None = None):
        """The engine loop over rows ``a..b−1``, deriving from row ``a + first`` on (see :func:`engine.run`)."""
        return engine.run(self.logged(a, b), self.col_of, self.cfg_pos, self.flat[a:b], self.bsz[a:b],
                          self.extra(a, b), self.start[a:b], self.skip[a:b], self.boundary[a:b], self.boot,
                          engine.COMPACT.reset_plan(), first=first, state=state, compiled_loop=compiled,
                          resync=resync)

    def chunks(self, end: int, compiled: bool | None = None):
        """``(a, b, exp, chain_ok, state)`` of rows ``0..end−1``, chunk by chunk, the state carried."""
        if compiled is None:
            compiled = engine.HAVE_NUMBA and (engine.is_compiled() or end >= engine.PYTHON_ROWS)
        state = None
        for a in range(0, end, CHUNK_ROWS):
            b, lo = min(end, a + CHUNK_ROWS), max(0, a - 1)
            e, ok, state = self.run(lo, b, a - lo, state, compiled=compiled)
            yield a, b, e[a - lo:], ok[a - lo:], state

    def expected(self, compiled: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(exp [T, outputs], chain_ok [T]) of every row."""
        exp = np.empty((self.n, len(engine.OUTPUTS)), dtype=np.float32)
        chain_ok = np.zeros(self.n, dtype=bool)
        for a, b, e, ok, _ in self.chunks(self.n, compiled):
            exp[a:b], chain_ok[a:b] = e, ok
        return exp, chain_ok

    def state_at(self, row: int):
        """The loop's carried state after rows ``0..row−1`` (None before row 0)."""
        state = None
        for *_, state in self.chunks(row):
            pass
        return state


def _boundaries(view: FrameView) -> tuple[np.ndarray, bool]:
    reasons = view.boundary_reasons
    told = [reasons[k] for k in ("phase", "fold") if k in reasons]
    if told:
        b = np.logical_or.reduce(told) if len(told) > 1 else told[0].copy()
    else:
        b = view.boundary.copy()
    if view.n and view.has(diag.REMAINING, diag.STEPS_CONFIG):
        n_cfg = view.f32(diag.STEPS_CONFIG)[0]
        b[0] = bool(n_cfg > 0 and view.f32(diag.REMAINING)[0] == n_cfg - np.float32(1))
    return b, not told


def _int_column(view: FrameView, col: str) -> np.ndarray:
    if not view.has(col):
        return np.full(view.n, -1, dtype=np.int64)
    a = view.f32(col)
    return np.where(np.isfinite(a), a, -1).astype(np.int64)


def _boot(view: FrameView, present: dict[str, str]) -> np.ndarray:
    slots = RegimeConfig().to_isv()
    for slot, col in present.items():
        if slot in _CONFIG_SLOTS and view.n:
            value = view.f32(col)[0]
            if np.isfinite(value):
                slots[slot] = float(value)
    slots.update(derived_bootstraps(slots))
    return engine.COMPACT.bootstrap_vector(slots)[:len(SLOT_ORDER)].copy()


def prepare(view: FrameView) -> Prepared:
    """The engine loop's inputs for ``view`` (its columns, not copies of them)."""
    present = {s: c for s, c in _SLOT_COLUMN.items() if view.has(c)}
    # the loop reads the session worst and the cooldown of every row: absent, they are NaN (not checkable)
    unlogged = [s for s in _ALWAYS_READ if s not in present]
    columns = [view.f32(c) for c in present.values()] + [None] * len(unlogged)
    col_of = np.full(len(SLOT_ORDER), -1, dtype=np.int32)
    for j, slot in enumerate((*present, *unlogged)):
        col_of[SLOT_ORDER.index(slot)] = j
    cfg_pos = np.array([SLOT_ORDER.index(s) for s in present if s in _CONFIG_SLOTS], dtype=np.int32)
    extras = [view.f32(diag.INPUT_COLUMNS[name]) if view.has(diag.INPUT_COLUMNS[name]) else None
              for name in engine.EXTRA]
    boundary, inferred = _boundaries(view)
    start = np.zeros(view.n, dtype=bool)
    start[:1] = view.n > 0 and view.step_given and view.step[0] == 0
    if view.starts is not None:  # a resume that came back at the bootstrap (analysis.structure)
        start |= view.starts
    skip = ~(view.contiguous | start)
    return Prepared(columns, col_of, cfg_pos, _int_column(view, diag.FLAT_COUNT), _int_column(view, diag.B_SIZE),
                    extras, start, skip, boundary, _boot(view, present), inferred)


def equal(exp: np.ndarray, got: np.ndarray, ulps: float) -> np.ndarray:
    """Where ``got`` is ``exp``: equal, both NaN, or within ``ulps`` float32 ulps of ``exp``."""
    same = exp == got
    rest = np.flatnonzero(~same)  # few rows on a correct run: the slow tests run on those alone
    if len(rest):
        e, g = exp[rest], got[rest]
        ok = np.isnan(e) & np.isnan(g)
        if ulps > 0:
            ok |= np.abs(e.astype(np.float64) - g) <= ulps * np.spacing(np.abs(e)).astype(np.float64)
        same[rest] = ok
    return same


def _lagged(view: FrameView, col: str, lag: int) -> np.ndarray:
    return view.f32(col) if lag == NOW else view.prev(col)


#: Formulas that take the Welford chain only where the run turns a switch on (on any of its rows).
SWITCHED_CHAIN = {"recency": "tail_on_deviation"}


def chained(view: FrameView, f: Formula) -> bool:
    """Whether ``f``'s rows need the carried Welford state known (``chain_ok``) in this run."""
    return f.chain or (f.output in SWITCHED_CHAIN and switch_on(view, SWITCHED_CHAIN[f.output]))


def compared(view: FrameView, p: Prepared, f: Formula, chain_ok: np.ndarray, chain: bool) -> np.ndarray:
    """Rows where ``f``'s output is compared: derivable, its inputs logged, the chain known where ``chain``,
    and the logged output finite (a logged NaN or Inf is blamed by the finite_* checks, once)."""
    rows = ~p.skip
    for col, lag in f.reads:
        rows = rows & (np.isfinite(_lagged(view, col, lag)) | (lag != NOW) & p.start)
    for col in f.needs:
        rows = rows & np.isfinite(view.f32(col))
    if chain:
        rows = rows & chain_ok
    return rows & np.isfinite(view.f32(f.column))


def switch_on(view: FrameView, name: str) -> bool:
    on = view.switch(name)
    return bool(on.any()) if on is not None else False


def _value(x) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


def _inputs_at(view: FrameView, p: Prepared, f: Formula, i: int) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for col, lag in (*f.reads, *((c, NOW) for c in f.needs)):
        if not view.has(col):
            continue
        key = f"{col}{'' if lag == NOW else ' (t−1)'}"
        if lag != NOW and p.start[i]:
            out[key] = None  # before the first step: the bootstrap
        else:
            out[key] = _value(_lagged(view, col, lag)[i])
    return out


def divergence_at(view: FrameView, p: Prepared, f: Formula, exp: np.ndarray, got: np.ndarray, i: int) -> dict:
    """Row ``i``'s divergence from formula ``f``: its step, the expected and logged values, whether it is
    a boundary row, and the inputs the formula read there."""
    return {"step": int(view.step[i]), "expected": _value(exp[i]), "logged": _value(got[i]),
            "boundary": bool(p.boundary[i]), "inputs": _inputs_at(view, p, f, i)}


def value_text(x: float | None) -> str:
    """A value as the messages show it (9 significant digits; ``NaN`` for a missing one)."""
    return "NaN" if x is None else f"{x:.9g}"


def inputs_text(d: dict) -> str:
    """A divergence's inputs (:func:`divergence_at`) as ``name=value, ...`` by their last dotted part."""
    return ", ".join(f"{k.rsplit('.', 1)[-1]}={value_text(v)}" for k, v in d["inputs"].items())


def missing(view: FrameView, f: Formula) -> list[str]:
    """The columns ``f`` needs that the diag does not log (``f`` is not checkable when any is)."""
    return list(dict.fromkeys(c for c in (f.column, *(c for c, _ in f.reads), *f.needs) if not view.has(c)))


@dataclass
class Tally:
    """One formula's comparisons, rows added in step order: a whole frame at once, or batch by batch
    (a growing run), with the same result either way."""

    compared: int = 0
    count: int = 0
    steps: list = field(default_factory=list)  # the first MAX_STEPS differing steps
    spans: list = field(default_factory=list)  # the first MAX_STEPS spans of consecutive differing steps
    divergences: list = field(default_factory=list)  # the first MAX_DIVERGENCES
    last_bad: int | None = None  # the step of the last differing row
    last_span_open: bool = False  # spans[-1] ends at last_bad (it may go on)

    def add(self, view: FrameView, p: Prepared, f: Formula, exp: np.ndarray, rows: np.ndarray, ulps: float,
            lo: int = 0) -> None:
        """Rows ``lo`` on of ``view``: ``rows`` (from :func:`compared`) compared with ``exp``."""
        rows = rows[lo:]
        self.compared += int(rows.sum())
        if not rows.any():
            return
        got = view.f32(f.column)
        where = lo + np.flatnonzero(rows & ~equal(exp[lo:], got[lo:], tolerance(f, ulps)))
        if not len(where):
            return
        room = MAX_DIVERGENCES - len(self.divergences)
        self.divergences.extend(divergence_at(view, p, f, exp, got, int(i)) for i in where[:max(room, 0)])
        steps = view.step[where].astype(np.int64)
        self.count += len(where)
        self.steps.extend(int(s) for s in steps[:max(MAX_STEPS - len(self.steps), 0)])
        self._add_spans(steps)

    def _add_spans(self, steps: np.ndarray) -> None:
        breaks = np.flatnonzero(np.diff(steps) != 1)
        starts, ends = np.concatenate(([0], breaks + 1)), np.concatenate((breaks, [len(steps) - 1]))
        for a, b in zip(starts, ends):
            first, last = int(steps[a]), int(steps[b])
            if self.last_bad is not None and first == self.last_bad + 1:
                if self.last_span_open:
                    self.spans[-1] = (self.spans[-1][0], last)
            elif len(self.spans) < MAX_STEPS:
                self.spans.append((first, last))
                self.last_span_open = True
            else:
                self.last_span_open = False
            self.last_bad = last

    def result(self, f: Formula, ulps: float, inferred_boundaries: bool) -> CheckResult:
        tol = tolerance(f, ulps)
        evidence = {"formula": f.text, "kernel": f.kernel, "compared": self.compared, "tolerance_ulps": tol,
                    "boundaries": "inferred from the reset signatures" if inferred_boundaries else "fold/phase"}
        if not self.compared:
            why = ("the Welford mean and M2 are not logged and the run is not followed from step 0 without a gap"
                   if f.chain else "no row with its inputs logged and the row before it")
            return CheckResult(f.check_id, "skip", 0, None, [], "not checkable here: " + why, column=f.column,
                               evidence=evidence)
        how = "exactly" if tol == 0 else f"within {tol:g} ulps"
        if not self.count:
            return CheckResult(f.check_id, "pass", 0, None, [], f"re-derived on {self.compared} rows, equal {how}",
                               column=f.column, evidence=evidence)
        evidence["divergences"] = list(self.divergences)
        first = self.divergences[0]
        detail = (f"{self.count} of {self.compared} rows differ; first at step {first['step']}: logged "
                  f"{value_text(first['logged'])}, expected {value_text(first['expected'])} ({f.text}; {inputs_text(first)})")
        return CheckResult(f.check_id, "fail", self.count, self.steps[0], list(self.steps), detail,
                           spans=list(self.spans), column=f.column, evidence=evidence)


def tolerance(f: Formula, ulps: float) -> float:
    """The ulps ``f`` is compared within: ``ulps`` for a formula with a multiply-add, else exact."""
    return ulps if f.fma else 0.0


def skipped(f: Formula, absent: list[str]) -> CheckResult:
    """``f``'s result where the diag lacks columns it needs."""
    return CheckResult(f.check_id, "skip", 0, None, [], "not checkable: needs " + ", ".join(absent)
                       + " (not in this diag)", absent, column=f.column, evidence={"formula": f.text})


def _result(view: FrameView, p: Prepared, f: Formula, exp: np.ndarray, chain_ok: np.ndarray,
            ulps: float) -> CheckResult:
    absent = missing(view, f)
    if absent:
        return skipped(f, absent)
    tally = Tally()
    tally.add(view, p, f, exp, compared(view, p, f, chain_ok, chained(view, f)), ulps)
    return tally.result(f, ulps, p.inferred_boundaries)


@dataclass
class Rederivation:
    """Every re-derived output of one frame: the results, and the expected values behind them."""

    results: list[CheckResult]
    expected: dict[str, np.ndarray]
    prepared: Prepared


def loop_loaded() -> bool:
    """Whether this process already holds the engine loop compiled (running it compiled then costs no
    compile, and no memory more)."""
    return engine.is_compiled()


def rederive(frame_or_view, ulps: float = 0.0, compiled: bool | None = None) -> Rederivation:
    """Re-derive every logged output of a diag frame (canonical columns) from its logged inputs.

    Parameters
    ----------
    frame_or_view
        A frame or a prepared :class:`FrameView`.
    ulps
        Slack for the formulas with a multiply-add (``Formula.fma``) in float32 ulps; 0 compares exactly.
    compiled
        Run the compiled loop (True), the Python one (False), or by size (None).
    """
    view = as_view(frame_or_view)
    p = prepare(view)
    exp, chain_ok = p.expected(compiled)
    results = [_result(view, p, f, exp[:, k], chain_ok, ulps) for k, f in enumerate(FORMULAS)]
    return Rederivation(results, {f.output: exp[:, k] for k, f in enumerate(FORMULAS)}, p)


def checks(frame_or_view, ulps: float = 0.0) -> list[CheckResult]:
    """The ``rederive.*`` check results of a frame (what a verdict lists)."""
    return rederive(frame_or_view, ulps).results


if tuple(f.output for f in FORMULAS) != engine.OUTPUT_NAMES:  # pragma: no cover - a table out of step
    raise ImportError("rederive_formulas.FORMULAS must list engine.rederive.OUTPUTS in order")

__all__ = ["rederive", "checks", "loop_loaded", "prepare", "compared", "chained", "equal", "missing", "skipped", "tolerance", "Tally",
           "Rederivation", "Prepared", "BY_OUTPUT", "MAX_DIVERGENCES", "SWITCHED_CHAIN"]
