"""One single replay of the bench stream through ``fast_gpu.run``, for Nsight Compute.

::

    ncu --clock-control none -k regex:replay_scan_warp --launch-skip 1 --launch-count 1 \\
        python3 scripts/profile_scan_warp.py [--steps T] [--accounts B] [--option -DSCAN_WARP_SPLIT=0]

A 64-step replay runs first (the warm-up: its ``replay_scan_warp`` is launch 0,
hence ``--launch-skip 1``), then the whole stream once. ``--option`` adds an
NVRTC option to the engine's (e.g. a mode of replay_scan.cu), so two builds of
the kernel can be profiled on the same stream.
"""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from regime_dash.benchmarks import engines
    from regime_dash.core.config import RegimeConfig
    from regime_dash.engine import fast_gpu, initial_isv, loader, snapshot_indices
    from regime_dash.core.slots import DEFAULT_LAYOUT

    p = argparse.ArgumentParser(description=__doc__.split("::")[0].strip())
    p.add_argument("--steps", type=int, default=engines.DEFAULT_STEPS)
    p.add_argument("--accounts", type=int, default=engines.DEFAULT_ACCOUNTS)
    p.add_argument("--option", action="append", default=[], metavar="OPT",
                   help="an extra NVRTC option (repeatable)")
    args = p.parse_args(argv)

    layout = DEFAULT_LAYOUT
    stream = engines.bench_stream(args.steps, args.accounts)
    isv0, boot = initial_isv(RegimeConfig(), None, layout)
    snap_idx = snapshot_indices(layout)
    options = (*loader.PARITY_OPTIONS, *args.option)
    fast_gpu.run(stream.slice(0, min(args.steps, 64)), isv0, boot, layout, snap_idx, options=options)
    fast_gpu.run(stream, isv0, boot, layout, snap_idx, options=options)
    return 0


if __name__ == "__main__":
    sys.exit(main())
