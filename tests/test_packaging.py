"""The package installs and runs without the checkout.

The fast tests check what the package declares: pyproject's dependencies are
requirements.txt's, plotly's range ships the vendored plotly.js, and ``regime-dash app``
passes the checkout's streamlit server options. The slow one builds the wheel from a copy
of the sources, installs it into a fresh venv that sees the packages of the environment running
the tests (the system's or a virtualenv's: the heavy dependencies are the ones already installed;
``--no-deps --no-index``, so nothing is downloaded) and runs a smoke subset from a directory outside the checkout with the
checkout off ``sys.path``.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path

import pytest

from regime_dash.cli import app as cli_app

REPO = Path(__file__).resolve().parents[1]


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def _requirements(name: str) -> list[str]:
    """The requirement lines of ``name`` (comments, blank lines and ``-r`` includes left out)."""
    lines = (line.split("#", 1)[0].strip() for line in (REPO / name).read_text(encoding="utf-8").splitlines())
    return [line.replace(" ", "") for line in lines if line and not line.startswith("-r")]


def test_pyproject_dependencies_mirror_requirements_txt():
    declared = [d.replace(" ", "") for d in _pyproject()["project"]["dependencies"]]
    assert sorted(declared) == sorted(_requirements("requirements.txt"))


def test_the_components_manifest_names_the_project_and_the_chart_folder():
    """regime_dash/pyproject.toml, streamlit's components v2 manifest, has the project's name and
    version, ships in the package, and points the chart at the folder that holds its files."""
    from regime_dash.ui import plotly_react

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    manifest = tomllib.loads((REPO / "regime_dash" / "pyproject.toml").read_text(encoding="utf-8"))
    assert {k: manifest["project"][k] for k in ("name", "version")} == {
        k: project["project"][k] for k in ("name", "version")}
    assert "pyproject.toml" in project["tool"]["setuptools"]["package-data"]["regime_dash"]
    (entry,) = manifest["tool"]["streamlit"]["component"]["components"]
    assert plotly_react.NAME == f"{manifest['project']['name']}.{entry['name']}"
    folder = REPO / "regime_dash" / entry["asset_dir"]
    assert folder == plotly_react.ASSETS and (folder / "plotly_react.js").is_file()
    assert (folder / plotly_react.BUNDLE).is_file()


def test_console_script_is_the_cli_script():
    assert _pyproject()["project"]["scripts"] == {"regime-dash": "regime_dash.cli:script"}


def test_plotly_range_ships_the_vendored_plotly_js():
    import plotly
    import plotly.offline
    from importlib.metadata import version
    from regime_dash.ui import plotly_react

    bundle = re.fullmatch(r"plotly-cartesian-(\d+\.\d+\.\d+)\.min\.js", plotly_react.BUNDLE).group(1)
    assert plotly.offline.get_plotlyjs_version() == bundle
    pin = next(r for r in _requirements("requirements.txt") if r.startswith("plotly"))
    low, high = re.fullmatch(r"plotly>=([\d.]+),<([\d.]+)", pin).groups()
    installed = tuple(int(x) for x in version("plotly").split(".")[:2])
    assert tuple(int(x) for x in low.split(".")[:2]) <= installed < tuple(int(x) for x in high.split("."))


def test_app_passes_the_checkouts_streamlit_options():
    config = tomllib.loads((REPO / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    flat = {f"{section}.{key}": value for section, keys in config.items() for key, value in keys.items()}
    as_flags = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in flat.items()}
    assert cli_app.SERVER_OPTIONS == as_flags


def test_app_command_line_lets_streamlit_options_win():
    cmd = cli_app.streamlit_command(8600, ["--", "--server.address=0.0.0.0"])
    assert cmd[:4] == [sys.executable, "-m", "streamlit", "run"]
    assert Path(cmd[4]) == REPO / "regime_dash" / "ui" / "launch" / "app.py"
    assert cmd[cmd.index("--server.port") + 1] == "8600"
    assert "--server.address" not in cmd and cmd[-1] == "--server.address=0.0.0.0"


# ---- the built wheel, installed ------------------------------------------------------------
#: What the installed package must find through importlib.resources (printed as JSON).
RESOURCES_PROBE = """
import hashlib, json, sys
from importlib import resources
import regime_dash
from regime_dash.engine import loader
from regime_dash.ui import navigation, plotly_react
from regime_dash.ingest import shapes
root = resources.files("regime_dash")
scanner = shapes.native()
print(json.dumps({
    "package": regime_dash.__file__,
    "sys_path": sys.path,
    "kernels": sorted(p.name for p in root.joinpath("kernels").iterdir()),
    "kernel_dir": str(loader.KERNEL_DIR),
    "unit": loader.source_text(["rl_regime_observer.cu"])[:60],
    "bundle_sha256": hashlib.sha256(root.joinpath("ui", "plotly_assets", plotly_react.BUNDLE).read_bytes()).hexdigest(),
    "assets": str(plotly_react.ASSETS),
    "manifest": str(root.joinpath("pyproject.toml")),
    "pages": len(navigation.PAGES),
    "page_files": [f for f, _, _ in navigation.PAGES if (navigation.PAGES_DIR / f).is_file()],
    "scanner": None if scanner is None else scanner._c.__file__,
}))
"""


def _build_wheel(tmp: Path) -> Path:
    """Build the wheel from a copy of the sources (a build in the checkout would leave build/ there)."""
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(REPO / name, src / name)
    for folder in ("regime_dash", "kernels"):  # setup.py maps kernels/ into the package
        shutil.copytree(REPO / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so"))
    out = tmp / "dist"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "--no-index", "-q", "-w", str(out), str(src)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheels = list(out.glob("regime_dash-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def _parent_site_dirs() -> list[str]:
    """The site folders of the environment running the tests (a virtualenv's own, or the system's)."""
    import site

    dirs = site.getsitepackages() + ([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])
    return [d for d in dirs if Path(d).is_dir()]


def _venv_with(wheel: Path, tmp: Path) -> Path:
    """A fresh venv that sees the packages of the environment running the tests, with ``wheel``
    installed in it; its bin/.

    ``--system-site-packages`` shows the base interpreter's packages only: run from inside a
    virtualenv, those are not the ones the tests use (numpy, numba, ... missing). A ``.pth`` file
    adds this environment's site folders (their own ``.pth`` files read, as the system's are),
    after the venv's own site-packages, where the wheel goes."""
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
                   check=True, timeout=120)
    site_packages = next((venv / "lib").glob("python3*/site-packages"))
    (site_packages / "_regime_dash_test_parent_env.pth").write_text(
        "".join(f"import site; site.addsitedir({d!r})\n" for d in _parent_site_dirs()))
    py = venv / "bin" / "python"
    proc = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return venv / "bin"


