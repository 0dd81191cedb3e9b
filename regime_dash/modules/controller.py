"""ControllerModule: the record of one replayable controller, what the registry lists.

It bundles what the app, the CLI, the sweep and ``check`` need to treat a
controller like the regime observer: its kernels (file names under
``kernels/``), an input stream type, a config dataclass, the ISV slots it reads
and writes, the diag columns its replay emits, its invariants, its figure
builders and a demo stream for a first run.
"""
from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import pandas as pd

from regime_dash.analysis.invariants import CheckOptions, CheckResult
from regime_dash.errors import StreamError, ValidationError
from regime_dash.modules.checks import missing_columns
from regime_dash.core.params import FieldSpec
from regime_dash.core.slots import Slot, SlotLayout

#: Engines a module replay may run on.
MODULE_ENGINES = ("reference", "cuda")


@dataclass(frozen=True)
class ControllerModule:
    """One replayable controller.

    Attributes
    ----------
    name
        Package name and CLI name, e.g. ``sp14_alpha_grad_gate``.
    title
        Human title for the app.
    doc
        A paragraph: what the controller does and what is modelled.
    kernels
        ``.cu`` file names under ``kernels/``.
    stream_type
        The input stream dataclass (a :class:`ModuleStream`).
    config_type
        The config dataclass (a :class:`ModuleConfig`).
    slots
        ISV slots the module reads or writes (:class:`regime_dash.core.slots.Slot`).
    columns
        Diag columns the replay emits (besides ``step``, ``fold`` and ``phase``).
    check_columns
        Columns whose presence in a frame means the module's invariants apply.
    replay_fn, invariants_fn, figures_fn, demo_stream_fn
        The implementations behind the methods of the same names.
    defines_fn
        ``-D`` options the module's kernels compile with (its slot indices).
    engines
        Engines :meth:`replay` accepts.
    field_specs_fn
        Slider specs of a config type that is not a :class:`ModuleConfig`.
    core
        True when the core's own ``check`` already runs this module's
        invariants (the regime observer), so integrations do not run them twice.
    check_ids
        Ids of the invariants, in the order :meth:`invariants` returns them.
    summary_fn
        ``frame -> {metric: float}``: the scalar figures a sweep row and the
        app's metric strip show.
    paths
        ``((name, what runs), ...)``: the kernel paths a replay of the module can take
        (the regime observer: the single controllers and ``rl_fused_controllers``),
        listed on the Controllers page; empty for a module with one.
    demo_failures
        ``{check id: why}``: checks the demo stream fails on purpose (it shows a
        fault of the modelled trainer), which the app explains beside the verdict.
    """

    name: str
    title: str
    doc: str
    kernels: tuple[str, ...]
    stream_type: type
    config_type: type
    slots: tuple[Slot, ...]
    columns: tuple[str, ...]
    check_columns: tuple[str, ...]
    replay_fn: Callable[..., pd.DataFrame]
    invariants_fn: Callable[[pd.DataFrame, CheckOptions], list[CheckResult]]
    figures_fn: Callable[..., list]
    demo_stream_fn: Callable[..., Any]
    defines_fn: Callable[[], list[str]] = lambda: []
    engines: tuple[str, ...] = MODULE_ENGINES
    field_specs_fn: Callable[[], list[FieldSpec]] | None = None
    core: bool = False
    summary_fn: Callable[[pd.DataFrame], dict] | None = None
    check_ids: tuple[str, ...] = ()
    paths: tuple[tuple[str, str], ...] = ()
    demo_failures: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of_package(cls, package: str, *, title: str, doc: str, stream_type: type,
                   config_type: type) -> "ControllerModule":
        """The record of a module package laid out by the convention every module follows.

        ``cuda.FILES`` are its kernels; ``replay.run`` and ``replay.COLUMNS`` (a tuple, or a
        mapping whose values are the columns) its replay; ``invariants`` gives ``invariants``,
        ``summary``, ``CHECK_COLUMNS`` and ``CHECK_IDS``; ``figures.figures`` its panels;
        ``demo.demo_stream`` its demo (``demo.DEMO_FAILURES``, optional, what it fails on purpose);
        ``slots`` (optional) its ``SLOTS`` and ``defines``.

        Parameters
        ----------
        package
            The package's dotted name (``__name__`` of its ``__init__``); its last part is the name.
        title, doc, stream_type, config_type
            As the attributes of the same names.
        """
        def part(name: str):
            return importlib.import_module(f"{package}.{name}")

        replay, checks = part("replay"), part("invariants")
        slots = part("slots") if importlib.util.find_spec(f"{package}.slots") else None
        columns = replay.COLUMNS.values() if isinstance(replay.COLUMNS, Mapping) else replay.COLUMNS
        layout = {"slots": slots.SLOTS, "defines_fn": slots.defines} if slots else {"slots": ()}
        return cls(
            name=package.rpartition(".")[2], title=title, doc=doc, kernels=tuple(part("cuda").FILES),
            stream_type=stream_type, config_type=config_type, columns=tuple(columns),
            check_columns=checks.CHECK_COLUMNS, replay_fn=replay.run, invariants_fn=checks.invariants,
            figures_fn=part("figures").figures, demo_stream_fn=part("demo").demo_stream,
            summary_fn=checks.summary, check_ids=checks.CHECK_IDS,
            demo_failures=dict(getattr(part("demo"), "DEMO_FAILURES", {})), **layout)

    def summary(self, frame: pd.DataFrame) -> dict[str, float]:
        """Scalar metrics of a replay frame (``{}`` when the module defines none)."""
        return {k: float(v) for k, v in (self.summary_fn(frame) if self.summary_fn else {}).items()}

    def field_specs(self) -> list[FieldSpec]:
        """The config's fields as slider specs (kind, default, range, step, doc, model flag)."""
        if self.field_specs_fn is not None:
            return list(self.field_specs_fn())
        return list(self.config_type.field_specs())

    def layout(self) -> SlotLayout:
        """The module's slots as a :class:`SlotLayout` (validated: no two share an index)."""
        return SlotLayout(self.slots).validate()

    def defines(self) -> list[str]:
        """The ``-D`` options of this module's kernels."""
        return list(self.defines_fn())

    def default_config(self):
        return self.config_type()

    def replay(self, stream: Any, config: Any = None, engine: str = "reference") -> pd.DataFrame:
        """Replay the controller over ``stream``; one row per step, dotted diag columns.

        Raises
        ------
        StreamError, ValidationError
            ``stream`` or ``config`` is not this module's type, or ``engine`` is unknown.
        EngineUnavailable
            ``engine="cuda"`` without a device.
        """
        if not isinstance(stream, self.stream_type):
            raise StreamError(f"{self.name}: stream must be a {self.stream_type.__name__}, got "
                              f"{type(stream).__name__}", field="stream", value=type(stream).__name__)
        config = self.config_type() if config is None else config
        if not isinstance(config, self.config_type):
            raise ValidationError(f"{self.name}: config must be a {self.config_type.__name__}, got "
                                  f"{type(config).__name__}", field="config", value=type(config).__name__)
        if engine not in self.engines:
            raise ValidationError(f"{self.name}: unknown engine {engine!r}; choose one of {list(self.engines)}",
                                  field="engine", value=engine)
        frame = self.replay_fn(stream, config, engine)
        frame.attrs["module"] = self.name
        frame.attrs["engine"] = engine
        return frame

    def applies_to(self, frame: pd.DataFrame) -> bool:
        """True when ``frame`` has every column of :attr:`check_columns`."""
        return not missing_columns(frame, self.check_columns)

    def invariants(self, frame: pd.DataFrame, options: CheckOptions | None = None) -> list[CheckResult]:
        """The module's checks on ``frame`` under the shared ``options`` (the ulp tolerance included)."""
        return self.invariants_fn(frame, options or CheckOptions())

    def figures(self, frame: pd.DataFrame, baseline: pd.DataFrame | None = None) -> list:
        """Plotly figures of ``frame`` (``baseline`` drawn dashed beside it); imports plotly lazily."""
        return self.figures_fn(frame, baseline)

    def demo_stream(self, seed: int = 0, steps: int | None = None):
        """A synthetic input stream for the app's first run."""
        return self.demo_stream_fn(seed, steps)



__all__ = ["MODULE_ENGINES", "ControllerModule"]
