"""The fast CPU engine's compile, off the critical path.

The ``fast`` engine on the CPU runs numba functions. Compiled once, they are
cached on disk (``cache=True``) and load in seconds; the very first compile of
a checkout takes minutes on a small machine. Nobody should wait for it: the
dashboard calls :func:`start_fast_compile` when it opens, replays on the
reference engine (exact, and quick for the streams a page opens with) while the
compile runs, and moves to ``fast`` once :func:`compile_state` says ``ready``.

Whether a compile is *cold* is read from numba's own cache index, not guessed:
:func:`cache_is_fresh` asks (through ``fast.cpu_cache_warm``) each kernel's
cache whether it holds an entry for the current source, closure and machine
(what numba itself checks before it loads one).

A cold compile runs in a child process, so its minutes of Python-heavy work do
not hold this process's GIL while pages are being served; the child fills the
disk cache and this process then loads from it. Where the cache cannot be
written (a read-only install), the child's work is lost and the compile runs
again in this process's thread.

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
#: average 5 compiled a replay's and a sweep's kernels in 7.6 s and loaded them from the
#: cache in 0.7 s; the estimates leave some room for a busier machine.
DEFAULT_ESTIMATES = {"cold_s": 10.0, "cached_s": 1.0}
#: What one replay runs, and one sweep: entries of ``fast.ENTRIES`` (each names its kernels).
REPLAY_KERNELS = ("replay",)
SWEEP_KERNELS = ("sweep",)
ALL_KERNELS = REPLAY_KERNELS + SWEEP_KERNELS
#: Where measured compile times are kept: beside numba's cache of the fast engine.
TIMINGS = Path(__file__).resolve().parent / "__pycache__" / "fast_compile_times.json"

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {"state": "cold", "started": None, "finished": None, "error": None, "cached": None}


# ---- the compile itself --------------------------------------------------------------
def compile_kernels() -> None:
    """Compile (or load from the disk cache) every numba kernel of the fast CPU engine (a replay's and a
    sweep's) and the re-derivation loop every check of a long run uses."""
    from regime_dash.engine import fast, rederive

    for entry in ALL_KERNELS:
        fast.compile_cpu(entry)
    rederive.warm()


def cache_is_fresh(names: tuple[str, ...] | None = None) -> bool:
    """True when the fast engine's kernels for the entries ``names`` (all when None) need no
    compile: built in this process, or held by numba's disk cache for the current sources.

    This reads numba's own cache index (see ``fast.cpu_cache_warm``): an entry counts
    only if numba would load it, for this numba version, source, closure and machine.
    """
    from regime_dash.engine import fast

    try:
        return all(fast.cpu_cache_warm(e) for e in (names or ALL_KERNELS))
    except Exception:  # noqa: BLE001 - no numba, or the engine cannot build: nothing is cached
        return False


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
        if not cached:
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


def _loaded_in_process(entries: tuple[str, ...] = REPLAY_KERNELS) -> bool:
    """Whether this process holds the compiled kernels of ``entries`` (nothing left to load)."""
    from regime_dash.engine import fast

    return all(fast.built_here(e) for e in entries)


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
    from regime_dash.engine.backends import engine_status

    status = engine_status()
    if status.get("fast") is not None:
        return "cuda" if status.get("cuda") is None else "reference"
    if not fast_needs_compile():
        return "fast"
    s = compile_state()
    if s["state"] == "failed":
        return "reference"
    if s["state"] == "compiling":
        # a compile past its estimate (a busier machine than the one it was measured on) has an unknown
        # rest: take it as long again, not as nearly done, or every replay would wait for it
        overran = s["elapsed_s"] >= s["estimate_s"]
        remaining = s["estimate_s"] if overran else s["estimate_s"] - s["elapsed_s"]
    elif cache_is_fresh(kernels):  # not started here (the CLI): a fresh disk cache loads in about a second
        return "fast"
    else:
        remaining = estimate_s(False)
    return "reference" if steps * REFERENCE_S_PER_STEP < remaining else "fast"


@contextlib.contextmanager
def still_compiling(out: IO[str], every_s: float, *, after_s: float = 0.0,
                    first: str | None = None) -> Iterator[None]:
    """Around a block that may compile: after ``after_s``, ``first`` (when given) on ``out``, then
    ``still compiling… N s`` every ``every_s`` until the block ends (a thread; nothing when it ends sooner)."""
    done, t0 = threading.Event(), time.monotonic()

    def tick() -> None:
        if first is not None:
            if done.wait(after_s):
                return
            print(first, file=out, flush=True)
        while not done.wait(every_s):
            print(f"  still compiling… {time.monotonic() - t0:.0f} s", file=out, flush=True)

    threading.Thread(target=tick, daemon=True).start()
    try:
        yield
    finally:
        done.set()


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
    t0 = time.monotonic()
    try:
        with still_compiling(out, every_s):
            yield
    finally:
        if _loaded_in_process():
            _save_timing("cold_s", time.monotonic() - t0)


if __name__ == "__main__":  # the child process of a cold compile
    compile_kernels()
