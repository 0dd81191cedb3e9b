"""Benchmarks behind ``python -m regime_dash bench TARGET``.

Each target is a module here exposing ``register(subparsers)`` (adds its parser and
sets ``func(args) -> int``), like the CLI commands. Adding a target is adding its
module name to ``TARGETS``.
"""
from __future__ import annotations

#: Benchmark modules, in the order ``bench --help`` lists them.
TARGETS: tuple[str, ...] = ("ingest", "engines", "page_load", "modules", "sensitivity")
