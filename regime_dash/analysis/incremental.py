"""The verdict of a growing run, updated with each batch of new rows at the cost of those rows.

:class:`IncrementalVerdict` gives, after every :meth:`~IncrementalVerdict.update`,
the :func:`~regime_dash.analysis.verdict.verdict` of every row seen so far,
without judging those rows again. Each check and finder has a :class:`Carry`,
the state it keeps between batches:

* the generic :class:`RowLocal`: a check whose verdict on row t depends only on
  rows t−k..t is run on the last k rows seen plus the new ones; the new rows'
  violations are added to the counts, steps and first step. Every invariant of
  the spec is of this kind (k = 1: a step-to-step rule reads the previous row);
* a check or finder that is not row-local supplies its own carry (:data:`CARRIES`):
  a stretch (a Kelly trap, a dead-zone episode, a run of tails) carries its open
  stretch; ``eval_pnl_baseline`` the last eval row of each fold;
  ``kelly_resurrection`` its row counts; ``finite_*`` which fields were seen;
* :class:`Columns` re-runs a check on the columns it reads, kept for every row
  (a few bytes a row): the fallback of a result that depends on the whole run
  (``throughput``'s windows against a baseline); ``envelope_decay_horizon`` keeps a
  bounded state instead (:mod:`regime_dash.analysis.envelope_carry`).
* the ``rederive.*`` checks (:mod:`regime_dash.analysis.rederive`) run the engine loop
  on one context row plus the new rows from the carried ``(isv, chain)``, and tally
  each formula's comparisons as the whole-prefix run does (its bootstrap kept from
  the first batch).

Two things make an update re-judge the whole run once (``reload`` gives the
rows stored so far): a column seen for the first time (whether a field is
there changes how earlier rows are read) and a step not above the last one (a
trainer resumed from a checkpoint, a second writer, a slipped step counter: the
run's structure, :mod:`regime_dash.analysis.structure`, is read again from all its
rows). The structure of the rows seen so far is kept: its findings, the writer
judged (a later batch's rows of other writers are left out), and the config
changes and step gaps, which each new batch extends.
Module checks (the providers of :mod:`regime_dash.analysis.registry`, as ``verdict``
takes them), when a controller's columns are present, run on the whole run.

The contract, which ``tests/test_incremental.py`` asserts at several cut points:
every check's id, status, violations, first step, steps, spans and column, and
every finding's id, severity, steps and spans, equal those of a full
``verdict`` of the same rows. A detail line or message may count differently
(a pass says how many rows were checked as they arrived).
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import pandas as pd

from regime_dash.analysis import findings as fd
from regime_dash.analysis import invariants as inv
from regime_dash.analysis import registry
from regime_dash.analysis import rederive as rd
from regime_dash.analysis import view as v
from regime_dash.analysis.envelope_carry import EnvelopeCarry
from regime_dash.analysis.episodes import RESURRECTION_GAP, true_runs
from regime_dash.analysis.findings import Finding
from regime_dash.analysis.invariants import MAX_STEPS, CheckOptions, CheckResult, Found
from regime_dash.analysis.verdict import Verdict
from regime_dash.analysis.rederive_formulas import FORMULAS
from regime_dash.analysis.structure import Structure, analyse, followed
from regime_dash.analysis.structure.writers import labels as writer_labels
from regime_dash.analysis.view import FrameView, view

__all__ = ["CARRIES", "Carry", "Columns", "IncrementalVerdict", "RowLocal", "register_carry"]


class Carry:
    """What one check (or finder) keeps between batches. ``lookback`` rows before the new ones
    are handed to :meth:`update` with them (the first ``ctx`` rows of the view)."""

    lookback = 1

    def update(self, vw: FrameView, ctx: int) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def result(self):  # pragma: no cover - interface
        """A :class:`CheckResult` (a check's carry) or a list of :class:`Finding` (a finder's)."""
        raise NotImplementedError


class _CheckCarry(Carry):
    """A check's carry: a batch is judged (:meth:`judge`) unless the check skips on it (a field missing)."""

    def __init__(self, check: inv.Check, opt: CheckOptions):
        self.check, self.opt = check, opt
        self.skip: CheckResult | None = None
        self.judged = False

    def update(self, vw: FrameView, ctx: int) -> None:
        found = inv.evaluate(self.check, vw, self.opt)
        if isinstance(found, CheckResult):
            self.skip = found
            return
        self.judged = True
        self.judge(vw, ctx, found)

    def judge(self, vw: FrameView, ctx: int, found: Found) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def skipped(self) -> CheckResult:
        return self.skip or CheckResult(self.check.id, "skip", 0, None, [], "the frame has no rows",
                                        column=self.check.column)


