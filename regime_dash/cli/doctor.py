"""``python -m regime_dash doctor [--repair]``: what is wrong with the run store, and moving it aside.

Lists damaged parts, orphan run folders (no ``_meta.json``), stray files, symlinked
run folders and staging debris, one line each (:mod:`regime_dash.store.doctor`), under the
store's lock. A followed run whose follower stopped mid-commit is ``recoverable`` (restart the
follower) and never moved; a run being followed is left alone. ``--repair`` moves the rest
to ``<store>/_quarantine/`` and never deletes. Exit status: 0 nothing wrong (or everything
moved), 1 problems listed and left in place, 2 a move failed.
"""
from __future__ import annotations

import argparse
import sys

from regime_dash.cli.store_args import add_store_arguments, open_from
from regime_dash.cli import say, say_json
from regime_dash.text import terminal_safe


def register(sub: argparse._SubParsersAction) -> None:
    from regime_dash.cli import help_of

    p = sub.add_parser("doctor", help=help_of("doctor"),
                       description="List damaged parts, orphan run folders, stray files, symlinked run "
                       "folders and staging debris of the run store, under its lock. A followed run whose "
                       "follower stopped mid-commit is listed as recoverable (restart the follower) and "
                       "never moved. --repair moves the rest to <store>/_quarantine/ (never deletes). "
                       "Exit status: 0 nothing wrong or all moved, 1 problems left in place, 2 a move failed.")
    p.add_argument("--repair", action="store_true", help="move every problem to <store>/_quarantine/")
    p.add_argument("--json", action="store_true", help="print the problems as a JSON array")
    add_store_arguments(p)
    p.set_defaults(func=run_doctor)


def _recover_delta(store, as_json: bool) -> int:
    """A Delta store has no stray folder a reader could see (readers go through its log); what a
    killed writer left is finished or undone, as every writer does before it writes."""
    touched = store.recover()
    if as_json:
        say_json([{"kind": "recovered", "run_id": r} for r in touched], indent=1)
    else:
        for r in touched:
            say(f"recovered {r}: what a killed writer left is finished or undone")
        say(f"{len(touched)} run(s) recovered in {store.root}; a Delta store's readers see only committed runs "
            "(`store vacuum` deletes the files no version reads)")
    return 0


def _moved_line(q, dest) -> str:
    """Where a moved thing went, and how its rows are read there (nothing is deleted)."""
    kept = [dest] if dest.is_file() else sorted(dest.rglob("*.parquet.quarantined"))
    how = (f"; its {len(kept)} Parquet file(s) stay readable there as *.parquet.quarantined "
           "(pyarrow.parquet.read_table)") if kept and str(kept[0]).endswith(".parquet.quarantined") else ""
    return f"moved {terminal_safe(q.path)} -> {terminal_safe(dest)}{how}"


def run_doctor(args: argparse.Namespace) -> int:
    from regime_dash.cli.progress import ProgressBar
    from regime_dash.store.doctor import LEFT_IN_PLACE, examine

    store = open_from(args)
    if store.format == "delta":
        return _recover_delta(store, args.json)
    bar = ProgressBar("surveying the store", unit="entries", scale=1) if sys.stderr.isatty() else None
    try:  # the survey and the moves under the store's lock: never a run mid-commit
        problems, moved = examine(store, repair=args.repair, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    kept = [q for q in problems if q.kind in LEFT_IN_PLACE]
    if args.json:
        where = {str(q.path): str(dest) for q, dest in moved}
        say_json([{**q.to_dict(), "moved_to": where.get(str(q.path))} for q in problems], indent=1)
    else:
        for q in problems:
            say(f"{q.kind:8}  {terminal_safe(q.path)}: {terminal_safe(q.detail)}")
        for q, dest in moved:
            say(_moved_line(q, dest))
        say(f"{len(problems)} problem(s) in {store.root}"
            + (f"; {len(moved)} moved to _quarantine/" if args.repair else
               ("; `doctor --repair` moves them to _quarantine/ (nothing is deleted)" if len(kept) < len(problems)
                else ""))
            + (f"; {len(kept)} recoverable run(s) left in place (restart their follower)" if kept else ""))
    return 0 if not problems or (args.repair and not kept) else 1
