"""Scale-out over ``dask.distributed``: one scheduler argument for sweeps and run checks.

Work that splits into independent shards (a sweep's configs, a store's runs)
takes ``scheduler=``:

``None``
    in-process, the default; dask is not imported.
``"local"``
    a local cluster started for the call and closed after it: one worker per
    GPU (dask-cuda's ``LocalCUDACluster`` where dask-cuda imports, else a
    :class:`distributed.SpecCluster` of nannies each started with its own
    ``CUDA_VISIBLE_DEVICES``), or, with no GPU, one single-threaded worker
    process per CPU core (numba in each worker limited to its share of cores).
``"tcp://host:port"`` (any scheduler address)
    a running cluster; the workers must import ``regime_dash`` (and reach the
    run store, for :func:`regime_dash.runs.check_all.check_all`).
a ``distributed.Client``
    used as is.

dask and distributed are an optional install (``requirements-distributed.txt``);
naming a scheduler without them raises :class:`EngineUnavailable` saying so.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import os
import socket
import urllib.parse
import uuid
from typing import Any, Callable, Iterator, Sequence

from regime_dash.errors import EngineUnavailable, ValidationError
from regime_dash.core.shards import shard_bounds  # re-exported: the sweep and check --all cut shards with it

#: ``progress(done, total)`` as shards finish.
Progress = Callable[[int, int], None]


def _require() -> Any:
    try:
        import distributed
    except ImportError as exc:
        raise EngineUnavailable(
            f"scheduler= needs dask.distributed ({exc}); install it with "
            f"`pip install -r requirements-distributed.txt`", engine="distributed") from None
    return distributed


def gpu_count() -> int:
    """CUDA devices visible here (0 without cupy or a driver)."""
    from regime_dash.engine import loader

    if loader.available() is not None:
        return 0
    import cupy

    return int(cupy.cuda.runtime.getDeviceCount())


def _visible_gpus(n: int) -> list[str]:
    """The device ids a worker per GPU gets: the ones CUDA_VISIBLE_DEVICES names, else 0..n-1."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [d.strip() for d in env.split(",") if d.strip()] if env else []
    return ids[:n] if len(ids) >= n else [str(i) for i in range(n)]


#: The log level of a local cluster's workers unless ``verbose``: their start-up INFO lines
#: (addresses, memory, threads) would bury a command's own output.
QUIET_LEVEL = logging.ERROR


