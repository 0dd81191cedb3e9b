"""``prepare(stream).sweep(configs)``: what-if replays of one prepared stream under many configs.

Every config gets one row: its fields and the :mod:`regime_dash.engine.summary`
metrics of its replay (dead-zone steps, longest duration, timeouts, tail
events, σ-floor steps, min/mean kelly_f, max σ, ...). The full trajectories are
kept only for the configs named in ``keep``. A grid ``{field: values}`` is swept as
NumPy columns and a list of RegimeConfig objects is read into the same columns
(:mod:`regime_dash.engine.config_grid`); the shards run as
:mod:`regime_dash.engine.sweep_shards` describes.

Given the stream's phase 1 (held by the :class:`~regime_dash.engine.prepared.Prepared`),
a fast sweep computes none and reads only the per-step fields: it runs from a
:class:`~regime_dash.core.streams.StepStream` as from the whole stream, with the same table.

A :class:`ShardScheduler` runs the shards on a cluster's workers, one contiguous shard
per worker (a grid's shard is the grid and an index range, expanded on the worker); the
table is the same as in-process, value for value. :func:`regime_dash.runs.sweeps.sweep`
makes one from a scheduler argument (``"local"``, an address, a dask client).

A sweep row equals :func:`summary.summarize_frame` of the single replay of
that config, exactly: both fold the same snapshot with the same
:func:`summary.accumulate`.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Iterable, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np
import pandas as pd

from regime_dash.core.config import RegimeConfig, field_names
from regime_dash.core.shards import shard_bounds
from regime_dash.engine import metric_pack, summary
from regime_dash.engine.backends import resolve_engine
from regime_dash.engine.config_grid import Columns, ConfigGrid, config_list, list_columns
from regime_dash.engine.sweep_shards import (Pieces, Progress, Shard, cuda_device, fast_shard, packed_shard,
                                             per_step, phase1_in_pieces, phase1_pieces, replay_shard,
                                             trajectory_frame)
from regime_dash.errors import ConfigError, ValidationError

@dataclass
class SweepResult:
    """The outcome of a sweep.

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


@runtime_checkable
class ShardScheduler(Protocol):
    """Where a sweep's shards run when not in this process: a cluster's workers, one shard each
    (:class:`regime_dash.runs.sweeps.DaskShards` on dask.distributed)."""

    def worker_count(self) -> int:
        """Workers the shards are cut for (at least 1)."""

    def local_gpus(self) -> int:
        """GPUs of this host the workers run on (phase 1 spreads over them); 0 when they run elsewhere."""

    def gpus_everywhere(self) -> bool:
        """Whether the fast engine's GPU half can run on every worker."""

    def later(self) -> ContextManager[tuple[Any, Callable[[Any], None]]]:
        """``(handle, publish)``: a task given ``handle`` waits in ``handle.result()`` until ``publish(value)``
        runs here; on an error in the block, the waiting tasks are told."""

    def submit(self, fn: Callable[..., Any], shards: Sequence[Any], shared: Sequence[Any]) -> list:
        """``fn(shard, *shared)`` per shard on the workers; their futures, in shard order."""

    def gather(self, futures: Sequence[Any], progress: Progress | None,
               each: Callable[[int, Any], Any]) -> list:
        """The shards' results as each arrives (``each(k, result)`` kept in its place), in shard order."""


def sweep_engine(engine: str) -> str:
    """The engine a sweep runs on: ``auto`` is ``fast`` where it can run, else ``reference`` (a per-step
    ``cuda`` replay per config is never quicker); any other name as :func:`resolve_engine` resolves it."""
    if engine == "auto":
        return "fast" if resolve_engine("auto") == "fast" else "reference"
    return resolve_engine(engine)


class ConfigSource:
    """The configs of a sweep, as field columns built once, when first needed (by whichever thread asks first)."""

    def __init__(self, grid: ConfigGrid | None, configs: list[RegimeConfig] | None):
        self.grid, self.config_list = grid, configs
        self._columns: Columns | None = None
        self._lock = threading.Lock()

    def columns(self) -> Columns:
        with self._lock:
            if self._columns is None:
                self._columns = (self.grid.columns() if self.grid is not None
                                 else list_columns(self.config_list))
            return self._columns

    def shard(self, start: int, stop: int, keep: Sequence[int]) -> Shard:
        local = [k - start for k in keep if start <= k < stop]
        if self.grid is not None:  # the shard expands its own range of the grid, where it runs
            return Shard(start, stop, local, grid=self.grid)
        return Shard(start, stop, local, table={n: c[start:stop] for n, c in self.columns().items()})


