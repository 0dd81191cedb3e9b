"""``check NAME --follow``: the verdict of a run that is being followed, commit by commit.

For CI and ops: prints one status line per commit the follower makes (rows, last
step, the verdict so far), exits 1 at the first failure (a failed check or a
finding of severity fail: the line names it and its first step), and 0 when the
follow ends (the follower stopped, or ``--until-idle`` seconds pass without a
commit) with nothing failing. The checks are updated incrementally
(:mod:`regime_dash.analysis.incremental`): each commit costs its own rows.
"""
from __future__ import annotations

import argparse
import sys
import time

from regime_dash.cli import say, say_json


def _options(args: argparse.Namespace):
    from regime_dash.analysis import CheckOptions

    opts = {k: v for k, v in (("trap_steps", args.trap_steps), ("baseline_sps", args.baseline_sps),
                              ("ulps", args.ulps), ("rederive_ulps", getattr(args, "rederive_ulps", None)))
            if v is not None}
    return CheckOptions(**opts)


def _line(run_id: str, verdict, rows: int, last) -> str:
    failing = [c.id for c in verdict.failed] + [f.id for f in verdict.failing_findings]
    return (f"{run_id}: {rows} rows, last step {last}, verdict {verdict.status}"
            + (f" failing: {', '.join(failing)}" if failing else ""))


def run_check_follow(args: argparse.Namespace, poll_every: float = 0.5) -> int:
    from regime_dash.errors import ValidationError
    from regime_dash.follow.follower import RunWatch
    from regime_dash.store.run_store import RunStore

    if args.target is None:
        raise ValidationError("check --follow needs the RUN being followed", field="target")
    store = RunStore(args.store)
    run_id = store.resolve(args.target)
    watch = RunWatch(store, run_id, _options(args))
    last_news = time.monotonic()
    verdict = None
    try:
        while True:
            got = watch.poll()
            if got is not None:
                verdict, last_news = got, time.monotonic()
                rows, last = watch.verdict.rows, watch.verdict.last_step
                if args.json:
                    say_json({"run_id": run_id, "rows": rows, "last_step": last, **got.to_dict()}, flush=True)
                else:
                    say(_line(run_id, got, rows, last), flush=True)
                if not got.ok:
                    first = got.first_failure
                    what = (f"{first.id} from step {first.first_step}" if first is not None else
                            ", ".join(f"{f.id} at step {f.steps[0] if f.steps else '?'}"
                                      for f in got.failing_findings))
                    say(f"FAIL {run_id}: {what}", file=sys.stderr, flush=True)
                    return 1
                continue
            if not watch.following():
                break
            if args.until_idle is not None and time.monotonic() - last_news >= args.until_idle:
                break
            time.sleep(poll_every)
    except KeyboardInterrupt:
        pass
    say(f"{run_id}: follow ended, verdict {verdict.status if verdict else 'no rows'}", file=sys.stderr)
    return 0 if verdict is None or verdict.ok else 1