class _Steps:
    """Violating rows of a check over the run: count, first step, the first :data:`MAX_STEPS` steps."""

    def __init__(self):
        self.count, self.steps = 0, []

    def add(self, steps: np.ndarray) -> None:
        self.count += len(steps)
        room = MAX_STEPS - len(self.steps)
        if room > 0:
            self.steps.extend(int(s) for s in steps[:room])

    @property
    def first(self) -> int | None:
        return self.steps[0] if self.steps else None


class RowLocal(_CheckCarry):
    """The generic carry: the check run on ``lookback`` rows of context plus the new rows, the new
    rows' violations merged into the run's."""

    def __init__(self, check: inv.Check, opt: CheckOptions, lookback: int = 1, sticky_skip: bool = False):
        super().__init__(check, opt)
        self.lookback = lookback
        self.sticky_skip = sticky_skip  # a skip on any batch is the run's (the rows that made it are in the run)
        self.bad, self.rows = _Steps(), 0
        self.detail = ""
        self.column = check.column

    def judge(self, vw: FrameView, ctx: int, found: Found) -> None:
        self.rows += vw.n - ctx
        steps = vw.step[ctx:][np.asarray(found.bad, dtype=bool)[ctx:]]
        if len(steps) and not self.bad.count:
            self.detail = found.detail  # it names the run's first violation
        self.bad.add(steps)
        self.column = found.column or self.check.column

    def result(self) -> CheckResult:
        if not self.judged or (self.sticky_skip and self.skip is not None):
            return self.skipped()
        detail = self.detail if self.bad.count else f"no violation in {self.rows} rows, checked as they arrived"
        return CheckResult(self.check.id, "fail" if self.bad.count else "pass", self.bad.count, self.bad.first,
                           list(self.bad.steps), detail, column=self.column)


class Columns(Carry):
    """A check or finder re-run on the columns it reads, kept for every row: for a result that
    depends on the whole run (its cost is those columns, not the run's every field)."""

    lookback = 0

    def __init__(self, reads: tuple[str, ...], run: Callable[[FrameView], object], dtype=np.float32,
                 raw: tuple[str, ...] = ()):
        self.reads, self.run, self.dtype, self.raw = reads, run, dtype, raw  # raw: kept as they are (labels)
        self.parts: list[pd.DataFrame] = []

    def update(self, vw: FrameView, ctx: int) -> None:
        cols = [c for c in self.reads if vw.has(c)]
        part = vw.frame.iloc[ctx:][cols].apply(pd.to_numeric, errors="coerce").astype(self.dtype)
        for c in self.raw:
            if vw.has(c):
                part[c] = vw.frame[c].iloc[ctx:].to_numpy()
        part.insert(0, "step", vw.step[ctx:])
        self.parts.append(part)
        if len(self.parts) > 8:  # few pieces to concatenate at each result
            self.parts = [pd.concat(self.parts, ignore_index=True)]

    def result(self):
        frame = pd.concat(self.parts, ignore_index=True) if self.parts else pd.DataFrame({"step": []})
        self.parts = [frame]
        return self.run(view(frame))


