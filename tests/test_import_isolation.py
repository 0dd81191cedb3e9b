"""`import regime_dash` (and the CLI's core) must not pull in the UI or GPU stacks."""
from __future__ import annotations

import subprocess
import sys


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint('\\n'.join(sys.modules))"],
                         capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_import_regime_dash_imports_no_streamlit_plotly_or_cupy():
    mods = _modules_after("import regime_dash, regime_dash.engine.reference, regime_dash.diag")
    assert "regime_dash" in mods
    for heavy in ("streamlit", "plotly", "cupy"):
        assert heavy not in mods, f"import regime_dash imported {heavy}"


def test_only_the_ui_imports_streamlit():
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1] / "regime_dash"
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if "ui" not in p.relative_to(root).parts
                 and any(line.strip().startswith(("import streamlit", "from streamlit"))
                         for line in p.read_text().splitlines())]
    assert offenders == []
