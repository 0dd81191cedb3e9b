"""The package reaches dask only through its public API: no hand-built futures, no worker memory, no private attributes.

distributed's own docstring warns that a ``Future(key, client)`` built by hand can
corrupt a cluster's state; ``worker.data`` and underscore attributes change without
notice between releases. This reads the source of every module of ``regime_dash``
that names dask and fails on any of them.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "regime_dash"

#: Underscore attributes of distributed's objects; those of the installed release are added.
PRIVATE = {"_key", "_state", "_client", "_gather", "_scatter", "_replicate", "_send_to_scheduler",
           "_get_worker", "_timeout", "_inc_ref", "_dec_ref", "_release_key", "_verify_running", "_tasks"}


def _private_names() -> set[str]:
    try:
        import distributed as dd
    except ImportError:
        return set(PRIVATE)
    names = set(PRIVATE)
    for cls in (dd.Future, dd.Client, dd.Worker, dd.Nanny, dd.Scheduler, dd.Variable, dd.Queue,
                dd.SpecCluster, dd.LocalCluster, dd.as_completed):
        names |= {n for n in dir(cls) if n.startswith("_") and not n.startswith("__") and len(n) > 2}
    return names


def _rules() -> dict[str, re.Pattern]:
    private = "|".join(sorted(map(re.escape, _private_names())))
    return {
        "a future built by hand": re.compile(r"(?<!concurrent\.futures\.)\bFuture\("),
        "a read of worker memory": re.compile(r"\.data\["),
        # our own classes' private attributes are self._x; distributed's are anything else's
        "a private attribute of distributed": re.compile(rf"(?<!\bself)\.({private})\b"),
        "a module inside distributed": re.compile(r"^\s*(from|import)\s+distributed\.\w", re.M),
    }


def _violations(text: str, where: str) -> list[str]:
    found = []
    for what, pattern in _rules().items():
        for m in pattern.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append(f"{where}:{line}: {what}: {text.splitlines()[line - 1].strip()}")
    return found


def _dask_modules() -> list[Path]:
    names_dask = re.compile(r"\b(distributed|dask|dask_cuda)\b")
    return [p for p in sorted(PACKAGE.rglob("*.py")) if names_dask.search(p.read_text(encoding="utf-8"))]


def test_the_rules_catch_what_they_forbid():
    bad = ("f = distributed.Future(key, client, state='memory')\n"
           "value = worker.data[key]\n"
           "k = future._key\n"
           "from distributed.client import Future\n")
    assert len(_violations(bad, "sample")) == 4
    fine = ("pieces = [concurrent.futures.Future() for _ in bounds]\n"
            "self._state = 1\n"
            "futures = client.scatter([v], broadcast=True, hash=False)\n")
    assert _violations(fine, "sample") == []


def test_regime_dash_uses_only_public_dask():
    modules = _dask_modules()
    assert PACKAGE / "runs" / "scheduler.py" in modules and PACKAGE / "runs" / "sweeps.py" in modules
    found = [v for p in modules for v in _violations(p.read_text(encoding="utf-8"), str(p.relative_to(PACKAGE)))]
    if found:
        pytest.fail("private dask API in regime_dash:\n" + "\n".join(found))
