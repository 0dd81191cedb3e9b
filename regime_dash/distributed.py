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
    run store, for :func:`regime_dash.check_all.check_all`).
a ``distributed.Client``
    used as is.

dask and distributed are an optional install (``requirements-distributed.txt``);
naming a scheduler without them raises :class:`EngineUnavailable` saying so.
"""
from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import functools
import hashlib
import os
import pickle
import socket
import threading
import urllib.parse
from typing import Any, Callable, Iterator, Sequence

from regime_dash.errors import EngineUnavailable, ValidationError
from regime_dash.shards import shard_bounds  # re-exported: the sweep and check --all cut shards with it

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


def local_cluster(n_workers: int | None = None, *, gpus: int | None = None,
                  use_dask_cuda: bool = True) -> Any:
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

    Returns
    -------
    A ``distributed`` cluster object (close it, or use it as a context manager).
    """
    distributed = _require()
    n_gpu = gpu_count() if gpus is None else int(gpus)
    if n_gpu < 0:
        raise ValidationError(f"gpus must be >= 0, got {gpus!r}", field="gpus", value=gpus)
    common = {"dashboard_address": None}
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
                                "options": {"nthreads": 1, "env": {"CUDA_VISIBLE_DEVICES": d}}}
                   for d in ids}
    else:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        n = cores if n_workers is None else int(n_workers)
        if n < 1:
            raise ValidationError(f"n_workers must be >= 1, got {n_workers!r}", field="n_workers",
                                  value=n_workers)
        share = str(max(1, cores // n))  # numba's threads per worker: the cores split between them
        workers = {f"cpu-{i}": {"cls": distributed.Nanny,
                                "options": {"nthreads": 1, "env": {"NUMBA_NUM_THREADS": share}}}
                   for i in range(n)}
    scheduler = {"cls": distributed.Scheduler, "options": common}
    return distributed.SpecCluster(workers=workers, scheduler=scheduler, silence_logs=40)


@contextlib.contextmanager
def connect(scheduler: Any) -> Iterator[Any]:
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
            with local_cluster() as cluster, distributed.Client(cluster) as client:
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


#: Values scattered to a cluster, by (client id, content key): at most this many are kept.
SCATTER_CACHE_SIZE = 8
_scattered: "collections.OrderedDict[tuple[str, str], Any]" = collections.OrderedDict()
_scatter_lock = threading.Lock()


#: Values whose pickle is larger than this are scattered every time, not hashed and kept
#: (a [T, b] stream, which only the CPU and per-replay sweeps send).
SCATTER_CACHE_MAX_BYTES = 64 << 20


def content_key(value: Any) -> str:
    """A key of ``value``'s content: the SHA-256 digest of its pickle (arrays by their bytes)."""
    return _digest(*_pickled(value))


def _pickled(value: Any) -> tuple[bytes, list[memoryview]]:
    """``value``'s pickle (protocol 5) and its out-of-band buffers: a large array's bytes are not copied."""
    buffers: list[pickle.PickleBuffer] = []
    head = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    return head, [b.raw() for b in buffers]


#: Buffers at least this large are hashed each on a thread of its own (see :func:`_digest`).
PARALLEL_HASH_BYTES = 1 << 20
_hash_pool: concurrent.futures.ThreadPoolExecutor | None = None
_hash_pool_lock = threading.Lock()


def _buffer_digest(buf: memoryview) -> bytes:
    return hashlib.sha256(buf).digest()


def _digest(head: bytes, buffers: Sequence[memoryview] = ()) -> str:
    """The SHA-256 of ``head`` and, in order, each buffer's length and SHA-256.

    SHA-256 rather than BLAKE2b: the CPU's SHA extensions make it 2x faster (a sweep's
    per-step inputs, eight arrays, 26 MB at T = 800,000: 20 ms against 44 ms on the
    device machine's Xeon, hashed one after the other). hashlib lets go of the GIL while
    it hashes a large buffer, so the large ones are hashed at once, on threads, and
    phase 1's threads go on meanwhile.
    """
    global _hash_pool
    big = [k for k, buf in enumerate(buffers) if buf.nbytes >= PARALLEL_HASH_BYTES]
    parts: list[bytes | None] = [None] * len(buffers)
    if len(big) > 1:
        with _hash_pool_lock:
            if _hash_pool is None:
                _hash_pool = concurrent.futures.ThreadPoolExecutor(
                    min(8, os.cpu_count() or 1), thread_name_prefix="regime-dash-hash")
        for k, part in zip(big, _hash_pool.map(_buffer_digest, [buffers[k] for k in big])):
            parts[k] = part
    digest = hashlib.sha256(head)
    for buf, part in zip(buffers, parts):
        digest.update(buf.nbytes.to_bytes(8, "little"))
        digest.update(part if part is not None else _buffer_digest(buf))
    return digest.hexdigest()


def scatter_shared(client: Any, value: Any, workers: Sequence[str] | None = None) -> dict[str, Any]:
    """``{worker address: future}``: a copy of ``value`` on every worker of ``client``, scattered
    once per content.

    The copies of the last :data:`SCATTER_CACHE_SIZE` values are kept, keyed on
    the client and the content (:func:`content_key`), so the next sweep of the
    same stream reuses what its workers already hold instead of sending it again;
    a changed array has another key, the oldest entry is dropped first, the
    entries of a closed client are dropped, and an entry some worker has no copy
    in (it joined later, or its copy was lost) is sent again.
    Values pickling to more than :data:`SCATTER_CACHE_MAX_BYTES` are not kept.
    Each worker holds a key of its own (:func:`_copies`), which dask's active memory
    manager leaves alone (it trims the replicas of one key to one).

    Parameters
    ----------
    client
        A ``distributed.Client``.
    value
        Any picklable value (a stream, a shard's shared inputs).
    workers
        The workers' addresses, if the caller has them (else asked for).

    Returns
    -------
    dict
        ``{worker address: distributed.Future}`` of each worker's copy.
    """
    workers = _workers(client) if workers is None else list(workers)
    head, buffers = _pickled(value)  # no copy of an array's bytes: its size is known and it is hashed in place
    if len(head) + sum(b.nbytes for b in buffers) > SCATTER_CACHE_MAX_BYTES:
        return _copies(client, value, workers)
    key = (str(client.id), _digest(head, buffers))
    with _scatter_lock:
        for stale in [k for k, c in _scattered.items()
                      if getattr(next(iter(c.values())).client, "status", None) != "running"]:
            del _scattered[stale]  # its client is closed: its workers' copies are gone with it
        copies = _scattered.get(key)
        if (copies is not None and set(workers) <= set(copies)
                and all(f.status == "finished" for f in copies.values())):
            _scattered.move_to_end(key)
            return copies
        copies = _copies(client, value, workers)
        _scattered[key] = copies
        while len(_scattered) > SCATTER_CACHE_SIZE:
            # dropped, not released: a caller may still hold these futures for a submit,
            # and dask releases the data once the last reference to it is gone
            _scattered.popitem(last=False)
        return copies


#: Seconds :func:`_copies` waits for a worker when the cluster has none yet.
WORKER_WAIT_S = 60.0


def _copies(client: Any, value: Any, workers: Sequence[str] | None = None) -> dict[str, Any]:
    """``{worker address: future}``: a copy of ``value`` of its own for every worker of ``client``.

    Workers on this host get theirs straight from here, all at once: one hop each
    (a scatter with ``broadcast=True`` goes to the scheduler, then to one worker,
    then from it to the next: on two GPU workers, 12.8 MB, a sweep's phase 1 at
    T = 800,000, took 25–26 ms that way and 12–13 ms this way). Elsewhere the
    client may not reach the workers: the copies go through the scheduler, as they
    do if a direct send fails. A key per worker, not one key replicated: dask's
    active memory manager trims a key's replicas to one when no task waits on it,
    and a task reads its worker's copy only once it needs it.

    Raises
    ------
    EngineUnavailable
        The cluster has no worker within :data:`WORKER_WAIT_S` seconds.
    """
    workers = _workers(client) if workers is None else list(workers)
    if not workers:
        try:
            client.wait_for_workers(1, timeout=WORKER_WAIT_S)
        except (TimeoutError, asyncio.TimeoutError) as exc:
            raise EngineUnavailable(f"the cluster at {client.scheduler.address} has no worker "
                                    f"(waited {WORKER_WAIT_S:g} s)", engine="distributed") from exc
        workers = _workers(client)
    data = [value] * len(workers)  # dask deals them out round robin: one each
    direct = _all_local(workers)
    try:
        futures = client.scatter(data, workers=workers, direct=direct, hash=False)
    except (OSError, TimeoutError, asyncio.TimeoutError):
        if not direct:
            raise
        futures = client.scatter(data, workers=workers, direct=False, hash=False)  # through the scheduler
    where = client.who_has(futures)  # which is whose
    return {addrs[0]: f for f in futures for addrs in [where.get(f.key) or ()] if addrs}


#: Seconds a task waits in :meth:`Later.result` for its client to publish the value.
LATER_TIMEOUT_S = 600.0
#: Seconds a task waits to fetch a published value its own worker holds no copy of.
LATER_FETCH_TIMEOUT_S = 60.0


class Later:
    """A value a client publishes after it has submitted the tasks that need it (see :func:`later`).

    Passed to a task as an argument; :meth:`result`, on the worker, waits until
    the client has published the value and returns it. So a task can start (and
    do what does not need the value) while the client is still computing it.
    """

    def __init__(self, name: str):
        self.name = name

    def result(self, timeout: float = LATER_TIMEOUT_S) -> Any:
        """The published value (this worker's own copy); waits for it.

        Raises
        ------
        EngineUnavailable
            The client stopped before publishing it (or failed), or did not publish it within
            ``timeout`` seconds, or the copy this worker lacks could not be fetched.
        """
        distributed = _require()
        try:
            where = distributed.Variable(self.name).get(timeout=timeout)
        except (TimeoutError, asyncio.TimeoutError) as exc:
            raise EngineUnavailable(f"the client of {self.name} did not publish it within {timeout:g} s",
                                    engine="distributed") from exc
        if where == _FAILED:
            raise EngineUnavailable(f"the client of {self.name} failed; its work was abandoned",
                                    engine="distributed")
        if not where:
            raise EngineUnavailable(f"the client of {self.name} stopped before publishing it",
                                    engine="distributed")
        worker = distributed.get_worker()
        key = where.get(worker.address)
        if key is not None:
            with contextlib.suppress(KeyError):
                return worker.data[key]
        # no copy here (a worker that joined or was restarted since, or was paused): another's
        client = distributed.get_client()
        # bound to this worker's client, as distributed.Variable binds the futures it returns
        futures = [distributed.Future(k, client=client, state="memory")
                   for k in dict.fromkeys([key, *where.values()]) if k is not None]
        held = client.who_has(futures)
        alive = [f for f in futures if held.get(f.key)]
        if not alive:
            raise EngineUnavailable(f"{self.name} was published, but every copy of it is gone",
                                    engine="distributed")
        try:
            return alive[0].result(timeout=LATER_FETCH_TIMEOUT_S)
        except (TimeoutError, asyncio.TimeoutError) as exc:
            raise EngineUnavailable(f"{self.name} was published, but no copy of it could be fetched "
                                    f"within {LATER_FETCH_TIMEOUT_S:g} s", engine="distributed") from exc


#: What a :func:`later` variable holds once its client has failed.
_FAILED = "failed"


@contextlib.contextmanager
def later(client: Any) -> Iterator[tuple[Later, Callable[[Any], None]]]:
    """``(handle, publish)``: tasks given ``handle`` wait in ``handle.result()`` until ``publish(value)`` runs here.

    ``publish`` sends a copy of the value to every worker (:func:`_copies`; not
    hashed and kept as :func:`scatter_shared` does: it is on the critical path, and
    the value is new) and tells the waiting tasks which key is theirs (a
    ``distributed.Variable`` holding ``{worker: key}``). The copies are held here
    until the block exits: the tasks that need them have finished by then. If the
    block exits with an error, published or not, the variable is left saying so
    (not deleted), so that a task still on its way to it raises instead of waiting
    for a value that would never come (or that is gone). If it exits without
    publishing, it says that; published and without an error, the variable is
    deleted (every task then has read it).
    """
    distributed = _require()
    variable = distributed.Variable(f"regime-dash-later-{os.urandom(8).hex()}", client=client)
    held: dict[str, Any] = {}

    def publish(value: Any) -> None:
        held.update(_copies(client, value))
        variable.set({w: f.key for w, f in held.items()})

    try:
        yield Later(variable.name), publish
    except BaseException:
        with contextlib.suppress(Exception):  # the client may be what failed: the error raised is the first
            variable.set(_FAILED)
        raise
    if held:
        variable.delete()
    else:
        variable.set(None)


def submit_shards(fn: Callable[..., Any], shards: Sequence[Any], client: Any, *,
                  shared: Sequence[Any] = ()) -> list[Any]:
    """Submit ``fn(shard, *shared)`` per shard to ``client``'s workers, shard k to worker k (round
    robin); the futures, in shard order.

    Each ``shared`` value reaches every worker once (:func:`scatter_shared`). The
    caller can work while the shards run, then collect them with :func:`gather_shards`.

    Parameters
    ----------
    fn
        The work of one shard, ``fn(shard, *shared)``; it runs on a worker.
    shards
        One item per task, in the order the results are wanted.
    client
        A ``distributed.Client``.
    shared
        Values every shard needs, passed after the shard: each worker's copy of it
        (:func:`scatter_shared`); a ``distributed.Future``, a :class:`Later` or a list
        of them is passed as it is, and ``{worker: future}`` (from
        :func:`scatter_shared` beforehand) as the shard's worker's future.

    Returns
    -------
    list of distributed.Future
        One per shard, in shard order.
    """
    future = _require().Future

    def as_is(v: Any) -> bool:
        return isinstance(v, (future, Later)) or (isinstance(v, list) and bool(v)
                                                    and all(isinstance(x, Later) for x in v))

    workers = _workers(client)
    handles = [v if as_is(v) else scatter_shared(client, v, workers) for v in shared]
    name = getattr(getattr(fn, "func", fn), "__name__", "shard")
    if hasattr(fn, "args"):  # a partial: name it after the function it wraps
        name = getattr(fn.args[0], "__name__", name) if fn.args else name

    def on(worker: str | None, handle: Any) -> Any:  # a worker's own copy (any copy if it has none)
        if not isinstance(handle, dict):
            return handle
        return handle.get(worker) or next(iter(handle.values()))

    # Shard k goes to worker k (round robin): left to itself the scheduler measured placing both
    # shards of a two-GPU sweep on one worker in some calls (its one thread then ran them one
    # after the other: a one-GPU time). Loose, so a shard still runs if its worker is gone.
    out = []
    for k, shard in enumerate(shards):
        worker = workers[k % len(workers)] if workers else None
        out.append(client.submit(fn, shard, *(on(worker, h) for h in handles), pure=False,
                                 key=f"{name}-{k}-{os.urandom(4).hex()}",
                                 workers=[worker] if worker else None, allow_other_workers=True))
    return out


#: Threads fetching shards' results at once (:func:`gather_shards`).
GATHER_THREADS = 32


def gather_shards(futures: Sequence[Any], progress: Progress | None = None,
                  each: Callable[[int, Any], Any] | None = None) -> list[Any]:
    """The results of :func:`submit_shards`' futures, in their order; ``progress(done, total)`` as each lands.

    A shard's exception is raised here (our errors keep their type across processes).

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
    _require()
    out: list[Any] = [None] * len(futures)
    if not futures:
        return out
    client = futures[0].client
    # from this host's workers straight to here (one hop, not through the scheduler), each
    # shard's on a thread of its own, so that results that land together are fetched together
    fetch = functools.partial(client.gather, direct=_all_local(_workers(client)))
    pool = concurrent.futures.ThreadPoolExecutor(min(len(futures), GATHER_THREADS),
                                                 thread_name_prefix="regime-dash-gather")
    try:
        pending = {pool.submit(fetch, fut): k for k, fut in enumerate(futures)}
        for done, landed in enumerate(concurrent.futures.as_completed(pending), start=1):
            k = pending[landed]
            result = landed.result()  # a shard's error is raised here
            out[k] = result if each is None else each(k, result)
            if progress is not None:
                progress(done, len(futures))
    except BaseException:
        # the other shards are cancelled: nothing waits for them, and their fetching threads
        # (which the interpreter joins before it exits) end now, not when the shards would
        with contextlib.suppress(Exception):
            client.cancel([f for f in futures if not f.done()])
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return out


__all__ = ["connect", "local_cluster", "map_shards", "submit_shards", "gather_shards", "scatter_shared",
           "content_key", "shard_bounds", "worker_count", "gpu_count", "local_gpus", "later", "Later"]