class _TrapCarry(_CheckCarry):
    """``kelly_trap``: the open trap (first and last step, timeout inside) and the closed ones."""

    def __init__(self, check: inv.Check, opt: CheckOptions):
        super().__init__(check, opt)
        self.open: list | None = None  # [first step, last step, timed out]
        self.failing, self.excused, self.longest = [], [], 0
        self.has_timeout = True

    def judge(self, vw: FrameView, ctx: int, found: Found) -> None:
        self.has_timeout = vw.has(v.TIMEOUT)
        timeout = vw.f32(v.TIMEOUT) == 1 if self.has_timeout else np.zeros(vw.n, dtype=bool)
        trapped = np.zeros(vw.n, dtype=bool)
        for a, b in inv.trap_stretches(vw):
            trapped[a:b + 1] = True
        trapped[:ctx] = False
        for a, b in true_runs(trapped):
            stretch = [int(vw.step[a]), int(vw.step[b]), bool(timeout[a:b + 1].any())]
            if self.open is not None and a == ctx:  # the open trap goes on
                self.open[1], self.open[2] = stretch[1], self.open[2] or stretch[2]
            else:
                self._close()
                self.open = stretch
            if b < vw.n - 1:
                self._close()
        if not trapped[vw.n - 1]:
            self._close()

    def _close(self, into: tuple[list, list] | None = None) -> int:
        if self.open is None:
            return 0
        a, b, timed = self.open
        length = b - a + 1
        failing, excused = into or (self.failing, self.excused)
        if length > self.opt.trap_steps:
            (excused if timed else failing).append((a, b))
        if into is None:
            self.open = None
            self.longest = max(self.longest, length)
        return length

    def result(self) -> CheckResult:
        if not self.judged:
            return self.skipped()
        failing, excused = list(self.failing), list(self.excused)
        longest = max(self.longest, self._close((failing, excused)))
        evidence = {"limit": self.opt.trap_steps, "longest": longest,
                    "traps": [[a, b, b - a + 1] for a, b in failing[:MAX_STEPS]],
                    "excused_by_timeout": [[a, b] for a, b in excused[:MAX_STEPS]]}
        starts = [a for a, _ in failing]
        detail = (f"{len(failing)} Kelly trap(s) longer than {self.opt.trap_steps} steps with every account flat "
                  f"and no timeout" if failing else f"longest all-flat stretch with kelly_f=0 or the dead zone up: "
                  f"{longest} steps (limit {self.opt.trap_steps})")
        return CheckResult("kelly_trap", "fail" if failing else "pass", len(failing), starts[0] if starts else None,
                           starts[:MAX_STEPS], detail, spans=failing[:MAX_STEPS], column=self.check.column,
                           evidence=evidence)


class _FiniteCarry(_CheckCarry):
    """``finite_*``: which fields have been seen (leading NaNs are "not recorded") and the bad rows."""

    lookback = 0

    def __init__(self, check: inv.Check, opt: CheckOptions, prefix: str, exclude: str | None = None):
        super().__init__(check, opt)
        self.prefix, self.exclude = prefix, exclude
        self.seen: set[str] = set()
        self.bad = _Steps()
        self.worst: dict[str, int] = {}
        self.order: list[str] = []

    def judge(self, vw: FrameView, ctx: int, found: Found) -> None:
        bad = np.zeros(vw.n - ctx, dtype=bool)
        cols = inv.numeric_columns_under(vw, self.prefix, self.exclude)
        self.order = cols
        for c in cols:
            a = vw.f32(c)[ctx:]
            nan = np.isnan(a)
            if c not in self.seen:
                if nan.all():
                    continue
                nan[:int(np.argmax(~nan))] = False  # rows before a field's first value are not recorded
                self.seen.add(c)
            hit = nan | np.isinf(a)
            if hit.any():
                self.worst[c] = self.worst.get(c, 0) + int(hit.sum())
            bad |= hit
        self.bad.add(vw.step[ctx:][bad])

    def result(self) -> CheckResult:
        if not self.judged:
            return self.skipped()
        if not self.bad.count:
            return CheckResult(self.check.id, "pass", 0, None, [], f"{len(self.seen)} {self.prefix}* field(s) "
                               f"finite on every recorded row", column=self.check.column)
        worst = max(self.order, key=lambda c: self.worst.get(c, -1))  # the first of the worst, as a full check
        return CheckResult(self.check.id, "fail", self.bad.count, self.bad.first, list(self.bad.steps),
                           f"{len(self.worst)} field(s) with non-finite values, first at step {self.bad.first}",
                           column=worst)


class _EvalPnlCarry(Carry):
    """``eval_pnl_baseline``: the last eval-phase ``eval.pnl`` of each fold (row order kept)."""

    lookback = 0

    def __init__(self, check: inv.Check, opt: CheckOptions):
        self.check, self.opt = check, opt
        self.last: dict = {}  # fold -> (row number, step, pnl)
        self.rows = 0
        self.skip: CheckResult | None = None

    def update(self, vw: FrameView, ctx: int) -> None:
        if vw.missing(self.check.needs):
            self.skip = inv.evaluate(self.check, vw, self.opt)
            return
        self.skip = None
        pnl = vw.f32("eval.pnl").astype(np.float64)[ctx:]
        have = np.isfinite(pnl)
        if "phase" in vw.frame.columns:
            have &= vw.frame["phase"].to_numpy(dtype=object)[ctx:] == "eval"
        folds = vw.frame["fold"].to_numpy(dtype=object)[ctx:] if "fold" in vw.frame.columns else None
        for i in np.flatnonzero(have):
            key = folds[i] if folds is not None else None
            self.last[key] = (self.rows + int(i), int(vw.step[ctx + i]), float(pnl[i]))
        self.rows += vw.n - ctx

    def result(self) -> CheckResult:
        if self.skip is not None:
            return self.skip
        if not self.last:
            return CheckResult(self.check.id, "skip", 0, None, [], "no eval-phase eval.pnl value in the run",
                               column=self.check.column)
        rows = sorted(self.last.values())
        bad = [s for _r, s, p in rows if p < self.opt.eval_pnl_baseline]
        vals = ", ".join(f"{p:,.0f}" for *_x, p in sorted(self.last.values(), key=lambda t: t[0])[:6])
        return CheckResult(self.check.id, "fail" if bad else "pass", len(bad), bad[0] if bad else None,
                           bad[:MAX_STEPS], f"final eval pnl per fold {vals}; baseline "
                           f"{self.opt.eval_pnl_baseline:,.0f}", column=self.check.column)


