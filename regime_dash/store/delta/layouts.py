"""Named chart layouts kept with a Delta store: :mod:`regime_dash.store.layouts`'s functions, with the
layouts as documents of the store's ``settings`` table (``layout:<name>``), each change one
compare-and-swap commit: two tabs saving at once both land, on a local disk or object storage."""
from __future__ import annotations


from regime_dash.diag.panel_set import PanelSet, from_json, to_json
from regime_dash.errors import StoreError
from regime_dash.store.layouts import check_cap, valid_name


__all__ = ["delete", "list_layouts", "load", "save"]

_PREFIX = "layout:"


def save(store, name: str, panels: PanelSet) -> str:
    """Keep ``panels`` as the layout ``name`` (replacing one of that name); returns the name kept."""
    name = valid_name(name)
    body = to_json(panels)

    def edit(docs: dict) -> None:
        docs[_PREFIX + name] = {"name": name, "panels": body}
        check_cap(_layouts_of(docs), name, store.root.uri)  # raises before the commit: nothing changes

    store.settings.change(edit, f"cannot save layout {name!r}")
    return name


def _layouts_of(docs: dict) -> dict[str, dict]:
    return {d["name"]: d["panels"] for k, d in docs.items() if k.startswith(_PREFIX)}


def _all(store) -> dict[str, dict]:
    return _layouts_of(store.settings.read())


def load(store, name: str) -> PanelSet:
    """The layout ``name``; raises :class:`StoreError` naming it (and the layouts there are) when none."""
    name = valid_name(name)
    layouts = _all(store)
    if name not in layouts:
        known = ", ".join(sorted(layouts)[:10]) or "none"
        raise StoreError(f"no layout {name!r} in the store (layouts: {known})", path=store.root.uri)
    return from_json(layouts[name])


def list_layouts(store) -> list[str]:
    """The stored layouts' names, sorted."""
    return sorted(_all(store))


def delete(store, name: str) -> bool:
    """Remove the layout ``name``; returns whether there was one."""
    name = valid_name(name)
    return store.settings.change(lambda docs: docs.pop(_PREFIX + name, None) is not None,
                                 f"cannot delete layout {name!r}")
