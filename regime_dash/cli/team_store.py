"""``regime-dash restore RUN``, ``regime-dash store migrate OLD NEW`` and ``regime-dash store vacuum``:
undo and upkeep of a Delta store (:mod:`regime_dash.store.delta`)."""
from __future__ import annotations

import argparse
import sys

from regime_dash.cli import help_of, say
from regime_dash.cli.store_args import add_store_arguments, open_from


def register(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("restore", help=help_of("restore"),
                       description="Bring back a run removed within the Delta store's retention window "
                       "(see `runs --removed`).")
    r.add_argument("runs", nargs="+", metavar="RUN", help="the removed run's id, name or alias")
    add_store_arguments(r)
    r.set_defaults(func=run_restore)

    s = sub.add_parser("store", help=help_of("store"))
    what = s.add_subparsers(dest="store_command", metavar="ACTION")
    what.required = True
    m = what.add_parser("migrate", help="copy a folder store into a Delta store (a URI or a new folder), "
                        "verified row for row")
    m.add_argument("old", metavar="OLD", help="the folder store")
    m.add_argument("new", metavar="NEW", help="the Delta store: a URI (s3://, gs://, az://, file://) or a local path")
    m.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE", dest="storage_option",
                   help="an option of NEW's object store (repeat: each one)")
    m.set_defaults(func=run_migrate)
    v = what.add_parser("vacuum", help="compact a Delta store's small files and delete the files no version "
                        "within the retention window reads")
    add_store_arguments(v)
    v.add_argument("--retention-hours", type=float, default=None, metavar="H",
                   help="keep what the last H hours read (default: the store's, 168: a week); a removed run "
                   "stays restorable that long")
    v.set_defaults(func=run_vacuum)


def run_restore(args: argparse.Namespace) -> int:
    store = open_from(args)
    for ref in args.runs:
        run_id = store.restore(ref)  # a folder store: StoreError naming `store migrate` (exit 2)
        say(f"restored {run_id}")
    return 0


def run_migrate(args: argparse.Namespace) -> int:
    from regime_dash.store.delta.migrate import migrate
    from regime_dash.store.open import open_delta_store

    target = open_delta_store(args.new, args.storage_option or None)
    bar = None
    if sys.stderr.isatty():
        from regime_dash.cli.progress import ProgressBar

        bar = ProgressBar("migrating", unit="runs", scale=1)
    try:
        done = migrate(args.old, target, progress=None if bar is None else lambda _run, i, n: bar(i, n))
    finally:
        if bar is not None:
            bar.close()
    kept = len(done["runs"]) if isinstance(done["runs"], list) else done["runs"]
    say(f"copied {len(done['copied'])} run(s) of {kept} ({done['rows']:,} rows) and {len(done['layouts'])} "
        f"layout(s) into {target.root.describe()}; verified row for row: {len(done['verified'])} run(s)")
    for run_id in done["copied"]:
        say(f"  {run_id}")
    return 0


def run_vacuum(args: argparse.Namespace) -> int:
    from regime_dash.errors import ValidationError

    kw = {}
    if args.retention_hours is not None:
        if not args.retention_hours >= 0:
            raise ValidationError(f"--retention-hours must be hours >= 0, got {args.retention_hours!r}",
                                  field="retention_hours", value=args.retention_hours)
        kw["retention_hours"] = args.retention_hours
    store = open_from(args, **kw)
    done = store.maintain(force=True)  # a folder store: StoreError (it keeps no old versions)
    removed = sum((done.get("vacuumed") or {}).values())
    say(f"vacuumed {store.root}: {removed} file(s) removed (retention {store.retention_hours:g} h)")
    return 0