class _ResurrectionCarry(_CheckCarry):
    """``kelly_resurrection``: where the file carries F2 it is row-local; where it does not, whether
    F2 was on is inferred from the whole run, so the rows of each possible verdict are carried."""

    lookback = 0
    _SETS = ("switch", "inferred_on", "plain", "kept")

    def __init__(self, check: inv.Check, opt: CheckOptions):
        super().__init__(check, opt)
        self.sets = {k: _Steps() for k in self._SETS}
        self.n_over, self.n_kept = 0, 0
        self.has_switch = False

    def judge(self, vw: FrameView, ctx: int, found: Found) -> None:
        r = {k: m[ctx:] for k, m in inv.resurrection_rows(vw).items()}
        steps = vw.step[ctx:]
        switch = v.diag.SWITCH_COLUMNS["resurrection"]
        self.has_switch = vw.has(switch)
        if self.has_switch:
            on = vw.f32(switch)[ctx:] == 1
            self.sets["switch"].add(steps[r["outside"] | (r["override"] & on & ~r["live"])
                                          | (r["override"] & ~on & ~r["analytic"])])
            return
        self.n_over += int(r["overridden"].sum())
        self.n_kept += int((r["kept"] & r["analytic"]).sum())
        self.sets["inferred_on"].add(steps[r["outside"] | r["kept"]])
        self.sets["plain"].add(steps[r["outside"] | (r["kept"] & ~r["analytic"])])
        self.sets["kept"].add(steps[r["kept"]])

    def result(self) -> CheckResult:
        if not self.judged:
            return self.skipped()
        status = None
        if self.has_switch:
            got = self.sets["switch"]
        elif self.n_over:
            got = self.sets["inferred_on"]
        elif self.sets["plain"].count:
            got = self.sets["plain"]
        else:
            got = self.sets["kept"]
            status = "warn" if self.n_kept else None
        status = status or ("fail" if got.count else "pass")
        detail = {"warn": "F2 off, or resurrection broken: the file cannot tell",
                  "fail": f"kelly_f not as G17/G18/G21 say, first at step {got.first}"}.get(
            status, "kelly_f = eps_live in the dead zone before a timeout where F2 is on, analytic elsewhere")
        return CheckResult(self.check.id, status, got.count, got.first, list(got.steps), detail,
                           column=self.check.column)


class _RederiveCarry(Carry):
    """The ``rederive.*`` checks: the engine loop run on one context row plus the new rows from the
    carried ``(isv, chain)``, each formula's comparisons tallied (:class:`rederive.Tally`).

    What a whole-prefix run decides from its first row is kept from the first batch: the bootstrap
    (the config a diag logs at row 0). Boundaries, skips and the rows compared read a row and the
    one before it, which the context row gives. A formula whose chain a switch turns on anywhere in
    the run (:data:`rederive.SWITCHED_CHAIN`) is tallied both ways and picked at the result.
    """

    lookback = 1

    def __init__(self, opt: CheckOptions, compile_loop: bool = True):
        self.ulps = opt.rederive_ulps
        self.compile_loop = compile_loop
        self.state = None  # (isv, chain) after the last row
        self.boot: np.ndarray | None = None
        self.tallies: dict[tuple[int, bool], rd.Tally] = {}
        self.absent: dict[int, list[str]] = {}
        self.switched = {name: False for name in rd.SWITCHED_CHAIN.values()}
        self.inferred = True

    def update(self, vw: FrameView, ctx: int) -> None:
        p = rd.prepare(vw)
        if self.boot is None and vw.n:
            self.boot = p.boot
        if self.boot is not None:
            p.boot = self.boot
        self.inferred = p.inferred_boundaries
        compiled = None if self.compile_loop else rd.loop_loaded()  # None: by size, compiling if worth it
        exp, chain_ok, self.state = p.run(0, p.n, first=ctx, state=self.state, compiled=compiled)
        for name in self.switched:
            self.switched[name] = self.switched[name] or rd.switch_on(vw, name)
        self.absent = {k: a for k, f in enumerate(FORMULAS) if (a := rd.missing(vw, f))}
        for k, f in enumerate(FORMULAS):
            if k in self.absent:
                continue
            for chain in ((True,) if f.chain else (False, True) if f.output in rd.SWITCHED_CHAIN else (False,)):
                rows = rd.compared(vw, p, f, chain_ok, chain)
                self.tallies.setdefault((k, chain), rd.Tally()).add(vw, p, f, exp[:, k], rows, self.ulps, ctx)

    def result(self) -> list[CheckResult]:
        out = []
        for k, f in enumerate(FORMULAS):
            if k in self.absent:
                out.append(rd.skipped(f, self.absent[k]))
                continue
            chain = f.chain or (f.output in rd.SWITCHED_CHAIN and self.switched[rd.SWITCHED_CHAIN[f.output]])
            out.append(self.tallies.get((k, chain), rd.Tally()).result(f, self.ulps, self.inferred))
        return out


