"""No function of ``regime_dash/`` is over 80 lines and no class over 400.

A long function does several things a reader has to hold at once; a split by meaning gives
each a name. The files are read with :mod:`ast` (nothing is imported); a function's length
runs from its ``def`` line to its last line (decorators not counted), nested functions
included in their outer one and counted on their own as well. Every offender is listed in
the failure as ``file:line name (N lines)``.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "regime_dash"
MAX_FUNCTION_LINES = 80
MAX_CLASS_LINES = 400

#: Functions allowed past the limit, each with why.
ALLOWED = {
    # the shape path's numba scanner: the number reader is written out in the loop because a
    # compiled call, even inlined, makes the scanner a third slower (see its comments)
    ("regime_dash/ingest/shape_jit.py", "match_lines"),
}


def _spans(path: Path) -> list[tuple[str, int, int, str]]:
    """``(kind, line, length, name)`` of every function and class of ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append(("function", node.lineno, node.end_lineno - node.lineno + 1, node.name))
        elif isinstance(node, ast.ClassDef):
            out.append(("class", node.lineno, node.end_lineno - node.lineno + 1, node.name))
    return out


def offenders(root: Path = PACKAGE, allowed: set[tuple[str, str]] = ALLOWED) -> list[str]:
    """Every function over :data:`MAX_FUNCTION_LINES` (but the allowed ones) and class over
    :data:`MAX_CLASS_LINES` under ``root``, as ``file:line kind name (N lines)``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        for kind, line, length, name in _spans(path):
            limit = MAX_FUNCTION_LINES if kind == "function" else MAX_CLASS_LINES
            if length > limit and (rel, name) not in allowed:
                found.append(f"{rel}:{line} {kind} {name} ({length} lines, at most {limit})")
    return found


def test_no_function_or_class_over_its_limit():
    found = offenders()
    assert not found, "too long (split by meaning):\n" + "\n".join(found)


def test_allowed_names_still_exist_and_are_still_long():
    """An allow-list entry that no longer needs it is taken off, so the list stays short and true."""
    stale = []
    for rel, name in ALLOWED:
        lengths = [n for kind, _, n, nm in _spans(ROOT / rel) if kind == "function" and nm == name]
        if not lengths or max(lengths) <= MAX_FUNCTION_LINES:
            stale.append(f"{rel} {name}")
    assert not stale, "allowed but no longer over the limit (take them off ALLOWED): " + ", ".join(stale)


def test_the_check_finds_a_planted_long_function_and_class(tmp_path):
    """A real file with a function of 81 lines and a class of 401 is reported, each by name."""
    pkg = tmp_path / "regime_dash"
    pkg.mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(80))
    members = "".join(f"    y{i} = {i}\n" for i in range(400))
    (pkg / "long.py").write_text(f"def too_long():\n{body}\n\ndef fine():\n    return 1\n\n\n"
                                 f"class TooBig:\n{members}")
    found = offenders(pkg, allowed=set())
    assert found == ["regime_dash/long.py:1 function too_long (81 lines, at most 80)",
                     "regime_dash/long.py:88 class TooBig (401 lines, at most 400)"]
    assert offenders(pkg, allowed={("regime_dash/long.py", "too_long")}) == found[1:]
