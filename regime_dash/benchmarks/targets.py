"""The options of every benchmark target (:data:`TARGET_SPECS`), shared by ``python -m regime_dash bench
TARGET`` (:mod:`regime_dash.cli.bench`) and ``python -m regime_dash.benchmarks.<target>`` (:func:`standalone`).

Each benchmark module keeps its measurement and a handler ``main(args) -> int`` that prints its
figures; :mod:`regime_dash.benchmarks.registry` lists the modules.
"""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from types import ModuleType
from typing import Callable

__all__ = ["TARGET_SPECS", "TargetSpec", "add_target", "engines_options", "standalone", "store_formats"]


def _sizes(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of ints") from None


def _before_literal(doc: str) -> str:
    """The docstring up to its ``::`` command-line block."""
    return doc.split("::")[0].strip()


def _first_paragraph(doc: str) -> str:
    return doc.split("\n\n")[0]


def engines_options(p: argparse.ArgumentParser, m: ModuleType | None = None) -> None:
    """The options of ``bench engines`` (and of ``bench`` without a target); their defaults are
    :mod:`regime_dash.benchmarks.engine_defaults`', so the benchmark need not be loaded for them."""
    from regime_dash.benchmarks import engine_defaults as d

    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE")
    p.add_argument("--steps", type=int, default=d.DEFAULT_STEPS, help=f"T (default {d.DEFAULT_STEPS:,})")
    p.add_argument("--accounts", type=int, default=d.DEFAULT_ACCOUNTS, help=f"b (default {d.DEFAULT_ACCOUNTS:,})")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per row after a warm-up (default 5)")
    p.add_argument("--sweep-sizes", type=_sizes, default=d.DEFAULT_SWEEP_SIZES, metavar="S1,S2,...",
                   help="config counts of the sweep rows (default 1,1024,16384)")
    p.add_argument("--gpu-sweep-sizes", type=_sizes, default=d.DEFAULT_GPU_SWEEP_SIZES, metavar="S1,S2,...",
                   help="config counts of the GPU sweep rows (default 1024,16384,65536)")
    p.add_argument("--scale-out-size", type=int, default=d.DEFAULT_SCALE_OUT_SIZE, metavar="S",
                   help="configs of the one-GPU vs dask-over-all-GPUs rows (default 262144; 0 skips)")
    p.add_argument("--scale-out-steps", type=_sizes, default=(0,), metavar="T1,T2,...",
                   help="also take the scale-out rows on streams of these many steps (default 0: not)")
    p.add_argument("--scale-out-only", action="store_true",
                   help="take only the scale-out rows (at --steps and --scale-out-steps) and their ratios")
    p.add_argument("--budget", type=float, default=120.0, metavar="SECONDS",
                   help="stop repeating a row once its runs took this long (default 120)")
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic stream (default 0)")
    p.add_argument("--live-accounts", type=_sizes, default=d.DEFAULT_LIVE_ACCOUNTS, metavar="B1,B2,...",
                   help="b of the live stepper rows (default 1024,64; 0 skips them)")
    p.add_argument("--live-steps", type=int, default=d.DEFAULT_LIVE_STEPS,
                   help="steps timed per live row (default 2000)")
    p.add_argument("--live-only", action="store_true", help="run only the live stepper rows")
    p.add_argument("--live-profile", metavar="FILE", help="also write a cProfile of 2000 GPU live steps to FILE")


def _scratch_and_output(p: argparse.ArgumentParser) -> None:
    """A benchmark's scratch directory and how it gives its figures: printed as JSON, written to a file."""
    p.add_argument("--workdir", default=None, help="scratch directory (default: system tmp)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON only")
    p.add_argument("--out", default=None, help="also write the JSON figures to this file")


def _formats(text: str) -> tuple[str, ...]:
    from regime_dash.store.open import FORMATS

    asked = tuple(f.strip().lower() for f in text.split(",") if f.strip())
    bad = [f for f in asked if f not in FORMATS]
    if bad or not asked:
        raise argparse.ArgumentTypeError(f"{text!r}: store formats are {' or '.join(FORMATS)}, comma-separated")
    return asked


def _store_format_option(p: argparse.ArgumentParser) -> None:
    """``--store-format F1,F2``: the store formats measured, each in turn in the same run."""
    p.add_argument("--store-format", type=_formats, default=None, metavar="FORMATS", dest="store_format",
                   help="the store's format: delta, folder or folder,delta (each in turn; default: "
                   "a new store's, $REGIME_DASH_STORE_FORMAT or folder)")


def store_formats(args: argparse.Namespace) -> tuple[str, ...]:
    """The store formats ``--store-format`` asks for, else the one a new store gets."""
    from regime_dash.store.open import store_format

    return args.store_format or (store_format(),)


def _json_file(p: argparse.ArgumentParser, what: str = "figures") -> None:
    """``--json FILE``: also write ``what`` (the figures, the rows) as JSON to FILE."""
    p.add_argument("--json", metavar="FILE", default=None, help=f"also write the {what} as JSON")


def _ingest_options(p: argparse.ArgumentParser, m: ModuleType) -> None:
    p.add_argument("--size-mb", type=float,
                   default=float(os.environ.get("REGIME_DASH_BENCH_MB", 100)),
                   help="size of the generated diag file (default 100, or "
                        "$REGIME_DASH_BENCH_MB)")
    p.add_argument("--repeat", type=int, default=3, help="timings per contender (best kept)")
    p.add_argument("--peak-mb", type=float, default=0.0,
                   help="also measure peak RSS ingesting a file this large (e.g. 1000)")
    p.add_argument("--bomb-gib", type=float, default=0.0,
                   help="also measure peak RSS ingesting a gzip bomb expanding to this many GiB "
                        "(CLI, app upload, both at once; e.g. 4)")
    _scratch_and_output(p)


def _page_load_options(p: argparse.ArgumentParser, m: ModuleType) -> None:
    p.add_argument("--steps", type=int, default=25_000, help="steps of the run (default 25000)")
    p.add_argument("--accounts", type=int, default=64, help="accounts of the replayed stream (default 64)")
    p.add_argument("--repeat", type=int, default=5, help="page loads; the first is cold (default 5)")
    p.add_argument("--screenshot", help="also save a screenshot of the loaded page here")
    p.add_argument("--out", help="also write the JSON result to this file")
    _store_format_option(p)


def _modules_options(p: argparse.ArgumentParser, m: ModuleType) -> None:
    p.add_argument("--steps", type=int, default=None, help="demo stream length (default: each module's)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs per row after a warm-up (median)")
    p.add_argument("--engines", default="reference,cuda", help="comma-separated engines (default reference,cuda)")
    p.add_argument("--include-core", action="store_true", help="also the regime observer")
    p.add_argument("--seed", type=int, default=0, help="demo stream seed")
    _json_file(p, "rows")


def _sensitivity_options(p: argparse.ArgumentParser, m: ModuleType) -> None:
    from regime_dash.sources.scenarios import SCENARIOS

    p.add_argument("--scenario", default="kelly_trap_run8", choices=sorted(SCENARIOS),
                   help="scenario preset (default kelly_trap_run8: 3000 steps × 128 accounts)")
    p.add_argument("--steps", type=int, default=None, help="steps (default: the preset's)")
    p.add_argument("--accounts", type=int, default=None, help="accounts (default: the preset's)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs after a warm-up (median; default 5)")
    p.add_argument("--device", default="cpu", choices=("auto", "cpu", "gpu"),
                   help="device of the fast engine (default cpu: the target is a CPU figure)")
    p.add_argument("--seed", type=int, default=0, help="scenario seed")
    _json_file(p, "figures")


def _repair_options(p: argparse.ArgumentParser, m: ModuleType) -> None:
    from regime_dash.runs.repair.optimiser import SAMPLERS
    from regime_dash.sources.scenarios import SCENARIOS

    p.add_argument("--scenario", default="kelly_trap_run8", choices=sorted(SCENARIOS),
                   help="scenario preset (default kelly_trap_run8, the spec's Run #8)")
    p.add_argument("--steps", type=int, default=m.DEFAULT_STEPS, help=f"steps (default {m.DEFAULT_STEPS:,})")
    p.add_argument("--accounts", type=int, default=None, help="accounts (default: the preset's)")
    p.add_argument("--trials", type=int, default=256, help="configs the search tries (default 256)")
    p.add_argument("--batch", type=int, default=64, help="configs per batch, one sweep each (default 64)")
    p.add_argument("--seed", type=int, default=0, help="the sampler's seed")
    p.add_argument("--sampler", default="nsga2", choices=SAMPLERS, help="Optuna's sampler (default nsga2)")
    p.add_argument("--device", default="cpu", choices=("auto", "cpu", "gpu"),
                   help="the fast engine's device (default cpu: the CPU target)")
    p.add_argument("--top", type=int, default=5, help="candidates shown (default 5)")
    p.add_argument("--verify", type=int, default=None, help="candidates replayed in full (default: --top)")
    p.add_argument("--verify-engine", default="reference", choices=("reference", "fast", "cuda"),
                   help="the engine of the verifying replays (default reference)")
    p.add_argument("--workers", type=int, default=None, help="processes that verify (default: one per core)")
    p.add_argument("--module", default=m.DEFAULT_MODULE,
                   help=f"also repair this module's demo (default {m.DEFAULT_MODULE}; none: skip)")
    _json_file(p, "figures")


def _ui_options(p: argparse.ArgumentParser, m: ModuleType) -> None:
    p.add_argument("--steps", type=int, default=25_000, help="steps of the Replay stream and Explore runs (25000)")
    p.add_argument("--big-steps", type=int, default=1_000_000,
                   help="steps of the long Explore run (default 1000000; 0 leaves it out)")
    p.add_argument("--repeat", type=int, default=5, help="actions per measurement; the median is reported (5)")
    p.add_argument("--compare-runs", type=int, default=10,
                   help="runs of --steps steps overlaid on Compare (default 10, at least 2)")
    p.add_argument("--only", default=",".join(m.GROUPS),
                   help=f"comma-separated measurement groups (default all: {','.join(m.GROUPS)})")
    p.add_argument("--out", help="also write the JSON result to this file")


def _startup_options(p: argparse.ArgumentParser, m: ModuleType) -> None:
    p.add_argument("--repeats", type=int, default=10, help="timed runs of each command, interleaved (median; 10)")
    _json_file(p, "figures")


def _long_options(p: argparse.ArgumentParser, m: ModuleType) -> None:
    p.add_argument("--steps", type=int, default=m.DEFAULT_STEPS, help=f"T (default {m.DEFAULT_STEPS:,})")
    p.add_argument("--accounts", type=int, default=m.DEFAULT_ACCOUNTS, help=f"b (default {m.DEFAULT_ACCOUNTS})")
    p.add_argument("--sim-steps", type=int, default=None, help="steps of the simulator run (default: T)")
    p.add_argument("--workdir", default=None, help="scratch directory (default: system tmp)")
    _json_file(p, "figures")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)  # one stage, in a child process


