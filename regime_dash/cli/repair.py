"""``python -m regime_dash repair``: the config that would have passed, searched over the run's stream.

::

    python -m regime_dash repair (RUN [--stream FILE] | --stream FILE | --scenario NAME | --module NAME)
        [--fields F1,F2,...] [--set FIELD=VALUE ...] [--trials N] [--batch N] [--seed S]
        [--sampler nsga2|tpe|qmc|random] [--top N] [--verify N] [--steps T] [--accounts B]
        [--stream-seed S] [--engine fast|reference] [--device auto|cpu|gpu]
        [--verify-engine reference|fast|cuda] [--workers N] [--store DIR] [--json]

RUN is a stored run (id or name) or a diag file: its verdict is diagnosed first. A
failure config cannot help (a re-derivation or a formula invariant of the kernels: a
kernel or logging fault; the trainer's eval pnl or throughput) is named and nothing is
searched. A diag does not hold the input stream a replay needs, so a run whose
failures config may repair needs ``--stream FILE`` (its recorded stream); the search
then starts from the run's logged config. ``--stream`` or ``--scenario`` alone repairs
the spec's default config (``--set`` holds fields fixed) on that stream; ``--module NAME``
repairs a controller module's config on its demo stream (or ``--stream FILE.npz``
holding the module stream's arrays by name).

By default every config field with a domain is searched, less those the one-at-a-time
sensitivity sees move nothing; ``--fields`` names the fields (no screen). Optuna's
sampler proposes ``--batch`` configs at a time, each batch one sweep of the fast engine;
the best are replayed in full on ``--verify-engine`` (the reference engine), in
``--workers`` processes, and judged by ``check``'s verdict: only those are called passing. The table shows at least
``--top`` candidates: the changed fields (old → new), the distance from the run's config
(each field's change over its slot's domain width, summed; a flipped switch counts 1),
and the metrics that mattered before → after. ``--seed`` makes it reproducible.

Exit status: 0 a verified passing config (or nothing to repair), 1 none passes or config
cannot help, 2 bad input or a stored run without ``--stream``.
"""
from __future__ import annotations

import argparse
import sys
from regime_dash.cli import help_of, say, say_json
from regime_dash.cli.progress import ProgressBar


