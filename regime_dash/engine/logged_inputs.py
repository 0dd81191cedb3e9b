"""The inputs a replay logs beside its diag (``log_inputs``): what a diag does not carry, so every
output can be re-derived from the file (:data:`regime_dash.diag.catalogue.INPUT_COLUMNS`)."""
from __future__ import annotations

import numpy as np

from regime_dash.core.streams import Stream
from regime_dash.diag import catalogue as diag


def input_columns(stream: Stream, sums: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The :data:`regime_dash.diag.catalogue.INPUT_COLUMNS` of ``stream``: its edge and τ inputs, and each step's
    (Σr, Σr², max|r|) in rl_popart_normalize's reduction order (:func:`.reference.block_reduce_stats`)."""
    sums = step_sums(stream) if sums is None else sums
    values = (stream.kelly_analytic, stream.tau_action, sums[:, 0], sums[:, 1], sums[:, 2])
    return {col: np.asarray(v, dtype=np.float32) for col, v in zip(diag.INPUT_COLUMNS.values(), values)}


def step_sums(stream: Stream) -> np.ndarray:
    """float32 [T, 3]: each step's (Σr, Σr², max|r|) in rl_popart_normalize's reduction order
    (:func:`.reference.block_reduce_stats`): the fast engine's phase-1 kernel where numba is
    installed (the same bits), else that NumPy function over blocks of steps."""
    from regime_dash.engine.jit import HAVE_NUMBA

    if HAVE_NUMBA:
        from regime_dash.engine import fast

        return fast.step_stats(stream).sums
    from regime_dash.engine.reference import block_reduce_stats

    t_steps = stream.rewards.shape[0]
    sums = np.empty((t_steps, 3), dtype=np.float32)
    chunk = max(1, (1 << 22) // max(1, stream.rewards.shape[1]))  # ~16 MB of rewards at a time
    for a in range(0, t_steps, chunk):
        s, q, m = block_reduce_stats(np.asarray(stream.rewards[a:a + chunk], dtype=np.float32))
        sums[a:a + chunk, 0], sums[a:a + chunk, 1], sums[a:a + chunk, 2] = s, q, m
    return sums


__all__ = ["input_columns", "step_sums"]
