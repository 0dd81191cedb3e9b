"""The import layers of docs/LAYOUT.md, enforced on the import statements of ``regime_dash/``.

:data:`LAYERS` is the one machine-readable copy of LAYOUT.md's table "What may import
what"; :func:`test_layout_md_holds_the_layer_table` checks that LAYOUT.md shows exactly it.

How imports are read (with :mod:`ast`, nothing is imported):

* Every ``import`` and ``from ... import`` statement counts, wherever it sits: at module
  level, inside a function or a method, or under ``if TYPE_CHECKING:``. A function-level
  import changes *when* the imported module loads, not *whether* the importer depends on
  it, so it may neither go up the table nor close a cycle, exactly like a module-level one.
* An import names the most specific module of ours it reaches: ``from regime_dash.engine
  import fast`` imports ``regime_dash.engine.fast``; ``from regime_dash.engine import
  replay`` imports ``regime_dash.engine`` (its ``__init__``). Relative imports resolve the
  same way. The packages a dotted name passes through (whose ``__init__`` Python runs
  first) are not counted as imports of their own.
* Names imported at run time (``importlib.import_module``) are not import statements and
  are not seen: the code uses them only for plug-ins named as data (the engine backends,
  the CLI's commands, the check providers of :mod:`regime_dash.analysis.registry`).

A violation names the importing module, the line and the module it imports.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "regime_dash"
ROOT_MODULE = "__init__"  # the member name of the package's own __init__ (the lazy public API)


@dataclass(frozen=True)
class Layer:
    """One row of the table: its members may import their own layer and the layers in ``imports``."""

    name: str
    #: names directly under regime_dash/: a module, or a package with every module in it
    members: tuple[str, ...]
    #: the layers above this one that every member may import
    imports: tuple[str, ...] = ()
    #: (member, more layers): a member that may import more layers than the rest
    also: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: members import only members listed before them
    ordered: bool = False
    #: (a, b): member a never imports member b
    apart: tuple[tuple[str, str], ...] = ()


#: What may import what: a layer imports its own layer and the layers it names, never one below it.
LAYERS: tuple[Layer, ...] = (
    Layer("base", ("errors", "text", "diag_jsonl", "shards", "params", "config", "streams", "slots", "diag", "aliases",
                   "panel_set"),
          ordered=True),
    Layer("edge", ("ingest", "store", "store_doctor", "store_append", "store_labels", "store_layouts", "tail",
                     "alerts", "export", "live_frame"), ("base",)),
    Layer("engines", ("engine",), ("base",)),
    Layer("sources and runs", (ROOT_MODULE, "market", "market_jit", "scenarios", "simulator", "simulator_jit",
                                  "samples", "live", "distributed", "sweep"),
          ("base", "engines")),
    Layer("analysis", ("analysis", "sensitivity", "check_all", "follow", "run_table"), ("base", "engines"),
          also=(("sensitivity", ("sources and runs",)), ("check_all", ("edge", "sources and runs")),
                ("follow", ("edge",)), ("run_table", ("edge",)))),
    Layer("figures", ("figures", "figures_overlay", "figures_duty", "figures_sensitivity", "figures_compare",
                       "figures_custom", "plotly_arrays"),
          ("base", "analysis")),
    Layer("controllers", ("modules",), ("base", "engines", "sources and runs", "analysis", "figures")),
    Layer("shells", ("cli", "benchmarks", "ui", "__main__"),
          ("base", "edge", "engines", "sources and runs", "analysis", "figures", "controllers"),
          apart=(("cli", "ui"), ("ui", "cli"), ("benchmarks", "ui"), ("ui", "benchmarks"))),
)


# ---- reading the imports ----------------------------------------------------------------
@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name
    imported: str
    line: int

    def __str__(self) -> str:
        return f"{self.importer} (line {self.line}) imports {self.imported}"


def modules_of(root: Path, package: str) -> dict[str, tuple[Path, bool]]:
    """``{dotted name: (file, is a package __init__)}`` of every module under ``root/package``:
    its Python files, and its C sources, each compiled into an extension module of its name
    (``setup.py``), which imports none of ours."""
    out = {}
    for path in sorted([*(root / package).rglob("*.py"), *(root / package).rglob("*.c")]):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return out


def _nearest(name: str, modules) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _targets(node: ast.AST, here: str, is_pkg: bool, modules) -> list[str]:
    if isinstance(node, ast.Import):
        return [t for a in node.names if (t := _nearest(a.name, modules))]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        base = (here if is_pkg else here.rpartition(".")[0]).split(".")
        base = base[:len(base) - node.level + 1]
        full = ".".join(base + ([node.module] if node.module else []))
    else:
        full = node.module or ""
    if full.split(".")[0] not in {m.split(".")[0] for m in modules}:
        return []
    return [f"{full}.{a.name}" if f"{full}.{a.name}" in modules else _nearest(full, modules) for a in node.names]


def imports_of(root: Path, package: str) -> list[Import]:
    """Every import of one of the package's modules by another (see the module docstring)."""
    modules = modules_of(root, package)
    out = []
    for name, (path, is_pkg) in modules.items():
        if path.suffix != ".py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for target in _targets(node, name, is_pkg, modules):
                if target and target != name:
                    out.append(Import(name, target, node.lineno))
    return sorted(set(out), key=lambda i: (i.importer, i.line, i.imported))


