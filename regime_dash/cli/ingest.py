"""``python -m regime_dash ingest PATH... [--store DIR] [--name NAME] [--json]``.

Stores each diag.jsonl (plain or gzip) as a run. Exit status: 0 when every file was
stored (or was already stored); rejected lines and values set aside are reported, not
a failure. 2 when a file could not be read (missing, unreadable, corrupt gzip) or is not
a diag (no JSON object line, no line with ``step`` or a ``risk_stack.*`` field, no
``step``: the answer ``check FILE`` gives), or the store could not be written (disk full,
permission denied); the other files are still ingested. In a diag, the JSON object lines
without a diag field are rejected lines, with their line numbers. ``check``, ``diff`` and ``rm`` then accept the
``--name`` given here when one run has it, and the full run id always.

``--follow`` tails files a trainer is still writing (see ``regime_dash.cli.ingest_follow``):
``ingest FILE --follow --name NAME``, or ``ingest --follow DIR --glob '*.diag.jsonl'``.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from regime_dash.cli.store_args import add_store_arguments, open_from
from regime_dash.cli import help_of, say, say_json
from regime_dash.errors import IngestError, StoreError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ingest", help=help_of("ingest"),
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="+", metavar="PATH", help="diag.jsonl or diag.jsonl.gz files")
    add_store_arguments(p)
    p.add_argument("--name", default=None, help="run name (default: the file name)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON array with an object per file")
    p.add_argument("--max-line-mb", type=float, default=None, metavar="MB",
                   help="reject lines longer than this, unread (default 64)")
    from regime_dash.cli.ingest_follow import add_follow_arguments

    add_follow_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    _one_blas_thread()
    if args.follow:
        from regime_dash.cli.ingest_follow import run_follow

        return run_follow(args)
    from regime_dash.errors import ValidationError

    kw = {}
    if args.max_line_mb is not None:
        if not args.max_line_mb > 0:
            raise ValidationError(f"--max-line-mb must be > 0, got {args.max_line_mb!r}",
                                  field="max_line_mb", value=args.max_line_mb)
        kw["max_line_bytes"] = max(1, int(args.max_line_mb * 2**20))
    store = open_from(args, **kw)
    results = []
    rc = 0
    tty = sys.stderr.isatty()
    if tty:  # tqdm loads only where a bar is drawn
        from regime_dash.cli.progress import ProgressBar
    for path in args.paths:
        bar = ProgressBar(Path(path).name) if tty else None
        try:
            res = store.ingest(path, name=args.name, progress=bar)
        except (IngestError, StoreError) as exc:
            rc = 2
            if bar is not None:
                bar.close()
            say(f"error: {exc}", file=sys.stderr)
            results.append({"path": path, "run_id": None, "error": str(exc)})
            continue
        if bar is not None:
            bar.close()
        obj = res.to_dict()
        obj["path"] = path
        results.append(obj)
        if not args.json:
            _print_human(path, res)
    if args.json:
        say_json(results, indent=None if len(results) > 20 else 1, default=str)
    return rc


def _one_blas_thread() -> None:
    """Ingest makes no BLAS call, yet OpenBLAS starts a worker thread per CPU when NumPy
    loads, and they spin on the CPUs Arrow's parsers need (~0.1 CPU-s of a 100 MB ingest
    on 2 CPUs). A thread count the user set is kept."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _print_human(path: str, res) -> None:
    if res.duplicate_of:
        say(f"{path}: {res.duplicate_text()} ({res.rows} rows)")
        return
    steps = "" if res.first_step is None else f", steps {res.first_step}..{res.last_step}"
    say(f"{path}: stored run {res.run_id}: {res.rows} rows, {len(res.columns)} columns"
          f"{steps}, {res.rejected_count} rejected lines")
    for r in res.rejected[:10]:
        say(f"  line {r['line']}: {r['reason']}")
    if res.rejected_count > 10:
        say(f"  ... and {res.rejected_count - 10} more (in the run's _rejects.jsonl)")
    for col, kinds in res.coerced.items():
        what = ", ".join(f"{n} {kind}" for kind, n in kinds.items())
        say(f"  {col}: {what} value(s) stored as {res.meta['columns'].get(col, '?')} (lossless)")
    if res.aside_count:
        say(f"  {res.aside_count} value(s) did not fit their column's type and were set aside "
              "(kept in the run's _conflicts.jsonl):")
        for a in res.aside[:5]:
            say(f"    line {a['line']}: {a['field']} = {a['value'][:60]} (column is {a['type']})")
