"""A scenario's stream generated on a thread while the caller loads the engine and, on the
fast CPU engine, computes the replay's phase 1 of each block of steps as it is made (``replay --scenario``).

The scripted market's compiled loop releases the GIL, so on two cores the imports the replay
needs and phase 1 (a reduction per step, :func:`regime_dash.engine.fast.step_stats_blocks`)
run beside it instead of after it. The stream and phase 1 are those of ``scenarios.make`` and
``fast.step_stats``, bit for bit.
"""
from __future__ import annotations

import queue
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Iterator


def generated(name: str, engine: str, **size: Any) -> tuple[Any, Any]:
    """``(stream, phase 1 or None)`` of preset ``name`` (``size``: seed, steps, accounts), phase 1
    where the replay will run the fast engine on the CPU with its kernels already compiled
    (a compile is announced by the replay itself, never run silently here). The phase 1 is what
    :func:`regime_dash.engine.prepared.prepare` takes as ``stats=``."""
    from regime_dash.sources import market_jit
    from regime_dash.sources import scenarios

    market_jit.load()  # loading takes the GIL; the run on the thread then leaves it to this one
    made: queue.SimpleQueue = queue.SimpleQueue()

    def generate():
        try:
            return scenarios.make(name, on_block=lambda *block: made.put(block), **size)
        finally:
            made.put(None)

    with ThreadPoolExecutor(1, thread_name_prefix="scenario") as pool:
        stream = pool.submit(generate)
        import pandas  # noqa: F401 - loaded while the market runs
        from regime_dash.engine import fast, prepared  # noqa: F401

        stats = _phase_one(made, stream) if _phase_one_here(engine) else None
        return stream.result(), stats


def _phase_one_here(engine: str) -> bool:
    from regime_dash.engine import fast, warm

    return (engine in ("fast", "auto") and fast.HAVE_NUMBA and not fast.use_gpu("auto")
            and warm.cache_is_fresh(warm.REPLAY_KERNELS))


def _phase_one(made: queue.SimpleQueue, stream: Future):
    """Phase 1 of the blocks as the thread tells them; the thread's own error first, if it failed."""
    from regime_dash.engine import fast

    first = made.get()
    if first is None:
        stream.result()
        return None

    def blocks() -> Iterator[tuple[int, Any, Any]]:
        block = first
        while block is not None:
            lo, hi, rewards, lots = block
            yield lo, rewards[lo:hi], lots[lo:hi]
            block = made.get()
        stream.result()

    return fast.step_stats_blocks(blocks(), len(first[2]))


__all__ = ["generated"]
