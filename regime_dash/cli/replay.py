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
from pathlib import Path
from typing import TYPE_CHECKING

from regime_dash.cli import help_of, say
from regime_dash.cli import replay_live
from regime_dash.cli.frame_out import OUT_SUFFIXES, check_out, write
from regime_dash.cli.scenario_stream import generated
from regime_dash.errors import ValidationError

if TYPE_CHECKING:  # the annotation only: pandas loads with the replay
    import pandas as pd


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


def produce(args: argparse.Namespace) -> pd.DataFrame:
    """The diag frame the arguments ask for (no file written); a fused replay with a mirror off
    carries the single path's frame and the finding in ``attrs`` (``single``, ``findings``)."""
    from regime_dash.sources import scenarios
    from regime_dash.core.config import RegimeConfig

    config = RegimeConfig().with_settings(args.settings)
    controllers = getattr(args, "controllers", "single")
    if args.simulate:
        from regime_dash.sources.simulator import simulate

        if controllers != "single":
            raise ValidationError("--controllers fused replays a --scenario or a --stream; --simulate runs the "
                                  "single controllers", field="controllers", value=controllers)
        return simulate(args.simulate, steps=args.steps, accounts=args.accounts, seed=args.seed,
                        config=config, engine=args.engine).frame()
    stats = None
    if args.scenario:
        stream, stats = generated(args.scenario, args.engine, seed=args.seed, steps=args.steps,
                                  accounts=args.accounts)
    else:
        stream = scenarios.recorded(steps=args.steps, accounts=args.accounts, path=args.stream)
    from regime_dash.engine import replay, warm

    engine = warm.choose_engine(args.engine, stream.steps)
    options = {"stats": stats} if stats is not None and engine == "fast" else {}
    if args.engine == "auto" and engine == "reference" and warm.fast_needs_compile():
        say(f"the fast engine is not compiled yet (about {warm.estimate_s(False):.0f} s); replaying "
              f"{stream.steps:,} steps on the reference engine instead (--engine fast compiles it)",
              file=sys.stderr)
    with warm.announced(engine):
        # the inputs logged so every output can be re-derived (check's rederive.*), on either path
        frame = replay(stream, config, engine=engine, log_inputs=True, controllers=controllers, **options)
        if getattr(args, "single_out", None) is not None or _needs_twin(config, controllers):
            from regime_dash.analysis.mirror_drift import single_twin

            frame.attrs["single"], frame.attrs["findings"] = single_twin(frame, stream, config, engine,
                                                                         log_inputs=True)
    return frame


def _needs_twin(config, controllers: str) -> bool:
    from regime_dash.analysis.mirror_drift import needs_single_twin

    return needs_single_twin(config, controllers)


def run(args: argparse.Namespace) -> int:
    if args.out is not None:
        check_out(args.out)
    if args.live:
        if args.controllers != "single":
            raise ValidationError("--controllers fused replays the whole source; --live plays the single "
                                  "controllers step by step", field="controllers", value=args.controllers)
        return replay_live.run(args)
    if args.out is None:
        raise ValidationError("--out FILE is required (unless --live)", field="out", value=None)
    out = check_out(args.out)
    if args.single_out is not None:
        if args.controllers != "fused":
            raise ValidationError("--single-out needs --controllers fused (the single path is what --out writes)",
                                  field="single_out", value=args.single_out)
        if Path(args.single_out).suffix not in OUT_SUFFIXES:
            raise ValidationError(f"--single-out {args.single_out!r}: unknown suffix "
                                  f"{Path(args.single_out).suffix!r}; use one of {OUT_SUFFIXES}",
                                  field="single_out", value=args.single_out)
    t0 = time.perf_counter()
    frame = produce(args)
    single = frame.attrs.pop("single", None)
    findings = frame.attrs.pop("findings", [])
    write(frame, out)
    say(f"wrote {len(frame)} steps × {frame['risk_stack.positions.b_size'].iloc[0]} accounts to {out} "
          f"(engine {frame.attrs.get('engine', '?')}, controllers {args.controllers}, "
          f"{time.perf_counter() - t0:.2f} s)", file=sys.stderr)
    if single is not None and args.single_out is not None:
        write(single, args.single_out)
        say(f"wrote the single path's replay to {args.single_out}", file=sys.stderr)
    for f in findings:
        say(f"{f.severity.upper()}  {f.id} (step {f.steps[0]}): {f.message}", file=sys.stderr)
    if single is not None and not findings:
        say("fused_mirror_drift: none (the fused and single paths agree bit for bit)", file=sys.stderr)
    return 0
