"""No module of ``regime_dash/`` reaches another module's private (``_name``) names.

A name that starts with one underscore belongs to the module that defines it; what other
modules need is public (no underscore, a docstring). The files are read with :mod:`ast`
(nothing is imported), and every import statement counts, wherever it sits:

* ``from regime_dash.x import _name`` from any module but ``regime_dash.x`` itself. A
  package importing its own submodule's private name (``regime_dash/ingest/__init__.py``
  doing ``from regime_dash.ingest.arrow import _f``) is across modules too.
* ``import regime_dash.x._mod`` / ``from regime_dash.x._mod import f`` /
  ``from regime_dash.x import _mod``: a private submodule (``_mod.py``, or a compiled
  ``_mod`` extension) is private to its package: only modules of that package may import it.
* ``m._name`` where ``m`` is bound by an import to a module of ours
  (``import regime_dash.x as m``, ``from regime_dash import x as m``).

Dunder names (``__version__``) are not private. Every violation is listed in the failure,
each as ``file:line: what it takes``.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "regime_dash"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def module_name(path: Path, root: Path) -> tuple[str, bool]:
    """The dotted module name of a file under ``root``, and whether it is a package's ``__init__``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    is_pkg = parts[-1] == "__init__"
    if is_pkg:
        parts.pop()
    return ".".join(parts), is_pkg


def is_module(dotted: str, root: Path) -> bool:
    """Whether ``dotted`` names a module or package of ours (a ``.py``, a package, or a compiled extension)."""
    base = root.joinpath(*dotted.split("."))
    return (base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()
            or any(base.parent.glob(base.name + ".*.so")) or any(base.parent.glob(base.name + ".pyd")))


def _resolve(node: ast.ImportFrom, module: str, is_pkg: bool) -> str | None:
    if not node.level:
        return node.module
    base = module.split(".")
    if not is_pkg:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _private_module_problem(target: str, importer: str, importer_is_pkg: bool) -> str | None:
    """Why ``importer`` may not import the module ``target`` (a private component outside its package), else None."""
    parts = target.split(".")
    own_pkg = importer if importer_is_pkg else importer.rpartition(".")[0]
    for i, part in enumerate(parts):
        if _private(part):
            owner = ".".join(parts[:i])  # the package the private module belongs to
            if not (own_pkg == owner or own_pkg.startswith(owner + ".")):
                return f"private module {'.'.join(parts[: i + 1])} of package {owner}"
    return None


def violations_in(path: Path, root: Path = ROOT) -> list[str]:
    """Every reach of ``path`` into another module's private names, as ``file:line: what``."""
    module, is_pkg = module_name(path, root)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    rel = path.relative_to(root)
    out: list[str] = []
    bound: dict[str, str] = {}  # local name -> the module of ours it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] != PACKAGE:
                    continue
                why = _private_module_problem(a.name, module, is_pkg)
                if why:
                    out.append(f"{rel}:{node.lineno}: import {a.name} ({why})")
                if a.asname:
                    bound[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(node, module, is_pkg)
            if not target or target.split(".")[0] != PACKAGE:
                continue
            why = _private_module_problem(target, module, is_pkg)
            if why:
                out.append(f"{rel}:{node.lineno}: from {target} import ... ({why})")
            for a in node.names:
                full = f"{target}.{a.name}"
                if is_module(full, root):
                    bound[a.asname or a.name] = full
                    why = _private_module_problem(full, module, is_pkg)
                    if why and not _private_module_problem(target, module, is_pkg):
                        out.append(f"{rel}:{node.lineno}: from {target} import {a.name} ({why})")
                elif _private(a.name) and target != module:
                    out.append(f"{rel}:{node.lineno}: from {target} import {a.name}")
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name)
                and node.value.id in bound and bound[node.value.id] != module
                and not is_module(f"{bound[node.value.id]}.{node.attr}", root)):
            out.append(f"{rel}:{node.lineno}: {node.value.id}.{node.attr} (of {bound[node.value.id]})")
    return out


def all_violations() -> list[str]:
    """Every violation under ``regime_dash/``, each once, file by file."""
    return list(dict.fromkeys(v for p in sorted((ROOT / PACKAGE).rglob("*.py")) for v in violations_in(p)))


def test_no_module_imports_another_modules_private_names():
    found = all_violations()
    assert not found, (f"{len(found)} reach(es) into another module's private names (make the name public, "
                       "with a docstring, or keep its use in its module):\n" + "\n".join(found))


def _check_source(tmp_path: Path, rel: str, text: str) -> list[str]:
    """``violations_in`` of a file written at ``rel`` under a scratch package laid out like ours."""
    for pkg in (f"{PACKAGE}", f"{PACKAGE}/store", f"{PACKAGE}/engine"):
        (tmp_path / pkg).mkdir(parents=True, exist_ok=True)
        (tmp_path / pkg / "__init__.py").touch()
    (tmp_path / PACKAGE / "store" / "run_store.py").write_text("_META = 1\n")
    (tmp_path / PACKAGE / "engine" / "_jit.py").write_text("def jitable(f): return f\n")
    path = tmp_path / rel
    path.write_text(text)
    return violations_in(path, tmp_path)


def test_the_check_sees_each_form(tmp_path):
    """Each form of reach is caught, a module's own names and a package's private module used
    by its own modules are not."""
    bad = ("from regime_dash.store.run_store import _META\n"
           "from .run_store import _META as M\n"
           "from regime_dash.engine import _jit\n"
           "import regime_dash.engine._jit\n"
           "from regime_dash.engine._jit import jitable\n"
           "import regime_dash.store.run_store as rs\n"
           "x = rs._META\n")
    found = _check_source(tmp_path, f"{PACKAGE}/store/append.py", bad)
    assert [v.split(":")[1] for v in found] == ["1", "2", "3", "4", "5", "7"], found
    pkg = _check_source(tmp_path, f"{PACKAGE}/store/__init__.py", "from regime_dash.store.run_store import _META\n")
    assert len(pkg) == 1 and "_META" in pkg[0]
    fine = ("from regime_dash.engine import _jit\nfrom regime_dash.engine._jit import jitable\n"
            "from regime_dash.store.run_store import __doc__\n_own = 1\nprint(_own)\n")
    assert _check_source(tmp_path, f"{PACKAGE}/engine/fast.py", fine) == []