@dataclass(frozen=True, eq=False)
class SweepPlan:
    """A checked sweep of a prepared stream: its configs, the indices to keep, the chunk size.

    Made by :meth:`of` (every argument checked before anything runs or connects), run by :meth:`run`.
    """

    prepared: Any  # the stream swept: a regime_dash.engine.prepared.Prepared
    source: ConfigSource
    n_configs: int
    keep: list[int]
    chunk_size: int | None
    t0: float

    @classmethod
    def of(cls, prepared: Any, configs: Sequence[RegimeConfig] | Mapping[str, Any], *,
           keep: Sequence[int] | None = None, chunk_size: int | None = None,
           base: RegimeConfig | None = None) -> "SweepPlan":
        """The plan of sweeping ``prepared`` over ``configs`` (a grid on ``base``, or a list).

        Raises
        ------
        ConfigError
            A bad grid or list (naming the field or element), or no configs.
        ValidationError
            A bad ``keep`` or ``chunk_size``.
        """
        t0 = time.perf_counter()
        grid = ConfigGrid.of(configs, base) if isinstance(configs, Mapping) else None
        listed = None if grid is not None else config_list(configs)
        n_configs = len(grid) if grid is not None else len(listed)
        if not n_configs:
            raise ConfigError("the sweep has no configs", field="configs", value=configs)
        checked = _checked_keep(keep, n_configs)
        _check_chunk_size(chunk_size)
        return cls(prepared, ConfigSource(grid, listed), n_configs, checked, chunk_size, t0)

    def run(self, progress: Progress | None = None, scheduler: ShardScheduler | None = None) -> SweepResult:
        """Shard, run (here, or on ``scheduler``'s workers), assemble the table and the kept trajectories.

        ``progress(done, total)`` is called after each chunk (fast), config (per-replay engines)
        or, with a scheduler, shard.
        """
        if scheduler is not None and not isinstance(scheduler, ShardScheduler):
            raise ValidationError(f"scheduler must be a ShardScheduler (regime_dash.sweep takes 'local', an "
                                  f"address or a client), got {type(scheduler).__name__}",
                                  field="scheduler", value=type(scheduler).__name__)
        with concurrent.futures.ThreadPoolExecutor(1) as pool, contextlib.ExitStack() as stack:
            return _sweep_run(self, progress, scheduler, pool, stack)


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


def _sweep_run(plan: SweepPlan, progress: Progress | None, scheduler: ShardScheduler | None,
               pool: concurrent.futures.Executor, stack: contextlib.ExitStack) -> SweepResult:
    """A checked sweep: shard, run (here or on the workers), assemble.

    Phase 1 (unless held) runs in ``pool`` (the stream's upload and reduction on the GPU,
    or NumPy's threads) while this thread plans the shard's rows, or, on a cluster, sends
    the workers everything else and starts the shards, which plan their rows and wait for
    phase 1 (:meth:`ShardScheduler.later`); the table's field columns are built in that
    thread next, while the shards run. On the GPU phase 1 comes in pieces
    (:func:`phase1_pieces`), each published (on a cluster) as it is done, and each piece's
    scan starts as it arrives.
    """
    prepared = plan.prepared
    stream, layout, isv = prepared.stream, prepared.layout, prepared.isv
    parts = 1 if scheduler is None else scheduler.worker_count()
    fast = prepared.engine == "fast"
    gpu = fast and _fast_on_gpu(prepared, scheduler)
    stats = _phase1_handles(prepared, gpu, pool, scheduler) if fast else None
    pool.submit(plan.source.columns)
    shards = [plan.source.shard(a, b, plan.keep) for a, b in shard_bounds(plan.n_configs, parts)]
    if fast:
        fn, shared = fast_shard, [per_step(stream), stats, stream.accounts, layout, isv, "gpu" if gpu else "cpu",
                                  plan.chunk_size]
    else:
        fn, shared = replay_shard, [prepared.with_options(normalized=False)]  # each replay keeps its frame alone
    metrics = np.empty((summary.N_METRICS, plan.n_configs), dtype=np.float64)
    if scheduler is None:  # one shard, with phase 1 maybe still running: its own progress, per chunk or per config
        columns, kept, ran = fn(shards[0], *shared, progress)
        metric_pack.fill(metrics, 0, plan.n_configs, columns)
        results = [(kept, ran)]
    else:
        results = _on_cluster(scheduler, stack, fn, shards, shared, stats, metrics, progress)
    return _assemble(plan, shards, results, metrics, stats)


