"""``python -m regime_dash modules``: the controller modules (SP14, SP18, Pearl C, the regime observer).

::

    python -m regime_dash modules list
    python -m regime_dash modules replay NAME [--steps T] [--seed S] [--engine reference|cuda]
        [--set FIELD=VALUE ...] [--out FILE.jsonl|FILE.parquet] [--json]
    python -m regime_dash modules sweep NAME --grid FIELD=V1,V2 [--grid ...] [--steps T] [--seed S]
        [--engine E] [--json]
    python -m regime_dash modules slots [--orphans]

``replay`` replays the module's demo stream and prints its summary metrics and
checks; it exits 1 when a check fails, so CI can gate on it. ``--out x.jsonl``
writes the frame as nested diag objects, which ``check`` reads back (it runs
every module's checks whose columns a file has). ``slots --orphans`` lists the
slots that have consumers but no producer (SP14's slot 388).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from regime_dash.cli import help_of, say, say_json

OUT_SUFFIXES = (".jsonl", ".parquet")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("modules", help=help_of("modules"),
                       description=__doc__.split("\n", 1)[1].replace("::\n", "").strip(),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    cmds = p.add_subparsers(dest="modules_command", metavar="ACTION")
    cmds.required = True
    cmds.add_parser("list", help="the modules, their kernels and checks").set_defaults(func=run_list)

    r = cmds.add_parser("replay", help="replay a module's demo stream; print its metrics and checks")
    _common(r)
    r.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="a config field")
    r.add_argument("--out", metavar="FILE", help="write the frame (.jsonl diag or .parquet)")
    r.set_defaults(func=run_replay)

    s = cmds.add_parser("sweep", help="replay a module's demo stream under a grid of configs")
    _common(s)
    s.add_argument("--grid", action="append", default=[], required=True, metavar="FIELD=V1,V2",
                   help="values of one config field (repeat for a product grid)")
    s.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="a fixed config field")
    s.set_defaults(func=run_sweep)

    sl = cmds.add_parser("slots", help="every module's ISV slots; --orphans: consumers without a producer")
    sl.add_argument("--orphans", action="store_true", help="only the slots with consumers but no producer")
    sl.set_defaults(func=run_slots)


def _common(p: argparse.ArgumentParser) -> None:
    from regime_dash.modules import MODULES

    p.add_argument("name", choices=sorted(MODULES), metavar="NAME", help=f"one of {', '.join(sorted(MODULES))}")
    p.add_argument("--steps", type=int, default=None, help="demo stream length (default: the module's)")
    p.add_argument("--seed", type=int, default=0, help="demo stream seed (default 0)")
    p.add_argument("--engine", default="reference", help="reference (default), cuda, or another the module has")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run_list(args: argparse.Namespace) -> int:
    from regime_dash.modules import MODULES

    for m in MODULES.values():
        say(f"{m.name:<22} {m.title}")
        say(f"{'':<22} kernels: {', '.join(m.kernels) or '-'}; engines: {', '.join(m.engines)}; "
              f"{len(m.check_ids)} checks{' (run by check itself)' if m.core else ''}; {len(m.slots)} slots")
        if not m.core:
            say(f"{'':<22} checks: {', '.join(m.check_ids)}")
    return 0


def run_replay(args: argparse.Namespace) -> int:
    from regime_dash.errors import ValidationError
    from regime_dash.modules import get
    from regime_dash.modules.integration import parse_settings

    m = get(args.name)
    if args.out and Path(args.out).suffix not in OUT_SUFFIXES:
        raise ValidationError(f"--out {args.out!r}: use a {' or '.join(OUT_SUFFIXES)} file", field="out",
                              value=args.out)
    config = parse_settings(m, args.set)
    frame = m.replay(m.demo_stream(args.seed, args.steps), config, args.engine)
    checks = [c.to_dict() for c in m.invariants(frame)]
    summary = m.summary(frame)
    if args.out:
        out = Path(args.out)
        if out.suffix == ".jsonl":
            from regime_dash.diag.catalogue import write_jsonl

            write_jsonl(frame, out)
        else:
            frame.to_parquet(out)
    if args.json:
        say_json({"module": m.name, "engine": args.engine, "steps": len(frame), "summary": summary,
                  "checks": checks, "out": args.out}, indent=1, default=float)
    else:
        say(f"{m.name}: {len(frame)} steps on {args.engine}" + (f", written to {args.out}" if args.out else ""))
        for k, v in summary.items():
            say(f"  {k:<24} {v:.6g}")
        say()
        _print_checks(checks)
    return 1 if any(c["status"] == "fail" for c in checks) else 0


def _print_checks(checks: list[dict]) -> None:
    w = max((len(c["id"]) for c in checks), default=10)
    for c in checks:
        first = "" if c["first_step"] is None else f" first step {c['first_step']}"
        count = f" {c['violations']} violation(s){first}" if c["status"] == "fail" else ""
        say(f"{c['status'].upper():4}  {c['id']:<{w}}{count}  {c['detail']}")


def run_sweep(args: argparse.Namespace) -> int:
    import pandas as pd

    from regime_dash.modules import get
    from regime_dash.modules.integration import parse_grid, parse_settings, sweep_module

    m = get(args.name)
    table = sweep_module(m, m.demo_stream(args.seed, args.steps), parse_grid(m, args.grid), args.engine,
                         base=parse_settings(m, args.set))
    if args.json:
        say_json({"module": m.name, "engine": args.engine, "rows": table.to_dict(orient="records")},
                 indent=1, default=float)
    else:
        with pd.option_context("display.width", 200, "display.max_columns", 50):
            say(table.to_string(index=False))
    return 0


def run_slots(args: argparse.Namespace) -> int:
    from regime_dash.modules import MODULES, full_layout, module_slots, orphan_slots

    orphans = set(orphan_slots(full_layout().table()))
    owner = {s.name: m.name for m in MODULES.values() if not m.core for s in m.slots}
    for s in sorted(module_slots(), key=lambda s: s.index):
        if args.orphans and s.name not in orphans:
            continue
        flag = "  ORPHAN: consumers but no producer" if s.name in orphans else ""
        say(f"[{s.index}] {s.name:<40} {owner.get(s.name, ''):<22} producer: {s.producer or '-'}; "
              f"consumers: {', '.join(s.consumers) or '-'}{flag}")
    return 0
