"""``bench``'s targets: one registry of real imports, and a target's run loads its own module alone."""
from __future__ import annotations

import subprocess
import sys

from regime_dash.benchmarks import TARGETS
from regime_dash.benchmarks.registry import LOADERS, target_module
from regime_dash.benchmarks.targets import TARGET_SPECS


def test_the_registry_lists_every_target_with_its_options_in_order():
    assert list(LOADERS) == list(TARGETS) and set(TARGET_SPECS) == set(TARGETS)
    for name in TARGETS:
        module = target_module(name)
        assert module.__name__ == f"regime_dash.benchmarks.{name}"
        assert callable(getattr(module, TARGET_SPECS[name].handler)), name


def test_a_target_loads_its_own_module_alone_and_gets_the_command_line():
    code = ("import sys\nfrom regime_dash.cli import build_parser\n"
            "argv = ['bench', 'long', '--steps', '5']\n"
            "args = build_parser(argv).parse_args(argv)\n"
            "print(args.steps, callable(args.command_line), args.func.__module__)\n"
            "print(' '.join(m for m in ('numpy', 'regime_dash.benchmarks.engines', 'regime_dash.benchmarks.ingest')"
            " if m in sys.modules) or '-')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "5 True regime_dash.benchmarks.long"
    assert out[1] == "-"  # what a `bench long` stage times is not loaded before it
