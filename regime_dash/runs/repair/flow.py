"""What every repair shares after its search: the candidates ranked, verified, and the answer in words.

The search's evaluations are predictions (a sweep row) or already verdicts (a
controller module's full replays). :func:`prune` simplifies the best of them,
:func:`candidates` turns them into the table's rows, :func:`ranked` orders them
(passing ones first, nearest first) and :func:`answer` says what was found; the
verdicts and answers a search ends in without candidates are :func:`cannot_help` and
:func:`nothing_to_do`.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence

from regime_dash.errors import ConfigError, ValidationError
from regime_dash.runs.repair.failures import Failure, blocking
from regime_dash.runs.repair.optimiser import Evaluate, Evaluated
from regime_dash.runs.repair.result import Candidate, RepairResult
from regime_dash.runs.repair.space import SearchSpace

#: ``judge(config) -> (failed ids, the metrics that mattered)``: one full replay and its verdict.
Judge = Callable[[Any], tuple[list[str], dict[str, Any]]]
Progress = Callable[[str, int, int], None]
#: Rounds of dropping changes from the best predicted passes (:func:`prune`).
PRUNE_ROUNDS = 3


def check_counts(top: Any, verify: Any, workers: Any = 1) -> None:
    """Raise :class:`ValidationError` naming a bad ``top`` (an int >= 1), ``verify`` (an int >= 0) or
    ``workers`` (an int >= 1)."""
    for label, v, least in (("top", top, 1), ("verify", verify, 0), ("workers", workers, 1)):
        if isinstance(v, bool) or not isinstance(v, int) or v < least:
            raise ValidationError(f"{label} must be an int >= {least}, got {v!r}", field=label, value=v)


def config_key(config: Any) -> tuple:
    """A config's identity: its field values in declaration order."""
    return tuple(getattr(config, n) for n in config.field_names())


def distinct(evaluated: Iterable[Evaluated]) -> list[Evaluated]:
    """Each config once (its first evaluation), ordered by (shortfall, distance, trial)."""
    seen: dict[tuple, Evaluated] = {}
    for e in evaluated:
        seen.setdefault(config_key(e.config), e)
    return sorted(seen.values(), key=lambda e: (e.shortfall, e.distance, e.trial))


def candidates(space: SearchSpace, pool: Iterable[Evaluated]) -> list[Candidate]:
    """The distinct evaluated configs as candidates (:func:`distinct`'s order), less the base config,
    whose replay is the failure being repaired."""
    base = config_key(space.base)
    return [Candidate(e.config, space.changes(e.config), e.distance, e.shortfall, dict(e.metrics))
            for e in distinct(pool) if config_key(e.config) != base]


def ranked(cands: Iterable[Candidate], top: int) -> list[Candidate]:
    """The candidates to show: passing ones (nearest first), then the other verified ones (fewest
    failures, then nearest), then unverified predictions; at least ``top``, and every verified one.
    A passing candidate that makes every change of a nearer passing one and more comes after the
    passing ones that do not (it adds nothing but distance)."""
    cands = list(cands)
    passing = [c for c in cands if c.passing]

    def extends(c: Candidate) -> bool:
        own = set(c.changes.items())
        return any(p is not c and set(p.changes.items()) < own for p in passing)

    order = sorted(cands, key=lambda c: (not c.passing, extends(c), not c.verified, len(c.failures), c.shortfall,
                                         c.distance))
    shown = [c for c in order if c.verified]
    shown += [c for c in order if not c.verified][:max(0, top - len(shown))]
    return shown


def answer(cands: Sequence[Candidate], searched: int, fields: Sequence[str]) -> tuple[str, str]:
    """``(status, message)`` of a finished search over ``fields`` (``searched`` configs evaluated)."""
    passing = [c for c in cands if c.passing]
    verified = [c for c in cands if c.verified]
    if passing:
        best = passing[0]
        return "passing", (f"{len(passing)} verified passing config(s) among {searched} searched over "
                           f"{len(fields)} field(s); the nearest (distance {best.distance:.3g}): "
                           f"{best.changes_text()}")
    if not verified:
        return "none_passes", f"no candidate could be verified ({searched} configs searched)"
    close = verified[0]
    return "none_passes", (f"no config found in the searched domain passes: {searched} configs searched over "
                           f"{len(fields)} field(s) ({', '.join(fields) or 'none'}), {len(verified)} replayed "
                           f"in full; the closest, {close.changes_text()} (distance {close.distance:.3g}), "
                           f"still fails {', '.join(close.failures)}")


def simpler(changes: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The changes with fewer fields: each change alone, then each change dropped (for three or more)."""
    if len(changes) < 2:
        return []
    alone = [{k: v} for k, v in changes.items()]
    dropped = [{k: v for k, v in changes.items() if k != name} for name in changes] if len(changes) > 2 else []
    return alone + dropped


def prune(space: SearchSpace, evaluated: list[Evaluated], best_n: int, evaluate: Evaluate,
          progress: Progress | None = None, rounds: int = PRUNE_ROUNDS) -> list[Evaluated]:
    """The evaluations, and for each of the ``best_n`` best predicted passes its :func:`simpler` configs,
    evaluated in one call a round (``rounds`` at most; none once nothing new is left), so that the
    candidates change only what they need."""
    pool = list(evaluated)
    seen = {config_key(e.config) for e in pool}
    number = max((e.trial for e in pool), default=0)
    for round_ in range(rounds):
        proposals = []
        for e in [e for e in distinct(pool) if e.predicted_pass][:best_n]:
            for changes in simpler(e.changes):
                try:
                    config = space.config(changes)
                except ConfigError:  # the drop breaks a rule between fields (eps_min <= eps_max)
                    continue
                if config_key(config) not in seen:
                    seen.add(config_key(config))
                    proposals.append((changes, config))
        if not proposals:
            break
        for (changes, config), (short, metrics) in zip(proposals, evaluate([c for _, c in proposals])):
            number += 1
            pool.append(Evaluated(number, config, changes, float(short), space.distance(config), metrics))
        if progress is not None:
            progress("prune", round_ + 1, rounds)
    return pool


def cannot_help(failures: list[Failure], space: SearchSpace, seed: int, before=None) -> RepairResult:
    """The answer when a failure does not depend on config: each such failure named, nothing searched."""
    named = "; ".join(f"{f.id} ({f.why})" for f in blocking(failures))
    return RepairResult("config_cannot_help", f"config cannot help: {named}. Nothing was searched.", failures,
                        space=space, seed=seed, before=before or {})


def nothing_to_do(run_failures: Sequence[Failure] | None, space: SearchSpace, before, seed: int) -> RepairResult:
    """The answer when the base config's replay fails nothing: the run's failures not reproduced by the
    stream given, or (no stored run) nothing to repair."""
    if run_failures:
        ids = ", ".join(f.id for f in run_failures)
        return RepairResult("not_reproduced", f"the run fails {ids}, but the stream replayed under the run's "
                            f"logged config fails nothing: the stream may not be this run's input. Nothing "
                            f"was searched.", list(run_failures), space=space, before=before, seed=seed)
    held = f" (with {', '.join(f'{k}={v}' for k, v in space.held.items())})" if space.held else ""
    return RepairResult("already_passes", f"the config{held} already passes on this stream: nothing to repair.",
                        [], space=space, before=before, seed=seed)


__all__ = ["Judge", "PRUNE_ROUNDS", "answer", "candidates", "cannot_help", "check_counts", "config_key", "distinct",
           "nothing_to_do", "prune", "ranked", "simpler"]
