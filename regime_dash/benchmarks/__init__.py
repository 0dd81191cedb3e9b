"""Benchmarks behind ``python -m regime_dash bench TARGET``.

Each target is a module here holding its measurement and a handler ``main(args) ->
int`` that prints the figures; its options are declared in :mod:`regime_dash.benchmarks.targets`
and every benchmark times through :mod:`regime_dash.benchmarks.timing`. Adding a
target is adding its module name to ``TARGETS``, its module to
:func:`regime_dash.benchmarks.registry.target_modules` and its options to
``regime_dash.benchmarks.targets.TARGET_SPECS``.
"""
from __future__ import annotations

#: Benchmark modules, in the order ``bench --help`` lists them.
TARGETS: tuple[str, ...] = ("ingest", "engines", "page_load", "modules", "sensitivity", "ui", "startup", "long", "check",
                           "follow", "repair", "delta_store", "soak")
