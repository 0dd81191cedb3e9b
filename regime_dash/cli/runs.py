"""``python -m regime_dash runs [--json]`` and ``python -m regime_dash rm RUN``."""
from __future__ import annotations

import argparse
import sys

from regime_dash.cli.store_args import add_store_arguments, open_from
from regime_dash.cli import help_of, say, say_json
from regime_dash.text import terminal_safe


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("runs", help=help_of("runs"))
    add_store_arguments(p)
    p.add_argument("--removed", action="store_true",
                   help="list the runs removed within a Delta store's retention window (`restore RUN` brings one back)")
    p.add_argument("--json", action="store_true",
                   help="print a JSON array: name, aliases, tags, notes, config and summary of each run")
    p.add_argument("--tag", action="append", default=[], metavar="TAG",
                   help="only runs with this tag (repeat: every tag)")
    p.add_argument("--where", action="append", default=[], metavar="TEST",
                   help="only runs passing FIELD OP VALUE, e.g. 'max_duration>500', 'verdict==fail' "
                   "(a config field, a summary metric, a check count; repeat: every test)")
    p.set_defaults(func=run_list)

    r = sub.add_parser("rm", help=help_of("rm"))
    r.add_argument("run_ids", nargs="+", metavar="RUN",
                   help="run id, or a name or alias one run has (see `runs`); an alias removes only that alias")
    add_store_arguments(r)
    r.set_defaults(func=run_rm)


def run_list(args: argparse.Namespace) -> int:
    store = open_from(args)
    if args.removed:
        return _list_removed(store, args.json)
    runs = _rows(store, args)
    orphans = store.orphan_dirs()
    if orphans:  # folders every glob reads but no listing shows: say so, and what removes them
        say(f"note: {len(orphans)} run folder(s) without a readable _meta.json are not listed; "
              "`python -m regime_dash doctor --repair` moves them to _quarantine/", file=sys.stderr)
    if args.json:
        say_json(runs, indent=1, default=str)
        return 0
    if not runs:
        say("no runs")
        return 0
    head = ("RUN", "NAME", "ALIASES", "TAGS", "ROWS", "REJ", "STEPS", "INGESTED", "SOURCE")
    rows = [(r["run_id"], str(r["name"] or ""), ",".join(r["aliases"]), ",".join(r["tags"]), str(r["rows"]),
             str(r["rejected"]), "" if r["first_step"] is None else f"{r['first_step']}..{r['last_step']}",
             str(r["ingested_at"] or ""), str(r["source"] or "")) for r in runs]
    rows = [tuple(terminal_safe(x) for x in row) for row in rows]  # escaped (newlines too) before the widths are measured
    widths = [max(len(x[i]) for x in [head, *rows]) for i in range(len(head))]
    for line in [head, *rows]:
        say("  ".join(x.ljust(w) for x, w in zip(line, widths)).rstrip())
    return 0


def _list_removed(store, as_json: bool) -> int:
    """``runs --removed``: the runs a ``restore`` can bring back (a folder store: a StoreError, exit 2)."""
    gone = store.removed_runs()
    if as_json:
        say_json(gone, indent=1, default=str)
    for r in [] if as_json else gone:
        say(f"{r['run_id']}  {terminal_safe(r['name'] or '')}  removed {r['removed_at']}  restorable until {r['restorable_until']}")
    if not gone and not as_json:
        say("no removed runs")
    return 0


def _rows(store, args: argparse.Namespace) -> list[dict]:
    """The runs to list: the store's listing, or (for ``--json`` and ``--where``) the runs table,
    whose first listing judges each run once (a bar on a terminal)."""
    if not (args.json or args.where):
        runs = store.list_runs()
        return [r for r in runs if all(t in r["tags"] for t in args.tag)]
    from regime_dash.runs.run_table import filter_rows, parse_where, table

    for w in args.where:
        parse_where(w)  # a malformed test fails before any run is judged
    bar = None
    if sys.stderr.isatty():
        from regime_dash.cli.progress import ProgressBar

        bar = ProgressBar("judging runs", unit="runs", scale=1)
    try:
        rows = table(store, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    return filter_rows(rows, tags=args.tag, where=args.where)


def run_rm(args: argparse.Namespace) -> int:
    store = open_from(args)
    from regime_dash.store.labels import remove_alias

    for ref in args.run_ids:
        rid, how = store.resolve_ref(ref)  # StoreError -> "error: ..." and exit 2 (cli.main)
        if how == "alias":  # the name goes, the run (and its other names) stay
            remove_alias(store, ref)
            say(f"removed the alias {terminal_safe(ref)} of run {rid} (the run stays)")
            continue
        aliases = store.meta(rid).get("aliases") or []
        store.delete(rid)
        also = f" (and its aliases {', '.join(map(terminal_safe, aliases))})" if aliases else ""
        say(f"deleted {rid}{also}")
    return 0