# ---- findings -----------------------------------------------------------------------------------
class _EpisodeCarry(Carry):
    """``timeout_unreachable``: the dead-zone episodes (runs of the flag a resurrection gap apart),
    the open one carried as its first and last step, cycles and maxima."""

    lookback = 0

    def __init__(self, opt: CheckOptions):
        self.opt = opt
        self.done: list[Finding] = []
        self.open: dict | None = None
        self.after: dict = self._blank()  # flag-off rows since the open episode's last flagged row
        self.after_rows = 0  # how many
        self.last_step = 0
        self.applies = False

    @staticmethod
    def _blank() -> dict:
        return {"dur": math.nan, "mx": math.nan, "to": False, "carried": False}

    def update(self, vw: FrameView, ctx: int) -> None:
        self.applies = vw.has(v.FLAG, v.DURATION, v.MAX_DURATION)
        if not self.applies:
            return
        on = vw.f32(v.FLAG) == 1
        dur, mx = vw.f32(v.DURATION), vw.f32(v.MAX_DURATION)
        to = vw.f32(v.TIMEOUT) == 1 if vw.has(v.TIMEOUT) else np.zeros(vw.n, dtype=bool)
        sw = vw.switch("duration_across_cycles")
        carried = sw if sw is not None else (vw.f32(v.FLAG) == 0) & (dur > 0)
        if vw.n:
            self.last_step = int(vw.step[-1])
        for i in range(ctx, vw.n):  # per row: a few comparisons (vectorizing costs more at commit sizes)
            step = int(vw.step[i])
            if on[i]:
                if self.open is not None and not self.open["end_row_on"] \
                        and step - self.open["end"] - 1 > RESURRECTION_GAP:
                    self._close()
                if self.open is None:
                    self.open = {"start": step, "end": step, "cycles": 1, **self._blank()}
                elif self.open["end_row_on"] is False:
                    self.open["cycles"] += 1
                    self._absorb(self.after)
                self.open["end"], self.open["end_row_on"] = step, True
                self._absorb({"dur": dur[i], "mx": mx[i], "to": to[i], "carried": carried[i]})
                self.after, self.after_rows = self._blank(), 0
            elif self.open is not None:
                self.open["end_row_on"] = False
                self.after_rows += 1
                a = self.after
                a["dur"], a["mx"] = np.fmax(a["dur"], dur[i]), np.fmax(a["mx"], mx[i])
                a["to"], a["carried"] = a["to"] or bool(to[i]), a["carried"] or bool(carried[i])

    def _absorb(self, rows: dict) -> None:
        o = self.open
        o["dur"], o["mx"] = np.fmax(o["dur"], rows["dur"]), np.fmax(o["mx"], rows["mx"])
        o["to"], o["carried"] = o["to"] or bool(rows["to"]), o["carried"] or bool(rows["carried"])

    def _finding(self, o: dict, open_at_end: bool = False) -> Finding | None:
        steps, seen = o["end"] - o["start"] + 1, float(o["dur"])
        limit = float(o["mx"]) if np.isfinite(o["mx"]) else math.nan
        if o["cycles"] < 2 or o["to"] or steps <= self.opt.trap_steps or not seen < limit or o["carried"]:
            return None
        return fd.timeout_finding(o["start"], o["end"], o["cycles"], steps, seen, limit, open_at_end)

    def _close(self) -> None:
        if self.open is not None:
            f = self._finding(self.open)
            if f is not None:
                self.done.append(f)
        self.open, self.after, self.after_rows = None, self._blank(), 0

    def result(self) -> list[Finding]:
        if not self.applies:
            return []
        # the run ends inside the open episode unless more than a resurrection gap of flag-off rows follow it
        at_end = self.open is not None and (self.after_rows == 0 or (
            self.after_rows <= RESURRECTION_GAP and self.last_step - self.open["end"] <= RESURRECTION_GAP))
        tail = self._finding(self.open, at_end) if self.open is not None else None
        return self.done + ([tail] if tail is not None else [])


