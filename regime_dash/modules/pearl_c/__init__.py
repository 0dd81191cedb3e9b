"""SP4 Pearl C (Layer A): clamp-engagement counting and the rate-deficit EMA as a replayable module.

Kernel ``kernels/pearl_c_engagement_count.cu``: each thread flags the updates it
owns that engage the clamp, the block tree-reduces the flags in shared memory
(no atomics) and its leader writes the block's count at
``engage_buf_offset + blockIdx.x`` (−1 skips the write). Host check (twin in
:mod:`.twin`): rate = Σ counts / n, rate_deficit = rate − 0.01, smoothed by
Pearls A+D with a fold reset. Layer A is observability: ``force_bump`` shows
when Layer B's bump would fire (EMA > 0); nothing is mutated. :func:`coverage` says how each
logged field of a frame is checked.
"""
from __future__ import annotations

from regime_dash.modules.base import ControllerModule
from regime_dash.modules.pearl_c.config import PearlCConfig
from regime_dash.modules.pearl_c.rederive import coverage
from regime_dash.modules.pearl_c.stream import PearlCStream

MODULE = ControllerModule.of_package(__name__, title="Pearl C engagement rate", doc=__doc__, stream_type=PearlCStream,
                                     config_type=PearlCConfig)

__all__ = ["MODULE", "PearlCConfig", "PearlCStream", "coverage"]
