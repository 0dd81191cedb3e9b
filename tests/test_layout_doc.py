"""docs/LAYOUT.md's tables name every module of the package, and only modules that exist.

LAYOUT.md has a section per folder, headed by the folder in backticks (``regime_dash/``
for the package's top level, ``engine/`` or ``analysis/structure/`` for a folder inside
it, ``kernels/`` for the repository's kernels); its table's first column names that
folder's files and subfolders in backticks. So the map cannot go stale: a module added,
moved or removed without its row fails here.
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "regime_dash"
LAYOUT = ROOT / "docs" / "LAYOUT.md"

_HEADING = re.compile(r"^#{2,4} `([A-Za-z0-9_./]+/)`\s*$")
_NAME = re.compile(r"`([^`]+)`")


def folder_of(heading: str) -> Path:
    """The folder a section's heading names: the package, the repository's kernels, or a folder of the package."""
    if heading == "regime_dash/":
        return PACKAGE
    if heading == "kernels/":
        return ROOT / "kernels"
    return PACKAGE / heading


def sections(text: str) -> dict[Path, set[str]]:
    """Each folder section of ``text`` and the names its table's first column gives."""
    found: dict[Path, set[str]] = {}
    names: set[str] | None = None
    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading:
            folder = folder_of(heading.group(1))
            assert folder not in found, f"LAYOUT.md has two sections for {heading.group(1)}"
            names = found[folder] = set()
        elif line.startswith("#"):
            names = None
        elif names is not None and line.startswith("| ") and not line.startswith("| ---"):
            first = line.split("|")[1]
            names.update(_NAME.findall(first))
    return found


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" and "__pycache__" not in p.parts)


def test_every_module_is_named_in_its_folders_table():
    found = sections(LAYOUT.read_text(encoding="utf-8"))
    missing = [str(p.relative_to(ROOT)) for p in modules() if p.name not in found.get(p.parent, set())]
    assert missing == [], f"modules LAYOUT.md does not name in their folder's table: {missing}"


def test_every_kernel_file_is_named_in_the_kernels_table():
    found = sections(LAYOUT.read_text(encoding="utf-8"))
    kernels = sorted(p.name for p in (ROOT / "kernels").iterdir() if p.suffix in (".cu", ".cuh"))
    assert kernels, "no kernel files found"
    missing = [k for k in kernels if k not in found.get(ROOT / "kernels", set())]
    assert missing == [], f"kernel files LAYOUT.md's kernels table does not name: {missing}"


def test_every_name_in_the_tables_exists():
    found = sections(LAYOUT.read_text(encoding="utf-8"))
    assert PACKAGE in found and ROOT / "kernels" in found, "LAYOUT.md lost its package or kernels section"
    absent = [str((folder / name).relative_to(ROOT)) for folder, names in found.items() for name in sorted(names)
              if not (folder / name.rstrip("/")).exists()]
    assert absent == [], f"LAYOUT.md names files or folders that do not exist: {absent}"


def test_every_folder_of_the_package_has_its_section():
    found = sections(LAYOUT.read_text(encoding="utf-8"))
    folders = {p.parent for p in modules()}
    assert sorted(str(f.relative_to(ROOT)) for f in folders - set(found)) == []


def test_the_parser_sees_a_missing_module(tmp_path):
    """The check itself can fail: a table without a module's row leaves that module unnamed."""
    text = LAYOUT.read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `verdict.py`"))
    found = sections(text.replace(row + "\n", ""))
    assert "verdict.py" not in found[PACKAGE / "analysis"]
    assert "view.py" in found[PACKAGE / "analysis"]