class _RunsCarry(Carry):
    """Runs of a row mask (row-adjacent), the open one carried: the base of ``tail_on_drift`` and
    ``tau_unclamped``."""

    lookback = 0

    def __init__(self):
        self.closed: list[tuple[int, int, int]] = []  # (first step, last step, rows)
        self.open: list | None = None
        self.applies = False

    def add(self, vw: FrameView, ctx: int, mask: np.ndarray) -> None:
        mask = np.asarray(mask, dtype=bool).copy()
        mask[:ctx] = False
        for a, b in true_runs(mask):
            if self.open is not None and a == ctx:
                self.open[1], self.open[2] = int(vw.step[b]), self.open[2] + b - a + 1
            else:
                self._close()
                self.open = [int(vw.step[a]), int(vw.step[b]), b - a + 1]
            if b < vw.n - 1:
                self._close()
        if vw.n and not mask[vw.n - 1]:
            self._close()

    def _close(self) -> None:
        if self.open is not None:
            self.closed.append(tuple(self.open))
            self.open = None

    def runs(self) -> list[tuple[int, int, int]]:
        return self.closed + ([tuple(self.open)] if self.open is not None else [])


class _DriftCarry(_RunsCarry):
    def update(self, vw: FrameView, ctx: int) -> None:
        self.applies = vw.has(v.RECENCY)
        if not self.applies:
            return
        tail = vw.f32(v.RECENCY) == 0
        deviation = vw.switch("tail_on_deviation")
        if deviation is not None:
            tail &= ~deviation
        self.add(vw, ctx, tail)
        self.closed = [r for r in self.closed if r[2] >= fd.DRIFT_RUN]  # short runs are nothing

    def result(self) -> list[Finding]:
        runs = [r for r in self.runs() if r[2] >= fd.DRIFT_RUN]
        if not self.applies or not runs:
            return []
        spans = [(a, b) for a, b, _n in runs]
        longest = max(n for *_x, n in runs)
        # info, as the full finder: the spec's code and G22's words define this test
        return [Finding("tail_on_drift", "info", f"A tail event fired on {longest} consecutive steps (from step "
                        f"{spans[0][0]}): a steady drift reads as a tail every step.", [a for a, _ in spans], spans,
                        {"runs": len(runs), "tail_steps": sum(n for *_x, n in runs), "longest": longest},
                        v.RECENCY)]


class _TauCarry(_RunsCarry):
    def __init__(self):
        super().__init__()
        self.bad, self.top = _Steps(), -math.inf

    def update(self, vw: FrameView, ctx: int) -> None:
        cols = [c for c in (v.TAU_ACTION, v.TAU_MIN_EFF) if vw.has(c)]
        self.applies = bool(cols)
        over = np.zeros(vw.n, dtype=bool)
        for c in cols:
            a = vw.f32(c)[ctx:]
            over[ctx:] |= np.isfinite(a) & (a > 1)
            if np.isfinite(a).any():
                self.top = max(self.top, float(np.nanmax(a)))
        self.bad.add(vw.step[ctx:][over[ctx:]])
        self.add(vw, ctx, over)
        self.closed = self.closed[:MAX_STEPS]

    def result(self) -> list[Finding]:
        if not self.applies or not self.bad.count:
            return []
        spans = [(a, b) for a, b, _n in self.runs()][:MAX_STEPS]
        return [Finding("tau_unclamped", "warn", f"τ exceeded 1 on {self.bad.count} step(s) (max {self.top:.4g}, "
                        f"first at step {self.bad.first}): no final clamp follows the boost.", list(self.bad.steps),
                        spans, {"max_tau": self.top, "steps_over_1": self.bad.count}, v.TAU_MIN_EFF)]


