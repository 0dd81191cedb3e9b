"""Launch ``kernels/pearl_c_engagement_count.cu`` through the engine's loader (CuPy imported lazily)."""
from __future__ import annotations

import numpy as np

from regime_dash.modules.base import load_kernels

FILES = ("pearl_c_engagement_count.cu",)
MAX_GRID_Y = 65535


def engagement_count(updates: np.ndarray, clamp, blocks: int, block: int, buf_len: int,
                     engage_buf_offset: int) -> np.ndarray:
    """Counts of every step (grid ``blocks × steps``, in chunks of 65535 steps); the int32 buffer of ``buf_len``."""
    from regime_dash.engine.loader import cupy_module

    cp = cupy_module()
    updates = np.ascontiguousarray(np.atleast_2d(updates), dtype=np.float32)
    buf = cp.zeros(buf_len, dtype=cp.int32)
    kernel = load_kernels(FILES, ())["pearl_c_engagement_count"]
    for s0 in range(0, updates.shape[0], MAX_GRID_Y):  # gridDim.y is at most 65535
        chunk = updates[s0:s0 + MAX_GRID_Y]
        offset = engage_buf_offset if engage_buf_offset < 0 else engage_buf_offset + s0 * blocks
        kernel((blocks, chunk.shape[0]), (block,),
               (cp.asarray(chunk), np.int32(chunk.shape[1]), np.float32(clamp), buf, np.int32(offset)),
               shared_mem=block * 4)
    return cp.asnumpy(buf)