def _check_options(p: argparse.ArgumentParser, m: ModuleType) -> None:
    p.add_argument("--steps", type=int, default=1_000_000, help="steps of the diag (default 1000000)")
    p.add_argument("--accounts", type=int, default=128, help="accounts (default 128)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs of each process, interleaved (median; 3)")
    _json_file(p, "figures")


def _follow_options(p: argparse.ArgumentParser, m: ModuleType) -> None:
    p.add_argument("--files", type=int, default=8, help="files written at once (default 8)")
    p.add_argument("--rate", type=float, default=1000.0, help="lines a second per file (default 1000)")
    p.add_argument("--seconds", type=float, default=60.0, help="how long the writer writes (default 60; "
                   "1800 for the RSS target)")
    _scratch_and_output(p)
    _store_format_option(p)


def _delta_store_options(p: argparse.ArgumentParser, m: ModuleType) -> None:
    p.add_argument("--size-mb", type=float, default=100.0, help="the ingested file's size (default 100)")
    p.add_argument("--repeat", type=int, default=3, help="timed ingests of each kind, interleaved (median; 3)")
    p.add_argument("--runs", type=int, default=1000, help="runs in the store `runs` lists (default 1000)")
    p.add_argument("--s3", action="store_true", help="also time `runs` against a moto S3 server on 127.0.0.1")
    p.add_argument("--skip-ingest", action="store_true", help="time `runs` only")


