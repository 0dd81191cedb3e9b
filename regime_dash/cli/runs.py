"""``python -m regime_dash runs [--json]`` and ``python -m regime_dash rm RUN``."""
from __future__ import annotations

import argparse
import json
import sys

from regime_dash.cli import help_of


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("runs", help=help_of("runs"))
    p.add_argument("--store", metavar="DIR", default=None,
                   help="run store directory (default: $REGIME_DASH_STORE or ./data/store)")
    p.add_argument("--json", action="store_true", help="print a JSON array")
    p.set_defaults(func=run_list)

    r = sub.add_parser("rm", help=help_of("rm"))
    r.add_argument("run_ids", nargs="+", metavar="RUN",
                   help="run id, or the name given at ingest when one run has it (see `runs`)")
    r.add_argument("--store", metavar="DIR", default=None,
                   help="run store directory (default: $REGIME_DASH_STORE or ./data/store)")
    r.set_defaults(func=run_rm)


def run_list(args: argparse.Namespace) -> int:
    from regime_dash.store import RunStore

    store = RunStore(args.store)
    runs = store.list_runs()
    orphans = store.orphan_dirs()
    if orphans:  # folders every glob reads but no listing shows: say so, and what removes them
        print(f"note: {len(orphans)} run folder(s) without a readable _meta.json are not listed; "
              "`python -m regime_dash doctor --repair` moves them to _quarantine/", file=sys.stderr)
    if args.json:
        json.dump(runs, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
        return 0
    if not runs:
        print("no runs")
        return 0
    head = ("RUN", "NAME", "ROWS", "REJ", "STEPS", "INGESTED", "SOURCE")
    rows = [(r["run_id"], str(r["name"] or ""), str(r["rows"]), str(r["rejected"]),
             "" if r["first_step"] is None else f"{r['first_step']}..{r['last_step']}",
             str(r["ingested_at"] or ""), str(r["source"] or "")) for r in runs]
    from regime_dash.text import terminal_safe

    rows = [tuple(terminal_safe(x) for x in row) for row in rows]  # names and sources come from files
    widths = [max(len(x[i]) for x in [head, *rows]) for i in range(len(head))]
    for line in [head, *rows]:
        print("  ".join(x.ljust(w) for x, w in zip(line, widths)).rstrip())
    return 0


def run_rm(args: argparse.Namespace) -> int:
    from regime_dash.store import RunStore

    store = RunStore(args.store)
    for ref in args.run_ids:
        rid = store.resolve(ref)  # StoreError -> "error: ..." and exit 2 (cli.main)
        store.delete(rid)
        print(f"deleted {rid}")
    return 0
