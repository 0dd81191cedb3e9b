"""``python -m regime_dash bench TARGET ...``: the performance benchmarks.

Targets live in :mod:`regime_dash.benchmarks` (one module each, listed in its
``TARGETS``, their options in :mod:`regime_dash.benchmarks.targets`); ``bench ingest --help``
shows a target's options. A target's module is loaded only when that target is run (or its
help shown): a child process of ``bench long`` starts with nothing but what it times.
"""
from __future__ import annotations

import argparse
from typing import Any, Callable

from regime_dash.cli import Parser


class _TargetParser(Parser):
    """``bench TARGET``'s parser: its options, description and handler added from the target's module
    the first time it parses or shows its help. ``command_line`` goes to the handler as ``args.command_line``
    (``bench long`` times whole commands in-process through it)."""

    def __init__(self, *args: Any, target: str = "", command_line: Callable[..., int] | None = None,
                 **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.target, self.command_line, self.loaded = target, command_line, False

    def load(self) -> None:
        if self.loaded:
            return
        from regime_dash.benchmarks.registry import target_module
        from regime_dash.benchmarks.targets import TARGET_SPECS

        module, spec = target_module(self.target), TARGET_SPECS[self.target]
        self.description = spec.description(module.__doc__)
        if spec.raw:
            self.formatter_class = argparse.RawDescriptionHelpFormatter
        spec.options(self, module)
        self.set_defaults(func=getattr(module, spec.handler), command_line=self.command_line)
        self.loaded = True

    def parse_known_args(self, args=None, namespace=None):
        self.load()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self.load()
        return super().format_help()


def _engines(args: argparse.Namespace) -> int:
    """``bench`` without a target: ``bench engines``."""
    from regime_dash.benchmarks import engines

    return engines.main(args)


def register(sub: argparse._SubParsersAction) -> None:
    from regime_dash.benchmarks import TARGETS
    from regime_dash.benchmarks.targets import TARGET_SPECS, engines_options
    from regime_dash.cli import help_of, main

    p = sub.add_parser("bench", help=help_of("bench"), description=__doc__)
    targets = p.add_subparsers(dest="target", metavar="TARGET", parser_class=_TargetParser)
    # `bench [--json FILE] [--steps T] [--accounts B]` without a target runs `bench engines`
    engines_options(p)
    p.set_defaults(func=_engines)
    for name in TARGETS:
        targets.add_parser(name, help=TARGET_SPECS[name].help, target=name, command_line=main)


__all__ = ["register"]