# ---- the two rules ------------------------------------------------------------------------
def cycles(imports: list[Import]) -> list[list[Import]]:
    """The imports inside each group of modules that import each other round in a circle (Tarjan's SCCs)."""
    graph: dict[str, set[str]] = {}
    for i in imports:
        graph.setdefault(i.importer, set()).add(i.imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [[i for i in imports if i.importer in g and i.imported in g] for g in groups]


def member_of(module: str, package: str = PACKAGE) -> str:
    """The name under regime_dash/ a module belongs to (:data:`ROOT_MODULE` for the package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT_MODULE


def upward(imports: list[Import], layers: tuple[Layer, ...] = LAYERS) -> list[str]:
    """Each import the table does not allow, with the rule it breaks."""
    layer_of = {m: layer for layer in layers for m in layer.members}
    out = []
    for i in imports:
        a, b = member_of(i.importer), member_of(i.imported)
        la, lb = layer_of.get(a), layer_of.get(b)
        if la is None or lb is None:
            out.append(f"{i}: {a if la is None else b!r} is in no layer of the table")
        elif la is lb:
            if (a, b) in la.apart:
                out.append(f"{i}: in {la.name}, {a} never imports {b}")
            elif la.ordered and a != b and la.members.index(b) > la.members.index(a):
                out.append(f"{i}: in {la.name}, {a} imports only the members listed before it")
        elif lb.name not in la.imports + dict(la.also).get(a, ()):
            out.append(f"{i}: {a} ({la.name}) may not import {b} ({lb.name})")
    return out


# ---- the table as LAYOUT.md shows it --------------------------------------------------------
def _shown(member: str, root: Path = ROOT) -> str:
    if member == ROOT_MODULE:
        return f"`{PACKAGE}` (its `__init__`)"
    return f"`{member}/`" if (root / PACKAGE / member).is_dir() else f"`{member}`"


def _rule(layer: Layer) -> str:
    parts = [", ".join(layer.imports)] if layer.imports else []
    if layer.ordered:
        parts.append("each other, each only those listed before it")
    parts += [f"`{m}` also {', '.join(more)}" for m, more in layer.also]
    parts += [f"`{a}` never `{b}`" for a, b in layer.apart]
    return "; ".join(parts)


def layer_table(layers: tuple[Layer, ...] = LAYERS) -> str:
    """The markdown table docs/LAYOUT.md shows under "What may import what"."""
    rows = ["| layer | modules | imports (of ours) |", "| --- | --- | --- |"]
    rows += [f"| {la.name} | {', '.join(_shown(m) for m in la.members)} | {_rule(la)} |" for la in layers]
    return "\n".join(rows)


# ---- the tests -----------------------------------------------------------------------------
@pytest.mark.slow  # the package's import graph built: ~1.5 s of CPU
def test_no_import_cycles():
    found = cycles(imports_of(ROOT, PACKAGE))
    assert not found, "import cycles:\n" + "\n\n".join("\n".join(map(str, c)) for c in found)


@pytest.mark.slow  # the package's import graph built: ~1.6 s of CPU
def test_no_import_goes_up_the_layer_table():
    found = upward(imports_of(ROOT, PACKAGE))
    assert not found, "imports against docs/LAYOUT.md's layer table:\n" + "\n".join(found)


def test_every_module_is_in_exactly_one_layer():
    members = [m for layer in LAYERS for m in layer.members]
    assert len(members) == len(set(members)), "a name is in two layers"
    placed = set(members)
    loose = sorted({member_of(m) for m in modules_of(ROOT, PACKAGE)} - placed)
    assert not loose, f"modules in no layer of the table (add them to LAYERS and docs/LAYOUT.md): {loose}"
    names = {la.name for la in LAYERS}
    for la in LAYERS:  # a layer names only layers above it
        above = {x.name for x in LAYERS[:LAYERS.index(la)]}
        assert set(la.imports) <= above and all(set(more) <= above for _, more in la.also), la.name
        assert {m for m, _ in la.also} | {m for pair in la.apart for m in pair} <= set(la.members), la.name
    assert names == {la.name for la in LAYERS}


def test_layout_md_holds_the_layer_table():
    text = (ROOT / "docs" / "LAYOUT.md").read_text(encoding="utf-8")
    table = layer_table()
    assert table in text, "docs/LAYOUT.md's layer table differs from tests/test_layers.py's LAYERS; it should read:\n" + table


# ---- the checker on a tree made to break it ------------------------------------------------
def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, body in files.items():
        path = tmp_path / "pkg" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
    return tmp_path


def test_the_checker_finds_function_level_cycles_and_names_their_lines(tmp_path):
    root = _tree(tmp_path, {"__init__.py": "", "a.py": "from pkg import b\n",
                            "b.py": "def f():\n    from pkg.sub import c\n",
                            "sub/__init__.py": "", "sub/c.py": "from .. import a\nimport os\n"})
    found = cycles(imports_of(root, "pkg"))
    assert [sorted(map(str, c)) for c in found] == [sorted(["pkg.a (line 1) imports pkg.b",
                                                            "pkg.b (line 2) imports pkg.sub.c",
                                                            "pkg.sub.c (line 1) imports pkg.a"])]


def test_the_checker_finds_upward_apart_and_out_of_order_imports(tmp_path):
    root = _tree(tmp_path, {"__init__.py": "", "low.py": "from typing import TYPE_CHECKING\n"
                            "if TYPE_CHECKING:\n    from pkg.high import X\n",
                            "first.py": "from . import second\n", "second.py": "",
                            "high.py": "import pkg.low\n", "left.py": "from pkg import right\n", "right.py": ""})
    layers = (Layer("base", ("first", "second", "low"), ordered=True),
              Layer("top", ("high", "left", "right", ROOT_MODULE), ("base",), apart=(("left", "right"),)))
    found = upward(imports_of(root, "pkg"), layers)
    assert found == ["pkg.first (line 1) imports pkg.second: in base, first imports only the members listed "
                     "before it",
                     "pkg.left (line 1) imports pkg.right: in top, left never imports right",
                     "pkg.low (line 3) imports pkg.high: low (base) may not import high (top)"]
