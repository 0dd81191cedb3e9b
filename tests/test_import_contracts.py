"""The layers of docs/LAYOUT.md, kept by import-linter's contracts in pyproject.toml.

pyproject.toml's ``[tool.importlinter]`` is the one source of truth for what may import
what: every import statement counts (function-level ones too), cycles between siblings are
refused, and a ``_private`` module is imported only inside its own package. These tests
run ``lint-imports`` on the checkout and check that no top-level part of the package
escapes the layers.
"""
from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "regime_dash"
LINT = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"


def _contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]


def test_lint_imports_keeps_every_contract():
    done = subprocess.run([sys.executable, "-c", LINT], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts:" in done.stdout and ", 0 broken." in done.stdout


def test_every_part_of_the_package_stands_in_a_layer():
    layers = next(c for c in _contracts() if c["type"] == "layers")["layers"]
    named = {m.strip().removeprefix("regime_dash.") for line in layers for m in line.split("|")}
    parts = {p.stem if p.suffix == ".py" else p.name for p in PACKAGE.iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
    assert parts - named == set(), f"not in any layer of pyproject.toml: {sorted(parts - named)}"


def test_the_contracts_cover_cycles_private_modules_and_streamlit():
    kinds = {c["type"] for c in _contracts()}
    assert {"layers", "acyclic_siblings", "private_modules", "forbidden"} <= kinds
    streamlit = next(c for c in _contracts() if c.get("forbidden_modules") == ["streamlit"])
    layered = {m.strip() for line in next(c for c in _contracts() if c["type"] == "layers")["layers"]
               for m in line.split("|")}
    assert layered - set(streamlit["source_modules"]) == {"regime_dash.ui"}
