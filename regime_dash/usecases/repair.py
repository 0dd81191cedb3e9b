"""The config that would have passed: what ``repair`` and the "Find a passing config" action of Replay and
Explore do.

:class:`RepairRequest` holds what a search is asked (the source: a stored run, a stream
file, a scenario or a controller module; the fields, the held settings and the search's
knobs) as plain values; :func:`repair_request` checks it, loads the stream it names, fills
the defaults (trials and batch per kind of config, verifying workers per stream length) and
runs the search (:func:`regime_dash.runs.repair.repair`,
:func:`~regime_dash.runs.repair.repair_run`,
:func:`regime_dash.modules.repair.repair_module`). :func:`repair_stream` is the page's search
around a what-if config on a stream it holds; :func:`repair_stored` judges a stored run's frame.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Callable, Sequence

from regime_dash.usecases.warmup import announced

if TYPE_CHECKING:
    from regime_dash.core.config import RegimeConfig
    from regime_dash.runs.repair.result import RepairResult

#: ``progress(stage, done, total)``: stages ``screen``, ``search``, ``prune``, ``verify``.
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class RepairRequest:
    """One repair search as asked: one source (``target``, ``stream`` or ``scenario``; ``module``, with
    ``stream`` an ``.npz`` of its arrays) and the search's settings (None: the kind's default)."""

    target: str | None = None
    stream: str | None = None
    scenario: str | None = None
    module: str | None = None
    fields: str | Sequence[str] | None = None
    settings: Sequence[str] = ()
    trials: int | None = None
    batch: int | None = None
    seed: int = 0
    sampler: str = "nsga2"
    top: int = 5
    verify: int | None = None
    steps: int | None = None
    accounts: int | None = None
    stream_seed: int = 0
    engine: str = "fast"
    device: str = "auto"
    verify_engine: str = "reference"
    workers: int | None = None
    store: str | None = None

    def check_sources(self) -> None:
        """One source named, and ``stream`` beside it only where it completes it.

        Raises
        ------
        ValidationError
            Two sources, ``scenario`` with ``stream``, or no source.
        """
        from regime_dash.errors import ValidationError

        given = [n for n, v in (("RUN", self.target), ("--scenario", self.scenario), ("--module", self.module))
                 if v]
        if len(given) > 1:
            raise ValidationError(f"repair takes one of RUN, --scenario and --module, got {' and '.join(given)}",
                                  field="target", value=given)
        if self.scenario and self.stream:
            raise ValidationError("repair takes --scenario or --stream, not both", field="stream",
                                  value=self.stream)
        if not (given or self.stream):
            raise ValidationError("repair needs RUN, --stream FILE, --scenario NAME or --module NAME",
                                  field="target")

    def options(self, specs, defaults: tuple[int, int]) -> dict[str, Any]:
        """The search's keyword arguments shared by every kind of config; ``defaults`` (trials, batch)."""
        from regime_dash.runs.repair.space import parse_fields, parse_held

        return {"fields": parse_fields(self.fields, specs), "held": parse_held(self.settings, specs),
                "trials": defaults[0] if self.trials is None else self.trials,
                "batch": defaults[1] if self.batch is None else self.batch, "seed": self.seed,
                "sampler": self.sampler, "top": self.top}


def repair_request(request: RepairRequest, progress: Progress | None = None,
                   notices: IO[str] | None = None) -> tuple[RepairResult, dict[str, Any]]:
    """``(result, source)`` of the search ``request`` asks; ``notices`` is told of a compile (None: nothing).

    Raises
    ------
    ValidationError
        Sources that do not go together, a module that is not a controller module, a stream file
        that cannot be read; ``ConfigError``: a field or a held setting the config does not have.
    """
    from regime_dash.engine import warm

    request.check_sources()
    if request.module:
        return _module(request, progress)
    with announced(request.engine, notices, kernels=warm.SWEEP_KERNELS):
        return _regime(request, progress)