def _fast_on_gpu(prepared: Any, scheduler: ShardScheduler | None) -> bool:
    """Whether the fast sweep's shards run on GPUs: here (no scheduler), or on every worker."""
    device = prepared.options.device
    if scheduler is None:
        return prepared.backend.on_gpu(prepared.options)
    if device == "cpu":
        return False
    return device == "gpu" or scheduler.gpus_everywhere()


def _phase1_handles(prepared: Any, gpu: bool, pool: concurrent.futures.Executor,
                    scheduler: ShardScheduler | None) -> list[concurrent.futures.Future]:
    """Phase 1 as futures of ``(t0, t1, StepStats)`` pieces: the prepared stream's held one as one piece, done;
    or computed in ``pool`` (:func:`phase1_in_pieces`), in :func:`phase1_pieces` on the GPU, in one piece on the
    CPU."""
    stream = prepared.stream
    held = prepared.held_phase1()
    if held is not None:
        done: concurrent.futures.Future = concurrent.futures.Future()
        done.set_result((0, stream.steps, held))
        return [done]
    # on a cluster of this host's GPUs, phase 1 spreads over them (a PCIe link each)
    n_local = 0 if scheduler is None or not gpu else scheduler.local_gpus()
    bounds = phase1_pieces(stream.steps) if gpu else [(0, stream.steps)]
    pieces = [concurrent.futures.Future() for _ in bounds]
    pool.submit(phase1_in_pieces, stream, prepared.options.device, cuda_device(),
                list(range(n_local)) if n_local > 1 else None, bounds, pieces)
    return pieces


def _on_cluster(scheduler: ShardScheduler, stack: contextlib.ExitStack, fn: Callable[..., Any],
                shards: list[Shard], shared: list, stats: list | None, metrics: np.ndarray,
                progress: Progress | None) -> list[tuple]:
    """The shards run on the workers, each shard's metrics landed into ``metrics`` as it arrives;
    phase 1's pieces (``stats``) published as each is done. ``[(kept, engine)]`` per shard."""
    publishers = []
    if stats is not None:  # the shards start now and wait for phase 1 once their rows are planned
        later = [stack.enter_context(scheduler.later()) for _ in stats]
        shared[1], publishers = [h for h, _ in later], [p for _, p in later]

    def land(k: int, result: Any) -> tuple:  # as each shard arrives: its metrics into the table
        columns, kept, ran = result
        metric_pack.fill(metrics, shards[k].start, shards[k].stop, columns)
        return kept, ran

    futures = scheduler.submit(functools.partial(packed_shard, fn), shards, shared)
    for piece, publish in zip(stats or (), publishers):  # each piece as it is done
        publish(piece.result())
    return scheduler.gather(futures, progress, land)


def _assemble(plan: SweepPlan, shards: list[Shard], results: list[tuple], metrics: np.ndarray,
              stats: list | None) -> SweepResult:
    """The table (the config columns, then the metrics) and the kept trajectories, in ``keep`` order."""
    stream, layout = plan.prepared.stream, plan.prepared.layout
    fields = plan.source.columns()
    trajectories: dict[int, pd.DataFrame] = {}
    flat = functools.cache(lambda: Pieces(stats).whole().flat)  # once, if a snapshot was kept
    for shard, (kept, _) in zip(shards, results):
        for k, item in kept.items():
            i = shard.start + k
            if isinstance(item, pd.DataFrame):
                trajectories[i] = item
            else:
                config = {n: c[i].item() for n, c in fields.items()}  # its F2/F4/F5 switches become columns
                trajectories[i] = trajectory_frame(item, flat(), stream.accounts, stream.step,
                                                   stream.boundary, layout, "fast", config)
    trajectories = {k: trajectories[k] for k in plan.keep}
    ran = results[0][1]
    # copy=False: every column is already a contiguous array (a row of the metrics block) owned by this table
    out = pd.DataFrame({**fields, **dict(zip(summary.METRICS, metrics))}, copy=False)
    out.attrs.update(engine=ran, steps=stream.steps, accounts=stream.accounts,
                     layout_fingerprint=layout.fingerprint_hex())
    return SweepResult(out, trajectories, ran, time.perf_counter() - plan.t0)


__all__ = ["ConfigSource", "ShardScheduler", "SweepPlan", "SweepResult", "sweep_engine"]
