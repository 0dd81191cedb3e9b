"""``sweep(stream, configs)``: what-if replays of one stream under many configs, here or over dask.

The sweep itself is the engine's (:meth:`regime_dash.engine.prepared.Prepared.sweep`,
:mod:`regime_dash.engine.sweep`): one row per config, its fields and the summary
metrics of its replay; one shared phase 1 on the fast engine. This module is its
keyword form, as the README documents it, and its scale-out: ``scheduler=`` (``"local"``,
a scheduler address, a ``distributed.Client``; :mod:`regime_dash.runs.scheduler`)
becomes a :class:`DaskShards`, which runs one contiguous shard per worker (a grid's
shard is the grid and an index range, expanded on the worker); the table is the same
as in-process, value for value.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Mapping, Sequence

from regime_dash.core.config import RegimeConfig
from regime_dash.core.slots import SlotLayout
from regime_dash.core.streams import StepStream, Stream
from regime_dash.engine.config_grid import (ConfigGrid, config_columns, config_slot_values, expand_configs,
                                            initial_rows)
from regime_dash.engine.options import ReplayOptions
from regime_dash.engine.prepared import prepare
from regime_dash.engine.step_stats import StepStats
from regime_dash.engine.sweep import SweepPlan, SweepResult, sweep_engine
from regime_dash.engine.sweep_shards import (CPU_CHUNK, PHASE1_FIRST_PIECE, PHASE1_PIECE_GROWTH, Progress,
                                             gpu_here, phase1_pieces)


class LaterPiece:
    """A phase-1 piece as a worker's task holds it: ``result()`` waits for what the client publishes into
    its ``distributed.Variable`` (:func:`regime_dash.runs.scheduler.later`)."""

    def __init__(self, variable: Any):
        self.variable = variable

    def result(self) -> Any:
        from regime_dash.runs import scheduler

        return scheduler.published(self.variable)


class DaskShards:
    """A sweep's :class:`~regime_dash.engine.sweep.ShardScheduler` on a ``distributed.Client``'s workers."""

    def __init__(self, client: Any):
        self.client = client

    def worker_count(self) -> int:
        from regime_dash.runs import scheduler

        return scheduler.worker_count(self.client)

    def local_gpus(self) -> int:
        from regime_dash.runs import scheduler

        return scheduler.local_gpus(self.client)

    def gpus_everywhere(self) -> bool:
        return all(self.client.run(gpu_here).values())

    @contextlib.contextmanager
    def later(self) -> Iterator[tuple[LaterPiece, Callable[[Any], None]]]:
        from regime_dash.runs import scheduler

        with scheduler.later(self.client) as (variable, publish):
            yield LaterPiece(variable), publish

    def submit(self, fn: Callable[..., Any], shards: Sequence[Any], shared: Sequence[Any]) -> list:
        from regime_dash.runs import scheduler

        return scheduler.submit_shards(fn, shards, self.client, shared=shared)

    def gather(self, futures: Sequence[Any], progress: Progress | None,
               each: Callable[[int, Any], Any]) -> list:
        from regime_dash.runs import scheduler

        return scheduler.gather_shards(futures, progress=progress, each=each)


def sweep(stream: Stream | StepStream, configs: Sequence[RegimeConfig] | Mapping[str, Any], engine: str = "auto",
          keep: Sequence[int] | None = None, layout: SlotLayout | None = None,
          progress: Progress | None = None, *, isv: Mapping[str, float] | None = None,
          device: str = "auto", chunk_size: int | None = None, base: RegimeConfig | None = None,
          scheduler: Any = None, stats: StepStats | None = None, **options: Any) -> SweepResult:
    """Replay ``stream`` under every config and summarize each replay in one row.

    The keyword form of ``prepare(stream, engine, ReplayOptions(device=..., **options), isv=, layout=,
    stats=).sweep(configs, keep=, progress=, chunk_size=, base=, scheduler=)``
    (:meth:`regime_dash.engine.prepared.Prepared.sweep`).

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
        are split into one contiguous shard per worker. The table is the same
        as in-process, value for value. A fast sweep sends each worker phase 1
        (computed once here, published as the shards start) and the per-step
        fields, never the [T, b] batch. Each worker gets one copy per sweep
        (``client.scatter(..., broadcast=True)``).
    stats
        For ``fast``: the stream's phase 1 (``engine.fast.step_stats``, ``engine.file_phase1.read``),
        when the caller has it; the sweep then computes none. The same table either way.
    **options
        Replay options of the per-replay engines (e.g. ``graph=True`` for ``cuda``): fields of
        :class:`~regime_dash.engine.options.ReplayOptions`.

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
    prepared = prepare(stream, sweep_engine(engine), ReplayOptions.of(device=device, **options), isv=isv,
                       layout=layout, stats=stats)
    plan = SweepPlan.of(prepared, configs, keep=keep, chunk_size=chunk_size, base=base)  # checked before connecting
    with shard_scheduler(scheduler) as shards:
        return plan.run(progress, shards)


@contextlib.contextmanager
def shard_scheduler(scheduler: Any) -> Iterator[DaskShards | None]:
    """The :class:`DaskShards` of a scheduler argument (see :mod:`regime_dash.runs.scheduler`), or None
    in-process; a cluster or client made here is closed on exit."""
    from regime_dash.runs import scheduler as distributed

    with distributed.connect(scheduler) as client:
        yield None if client is None else DaskShards(client)


__all__ = ["CPU_CHUNK", "PHASE1_FIRST_PIECE", "PHASE1_PIECE_GROWTH", "ConfigGrid", "DaskShards", "LaterPiece",
           "SweepResult", "config_columns", "config_slot_values", "expand_configs", "initial_rows", "phase1_pieces",
           "shard_scheduler", "sweep"]
