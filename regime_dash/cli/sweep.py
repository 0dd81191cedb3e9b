"""``python -m regime_dash sweep``: replay one stream under a grid of configs, one row per config.

::

    python -m regime_dash sweep (--scenario NAME | --stream FILE)
        --grid FIELD=v1,v2,... [--grid ...] [--set FIELD=VALUE ...]
        [--steps T] [--accounts B] [--seed S] [--engine auto|fast|reference|cuda]
        [--device auto|cpu|gpu] [--scheduler local|ADDRESS] [--out table.csv|table.parquet] [--json]

The grid is the cartesian product of the ``--grid`` values, applied on top of
the ``--set`` config. Each row holds the config fields and the summary metrics
(dead-zone steps, longest duration, timeouts, tail events, σ-floor steps,
min/mean kelly_f, max σ, ...). ``--out`` writes the table (CSV or Parquet by
suffix); ``--json`` prints it as JSON records; otherwise a text table of the
grid fields and the metrics. ``--scheduler`` runs the configs over dask
(``local``: a cluster of one worker per GPU, or per core, for this call; or a
running scheduler's address); the table is the same as in-process.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from regime_dash.cli import help_of, say, say_json
from regime_dash.cli.progress import ProgressBar
from regime_dash.errors import ConfigError, ValidationError

if TYPE_CHECKING:  # the annotations only: pandas loads when the command runs
    import pandas as pd

OUT_SUFFIXES = (".csv", ".parquet")


def register(subparsers) -> None:
    from regime_dash.sources.scenarios import SCENARIOS

    p = subparsers.add_parser(
        "sweep", help=help_of("sweep"),
        description=__doc__.split("::")[0].strip(), formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--scenario", choices=sorted(SCENARIOS), help="open-loop synthetic preset")
    src.add_argument("--stream", metavar="FILE", help="a recorded stream (.npz or .parquet)")
    p.add_argument("--grid", action="append", default=[], metavar="FIELD=v1,v2,...",
                   help="RegimeConfig field and its values, repeatable (e.g. max_duration=100,500,1000)")
    p.add_argument("--set", dest="settings", action="append", default=[], metavar="FIELD=VALUE",
                   help="base config field held fixed across the grid, repeatable")
    p.add_argument("--steps", type=int, help="steps (default: the preset's, or the whole stream)")
    p.add_argument("--accounts", type=int, help="accounts b (default: the preset's, or the whole stream)")
    p.add_argument("--seed", type=int, default=0, help="RNG seed of a preset (default 0)")
    p.add_argument("--engine", default="auto", choices=("auto", "fast", "reference", "cuda"),
                   help="auto (default): fast where it runs, else reference")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "gpu"),
                   help="device of the fast engine (default auto: the GPU when there is one)")
    p.add_argument("--scheduler", metavar="local|ADDRESS", default=None,
                   help="shard the configs over dask.distributed: 'local' or a scheduler address "
                        "(default: in-process)")
    p.add_argument("--out", metavar="FILE", help="write the table: .csv or .parquet")
    p.add_argument("--json", action="store_true", help="print the table as JSON records")
    p.set_defaults(func=run)


def parse_grid(items: list[str]) -> dict[str, list[Any]]:
    """``["max_duration=100,500", "envelope=on,off"]`` → ``{field: [values]}``.

    The one strict grid parser (:func:`regime_dash.core.params.parse_grid`) over
    RegimeConfig's fields: an unknown field, a field named twice, an empty or
    bad value raise :class:`ConfigError` naming it.
    """
    from regime_dash.core.config import parse_grid as parse_config_grid

    return parse_config_grid(items)


def write_table(table: pd.DataFrame, out: str | Path) -> Path:
    """Write ``table`` as CSV or Parquet, chosen by suffix."""
    out = Path(out)
    if out.suffix == ".csv":
        table.to_csv(out, index=False)
    elif out.suffix == ".parquet":
        table.to_parquet(out, index=False)
    else:
        raise ValidationError(f"--out {str(out)!r}: unknown suffix {out.suffix!r}; use one of {OUT_SUFFIXES}",
                              field="out", value=str(out))
    return out


def run(args: argparse.Namespace) -> int:
    from regime_dash.cli.source_args import source_of
    from regime_dash.core.config import RegimeConfig
    from regime_dash.usecases.sweep import sweep_source

    if args.out and Path(args.out).suffix not in OUT_SUFFIXES:
        raise ValidationError(f"--out {args.out!r}: unknown suffix {Path(args.out).suffix!r}; "
                              f"use one of {OUT_SUFFIXES}", field="out", value=args.out)
    if not args.grid:
        raise ConfigError("give at least one --grid FIELD=v1,v2,...", field="grid", value=args.grid)
    grid = parse_grid(args.grid)
    base = RegimeConfig().with_settings(args.settings)
    bar = ProgressBar("sweep", unit="configs", scale=1) if sys.stderr.isatty() else None
    try:
        result = sweep_source(source_of(args), grid, base, engine=args.engine, device=args.device,
                              scheduler=args.scheduler, progress=bar, notices=sys.stderr)
    finally:
        if bar is not None:
            bar.close()
    table = result.table
    if args.out:
        write_table(table, args.out)
    if args.json:
        # to_dict, not to_json: pandas' JSON writer rounds floats to 10 digits
        say_json(table.to_dict("records"), indent=1)
    elif not args.out:
        from regime_dash.engine.summary import METRICS

        # the fixed fields would drown the table; --out and --json keep them all
        say(table[list(grid) + list(METRICS)].to_string(index=False))
    say(f"swept {len(table)} configs over {table.attrs['steps']} steps × {table.attrs['accounts']} accounts "
        f"(engine {result.engine}, {result.seconds:.2f} s)" + (f"; wrote {args.out}" if args.out else ""),
        file=sys.stderr)
    return 0
