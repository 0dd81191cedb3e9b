"""``python -m regime_dash ingest PATH... [--store DIR] [--name NAME] [--json]``.

Stores each diag.jsonl (plain or gzip) as a run. Exit status: 0 when every file was
stored (or was already stored); rejected lines and values set aside are reported, not
a failure. 2 when a file could not be read (missing, unreadable, corrupt gzip, no JSON
object line at all) or the store could not be written (disk full, permission denied);
the other files are still ingested. ``check``, ``diff`` and ``rm`` then accept the
``--name`` given here when one run has it, and the full run id always.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TextIO

from tqdm import tqdm

from regime_dash.errors import IngestError, StoreError


def _screen(stream: TextIO) -> tuple[int, int]:
    """The terminal's columns and rows; 80 x 24 where it reports none (a fresh pty says
    0 x 0, and tqdm would then trim the line to nothing, or not draw it at all)."""
    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return 80, 24
    return size.columns or 80, size.lines or 24


class ProgressBar:
    """A one-line terminal progress bar on stderr (a :mod:`tqdm` bar; the caller draws
    it only on a terminal): bytes read in MB, percent of the source, MB/s.

    Parameters
    ----------
    label
        Text before the bar (the file name).
    stream
        Where to draw; defaults to ``sys.stderr``.
    width
        Characters of the bar itself.
    """

    def __init__(self, label: str, stream: TextIO | None = None, width: int = 30):
        self.label = label
        self.stream = stream or sys.stderr
        self.width = width
        self._bar: tqdm | None = None

    def __call__(self, done: int, total: int | None) -> None:
        if self._bar is None:  # the first call says whether the size is known
            fmt = (f"{{desc}} [{{bar:{self.width}}}] {{percentage:3.0f}}% {{n:8.1f}} MB {{rate_fmt}}" if total
                   else "{desc} {n:8.1f} MB {rate_fmt}")
            cols, rows = _screen(self.stream)
            # count bytes (exact fractions), show MB; the average rate; at most ten redraws a second
            self._bar = tqdm(total=total or None, desc=self.label, unit="MB", unit_scale=1e-6,
                             file=self.stream, mininterval=0.1, smoothing=0, ascii="-#", bar_format=fmt,
                             ncols=cols, nrows=rows)
        self._bar.update(done - self._bar.n)

    def close(self) -> None:
        """Draw the final state and end the line."""
        if self._bar is not None:
            self._bar.close()


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ingest", help="store diag.jsonl files (plain or .gz) as runs",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="+", metavar="PATH", help="diag.jsonl or diag.jsonl.gz files")
    p.add_argument("--store", metavar="DIR", default=None,
                   help="run store directory (default: $REGIME_DASH_STORE or ./data/store)")
    p.add_argument("--name", default=None, help="run name (default: the file name)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON array with an object per file")
    p.add_argument("--max-line-mb", type=float, default=None, metavar="MB",
                   help="reject lines longer than this, unread (default 64)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from regime_dash.store import RunStore

    from regime_dash.errors import ValidationError

    kw = {}
    if args.max_line_mb is not None:
        if not args.max_line_mb > 0:
            raise ValidationError(f"--max-line-mb must be > 0, got {args.max_line_mb!r}",
                                  field="max_line_mb", value=args.max_line_mb)
        kw["max_line_bytes"] = max(1, int(args.max_line_mb * 2**20))
    store = RunStore(args.store, **kw)
    results = []
    rc = 0
    tty = sys.stderr.isatty()
    for path in args.paths:
        bar = ProgressBar(Path(path).name) if tty else None
        try:
            res = store.ingest(path, name=args.name, progress=bar)
        except (IngestError, StoreError) as exc:
            rc = 2
            if bar is not None:
                bar.close()
            print(f"error: {exc}", file=sys.stderr)
            results.append({"path": path, "run_id": None, "error": str(exc)})
            continue
        if bar is not None:
            bar.close()
        obj = res.to_dict()
        obj["path"] = path
        results.append(obj)
        if not args.json:
            _print_human(path, res)
    if args.json:
        json.dump(results, sys.stdout, indent=None if len(results) > 20 else 1, default=str)
        sys.stdout.write("\n")
    return rc


def _print_human(path: str, res) -> None:
    if res.duplicate_of:
        print(f"{path}: already stored as {res.duplicate_of} ({res.rows} rows)")
        return
    steps = "" if res.first_step is None else f", steps {res.first_step}..{res.last_step}"
    print(f"{path}: stored run {res.run_id}: {res.rows} rows, {len(res.columns)} columns"
          f"{steps}, {res.rejected_count} rejected lines")
    for r in res.rejected[:10]:
        print(f"  line {r['line']}: {r['reason']}")
    if res.rejected_count > 10:
        print(f"  ... and {res.rejected_count - 10} more (in the run's _rejects.jsonl)")
    for col, kinds in res.coerced.items():
        what = ", ".join(f"{n} {kind}" for kind, n in kinds.items())
        print(f"  {col}: {what} value(s) stored as {res.meta['columns'].get(col, '?')} (lossless)")
    if res.aside_count:
        print(f"  {res.aside_count} value(s) did not fit their column's type and were set aside "
              "(kept in the run's _conflicts.jsonl):")
        for a in res.aside[:5]:
            print(f"    line {a['line']}: {a['field']} = {a['value'][:60]} (column is {a['type']})")