class _BoundaryTailCarry(Carry):
    """``tail_at_boundary``: row-local, two rows back (the row after a boundary needs the boundary's own
    previous row)."""

    lookback = 2

    def __init__(self):
        self.steps: list[int] = []
        self.boundaries = 0

    def update(self, vw: FrameView, ctx: int) -> None:
        if not vw.has(v.RECENCY):
            return
        tail = vw.f32(v.RECENCY) == 0
        after = np.zeros(vw.n, dtype=bool)
        after[1:] = vw.boundary[:-1] & vw.contiguous[1:]
        hit = (tail & (vw.boundary | after))[ctx:]
        self.boundaries += int(vw.boundary[ctx:].sum())
        self.steps.extend(int(s) for s in vw.step[ctx:][hit])

    def result(self) -> list[Finding]:
        if not self.steps:
            return []
        return [Finding("tail_at_boundary", "warn", f"A tail event fired at {len(self.steps)} fold/phase "
                        f"boundary(ies) (first at step {self.steps[0]}): PREV_WORST was not aligned.",
                        list(self.steps), [], {"boundaries": self.boundaries, "tails_at_boundary": len(self.steps)},
                        v.RECENCY)]


def _check_carry(check: inv.Check, opt: CheckOptions) -> Carry:
    special: dict[str, Callable[[], Carry]] = {
        "kelly_trap": lambda: _TrapCarry(check, opt),
        "finite_regime_fields": lambda: _FiniteCarry(check, opt, v.R),
        "finite_risk_stack_fields": lambda: _FiniteCarry(check, opt, v.P, exclude=v.R),
        "eval_pnl_baseline": lambda: _EvalPnlCarry(check, opt),
        # a batch with a phase/fold change and no field to check the reset with: the run has that change
        "boundary_reset": lambda: RowLocal(check, opt, sticky_skip=True),
        "kelly_resurrection": lambda: _ResurrectionCarry(check, opt),
        "throughput": lambda: (RowLocal(check, opt) if opt.baseline_sps is None else  # a skip, row after row
                               Columns(("wall_time",), lambda vw: inv.result_of(check, vw, opt), np.float64)),
    }
    if check.id in CARRIES:
        return CARRIES[check.id](check, opt)
    return special.get(check.id, lambda: RowLocal(check, opt))()


def _finder_carries(opt: CheckOptions, envelope_history: Callable[[], np.ndarray]) -> dict[str, Carry]:
    return {
        "timeout_unreachable": _EpisodeCarry(opt),
        "tail_on_drift": _DriftCarry(),
        "tail_at_boundary": _BoundaryTailCarry(),
        # bounded state: the peak, the resting level, the end and the divergent rows up to it
        "envelope_decay_horizon": EnvelopeCarry(opt, envelope_history),
        "tau_unclamped": _TauCarry(),
    }


#: Carries supplied for checks by id: ``{id: factory(check, options) -> Carry}`` (see :func:`register_carry`).
CARRIES: dict[str, Callable[[inv.Check, CheckOptions], Carry]] = {}


def register_carry(check_id: str, factory: Callable[[inv.Check, CheckOptions], Carry]) -> None:
    """Give check ``check_id`` its own carried state (a check that is not row-local, or one that
    keeps a recurrence's state rather than re-reading its previous row)."""
    CARRIES[check_id] = factory