def register(subparsers) -> None:
    from regime_dash.runs.repair.optimiser import SAMPLERS
    from regime_dash.sources.scenarios import SCENARIOS

    p = subparsers.add_parser("repair", help=help_of("repair"), description=__doc__.split("::")[0].strip(),
                              epilog=__doc__.split("::")[1].split("\n\n", 2)[2].strip(),
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="RUN|FILE", nargs="?", help="a stored run (id or name) or a diag file")
    p.add_argument("--stream", metavar="FILE", help="the run's recorded stream (.npz or .parquet)")
    p.add_argument("--scenario", choices=sorted(SCENARIOS), help="a synthetic stream preset")
    p.add_argument("--module", metavar="NAME", help="repair this controller module's config (its demo stream)")
    p.add_argument("--fields", metavar="F1,F2,...", help="the fields to search (default: every field that moves)")
    p.add_argument("--set", dest="settings", action="append", default=[], metavar="FIELD=VALUE",
                   help="a field held fixed, repeatable")
    p.add_argument("--trials", type=int, default=None, help="configs the search tries (default 256; module 64)")
    p.add_argument("--batch", type=int, default=None, help="configs per batch, one sweep each (default 64; "
                   "module 16)")
    p.add_argument("--seed", type=int, default=0, help="the sampler's seed (default 0)")
    p.add_argument("--sampler", default="nsga2", choices=SAMPLERS, help="Optuna's sampler (default nsga2)")
    p.add_argument("--top", type=int, default=5, help="candidates shown, at least (default 5)")
    p.add_argument("--verify", type=int, default=None, help="candidates replayed in full (default: --top)")
    p.add_argument("--steps", type=int, help="steps (default: the preset's, or the whole stream)")
    p.add_argument("--accounts", type=int, help="accounts b (default: the preset's, or the whole stream)")
    p.add_argument("--stream-seed", type=int, default=0, help="RNG seed of a preset or demo stream (default 0)")
    p.add_argument("--engine", default="fast", choices=("fast", "reference"),
                   help="the sweeps' engine (default fast)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "gpu"), help="the fast engine's device")
    p.add_argument("--verify-engine", default="reference", choices=("reference", "fast", "cuda"),
                   help="the engine of the full replays that verify (default reference)")
    p.add_argument("--workers", type=int, default=None,
                   help="processes that verify, a candidate each at a time (default: one per core from "
                        "20,000 steps, else 1)")
    p.add_argument("--store", metavar="DIR", default=None,
                   help="run store directory (default: $REGIME_DASH_STORE or ./data/store)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.set_defaults(func=run)


class _Bars:
    """One progress bar per stage of the search, drawn on a terminal only."""

    UNITS = {"screen": "%", "search": "trials", "prune": "rounds", "verify": "replays"}

    def __init__(self):
        self.stage: str | None = None
        self.bar: ProgressBar | None = None

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage != self.stage:
            self.close()
            self.stage, self.bar = stage, ProgressBar(f"repair {stage}", unit=self.UNITS.get(stage, ""), scale=1)
        self.bar(done, total)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        self.bar = None


def _request(args: argparse.Namespace):
    from regime_dash.usecases.repair import RepairRequest

    return RepairRequest(target=args.target, stream=args.stream, scenario=args.scenario, module=args.module,
                         fields=args.fields, settings=tuple(args.settings), trials=args.trials, batch=args.batch,
                         seed=args.seed, sampler=args.sampler, top=args.top, verify=args.verify, steps=args.steps,
                         accounts=args.accounts, stream_seed=args.stream_seed, engine=args.engine,
                         device=args.device, verify_engine=args.verify_engine, workers=args.workers,
                         store=args.store)


def run(args: argparse.Namespace) -> int:
    from regime_dash.usecases.repair import repair_request

    request = _request(args)
    bars = _Bars() if sys.stderr.isatty() else (lambda stage, done, total: None)
    try:
        result, source = repair_request(request, bars, notices=sys.stderr)
    finally:
        if isinstance(bars, _Bars):
            bars.close()
    if args.json:
        say_json({**result.to_dict(), "source": source}, indent=1, allow_nan=False)
    else:
        for line in report_lines(result):
            say(line)
    return result.exit_code


def _clip(text: str, width: int = 160) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def report_lines(result) -> list[str]:
    """The human form of a repair's result."""
    import pandas as pd

    lines = [f"repair: {result.status}: {result.message}"]
    if result.failures:
        lines.append("failures:")
        lines += [f"  {f.id} ({f.kind}, {f.cause}{'' if f.step is None else f', from step {f.step}'}): "
                  f"{_clip(f.detail) if f.cause == 'config' else f.why}" for f in result.failures]
    if result.targets:
        lines.append("predicted from the sweep rows: " + "; ".join(t.text() for t in result.targets))
    if result.screened_out:
        lines.append(f"not searched (moved nothing): {', '.join(result.screened_out)}")
    if result.space is not None and result.searched:
        lines.append(f"searched {result.searched} configs over {', '.join(result.space.names)} (sampler "
                     f"{result.sampler}, seed {result.seed}, engine {result.engine}; {result.rejected} rejected "
                     f"by the config's rules); verified on {result.verify_engine}")
    if result.candidates:
        with pd.option_context("display.width", 250, "display.max_columns", 40, "display.max_colwidth", 90):
            lines += ["", result.table().to_string(index=False)]
    if result.seconds:
        lines.append(", ".join(f"{k} {v:.2f} s" for k, v in result.seconds.items()))
    return lines
