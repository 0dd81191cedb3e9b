"""Controller modules: each adaptive controller of the trainer as one small package.

A module is a subpackage of :mod:`regime_dash.modules` that defines ``MODULE``,
a :class:`~regime_dash.modules.base.ControllerModule`. :data:`MODULES` is built
by discovering those subpackages, so adding a controller is adding a package:
the app, the CLI, the sweep and ``check`` iterate over :data:`MODULES`.

Also here: :func:`orphan_slots` (slots with consumers but no producer),
:func:`module_slots` / :func:`full_layout` (the registry with every module's
slots) and :func:`kernel_defines` (the ``-D`` options a module's ``.cu`` file
compiles with).
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Iterable, Mapping

from regime_dash.errors import ValidationError
from regime_dash.modules.base import ControllerModule
from regime_dash.core.slots import DEFAULT_LAYOUT, Slot, SlotLayout


def discover() -> dict[str, ControllerModule]:
    """``{name: module}`` of every subpackage that defines ``MODULE``, sorted by name."""
    found: dict[str, ControllerModule] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.ispkg or info.name.startswith("_"):
            continue
        pkg = importlib.import_module(f"{__name__}.{info.name}")
        mod = getattr(pkg, "MODULE", None)
        if isinstance(mod, ControllerModule):
            found[mod.name] = mod
    return found


#: Every controller module, by name.
MODULES: dict[str, ControllerModule] = discover()


def get(name: str) -> ControllerModule:
    """The module called ``name``; an unknown name raises :class:`ValidationError` listing the known ones."""
    try:
        return MODULES[name]
    except KeyError:
        raise ValidationError(f"unknown controller module {name!r}; known: {', '.join(MODULES)}",
                              field="module", value=name) from None


def _row(slot: Slot | Mapping[str, Any]) -> tuple[str, int, str, tuple[str, ...]]:
    if isinstance(slot, Slot):
        return slot.name, slot.index, slot.producer, tuple(slot.consumers)
    consumers = slot.get("consumers") or ()
    if isinstance(consumers, str):
        consumers = tuple(c.strip() for c in consumers.split(",") if c.strip())
    return str(slot["name"]), int(slot.get("index", -1)), str(slot.get("producer") or ""), tuple(consumers)


def orphan_slots(slot_table: Iterable[Slot | Mapping[str, Any]]) -> list[str]:
    """Names of slots that have consumers but no producer, in index order.

    ``slot_table`` holds :class:`~regime_dash.core.slots.Slot` records or the rows
    of :meth:`SlotLayout.table` (``consumers`` a comma-separated string).
    Such a slot is read but never written: it sits at its bootstrap forever
    (SP14's slot 388 is the known case).
    """
    rows = [_row(s) for s in slot_table]
    return [name for name, _i, producer, consumers in sorted(rows, key=lambda r: (r[1], r[0]))
            if consumers and not producer.strip()]


def module_slots(modules: Iterable[ControllerModule] | None = None) -> tuple[Slot, ...]:
    """Every module's slots that the regime registry does not hold already (by name), in module order."""
    seen = set(DEFAULT_LAYOUT.names)
    out = []
    for mod in (MODULES.values() if modules is None else modules):
        for s in mod.slots:
            if s.name not in seen:
                seen.add(s.name)
                out.append(s)
    return tuple(out)


def full_layout(base: SlotLayout = DEFAULT_LAYOUT) -> SlotLayout:
    """``base`` plus every module's slots (what the Slots page lists); overlaps raise."""
    extra = tuple(s for s in module_slots() if s.name not in base)
    return SlotLayout(base.slots + extra).validate()


def kernel_defines(file: str) -> list[str]:
    """The module ``-D`` options of ``kernels/<file>`` ([] for a file no module owns)."""
    for mod in MODULES.values():
        if file in mod.kernels:
            return mod.defines()
    return []


__all__ = ["MODULES", "ControllerModule", "discover", "full_layout", "get", "kernel_defines",
           "module_slots", "orphan_slots"]
