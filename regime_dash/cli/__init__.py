"""``python -m regime_dash <command>``: the command-line shell.

Each command lives in its own module under ``regime_dash/cli/`` and exposes
``register(subparsers)``, which adds its parser and sets ``func`` to a handler
``func(args) -> int`` (the process exit code). Adding a command is adding a
module name to ``COMMANDS``; nothing else here changes.
"""
from __future__ import annotations

import argparse
import importlib
import sys

#: Command modules, in the order ``--help`` lists them.
COMMANDS = ("ingest", "runs", "check", "doctor", "replay", "sweep", "sensitivity", "bench", "modules")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m regime_dash",
        description="Diagnose the regime-observer risk stack: ingest diag.jsonl runs, "
        "replay the kernel pipeline, check runs against the spec.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(f"regime_dash.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from regime_dash.errors import RegimeDashError

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except RegimeDashError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
