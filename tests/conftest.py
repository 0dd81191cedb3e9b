"""Shared fixtures and the engine parametrization.

Tests that take the ``engine`` fixture run once per replay engine; an engine
that cannot run on this machine (no CUDA device, no cupy) is skipped with the
reason ``engine_status()`` gives. Tests marked ``gpu`` skip without a device.
"""
from __future__ import annotations

import numpy as np
import pytest

from regime_dash.engine import ENGINES, engine_status

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


def pytest_collection_modifyitems(config, items):
    reason = cuda_device_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"gpu test: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