def local_cluster(n_workers: int | None = None, *, gpus: int | None = None,
                  use_dask_cuda: bool = True, verbose: bool = False) -> Any:
    """A local cluster with one worker per GPU, or one per CPU core without GPUs.

    Parameters
    ----------
    n_workers
        CPU workers (default: the cores this process may use). Ignored with GPUs.
    gpus
        GPUs to use (default: every visible one); 0 forces CPU workers.
    use_dask_cuda
        Use dask-cuda's ``LocalCUDACluster`` when it imports; otherwise (or with
        False) nannies started with ``CUDA_VISIBLE_DEVICES`` set one GPU each.
    verbose
        Let the workers log at dask's own level (INFO); by default they log errors only.

    Returns
    -------
    A ``distributed`` cluster object (close it, or use it as a context manager).
    """
    distributed = _require()
    n_gpu = gpu_count() if gpus is None else int(gpus)
    if n_gpu < 0:
        raise ValidationError(f"gpus must be >= 0, got {gpus!r}", field="gpus", value=gpus)
    # every address on the loopback: a local cluster serves this host only
    common = {"dashboard_address": None, "host": "127.0.0.1"}
    quiet = {} if verbose else {"silence_logs": QUIET_LEVEL}
    if n_gpu > 0:
        ids = _visible_gpus(n_gpu)
        if use_dask_cuda:
            try:
                from dask_cuda import LocalCUDACluster
            except ImportError:
                pass
            else:
                return LocalCUDACluster(CUDA_VISIBLE_DEVICES=",".join(ids), threads_per_worker=1,
                                        **common)
        workers = {f"gpu-{d}": {"cls": distributed.Nanny,
                                "options": {"nthreads": 1, "host": "127.0.0.1", "dashboard": False,
                                            "env": {"CUDA_VISIBLE_DEVICES": d}, **quiet}}
                   for d in ids}
    else:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        n = cores if n_workers is None else int(n_workers)
        if n < 1:
            raise ValidationError(f"n_workers must be >= 1, got {n_workers!r}", field="n_workers",
                                  value=n_workers)
        share = str(max(1, cores // n))  # numba's threads per worker: the cores split between them
        workers = {f"cpu-{i}": {"cls": distributed.Nanny,
                                "options": {"nthreads": 1, "host": "127.0.0.1", "dashboard": False,
                                            "env": {"NUMBA_NUM_THREADS": share}, **quiet}}
                   for i in range(n)}
    scheduler = {"cls": distributed.Scheduler, "options": common}
    return distributed.SpecCluster(workers=workers, scheduler=scheduler, silence_logs=40)


@contextlib.contextmanager
def connect(scheduler: Any, *, verbose: bool = False) -> Iterator[Any]:
    """A ``distributed.Client`` for ``scheduler`` (see the module docstring), or None in-process.

    A cluster or client made here is closed on exit; a client passed in is not.

    Raises
    ------
    ValidationError
        ``scheduler`` is none of the accepted forms.
    EngineUnavailable
        dask.distributed is not installed.
    """
    if scheduler is None:
        yield None
        return
    if isinstance(scheduler, str):
        if not scheduler.strip():
            raise ValidationError("scheduler must be None, 'local' or a scheduler address, got ''",
                                  field="scheduler", value=scheduler)
        distributed = _require()
        if scheduler == "local":
            # this host's workers: results and inputs go straight between them and here
            with local_cluster(verbose=verbose) as cluster, \
                    distributed.Client(cluster, direct_to_workers=True) as client:
                yield client
            return
        with distributed.Client(scheduler, timeout="30s") as client:
            yield client
        return
    distributed = _require()
    if isinstance(scheduler, distributed.Client):
        yield scheduler
        return
    raise ValidationError(f"scheduler must be None, 'local', a scheduler address or a "
                          f"distributed.Client, got {type(scheduler).__name__}",
                          field="scheduler", value=type(scheduler).__name__)


def _workers(client: Any) -> list[str]:
    """The addresses of every worker the client's scheduler has now, sorted.

    From ``client.nthreads()``: ``scheduler_info()`` lists at most five workers in some
    releases of distributed (2025.4 to 2026.6) unless asked for more.
    """
    return sorted(client.nthreads())


def worker_count(client: Any) -> int:
    """Workers the client's scheduler has now (at least 1)."""
    return max(1, len(_workers(client)))


@functools.lru_cache(maxsize=1)
def _local_hosts() -> frozenset[str]:
    hosts = {"127.0.0.1", "localhost", "::1", socket.gethostname()}
    with contextlib.suppress(OSError):
        hosts.add(socket.gethostbyname(socket.gethostname()))
    with contextlib.suppress(ImportError, OSError):  # psutil comes with distributed
        import psutil  # every interface's address: a local cluster listens on one of them

        hosts.update(a.address.split("%")[0] for addrs in psutil.net_if_addrs().values() for a in addrs
                     if a.family in (socket.AF_INET, socket.AF_INET6))
    return frozenset(hosts)


def local_gpus(client: Any) -> int:
    """GPUs of this host a cluster's work may spread over: ``min(workers, GPUs here)`` when every
    worker of ``client`` runs on this host, else 0.

    What a GPU sweep's phase 1 (run here, on the client) uses: a cluster of this
    host's GPUs has a PCIe link per GPU, and phase 1 is bound by those links.
    """
    workers = _workers(client)
    return min(len(workers), gpu_count()) if _all_local(workers) else 0


def _all_local(workers: Sequence[str]) -> bool:
    """Whether every one of these worker addresses is on this host (and there is one)."""
    local = _local_hosts()
    return bool(workers) and all((urllib.parse.urlsplit(addr).hostname or "").split("%")[0] in local
                                 for addr in workers)


def map_shards(fn: Callable[..., Any], shards: Sequence[Any], client: Any, *, shared: Sequence[Any] = (),
               progress: Progress | None = None) -> list[Any]:
    """``[fn(shard, *shared) for shard in shards]``, run on ``client``'s workers; results in shard order.

    ``shared`` values go to every worker once (see :func:`submit_shards`), not once per shard.
    Without a client the shards run here, in order.
    """
    total = len(shards)
    if client is None:
        out = []
        for k, shard in enumerate(shards):
            out.append(fn(shard, *shared))
            if progress is not None:
                progress(k + 1, total)
        return out
    return gather_shards(submit_shards(fn, shards, client, shared=shared), progress=progress)


#: Seconds :func:`submit_shards` waits for a worker when the cluster has none yet.
WORKER_WAIT_S = 60.0


def _passed_as_is(value: Any) -> bool:
    """Whether a shared value is a handle the tasks take themselves: a future, a variable, or a list of them."""
    distributed = _require()
    handles = (distributed.Future, distributed.Variable)
    return isinstance(value, handles) or (isinstance(value, list) and bool(value)
                                          and all(isinstance(v, handles) for v in value))


def submit_shards(fn: Callable[..., Any], shards: Sequence[Any], client: Any, *,
                  shared: Sequence[Any] = ()) -> list[Any]:
    """Submit ``fn(shard, *shared)`` per shard to ``client``'s workers, shard k to worker k (round
    robin); the futures, in shard order.

    The caller can work while the shards run, then collect them with :func:`gather_shards`.

    Parameters
    ----------
    fn
        The work of one shard, ``fn(shard, *shared)``; it runs on a worker.
    shards
        One item per task, in the order the results are wanted.
    client
        A ``distributed.Client``.
    shared
        Values every shard needs, passed after the shard. Each is scattered to every
        worker once per call (``client.scatter(..., broadcast=True, hash=False)``); a
        ``distributed.Future``, a ``distributed.Variable`` (see :func:`later`) or a list
        of them is passed as it is.

    Returns
    -------
    list of distributed.Future
        One per shard, in shard order.

    Raises
    ------
    EngineUnavailable
        The cluster has no worker within :data:`WORKER_WAIT_S` seconds.
    """
    workers = _workers(client)
    if not workers:
        try:
            client.wait_for_workers(1, timeout=WORKER_WAIT_S)
        except (TimeoutError, asyncio.TimeoutError) as exc:
            raise EngineUnavailable(f"the cluster at {client.scheduler.address} has no worker "
                                    f"(waited {WORKER_WAIT_S:g} s)", engine="distributed") from exc
        workers = _workers(client)
    sent = [k for k, v in enumerate(shared) if not _passed_as_is(v)]
    args = list(shared)
    if sent:  # in one call: one round trip for all of them
        # Fresh keys, not content hashes: a call that reuses the key of a value an earlier call
        # has just released races that release on the scheduler (dask/distributed#8576), and the
        # scatter then waits for ever. It hung a sweep that followed a failed one.
        scattered = client.scatter([shared[k] for k in sent], broadcast=True, hash=False)
        for k, future in zip(sent, scattered):
            args[k] = future
    name = getattr(getattr(fn, "func", fn), "__name__", "shard")
    if hasattr(fn, "args") and fn.args:  # a partial of a wrapper: name it after the function it wraps
        name = getattr(fn.args[0], "__name__", name)
    # Shard k goes to worker k (round robin): left to itself the scheduler measured placing both
    # shards of a two-GPU sweep on one worker in some calls (its one thread then ran them one
    # after the other: a one-GPU time). Loose, so a shard still runs if its worker is gone.
    return [client.submit(fn, shard, *args, pure=False, key=f"{name}-{k}-{uuid.uuid4().hex[:8]}",
                          workers=[workers[k % len(workers)]], allow_other_workers=True)
            for k, shard in enumerate(shards)]


def gather_shards(futures: Sequence[Any], progress: Progress | None = None,
                  each: Callable[[int, Any], Any] | None = None) -> list[Any]:
    """The results of :func:`submit_shards`' futures, in their order, collected as each finishes
    (``distributed.as_completed(..., with_results=True)``).

    A shard's exception is raised here (our errors keep their type across processes),
    and the shards not done yet are cancelled.

    Parameters
    ----------
    futures
        What :func:`submit_shards` returned.
    progress
        Called as ``progress(done, total)`` each time a shard's result arrives.
    each
        Called as ``each(k, result)`` as shard k's result arrives (while the others
        still run); what it returns is kept in the result's place.

    Returns
    -------
    list
        The shards' results (or what ``each`` made of them), in the order of ``futures``.
    """
    distributed = _require()
    out: list[Any] = [None] * len(futures)
    if not futures:
        return out
    index = {f.key: k for k, f in enumerate(futures)}
    try:
        finished = distributed.as_completed(futures, with_results=True)
        for done, (future, result) in enumerate(finished, start=1):
            k = index[future.key]
            out[k] = result if each is None else each(k, result)
            if progress is not None:
                progress(done, len(futures))
    except BaseException:
        with contextlib.suppress(Exception):  # nothing waits for the others any more
            futures[0].client.cancel([f for f in futures if not f.done()])
        raise
    return out


#: Seconds a task waits in :func:`published` for its client to publish the value.
PUBLISH_TIMEOUT_S = 600.0
#: Seconds a task waits to fetch a published value.
FETCH_TIMEOUT_S = 60.0
#: What a :func:`later` variable holds once its client has failed.
_FAILED = "failed"


@contextlib.contextmanager
def later(client: Any) -> Iterator[tuple[Any, Callable[[Any], None]]]:
    """``(variable, publish)``: tasks given ``variable`` wait in :func:`published` until
    ``publish(value)`` runs here. So a task can start (and do what does not need the value)
    while the client is still computing it.

    ``publish`` scatters the value to every worker (``broadcast=True``; not hashed: the
    value is new, and publishing is on the critical path) and sets the
    ``distributed.Variable`` to its future. If the block exits with an error, published
    or not, the variable is left saying so (not deleted), so that a task still on its way
    to it raises instead of waiting for a value that would never come. If it exits
    without publishing, it says that; published and without an error, it is deleted
    (every task has read it by then).
    """
    distributed = _require()
    variable = distributed.Variable(f"regime-dash-later-{uuid.uuid4().hex}", client=client)
    held: list[Any] = []  # the published futures: alive until the block exits

    def publish(value: Any) -> None:
        # in a list: scatter takes a bare tuple, list or dict as one future per item
        held.extend(client.scatter([value], broadcast=True, hash=False))
        variable.set(held[-1])

    try:
        yield variable, publish
    except BaseException:
        with contextlib.suppress(Exception):  # the client may be what failed: the error raised is the first
            variable.set(_FAILED)
        raise
    if held:
        variable.delete()
    else:
        variable.set(None)


def published(variable: Any, timeout: float = PUBLISH_TIMEOUT_S, fetch_timeout: float = FETCH_TIMEOUT_S) -> Any:
    """On a worker: the value published into a :func:`later` variable; waits for it.

    Raises
    ------
    EngineUnavailable
        The client stopped before publishing it (or failed), or did not publish it within
        ``timeout`` seconds, or the published value could not be fetched within ``fetch_timeout`` seconds.
    """
    distributed = _require()
    name = variable.name
    try:
        value = variable.get(timeout=timeout)
    except (TimeoutError, asyncio.TimeoutError) as exc:
        raise EngineUnavailable(f"the client of {name} did not publish it within {timeout:g} s",
                                engine="distributed") from exc
    if value == _FAILED:
        raise EngineUnavailable(f"the client of {name} failed; its work was abandoned", engine="distributed")
    if not isinstance(value, distributed.Future):
        raise EngineUnavailable(f"the client of {name} stopped before publishing it", engine="distributed")
    try:
        return value.result(timeout=fetch_timeout)
    except (TimeoutError, asyncio.TimeoutError, concurrent.futures.CancelledError) as exc:
        raise EngineUnavailable(f"{name} was published, but it could not be fetched within "
                                f"{fetch_timeout:g} s ({type(exc).__name__})", engine="distributed") from exc


__all__ = ["connect", "local_cluster", "map_shards", "submit_shards", "gather_shards", "shard_bounds",
           "worker_count", "gpu_count", "local_gpus", "later", "published"]
