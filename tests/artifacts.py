"""Where tests keep files for a person to look at (screenshots, measured figures): never the checkout.

The folder is ``$REGIME_DASH_TEST_ARTIFACTS``. A developer who wants to keep the files sets it
(``REGIME_DASH_TEST_ARTIFACTS=/tmp/shots python3 -m pytest -m browser``); otherwise conftest points
it at a folder of the session's temporary directory (pytest's ``tmp_path_factory``, which keeps the
last few sessions' folders) and the summary says where.
"""
from __future__ import annotations

import os
from pathlib import Path

ENV = "REGIME_DASH_TEST_ARTIFACTS"


def folder() -> Path:
    """The artifacts folder, made if missing."""
    path = Path(os.environ[ENV])
    path.mkdir(parents=True, exist_ok=True)
    return path


def artifact(name: str) -> Path:
    """The path a test writes its artifact ``name`` to."""
    return folder() / name
