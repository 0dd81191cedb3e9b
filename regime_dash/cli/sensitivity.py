"""``python -m regime_dash sensitivity``: which config fields move which summary metrics, and by how much.

::

    python -m regime_dash sensitivity (--scenario NAME | --stream FILE | --simulate PRESET)
        [--set FIELD=VALUE ...] [--fields F1,F2,...] [--points N] [--pairs K] [--pair-points M]
        [--steps T] [--accounts B] [--seed S] [--engine auto|fast|reference] [--device auto|cpu|gpu]
        [--json]

Every config field is swept across its slider domain, one at a time around the
``--set`` config (the switches both ways), then the top ``--pairs`` fields of
the ranking pairwise. The report ranks the fields, gives each metric's range
per field, lists the fields with no effect here and the findings that explain
them, the pairs' interactions, and the values the config rejects next to the
base. ``--simulate`` replays the inputs of a closed-loop live run of the preset
(run under the ``--set`` config) open loop.
"""
from __future__ import annotations

import argparse

from regime_dash.cli import help_of, say, say_json
from regime_dash.text import terminal_safe
from regime_dash.errors import ConfigError


def register(subparsers) -> None:
    from regime_dash.sources.scenarios import SCENARIOS
    from regime_dash.runs.sensitivity import PAIR_FIELDS, PAIR_POINTS, POINTS
    from regime_dash.sources.market import PRESETS

    p = subparsers.add_parser(
        "sensitivity", help=help_of("sensitivity"),
        description=__doc__.split("::")[0].strip() + "\n\n" + __doc__.split("::")[1].strip(),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--scenario", choices=sorted(SCENARIOS), help="open-loop synthetic preset")
    src.add_argument("--stream", metavar="FILE", help="a recorded stream (.npz or .parquet)")
    src.add_argument("--simulate", choices=sorted(PRESETS), help="closed-loop live-run preset")
    p.add_argument("--set", dest="settings", action="append", default=[], metavar="FIELD=VALUE",
                   help="base config field, repeatable (e.g. resurrection=false)")
    p.add_argument("--fields", metavar="F1,F2,...", help="sweep only these fields (default: all)")
    p.add_argument("--points", type=int, default=POINTS, help=f"values per numeric field (default {POINTS})")
    p.add_argument("--pairs", type=int, default=PAIR_FIELDS,
                   help=f"top-ranked fields swept pairwise (default {PAIR_FIELDS}; 0: none)")
    p.add_argument("--pair-points", type=int, default=PAIR_POINTS,
                   help=f"values per field in a pairwise grid (default {PAIR_POINTS})")
    p.add_argument("--steps", type=int, help="steps (default: the preset's, or the whole stream)")
    p.add_argument("--accounts", type=int, help="accounts b (default: the preset's, or the whole stream)")
    p.add_argument("--seed", type=int, default=0, help="RNG seed of a preset or live run (default 0)")
    p.add_argument("--engine", default="auto", choices=("auto", "fast", "reference"),
                   help="sweep engine (default auto: fast where it runs, else reference)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "gpu"),
                   help="device of the fast engine (default auto: the GPU when there is one)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.set_defaults(func=run)


def format_report(result, source: str) -> list[str]:
    """The human report of a :class:`~regime_dash.runs.sensitivity.SensitivityResult`."""
    from regime_dash.core.config import RegimeConfig
    from regime_dash.runs.sensitivity import format_value

    default = RegimeConfig().as_dict()
    changed = {k: v for k, v in result.base.as_dict().items() if default[k] != v}
    lines = [f"sensitivity of {source} ({result.steps} steps × {result.accounts} accounts), base: "
             + (", ".join(f"{k}={v}" for k, v in changed.items()) or "the spec's defaults"),
             f"{len(result.oat)} one-at-a-time + {len(result.pair_table)} pairwise replays on "
             f"{result.engine} in {result.seconds:.2f} s", "",
             "fields that move the metrics (score: sum over metrics of the share of the largest move):"]
    effects = result.effects.set_index(["field", "metric"])
    for name, score in result.ranking:
        lines.append(f"  {name:<24} {score:5.2f}")
        for metric in result.moves(name):
            e = effects.loc[(name, metric)]
            lines.append(f"      {metric:<20} {e['low']:>12g} .. {e['high']:<12g} (base {e['base']:g}; "
                         f"low at {name}={format_value(e['at_low'])}, high at {format_value(e['at_high'])})")
    lines += ["", "no effect here:" if result.no_effect else "no effect here: none"]
    for n in result.no_effect:
        lines.append(f"  {n.field:<24} {n.explanation()}")
    if len(result.pairs):
        lines += ["", "pairs (interaction: how far the joint move departs from the two single moves):"]
        for (a, b), rows in result.pairs.groupby(["field_a", "field_b"], sort=False):
            moved = rows[rows["interaction"] > 0]
            text = ", ".join(f"{r.metric} {r.interaction:g}" for r in moved.itertuples()) or "none (additive)"
            lines.append(f"  {a} × {b}: {text}")
    if result.skipped:
        lines += ["", "values not replayed (RegimeConfig rejects them next to the base):"]
        lines += [f"  {f}={format_value(v)}: {m}" for f, v, m in result.skipped]
    return lines


def run(args: argparse.Namespace) -> int:
    from regime_dash.cli.source_args import source_of
    from regime_dash.core.config import RegimeConfig
    from regime_dash.usecases.sensitivity import sensitivity_source

    base = RegimeConfig().with_settings(args.settings)
    fields = None
    if args.fields is not None:
        fields = [f.strip() for f in args.fields.split(",") if f.strip()]
        if not fields:
            raise ConfigError(f"--fields {args.fields!r} names no field", field="fields", value=args.fields)
    result = sensitivity_source(source_of(args), base, engine=args.engine, device=args.device, fields=fields,
                                points=args.points, pair_fields=args.pairs, pair_points=args.pair_points)
    if args.json:
        say_json(result.to_dict(), indent=1, allow_nan=False)
    else:
        say("\n".join(format_report(result, terminal_safe(source_of(args).name))))
    return 0
