"""``python -m regime_dash replay``: replay a stream, a preset or a live run, write the diag.

::

    python -m regime_dash replay (--scenario NAME | --stream FILE | --simulate NAME)
        [--steps T] [--accounts B] [--seed S] [--engine reference|cuda|fast|auto]
        [--set FIELD=VALUE ...] --out FILE
    python -m regime_dash replay (--scenario NAME | --stream FILE | --simulate NAME) --live
        [--tick N] [--interval SECONDS] [--change STEP:FIELD=VALUE ...] [--inject STEP:KIND ...]

``--out x.jsonl`` writes a diag.jsonl in the cluster's format (one nested
object per step), which ``ingest`` takes like any cluster file; ``--out
x.parquet`` writes the frame. ``--set`` takes :class:`~regime_dash.RegimeConfig`
fields (``--set resurrection=false --set max_duration=500``). ``--live`` plays the
source step by step with a status line per tick (:mod:`regime_dash.cli.replay_live`).
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from regime_dash.cli import help_of
from regime_dash.cli import replay_live
from regime_dash.cli.frame_out import check_out, write
from regime_dash.errors import ValidationError

if TYPE_CHECKING:  # the annotation only: pandas loads with the replay
    import pandas as pd


def register(subparsers) -> None:
    from regime_dash.scenarios import SCENARIOS
    from regime_dash.simulator import PRESETS

    p = subparsers.add_parser(
        "replay", help=help_of("replay"),
        description=__doc__.split("\n", 1)[1].replace("::\n", "").strip(),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--scenario", choices=sorted(SCENARIOS), help="open-loop synthetic preset")
    src.add_argument("--stream", metavar="FILE", help="a recorded stream (.npz or .parquet)")
    src.add_argument("--simulate", choices=sorted(PRESETS), help="closed-loop live-run preset")
    p.add_argument("--steps", type=int, help="steps (default: the preset's, or the whole stream)")
    p.add_argument("--accounts", type=int, help="accounts b (default: the preset's, or the whole stream)")
    p.add_argument("--seed", type=int, default=0, help="RNG seed of a preset or live run (default 0)")
    p.add_argument("--engine", default="auto", choices=("reference", "cuda", "fast", "auto"),
                   help="replay engine (default auto: fast once compiled, else the reference when it "
                        "answers sooner than the compile; cuda, reference for --simulate)")
    p.add_argument("--set", dest="settings", action="append", default=[], metavar="FIELD=VALUE",
                   help="RegimeConfig field, repeatable (e.g. resurrection=false, max_duration=500)")
    p.add_argument("--out", metavar="FILE", help="output: .jsonl (diag) or .parquet (frame); "
                   "required unless --live")
    replay_live.add_arguments(p)
    p.set_defaults(func=run)


def produce(args: argparse.Namespace) -> pd.DataFrame:
    """The diag frame the arguments ask for (no file written)."""
    from regime_dash import scenarios
    from regime_dash.config import RegimeConfig
    from regime_dash.engine import replay
    from regime_dash.simulator import simulate

    from regime_dash.engine import warm

    config = RegimeConfig().with_settings(args.settings)
    if args.simulate:
        return simulate(args.simulate, steps=args.steps, accounts=args.accounts, seed=args.seed,
                        config=config, engine=args.engine).frame()
    if args.scenario:
        stream = scenarios.make(args.scenario, seed=args.seed, steps=args.steps, accounts=args.accounts)
    else:
        stream = scenarios.recorded(steps=args.steps, accounts=args.accounts, path=args.stream)
    engine = warm.choose_engine(args.engine, stream.steps)
    if args.engine == "auto" and engine == "reference" and warm.fast_needs_compile():
        print(f"the fast engine is not compiled yet (about {warm.estimate_s(False):.0f} s); replaying "
              f"{stream.steps:,} steps on the reference engine instead (--engine fast compiles it)",
              file=sys.stderr)
    with warm.announced(engine):
        return replay(stream, config, engine=engine, log_inputs=True)  # so every output can be re-derived


def run(args: argparse.Namespace) -> int:
    if args.out is not None:
        check_out(args.out)
    if args.live:
        return replay_live.run(args)
    if args.out is None:
        raise ValidationError("--out FILE is required (unless --live)", field="out", value=None)
    out = check_out(args.out)
    t0 = time.perf_counter()
    frame = produce(args)
    write(frame, out)
    print(f"wrote {len(frame)} steps × {frame['risk_stack.positions.b_size'].iloc[0]} accounts to {out} "
          f"(engine {frame.attrs.get('engine', '?')}, {time.perf_counter() - t0:.2f} s)", file=sys.stderr)
    return 0
