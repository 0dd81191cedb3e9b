"""The fast CPU engine's compile, off the critical path.

The ``fast`` engine on the CPU runs numba functions. Compiled once, they are
cached on disk (``cache=True``) and load in seconds; the very first compile of
a checkout takes minutes on a small machine. Nobody should wait for it: the
dashboard calls :func:`start_fast_compile` when it opens, replays on the
reference engine (exact, and quick for the streams a page opens with) while the
compile runs, and moves to ``fast`` once :func:`compile_state` says ``ready``.

Whether a compile is *cold* is read from numba's own cache index, not guessed:
:func:`cache_is_fresh` asks each compiled function's cache whether it holds an
entry for the current source, closure and machine (what numba itself checks
before it loads one).

A cold compile runs in a child process, so its minutes of Python-heavy work do
not hold this process's GIL while pages are being served; the child fills the
disk cache and this process then loads from it. Where the cache cannot be
written (a read-only install), the compile runs in this process's thread.

No streamlit here: the UI and the CLI read :func:`compile_state` and show it.
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any, Iterator

#: Seconds per step of the reference engine at the presets' 128 accounts, measured on
#: the 2-core development machine (25,000 steps in 3.5 s); used only to decide whether
#: answering on the reference beats waiting for the compile.
REFERENCE_S_PER_STEP = 1.4e-4
#: Estimates before anything was measured here: the 2-core development machine at load
#: average 7 compiled in 31–45 s and loaded the cache in about a second.
DEFAULT_ESTIMATES = {"cold_s": 45.0, "cached_s": 2.0}
#: The compiled functions one replay runs, and one sweep (names in ``fast._kernels()``).
REPLAY_KERNELS = ("phase1", "scan", "normalize")
SWEEP_KERNELS = ("phase1", "sweep")
#: Where measured compile times are kept: beside numba's cache of the fast engine.
TIMINGS = Path(__file__).resolve().parent / "__pycache__" / "fast_compile_times.json"
#: The steps and accounts of the stream the compile runs on (every argument type of a real replay).
_WARM_STEPS, _WARM_ACCOUNTS = 64, 8

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {"state": "cold", "started": None, "finished": None, "error": None, "cached": None}


# ---- the compile itself --------------------------------------------------------------
def _tiny_stream():
    import numpy as np

    from regime_dash.streams import Stream

    rng = np.random.default_rng(0)
    shape = (_WARM_STEPS, _WARM_ACCOUNTS)
    return Stream.make(rewards=rng.normal(size=shape), lots=rng.integers(0, 3, size=shape),
                       kelly_analytic=np.full(_WARM_STEPS, 0.2), session_pnl_worst=-rng.random(_WARM_STEPS))


def compile_kernels() -> None:
    """Compile (or load from the disk cache) every numba function of the fast CPU engine.

    Runs a tiny replay and a tiny two-config sweep on the CPU path, so each
    function is specialized on the argument types a real replay and sweep pass.
    """
    import numpy as np

    from regime_dash.config import RegimeConfig
    from regime_dash.engine import fast, initial_isv, snapshot_indices
    from regime_dash.slots import DEFAULT_LAYOUT

    stream = _tiny_stream()
    layout = DEFAULT_LAYOUT.validate()
    isv0, boot = initial_isv(RegimeConfig(), None, layout)
    fast.run_cpu(stream, isv0, boot, layout, snapshot_indices(layout))
    fast.sweep_cpu(stream, np.stack([isv0, isv0]), np.stack([boot, boot]), layout, keep=[0])


def _dispatchers(names: tuple[str, ...] | None = None) -> list:
    from regime_dash.engine import fast

    kernels = fast._kernels()
    picked = {n: k for n, k in kernels.items() if names is None or n in names} or kernels
    return [k for k in picked.values() if hasattr(k, "_cache")]


def cache_is_fresh(names: tuple[str, ...] | None = None) -> bool:
    """True when the fast engine's numba functions (those in ``names``; all when None) have a
    disk-cache entry each that numba can load now.

    An entry counts only if numba would use it: written by this numba version,
    for the source file as it is now (its stamp), and with the same bytecode,
    closure and machine (the index key numba computes before loading).
    """
    try:
        dispatchers = _dispatchers(names)
    except Exception:  # noqa: BLE001 - no numba, or the engine cannot build: nothing is cached
        return False
    if not dispatchers:
        return False
    for d in dispatchers:
        cache = d._cache
        index = getattr(cache, "_cache_file", None)
        if index is None:
            return False  # caching disabled (read-only install): every process compiles
        overloads = index._load_index()
        codegen = d.targetctx.codegen()
        if not any(cache._index_key(key[0], codegen) == key for key in overloads):
            return False
    return True


def _load_timings() -> dict[str, float]:
    try:
        return {**DEFAULT_ESTIMATES, **json.loads(TIMINGS.read_text())}
    except (OSError, ValueError):
        return dict(DEFAULT_ESTIMATES)


def _save_timing(kind: str, seconds: float) -> None:
    times = _load_timings()
    times[kind] = round(seconds, 1)
    try:
        TIMINGS.parent.mkdir(exist_ok=True)
        TIMINGS.write_text(json.dumps(times))
    except OSError:
        pass  # a read-only install keeps the default estimates


def estimate_s(cached: bool | None = None) -> float:
    """Seconds the compile is expected to take: the last one measured here, else a default.

    ``cached`` says whether the disk cache is fresh (looked up when None).
    """
    cached = cache_is_fresh() if cached is None else cached
    return _load_timings()["cached_s" if cached else "cold_s"]


def _child_compile() -> str | None:
    """Compile in a child process (fills the disk cache); None on success, else why it failed."""
    # niced: on a small machine the pages being served get the CPU first, the compile what is left
    nice = (lambda: os.nice(10)) if hasattr(os, "nice") else None
    proc = subprocess.run([sys.executable, "-m", "regime_dash.engine.warm"], capture_output=True, text=True,
                          cwd=str(Path(__file__).resolve().parents[2]), preexec_fn=nice)
    if proc.returncode == 0:
        return None
    lines = (proc.stderr or proc.stdout or "").strip().splitlines()
    return lines[-1] if lines else f"exit code {proc.returncode}"


def _worker() -> None:
    t0 = time.monotonic()
    try:
        cached = cache_is_fresh()
        with _LOCK:
            _STATE["cached"] = cached
        if not cached and _writable_cache():
            why = _child_compile()
            if why is not None:
                raise RuntimeError(f"the compile process failed: {why}")
        compile_kernels()  # loads what the child cached; compiles here if it could not cache
        seconds = time.monotonic() - t0
        _save_timing("cached_s" if cached else "cold_s", seconds)
        with _LOCK:
            _STATE.update(state="ready", finished=time.monotonic())
    except Exception as exc:  # noqa: BLE001 - shown to the user as the reason fast is not used
        with _LOCK:
            _STATE.update(state="failed", finished=time.monotonic(), error=f"{type(exc).__name__}: {exc}")


def _writable_cache() -> bool:
    try:
        return all(getattr(d._cache, "_cache_file", None) is not None for d in _dispatchers())
    except Exception:  # noqa: BLE001
        return False


# ---- the public API -------------------------------------------------------------------
def start_fast_compile() -> None:
    """Start compiling the fast CPU engine in the background; a no-op once started.

    A daemon thread does the work (a child process for a cold compile), so
    the caller returns at once and the process can exit while it runs.
    """
    with _LOCK:
        if _STATE["state"] in ("compiling", "ready"):
            return
        _STATE.update(state="compiling", started=time.monotonic(), finished=None, error=None, cached=None)
    threading.Thread(target=_worker, name="regime-dash-fast-compile", daemon=True).start()


def compile_state() -> dict[str, Any]:
    """Where the background compile stands.

    Returns
    -------
    dict
        ``state``: ``"cold"`` (not started), ``"compiling"``, ``"ready"`` or
        ``"failed"``; ``elapsed_s`` since it started (its duration once done);
        ``estimate_s``, the expected total; ``cached``, whether it loads from a
        fresh disk cache (None until known); ``error``, why it failed.
    """
    with _LOCK:
        s = dict(_STATE)
    end = s["finished"] if s["finished"] is not None else time.monotonic()
    elapsed = 0.0 if s["started"] is None else end - s["started"]
    times = _load_timings()
    estimate = times["cached_s"] if s["cached"] else times["cold_s"]
    return {"state": s["state"], "elapsed_s": elapsed, "estimate_s": estimate, "cached": s["cached"],
            "error": s["error"]}


def fast_needs_compile(device: str = "auto") -> bool:
    """Whether a replay on ``fast`` here would compile numba functions first (CPU path, nothing loaded yet)."""
    from regime_dash.engine import fast

    if compile_state()["state"] == "ready":
        return False
    try:
        if fast.use_gpu(device):
            return False
    except Exception:  # noqa: BLE001 - a GPU that cannot run: the CPU path then
        pass
    return not _loaded_in_process()


def _loaded_in_process() -> bool:
    from regime_dash.engine import fast

    return fast._KERNELS is not None and all(getattr(d, "signatures", None) for d in fast._KERNELS.values())


def choose_engine(requested: str, steps: int, kernels: tuple[str, ...] = REPLAY_KERNELS) -> str:
    """The engine a replay of ``steps`` steps should run on now.

    ``auto`` is ``fast`` when it needs no compile (compiled in this process, or
    on a GPU); otherwise ``reference`` when replaying on it is expected to take
    less than the rest of the compile, else ``fast`` (the caller then waits for
    the compile, and says so). ``kernels`` names the compiled functions the
    work needs (a replay's or a sweep's). Any other name is returned as it is.
    """
    if requested != "auto":
        return requested
    from regime_dash.engine import engine_status

    status = engine_status()
    if status.get("fast") is not None:
        return "cuda" if status.get("cuda") is None else "reference"
    if not fast_needs_compile():
        return "fast"
    s = compile_state()
    if s["state"] == "failed":
        return "reference"
    if s["state"] == "compiling":
        remaining = max(s["estimate_s"] - s["elapsed_s"], 0.0)
    elif cache_is_fresh(kernels):  # not started here (the CLI): a fresh disk cache loads in about a second
        return "fast"
    else:
        remaining = estimate_s(False)
    return "reference" if steps * REFERENCE_S_PER_STEP < remaining else "fast"


@contextlib.contextmanager
def announced(engine: str, out: IO[str] | None = None, every_s: float = 15.0,
              kernels: tuple[str, ...] = REPLAY_KERNELS) -> Iterator[None]:
    """Around a replay on ``engine``: if it will compile the fast engine, say so first and while it runs.

    Prints ``compiling the fast engine once (about N s)`` to ``out`` (stderr by
    default) before a compile the disk cache cannot spare, then a line every
    ``every_s`` seconds until the block ends, so a terminal never waits in silence.
    ``kernels`` names the compiled functions the block runs.
    """
    out = sys.stderr if out is None else out
    if engine != "fast" or not fast_needs_compile() or cache_is_fresh(kernels):
        yield
        return
    print(f"compiling the fast engine once (about {estimate_s(False):.0f} s; later runs load it from the "
          "cache; --engine reference skips it)", file=out, flush=True)
    done = threading.Event()
    t0 = time.monotonic()

    def tick() -> None:
        while not done.wait(every_s):
            print(f"  still compiling… {time.monotonic() - t0:.0f} s", file=out, flush=True)

    threading.Thread(target=tick, daemon=True).start()
    try:
        yield
    finally:
        done.set()
        if _loaded_in_process():
            _save_timing("cold_s", time.monotonic() - t0)


if __name__ == "__main__":  # the child process of a cold compile
    compile_kernels()
