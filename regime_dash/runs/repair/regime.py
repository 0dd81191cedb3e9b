"""``repair``: the regime config that would have passed, searched over one stream.

1. **What failed.** The run's verdict (a stored run's, when given) and the verdict of the
   stream replayed under the run's config (on the fast engine when the sweeps run there:
   every engine gives the same bits) are sorted into failures config may repair and
   those it cannot (:mod:`regime_dash.runs.repair.failures`); with any of the latter
   nothing is searched.
2. **Screen.** :func:`regime_dash.runs.sensitivity.sensitivity` sweeps each field one at a
   time around the run's config (no pairs); a field that moves no summary metric is not
   searched. Its best one-field moves seed the search. ``fields=`` skips the screen.
3. **Search.** Optuna's sampler (:mod:`regime_dash.runs.repair.optimiser`) in batches;
   each batch is one :func:`regime_dash.runs.sweeps.sweep` on the fast engine (CPU or GPU),
   its rows scored by the targets of :mod:`regime_dash.runs.repair.targets` (a failure no
   sweep metric predicts makes every batch full replays judged by the verdict instead).
   Then the best predicted passes are simplified (:func:`regime_dash.runs.repair.flow.prune`:
   each change alone, each change dropped, one sweep a round), so the candidates change
   only what they need.
4. **Verify.** The best candidates are replayed in full on ``verify_engine`` (the
   reference engine by default) and judged by :func:`regime_dash.analysis.verdict.verdict`;
   only those with no failure are called passing.

Values in, values out: the stream and the run's verdict come from the caller.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from regime_dash.analysis.verdict import Verdict, verdict
from regime_dash.core.config import RegimeConfig, field_names
from regime_dash.diag.catalogue import LOGGED_CONFIG
from regime_dash.engine.summary import METRICS
from regime_dash.runs.repair import flow
from regime_dash.runs.repair.failures import Failure, blocking, diagnose
from regime_dash.runs.repair.optimiser import check_budget, check_sampler, optimise
from regime_dash.runs.repair.result import RepairResult
from regime_dash.runs.repair.space import SearchSpace
from regime_dash.runs.repair.targets import Target, shortfall, targets_of
from regime_dash.runs.repair.verifier import Verifier, judge, judged_replay, key_metrics
from regime_dash.errors import ConfigError

#: Trials of a search, and per batch (one sweep each), unless told otherwise.
TRIALS = 256
BATCH = 64
#: Candidates shown, and replayed in full to verify them.
TOP = 5

Progress = Callable[[str, int, int], None]


def logged_config(frame: pd.DataFrame) -> tuple[RegimeConfig, list[str]]:
    """``(the config a diag frame logs, the fields it does not log)``: each logged field at its last
    logged row (a field the frame lacks keeps the spec's default)."""
    values, missing = {}, []
    for name in field_names():
        col = LOGGED_CONFIG.get(name)
        series = frame[col].dropna() if col is not None and col in frame.columns else None
        if series is None or series.empty:
            missing.append(name)
            continue
        v = series.iloc[-1].item()
        values[name] = bool(v) if isinstance(RegimeConfig.__dataclass_fields__[name].default, bool) else float(v)
    return RegimeConfig(**values), missing


def repair(stream: Any, origin: RegimeConfig | None = None, *, run_failures: Sequence[Failure] | None = None,
           fields: Sequence[str] | None = None, held: Mapping[str, Any] | None = None, trials: int = TRIALS,
           batch: int = BATCH, seed: int = 0, sampler: str = "nsga2", top: int = TOP, verify: int = TOP,
           engine: str = "fast", device: str = "auto", verify_engine: str = "reference",
           workers: int = 1, progress: Progress | None = None) -> RepairResult:
    """Search the config that would have passed on ``stream``; see the module docstring.

    Parameters
    ----------
    stream
        The run's input stream (:class:`~regime_dash.core.streams.Stream`).
    origin
        The config the run failed under (its logged config); the spec's defaults if None.
    run_failures
        A stored run's diagnosed failures (:func:`~regime_dash.runs.repair.failures.diagnose` of its
        verdict); None when the run is the replay itself.
    fields
        The fields searched (no screen); None: every field with a domain that the screen finds moving.
    held
        ``{field: value}`` held fixed (``--set``).
    trials, batch, seed, sampler
        The search's budget, its batch (one sweep each), the sampler's seed and name
        (:mod:`regime_dash.runs.repair.optimiser`).
    top, verify
        Candidates shown (at least), and replayed in full to verify them.
    engine, device
        The sweeps' engine (``fast``: phase 1 once, a scan per config) and its device.
    verify_engine
        The engine of the full replays that verify: ``reference`` by default.
    workers
        Processes that verify (each replays one candidate at a time; :func:`~regime_dash.runs.repair.verifier.default_workers`
        gives one per core); 1, the default, verifies in this process. The processes are
        spawned, so a script that asks for more than one needs the ``if __name__ == "__main__":``
        guard (``python -m regime_dash repair`` has it).
    progress
        ``progress(stage, done, total)`` per stage (``screen``, ``search``, ``prune``, ``verify``).

    Raises
    ------
    ConfigError
        An unknown field in ``fields`` or ``held``, a field in both, a held value the config rejects.
    ValidationError
        A bad ``trials``, ``batch``, ``top``, ``verify``, ``workers`` or sampler.
    """
    t0 = time.perf_counter()
    origin = RegimeConfig() if origin is None else origin
    space = SearchSpace.of(origin, fields, held)
    check_budget(trials, batch)
    check_sampler(sampler)
    flow.check_counts(top, verify, workers)
    report = progress or (lambda stage, done, total: None)
    if run_failures and blocking(run_failures):
        return flow.cannot_help(list(run_failures), space, seed)
    search = _Search(stream, space, engine, device, verify_engine, report, workers)
    frame, judged = search.base_replay()
    before, failures = key_metrics(frame, judged), diagnose(judged)
    del frame
    if blocking(failures):
        return flow.cannot_help(failures, space, seed, before)
    if not failures:
        return flow.nothing_to_do(run_failures, space, before, seed)
    search.targets, search.unpredicted = targets_of(failures)
    search.seconds["diagnose"] = time.perf_counter() - t0
    result = search.run(fields is None, trials, batch, seed, sampler, top, verify)
    result.failures, result.before = failures, before
    result.seconds = {**search.seconds, "total": time.perf_counter() - t0}
    return result


def repair_run(frame: pd.DataFrame, stream: Any = None, **options: Any) -> RepairResult:
    """:func:`repair` of a stored run: its diag frame (canonical columns) judged first.

    A failure config cannot help is named without the stream; a run that fails nothing has
    nothing to repair. Otherwise the stream is needed: a diag logs per-step sums, not the
    [T, b] rewards and lots a replay reads, so without ``stream`` the answer is
    ``needs_stream``. With it, the search starts from the run's logged config
    (:func:`logged_config`; a field the diag does not log keeps the spec's default, which the
    message says), ``options`` as :func:`repair` takes them.
    """
    failures = diagnose(verdict(frame))
    origin, unlogged = logged_config(frame)
    space = SearchSpace.of(origin, options.get("fields"), options.get("held"))
    if blocking(failures):
        return flow.cannot_help(failures, space, options.get("seed", 0))
    if not failures:
        return RepairResult("already_passes", "the run fails nothing: nothing to repair.", [], space=space,
                            seed=options.get("seed", 0))
    if stream is None:
        ids = ", ".join(f.id for f in failures)
        return RepairResult("needs_stream", f"the run fails {ids}, which config may repair, but a stored run's "
                            f"diag does not hold its input stream (the [T, b] rewards and lots a replay reads): "
                            f"give the run's recorded stream with --stream FILE (.npz or .parquet).", failures,
                            space=space, seed=options.get("seed", 0))
    result = repair(stream, origin, run_failures=failures, **options)
    if unlogged:
        result.message += f" (fields the diag does not log, taken at the spec's defaults: {', '.join(unlogged)})"
    return result


class _Search:
    """One repair's search after the diagnosis: screen, optimise, prune, verify (see the module docstring)."""

    def __init__(self, stream: Any, space: SearchSpace, engine: str, device: str, verify_engine: str,
                 report: Progress, workers: int = 1):
        self.stream, self.space, self.workers = stream, space, workers
        self.engine, self.device, self.verify_engine, self.report = engine, device, verify_engine, report
        self.targets: list[Target] = []
        self.unpredicted: list[str] = []
        self.engine_ran = ""
        self.seconds: dict[str, float] = {}
        self.verdicts: dict[tuple, tuple[list[str], dict[str, Any]]] = {}
        self._prepared: Any = None

    def run(self, screen: bool, trials: int, batch: int, seed: int, sampler: str, top: int,
            verify: int) -> RepairResult:
        with Verifier(self.stream, self.verify_engine, self.workers if verify else 1) as verifier:
            return self._run(verifier, screen, trials, batch, seed, sampler, top, verify)

    def _run(self, verifier: Verifier, screen: bool, trials: int, batch: int, seed: int, sampler: str, top: int,
             verify: int) -> RepairResult:
        t = time.perf_counter()
        space, seeds, screened_out = self._screen(batch) if screen else (self.space, [], {})
        self.seconds["screen"] = time.perf_counter() - t
        if verify and not self.unpredicted:  # the screen's best predicted passes, verified while the search runs
            verifier.start(space.config(ch) for short, ch in seeds[:self.workers] if short == 0.0)
        seeds = [ch for _, ch in seeds]
        common = {"targets": self.targets, "unpredicted": self.unpredicted, "space": space,
                  "screened_out": screened_out, "seed": seed, "verify_engine": self.verify_engine}
        if not space.axes:
            return RepairResult("none_passes", "no config field moves any summary metric on this stream, one "
                                "field at a time around the run's config: no config in the domain was found "
                                "to pass. Name fields with --fields to search them all the same.", [], **common)
        evaluate = self._verdicts if self.unpredicted else self._sweep_rows
        self.engine_ran = self.verify_engine if self.unpredicted else self.engine_ran
        t = time.perf_counter()
        search = optimise(space, evaluate, trials=trials, batch=batch, seed=seed, sampler=sampler, seeds=seeds,
                          progress=lambda done, total: self.report("search", done, total))
        self.seconds["search"] = time.perf_counter() - t
        self.seconds["search_evaluations"] = self.seconds.pop("evaluations", 0.0)  # the rest is the sampler's
        t = time.perf_counter()
        pool = flow.prune(space, search.evaluated, verify, evaluate, self.report)
        self.seconds["prune"] = time.perf_counter() - t
        self.seconds.pop("evaluations", None)
        t = time.perf_counter()
        cands = flow.candidates(space, pool)
        for c in cands:
            known = self.verdicts.get(flow.config_key(c.config))
            if known is not None:
                c.failures, c.after = known
                c.verified, c.engine = True, self.verify_engine
        verifier.finish(cands, verify, self.report)
        self.seconds["verify"] = time.perf_counter() - t
        shown = flow.ranked(cands, top)
        status, message = flow.answer(shown, len(cands), space.names)
        return RepairResult(status, message, [], shown, searched=len(cands), rejected=len(search.rejected),
                            sampler=search.sampler, engine=self.engine_ran, **common)

    def base_replay(self) -> tuple[pd.DataFrame, Verdict]:
        """The base config's full replay and verdict: on the sweeps' fast engine when that is the engine
        (every engine gives the same bits), else on the verification engine."""
        if self.engine != "fast":
            return judged_replay(self.stream, self.space.base, self.verify_engine)
        frame = self.prepared().replay(self.space.base).frame
        return frame, verdict(frame)

    def prepared(self):
        """The stream prepared once on the sweeps' engine: every sweep and the base replay share its phase 1."""
        if self._prepared is None:
            from regime_dash.engine import ReplayOptions, prepare
            from regime_dash.engine.sweep import sweep_engine

            self._prepared = prepare(self.stream, sweep_engine(self.engine), ReplayOptions(device=self.device))
        return self._prepared

    def _screen(self, batch: int) -> tuple[SearchSpace, list[dict[str, Any]], dict[str, str]]:
        """The space of the fields the one-at-a-time sensitivity sees move, the best one-field moves
        (seeds), and the fields left out with why."""
        from regime_dash.runs.sensitivity import prepared_sensitivity

        def report(fraction: float, label: str) -> None:
            self.report("screen", round(fraction * 100), 100)

        result = prepared_sensitivity(self.prepared(), self.space.base, fields=self.space.names, pair_fields=0,
                                      explain_findings=False, progress=report)
        spans = result.effects.groupby("field", sort=False)["span"].max()
        moving = [n for n in self.space.names if spans.get(n, 0.0) > 0]
        out = {n: "moved no summary metric, one field at a time around the run's config"
               for n in self.space.names if n not in moving}
        space = SearchSpace.of(self.space.origin, moving, self.space.held) if moving else \
            SearchSpace(self.space.origin, self.space.base, (), self.space.held)
        return space, self._seeds(space, result.oat, batch), out

    def _seeds(self, space: SearchSpace, oat: pd.DataFrame, batch: int) -> list[tuple[float, dict[str, Any]]]:
        """The one-field moves of the screen that predict best (nearest first), ``batch`` at most, each with
        its shortfall and its value on the sampler's grid (the config the search evaluates)."""
        if not self.targets:
            return []
        axes = {a.name: a for a in space.axes}
        rows = oat[oat["field"].isin(space.names)]
        scored = []
        for row in rows.to_dict("records"):
            name = row["field"]
            changes = {name: axes[name].snap(row[name])}
            try:
                config = space.config(changes)
            except ConfigError:  # on the grid, the value breaks a rule between fields
                continue
            scored.append((shortfall(self.targets, row), space.distance(config), changes))
        scored.sort(key=lambda s: (s[0], s[1]))
        return [(short, c) for short, _, c in scored[:batch]]

    def _sweep_rows(self, configs: list[RegimeConfig]) -> list[tuple[float, dict[str, Any]]]:
        """One sweep of ``configs``: each row's shortfall against the targets, and its metrics."""
        t = time.perf_counter()
        result = self.prepared().sweep(configs)
        self.seconds["evaluations"] = self.seconds.get("evaluations", 0.0) + time.perf_counter() - t
        self.engine_ran = result.engine
        rows = result.table[list(METRICS)].to_dict("records")
        return [(shortfall(self.targets, r), r) for r in rows]

    def _verdicts(self, configs: list[RegimeConfig]) -> list[tuple[float, dict[str, Any]]]:
        """Full replays judged by the verdict (a failure no sweep metric predicts): each config's failures."""
        one, out = judge(self.stream, self.verify_engine), []
        for config in configs:
            key = flow.config_key(config)
            if key not in self.verdicts:
                self.verdicts[key] = one(config)
            failed, after = self.verdicts[key]
            out.append((float(len(failed)), after))
        return out


__all__ = ["BATCH", "TOP", "TRIALS", "judged_replay", "key_metrics", "logged_config", "repair", "repair_run"]
