"""The compiles a person should not wait for, started in the background, and what a terminal is told of them.

:func:`start_warmup` starts the fast engine's compile (:func:`regime_dash.engine.warm.start_fast_compile`,
a child process for a cold one) and the re-derivation loop's (:func:`warm_rederivation`) once per
process: the dashboard calls it when it opens. :func:`announced` says so on a terminal when a command
is about to compile the fast engine itself.
"""
from __future__ import annotations

import contextlib
import threading
from typing import IO, Any


def start_warmup() -> None:
    """Start the fast engine's compile in the background; a no-op once started (replays use the reference
    engine until it is ready)."""
    from regime_dash.engine import warm

    warm.start_fast_compile()


def compile_rederivation() -> None:
    """Compile (or load from numba's disk cache) the re-derivation loop: one short verdict's work."""
    from regime_dash.analysis.rederive import rederive
    from regime_dash.engine import replay
    from regime_dash.sources import scenarios

    rederive(replay(scenarios.make("tail_shock", steps=20, accounts=4), engine="reference", log_inputs=True),
             compiled=True)


def _compile_in_child() -> None:
    """Run :func:`compile_rederivation` in a niced child process, which fills numba's disk cache.

    A cold compile is seconds of Python-heavy work; in the dashboard's process it would hold the GIL
    while the first page is drawn. The child's failure (a read-only cache, say) only means the load
    in this process compiles instead; it is not an error of its own.
    """
    import os
    import subprocess
    import sys
    from pathlib import Path

    nice = (lambda: os.nice(10)) if hasattr(os, "nice") else None
    subprocess.run([sys.executable, "-m", "regime_dash.usecases.warmup"], capture_output=True,
                   cwd=str(Path(__file__).resolve().parents[2]), preexec_fn=nice, check=False)


def warm_rederivation(in_child: bool = True) -> dict[str, Any]:
    """Load the compiled re-derivation loop on a background thread.

    A verdict of a long run loads it anyway; a short run's verdict runs the loop as Python, and so
    would each click on one of its failures (a provenance re-derives up to its step and replays its
    window), several times slower than compiled. Numba loads the loop from its disk cache in about
    a second; a checkout's first compile runs in a niced child process first (``in_child``), so this
    process only loads what the child cached. A click before it is ready runs as Python.
    Returns ``{"thread", "error"}`` (``error``: why the load failed, else ``None``; the dict is filled
    in when the thread ends). The caller keeps it, once per process.
    """
    from regime_dash.engine.jit import HAVE_NUMBA

    out: dict[str, Any] = {"thread": None, "error": None if HAVE_NUMBA else "numba is not installed"}

    def load() -> None:
        # the imports inside: a Ctrl-C that stops the main thread mid-import leaves a module half made, and
        # this thread's import of it then fails; a warm-up that fails says so in ``error``, never a traceback
        try:
            if in_child:
                _compile_in_child()
            compile_rederivation()
        except Exception as exc:  # noqa: BLE001 - a failed warm-up only leaves clicks on the Python loop
            out["error"] = f"{type(exc).__name__}: {exc}"

    if HAVE_NUMBA:
        out["thread"] = threading.Thread(target=load, name="regime-dash-rederive-warm", daemon=True)
        out["thread"].start()
    return out


def announced(engine: str, notices: IO[str] | None, kernels: tuple[str, ...] | None = None
              ) -> contextlib.AbstractContextManager:
    """Around work on ``engine``: :func:`regime_dash.engine.warm.announced` on ``notices`` (a compile said
    before it runs and while it does); nothing where there is no one to tell (``notices`` None)."""
    if notices is None:
        return contextlib.nullcontext()
    from regime_dash.engine import warm

    return warm.announced(engine, notices, kernels=kernels or warm.REPLAY_KERNELS)


def engine_now(requested: str, steps: int) -> str:
    """The engine a replay of ``steps`` steps runs on now (:func:`regime_dash.engine.warm.choose_engine`:
    ``auto`` is ``fast`` once compiled, else the reference when it answers sooner than the compile)."""
    from regime_dash.engine import warm

    return warm.choose_engine(requested, steps)


def fallback_notice(requested: str, engine: str, steps: int) -> str | None:
    """What to tell a person whose ``auto`` replay runs on the reference while the fast engine is not
    compiled yet; None otherwise."""
    from regime_dash.engine import warm

    if requested != "auto" or engine != "reference" or not warm.fast_needs_compile():
        return None
    return (f"the fast engine is not compiled yet (about {warm.estimate_s(False):.0f} s); replaying "
            f"{steps:,} steps on the reference engine instead (--engine fast compiles it)")


__all__ = ["announced", "compile_rederivation", "engine_now", "fallback_notice", "start_warmup",
           "warm_rederivation"]

if __name__ == "__main__":  # the child of :func:`_compile_in_child`
    compile_rederivation()