def _stream(request: RepairRequest):
    from regime_dash.sources import scenarios

    if request.scenario:
        return scenarios.make(request.scenario, seed=request.stream_seed, steps=request.steps,
                              accounts=request.accounts)
    if request.stream:
        return scenarios.recorded(steps=request.steps, accounts=request.accounts, path=request.stream)
    return None


def _regime_options(request: RepairRequest, steps: int, progress: Progress | None) -> dict[str, Any]:
    """:func:`regime_dash.runs.repair.repair`'s keyword arguments for a ``steps``-step stream."""
    from regime_dash.core.config import RegimeConfig
    from regime_dash.runs.repair import regime
    from regime_dash.runs.repair.verifier import default_workers

    opts = request.options(RegimeConfig.field_specs(), (regime.TRIALS, regime.BATCH))
    verify = request.top if request.verify is None else request.verify
    opts.update(verify=verify, engine=request.engine, device=request.device, verify_engine=request.verify_engine,
                progress=progress,
                workers=default_workers(verify, steps) if request.workers is None else request.workers)
    return opts


def _regime(request: RepairRequest, progress: Progress | None) -> tuple[RepairResult, dict[str, Any]]:
    from regime_dash.runs.repair import regime

    stream = _stream(request)
    opts = _regime_options(request, 0 if stream is None else stream.steps, progress)
    if request.target is None:
        return regime.repair(stream, **opts), {"stream": request.stream or f"scenario {request.scenario}"}
    from regime_dash.usecases.check import diag_frame

    frame, source = diag_frame(request.target, request.store, None)
    return regime.repair_run(frame, stream, **opts), source


def _module(request: RepairRequest, progress: Progress | None) -> tuple[RepairResult, dict[str, Any]]:
    from regime_dash.errors import ValidationError
    from regime_dash.modules import MODULES, get
    from regime_dash.modules import repair as module_repair

    if request.module not in MODULES or MODULES[request.module].core:
        names = sorted(n for n, m in MODULES.items() if not m.core)
        raise ValidationError(f"--module {request.module!r} is not a controller module; choose one of "
                              f"{', '.join(names)}", field="module", value=request.module)
    m = get(request.module)
    opts = request.options(m.field_specs(), (module_repair.TRIALS, module_repair.BATCH))
    stream = (m.demo_stream(request.stream_seed, request.steps) if request.stream is None
              else module_stream(m, request.stream))
    return module_repair.repair_module(m, stream, progress=progress, **opts), \
        {"module": m.name, "stream": request.stream or "demo"}


def module_stream(module, path: str):
    """A module stream from a ``.npz`` of its arrays by field name.

    Raises
    ------
    ValidationError
        The file cannot be read as an ``.npz``.
    """
    import numpy as np

    from regime_dash.errors import ValidationError

    try:
        with np.load(path) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError) as exc:
        raise ValidationError(f"--stream {path!r}: cannot read a module stream .npz ({exc})", field="stream",
                              value=path) from None
    return module.stream_type.make(**arrays)


def repair_stream(stream: Any, base: RegimeConfig, *, fields: Sequence[str] | None = None, trials: int | None = None,
                  seed: int = 0, progress: Progress | None = None) -> RepairResult:
    """The page's search on a stream it holds, around ``base`` (the what-if config): every field that
    moves unless ``fields`` names some, verified in as many workers as the stream's length pays for."""
    from regime_dash.runs.repair import regime

    request = RepairRequest(fields=list(fields) if fields else None, trials=trials, seed=seed)
    return regime.repair(stream, base, **_regime_options(request, stream.steps, progress))


def repair_stored(frame: Any) -> RepairResult:
    """A stored run's frame (canonical columns) judged for repair: a failure config cannot help is named;
    where config may help, the answer says the search needs the run's input stream, which a diag does
    not hold."""
    from regime_dash.runs.repair import repair_run

    return repair_run(frame)


__all__ = ["RepairRequest", "module_stream", "repair_request", "repair_stored", "repair_stream"]
