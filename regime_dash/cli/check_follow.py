"""``check NAME --follow``: the verdict of a run that is being followed, commit by commit.

For CI and ops: prints one status line per commit the follower makes (rows, last
step, the verdict so far), exits 1 at the first failure (a failed check or a
finding of severity fail: the line names it and its first step), and 0 when the
follow ends (the follower stopped, or ``--until-idle`` seconds pass without a
commit) with nothing failing. A gate is a gate: a follower that stopped without
ending its follow (killed, crashed) or that ended before the file's end without
its ``--until-idle`` end makes it exit 1 too, naming why (the verdict covers only
part of the file). The checks are updated incrementally
(:mod:`regime_dash.analysis.incremental`): each commit costs its own rows.
"""
from __future__ import annotations

import argparse
import sys

from regime_dash.cli.store_args import open_from
from regime_dash.cli import say, say_json


def _options(args: argparse.Namespace):
    from regime_dash.usecases.check import check_options

    return check_options(trap_steps=args.trap_steps, baseline_sps=args.baseline_sps, ulps=args.ulps,
                         rederive_ulps=getattr(args, "rederive_ulps", None))


def _line(run_id: str, verdict, rows: int, last) -> str:
    failing = [c.id for c in verdict.failed] + [f.id for f in verdict.failing_findings]
    return (f"{run_id}: {rows} rows, last step {last}, verdict {verdict.status}"
            + (f" failing: {', '.join(failing)}" if failing else ""))


def run_check_follow(args: argparse.Namespace, poll_every: float = 0.5) -> int:
    from regime_dash.errors import ValidationError
    from regime_dash.usecases.follow import RunFollow

    if args.target is None:
        raise ValidationError("check --follow needs the RUN being followed", field="target")
    followed = RunFollow(open_from(args), args.target, _options(args))
    run_id, verdict = followed.run_id, None
    try:
        for verdict, rows, last in followed.verdicts(poll_every, args.until_idle):
            if args.json:
                say_json({"run_id": run_id, "rows": rows, "last_step": last, **verdict.to_dict()}, flush=True)
            else:
                say(_line(run_id, verdict, rows, last), flush=True)
            if not verdict.ok:
                first = verdict.first_failure
                what = (f"{first.id} from step {first.first_step}" if first is not None else
                        ", ".join(f"{f.id} at step {f.steps[0] if f.steps else '?'}"
                                  for f in verdict.failing_findings))
                say(f"FAIL {run_id}: {what}", file=sys.stderr, flush=True)
                return 1
    except KeyboardInterrupt:
        pass
    say(f"{run_id}: follow ended, verdict {verdict.status if verdict else 'no rows'}", file=sys.stderr)
    gap = followed.unfinished()
    if gap is not None:  # a gate passes only a verdict of the whole file
        say(f"FAIL {run_id}: {gap}", file=sys.stderr, flush=True)
        return 1
    return 0 if verdict is None or verdict.ok else 1
