"""``tag RUN TAG...``, ``untag RUN TAG...``, ``note RUN TEXT`` and ``rename RUN NEW``.

RUN is a run id, the run's name or an alias (see ``runs``); the changes live in the run's
metadata (:mod:`regime_dash.store.labels`). Exit 2 for an unknown run or a bad tag.
"""
from __future__ import annotations

import argparse
import sys

from regime_dash.cli.store_args import add_store_arguments, open_from
from regime_dash.cli import help_of, say
from regime_dash.text import terminal_safe



def register(sub: argparse._SubParsersAction) -> None:
    for cmd, func, what in (("tag", run_tag, "tags to add"), ("untag", run_untag, "tags to remove")):
        p = sub.add_parser(cmd, help=help_of(cmd))
        p.add_argument("run", metavar="RUN", help="run id, name or alias")
        p.add_argument("tags", nargs="+", metavar="TAG", help=what)
        add_store_arguments(p)
        p.set_defaults(func=func)
    n = sub.add_parser("note", help=help_of("note"))
    n.add_argument("run", metavar="RUN", help="run id, name or alias")
    n.add_argument("text", metavar="TEXT", help="the note (an empty text clears it)")
    add_store_arguments(n)
    n.set_defaults(func=run_note)
    r = sub.add_parser("rename", help=help_of("rename"))
    r.add_argument("run", metavar="RUN", help="run id, name or alias")
    r.add_argument("new", metavar="NEW", help="the new name (the run id stays)")
    add_store_arguments(r)
    r.set_defaults(func=run_rename)


def run_tag(args: argparse.Namespace) -> int:
    from regime_dash.store.labels import tag

    store = open_from(args)
    tags = tag(store, args.run, args.tags)
    say(f"{store.resolve(args.run)}: tags {', '.join(map(terminal_safe, tags))}")
    return 0


def run_untag(args: argparse.Namespace) -> int:
    from regime_dash.store.labels import untag

    store = open_from(args)
    tags, missing = untag(store, args.run, args.tags)
    if missing:
        say(f"note: the run had no tag {', '.join(map(terminal_safe, missing))}", file=sys.stderr)
    say(f"{store.resolve(args.run)}: tags {', '.join(map(terminal_safe, tags)) or '(none)'}")
    return 0


def run_note(args: argparse.Namespace) -> int:
    from regime_dash.store.labels import set_note

    store = open_from(args)
    note = set_note(store, args.run, args.text)
    say(f"{store.resolve(args.run)}: " + ("note cleared" if not note else f"note set ({len(note):,} characters)"))
    return 0


def run_rename(args: argparse.Namespace) -> int:
    from regime_dash.store.labels import rename

    done = rename(open_from(args), args.run, args.new)
    say(f"renamed {terminal_safe(done['old'])} to {terminal_safe(done['name'])} (run id {done['run_id']} unchanged)")
    return 0
