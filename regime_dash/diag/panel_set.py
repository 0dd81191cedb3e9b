"""A chart's panel set as data: the custom panels (a field each, linear or log) and the spec panels.

Explore draws the seven spec panels of :mod:`regime_dash.figures.signals` and, below them, one
panel for each field a person picked. What is on screen is a :class:`PanelSet`: the
ordered custom panels, each ``(field, log)``, and whether the spec panels are shown.
It travels in the URL as one parameter's text (:func:`encode`, :func:`decode`) and is
kept as a named layout in the store (:func:`to_json`, :func:`from_json`).

The URL text is the custom panels in order, comma-separated, each a field name with
``~log`` after it when its y axis is logarithmic; the item ``~nospec`` says the spec
panels are hidden: ``risk_stack.kelly.fraction~log,risk_stack.popart.sigma``. The
default set (spec panels, no custom panel) is the empty text.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

from regime_dash.errors import ValidationError

__all__ = ["LOG", "NO_SPEC", "Panel", "PanelSet", "decode", "encode", "from_json", "to_json", "valid_field"]

#: The suffix of a log-scale panel's item in the URL text.
LOG = "~log"
#: The URL item that hides the spec panels.
NO_SPEC = "~nospec"
#: The longest field name a panel takes (a diag column's dotted path is far shorter).
MAX_FIELD = 200
#: The most custom panels a set holds (each is a subplot the browser draws).
MAX_PANELS = 24


def valid_field(name: Any, *, text: str | None = None) -> str:
    """``name`` as a panel's field; raises :class:`ValidationError` naming it when it cannot be one
    (empty, too long, or holding ``,`` or ``~``, which the URL text uses, or a control character).
    ``text`` is the whole value it came from, quoted in the message where it is not ``name``."""
    where = f" in {text[:80]!r}" if text is not None and text != name else ""
    if not isinstance(name, str) or not name.strip():
        raise ValidationError(f"panel field {name!r}{where} is empty: name a column of the runs",
                              field="panels", value=text if text is not None else name)
    if len(name) > MAX_FIELD or any(c in name for c in ",~") or any(ord(c) < 32 for c in name):
        raise ValidationError(f"panel field {name[:80]!r}{where} is not a field name: at most {MAX_FIELD} "
                              "characters, no comma, no '~', no control character",
                              field="panels", value=text if text is not None else name)
    return name


@dataclass(frozen=True)
class Panel:
    """One custom panel: a field of the runs, drawn on a linear or a log y axis."""

    field: str
    log: bool = False


@dataclass(frozen=True)
class PanelSet:
    """What a chart shows: the custom panels in order, and whether the spec panels are shown."""

    panels: tuple[Panel, ...] = ()
    spec: bool = True

    def __post_init__(self) -> None:
        fields = [p.field for p in self.panels]
        for f in fields:
            valid_field(f)
        twice = sorted({f for f in fields if fields.count(f) > 1})
        if twice:
            raise ValidationError(f"panel field {twice[0]!r} is named twice: one panel a field",
                                  field="panels", value=twice[0])
        if len(fields) > MAX_PANELS:
            raise ValidationError(f"{len(fields)} custom panels; a chart holds at most {MAX_PANELS}",
                                  field="panels", value=len(fields))

    @property
    def fields(self) -> list[str]:
        return [p.field for p in self.panels]

    def add(self, field: str, log: bool = False) -> PanelSet:
        """A panel for ``field`` added last (the set as it is when it already has one)."""
        if field in self.fields:
            return self
        return replace(self, panels=(*self.panels, Panel(valid_field(field), bool(log))))

    def remove(self, field: str) -> PanelSet:
        return replace(self, panels=tuple(p for p in self.panels if p.field != field))

    def with_log(self, field: str, log: bool) -> PanelSet:
        return replace(self, panels=tuple(Panel(p.field, bool(log)) if p.field == field else p
                                          for p in self.panels))

    def move(self, field: str, by: int) -> PanelSet:
        """``field``'s panel moved ``by`` places (negative: up), stopping at either end."""
        panels = list(self.panels)
        i = self.fields.index(field) if field in self.fields else None
        if i is None:
            return self
        j = min(max(i + by, 0), len(panels) - 1)
        panels.insert(j, panels.pop(i))
        return replace(self, panels=tuple(panels))

    def with_spec(self, shown: bool) -> PanelSet:
        return replace(self, spec=bool(shown))


def encode(panels: PanelSet) -> str:
    """The URL text of ``panels`` (the empty text for the default set)."""
    items = [p.field + (LOG if p.log else "") for p in panels.panels]
    return ",".join(([] if panels.spec else [NO_SPEC]) + items)


def decode(text: str) -> PanelSet:
    """The panel set of URL text ``text``; raises :class:`ValidationError` (field ``panels``, the
    text as its value) for text that is not one: an empty field, an unknown ``~`` suffix, a field
    named twice."""
    if not isinstance(text, str):
        raise ValidationError(f"panels {text!r} is not text", field="panels", value=text)
    spec, panels = True, []
    for item in (t for t in text.split(",") if t):
        if item == NO_SPEC:
            spec = False
            continue
        field, log = (item[: -len(LOG)], True) if item.endswith(LOG) else (item, False)
        if "~" in field:
            raise ValidationError(f"panel item {item[:80]!r} of {text[:80]!r} is not a field with an "
                                  f"optional {LOG!r}", field="panels", value=text)
        panels.append(Panel(valid_field(field, text=text), log))
    try:
        return PanelSet(tuple(panels), spec)
    except ValidationError as exc:  # the whole text is what the caller gave
        raise ValidationError(f"{exc} (in {text[:80]!r})", field="panels", value=text) from None


def to_json(panels: PanelSet) -> dict[str, Any]:
    """``panels`` as a JSON-able dict (a stored layout)."""
    return {"spec": panels.spec, "panels": [{"field": p.field, "log": p.log} for p in panels.panels]}


def from_json(obj: Mapping[str, Any]) -> PanelSet:
    """The panel set of :func:`to_json`'s dict; raises :class:`ValidationError` for another shape."""
    try:
        items = obj.get("panels", [])
        panels = tuple(Panel(valid_field(p["field"]), bool(p.get("log", False))) for p in items)
        return PanelSet(panels, bool(obj.get("spec", True)))
    except (AttributeError, KeyError, TypeError) as exc:
        raise ValidationError(f"a stored layout is not a panel set ({type(exc).__name__}: {exc})",
                              field="layout", value=str(obj)[:200]) from None