class IncrementalVerdict:
    """The verdict of the rows seen so far, updated batch by batch (see the module doc).

    Parameters
    ----------
    options
        The check options, as for :func:`~regime_dash.analysis.verdict.verdict`.
    reload
        Returns the run's rows stored before the batch being folded in (canonical columns): used
        when an update must re-judge the whole run (a new column, a step going back) and for the
        module checks. Without it, the rows are kept here (their memory grows with the run).
    compile_loop
        False: the re-derivation never compiles its loop (numba and the compiled code cost ~110 MB,
        more than a follower's every other part); it runs compiled only where this process already
        holds the loop, else as Python (the same values, slower).
    """

    def __init__(self, options: CheckOptions | None = None,
                 reload: Callable[[], pd.DataFrame] | None = None, compile_loop: bool = True):
        self.options = options or CheckOptions()
        self.reload = reload
        self.compile_loop = compile_loop
        self.current: Verdict | None = None
        self.rebuilds = 0
        self.providers = registry.providers()  # the module checks, as verdict takes them
        self._reset()

    def _reset(self) -> None:
        self.checks = {c.id: _check_carry(c, self.options) for c in inv.CHECKS}
        self.rederived = _RederiveCarry(self.options, self.compile_loop)
        self.finders = _finder_carries(self.options, self._envelope_before)
        self.lookback = max(c.lookback for c in self._carries())
        self.tail = pd.DataFrame()
        self.columns: list[str] = []
        self.last_step: int | None = None
        self.rows = 0
        self.modules = [False] * len(self.providers)  # a provider's checks apply: they run on the whole run
        self.kept: list[pd.DataFrame] = []  # every batch, where there is no reload
        self.structure: Structure | None = None  # of the rows judged whole (the first batch, a re-judging)

    def _carries(self) -> tuple[Carry, ...]:
        return (*self.checks.values(), self.rederived, *self.finders.values())

    def update(self, new: pd.DataFrame) -> Verdict:
        """Fold ``new`` rows (canonical column names, file order) in; the verdict of every row so far."""
        if len(new) == 0 and self.current is not None:
            return self.current
        steps = pd.to_numeric(new["step"], errors="coerce") if "step" in new.columns else None
        fresh = [c for c in new.columns if c not in set(self.columns)]
        if steps is not None:
            steps = steps[self._judged_writer(new)]
        back = steps is not None and self.last_step is not None and (
            bool((steps <= self.last_step).any()) or bool((steps.diff() <= 0).any()))
        if self.rows and (fresh or back):
            whole = pd.concat([self._before(), new], ignore_index=True)
            self.rebuilds += 1
            self._reset()
            return self._fold(whole, whole)
        return self._fold(new)

    def _judged_writer(self, new: pd.DataFrame) -> np.ndarray:
        """The rows of ``new`` written by the writer judged (every row where no field names writers)."""
        st = self.structure
        if st is None or st.writer is None or st.writer_field not in new.columns:
            return np.ones(len(new), dtype=bool)
        return writer_labels(new, st.writer_field) == st.writer

    def _envelope_before(self) -> np.ndarray:
        """The envelope of the rows folded in before the batch at hand (once per new envelope peak)."""
        before = view(self._before())
        return before.f32(v.ENVELOPE).astype(np.float64) if before.has(v.ENVELOPE) else np.empty(0)

    def _before(self) -> pd.DataFrame:
        """The rows folded in before the batch at hand."""
        if self.reload is not None:
            return self.reload()
        return pd.concat(self.kept, ignore_index=True) if self.kept else pd.DataFrame()

    def _fold(self, new: pd.DataFrame, whole: pd.DataFrame | None = None) -> Verdict:
        self.columns += [c for c in new.columns if c not in set(self.columns)]
        judged_rows = new[self._judged_writer(new)] if self.structure is not None else new
        ctx = len(self.tail)
        window = pd.concat([self.tail.reindex(columns=self.columns), judged_rows.reindex(columns=self.columns)],
                           ignore_index=True) if ctx else judged_rows.reindex(columns=self.columns)
        if self.structure is None:  # the rows judged whole: their structure read from all of them
            self.structure = analyse(window, ulps=self.options.rederive_ulps)
            vw = self.structure.view
        else:
            vw = view(window)
            self.structure.gaps.add(vw, ctx)
            self.structure.changes.add(vw, ctx)
        ctx = min(ctx, vw.n)
        for carry in self._carries():
            carry.update(vw, ctx)  # more context than a carry's lookback changes none of its new rows
        module_checks = self._module_checks(vw, new, whole)
        if self.reload is None:
            self.kept.append(new)
        self.rows += vw.n - ctx
        if vw.n:
            self.last_step = int(vw.step[-1])
        self.tail = vw.frame.iloc[max(0, vw.n - self.lookback):]
        checks = [self.checks[i].result() for i in inv.CHECK_IDS] + self.rederived.result() + module_checks
        # the one-frame finders, as find() runs them (fused_mirror_drift needs a second frame), then the structure's
        found = [f for i, _ in fd.FINDERS for f in self.finders[i].result()] + self.structure.findings
        self.current = Verdict(checks, followed(found, checks), self.structure.outline())
        return self.current

    def _module_checks(self, vw: FrameView, new: pd.DataFrame, whole: pd.DataFrame | None) -> list[CheckResult]:
        """Each provider's checks: none while they apply to no column of the run (the window's columns are
        the run's), else on the whole run."""
        out: list[CheckResult] = []
        run: FrameView | None = None
        for k, provider in enumerate(self.providers):
            if not self.modules[k]:
                found = provider.results(vw.frame, None, self.options)
                self.modules[k] = bool(found)
                if not found:
                    continue
            if run is None:
                run = view(whole if whole is not None else pd.concat([self._before(), new], ignore_index=True))
            out.extend(provider.results(run.frame, None, self.options))
        return out