def _env() -> dict[str, str]:
    """The environment without the checkout: no PYTHONPATH, and no store of the checkout's."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "REGIME_DASH_STORE")}


def _run(bin_dir: Path, cwd: Path, *args: str, ok=(0,), stream: str = "stdout") -> str:
    """Run the installed ``regime-dash`` with ``args`` in ``cwd``; its ``stream`` (replay reports on stderr)."""
    proc = subprocess.run([str(bin_dir / "regime-dash"), *args], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode in ok, f"regime-dash {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return getattr(proc, stream)


def _check_resources(bin_dir: Path, cwd: Path, site: Path) -> None:
    proc = subprocess.run([str(bin_dir / "python"), "-c", RESOURCES_PROBE], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert Path(got["package"]).is_relative_to(site), got["package"]
    assert not any(p and Path(p).resolve() == REPO for p in got["sys_path"]), got["sys_path"]
    assert Path(got["kernel_dir"]).is_relative_to(site)
    expected = sorted(p.name for p in (REPO / "kernels").iterdir() if p.suffix in (".cu", ".cuh"))
    assert got["kernels"] == expected
    assert got["unit"].startswith('#line 1 "kernels/rl_regime_observer.cu"\n')
    from regime_dash.ui import plotly_react

    bundle = REPO / "regime_dash" / "ui" / "plotly_assets" / plotly_react.BUNDLE
    assert got["bundle_sha256"] == hashlib.sha256(bundle.read_bytes()).hexdigest()
    assert Path(got["assets"]).is_relative_to(site)
    assert Path(got["manifest"]).is_relative_to(site) and Path(got["manifest"]).is_file()
    assert got["pages"] >= 7 and len(got["page_files"]) == got["pages"], got["page_files"]
    # the C scanner, compiled into the wheel (a fresh machine has gcc and Python's headers)
    assert got["scanner"] and Path(got["scanner"]).is_relative_to(site), got["scanner"]


def _app_answers(bin_dir: Path, cwd: Path, store: Path) -> None:
    from regime_dash.benchmarks.page_load import free_port, stop, wait_healthy

    port = free_port()
    log = open(cwd / "app.log", "w")
    proc = subprocess.Popen([str(bin_dir / "regime-dash"), "app", "--port", str(port), "--store", str(store)],
                            cwd=cwd, env=_env(), stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc, timeout=60)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as r:
            assert r.status == 200 and b"<html" in r.read(2000).lower()
        # the in-place chart declared the components v2 way: its asset_dir, from the package's
        # manifest, serves the bundle
        from regime_dash.ui import plotly_react

        url = f"http://127.0.0.1:{port}/_stcore/bidi-components/{plotly_react.NAME}/{plotly_react.BUNDLE}"
        with urllib.request.urlopen(url, timeout=10) as r:
            bundle = REPO / "regime_dash" / "ui" / "plotly_assets" / plotly_react.BUNDLE
            assert r.status == 200 and hashlib.sha256(r.read()).hexdigest() == hashlib.sha256(
                bundle.read_bytes()).hexdigest()
    finally:
        stop(proc)
        log.close()


@pytest.mark.slow  # a wheel build, a venv, four CLI runs and a streamlit start: ~30 s on 2 cores
def test_built_wheel_installs_and_runs_outside_the_checkout(tmp_path):
    wheel = _build_wheel(tmp_path)
    bin_dir = _venv_with(wheel, tmp_path)
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    work = tmp_path / "elsewhere"
    work.mkdir()

    assert "usage: regime-dash" in _run(bin_dir, work, "--help")
    assert "app" in _run(bin_dir, work, "--help")
    out = _run(bin_dir, work, "replay", "--scenario", "calm", "--steps", "200", "--out", "x.jsonl", stream="stderr")
    assert "200 steps" in out and (work / "x.jsonl").is_file()
    out = _run(bin_dir, work, "ingest", "--store", "store", "x.jsonl")
    assert "200 rows" in out and "0 rejected" in out
    verdict = json.loads(_run(bin_dir, work, "check", "--store", "store", "--json", "x", ok=(0, 1)))
    assert verdict["status"] in ("pass", "warn", "fail") and verdict["checks"], verdict.get("status")

    _check_resources(bin_dir, work, site)
    _app_answers(bin_dir, work, work / "store")
