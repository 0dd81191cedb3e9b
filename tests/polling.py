"""Waiting on a condition outside a page (a look at the store, a file), never for a fixed time."""
from __future__ import annotations

import time
from typing import Callable


def wait_until(holds: Callable[[], object], timeout_s: float, what: str) -> None:
    """Poll ``holds()`` until it is true; fail naming ``what`` after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while not holds():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:g} s: {what}")
        time.sleep(0.05)  # a poll's interval
