"""``python -m regime_dash check RUN|FILE`` and ``python -m regime_dash diff A B``.

``check`` gives one run's verdict (:func:`regime_dash.analysis.verdict`): the
spec invariants, the success criteria, the checks of every controller module
the file has columns for, then the findings (where the spec's promises do not
hold in this run), and lists what it found (dead-zone episodes, tail events,
timeouts, floor spans, v9 transitions, boundaries). It exits 1 when a check
fails or a finding has severity ``fail``, 0 otherwise (skips and warnings do not
fail), so a trainer's CI can gate on it; 2 on bad input, a file or run that is not
a diag (:mod:`regime_dash.ingest.diag_rows`: no JSON object line, no line with a diag
field, no ``step``) or is unreadable included. ``check --all`` gives such a run the
status ``not a diag`` and exits 2.

``check FUSED --single SINGLE`` also compares a replay of the fused controller
path with the single path's replay of the same inputs (finding
``fused_mirror_drift``, the first step they part); a fused run checked alone
lists that finding as skipped.

``diff`` compares two runs step by step (the spec's F3 byte-identical check)
and exits 0 when they are identical, 1 when they differ.

A target is a file (``.parquet`` frame, or a diag ``.jsonl``, plain or gzip,
read by :mod:`regime_dash.ingest`, which sets bad lines aside) or, when no such
file exists, a run in the run store: its id, or the name given at ingest when
one run has it. A path that does not exist is reported as a missing file.
"""
from __future__ import annotations

import argparse
import sys

from regime_dash.cli.store_args import add_store_arguments, open_from
from regime_dash.cli import help_of, say, say_json
from regime_dash.text import terminal_safe

_ALIAS_HELP = "JSON file {canonical column: alias or [aliases]} extending the alias table"


def _emit(doc: dict, lines, as_json: bool) -> None:
    """Print ``doc`` as one JSON object, or the human ``lines``."""
    if as_json:
        say_json(doc, indent=1, allow_nan=False)
    else:
        for line in lines:
            say(line)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help=help_of("check"),
                       description="Check a run against the spec's invariants, success criteria and module "
                       "checks, and report findings. Exit status: 0 nothing failed, 1 a check failed or a "
                       "finding has severity fail, 2 bad input (a file that is not a diag included).")
    p.add_argument("target", metavar="RUN|FILE", nargs="?",
                   help="run id or name in the store, or a .jsonl/.parquet file")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--list", action="store_true", help="list the check ids and what each checks, then exit")
    p.add_argument("--all", action="store_true",
                   help="check every run of the store; print one summary row per run (exit 1 if any failed, "
                   "2 if one could not be read or is not a diag)")
    p.add_argument("--scheduler", metavar="local|ADDRESS", default=None,
                   help="with --all: check the runs over dask.distributed (default: in-process)")
    p.add_argument("--verbose", action="store_true",
                   help="with --scheduler local: show the dask workers' own logging (default: errors only)")
    p.add_argument("--only", metavar="ID[,ID...]", default=None,
                   help="run only these check ids (default: all)")
    p.add_argument("--aliases", metavar="FILE", default=None, help=_ALIAS_HELP)
    add_store_arguments(p)
    p.add_argument("--writer", metavar="W", default=None,
                   help="where rows name their writer (a rank field), or with --split-writers: the writer to "
                   "judge (default: the first in the file); every writer's status is listed either way")
    p.add_argument("--split-writers", action="store_true",
                   help="where no field names the writer of each line and several wrote the file: tell the "
                   "writers apart by the continuity of their state, and judge each as a run of its own")
    p.add_argument("--single", metavar="RUN|FILE", default=None,
                   help="for a replay of the fused controllers: the single path's replay of the same inputs "
                   "(replay --single-out); the finding fused_mirror_drift names the first step they part")
    p.add_argument("--trap-steps", type=int, default=None, metavar="N",
                   help="success criterion 1: longest allowed kelly_f=0 all-flat stretch (default 200)")
    p.add_argument("--baseline-sps", type=float, default=None, metavar="SPS",
                   help="success criterion 5: v9 baseline steps/s (the throughput check skips without it)")
    p.add_argument("--ulps", type=float, default=None, metavar="N",
                   help="tolerance of recomputed float formulas in float32 ulps (default 4); raise it "
                   "for files that log floats with fewer digits")
    p.add_argument("--rederive-ulps", type=float, default=None, metavar="N",
                   help="slack of the re-derived formulas with a multiply-add, in float32 ulps (default 0: "
                   "exact, as kernels built with --fmad=false give); 1 or 2 for a trainer built with FMA "
                   "contraction")
    p.add_argument("--follow", action="store_true",
                   help="a run being followed: a status line per commit; exit 1 at the first failure, 0 "
                   "when the follow ends with every check passing")
    p.add_argument("--until-idle", type=float, default=None, metavar="S",
                   help="with --follow: stop after S seconds without a new commit (default: until the "
                   "follower ends)")
    p.set_defaults(func=run_check)

    d = sub.add_parser("diff", help=help_of("diff"),
                       description="Compare two runs step by step. Exit status: 0 identical, "
                       "1 different, 2 bad input.")
    d.add_argument("a", metavar="A", help="run id or name, or file")
    d.add_argument("b", metavar="B", help="run id or name, or file")
    d.add_argument("--json", action="store_true", help="print the diff as one JSON object")
    d.add_argument("--columns", metavar="COL[,COL...]", default=None, help="compare only these columns")
    d.add_argument("--aliases", metavar="FILE", default=None, help=_ALIAS_HELP)
    add_store_arguments(d)
    d.set_defaults(func=run_diff)


