"""The controller-module pattern: one small package per adaptive controller.

A :class:`ControllerModule` bundles what the app, the CLI, the sweep and
``check`` need to treat a controller like the regime observer: its kernels
(file names under ``kernels/``), an input stream type, a config dataclass, the
ISV slots it reads and writes, the diag columns its replay emits, its
invariants, its figure builders and a demo stream for a first run.

The building blocks here are shared by every module:

* :class:`ModuleConfig` and :func:`param`: a frozen config dataclass whose
  fields carry their range, doc and "is this a model" flag as metadata, so the
  app generates sliders from :meth:`ModuleConfig.field_specs` and validation
  raises :class:`~regime_dash.errors.ConfigError` naming the value.
* :class:`ModuleStream` and :class:`ArraySpec`: a frozen stream dataclass
  validated against a per-field schema, built with :meth:`ModuleStream.make`.
* :func:`check_result`, :func:`check_skip`: invariant results as
  :class:`regime_dash.analysis.invariants.CheckResult`, the one result type of
  every check.
* :func:`load_kernels`: compile a module's kernels through the engine's loader
  with the module's slot defines added.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, fields
from typing import Any, Callable, ClassVar, Mapping, Sequence

import numpy as np
import pandas as pd

from regime_dash.analysis.invariants import MAX_STEPS, ULPS, CheckOptions, CheckResult
from regime_dash.errors import ConfigError, StreamError, ValidationError
from regime_dash.slots import Slot, SlotLayout

#: Engines a module replay may run on.
MODULE_ENGINES = ("reference", "cuda")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


# ---- config ------------------------------------------------------------------------------
def param(default: Any, lo: float | None = None, hi: float | None = None, doc: str = "", *,
          model: bool = False, integer: bool = False, step: float | None = None) -> Any:
    """A config field with its slider range and doc.

    Parameters
    ----------
    default
        Default value (a bool makes a switch).
    lo, hi
        Closed range the value must lie in (also the slider's range).
    doc
        One line for the slider's help.
    model
        True when the source does not give the value and we model it.
    integer
        The value must be a whole number.
    step
        Slider step; ``None`` lets the UI choose.
    """
    return dataclasses.field(default=default, metadata={
        "lo": lo, "hi": hi, "doc": doc, "model": model, "integer": integer, "step": step})


@dataclass(frozen=True)
class FieldSpec:
    """One config field as the app's slider generator sees it."""

    name: str
    kind: str  # "float", "int" or "bool"
    default: Any
    lo: float | None
    hi: float | None
    step: float | None
    doc: str
    model: bool


class ModuleConfig:
    """Mixin for a module's frozen config dataclass (fields made with :func:`param`).

    Validation runs at construction: switches must be booleans, numbers must
    be finite, inside ``[lo, hi]`` and whole where ``integer``; then the
    subclass's :meth:`_check` runs cross-field rules.
    """

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            meta = f.metadata
            if isinstance(f.default, bool):
                if not isinstance(v, (bool, np.bool_, int)) or v not in (0, 1):
                    raise ConfigError(f"{f.name} must be a boolean, got {v!r}", field=f.name, value=v)
                object.__setattr__(self, f.name, bool(v))
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
                    or not math.isfinite(float(v)):
                raise ConfigError(f"{f.name} must be a finite number, got {v!r}", field=f.name, value=v)
            v = float(v)
            lo, hi = meta.get("lo"), meta.get("hi")
            if (lo is not None and v < lo) or (hi is not None and v > hi):
                raise ConfigError(f"{f.name}={v!r} is outside [{lo}, {hi}]", field=f.name, value=v)
            if meta.get("integer"):
                if v != int(v):
                    raise ConfigError(f"{f.name}={v!r} must be a whole number", field=f.name, value=v)
                v = int(v)
            object.__setattr__(self, f.name, v)
        self._check()

    def _check(self) -> None:
        """Cross-field rules; raise :class:`ConfigError` naming the values."""

    def replace(self, **changes: Any):
        """A copy with ``changes``; unknown fields raise :class:`ConfigError`."""
        names = [f.name for f in fields(self)]
        unknown = sorted(set(changes) - set(names))
        if unknown:
            raise ConfigError(f"unknown config field(s) {unknown}; valid fields: {', '.join(names)}",
                              field=unknown[0], value=changes[unknown[0]])
        return dataclasses.replace(self, **changes)

    def with_settings(self, settings: Sequence[str]):
        """Apply ``FIELD=VALUE`` strings (the CLI's ``--set``)."""
        kinds = {s.name: s.kind for s in self.field_specs()}
        changes: dict[str, Any] = {}
        for text in settings:
            if "=" not in text:
                raise ConfigError(f"--set {text!r} is not FIELD=VALUE; valid fields: {', '.join(kinds)}",
                                  field=text, value=text)
            name, raw = (p.strip() for p in text.split("=", 1))
            if name not in kinds:
                raise ConfigError(f"unknown config field {name!r}; valid fields: {', '.join(kinds)}",
                                  field=name, value=raw)
            if kinds[name] == "bool":
                if raw.lower() not in _TRUE | _FALSE:
                    raise ConfigError(f"{name}={raw!r} is not a boolean (true/false)", field=name, value=raw)
                changes[name] = raw.lower() in _TRUE
            else:
                try:
                    changes[name] = float(raw)
                except ValueError:
                    raise ConfigError(f"{name}={raw!r} is not a number", field=name, value=raw) from None
        return self.replace(**changes)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def field_specs(cls) -> list[FieldSpec]:
        """The fields in declaration order, with kind, range, step, doc and model flag."""
        out = []
        for f in fields(cls):
            m = f.metadata
            kind = "bool" if isinstance(f.default, bool) else ("int" if m.get("integer") else "float")
            out.append(FieldSpec(f.name, kind, f.default, m.get("lo"), m.get("hi"), m.get("step"),
                                 m.get("doc", ""), bool(m.get("model"))))
        return out


# ---- stream ------------------------------------------------------------------------------
# The schema type, the cast and the checks are the core stream's (regime_dash.streams); the
# import sits here, with the one class that uses it.
from regime_dash.streams import ArraySpec, arrays_of, check_schema  # noqa: E402


class ModuleStream:
    """Mixin for a module's frozen input stream dataclass; ``SCHEMA`` lists its fields.

    Construct with :meth:`make` (casts dtypes, fills defaults); the dataclass
    validates in ``__post_init__`` against ``SCHEMA``, a dict of
    :class:`~regime_dash.streams.ArraySpec` as the core :class:`~regime_dash.streams.Stream`'s,
    and raises :class:`StreamError` naming the field and the offending value.
    """

    SCHEMA: ClassVar[dict[str, ArraySpec]] = {}

    def __post_init__(self):
        validate_stream(self)

    @property
    def steps(self) -> int:
        return int(next(iter(self.arrays().values())).shape[0])

    def arrays(self) -> dict[str, np.ndarray]:
        """Present fields by name."""
        out = {name: getattr(self, name) for name in self.SCHEMA}
        return {k: v for k, v in out.items() if v is not None}

    @classmethod
    def make(cls, *, lazy: bool = False, **values: Any):
        """Build a stream: cast each field to its schema dtype, fill omitted defaults.

        An omitted ``step`` is ``0..T-1``. Values that do not survive the cast
        unchanged (a fractional action, say) raise. With ``lazy``, every problem
        is collected and raised at once as :class:`~regime_dash.errors.StreamErrors`.
        """
        kw, errors = arrays_of(cls.SCHEMA, values, lazy=lazy)
        if lazy:
            check_schema(kw, cls.SCHEMA, lazy=True, found=errors)
        return cls(**kw)


def validate_stream(stream: Any, *, lazy: bool = False) -> None:
    """Check every field of ``stream`` against its ``SCHEMA`` (see :func:`regime_dash.streams.check_schema`)."""
    check_schema({name: getattr(stream, name) for name in stream.SCHEMA}, stream.SCHEMA, lazy=lazy)


# ---- invariants --------------------------------------------------------------------------
# Module checks return the one result type of every check
# (:class:`regime_dash.analysis.invariants.CheckResult`) and take the shared
# :class:`~regime_dash.analysis.invariants.CheckOptions` (the ulp tolerance included).
def check_result(check_id: str, bad: np.ndarray, steps: np.ndarray, detail: str,
                 column: str | None = None) -> CheckResult:
    """A ``pass``/``fail`` result: ``bad`` marks the violating rows, ``steps`` their step numbers."""
    bad = np.asarray(bad, dtype=bool)
    where = np.asarray(steps)[bad]
    return CheckResult(check_id, "fail" if bad.any() else "pass", int(bad.sum()),
                       int(where[0]) if len(where) else None, [int(s) for s in where[:MAX_STEPS]], detail,
                       column=column)


def check_skip(check_id: str, why: str, missing: Sequence[str] = ()) -> CheckResult:
    """A ``skip`` result saying why."""
    return CheckResult(check_id, "skip", 0, None, [], why, list(missing))


def missing_columns(frame: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    return [c for c in columns if c not in frame.columns]


def skip_if_missing(check_id: str, frame: pd.DataFrame, *columns: str) -> CheckResult | None:
    """A ``skip`` result naming the columns ``frame`` lacks, or None when it has them all."""
    miss = missing_columns(frame, columns)
    return check_skip(check_id, f"missing column(s) {miss}", miss) if miss else None


class Checks(list):
    """The results of one frame's checks; :meth:`need` records a skip for missing columns."""

    def __init__(self, frame: pd.DataFrame):
        super().__init__()
        self.frame = frame

    def need(self, check_id: str, *columns: str) -> bool:
        """True when ``frame`` has ``columns``; otherwise appends the skip and returns False."""
        skip = skip_if_missing(check_id, self.frame, *columns)
        if skip is not None:
            self.append(skip)
        return skip is None


def f32(frame: pd.DataFrame, column: str) -> np.ndarray:
    """A frame column as float32 (the ISV's type)."""
    return frame[column].to_numpy(dtype=np.float32)


# ---- kernels -----------------------------------------------------------------------------
def load_kernels(files: Sequence[str], defines: Sequence[str]):
    """Compile a module's ``kernels/<files>`` with its slot ``defines`` through the loader.

    The loader adds the regime layout's defines and the parity options
    (``--fmad=false``); the module's own ``-D`` options come on top.

    Raises
    ------
    EngineUnavailable
        No cupy or no CUDA device here.
    """
    from regime_dash.engine import loader

    return loader.load_module(files, options=(*loader.PARITY_OPTIONS, *defines))


def cuda_available() -> str | None:
    """None when module kernels can run here, else why not."""
    from regime_dash.engine import loader

    return loader.available()


# ---- the module record -------------------------------------------------------------------
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
        ISV slots the module reads or writes (:class:`regime_dash.slots.Slot`).
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


def steps_arg(steps: int | None, default: int, name: str = "steps", minimum: int = 1) -> int:
    """``steps`` or ``default``, checked to be a whole number >= ``minimum``."""
    if steps is None:
        return default
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < minimum:
        raise ValidationError(f"{name} must be a whole number >= {minimum}, got {steps!r}",
                              field=name, value=steps)
    return int(steps)


def frame_of(step: np.ndarray, boundary: np.ndarray | None, columns: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """A module replay frame: ``step``, ``fold``, ``phase`` as in a core frame, then the given columns.

    ``fold`` and ``phase`` mean what they mean in the diag
    (:func:`regime_dash.diag.fold_and_phase`): fold k is a train segment and
    the eval segment after it.
    """
    from regime_dash.diag import fold_and_phase

    step = np.asarray(step, dtype=np.int64)
    fold, phase = fold_and_phase(np.zeros(len(step), dtype=bool) if boundary is None else boundary)
    cols = {"step": step, "fold": fold, "phase": phase}
    cols.update(columns)
    return pd.DataFrame(cols)


def close_f32(actual: np.ndarray, expected: np.ndarray, ulps: float = ULPS) -> np.ndarray:
    """Elementwise: within ``ulps`` float32 ulps of ``expected`` (scaled by max(|expected|, 1))."""
    scale = np.maximum(np.abs(expected), np.float32(1.0))
    return np.abs(actual - expected) <= np.float32(ulps) * np.float32(np.finfo(np.float32).eps) * scale


def fold_starts(frame: pd.DataFrame) -> np.ndarray:
    """True at the first row and wherever ``fold`` or ``phase`` changes (state was reset before that row)."""
    n = len(frame)
    starts = np.zeros(n, dtype=bool)
    if n:
        starts[0] = True
    for col in ("fold", "phase"):
        if col in frame.columns and n > 1:
            vals = frame[col].to_numpy()
            starts[1:] |= vals[1:] != vals[:-1]
    return starts


def config_value(frame: pd.DataFrame, name: str, default: float, prefix: str = "") -> float:
    """A config constant of the run behind ``frame``.

    In order: the column ``<prefix>config.<name>`` (replays write the constants
    their checks need as columns, so a saved diag file carries them), then
    ``frame.attrs['config']`` (a replay in memory), then ``default`` (the
    source's value, for a trainer's file that has neither).
    """
    col = f"{prefix}config.{name}"
    if col in frame.columns and len(frame):
        return float(frame[col].iloc[0])
    return float(frame.attrs.get("config", {}).get(name, default))


def config_columns(config: Any, names: Sequence[str], prefix: str, rows: int) -> dict[str, np.ndarray]:
    """Constant float32 columns ``<prefix>config.<name>`` holding config values (see :func:`config_value`)."""
    return {f"{prefix}config.{n}": np.full(rows, float(getattr(config, n)), dtype=np.float32) for n in names}


def frame_steps(frame: pd.DataFrame) -> np.ndarray:
    return frame["step"].to_numpy() if "step" in frame.columns else np.arange(len(frame))
