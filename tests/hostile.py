"""Hostile inputs for the ingest tests: good diag lines, the RSS bound, and the child
process helpers of the ingest benchmark (gzip bombs, peak RSS of one child from the
kernel, the Runs page's upload path in a child)."""
from __future__ import annotations

import json
from pathlib import Path

from regime_dash.benchmarks.ingest import (  # noqa: F401 - re-exported for the tests
    child_env,
    app_upload_args as app_upload,
    cli_args as cli,
    finish_child as finish_measured,
    start_child as start_measured,
    write_gzip_bomb as write_bomb,
)

REPO = Path(__file__).resolve().parents[1]

#: The stated bound on the peak RSS of one ingest process, whatever the input (bytes).
RSS_BOUND = 1 << 30


def good_lines(n: int, start: int = 0) -> bytes:
    return b"".join(json.dumps({"step": i, "fold": 0, "phase": "train",
                                "risk_stack": {"popart": {"sigma": 1.0 + i}}}).encode() + b"\n"
                    for i in range(start, start + n))


def run_measured(args: list[str], **kw) -> tuple[int, str, str, int]:
    """Run a child to its end: (exit status, stdout, stderr, peak RSS bytes)."""
    return finish_measured(*start_measured(args, **kw))