def _split(text: str | None) -> list[str] | None:
    return None if text is None else [t.strip() for t in text.split(",") if t.strip()]


def run_check(args: argparse.Namespace) -> int:
    from regime_dash.analysis import CHECKS
    from regime_dash.errors import ValidationError
    from regime_dash.usecases.check import check_options, check_target, user_aliases

    if args.list:
        if args.json:
            say_json([{"id": c.id, "title": c.title, "needs": list(c.needs)} for c in CHECKS], indent=1)
        else:
            w = max(len(c.id) for c in CHECKS)
            for c in CHECKS:
                say(f"{c.id:<{w}}  {c.title}")
        return 0
    if args.all:
        return run_check_all(args)
    if args.follow:
        from regime_dash.cli.check_follow import run_check_follow

        return run_check_follow(args)
    if args.target is None:
        raise ValidationError("check needs a RUN_ID or FILE (or --list, or --all)", field="target")
    options = check_options(trap_steps=args.trap_steps, baseline_sps=args.baseline_sps, ulps=args.ulps,
                            rederive_ulps=args.rederive_ulps)
    checked = check_target(args.target, store=open_from(args), aliases=user_aliases(args.aliases),
                           only=_split(args.only), options=options, single=args.single, notices=sys.stderr,
                           writer=args.writer, split_writers=args.split_writers)
    report, source = checked.report, checked.source
    doc = report.to_dict()
    doc["source"] = source
    doc["writers"] = writer_rows(report, checked.other_writers)
    _emit(doc, report_lines(report, source) + writer_lines(doc["writers"]), args.json)
    return max([report.verdict.exit_code, *(v.exit_code for v in checked.other_writers.values())])


def writer_rows(report, others: dict) -> list[dict]:
    """Each writer of the run with its rows and verdict (the judged one first); empty for one writer."""
    st = report.verdict.structure
    if len(st.writers) < 2:
        return []
    verdicts = {st.writer: report.verdict, **others}
    out = []
    for w in [st.writer, *(x for x in st.writers if x != st.writer)]:
        d = verdicts[w].to_dict()
        out.append({"writer": w, "rows": st.writers[w], "status": d["status"], "counts": d["counts"],
                    "first_failure": d["first_failure"], "judged": w == st.writer})
    return out


def writer_lines(rows: list[dict]) -> list[str]:
    """The human lines of :func:`writer_rows`: a writer a line."""
    out = [f"writers: {len(rows)} (each a run of its own; --writer W for one's full report)"] if rows else []
    for r in rows:
        first = r["first_failure"]
        where = f", first failure {first['id']} at step {first['step']}" if first else ""
        shown = " (shown above)" if r["judged"] else ""
        out.append(f"  {terminal_safe(r['writer'])}: {r['rows']:,} rows, {r['status']}{where}{shown}")
    return out


