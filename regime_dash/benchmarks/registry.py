"""The benchmark modules by target name: real imports, one loader per target, so ``bench TARGET`` loads
its own module alone (a child of ``bench long`` starts lean) and no module is named by a string."""
from __future__ import annotations

from types import ModuleType
from typing import Callable


def _ingest() -> ModuleType:
    from regime_dash.benchmarks import ingest
    return ingest


def _engines() -> ModuleType:
    from regime_dash.benchmarks import engines
    return engines


def _page_load() -> ModuleType:
    from regime_dash.benchmarks import page_load
    return page_load


def _modules() -> ModuleType:
    from regime_dash.benchmarks import modules
    return modules


def _sensitivity() -> ModuleType:
    from regime_dash.benchmarks import sensitivity
    return sensitivity


def _ui() -> ModuleType:
    from regime_dash.benchmarks import ui
    return ui


def _startup() -> ModuleType:
    from regime_dash.benchmarks import startup
    return startup


def _long() -> ModuleType:
    from regime_dash.benchmarks import long
    return long


def _check() -> ModuleType:
    from regime_dash.benchmarks import check
    return check


def _follow() -> ModuleType:
    from regime_dash.benchmarks import follow
    return follow


def _repair() -> ModuleType:
    from regime_dash.benchmarks import repair
    return repair


def _soak() -> ModuleType:
    from regime_dash.benchmarks import soak
    return soak


def _delta_store() -> ModuleType:
    from regime_dash.benchmarks import delta_store
    return delta_store


#: target -> the loader of its module, in the order ``bench --help`` lists them
#: (:data:`regime_dash.benchmarks.TARGETS`; a test holds the two equal).
LOADERS: dict[str, Callable[[], ModuleType]] = {
    "ingest": _ingest, "engines": _engines, "page_load": _page_load, "modules": _modules,
    "sensitivity": _sensitivity, "ui": _ui, "startup": _startup, "long": _long, "check": _check, "follow": _follow,
    "repair": _repair,


    "delta_store": _delta_store, "soak": _soak,
}


def target_module(name: str) -> ModuleType:
    """The module of benchmark target ``name`` (a key of :data:`LOADERS`), imported."""
    return LOADERS[name]()


__all__ = ["LOADERS", "target_module"]
