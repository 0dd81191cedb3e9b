"""What a person adds to a stored run: tags, a note, a new name, and its aliases.

A run's Parquet parts never change; these live in its ``_meta.json`` (``tags``, a sorted
list; ``notes``, text; ``name``; ``aliases``, the other names its bytes were ingested
under), each change made by :meth:`regime_dash.store.run_store.RunStore.update_meta`: under the
store's lock and replaced in one rename, as a follower's commits replace it. A run is
named by its id, its name or an alias (:meth:`~regime_dash.store.run_store.RunStore.resolve`); a
rename changes the name, never the id (the folder ``run=<id>`` stays where readers know it).
"""
from __future__ import annotations

import re
from typing import Any, Iterable

from regime_dash.errors import StoreError, ValidationError
from regime_dash.store.run_store import RunStore, sanitize_name

__all__ = ["MAX_NOTE", "TAG_RE", "remove_alias", "rename", "set_note", "tag", "untag", "valid_tag"]

#: A tag: a letter or digit, then letters, digits and ``._:=+/-``; no comma (a URL's list
#: separator) and no space, at most 64 characters.
TAG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:=+/-]{0,63}$")
#: The longest note a run keeps, in characters.
MAX_NOTE = 10_000


def valid_tag(text: str) -> str:
    """``text`` as a tag; raises :class:`ValidationError` naming it when it is not one."""
    t = str(text).strip()
    if not TAG_RE.match(t):
        raise ValidationError(f"tag {str(text)[:80]!r} is not a tag: use letters, digits and ._:=+/- "
                              "(no comma or space, at most 64 characters, starting with a letter or digit)",
                              field="tag", value=text)
    return t


def tag(store: RunStore, ref: str, tags: Iterable[str]) -> list[str]:
    """Add ``tags`` to the run ``ref`` names; returns its tags, sorted."""
    new = [valid_tag(t) for t in tags]
    meta = store.update_meta(store.resolve(ref), lambda m: m.update(tags=sorted({*m.get("tags", []), *new})))
    return list(meta["tags"])


def untag(store: RunStore, ref: str, tags: Iterable[str]) -> tuple[list[str], list[str]]:
    """Remove ``tags`` from the run; returns ``(its tags now, the given tags it did not have)``."""
    gone = [valid_tag(t) for t in tags]
    rid = store.resolve(ref)
    missing = [t for t in gone if t not in store.meta(rid).get("tags", [])]
    meta = store.update_meta(rid, lambda m: m.update(tags=[t for t in m.get("tags", []) if t not in gone]))
    return list(meta["tags"]), missing


def set_note(store: RunStore, ref: str, text: str) -> str:
    """Set the run's note (an empty text clears it); returns the note kept."""
    text = str(text)
    if len(text) > MAX_NOTE:
        raise ValidationError(f"the note has {len(text):,} characters; a note holds at most {MAX_NOTE:,}",
                              field="note", value=text[:80])
    return store.update_meta(store.resolve(ref), lambda m: m.update(notes=text.strip()))["notes"]


def rename(store: RunStore, ref: str, new: str) -> dict[str, Any]:
    """Give the run the name ``new`` (reduced as ingest reduces names, :func:`sanitize_name`).

    An alias of the run may become its name (it is no longer an alias then); the old name
    is not kept. Returns ``{"run_id", "old", "name"}``.

    Raises
    ------
    ValidationError
        ``new`` is empty.
    StoreError
        Another run has that id, name or alias (a name must say one run).
    """
    if not str(new).strip():
        raise ValidationError("a run's new name cannot be empty", field="name", value=new)
    rid = store.resolve(ref)
    name = sanitize_name(str(new).strip())
    holder = store.holder_of(name, besides=rid)
    if holder is not None:
        raise StoreError(f"cannot rename {rid} to {name!r}: run {holder} already has that name, id or alias",
                         run_id=rid, path=str(store.root))
    old = store.meta(rid).get("name")

    def change(m: dict[str, Any]) -> None:
        m["name"] = name
        m["aliases"] = [a for a in m.get("aliases", []) if a != name]

    store.update_meta(rid, change)
    return {"run_id": rid, "old": old, "name": name}


def remove_alias(store: RunStore, alias: str) -> str:
    """Remove ``alias`` from the run that has it (the run stays); returns that run's id."""
    rid, how = store.resolve_ref(alias)
    if how != "alias":
        raise StoreError(f"{alias!r} is the {how} of run {rid}, not an alias", run_id=rid, path=str(store.root))
    store.update_meta(rid, lambda m: m.update(aliases=[a for a in m.get("aliases", []) if a != alias]))
    return rid
