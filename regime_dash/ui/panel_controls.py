"""Explore's custom panels: the field picker, each panel's log toggle, order and removal, named layouts.

The panel set (:class:`regime_dash.diag.panel_set.PanelSet`) is held under one session-state key
as its URL text, restored and published as every persisted view is (:mod:`regime_dash.ui.state`,
URL parameter ``panels``); each control changes it in its callback. A layout saved with
the store (:mod:`regime_dash.store.layouts`) is loaded into it, from the Layouts panel or
from the URL's ``layout=NAME``, which is dropped once read (the view is then in ``panels``).
"""
from __future__ import annotations

from typing import Sequence

import streamlit as st

from regime_dash.diag import panel_set
from regime_dash.errors import RegimeDashError
from regime_dash.diag.panel_set import PanelSet
from regime_dash.text import clip, markdown_literal
from regime_dash.ui import state
from regime_dash.ui.errors import ErrorNote, show_error

__all__ = ["current", "layouts_panel", "panel_rows", "restore_panels"]


def current(key: str) -> PanelSet:
    """The panel set held under ``key`` (the default set when it holds none)."""
    return panel_set.decode(st.session_state.get(key, ""))


def _put(key: str, panels: PanelSet) -> None:
    st.session_state[key] = panel_set.encode(panels)


def _why(text: str) -> str | None:
    """Why URL text cannot be a panel set (its parse error, as Markdown), or None when it can."""
    try:
        panel_set.decode(text)
    except RegimeDashError as exc:
        return f"cannot be used ({markdown_literal(clip(str(exc), 200))})"
    return None


def restore_panels(key: str, store, *, param: str = "panels", layout_param: str = "layout") -> PanelSet:
    """The panel set of this view: a layout the URL opens, else this session's, else the URL's
    ``param``, else the spec panels alone; a URL value that cannot be used is said and dropped."""
    name = st.query_params.get(layout_param)
    if name is not None:
        try:
            state.keep(key, panel_set.encode(store.layouts.load(name)))
            st.caption(f"Layout {markdown_literal(clip(name))} opened.")
        except RegimeDashError as exc:
            why = markdown_literal(clip(str(exc), 200))
            st.warning(f"URL parameter {markdown_literal(layout_param)} dropped: {why}; the panels shown are "
                       "this view's own.", icon=":material/link_off:")
        del st.query_params[layout_param]
    state.restore(key, param, "str", "", reason=_why)
    return current(key)


def _add(key: str) -> None:
    field = st.session_state.get(f"{key}.pick")
    if field:
        _put(key, current(key).add(field))
    st.session_state[f"{key}.pick"] = None  # the picker empty again, for the next field


def _set_log(key: str, field: str) -> None:
    _put(key, current(key).with_log(field, bool(st.session_state.get(f"{key}.log.{field}"))))


def _set_spec(key: str) -> None:
    _put(key, current(key).with_spec(bool(st.session_state.get(f"{key}.spec"))))


