"""The repair search for a controller module's config (SP14, SP18, Pearl C): the config that would have
passed the module's own checks on its stream.

The same search as the regime config's (:mod:`regime_dash.runs.repair`): the failures
sorted into those config may repair and those it cannot (a ``<module>.rederive.*``
failure is a kernel or logging fault: named, nothing searched), the fields and their
distance from the module config's ``param()`` domains, Optuna's samplers in batches.
A module has no sweep engine: each candidate is a full replay of the module on the
reference engine, judged by :func:`regime_dash.analysis.verdict.verdict`, so every
evaluated candidate is verified, and its shortfall is its count of failures.

The screen: each field one at a time around the run's config (a switch flipped, a
number at the ends and the middle of its domain); a field that moves neither the
module's summary metrics nor its failures is not searched, and the moves that fail
least seed the search.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence

from regime_dash.analysis.verdict import verdict
from regime_dash.errors import ConfigError
from regime_dash.modules.controller import ControllerModule
from regime_dash.runs.repair import flow
from regime_dash.runs.repair.failures import Failure, blocking, diagnose, failed_ids
from regime_dash.runs.repair.optimiser import check_budget, check_sampler, optimise
from regime_dash.runs.repair.result import RepairResult
from regime_dash.runs.repair.space import Axis, SearchSpace

#: A module search's trials and batch unless told otherwise: each trial is a full replay.
TRIALS = 64
BATCH = 16

Progress = Callable[[str, int, int], None]


def module_metrics(module: ControllerModule, frame: Any, failed: Sequence[str]) -> dict[str, Any]:
    """The metrics that mattered of one module replay: its summary and its count of failures."""
    return {**module.summary(frame), "failures": len(failed)}


def _judge(module: ControllerModule, stream: Any, engine: str) -> flow.Judge:
    def judge(config: Any) -> tuple[list[str], dict[str, Any]]:
        frame = module.replay(stream, config, engine)
        failed = failed_ids(verdict(frame))
        return failed, module_metrics(module, frame, failed)

    return judge


def repair_module(module: ControllerModule, stream: Any, origin: Any = None, *,
                  run_failures: Sequence[Failure] | None = None, fields: Sequence[str] | None = None,
                  held: Mapping[str, Any] | None = None, trials: int = TRIALS, batch: int = BATCH, seed: int = 0,
                  sampler: str = "nsga2", top: int = 5, engine: str = "reference",
                  progress: Progress | None = None) -> RepairResult:
    """Search the module config that would have passed on ``stream``; see the module docstring.

    Parameters are those of :func:`regime_dash.runs.repair.repair` (``origin`` defaults to the
    module's default config; ``engine`` is the module's replay engine, ``reference`` by default).

    Raises
    ------
    ConfigError
        An unknown field in ``fields`` or ``held``, a field in both, a held value the config rejects.
    ValidationError
        A bad ``trials``, ``batch``, ``top`` or sampler.
    """
    t0 = time.perf_counter()
    origin = module.default_config() if origin is None else origin
    space = SearchSpace.of(origin, fields, held)
    check_budget(trials, batch)
    flow.check_counts(top, 0)
    check_sampler(sampler)
    report = progress or (lambda stage, done, total: None)
    if run_failures and blocking(run_failures):
        return flow.cannot_help(list(run_failures), space, seed)
    judge = _judge(module, stream, engine)
    frame = module.replay(stream, space.base, engine)
    judged = verdict(frame)
    failures = diagnose(judged, modules=True)
    before = module_metrics(module, frame, failed_ids(judged))
    if blocking(failures):
        return flow.cannot_help(failures, space, seed, before)
    if not failures:
        return flow.nothing_to_do(run_failures, space, before, seed)
    search = _ModuleSearch(space, judge, report)
    result = search.run(fields is None, trials, batch, seed, sampler, top, engine)
    result.failures, result.before, result.subject = failures, before, module.name
    result.unpredicted = [f.id for f in failures]  # no sweep predicts a module: every candidate is judged
    result.seconds = {**search.seconds, "total": time.perf_counter() - t0}
    return result


class _ModuleSearch:
    """A module's screen, search and prune, every evaluation a verified full replay."""

    def __init__(self, space: SearchSpace, judge: flow.Judge, report: Progress):
        self.space, self.judge, self.report = space, judge, report
        self.verdicts: dict[tuple, tuple[list[str], dict[str, Any]]] = {}
        self.seconds: dict[str, float] = {}

    def evaluate(self, configs: list[Any]) -> list[tuple[float, dict[str, Any]]]:
        """Each config's full replay judged (once per distinct config): its failures count and metrics."""
        out = []
        for config in configs:
            key = flow.config_key(config)
            if key not in self.verdicts:
                self.verdicts[key] = self.judge(config)
            failed, after = self.verdicts[key]
            out.append((float(len(failed)), after))
        return out

    def run(self, screen: bool, trials: int, batch: int, seed: int, sampler: str, top: int,
            engine: str) -> RepairResult:
        t = time.perf_counter()
        space, seeds, screened_out = self._screen(batch) if screen else (self.space, [], {})
        self.seconds["screen"] = time.perf_counter() - t
        common = {"space": space, "screened_out": screened_out, "seed": seed, "verify_engine": engine,
                  "engine": engine}
        if not space.axes:
            return RepairResult("none_passes", "no config field moves the module's metrics or checks on this "
                                "stream, one field at a time around the run's config: no config in the domain "
                                "was found to pass. Name fields with --fields to search them all the same.", [],
                                **common)
        t = time.perf_counter()
        search = optimise(space, self.evaluate, trials=trials, batch=batch, seed=seed, sampler=sampler,
                          seeds=seeds, progress=lambda done, total: self.report("search", done, total))
        self.seconds["search"] = time.perf_counter() - t
        t = time.perf_counter()
        pool = flow.prune(space, search.evaluated, top, self.evaluate, self.report)
        self.seconds["prune"] = time.perf_counter() - t
        cands = flow.candidates(space, pool)
        for c in cands:
            c.failures, c.after = self.verdicts[flow.config_key(c.config)]
            c.verified, c.engine = True, engine
        shown = flow.ranked(cands, top)[:top]  # every candidate is verified here: the best ``top`` of them
        status, message = flow.answer(shown, len(cands), space.names)
        return RepairResult(status, message, [], shown, searched=len(cands), rejected=len(search.rejected),
                            sampler=search.sampler, **common)

    def _screen(self, batch: int) -> tuple[SearchSpace, list[dict[str, Any]], dict[str, str]]:
        """The fields whose one-at-a-time moves change the metrics or the failures, the best moves (seeds),
        and the fields left out with why."""
        base = self.evaluate([self.space.base])[0]
        moves: list[tuple[float, float, dict[str, Any]]] = []
        moving = []
        for k, axis in enumerate(self.space.axes):
            for value in screen_values(axis):
                try:
                    config = self.space.config({axis.name: value})
                except ConfigError:
                    continue
                short, metrics = self.evaluate([config])[0]
                if (short, dict(metrics)) != (base[0], dict(base[1])) and axis.name not in moving:
                    moving.append(axis.name)
                moves.append((short, self.space.distance(config), {axis.name: value}))
            self.report("screen", k + 1, len(self.space.axes))
        out = {a.name: "moved neither the module's metrics nor its checks, one field at a time"
               for a in self.space.axes if a.name not in moving}
        names = [a.name for a in self.space.axes if a.name in moving]
        space = SearchSpace.of(self.space.origin, names, self.space.held) if names else \
            SearchSpace(self.space.origin, self.space.base, (), self.space.held)
        moves = sorted((m for m in moves if next(iter(m[2])) in moving), key=lambda m: (m[0], m[1]))
        return space, [m[2] for m in moves[:batch]], out


def screen_values(axis: Axis) -> list[Any]:
    """The values a screen tries for one field: a switch flipped; a number's domain ends and middle
    (on its grid), each unlike the run's value."""
    if axis.kind == "bool":
        return [not axis.origin]
    values = [axis.snap(v) for v in (axis.lo, (axis.lo + axis.hi) / 2, axis.hi)]
    return [v for v in dict.fromkeys(values) if v != axis.origin]


__all__ = ["BATCH", "TRIALS", "module_metrics", "repair_module", "screen_values"]
