"""``replay --live``: play a stream, a scenario or the closed loop step by step, a status line per tick.

::

    python -m regime_dash replay --scenario kelly_trap_run8 --live --tick 50 --interval 0.2 \\
        --change 800:max_duration=600 --inject 1200:shock [--out trap.jsonl]

Each tick advances ``--tick`` steps (stopping early at a scheduled event) and
prints one line to stdout: the step, kelly_f, the dead zone and its duration,
ε live, σ, the tail recency, the open accounts, and the changes made since the
last line. ``--change STEP:FIELD=VALUE`` switches a config field from step STEP
on (the ISV state carries over); ``--inject STEP:shock|flat|boundary`` injects
before step STEP (on a stream: an edit of its inputs; see
:mod:`regime_dash.runs.live`). ``--interval`` paces the ticks for a person watching
a terminal; the default 0 runs as fast as it can, for a log. Ctrl-C stops the
run; ``--out`` then gets what was played.
"""
from __future__ import annotations

import argparse
import sys
import time

from regime_dash.cli import say
from regime_dash.text import terminal_safe

from regime_dash.errors import ValidationError

INJECTIONS = ("shock", "flat", "boundary")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``--live`` options of ``replay``."""
    g = p.add_argument_group("live run", "play the source step by step, one status line per tick")
    g.add_argument("--live", action="store_true", help="play step by step and print a status line per tick")
    g.add_argument("--tick", type=int, default=20, metavar="N", help="steps per tick (default 20)")
    g.add_argument("--interval", type=float, default=0.0, metavar="SECONDS",
                   help="pause between ticks (default 0: as fast as it runs)")
    g.add_argument("--change", action="append", default=[], metavar="STEP:FIELD=VALUE",
                   help="from step STEP on, run with FIELD=VALUE (repeatable; the ISV state carries over)")
    g.add_argument("--inject", action="append", default=[], metavar="STEP:KIND",
                   help=f"inject KIND ({', '.join(INJECTIONS)}) before step STEP (repeatable)")


def _step_of(text: str, option: str) -> tuple[int, str]:
    head, sep, rest = text.partition(":")
    try:
        step = int(head)
    except ValueError:
        step = -1
    if not sep or step < 0 or not rest:
        raise ValidationError(f"{option} {text!r} is not STEP:..., with STEP a whole number >= 0",
                              field=option, value=text)
    return step, rest


def events(changes: list[str], injections: list[str]) -> list[tuple[int, str, object]]:
    """The ``--change`` and ``--inject`` options as ``(step, kind, what)``, in step order.

    ``kind`` is ``config`` (``what``: ``{field: value}``) or one of :data:`INJECTIONS`.
    """
    from regime_dash.core.config import parse_setting

    out: list[tuple[int, str, object]] = []
    for text in changes:
        step, setting = _step_of(text, "--change")
        out.append((step, "config", dict([parse_setting(setting)])))
    for text in injections:
        step, kind = _step_of(text, "--inject")
        if kind not in INJECTIONS:
            raise ValidationError(f"--inject {text!r}: unknown injection {kind!r}; use one of {INJECTIONS}",
                                  field="--inject", value=kind)
        out.append((step, kind, None))
    return sorted(out, key=lambda e: e[0])


def make_run(args: argparse.Namespace):
    """The :class:`~regime_dash.runs.live.LiveRun` the source arguments name, not started, and its steps."""
    from regime_dash.cli.source_args import source_of
    from regime_dash.core.config import RegimeConfig
    from regime_dash.usecases.live import live_run

    return live_run(source_of(args), RegimeConfig().with_settings(args.settings), args.engine)


def _apply(run, kind: str, what) -> None:
    if kind == "config":
        run.set_config(run.config.replace(**what))
    elif kind == "shock":
        run.inject_tail_shock()
    elif kind == "flat":
        run.force_flat()
    else:
        run.cross_boundary()


def run(args: argparse.Namespace) -> int:
    """Play the run, printing a status line per tick; write ``--out`` at the end if given."""
    from regime_dash.usecases.frames import write_frame
    from regime_dash.core.config import RegimeConfig
    from regime_dash.runs.live import status_line

    if args.tick < 1:
        raise ValidationError(f"--tick must be >= 1, got {args.tick}", field="--tick", value=args.tick)
    if args.interval < 0:
        raise ValidationError(f"--interval must be >= 0, got {args.interval}", field="--interval",
                              value=args.interval)
    pending = events(args.change, args.inject)
    config = RegimeConfig().with_settings(args.settings)
    for _, kind, what in pending:  # every config on the way is checked before the run starts
        config = config.replace(**what) if kind == "config" else config
    t0 = time.perf_counter()
    live, steps = make_run(args)
    say(status_line(live.status()), flush=True)
    interrupted = False
    try:
        while live.t < steps:
            seen = len(live.changes)
            while pending and pending[0][0] <= live.next_step:
                _apply(live, *pending.pop(0)[1:])
            n = min(args.tick, steps - live.t)
            if pending:
                n = min(n, max(pending[0][0] - live.next_step, 1))
            if live.step(n) == 0:
                break
            say(status_line(live.status(), live.changes[seen:]), flush=True)
            if args.interval:
                time.sleep(args.interval)
    except KeyboardInterrupt:
        interrupted = True
    for step, kind, _ in pending:
        say(f"note: {kind} at step {step} not reached (the run ended at step {live.next_step - 1})",
              file=sys.stderr)
    if args.out:
        frame = live.frame()
        write_frame(frame, args.out)
        say(f"wrote {len(frame)} steps to {terminal_safe(args.out)}", file=sys.stderr)
    say(f"played {live.t:,} steps with {len(live.changes)} change(s) in {time.perf_counter() - t0:.2f} s"
          + (" (interrupted)" if interrupted else ""), file=sys.stderr)
    return 130 if interrupted else 0
