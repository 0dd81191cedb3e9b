"""docs/CHECKS.md, generated from the check registry: every check, every re-derived formula, its tolerance.

:func:`markdown` renders the catalogue from the registries themselves (the core
checks of :mod:`.invariants`, the formulas of :mod:`.rederive_formulas`, the bounds of
:mod:`.coverage` and the ids each provider of :mod:`.registry` runs), so the page
cannot drift from the code: ``tests/test_check_catalogue.py`` compares it with the
file. Regenerate with ``python3 -m regime_dash.analysis.catalogue``.
"""
from __future__ import annotations

from pathlib import Path

from regime_dash.analysis import registry
from regime_dash.analysis.coverage import BOUNDS
from regime_dash.analysis.invariants import CHECKS
from regime_dash.analysis.rederive_formulas import FORMULAS, INPUT_FIELDS
from regime_dash.analysis.structure import STRUCTURE

_HEAD = """# Checks

Generated from the check registry by `python3 -m regime_dash.analysis.catalogue`; a test
keeps it current. `check RUN --json` reports every one of these per run, and a `coverage`
block with one entry per logged field: `rederived`, `bounded only`, `not checkable` (with
what it needs) or `input`.

## Re-derived formulas

Each `rederive.*` check recomputes one logged output for every row `t` from the logged rows
`t−1` and `t`, through the reference engine's own step functions (`engine/rederive.py`), and
compares it with the logged value. Each row starts from the logged state, so one wrong formula
shows in its own output only. A failure lists every divergent step, the expected and the logged
value and the inputs it used.

**Tolerance.** Exact, bit for bit, by default: the kernels and the three engines compute in
float32 with `--fmad=false` and correctly rounded division and square root, so a correct run
logs exactly what the formula gives. A trainer built with FMA contraction can round a
multiply-add once instead of twice, by at most one ulp of the result per contracted site:
`check --rederive-ulps N` loosens the formulas marked *multiply-add* below, and only those.
Flags, counters and selections (a `max`, a branch) are always exact. The Welford variance is
carried from the run's first step, so under FMA contraction its ulps can add up over a long run.

| check | field | kernel | formula | needs beyond the diag block | tolerance |
| --- | --- | --- | --- | --- | --- |
"""


def _formula_rows() -> list[str]:
    rows = []
    for f in FORMULAS:
        needs = ", ".join(f"`{n}`" for n in f.needs) or "—"
        if f.chain:
            needs += " (and a run logged from step 0: the Welford mean and M2 are carried)"
        tol = "exact; multiply-add" if f.fma else "exact"
        rows.append(f"| `{f.check_id}` | `{f.column}` | {f.kernel} | {f.text} | {needs} | {tol} |")
    return rows


def _check_rows() -> list[str]:
    return [f"| `{c.id}` | {c.title.replace('|', '/')} | {', '.join(f'`{n}`' for n in c.needs) or '—'} |"
            for c in CHECKS]


def markdown() -> str:
    """The text of docs/CHECKS.md."""
    out = [_HEAD.rstrip("\n"), *_formula_rows(), "", "## Invariants and success criteria", "",
           "Bounds, identities and the spec's success criteria, on every row they apply to.", "",
           "| check | what it checks | fields |", "| --- | --- | --- |", *_check_rows(), "",
           "## Fields bounded, not recomputed", "",
           "Where no formula can run (an input the diag does not log), these checks still bound the field.",
           "", "| field | bounded by |", "| --- | --- |"]
    out += [f"| `{col}` | {', '.join(f'`{c}`' for c in ids)} |" for col, ids in BOUNDS.items()]
    out += ["", "## The structure of a run", "",
            "Before the checks, `check` reads the run in the file's order (docs/STRUCTURE.md): its segments "
            "(resumes from a checkpoint), its writers, its config over time and its steps. Each finding is "
            "named at its row; the coverage block's `structure` says which of these ran and why any did not.",
            "", "| finding | severity | when |", "| --- | --- | --- |"]
    out += [f"| `{i}` | {sev} | {when} |" for i, sev, when in STRUCTURE]
    out += ["", "## Inputs", "", "Recorded, nothing to recompute them from: "
            + ", ".join(f"`{c}`" for c in INPUT_FIELDS) + ".", "", "## Module checks", ""]
    for p in registry.providers():
        out.append(f"{p.name}: " + ", ".join(f"`{i}`" for i in p.check_ids()) + ".")
    return "\n".join(out) + "\n"


def write(path: str | Path = Path(__file__).resolve().parents[2] / "docs" / "CHECKS.md") -> Path:
    """Write :func:`markdown` to ``path`` (docs/CHECKS.md of the checkout by default)."""
    path = Path(path)
    path.write_text(markdown(), encoding="utf-8")
    return path


if __name__ == "__main__":
    print(write())
