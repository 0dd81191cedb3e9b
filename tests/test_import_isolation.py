"""`import regime_dash` (and the CLI's core) must not pull in the UI or GPU stacks."""
from __future__ import annotations

import subprocess
import sys

import pytest


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint('\\n'.join(sys.modules))"],
                         capture_output=True, text=True, check=True)
    return set(out.stdout.split())


@pytest.mark.slow  # fresh interpreters
def test_import_regime_dash_imports_no_streamlit_plotly_or_cupy():
    mods = _modules_after("import regime_dash, regime_dash.engine.reference, regime_dash.diag.catalogue")
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
    mods = _modules_after("import regime_dash.ingest, regime_dash.store.run_store")
    assert "numba" not in mods
    assert "regime_dash.engine" not in mods


@pytest.mark.slow  # fresh interpreters
def test_lazy_top_level_names_resolve_and_sweep_stays_the_function():
    out = subprocess.run([sys.executable, "-c",
                          "import regime_dash.runs.sweeps, regime_dash as rd\n"
                          "print(callable(rd.sweep), rd.sweep.__module__, rd.replay.__name__, rd.Stream.__name__)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "regime_dash.runs.sweeps", "replay", "Stream"]


def test_cli_help_imports_no_heavy_library_and_no_command_module():
    """``python -m regime_dash --help`` builds its parser from the command table alone (lean start)."""
    code = ("import runpy, sys\nsys.argv = ['regime_dash', '--help']\n"
            "try:\n    runpy.run_module('regime_dash', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "print('MODULES', ' '.join(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "replay a stream, a scenario preset" in out  # the help was printed
    mods = set(out.rsplit("MODULES", 1)[1].split())
    for heavy in ("pandas", "numba", "pyarrow", "numpy"):
        assert heavy not in mods, f"--help imported {heavy}"
    assert not {m for m in mods if m.startswith("regime_dash.cli.")}, "--help imported a command module"


def _help(parser, argv, capsys) -> str:
    with pytest.raises(SystemExit) as done:
        parser.parse_args(argv)
    assert done.value.code == 0
    return capsys.readouterr().out


def test_each_command_still_gets_its_full_parser(capsys):
    """The command being run is registered by its module, in full: its --help is more than the
    one line the table gives the commands that are not run."""
    from regime_dash.cli import COMMANDS, build_parser

    args = build_parser(["replay", "--scenario", "kelly_trap_run8", "--out", "x.jsonl"]).parse_args(
        ["replay", "--scenario", "kelly_trap_run8", "--out", "x.jsonl"])
    assert args.scenario == "kelly_trap_run8" and callable(args.func)
    for name in COMMANDS:
        listed = _help(build_parser(["--help"]), [name, "--help"], capsys)  # "--help" first: no command chosen
        full = _help(build_parser([name, "--help"]), [name, "--help"], capsys)
        assert listed.startswith(f"usage: python -m regime_dash {name} [-h]\n")
        assert len(full) > len(listed) and f"python -m regime_dash {name}" in full, name


def test_clean_cli_ingest_imports_no_pandas_nor_pyarrow_compute(tmp_path):
    """A clean diag's ingest builds its columns without pyarrow's pandas shim
    (``regime_dash.ingest.arrays``): importing pandas cost a fresh ``ingest`` half a second."""
    from regime_dash.benchmarks.ingest import make_diag_file

    src = tmp_path / "run.diag.jsonl"
    make_diag_file(src, 9, seed=3)  # several chunks, so later ones are renumbered
    code = ("import runpy, sys\n"
            f"sys.argv = ['regime_dash', 'ingest', {str(src)!r}, '--store', {str(tmp_path / 'store')!r}, '--json']\n"
            "try:\n    runpy.run_module('regime_dash', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "print('MODULES', ' '.join(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    stored, mods = out.rsplit("MODULES", 1)
    assert '"rows": ' in stored and '"rejected_count": 0' in stored
    assert "pandas" not in mods.split()
    # nor pyarrow.compute (~0.13 s to import): the clean path's checks and casts are NumPy's
    assert "pyarrow.compute" not in mods.split()
