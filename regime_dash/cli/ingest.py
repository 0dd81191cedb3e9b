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
from regime_dash.cli import error_text, help_of, say, say_json
from regime_dash.text import terminal_safe
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
            say(f"error: {error_text(exc)}", file=sys.stderr)
            results.append({"path": path, "run_id": None, "error": str(exc)})
            continue
        if bar is not None:
            bar.close()
        obj = res.to_dict()
        obj["path"] = path
        obj["structure"] = None if res.duplicate_of else _outline_of(store, res)
        results.append(obj)
        if not args.json:
            _print_human(path, res)
            for line in outline_lines(obj["structure"]):
                say(line)
    if args.json:
        say_json(results, indent=None if len(results) > 20 else 1, default=str)
    return rc


def _step_columns(store, run_id: str, field: str | None):
    """The run's step, file line and writer field (``None`` without one), part by part in write order: read
    with Parquet alone (the store's table reader loads pandas and pyarrow.compute, half a second of a
    fresh ingest)."""
    import numpy as np

    from regime_dash.ingest.arrays import to_numpy

    steps, lines, who = [], [], []
    for table in _step_tables(store, run_id, field):
        names = set(table.column_names)
        n = table.num_rows
        steps.append(to_numpy(table.column("step")).astype(np.float64) if "step" in names else np.full(n, np.nan))
        lines.append(to_numpy(table.column("_line")).astype(np.int64))
        if field is not None:
            who.append(np.asarray([str(v) for v in table.column(field).to_pylist()] if field in names
                                  else ["(none)"] * n, dtype=object))
    cat = (lambda xs, dt: np.concatenate(xs) if xs else np.empty(0, dtype=dt))
    return cat(steps, np.float64), cat(lines, np.int64), (cat(who, object) if field is not None else None)


def _step_tables(store, run_id: str, field: str | None):
    """The step, file line and writer columns of the run: each Parquet part of a folder store read alone, or the
    run's rows of a Delta store in one read (its table in file-line order)."""
    import pyarrow.parquet as pq

    want = [c for c in ("step", "_line", field) if c]
    if store.format != "folder":  # the file line is the store's own column, not among the runs' column types
        yield store.load_table(run_id, [c for c in want if c == "_line" or c in store.column_types()])
        return
    for part in store.parts(run_id):
        pf = pq.ParquetFile(part)
        yield pf.read(columns=[c for c in want if c in set(pf.schema_arrow.names)])


def steps_outline(store, res) -> dict | None:
    """Where the stored run's steps go back or repeat, per writer, and its writers (a rank field): read back
    in file order, the step and writer columns alone. ``check`` tells a resume, a second writer and a
    slipped step counter apart from the content; ingest keeps every line either way."""
    import numpy as np

    from regime_dash.diag.catalogue import WRITER_FIELDS

    if "step" not in res.columns:
        return None
    field = next((f for f in WRITER_FIELDS if f in res.columns), None)
    step, line, who = _step_columns(store, res.run_id, field)
    groups = [np.arange(len(step))] if who is None else [np.flatnonzero(who == w) for w in dict.fromkeys(who.tolist())]
    out = {"writer_field": field, "writers": len(groups), "goes_back": 0, "first": None}
    for rows in groups:
        back = np.flatnonzero(step[rows][1:] <= step[rows][:-1]) + 1
        out["goes_back"] += len(back)
        if len(back) and (out["first"] is None or rows[back[0]] < out["first"]["row"]):
            out["first"] = {"row": int(rows[back[0]]), "line": int(line[rows[back[0]]]),
                            "step": float(step[rows[back[0]]]), "after": float(step[rows[back[0] - 1]])}
    return out


def _outline_of(store, res) -> dict | None:
    """:func:`steps_outline`, or ``None`` where the stored parts cannot be read back now (the run is stored:
    its outline is a report, not a reason to fail the ingest; ``check`` reads the run whole)."""
    try:
        return steps_outline(store, res)
    except (OSError, ValueError, StoreError):
        return None


def outline_lines(outline: dict | None) -> list[str]:
    """The human lines of :func:`steps_outline`."""
    if not outline:
        return []
    out = []
    if outline["writer_field"] and outline["writers"] > 1:
        out.append(f"  {outline['writers']} writers by the field {outline['writer_field']}: `check` judges each as "
                   "a run of its own")
    first = outline["first"]
    if first:
        out.append(f"  the step goes back or repeats at {outline['goes_back']:,} place(s), first at line "
                   f"{first['line']:,} (step {first['step']:g} after step {first['after']:g}): a resume from a "
                   "checkpoint, another writer or a slipped step counter (`check` names which); every line is kept")
    return out


def _one_blas_thread() -> None:
    """Ingest makes no BLAS call, yet OpenBLAS starts a worker thread per CPU when NumPy
    loads, and they spin on the CPUs Arrow's parsers need (~0.1 CPU-s of a 100 MB ingest
    on 2 CPUs). A thread count the user set is kept."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _print_human(path: str, res) -> None:
    if res.duplicate_of:
        say(f"{terminal_safe(path)}: {terminal_safe(res.duplicate_text())} ({res.rows} rows)")
        return
    steps = "" if res.first_step is None else f", steps {res.first_step}..{res.last_step}"
    say(f"{terminal_safe(path)}: stored run {res.run_id}: {res.rows} rows, {len(res.columns)} columns"
          f"{steps}, {res.rejected_count} rejected lines")
    for r in res.rejected[:10]:
        say(f"  line {r['line']}: {terminal_safe(r['reason'])}")
    if res.rejected_count > 10:
        say(f"  ... and {res.rejected_count - 10} more (in the run's _rejects.jsonl)")
    for col, kinds in res.coerced.items():
        what = ", ".join(f"{n} {kind}" for kind, n in kinds.items())
        say(f"  {terminal_safe(col)}: {what} value(s) stored as {res.meta['columns'].get(col, '?')} (lossless)")
    if res.aside_count:
        say(f"  {res.aside_count} value(s) did not fit their column's type and were set aside "
              "(kept in the run's _conflicts.jsonl):")
        for a in res.aside[:5]:
            say(f"    line {a['line']}: {terminal_safe(a['field'])} = {terminal_safe(a['value'][:60])} (column is {a['type']})")
