"""Verification of the regime config's candidates: a full replay of the stream, judged by the verdict.

:func:`judge` replays one config on an engine (the reference engine by default) and gives its
failed ids and the metrics that mattered (:func:`key_metrics`). :class:`Verifier` runs these
judgements here, or in spawned worker processes (a reference replay is one core's work; a
process's start costs its imports, which pays from :data:`PROCESS_STEPS` steps). The workers
start when the verifier opens, so their imports overlap the search, and :meth:`Verifier.start`
hands them the screen's best one-field moves while the search still runs: the final
candidates that were among them are verified already.
"""
from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
from typing import Any, Callable, Iterable, Sequence

import pandas as pd

from regime_dash.analysis.verdict import Verdict, verdict
from regime_dash.core.config import RegimeConfig
from regime_dash.engine.summary import summarize_frame
from regime_dash.runs.repair.failures import SUCCESS_CRITERIA, failed_ids
from regime_dash.runs.repair.flow import Judge, config_key
from regime_dash.runs.repair.result import Candidate

#: Steps from which verifying in processes pays: a reference replay of this many steps takes seconds,
#: more than a spawned process's start (its imports).
PROCESS_STEPS = 20_000

Progress = Callable[[str, int, int], None]


def key_metrics(frame: pd.DataFrame, judged: Verdict) -> dict[str, Any]:
    """The metrics that mattered of one full replay: timeouts, dead-zone steps, the longest trap and the
    success criteria's statuses."""
    summary = summarize_frame(frame)
    trap = next((c for c in judged.checks if c.id == "kelly_trap"), None)
    out: dict[str, Any] = {"timeouts": summary["timeouts"], "dead_zone_steps": summary["dead_zone_steps"],
                           "longest_dead_zone": summary["longest_dead_zone"],
                           "trap_longest": None if trap is None else trap.evidence.get("longest")}
    statuses = {c.id: c.status for c in judged.checks}
    out.update({f"criterion.{i}": statuses[i] for i in SUCCESS_CRITERIA if i in statuses})
    return out


def judged_replay(stream: Any, config: RegimeConfig, engine: str) -> tuple[pd.DataFrame, Verdict]:
    """``(frame, verdict)`` of one full replay of ``stream`` under ``config`` on ``engine``."""
    from regime_dash.engine import replay

    frame = replay(stream, config, engine=engine)
    return frame, verdict(frame)


def judge(stream: Any, engine: str) -> Judge:
    """``config -> (failed ids, the metrics that mattered)`` of full replays of ``stream`` on ``engine``."""
    def one(config: RegimeConfig) -> tuple[list[str], dict[str, Any]]:
        frame, judged = judged_replay(stream, config, engine)
        return failed_ids(judged), key_metrics(frame, judged)

    return one


def default_workers(verify: int, steps: int) -> int:
    """Processes that verify ``verify`` candidates of a ``steps``-step stream: one per core, at most one per
    candidate, from :data:`PROCESS_STEPS` steps; below it, 1 (in this process)."""
    if steps < PROCESS_STEPS:
        return 1
    return max(1, min(verify, os.cpu_count() or 1))


#: A verifying worker process's stream, set once when the process starts (:func:`_worker_init`).
_worker_stream: Any = None


def _worker_init(stream: Any) -> None:
    global _worker_stream
    _worker_stream = stream


def _worker_judge(config: RegimeConfig, engine: str) -> tuple[list[str], dict[str, Any]]:
    """:func:`judge` of the worker's stream (a verifying process's task)."""
    return judge(_worker_stream, engine)(config)


def _worker_ready() -> None:
    """A worker's first task: the engine and the verdict imported before the first candidate comes."""
    import regime_dash.engine.reference  # noqa: F401


class Verifier:
    """Full replays judged, here (``workers`` 1) or in ``workers`` spawned processes; a context manager.

    Spawned, not forked: this process runs numba's threads, which a forked child must not inherit.
    """

    def __init__(self, stream: Any, engine: str, workers: int):
        self.stream, self.engine, self.workers = stream, engine, workers
        self.pool: concurrent.futures.ProcessPoolExecutor | None = None
        self.futures: dict[tuple, concurrent.futures.Future] = {}

    def __enter__(self) -> "Verifier":
        if self.workers > 1:
            self.pool = concurrent.futures.ProcessPoolExecutor(
                self.workers, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_init,
                initargs=(self.stream,))
            for _ in range(self.workers):  # each worker starts now, while the search runs
                self.pool.submit(_worker_ready)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)

    def start(self, configs: Iterable[RegimeConfig]) -> None:
        """Hand ``configs`` to the workers now (nothing here with one worker: it judges when asked)."""
        if self.pool is None:
            return
        for config in configs:
            key = config_key(config)
            if key not in self.futures:
                self.futures[key] = self.pool.submit(_worker_judge, config, self.engine)

    def finish(self, cands: Sequence[Candidate], n: int, progress: Progress | None = None) -> None:
        """The first ``n`` unverified of ``cands`` verified (in place), with every one started before."""
        todo = [c for c in cands if not c.verified][:n]
        started = [c for c in cands if not c.verified and config_key(c.config) in self.futures]
        todo += [c for c in started if c not in todo]
        self.start(c.config for c in todo)
        here = None if self.pool is not None else judge(self.stream, self.engine)
        for k, c in enumerate(todo):
            c.failures, c.after = here(c.config) if here else self.futures[config_key(c.config)].result()
            c.verified, c.engine = True, self.engine
            if progress is not None:
                progress("verify", k + 1, len(todo))


__all__ = ["PROCESS_STEPS", "Verifier", "default_workers", "judge", "judged_replay", "key_metrics"]
