"""The repair's optimiser: Optuna's samplers driven in batches through the ask-and-tell interface.

Each round asks the sampler for a batch of trials, turns each into a config of the
:class:`~regime_dash.runs.repair.space.SearchSpace`, evaluates the whole batch in one
call (one sweep of the fast engine, or the full replays of a controller module), then
tells the sampler each trial's value. A config the config type rejects (``eps_min >
eps_max``) is told as a failed trial and not evaluated.

The value minimised puts passing first and closeness second: ``shortfall × W +
distance``, where ``shortfall`` is 0 for a candidate predicted to pass and ``W`` is
larger than any distance the space allows, so any predicted pass beats any
predicted failure and, among passes, the nearer config wins.

Samplers (``sampler=``): ``nsga2`` (the default: Optuna's genetic search, whose
generation is the batch; cheap per trial, so thousands of trials stay cheap), ``tpe``
(Optuna's TPE, multivariate, with the constant liar so a batch's trials spread out; its
cost per trial grows with the trials told, ~40 ms a trial at a few hundred), ``qmc``
(scrambled Sobol points), ``random``. Every one is seeded: the same seed, space and
evaluations give the same trials.
"""
from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

from regime_dash.errors import ConfigError, ValidationError
from regime_dash.runs.repair.space import SearchSpace

SAMPLERS = ("nsga2", "tpe", "qmc", "random")

#: ``evaluate(configs) -> [(shortfall, metrics)]``, one pair per config, in order.
Evaluate = Callable[[list[Any]], list[tuple[float, Mapping[str, Any]]]]
Progress = Callable[[int, int], None]


@dataclass
class Evaluated:
    """One evaluated trial: the config, its changes from the base, its shortfall, distance and metrics."""

    trial: int
    config: Any
    changes: dict[str, Any]
    shortfall: float
    distance: float
    metrics: Mapping[str, Any] = field(default_factory=dict)

    @property
    def predicted_pass(self) -> bool:
        return self.shortfall == 0.0


@dataclass
class Search:
    """What :func:`optimise` did: every evaluated trial (in trial order), the rejected ones, the sampler."""

    evaluated: list[Evaluated]
    rejected: list[tuple[dict[str, Any], str]]
    sampler: str
    batches: int


def check_budget(trials: Any, batch: Any) -> None:
    """Raise :class:`ValidationError` naming a bad ``trials`` or ``batch`` (each an int >= 1)."""
    for label, v in (("trials", trials), ("batch", batch)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValidationError(f"{label} must be an int >= 1, got {v!r}", field=label, value=v)


def check_sampler(sampler: Any) -> str:
    """``sampler`` if it names one of :data:`SAMPLERS`, else :class:`ValidationError` naming it."""
    if sampler not in SAMPLERS:
        raise ValidationError(f"unknown sampler {sampler!r}; choose one of {', '.join(SAMPLERS)}",
                              field="sampler", value=sampler)
    return sampler


def _sampler(name: str, seed: int, batch: int):
    import optuna

    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True,
                                          n_startup_trials=min(batch, 16))
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=max(2, batch))
    if name == "qmc":
        return optuna.samplers.QMCSampler(seed=seed, scramble=True)
    return optuna.samplers.RandomSampler(seed=seed)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Optuna without its per-trial log lines and its experimental-feature warnings (restored after)."""
    import optuna

    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            yield
    finally:
        optuna.logging.set_verbosity(level)


def weight(space: SearchSpace) -> float:
    """``W``: one more than the largest distance from the run's config any candidate of ``space`` can have."""
    largest = space.distance(space.base)
    for a in space.axes:
        largest += 1.0 if a.kind == "bool" else max(a.distance(a.origin, a.low), a.distance(a.origin, a.high))
    return largest + 1.0


def optimise(space: SearchSpace, evaluate: Evaluate, *, trials: int, batch: int, seed: int,
             sampler: str = "nsga2", seeds: Sequence[Mapping[str, Any]] = (),
             progress: Progress | None = None) -> Search:
    """Search ``space`` for ``trials`` trials in batches of ``batch``; see the module docstring.

    Parameters
    ----------
    space
        The fields searched and the distance.
    evaluate
        One call per batch: ``[(shortfall, metrics)]`` of its configs.
    trials, batch
        The trials in all (the base config and ``seeds`` among them), and per batch.
    seed
        The sampler's seed.
    sampler
        One of :data:`SAMPLERS`.
    seeds
        Changes from the base (``{field: value}``) tried first, after the base itself.
    progress
        ``progress(trials done, trials)`` after each batch.
    """
    import optuna

    check_budget(trials, batch)
    name = check_sampler(sampler)
    w = weight(space)
    evaluated: list[Evaluated] = []
    rejected: list[tuple[dict[str, Any], str]] = []
    rounds = 0
    with _quiet():
        study = optuna.create_study(direction="minimize", sampler=_sampler(name, seed, batch))
        for changes in [{}, *seeds]:
            study.enqueue_trial(space.params_of(changes), skip_if_exists=True)
        while len(evaluated) + len(rejected) < trials:
            asked = [study.ask() for _ in range(min(batch, trials - len(evaluated) - len(rejected)))]
            ready = []
            for trial in asked:
                changes = space.suggest(trial)
                try:
                    ready.append((trial, changes, space.config(changes)))
                except ConfigError as exc:
                    rejected.append((changes, str(exc)))
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
            scores = evaluate([c for _, _, c in ready]) if ready else []
            for (trial, changes, config), (short, metrics) in zip(ready, scores):
                dist = space.distance(config)
                study.tell(trial, short * w + dist)
                evaluated.append(Evaluated(trial.number, config, changes, float(short), dist, metrics))
            rounds += 1
            if progress is not None:
                progress(len(evaluated) + len(rejected), trials)
    return Search(evaluated, rejected, name, rounds)


__all__ = ["Evaluate", "Evaluated", "SAMPLERS", "Search", "check_budget", "check_sampler", "optimise", "weight"]
