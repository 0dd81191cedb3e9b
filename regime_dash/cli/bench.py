"""``python -m regime_dash bench TARGET ...``: the performance benchmarks.

Targets live in :mod:`regime_dash.benchmarks` (one module each, listed in its
``TARGETS``); ``bench ingest --help`` shows a target's options.
"""
from __future__ import annotations

import argparse
import importlib


def register(sub: argparse._SubParsersAction) -> None:
    from regime_dash.benchmarks import TARGETS

    p = sub.add_parser("bench", help="run a benchmark (ingest, ...) and print its figures",
                       description=__doc__)
    targets = p.add_subparsers(dest="target", metavar="TARGET")
    # `bench [--json FILE] [--steps T] [--accounts B]` without a target runs `bench engines`
    from regime_dash.benchmarks import engines
    engines.add_arguments(p)
    for name in TARGETS:
        try:
            module = importlib.import_module(f"regime_dash.benchmarks.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"regime_dash.benchmarks.{name}":
                raise
            continue  # a target whose module has not landed yet
        module.register(targets)
