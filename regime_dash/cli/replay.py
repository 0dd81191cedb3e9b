"""``python -m regime_dash replay``: replay a stream, a preset or a live run, write the diag.

::

    python -m regime_dash replay (--scenario NAME | --stream FILE | --simulate NAME)
        [--steps T] [--accounts B] [--seed S] [--engine reference|cuda|fast|auto]
        [--controllers single|fused] [--set FIELD=VALUE ...] --out FILE [--single-out FILE]
    python -m regime_dash replay (--scenario NAME | --stream FILE | --simulate NAME) --live
        [--tick N] [--interval SECONDS] [--change STEP:FIELD=VALUE ...] [--inject STEP:KIND ...]

``--out x.jsonl`` writes a diag.jsonl in the cluster's format (one nested
object per step), which ``ingest`` takes like any cluster file; ``--out
x.parquet`` writes the frame. ``--set`` takes :class:`~regime_dash.RegimeConfig`
fields (``--set resurrection=false --set max_duration=500``). ``--live`` plays the
source step by step with a status line per tick (:mod:`regime_dash.cli.replay_live`).

``--controllers fused`` replays the risk-stack controllers as ``rl_fused_controllers``
(the spec's launch-order step 8) instead of the single kernels. With a mirror
switch off (``--set fused_mirror_resurrection=false`` or
``fused_mirror_tau_boost=false``) the single path is replayed too and the finding
``fused_mirror_drift`` says where the two part (printed; ``--single-out`` writes
the single path's diag, for ``check OUT --single SINGLE``).
"""
from __future__ import annotations

import argparse
import sys
import time

from regime_dash.cli import help_of, say
from regime_dash.text import terminal_safe
from regime_dash.cli import replay_live
from regime_dash.errors import ValidationError


def register(subparsers) -> None:
    from regime_dash.sources.scenarios import SCENARIOS
    from regime_dash.sources.market import PRESETS

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
    p.add_argument("--controllers", default="single", choices=("single", "fused"),
                   help="risk-stack controller path: the single kernels (default) or rl_fused_controllers")
    p.add_argument("--single-out", metavar="FILE", help="with --controllers fused: also write the single "
                   "path's replay (.jsonl or .parquet), for check OUT --single FILE")
    p.add_argument("--set", dest="settings", action="append", default=[], metavar="FIELD=VALUE",
                   help="RegimeConfig field, repeatable (e.g. resurrection=false, max_duration=500)")
    p.add_argument("--out", metavar="FILE", help="output: .jsonl (diag) or .parquet (frame); "
                   "required unless --live")
    replay_live.add_arguments(p)
    p.set_defaults(func=run)


def request_of(args: argparse.Namespace):
    """The :class:`~regime_dash.usecases.replay.ReplayRequest` the arguments make."""
    from regime_dash.cli.source_args import source_of
    from regime_dash.core.config import RegimeConfig
    from regime_dash.usecases.replay import ReplayRequest

    return ReplayRequest(source_of(args), RegimeConfig().with_settings(args.settings), engine=args.engine,
                         controllers=getattr(args, "controllers", "single"))


def _bar(name: str):
    """A progress bar for a diag file's write, on a terminal only."""
    if not sys.stderr.isatty():
        return None
    from regime_dash.cli.progress import ProgressBar

    return ProgressBar(name, unit="steps", scale=1)


def run(args: argparse.Namespace) -> int:
    from regime_dash.usecases.frames import check_out
    from regime_dash.usecases.replay import replay_to_file

    if args.out is not None:
        check_out(args.out)
    if args.live:
        if args.controllers != "single":
            raise ValidationError("--controllers fused replays the whole source; --live plays the single "
                                  "controllers step by step", field="controllers", value=args.controllers)
        return replay_live.run(args)
    if args.out is None:
        raise ValidationError("--out FILE is required (unless --live)", field="out", value=None)
    t0 = time.perf_counter()
    outcome = replay_to_file(request_of(args), args.out, args.single_out, notices=sys.stderr, progress=_bar)
    frame = outcome.frame
    say(f"wrote {len(frame)} steps × {frame['risk_stack.positions.b_size'].iloc[0]} accounts to {terminal_safe(args.out)} "
        f"(engine {outcome.engine}, controllers {args.controllers}, {time.perf_counter() - t0:.2f} s)",
        file=sys.stderr)
    if outcome.single is not None and args.single_out is not None:
        say(f"wrote the single path's replay to {terminal_safe(args.single_out)}", file=sys.stderr)
    for f in outcome.findings:
        say(f"{f.severity.upper()}  {f.id} (step {f.steps[0]}): {f.message}", file=sys.stderr)
    if outcome.single is not None and not outcome.findings:
        say("fused_mirror_drift: none (the fused and single paths agree bit for bit)", file=sys.stderr)
    return 0
