"""The package's code says why, not when: no dates, issue numbers or files outside this repository.

History lives in git and the current figures in docs/BENCHMARKS.md; a comment that names an issue, a
date or a design file this repository does not hold goes stale the day it is written. The vendored
plotly bundle is someone else's minified code and is left out; the kernels keep the spec's own
comments verbatim (the spec numbers its review points ``issue #N``, which this does not match).
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "regime_dash"
FORBIDDEN = re.compile(r"DESIGN\.md|\bissue [0-9]|\b20[0-9]{2}-[0-9]{2}-[0-9]{2}\b|_index_key|fragment_ids_this_run"
                       r"|\.\./shared")
SKIP = {"plotly_assets"}


def test_no_dates_issue_numbers_or_outside_files_in_the_package():
    hits = []
    for path in sorted(ROOT.rglob("*")):
        if not path.is_file() or SKIP & set(path.parts) or path.suffix not in (".py", ".cu", ".cuh", ".csv", ".md"):
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if FORBIDDEN.search(line):
                hits.append(f"{path.relative_to(ROOT.parent)}:{n}: {line.strip()[:100]}")
    assert hits == [], "\n".join(hits)
