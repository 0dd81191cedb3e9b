"""SP4 Pearl C (Layer A): clamp-engagement counting and the rate-deficit EMA as a replayable module.

Kernel ``kernels/pearl_c_engagement_count.cu``: each thread flags the updates it
owns that engage the clamp, the block tree-reduces the flags in shared memory
(no atomics) and its leader writes the block's count at
``engage_buf_offset + blockIdx.x`` (−1 skips the write). Host check (twin in
:mod:`.twin`): rate = Σ counts / n, rate_deficit = rate − 0.01, smoothed by
Pearls A+D with a fold reset. Layer A is observability: ``force_bump`` shows
when Layer B's bump would fire (EMA > 0); nothing is mutated.
"""
from __future__ import annotations

from regime_dash.modules.base import ControllerModule
from regime_dash.modules.pearl_c.config import PearlCConfig
from regime_dash.modules.pearl_c.cuda import FILES
from regime_dash.modules.pearl_c.demo import demo_stream
from regime_dash.modules.pearl_c.figures import figures
from regime_dash.modules.pearl_c.invariants import CHECK_COLUMNS, CHECK_IDS, invariants, summary
from regime_dash.modules.pearl_c.replay import COLUMNS, run
from regime_dash.modules.pearl_c.stream import PearlCStream

MODULE = ControllerModule(
    name="pearl_c",
    title="Pearl C engagement rate",
    doc=__doc__,
    kernels=FILES,
    stream_type=PearlCStream,
    config_type=PearlCConfig,
    slots=(),
    columns=COLUMNS,
    check_columns=CHECK_COLUMNS,
    replay_fn=run,
    invariants_fn=invariants,
    figures_fn=figures,
    demo_stream_fn=demo_stream,
    summary_fn=summary,
    check_ids=CHECK_IDS,
)

__all__ = ["MODULE", "PearlCConfig", "PearlCStream"]
