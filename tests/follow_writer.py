"""A trainer stand-in for the follow tests: writes diag lines to a file as a real job would.

``python tests/follow_writer.py SRC DST --from A --to B [--rate N] [--partial] [--rotate] [--truncate]``
appends lines A..B-1 of SRC to DST (opened for append, each line flushed), ``--rate`` lines a
second. ``--partial`` leaves the last line without its newline until ``--partial-wait`` seconds
pass, then finishes it. ``--rotate`` first renames DST to DST.1 (the writer starts a new file),
``--truncate`` first truncates DST. ``--bad-at K`` writes line K with its dead-zone flag at 0.5
(a planted failure).
"""
from __future__ import annotations

import argparse
import json
import os
import time


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--from", dest="a", type=int, default=0)
    p.add_argument("--to", dest="b", type=int, default=None)
    p.add_argument("--rate", type=float, default=0.0)
    p.add_argument("--partial", action="store_true")
    p.add_argument("--partial-wait", type=float, default=1.0)
    p.add_argument("--rotate", action="store_true")
    p.add_argument("--truncate", action="store_true")
    p.add_argument("--bad-at", type=int, action="append", default=[])
    p.add_argument("--step-offset", type=int, default=0)
    args = p.parse_args()
    lines = open(args.src, "rb").read().splitlines()[args.a:args.b]
    if args.rotate and os.path.exists(args.dst):
        os.replace(args.dst, args.dst + ".1")
    mode = "wb" if args.truncate else "ab"
    with open(args.dst, mode, buffering=0) as fh:
        for i, raw in enumerate(lines, start=args.a):
            if i in args.bad_at or args.step_offset:
                obj = json.loads(raw)
                if i in args.bad_at:
                    obj["risk_stack"]["regime"]["dead_zone"]["flag"] = 0.5
                obj["step"] += args.step_offset
                raw = json.dumps(obj).encode()
            last = i == args.a + len(lines) - 1
            if last and args.partial:
                half = len(raw) // 2
                fh.write(raw[:half])
                time.sleep(args.partial_wait)  # a line half written for a while: what the follower is tested on
                fh.write(raw[half:] + b"\n")
            else:
                fh.write(raw + b"\n")
            if args.rate:
                time.sleep(1.0 / args.rate)  # the writer's pace: a job writing as it runs


if __name__ == "__main__":
    main()