def run_check_all(args: argparse.Namespace) -> int:
    """``check --all``: every run of the store, one summary table (regime_dash.runs.check_all)."""
    from regime_dash.errors import ValidationError
    from regime_dash.usecases.check import check_all_exit_code, check_store, user_aliases

    if args.target is not None or args.only is not None:
        raise ValidationError("check --all takes no RUN_ID|FILE and no --only", field="all",
                              value=args.target or args.only)
    opts = {k: v for k, v in (("trap_steps", args.trap_steps), ("baseline_sps", args.baseline_sps),
                              ("ulps", args.ulps)) if v is not None}
    table = check_store(open_from(args), scheduler=args.scheduler, options=opts, aliases=user_aliases(args.aliases),
                        verbose=args.verbose)
    doc = {"runs": table.to_dict("records")}
    lines = [table.to_string(index=False) if len(table) else "the store has no runs",
             f"{(table['status'] != 'ok').sum()} of {len(table)} run(s) failed or could not be checked"]
    _emit(doc, lines, args.json)
    return check_all_exit_code(table["status"])


def report_lines(report, source: dict) -> list[str]:
    """The human form of a check report."""
    from regime_dash.analysis.coverage import counts as coverage_counts
    from regime_dash.analysis.texts import check_line, finding_line

    name = terminal_safe(source.get("run_id") or source.get("file"))
    s = report.summary
    out = [f"{name}: {s['rows']} rows, steps {s['first_step']}..{s['last_step']}, "
           f"{s['boundaries']} boundary(ies)"]
    if source.get("rejected_lines"):
        out.append(f"  ({source['rejected_lines']} line(s) rejected by ingest)")
    if report.aliases_applied:
        out.append("aliases: " + ", ".join(f"{terminal_safe(a)} -> {terminal_safe(c)}"
                                          for a, c in report.aliases_applied.items()))
    w = max(len(c.id) for c in report.checks) if report.checks else 10
    out.append("")
    out.extend(check_line(c, w) for c in report.checks)
    out.append("")
    if report.findings:
        out.append(f"findings: {len(report.findings)}")
        out.extend(finding_line(f) for f in report.findings)
        out.append("")
    eps = report.episodes.get("dead_zone")
    if eps is not None:
        cycles = int(eps["cycles"].sum()) if len(eps) else 0
        out.append(f"dead-zone episodes: {len(eps)} ({cycles} resurrection cycle(s))")
        for _, e in eps.head(10).iterrows():
            out.append(f"  steps {e['start']}..{e['end']} ({e['steps']} steps, {e['cycles']} cycle(s)) "
                       f"ended: {e['ended']}")
    for name_, table in report.events.items():
        out.append(f"{name_}: {len(table)}")
    for name_, why in report.skipped.items():
        out.append(f"{name_}: skipped ({why})")
    out.extend(structure_lines(report.verdict.structure))
    if report.coverage:
        c = coverage_counts(report.coverage)
        out.append(f"coverage of {len(report.coverage)} logged field(s): {c['rederived']} re-derived, "
                   f"{c['bounded only']} bounded only, {c['not checkable']} not checkable, {c['input']} input(s)"
                   " (--json lists each)")
    failed, bad_findings = report.failed, report.verdict.failing_findings
    warned = report.verdict.counts.get("warn", 0)
    out.append("")
    parts = [f"{len(failed)} check(s) failed" if failed else "no check failed"]
    if warned:
        parts.append(f"{warned} warning(s)")
    if bad_findings:
        parts.append(f"{len(bad_findings)} finding(s) of severity fail")
    out.append(", ".join(parts))
    return out


def structure_lines(st) -> list[str]:
    """The run's structure in a line, and the structure checks that did not run with why."""
    if st is None:
        return []
    s = st.summary()
    out = [f"structure: {s['segments']} segment(s), {s['resumes']} resume(s), {s['writers']} writer(s); "
           + ", ".join(k.replace("_", " ") for k, c in st.coverage.items() if c["ran"]) + " checked"]
    out += [f"  {k.replace('_', ' ')}: not checked ({c['why']})" for k, c in st.coverage.items() if not c["ran"]]
    return out


def run_diff(args: argparse.Namespace) -> int:
    from regime_dash.usecases.check import diff_targets, user_aliases

    result, same_bytes = diff_targets(args.a, args.b, store=open_from(args), aliases=user_aliases(args.aliases),
                                      columns=_split(args.columns))
    doc = result.to_dict()
    doc["same_bytes"] = same_bytes
    lines = list(result.lines())
    if same_bytes is not None:
        lines.append("files are byte-identical" if same_bytes else "files are not byte-identical")
    _emit(doc, lines, args.json)
    return 0 if result.identical else 1
