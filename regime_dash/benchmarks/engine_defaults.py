"""The default sizes of ``bench engines`` (and of ``bench`` without a target): light, so the ``bench``
command's own options read them without loading the benchmark (numpy and the engines) first."""
from __future__ import annotations

DEFAULT_STEPS = 25_000
DEFAULT_ACCOUNTS = 1_024
DEFAULT_SWEEP_SIZES = (1, 1_024, 16_384)
#: Sweep sizes on the GPU (the throughput target is at S = 65,536).
DEFAULT_GPU_SWEEP_SIZES = (1_024, 16_384, 65_536)
#: The sweep size of the one-GPU vs two-GPU scale-out rows.
DEFAULT_SCALE_OUT_SIZE = 262_144
#: Accounts of the live stepper rows.
DEFAULT_LIVE_ACCOUNTS = (1_024, 64)
#: Steps timed per live row.
DEFAULT_LIVE_STEPS = 2_000

__all__ = ["DEFAULT_ACCOUNTS", "DEFAULT_GPU_SWEEP_SIZES", "DEFAULT_LIVE_ACCOUNTS", "DEFAULT_LIVE_STEPS",
           "DEFAULT_SCALE_OUT_SIZE", "DEFAULT_STEPS", "DEFAULT_SWEEP_SIZES"]
