"""``ingest FILE --follow --name NAME`` and ``ingest --follow DIR --glob PATTERN``.

Tails diag.jsonl files a trainer is still writing into the store, one run each
(:mod:`regime_dash.follow.follower`): new lines are committed every ``--commit-every``
seconds, the run's verdict is updated on each commit, and a check that starts
failing raises one alert (``--on-alert CMD`` gets its JSON on stdin,
``--alert-webhook URL`` gets it POSTed). A status line is printed per commit.
Restarting the same command resumes where the last one stopped. It ends after
``--until-idle`` seconds without a new line, or on Ctrl-C (what was read is
committed first). Exit status: 0 when the follow ended, 2 on bad input (a gzip
file, a symbolic link without ``--follow-symlinks``, a name another run has, an
unreadable file, a file whose first lines are not a diag: "not a diag file", as a
whole-file ingest says, an ``--alert-webhook`` that is not an http(s) URL). ``--max-line-mb`` bounds a line as it does a whole-file ingest.
"""
from __future__ import annotations

import argparse
import signal
import sys

from regime_dash.cli.store_args import open_from
from regime_dash.cli import say, say_json, was_interrupted
from regime_dash.text import terminal_safe


def add_follow_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("following a running job")
    g.add_argument("--follow", action="store_true",
                   help="tail the file(s) as they grow (tail -F); PATH may be a folder, with --glob")
    g.add_argument("--glob", default="*.jsonl", metavar="PATTERN",
                   help="with --follow DIR: the files to follow (default '*.jsonl'), one run each")
    g.add_argument("--commit-every", type=float, default=2.0, metavar="S",
                   help="seconds between commits to the store (default 2)")
    g.add_argument("--until-idle", type=float, default=None, metavar="S",
                   help="end the follow after S seconds without a new line (default: run until Ctrl-C)")
    g.add_argument("--on-truncate", choices=("segment", "stop"), default="segment",
                   help="a truncated or rewritten file starts a new segment of its run (default) or ends the follow")
    g.add_argument("--follow-symlinks", action="store_true",
                   help="follow a path that is (or becomes) a symbolic link (default: refused, or the follow of "
                        "that file stops)")
    g.add_argument("--on-alert", default=None, metavar="CMD",
                   help="shell command run once per new failure, with the alert's JSON on stdin, in a "
                        "process group of its own (killed with it after 30 s, and when the follow ends)")
    g.add_argument("--alert-webhook", default=None, metavar="URL",
                   help="POST each alert's JSON to this http:// or https:// URL (5 s timeout, 3 attempts; "
                        "never blocks the follow; a failure is printed)")
    g.add_argument("--dashboard-url", default=None, metavar="URL",
                   help="the dashboard an alert links to (default: the one the store's dashboard "
                        "recorded when it started, else http://localhost:8501)")


def _status(c) -> str:
    extra = f" [{c.event}: new segment]" if c.event else ""
    failing = f" failing: {', '.join(c.failing)}" if c.failing else ""
    return (f"{c.run_id}: +{c.rows} rows ({c.total_rows} in all), last step {c.last_step}, "
            f"{c.rejected} rejected, verdict {c.status}{failing}{extra}")


def run_follow(args: argparse.Namespace) -> int:
    """Follow until the end; SIGTERM and Ctrl-C end it too, with what was read committed and the summary line."""
    terminated: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: terminated.append(signum))
    try:
        why = _follow(args, should_stop=lambda: bool(terminated))
    except KeyboardInterrupt:  # before the follow loop began (its own Ctrl-C commits and returns)
        why = "interrupted (Ctrl-C) before the first commit"
    except Exception as exc:  # noqa: BLE001 - only a Ctrl-C that an import wrapped; anything else goes on up
        if not was_interrupted(exc):
            raise
        why = "interrupted (Ctrl-C) before the first commit"
    finally:
        signal.signal(signal.SIGTERM, previous)
    if terminated:
        why = "terminated (SIGTERM)"
    say(f"follow ended: {why}", file=sys.stderr, flush=True)
    return 0


def _follow(args: argparse.Namespace, should_stop) -> str:
    from regime_dash.usecases.follow import check_webhook, follow_files, follow_set

    check_webhook(args.alert_webhook)  # a bad URL is refused before anything is followed
    fset = follow_set(open_from(args), args.paths, args.name, pattern=args.glob, commit_every=args.commit_every,
                      on_truncate=args.on_truncate, dashboard=args.dashboard_url, max_line_mb=args.max_line_mb,
                      follow_symlinks=args.follow_symlinks)
    names = ", ".join(f.run_id for f in fset.followers.values()) or f"files matching {args.glob!r} (none yet)"
    say(f"following {names} into {fset.store.root}", file=sys.stderr, flush=True)

    def on_commit(c) -> None:
        for a in c.alerts:
            say(f"ALERT {terminal_safe(a.run)}: {a.check} fails from step {a.first_step}: {terminal_safe(a.message[:160])}",
                flush=True)
        if c.rows or c.event or c.alerts:
            if args.json:
                say_json({"run_id": c.run_id, "rows": c.rows, "total_rows": c.total_rows,
                          "last_step": c.last_step, "status": c.status, "failing": c.failing}, flush=True)
            else:
                say(_status(c), flush=True)

    return follow_files(fset, until_idle=args.until_idle, on_commit=on_commit, on_alert=args.on_alert,
                        alert_webhook=args.alert_webhook, should_stop=should_stop,
                        warn=lambda line: say(f"warning: {terminal_safe(line)}", file=sys.stderr, flush=True))