def panel_rows(key: str, fields: Sequence[str]) -> PanelSet:
    """The spec-panels toggle, the field picker (every field of ``fields``, searchable) and one row
    per custom panel (its log toggle, up, down, remove); returns the panel set they leave."""
    panels = current(key)
    c1, c2 = st.columns([1, 3], vertical_alignment="bottom")
    st.session_state[f"{key}.spec"] = panels.spec
    c1.toggle("Spec panels", key=f"{key}.spec", on_change=_set_spec, args=(key,),
              help="The seven panels of the spec's signals, above the custom panels.")
    c2.selectbox(f"Add a panel: any field of the runs ({len(fields):,})",
                 [f for f in fields if f not in panels.fields], index=None, key=f"{key}.pick",
                 placeholder="type to search the runs' fields", on_change=_add, args=(key,))
    present = set(fields)
    for i, p in enumerate(panels.panels):
        # the log toggle's column holds the toggle, "log" and its help icon at a 1,280 px window
        row = st.columns([3.5, 1.5, 1.1, 1.35, 1.5], vertical_alignment="center")
        gone = "" if p.field in present else " (no picked run has it)"
        row[0].markdown(f"**{markdown_literal(p.field)}**{gone}")
        st.session_state[f"{key}.log.{p.field}"] = p.log
        row[1].toggle("log", key=f"{key}.log.{p.field}", on_change=_set_log, args=(key, p.field),
                      help="A logarithmic y axis for this panel.")
        row[2].button("Up", icon=":material/arrow_upward:", key=f"{key}.up.{p.field}", disabled=i == 0,
                      on_click=lambda f=p.field: _put(key, current(key).move(f, -1)))
        row[3].button("Down", icon=":material/arrow_downward:", key=f"{key}.down.{p.field}",
                      disabled=i == len(panels.panels) - 1,
                      on_click=lambda f=p.field: _put(key, current(key).move(f, 1)))
        row[4].button("Remove", icon=":material/close:", key=f"{key}.remove.{p.field}",
                      on_click=lambda f=p.field: _put(key, current(key).remove(f)))
    return current(key)


def _said(key: str, what: str | BaseException) -> None:
    """Keep a layout action's outcome for the panel to show (a callback's output would go to the top)."""
    st.session_state[f"{key}.said"] = (ErrorNote.from_exception(what, todo="Check the layout's name and try again.")
                                       if isinstance(what, BaseException) else what)


def _layout_action(key: str, act) -> None:
    """Run ``act()`` (a layout action that returns its outcome's text) and keep its outcome or its error."""
    try:
        _said(key, act())
    except RegimeDashError as exc:
        _said(key, exc)


def _save(key: str, store) -> None:
    def act() -> str:
        name = store.layouts.save(st.session_state.get(f"{key}.save_name", ""), current(key))
        return f"Layout {markdown_literal(name)} saved."
    _layout_action(key, act)


def _load(key: str, store) -> None:
    name = st.session_state.get(f"{key}.load_name")

    def act() -> str:
        _put(key, store.layouts.load(name))
        return f"Layout {markdown_literal(name)} loaded."
    _layout_action(key, act)


def _delete(key: str, store) -> None:
    name = st.session_state.get(f"{key}.load_name")

    def act() -> str:
        gone = store.layouts.delete(name)
        st.session_state[f"{key}.load_name"] = None
        return f"Layout {markdown_literal(name)} {'deleted' if gone else 'was not there'}."
    _layout_action(key, act)


def layouts_panel(key: str, store) -> None:
    """Save the panel set as a named layout, load or delete one, or go back to the spec panels."""
    with st.expander("Layouts: keep this panel set under a name, or open one"):
        c1, c2 = st.columns(2, vertical_alignment="bottom")
        c1.text_input("Save layout as", key=f"{key}.save_name", max_chars=64,
                      placeholder="letters, digits, space, ._-")
        c2.button("Save layout", icon=":material/save:", key=f"{key}.save", on_click=_save, args=(key, store))
        try:
            names = store.layouts.list_layouts()
        except RegimeDashError as exc:
            show_error(exc)
            names = []
        c3, c4, c5, c6 = st.columns([3, 1, 1, 2], vertical_alignment="bottom")
        picked = c3.selectbox("Load layout", names, index=None, key=f"{key}.load_name",
                              placeholder=f"{len(names)} saved" if names else "none saved yet")
        c4.button("Load", key=f"{key}.load", disabled=picked is None, on_click=_load, args=(key, store))
        c5.button("Delete", key=f"{key}.delete", disabled=picked is None, on_click=_delete, args=(key, store))
        c6.button("Spec panels only", key=f"{key}.reset", help="The default layout: the seven spec panels.",
                  on_click=lambda: _put(key, PanelSet()))
        said = st.session_state.pop(f"{key}.said", None)
        if isinstance(said, ErrorNote):
            show_error(said)
        elif said:
            st.success(said)
