"""Launch ``kernels/pearl_c_engagement_count.cu`` through the engine's loader (CuPy imported lazily)."""
from __future__ import annotations

import numpy as np

from regime_dash.modules.base import load_kernels

FILES = ("pearl_c_engagement_count.cu",)


def engagement_count(updates: np.ndarray, clamp, blocks: int, block: int, buf_len: int,
                     engage_buf_offset: int) -> np.ndarray:
    """Counts of every step in one launch (grid ``blocks × steps``); returns the int32 buffer of ``buf_len``."""
    from regime_dash.engine.loader import cupy_module

    cp = cupy_module()
    updates = np.ascontiguousarray(np.atleast_2d(updates), dtype=np.float32)
    buf = cp.zeros(buf_len, dtype=cp.int32)
    load_kernels(FILES, ())["pearl_c_engagement_count"](
        (blocks, updates.shape[0]), (block,),
        (cp.asarray(updates), np.int32(updates.shape[1]), np.float32(clamp), buf, np.int32(engage_buf_offset)),
        shared_mem=block * 4)
    return cp.asnumpy(buf)
