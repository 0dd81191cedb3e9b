"""``sweep(stream, configs)``: what-if replays of one stream under many configs.

Every config gets one row: its fields and the :mod:`regime_dash.engine.summary`
metrics of its replay (dead-zone steps, longest duration, timeouts, tail
events, σ-floor steps, min/mean kelly_f, max σ, ...). With the fast engine,
phase 1 (the per-step batch sums and flat counts) is computed once for the
whole sweep and each config runs only the scalar scan, folding its snapshot
into a row of accumulators, so memory is O(S + T·b), never O(S·T). On the GPU
all of a shard's configs run in one launch; on the CPU in chunks. The full
trajectories are kept only for the configs named in ``keep``.

A grid ``{field: values}`` is swept as NumPy columns (:class:`ConfigGrid`): it is
checked once per axis value and once on the unexpanded product, and no
:class:`RegimeConfig` is built per scenario; each shard's initial ISV rows are
built from the few slots its configs vary (the others go into one base row). A
list of RegimeConfig objects is read into the same columns in one C-level pass,
and gives the same table. On the GPU, phase 1 uploads the [T, b] batch in pinned
chunks, each reduced as it lands (:mod:`regime_dash.engine.staged_phase1`), in
pieces of steps that grow (:func:`phase1_pieces`): the scan of a piece starts as
soon as that piece's phase 1 is done (and, on a cluster, published), while phase 1
works on the next, so phase 1 is hidden behind the scan but for its first piece.

Given the stream's phase 1 (``stats=``), a fast sweep computes none and reads only the
per-step fields: it runs from a :class:`~regime_dash.core.streams.StepStream` (a stream file
held light, :mod:`regime_dash.engine.file_phase1`) as from the whole stream, with the
same table. The reference and cuda engines replay the [T, b] arrays and need the whole stream.

``scheduler=`` shards the configs over dask.distributed workers
(:mod:`regime_dash.runs.scheduler`), one contiguous shard per worker (a grid's shard
is the grid and an index range, expanded on the worker); the table is the same as
in-process, value for value.

A sweep row equals :func:`summary.summarize_frame` of the single replay of
that config, exactly: both fold the same snapshot with the same
:func:`summary.accumulate`.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import itertools
import operator
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from regime_dash.diag import catalogue as diag
from regime_dash.core.config import FIELD_SLOTS, SWITCHES, RegimeConfig, coerce_value, field_names
from regime_dash.engine import (initial_isv, replay_trajectory, resolve_engine,
                                snapshot_indices)
from regime_dash.engine import metric_pack, summary
from regime_dash.errors import ConfigError, StreamError, ValidationError
from regime_dash.core.slots import DEFAULT_LAYOUT, SlotLayout
from regime_dash.engine.step_stats import StepStats
from regime_dash.core.streams import StepStream, Stream

#: Scenarios per chunk on the CPU: bounds the [chunk, n_isv] initial-state rows
#: (4096 × 716 float32 × 2 ≈ 23 MB) whatever S is.
CPU_CHUNK = 4096

Progress = Callable[[int, int], None]

#: A GPU sweep's first phase-1 piece: this many steps, or T / 64 if more (a stream
#: shorter than two of it is one piece). Small, so the scan starts early; each next
#: piece is :data:`PHASE1_PIECE_GROWTH` times the last, so that phase 1 (and its
#: publishing, on a cluster) of the next piece takes less time than the scan of this one.
PHASE1_FIRST_PIECE = 16_384
PHASE1_PIECE_GROWTH = 3


def phase1_pieces(steps: int) -> list[tuple[int, int]]:
    """The ``(t0, t1)`` pieces a GPU sweep of ``steps`` steps computes phase 1 in, in order.

    The first is :data:`PHASE1_FIRST_PIECE` steps (or ``steps // 64``), each next
    :data:`PHASE1_PIECE_GROWTH` times the last; a remainder shorter than two of the
    next size goes into the last piece.
    """
    out: list[tuple[int, int]] = []
    start, size = 0, max(PHASE1_FIRST_PIECE, steps // 64)
    while start < steps:
        stop = steps if steps - start < 2 * size else start + size
        out.append((start, stop))
        start, size = stop, size * PHASE1_PIECE_GROWTH
    return out


@dataclass
class SweepResult:
    """The outcome of :func:`sweep`.

    Attributes
    ----------
    table
        One row per config, in input order: the config fields, then the metrics
        of :data:`summary.METRICS`.
    trajectories
        ``{config index: replay frame}`` for the indices asked for in ``keep``;
        each equals ``replay(stream, configs[i], ...)``.
    engine
        What ran: ``fast-cpu``, ``fast-gpu``, ``reference`` or ``cuda``.
    seconds
        Wall time of the sweep, setup included.
    """

    table: pd.DataFrame
    trajectories: dict[int, pd.DataFrame] = field(default_factory=dict)
    engine: str = ""
    seconds: float = 0.0

    @property
    def configs(self) -> list[RegimeConfig]:
        """The swept configs, rebuilt from the table's config columns."""
        names = field_names()
        return [RegimeConfig(**{n: row[n] for n in names})
                for row in self.table[names].to_dict("records")]


def expand_configs(configs: Sequence[RegimeConfig] | Mapping[str, Any],
                   base: RegimeConfig | None = None) -> list[RegimeConfig]:
    """The configs a sweep runs, as objects: a list of :class:`RegimeConfig` as given, or a grid expanded.

    A sweep itself never builds these objects for a grid (see :class:`ConfigGrid`);
    this is the per-object view of the same configs, in the same order.

    Parameters
    ----------
    configs
        A sequence of :class:`RegimeConfig`, or a grid ``{field: values}`` whose
        cartesian product (first field slowest, like :func:`itertools.product`)
        is applied on top of ``base``. A single value stands for a one-value list.
    base
        The config a grid varies; the spec's defaults if None.

    Raises
    ------
    ConfigError
        An unknown field (the message lists the valid ones), an empty value list,
        a value out of its domain, or an element of the list that is not a RegimeConfig.
    """
    if isinstance(configs, Mapping):
        return ConfigGrid.of(configs, base).configs()
    return _config_list(configs)


def _config_list(configs: Any) -> list[RegimeConfig]:
    if isinstance(configs, (str, bytes)) or not isinstance(configs, Iterable):
        raise ConfigError(f"configs must be a list of RegimeConfig or a dict field -> values, "
                          f"got {type(configs).__name__}", field="configs", value=type(configs).__name__)
    out = list(configs)
    if not all(issubclass(t, RegimeConfig) for t in set(map(type, out))):  # one C-level pass
        i, c = next((i, c) for i, c in enumerate(out) if not isinstance(c, RegimeConfig))
        raise ConfigError(f"configs[{i}] is a {type(c).__name__}, not a RegimeConfig",
                          field=f"configs[{i}]", value=type(c).__name__)
    return out


Columns = dict[str, np.ndarray]


def _column_dtype(name: str) -> type:
    return np.bool_ if name in SWITCHES else np.float64


@dataclass(frozen=True, eq=False)
class ConfigGrid:
    """A checked grid ``{field: values}`` on a base config: its configs as NumPy columns, never objects.

    :meth:`of` coerces every axis value once (:func:`config.coerce_value`: a
    switch to bool, a number to a finite float) and checks the product against
    RegimeConfig's rules without expanding it (:meth:`RegimeConfig.first_invalid`),
    so a grid is valid exactly when every config of its product would be.
    :meth:`columns` then gives any index range of the product (first field
    slowest, as :func:`itertools.product`) as one float64 (bool for a switch)
    array per field, by index arithmetic: what a sweep's table and initial
    ISV rows are built from, here or on a worker that gets only the grid and its range.
    """

    names: tuple[str, ...]
    axes: tuple[np.ndarray, ...]
    base: RegimeConfig

    @classmethod
    def of(cls, grid: Mapping[str, Any], base: RegimeConfig | None = None) -> "ConfigGrid":
        """The grid ``{field: values}`` over ``base`` (the spec's defaults if None), checked.

        ``values`` is a sequence, a NumPy array (its elements taken as the Python
        numbers they hold), or a single value.

        Raises
        ------
        ConfigError
            An unknown field (listing the valid ones), an empty value list, or a
            value that is not valid for its field (naming the field and the value).
        """
        if base is not None and not isinstance(base, RegimeConfig):
            raise ConfigError(f"the sweep grid's base must be a RegimeConfig, got {type(base).__name__} {base!r}",
                              field="base", value=base)
        valid = field_names()
        unknown = [k for k in grid if k not in valid]
        if unknown:
            raise ConfigError(f"unknown config field(s) {unknown} in the sweep grid; "
                              f"valid fields: {', '.join(valid)}", field=str(unknown[0]), value=unknown[0])
        raw, axes = [], []
        for name, values in grid.items():
            if isinstance(values, np.ndarray):
                values = values.tolist()  # NumPy scalars to the Python numbers a config holds
            vals = [values] if isinstance(values, (str, bytes)) or not isinstance(values, Iterable) \
                else list(values)
            if not vals:
                raise ConfigError(f"sweep grid field {name!r} has no values", field=name, value=values)
            raw.append(vals)
            axes.append(np.array([_grid_value(name, v) for v in vals], dtype=_column_dtype(name)))
        base = RegimeConfig() if base is None else base
        out = cls(tuple(grid), tuple(axes), base)
        bad = RegimeConfig.first_invalid(dict(zip(out.names, out.axes)), base)
        if bad is not None:  # named as the first config of the product that fails, as it was given
            at, exc = bad
            combo = ", ".join(f"{n}={vals[i]!r}" for n, vals, i in zip(out.names, raw, at))
            raise ConfigError(f"sweep value {combo} is not a valid config: {exc}",
                              field=exc.field, value=exc.value)
        return out

    def __len__(self) -> int:
        return int(np.prod([len(a) for a in self.axes], dtype=np.int64))

    def columns(self, start: int = 0, stop: int | None = None) -> Columns:
        """Configs ``start..stop`` of the product as ``{field: array}``, in declaration order."""
        stop = len(self) if stop is None else stop
        index = np.arange(start, stop, dtype=np.int64)
        swept: Columns = {}
        stride = len(self)
        for name, axis in zip(self.names, self.axes):
            stride //= len(axis)
            swept[name] = axis[(index // stride) % len(axis)]
        return {name: swept[name] if name in swept
                else np.full(len(index), getattr(self.base, name), dtype=_column_dtype(name))
                for name in field_names()}

    def varying_columns(self, start: int = 0, stop: int | None = None) -> dict[str, Any]:
        """Configs ``start..stop`` as :meth:`columns`, but a field with one value is that value, not an array.

        All a shard needs to build its initial rows (:class:`_SlotPlan`): only the
        axes with several values are expanded.
        """
        stop = len(self) if stop is None else stop
        index = np.arange(start, stop, dtype=np.int64)
        out: dict[str, Any] = {name: getattr(self.base, name) for name in field_names()}
        stride = len(self)
        for name, axis in zip(self.names, self.axes):
            stride //= len(axis)
            out[name] = axis[(index // stride) % len(axis)] if len(axis) > 1 else axis[0].item()
        return out

    def configs(self, start: int = 0, stop: int | None = None) -> list[RegimeConfig]:
        """Configs ``start..stop`` as objects (for callers that want them; a sweep does not)."""
        cols = self.columns(start, stop)
        names = list(cols)
        return [RegimeConfig(**dict(zip(names, row)))
                for row in zip(*(c.tolist() for c in cols.values()))]


def _grid_value(name: str, value: Any) -> bool | float:
    try:
        return coerce_value(name, value)
    except ConfigError as exc:
        raise ConfigError(f"sweep value {name}={value!r} is not a valid config: {exc}",
                          field=name, value=value) from None


#: Slots of :meth:`RegimeConfig.to_isv` that copy another field (the rest are ``FIELD_SLOTS``).
_DERIVED_SLOTS = {"RL_KELLY_EPS_RECOVERY_LIVE_INDEX": "eps_max",
                  "RL_KELLY_SAFETY_FRAC_INDEX": "safety_frac_normal",
                  "RL_IQN_TAU_MIN_EFFECTIVE_INDEX": "tau_min"}


def _list_columns(configs: Sequence[RegimeConfig]) -> Columns:
    names = field_names()
    # one C-level pass over the configs (fromiter over attrgetter tuples): the per-config cost
    # of a sweep over a list
    flat = np.fromiter(itertools.chain.from_iterable(map(operator.attrgetter(*names), configs)),
                       dtype=np.float64, count=len(configs) * len(names))
    values = flat.reshape(len(configs), len(names))
    return {name: values[:, k].astype(_column_dtype(name)) for k, name in enumerate(names)}


def config_columns(configs: Sequence[RegimeConfig]) -> pd.DataFrame:
    """The configs as a table: one column per field (declaration order), one row per config."""
    return pd.DataFrame(_list_columns(configs))


def _slot_sources() -> dict[str, str]:
    """``{slot: field}`` of every slot :meth:`RegimeConfig.to_isv` writes, in its order."""
    source = {**{slot: name for name, slot in FIELD_SLOTS.items()}, **_DERIVED_SLOTS}
    slots = list(RegimeConfig().to_isv())
    missing = [s for s in slots if s not in source]
    if missing:  # to_isv grew a slot this map does not know: a bug here, not the caller's
        raise ConfigError(f"sweep cannot vectorize RegimeConfig.to_isv slots {missing}",
                          field="configs", value=missing)
    return {s: source[s] for s in slots}


def config_slot_values(columns: Mapping[str, Any]) -> tuple[list[str], np.ndarray]:
    """``(slot names, float32 [S, K])``: each config's :meth:`RegimeConfig.to_isv` values, vectorized.

    ``columns`` is a table of configs (:func:`config_columns`, or
    :meth:`ConfigGrid.columns`); column k holds slot k's value for every config.
    A test checks this equals ``to_isv`` config by config.
    """
    sources = _slot_sources()
    # slot-major, then one transpose: a column write into a C-order [S, K] array is strided
    values = np.empty((len(sources), len(np.asarray(columns[field_names()[0]]))), dtype=np.float32)
    for k, name in enumerate(sources.values()):
        values[k] = np.asarray(columns[name], dtype=np.float64)
    return list(sources), np.ascontiguousarray(values.T)


@dataclass
class _SlotPlan:
    """A shard's initial rows, factored: one base row pair, and the slots that differ per config.

    Configs differ only in the slots their fields vary (a grid's swept fields,
    typically two or three of the 23): those go per config, float32 [n, K'];
    every other slot of :meth:`RegimeConfig.to_isv` holds one value for all and
    is written into the base rows once. Rows built from a plan equal
    :func:`initial_rows` bit for bit (a test checks it).
    """

    isv0: np.ndarray       # float32 [n_isv]: the override slots' values (isv= applied)
    boot: np.ndarray       # float32 [n_isv]: the bootstrap row with the constant slots filled
    slots: list[str]       # the varying slots
    values: np.ndarray     # float32 [n, len(slots)]

    @classmethod
    def of(cls, columns: Mapping[str, Any], n: int, isv: Mapping[str, float] | None,
           layout: SlotLayout) -> "_SlotPlan":
        """The plan of ``n`` configs' ``columns`` (``{field: array}``; a field may be a scalar: one value for all)."""
        isv0, boot = initial_isv(RegimeConfig(), isv, layout)
        boot = boot.copy()
        varying: list[tuple[str, np.ndarray]] = []
        for slot, name in _slot_sources().items():
            col = np.asarray(columns[name])
            f32 = col.astype(np.float64).astype(np.float32).reshape(-1)  # as the slot holds it
            # one value for every config: the same float32 bits (0.0 and -0.0 differ)
            bits = f32.view(np.uint32)
            if col.ndim == 0 or (len(col) and (bits == bits[0]).all()):
                boot[layout.index(slot)] = f32[0]
            else:
                varying.append((slot, f32))
        values = np.empty((len(varying), n), dtype=np.float32)
        for k, (_, f32) in enumerate(varying):
            values[k] = f32
        return cls(isv0, boot, [s for s, _ in varying], np.ascontiguousarray(values.T))

    def rows(self, start: int, stop: int, isv: Mapping[str, float] | None,
             layout: SlotLayout) -> tuple[np.ndarray, np.ndarray]:
        """float32 [stop - start, n_isv] ``(isv0s, boot_rows)`` of configs ``start..stop``."""
        boot_rows = np.tile(self.boot, (stop - start, 1))
        boot_rows[:, [layout.index(s) for s in self.slots]] = self.values[start:stop]
        isv0s = boot_rows.copy()
        for name in (isv or {}):
            isv0s[:, layout.index(name)] = self.isv0[layout.index(name)]
        return isv0s, boot_rows


def initial_rows(configs: Sequence[RegimeConfig] | Mapping[str, Any], isv: Mapping[str, float] | None,
                 layout: SlotLayout) -> tuple[np.ndarray, np.ndarray]:
    """float32 [S, n_isv] ``(isv0s, boot_rows)``: :func:`engine.initial_isv` of every config.

    The vectorized form of ``initial_isv``: the configs differ only in the slots
    :meth:`RegimeConfig.to_isv` names, so the spec's bootstrap row (with the slots
    every config shares filled in) is tiled and the others filled per config; the
    ``isv`` overrides are then re-applied, as ``initial_isv`` applies them last.
    ``configs`` is a list of RegimeConfig or a table of them (a DataFrame or
    ``{field: column}``). A test checks the two agree.
    """
    columns = configs if isinstance(configs, Mapping) else _list_columns(configs)
    n = len(np.asarray(columns[field_names()[0]]))
    return _SlotPlan.of(columns, n, isv, layout).rows(0, n, isv, layout)


def _chunks(n: int, size: int) -> Iterable[tuple[int, int]]:
    for start in range(0, n, size):
        yield start, min(n, start + size)


def _trajectory_frame(snap: np.ndarray, flat: np.ndarray, accounts: int, stream_step: np.ndarray,
                      boundary: np.ndarray, layout: SlotLayout, engine: str, config: Any = None) -> pd.DataFrame:
    frame = diag.frame_from_snapshot(snap, flat, accounts, stream_step, boundary, config)
    frame.attrs["layout_fingerprint"] = layout.fingerprint_hex()
    frame.attrs["engine"] = engine
    return frame


def _packed_shard(fn: Callable[..., Any], shard: "_Shard", *shared: Any):
    """``fn(shard, *shared)`` on a worker, its metrics packed for the trip back (:func:`metric_pack.pack`;
    a GPU shard's come packed from the device)."""
    metrics, kept, engine = fn(shard, *shared)
    if isinstance(metrics, np.ndarray):
        metrics = metric_pack.pack(np, metrics)
    return metrics, kept, engine


@dataclass
class _Shard:
    """One piece of a sweep: configs ``start..stop`` as field columns, and which of them to keep.

    A shard carries its columns (a list's, sliced on the client, or a grid's
    built in-process), or only the grid, whose range it expands where it runs.
    """

    start: int
    stop: int
    keep: list[int]                  # indices within the shard
    table: Columns | None = None     # the configs' field columns, or
    grid: ConfigGrid | None = None   # the grid whose start..stop they are

    def fields(self) -> Columns:
        if self.table is not None:
            return self.table
        return self.grid.columns(self.start, self.stop)

    def plan_columns(self) -> Mapping[str, Any]:
        """What :class:`_SlotPlan` needs: the columns, or, for a grid, only its varying axes expanded."""
        if self.table is not None:
            return self.table
        return self.grid.varying_columns(self.start, self.stop)


def _resolved(handle: Any) -> Any:
    """The value of a phase-1 piece: a future's result (in-process) or, on a worker, what its
    client published into the ``distributed.Variable`` (:func:`distributed.later`)."""
    if isinstance(handle, concurrent.futures.Future):
        return handle.result()
    from regime_dash.runs import scheduler as distributed

    return distributed.published(handle)


def _gpu_here() -> bool:
    from regime_dash.engine import fast_gpu

    return fast_gpu.available() is None


def _fast_on_gpu(device: str, client: Any) -> bool:
    """Whether the fast sweep's shards run on GPUs: here (no client), or on every worker."""
    from regime_dash.engine import fast

    if client is None:
        return fast.use_gpu(device)
    fast.use_gpu("cpu")  # checks the device name
    if device == "cpu":
        return False
    return device == "gpu" or all(client.run(_gpu_here).values())


def _cuda_device() -> int | None:
    """The calling thread's current CUDA device, if CuPy is in use here (phase 1's thread re-enters it)."""
    cupy = sys.modules.get("cupy")
    if cupy is None or not _gpu_here():
        return None
    return int(cupy.cuda.runtime.getDevice())


def _phase1_stats(stream: Stream, device: str = "auto", device_id: int | None = None,
                  devices: Sequence[int] | None = None, steps: tuple[int, int] | None = None):
    """Phase 1 for the sweep (of steps ``t0..t1`` if ``steps``), here: on this GPU (``device_id``,
    the caller's), or spread over ``devices``, if there is one and ``device`` is not ``"cpu"``
    (the same bits as the CPU's; the CPU takes every step).

    On the GPU the [T, b] batch goes up in pinned chunks, each reduced as it lands
    (:mod:`regime_dash.engine.staged_phase1`), and only the [T] statistics come back.
    A scan then reads only phase 1 and the per-step fields (:func:`_per_step`), so the
    shards get no [T, b] batch, on either device.
    """
    if device != "cpu" and _gpu_here():
        import cupy

        from regime_dash.engine import staged_phase1

        with cupy.cuda.Device(device_id):
            return staged_phase1.step_stats(stream, devices=devices, steps=steps)
    from regime_dash.engine import fast

    return fast.step_stats(stream)


def _phase1_in_pieces(stream: Stream, device: str, device_id: int | None, devices: Sequence[int] | None,
                      bounds: Sequence[tuple[int, int]], pieces: Sequence[concurrent.futures.Future]) -> None:
    """Phase 1 piece by piece: ``pieces[k]`` gets ``(t0, t1, StepStats)`` of ``bounds[k]`` when it is done.

    After an error every piece not done yet gets it, so that nothing waits for them.
    """
    for k, ((t0, t1), piece) in enumerate(zip(bounds, pieces)):
        try:
            steps = None if (t0, t1) == (0, stream.steps) else (t0, t1)
            piece.set_result((t0, t1, _phase1_stats(stream, device, device_id, devices, steps)))
        except BaseException as exc:
            for rest in pieces[k:]:
                rest.set_exception(exc)
            return


class _Pieces:
    """A sweep's phase-1 pieces (futures in-process, ``distributed.Variable`` objects on a cluster),
    each resolved once, in order, when first needed."""

    def __init__(self, handles: Sequence[Any]):
        self.handles, self.got = list(handles), []

    def __iter__(self):
        for k, handle in enumerate(self.handles):
            if k == len(self.got):
                self.got.append(_resolved(handle))
            yield self.got[k]

    def whole(self):
        """Phase 1 of every step (waits for every piece; one piece: itself)."""
        pieces = list(self)
        if len(pieces) == 1:
            return pieces[0][2]
        return StepStats(np.concatenate([p[2].sums for p in pieces]), np.concatenate([p[2].flat for p in pieces]))


def _fast_shard(shard: _Shard, scalars: StepStream, stats: Any, accounts: int, layout: SlotLayout, isv,
                device: str, chunk_size: int | None, progress: Progress | None = None):
    """Run one shard of a fast sweep: ``(metric columns, {index: snapshot}, engine)``.

    ``scalars`` is the stream's per-step fields (:func:`_per_step`), ``stats`` its phase 1 as a list of pieces
    (:func:`phase1_pieces`; in-process futures, on a cluster the ``distributed.Variable``
    each is published into (:func:`distributed.later`), each resolving to ``(t0, t1, StepStats)``:
    waited for only once the rows are planned; on the GPU each piece's steps are
    launched as it comes), ``accounts`` its b.
    On the GPU the metric columns come finalized and packed from the device (one
    array per metric, :func:`metric_pack.pack`; in several chunks, float64 [N, n]);
    on the CPU as float64 [N, n].
    """
    from regime_dash.engine import fast

    gpu = fast.use_gpu(device)
    n = shard.stop - shard.start
    plan = _SlotPlan.of(shard.plan_columns(), n, isv, layout)
    kept: dict[int, np.ndarray] = {}
    pieces = _Pieces(stats)
    if gpu:
        from regime_dash.engine import fast_gpu

        # one launch for the whole shard: the configs' slot values go to the device
        # and the initial rows are built there (chunk_size bounds device memory if given)
        slot_idx = np.array([layout.index(s) for s in plan.slots], np.int32)
        override_idx = np.array([layout.index(name) for name in (isv or {})], np.int32)
        bounds = list(_chunks(n, chunk_size or n))

        def prepare(start: int, stop: int):
            return fast_gpu.prepare_sweep(scalars, accounts, plan.isv0, plan.boot, slot_idx, plan.values[start:stop],
                                          override_idx, layout, [k - start for k in shard.keep if start <= k < stop])

        prepared = prepare(*bounds[0])  # the per-step inputs up and the rows built while phase 1 may still run
        # one chunk (the default): its packed columns as they came; several: filled into one block
        block = np.empty((summary.N_METRICS, n), dtype=np.float64) if len(bounds) > 1 else None
        for i, (start, stop) in enumerate(bounds):
            # the first chunk launches each phase-1 piece as it comes; the next ones find them all here
            cols, snaps = fast_gpu.run_prepared(prepared if i == 0 else prepare(start, stop), iter(pieces),
                                                packed=True)
            if block is not None:
                metric_pack.fill(block, start, stop, cols)
            kept.update({start + k: s for k, s in snaps.items()})
            if progress is not None:
                progress(stop, n)
        return (cols if block is None else block), kept, "fast-gpu"
    stats = pieces.whole()  # in-process, phase 1 may still be running until here
    acc = np.empty((n, summary.N_METRICS + 1), dtype=np.float64)
    snap_idx = snapshot_indices(layout)
    for start, stop in _chunks(n, chunk_size or CPU_CHUNK):
        isv0s, boot_rows = plan.rows(start, stop, isv, layout)
        local = [k - start for k in shard.keep if start <= k < stop]
        a, snaps = fast.sweep_cpu(scalars, isv0s, boot_rows, layout, local, stats=stats, snap_idx=snap_idx)
        acc[start:stop] = a
        kept.update({start + k: s for k, s in snaps.items()})
        if progress is not None:
            progress(stop, n)
    return metric_pack.finalize(np, acc, scalars.steps), kept, "fast-cpu"


def _replay_shard(shard: _Shard, stream: Stream, layout: SlotLayout, isv, engine: str,
                  options: dict, progress: Progress | None = None):
    """Run one shard with one full replay per config (reference, cuda)."""
    rows, trajectories = [], {}
    wanted = set(shard.keep)
    columns = shard.fields()
    names = list(columns)
    n = len(columns[names[0]])
    for k, values in enumerate(zip(*(c.tolist() for c in columns.values()))):
        config = RegimeConfig(**dict(zip(names, values)))
        frame = replay_trajectory(stream, config, engine, isv, layout, **options).frame
        row = summary.summarize_frame(frame)
        rows.append([row[m] for m in summary.METRICS])
        if k in wanted:
            trajectories[k] = frame
        if progress is not None:
            progress(k + 1, n)
    return np.array(rows, dtype=np.float64).reshape(len(rows), summary.N_METRICS).T.copy(), trajectories, engine


def sweep(stream: Stream | StepStream, configs: Sequence[RegimeConfig] | Mapping[str, Any], engine: str = "auto",
          keep: Sequence[int] | None = None, layout: SlotLayout | None = None,
          progress: Progress | None = None, *, isv: Mapping[str, float] | None = None,
          device: str = "auto", chunk_size: int | None = None, base: RegimeConfig | None = None,
          scheduler: Any = None, stats: StepStats | None = None, **options: Any) -> SweepResult:
    """Replay ``stream`` under every config and summarize each replay in one row.

    Parameters
    ----------
    stream
        The replayed inputs; on engine ``fast`` given ``stats``, a :class:`~regime_dash.core.streams.StepStream`
        (the per-step fields: all a fast sweep reads once it has phase 1) will do.
    configs
        A grid ``{field: values}`` (see :class:`ConfigGrid`: checked and built as
        NumPy columns, no config object per scenario), or a list of :class:`RegimeConfig`
        (read in one C-level pass). The same configs in either form give the same table.
    engine
        ``fast`` (one shared phase 1, a scan per config), ``reference`` or
        ``cuda`` (one full replay per config), or ``auto`` (``fast`` where it
        can run, else ``reference``).
    keep
        Config indices whose full trajectories to return.
    layout
        Slot layout; the default registry if None.
    progress
        Called as ``progress(done, total)`` after each chunk (fast), config
        (per-replay engines) or, with a scheduler, shard.
    isv
        Initial slot overrides by name, as in :func:`regime_dash.replay`.
    device
        For ``fast``: ``auto``, ``cpu`` or ``gpu`` (on a cluster: on each worker).
    chunk_size
        Scenarios per chunk; :data:`CPU_CHUNK` on the CPU, all of a shard in one
        launch on the GPU, if None.
    base
        The config a grid varies.
    scheduler
        ``None`` (in-process, the default), ``"local"``, a scheduler address or a
        ``distributed.Client`` (see :mod:`regime_dash.runs.scheduler`): the configs
        are split into one contiguous shard per worker (a grid's shard is the grid
        and its index range, a list's its field columns). The table is the same
        as in-process, value for value. A fast sweep sends each worker phase 1
        (computed once here, published as the shards start) and the per-step
        fields, never the [T, b] batch. Each worker gets one copy per sweep
        (``client.scatter(..., broadcast=True)``).
    stats
        For ``fast``: the stream's phase 1 (``engine.fast.step_stats``, ``engine.file_phase1.read``),
        when the caller has it; the sweep then computes none. The same table either way.
    **options
        Backend options of the per-replay engines (e.g. ``graph=True`` for ``cuda``).

    Returns
    -------
    SweepResult

    Raises
    ------
    StreamError
        Not a Stream or StepStream; a StepStream on engine ``reference`` or ``cuda``, or without ``stats``.
    ValidationError
        ``stats`` off engine ``fast`` or not of the stream's steps; a bad ``keep``, ``chunk_size``,
        ``device`` or ``options``.
    """
    t0 = time.perf_counter()
    if not isinstance(stream, (Stream, StepStream)):
        raise StreamError(f"stream must be a regime_dash.Stream, got {type(stream).__name__}",
                          field="stream", value=type(stream).__name__)
    grid = ConfigGrid.of(configs, base) if isinstance(configs, Mapping) else None
    config_list = None if grid is not None else _config_list(configs)
    n_configs = len(grid) if grid is not None else len(config_list)
    if not n_configs:
        raise ConfigError("the sweep has no configs", field="configs", value=configs)
    layout = (layout or DEFAULT_LAYOUT).validate()
    keep = _checked_keep(keep, n_configs)
    _check_chunk_size(chunk_size)
    name = _engine_name(engine, device, options, scheduler)
    _check_phase1(stream, name, stats)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        run = _Run(layout, progress, isv, device, chunk_size, scheduler, name, options, pool)
        return _sweep_run(stream, stats, _Source(grid, config_list), n_configs, keep, run, t0)


def _checked_keep(keep: Any, n_configs: int) -> list[int]:
    """``keep`` as a list of distinct config indices, in the order given."""
    if keep is not None and (isinstance(keep, (str, bytes)) or not isinstance(keep, Iterable)):
        raise ValidationError(f"keep must be a sequence of config indices, got {type(keep).__name__} {keep!r}",
                              field="keep", value=keep)
    keep = [] if keep is None else list(dict.fromkeys(keep))
    for k in keep:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k < n_configs:
            raise ValidationError(f"keep index {k!r} is not a config index in 0..{n_configs - 1}",
                                  field="keep", value=k)
    return [int(k) for k in keep]


def _check_chunk_size(chunk_size: Any) -> None:
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int)
                                   or chunk_size < 1):
        raise ValidationError(f"chunk_size must be a positive integer, got {chunk_size!r}",
                              field="chunk_size", value=chunk_size)


def _engine_name(engine: str, device: str, options: Mapping[str, Any], scheduler: Any) -> str:
    """The engine a sweep runs on (``auto``: ``fast`` where it can run, else ``reference``), its
    ``device`` and ``options`` checked against it."""
    if engine == "auto":
        name = "fast" if resolve_engine("auto") == "fast" else "reference"
    else:
        name = resolve_engine(engine)
    if name != "fast" and device != "auto":
        raise ValidationError(f"device={device!r} applies to engine 'fast' only, not {name!r}",
                              field="device", value=device)
    if name == "fast" and options:
        raise ValidationError(f"engine 'fast' sweeps take no options, got {sorted(options)}",
                              field="options", value=sorted(options))
    if name == "fast":
        from regime_dash.engine import fast

        if scheduler is None or device not in fast.DEVICES:
            fast.use_gpu(device)  # the device's name, and in-process that a GPU asked for is here
    return name


def _check_phase1(stream: Stream | StepStream, name: str, stats: Any) -> None:
    """A StepStream sweeps only where nothing reads its missing [T, b] arrays: on engine ``fast`` given
    its phase 1; and a given phase 1 is a ``StepStats`` of the stream's steps, for engine ``fast``."""
    light = isinstance(stream, StepStream)
    if light and name != "fast":
        raise StreamError(f"a StepStream holds no [T, b] rewards and lots: engine {name!r} replays them; "
                          "load the whole stream for it", field="stream", value=name)
    if light and stats is None:
        raise StreamError("a StepStream holds no [T, b] rewards and lots to compute phase 1 from: give its "
                          "phase 1 (stats=), or load the whole stream", field="stats", value=None)
    if stats is None:
        return
    if name != "fast":
        raise ValidationError(f"stats= (phase 1) applies to engine 'fast' only, not {name!r}",
                              field="stats", value=name)
    if not isinstance(stats, StepStats):
        raise ValidationError(f"stats must be the stream's phase 1 (a StepStats), got {type(stats).__name__}",
                              field="stats", value=type(stats).__name__)
    if np.shape(stats.sums) != (stream.steps, 3) or np.shape(stats.flat) != (stream.steps,):
        raise ValidationError(f"stats cover sums {np.shape(stats.sums)} and flat {np.shape(stats.flat)}, "
                              f"the stream has {stream.steps} steps", field="stats", value=np.shape(stats.flat))


@dataclass(frozen=True)
class _Run:
    """What a checked sweep runs with, beside its stream and configs (see :func:`sweep`).

    ``pool`` is a one-thread executor for phase 1 and the table's field columns.
    """

    layout: SlotLayout
    progress: Progress | None
    isv: Mapping[str, float] | None
    device: str
    chunk_size: int | None
    scheduler: Any
    name: str
    options: dict
    pool: concurrent.futures.Executor


class _Source:
    """The configs of a sweep, as field columns built once, when first needed (by whichever thread asks first)."""

    def __init__(self, grid: ConfigGrid | None, config_list: list[RegimeConfig] | None):
        self.grid, self.config_list = grid, config_list
        self._columns: Columns | None = None
        self._lock = threading.Lock()

    def columns(self) -> Columns:
        with self._lock:
            if self._columns is None:
                self._columns = (self.grid.columns() if self.grid is not None
                                 else _list_columns(self.config_list))
            return self._columns

    def shard(self, start: int, stop: int, keep: Sequence[int]) -> _Shard:
        local = [k - start for k in keep if start <= k < stop]
        if self.grid is not None:  # the shard expands its own range of the grid, where it runs
            return _Shard(start, stop, local, grid=self.grid)
        return _Shard(start, stop, local, table={n: c[start:stop] for n, c in self.columns().items()})


def _sweep_run(stream: Stream | StepStream, given: StepStats | None, source: _Source, n_configs: int,
               keep: list[int], run: _Run, t0: float) -> SweepResult:
    """:func:`sweep` once its arguments are checked: shard, run (here or on the workers), assemble.

    Phase 1 (unless ``given``) runs in ``run.pool`` (the stream's upload and
    reduction on the GPU, or NumPy's threads) while this thread plans the shard's
    rows, or, on a cluster, sends the workers everything else and starts the
    shards, which plan their rows and wait for phase 1 (:func:`distributed.later`);
    the table's field columns are built in that thread next, while the shards run.
    On the GPU phase 1 comes in pieces (:func:`phase1_pieces`), each published (on a
    cluster) as it is done, and each piece's scan starts as it arrives.
    """
    from regime_dash.runs import scheduler as distributed

    with distributed.connect(run.scheduler) as client, contextlib.ExitStack() as stack:
        parts = 1 if client is None else distributed.worker_count(client)
        gpu = run.name == "fast" and _fast_on_gpu(run.device, client)
        stats = _phase1_handles(stream, given, gpu, run, client) if run.name == "fast" else None
        run.pool.submit(source.columns)
        shards = [source.shard(a, b, keep) for a, b in distributed.shard_bounds(n_configs, parts)]
        if run.name == "fast":
            fn, shared = _fast_shard, [_per_step(stream), stats, stream.accounts, run.layout, run.isv,
                                       "gpu" if gpu else "cpu", run.chunk_size]
        else:
            fn, shared = _replay_shard, [stream, run.layout, run.isv, run.name, run.options]
        metrics = np.empty((summary.N_METRICS, n_configs), dtype=np.float64)
        if client is None:  # one shard, with phase 1 maybe still running: its own progress, per chunk or per config
            columns, kept, ran = fn(shards[0], *shared, run.progress)
            metric_pack.fill(metrics, 0, n_configs, columns)
            results = [(kept, ran)]
        else:
            results = _on_cluster(client, stack, fn, shards, shared, stats, metrics, run.progress)
    return _assemble(stream, source.columns(), shards, results, metrics, stats, keep, run.layout, t0)


def _per_step(stream: Stream | StepStream) -> StepStream:
    """What a fast sweep's shards read of the stream, given phase 1: its per-step fields and b."""
    return stream.per_step() if isinstance(stream, Stream) else stream


def _phase1_handles(stream: Stream | StepStream, given: StepStats | None, gpu: bool, run: _Run,
                    client: Any) -> list[concurrent.futures.Future]:
    """Phase 1 as futures of ``(t0, t1, StepStats)`` pieces: ``given`` as one piece, done; or computed in
    ``run.pool`` (:func:`_phase1_in_pieces`), in :func:`phase1_pieces` on the GPU, in one piece on the CPU."""
    if given is not None:
        done: concurrent.futures.Future = concurrent.futures.Future()
        done.set_result((0, stream.steps, given))
        return [done]
    from regime_dash.runs import scheduler as distributed

    # on a cluster of this host's GPUs, phase 1 spreads over them (a PCIe link each)
    n_local = 0 if client is None or not gpu else distributed.local_gpus(client)
    bounds = phase1_pieces(stream.steps) if gpu else [(0, stream.steps)]
    pieces = [concurrent.futures.Future() for _ in bounds]
    run.pool.submit(_phase1_in_pieces, stream, run.device, _cuda_device(),
                    list(range(n_local)) if n_local > 1 else None, bounds, pieces)
    return pieces


def _on_cluster(client: Any, stack: contextlib.ExitStack, fn: Callable[..., Any], shards: list[_Shard],
                shared: list, stats: list | None, metrics: np.ndarray, progress: Progress | None) -> list[tuple]:
    """The shards run on the workers, each shard's metrics landed into ``metrics`` as it arrives;
    phase 1's pieces (``stats``) published as each is done. ``[(kept, engine)]`` per shard."""
    from regime_dash.runs import scheduler as distributed

    publishers = []
    if stats is not None:  # the shards start now and wait for phase 1 once their rows are planned
        later = [stack.enter_context(distributed.later(client)) for _ in stats]
        shared[1], publishers = [h for h, _ in later], [p for _, p in later]

    def land(k: int, result: Any) -> tuple:  # as each shard arrives: its metrics into the table
        columns, kept, ran = result
        metric_pack.fill(metrics, shards[k].start, shards[k].stop, columns)
        return kept, ran

    futures = distributed.submit_shards(functools.partial(_packed_shard, fn), shards, client, shared=shared)
    for piece, publish in zip(stats or (), publishers):  # each piece as it is done
        publish(piece.result())
    return distributed.gather_shards(futures, progress=progress, each=land)


def _assemble(stream: Stream | StepStream, fields: Columns, shards: list[_Shard], results: list[tuple],
              metrics: np.ndarray, stats: list | None, keep: list[int], layout: SlotLayout,
              t0: float) -> SweepResult:
    """The table (the config columns, then the metrics) and the kept trajectories, in ``keep`` order."""
    trajectories: dict[int, pd.DataFrame] = {}
    flat = functools.cache(lambda: _Pieces(stats).whole().flat)  # once, if a snapshot was kept
    for shard, (kept, _) in zip(shards, results):
        for k, item in kept.items():
            i = shard.start + k
            if isinstance(item, pd.DataFrame):
                trajectories[i] = item
            else:
                config = {n: c[i].item() for n, c in fields.items()}  # its F2/F4/F5 switches become columns
                trajectories[i] = _trajectory_frame(item, flat(), stream.accounts, stream.step,
                                                    stream.boundary, layout, "fast", config)
    trajectories = {k: trajectories[k] for k in keep}
    ran = results[0][1]
    # copy=False: every column is already a contiguous array (a row of the metrics block) owned by this table
    out = pd.DataFrame({**fields, **dict(zip(summary.METRICS, metrics))}, copy=False)
    out.attrs.update(engine=ran, steps=stream.steps, accounts=stream.accounts,
                     layout_fingerprint=layout.fingerprint_hex())
    return SweepResult(out, trajectories, ran, time.perf_counter() - t0)


__all__ = ["SweepResult", "ConfigGrid", "sweep", "expand_configs", "initial_rows", "config_columns",
           "config_slot_values"]
