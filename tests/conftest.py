"""Shared fixtures and the engine parametrization.

Tests that take the ``engine`` fixture run once per replay engine; an engine
that cannot run on this machine (no CUDA device, no cupy) is skipped with the
reason ``engine_status()`` gives. Tests marked ``gpu`` skip without a device.
The ``fast`` engine's numba kernels are compiled (or loaded from numba's
on-disk cache) once, before the first test, by :func:`numba_cache`.

Under CI (``CI`` set) the property tests run derandomized: the same examples on
every run, so a landing never depends on a lucky draw. Locally they explore new
examples each run and keep what failed in ``.hypothesis/``; an input that ever
found a bug is pinned with ``@example``.

Files a test keeps for a person (screenshots, measured figures) go to the session's
artifacts folder (:mod:`artifacts`), never into the checkout: :mod:`checkout_guard` fails
the session if it changed a tracked file or left one behind. :mod:`served_app` holds the
browser tests' shared streamlit server and chromium.
"""
from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path

import numpy as np
import pytest

from regime_dash.engine import ENGINES, engine_status

import artifacts

pytest_plugins = ["checkout_guard", "served_app"]

try:
    from hypothesis import settings as _hypothesis_settings
except ImportError:  # the GPU machine runs the engine tests without hypothesis
    _hypothesis_settings = None
else:
    _hypothesis_settings.register_profile("ci", derandomize=True, database=None)
    if os.environ.get("CI"):
        _hypothesis_settings.load_profile("ci")

_STATUS = engine_status()


def _engine_param(name: str):
    reason = _STATUS.get(name)
    marks = [pytest.mark.gpu] if name == "cuda" else []
    if reason is not None:
        marks.append(pytest.mark.skip(reason=f"engine {name!r} unavailable here: {reason}"))
    return pytest.param(name, marks=marks, id=name)


@pytest.fixture(params=[_engine_param(n) for n in ENGINES])
def engine(request) -> str:
    """Each replay engine in turn."""
    return request.param


def cuda_device_reason() -> str | None:
    """None when a CUDA device and cupy are usable here, else why not."""
    try:
        import cupy
    except ImportError as exc:
        return f"cupy not importable ({exc})"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # cupy raises CUDARuntimeError without a driver
        return f"no CUDA device ({type(exc).__name__}: {exc})"
    return None if n > 0 else "no CUDA device (0 devices)"


def pytest_configure(config) -> None:
    """A test that names no store of its own gets a temporary one, never the checkout's default
    (``data/store``): the dashboard records its URL in the store it serves, and an AppTest that left
    ``REGIME_DASH_STORE`` unset wrote ``data/store/_dashboard.json`` into the checkout."""
    if not os.environ.get("REGIME_DASH_STORE"):
        import tempfile

        os.environ["REGIME_DASH_STORE"] = tempfile.mkdtemp(prefix="regime-dash-test-store-")


def pytest_collection_modifyitems(config, items):
    reason = cuda_device_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"gpu test: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


_ARTIFACTS = pytest.StashKey[Path]()


@pytest.fixture(scope="session", autouse=True)
def artifacts_folder(request, tmp_path_factory) -> Path:
    """The session's artifacts folder: ``$REGIME_DASH_TEST_ARTIFACTS`` where a developer set it, else
    a folder of the session's temporary directory (the variable points there for the session)."""
    with pytest.MonkeyPatch.context() as mp:
        if not os.environ.get(artifacts.ENV):
            mp.setenv(artifacts.ENV, str(tmp_path_factory.mktemp("artifacts")))
        folder = artifacts.folder()
        request.config.stash[_ARTIFACTS] = folder
        yield folder


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    folder = config.stash.get(_ARTIFACTS, None)
    if folder is not None and folder.is_dir() and any(folder.iterdir()):
        terminalreporter.write_line(f"artifacts (screenshots, figures): {folder}")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


@pytest.fixture(scope="session", autouse=True)
def numba_cache(request) -> bool:
    """Compile the ``fast`` engine's CPU kernels (replay and sweep) once per session.

    A cold compile takes minutes on a loaded 2-core machine; done here, it is
    reported as session setup instead of landing in whichever test replays on
    ``fast`` first, and CLI tests that start a subprocess find numba's on-disk
    cache warm. When the cache is already warm this only loads it (about a
    second). Returns whether numba is here (without it there is nothing to warm).
    """
    if importlib.util.find_spec("numba") is None:
        return False
    from regime_dash.engine import fast

    cold = not all(fast.cpu_cache_warm(entry) for entry in fast.ENTRIES)
    t0 = time.perf_counter()
    if cold:
        _say(request.config, "compiling the fast engine's numba kernels once for this session "
                             "(minutes on a loaded machine) ...")
    for entry in fast.ENTRIES:
        fast.compile_cpu(entry)
    if cold:
        _say(request.config, f"... numba kernels compiled in {time.perf_counter() - t0:.0f} s")
    return True


def _say(config, line: str) -> None:
    """Print ``line`` on the terminal now, past pytest's output capture (nobody waits in silence)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capman = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capman is None:
        return
    with capman.global_and_fixture_disabled():
        reporter.write_line(line)