def _soak_options(p: argparse.ArgumentParser, m: ModuleType) -> None:
    p.add_argument("--minutes", type=float, default=30.0, help="how long the server's RSS is sampled (default 30)")
    p.add_argument("--window", type=float, default=None, help="minutes of the first and last windows compared "
                   "(default 5, or a third of a shorter soak)")
    p.add_argument("--rate", type=float, default=20.0, help="lines a second the writer appends (default 20)")
    p.add_argument("--tabs", type=int, default=2, help="chromium tabs open on Explore (default 2)")
    p.add_argument("--sample-every", type=float, default=5.0, help="seconds between RSS samples (default 5)")
    p.add_argument("--workdir", default=None, help="scratch directory (default: system tmp)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON only")
    p.add_argument("--out", default=None, help="also write the figures, every sample included, as JSON here")


@dataclass(frozen=True)
class TargetSpec:
    """How ``bench <target>`` is offered: its one-line help, its description (from the
    module docstring), its options, and the name of the module's handler."""

    help: str
    description: Callable[[str], str]
    options: Callable[[argparse.ArgumentParser, ModuleType], None]
    handler: str = "main"
    raw: bool = True  # keep the description's line breaks


#: The options of every target of :data:`regime_dash.benchmarks.TARGETS`.
TARGET_SPECS: dict[str, TargetSpec] = {
    "ingest": TargetSpec("ingest MB/s vs DuckDB and pyarrow; peak memory", lambda doc: doc, _ingest_options),
    "engines": TargetSpec("replay engines: reference, fast CPU/GPU, cuda per step, sweeps", _before_literal,
                          engines_options),
    "page_load": TargetSpec("Explore page load of a 25k-step run in headless chromium", _first_paragraph,
                            _page_load_options, raw=False),
    "modules": TargetSpec("controller modules: replay time of each demo stream per engine", _before_literal,
                          _modules_options),
    "sensitivity": TargetSpec("what-if sensitivity of a scenario vs a single replay, warm",
                              lambda doc: _before_literal(doc) + "\n\n" + doc.split("::")[1].strip(),
                              _sensitivity_options),
    "repair": TargetSpec("repair search of Run #8 end to end (and a failing module demo): a verified passing "
                         "config", lambda doc: _before_literal(doc) + "\n\n" + doc.split("::")[1].strip(),
                         _repair_options),
    "ui": TargetSpec("dashboard latencies (action → updated chart) in headless chromium", _first_paragraph,
                     _ui_options, raw=False),
    "startup": TargetSpec("start-up of python -m regime_dash --help vs python -c pass", _before_literal,
                          _startup_options),
    "check": TargetSpec("check of a 1M-step diag (every check and re-derivation) vs reading it; peak RSS",
                        _before_literal, _check_options),
    "long": TargetSpec("a 1M-step run through every stage: generate, write, ingest, check, draw, what-if",
                       _before_literal, _long_options),
    "follow": TargetSpec("ingest --follow keeping up with 8 files at 1000 lines/s: latency, CPU, RSS",
                         lambda doc: doc, _follow_options),
    "delta_store": TargetSpec("the Delta store: ingest vs DuckDB's COPY, `runs` over 1,000 runs (local, S3)",
                              lambda doc: doc, _delta_store_options),
    "soak": TargetSpec("the dashboard server's RSS over a live follow with two Explore tabs: does it level off",
                       lambda doc: doc, _soak_options),
}


def add_target(targets: argparse._SubParsersAction, name: str, module: ModuleType, **defaults) -> None:
    """Add ``bench <name>``'s parser (its options, its module's handler; ``defaults`` set on its arguments)."""
    spec = TARGET_SPECS[name]
    kwargs = {"formatter_class": argparse.RawDescriptionHelpFormatter} if spec.raw else {}
    p = targets.add_parser(name, help=spec.help, description=spec.description(module.__doc__), **kwargs)
    spec.options(p, module)
    p.set_defaults(func=getattr(module, spec.handler), **defaults)


def standalone(name: str, module: ModuleType, argv: list[str] | None = None) -> int:
    """``python -m regime_dash.benchmarks.<name>``: the target's options and handler (of ``module``,
    the benchmark's own) without the ``bench`` command around them; returns the exit code."""
    spec = TARGET_SPECS[name]
    parser = argparse.ArgumentParser(prog=f"python -m regime_dash.benchmarks.{name}",
                                     description=spec.description(module.__doc__))
    spec.options(parser, module)
    return int(getattr(module, spec.handler)(parser.parse_args(argv)) or 0)
