"""Named chart layouts kept with the store: panel sets saved under a name, for anyone who opens it.

One JSON file in the store's root, ``_layouts.json``: ``{"layouts": {name: panel set}}``, each
panel set as :func:`regime_dash.diag.panel_set.to_json` writes it. Every change reads the file,
edits it and replaces it in one rename (a temporary file, then ``os.replace``) under the
store's lock, as a run's ``_meta.json`` is changed: two tabs saving at once both land, and a
reader never sees half a file. A stale temporary file (a writer killed mid-write) is simply
written over by the next change. The spec panels alone stay the default layout: it needs no
name and is not stored.

The file is capped (:data:`MAX_BYTES`, :data:`MAX_LAYOUTS`): a save that would pass the cap is
refused with a message naming it and the file is left as it was; a file past the byte cap (put
there by hand) is not parsed at all (a page rerun would pay for it every time), only refused with
the same message. A file within the cap is parsed once per version (its inode, size and change
time), not on every rerun that lists the layouts.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from regime_dash.errors import StoreError, ValidationError
from regime_dash.diag.panel_set import PanelSet, from_json, to_json
from regime_dash.store.metadata import replace_json

__all__ = ["FILE", "Layouts", "MAX_BYTES", "MAX_LAYOUTS", "NAME_RE", "check_cap", "delete", "list_layouts",
           "load", "save", "valid_name"]

#: The layouts' file in the store's root.
FILE = "_layouts.json"
#: A layout's name: a letter or digit, then letters, digits, space and ``._-``; at most 64
#: characters (it travels in a URL as ``layout=NAME``).
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}$")
#: The most a store's layouts may take, as JSON, and the most layouts it keeps: far past what a team
#: saves by hand (a layout is ~0.1-2 kB), small enough that listing them never slows a page.
MAX_BYTES = 1 << 20
MAX_LAYOUTS = 1000
_CAP = f"{MAX_BYTES >> 20} MB and {MAX_LAYOUTS:,} layouts"
#: Parsed files by path: ((inode, size, change time), layouts). One entry a store; a few stores a server.
_PARSED: dict[Path, tuple[tuple[int, int, int], dict[str, Any]]] = {}
_PARSED_MAX = 16


def valid_name(name: Any) -> str:
    """``name`` as a layout's name; raises :class:`ValidationError` naming it when it is not one."""
    text = str(name).strip() if isinstance(name, str) else name
    if not isinstance(text, str) or not NAME_RE.match(text):
        raise ValidationError(f"layout name {str(name)[:80]!r} is not a name: use letters, digits, space "
                              "and ._- (at most 64 characters, starting with a letter or digit)",
                              field="layout", value=name)
    return text


def _path(store) -> Path:
    return store.root / FILE


def _mb(n: int) -> str:
    return f"{n / (1 << 20):.1f} MB"


def check_cap(layouts: dict[str, Any], name: str, where: str) -> None:
    """Raise :class:`StoreError` naming the cap when ``layouts`` (with ``name`` saved) pass it."""
    if len(layouts) > MAX_LAYOUTS:
        raise StoreError(f"cannot save layout {name!r}: the store keeps at most {MAX_LAYOUTS:,} layouts "
                         f"(cap {_CAP}); delete one first", path=where)
    size = len(json.dumps({"layouts": layouts}, indent=1, default=str).encode("utf-8"))
    if size > MAX_BYTES:
        raise StoreError(f"cannot save layout {name!r}: the layouts would take {_mb(size)}, past the cap "
                         f"of {_CAP}; delete some first", path=where)


def _parse(path: Path) -> dict[str, Any]:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise StoreError(f"the layouts file {path.name} cannot be read ({exc}); move it aside to start afresh",
                         path=str(path)) from None
    layouts = obj.get("layouts") if isinstance(obj, dict) else None
    if not isinstance(layouts, dict):
        raise StoreError(f"the layouts file {path.name} holds no layouts table", path=str(path))
    return layouts


def _read(store, *, fresh: bool = False) -> dict[str, Any]:
    """Every stored layout's JSON, ``{name: dict}`` (none when the file is not there); ``fresh``
    parses the file even where this version was parsed before (a change, under the lock)."""
    path = _path(store)
    try:
        st = path.stat()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise StoreError(f"the layouts file {path.name} cannot be read ({exc})", path=str(path)) from None
    if st.st_size > MAX_BYTES:
        raise StoreError(f"the layouts file {path.name} is {_mb(st.st_size)}, past the cap of {_CAP}: it is "
                         "not read; move it aside (or trim it) to use layouts again", path=str(path))
    version = (st.st_ino, st.st_size, st.st_ctime_ns)
    hit = _PARSED.get(path)
    if hit is not None and hit[0] == version and not fresh:
        return dict(hit[1])
    layouts = _parse(path)
    _PARSED.pop(path, None)
    while len(_PARSED) >= _PARSED_MAX:
        _PARSED.pop(next(iter(_PARSED)))
    _PARSED[path] = (version, layouts)
    return dict(layouts)


def _write(store, layouts: dict[str, Any]) -> None:
    """The layouts file replaced in one rename, as ``_meta.json`` is (the caller holds the store's lock)."""
    replace_json(_path(store), {"layouts": dict(sorted(layouts.items()))})


def save(store, name: str, panels: PanelSet) -> str:
    """Keep ``panels`` as the layout ``name`` (replacing one of that name); returns the name kept."""
    name = valid_name(name)
    with store.lock():
        layouts = _read(store, fresh=True)
        layouts[name] = to_json(panels)
        check_cap(layouts, name, str(_path(store)))
        _write(store, layouts)
    return name


def load(store, name: str) -> PanelSet:
    """The layout ``name``; raises :class:`StoreError` naming it (and the layouts there are) when none."""
    name = valid_name(name)
    layouts = _read(store)
    if name not in layouts:
        known = ", ".join(sorted(layouts)[:10]) or "none"
        raise StoreError(f"no layout {name!r} in the store (layouts: {known})", path=str(_path(store)))
    return from_json(layouts[name])


def list_layouts(store) -> list[str]:
    """The stored layouts' names, sorted."""
    return sorted(_read(store))


def delete(store, name: str) -> bool:
    """Remove the layout ``name``; returns whether there was one."""
    name = valid_name(name)
    with store.lock():
        layouts = _read(store, fresh=True)
        if name not in layouts:
            return False
        del layouts[name]
        _write(store, layouts)
    return True


class Layouts:
    """A store's layouts, as its ``layouts`` property gives them: ``save``, ``load``, ``list_layouts`` and
    ``delete`` of the module that keeps that kind of store's layouts (this one, or the Delta store's)."""

    def __init__(self, store, kept_by):
        self.store, self.kept_by = store, kept_by

    def save(self, name: str, panels: PanelSet) -> str:
        return self.kept_by.save(self.store, name, panels)

    def load(self, name: str) -> PanelSet:
        return self.kept_by.load(self.store, name)

    def list_layouts(self) -> list[str]:
        return self.kept_by.list_layouts(self.store)

    def delete(self, name: str) -> bool:
        return self.kept_by.delete(self.store, name)
