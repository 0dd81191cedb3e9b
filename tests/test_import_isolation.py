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


def test_import_ingest_leaves_numba_and_the_engines_unloaded():
    mods = _modules_after("import regime_dash.ingest, regime_dash.store")
    assert "numba" not in mods
    assert "regime_dash.engine" not in mods


def test_lazy_top_level_names_resolve_and_sweep_stays_the_function():
    out = subprocess.run([sys.executable, "-c",
                          "import regime_dash.sweep, regime_dash as rd\n"
                          "print(callable(rd.sweep), rd.sweep.__module__, rd.replay.__name__, rd.Stream.__name__)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "regime_dash.sweep", "replay", "Stream"]
