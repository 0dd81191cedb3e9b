"""docs/CHECKS.md is the check registry, rendered: every check and formula is in it, and it is current."""
from __future__ import annotations

from pathlib import Path

from regime_dash.analysis.catalogue import markdown
from regime_dash.analysis.invariants import CHECKS
from regime_dash.analysis.rederive_formulas import FORMULAS

DOC = Path(__file__).resolve().parents[1] / "docs" / "CHECKS.md"


def test_checks_md_is_generated_from_the_registry_and_current():
    text = markdown()
    for c in (*CHECKS, *FORMULAS):
        assert f"`{getattr(c, 'check_id', getattr(c, 'id', None))}`" in text
    assert DOC.read_text(encoding="utf-8") == text, (
        "docs/CHECKS.md is stale: run `python3 -m regime_dash.analysis.catalogue`")
