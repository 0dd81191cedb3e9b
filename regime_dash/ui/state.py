"""Views that survive: widget values kept across page switches and written to the URL.

Streamlit forgets a widget's value when its page is left, and a reload starts
from nothing. Each persisted widget is therefore declared with :func:`restore`
just before it is drawn: its value comes from this session's kept copy, else
from the URL's query parameter, else from its default. :func:`publish`, at the
end of the page, writes every value restored in this run back to the kept copy
and to ``st.query_params`` (leaving defaults out, so a URL names only what was
changed). A copied URL therefore reopens the same view, and a selection made on
one page is there again on return.

Values travel in the URL as text: ``list`` as comma-separated items,
``range`` as ``lo..hi``, ``bool`` as ``1``/``0``. A URL value a control cannot take is said
(a warning naming the parameter) and dropped, never ignored in silence; of a list, only the
items it cannot take (a run since deleted) are.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import streamlit as st

from regime_dash.core.view_urls import RANGE_SEP, range_text

_KEPT = "_view.kept"
_DECLARED = "_view.declared"
_SHOWN = "_view.shown"  # keys restored in this run of the app (its fragments' reruns included)
_SHOWN_BEFORE = "_view.shown_before"  # ... in the app's run before this one
KINDS = ("str", "int", "float", "bool", "list", "range")


def encode(value: Any, kind: str) -> str:
    """A widget value as URL text."""
    if kind == "list":
        return ",".join(str(v) for v in value)
    if kind == "range":
        return range_text(value[0], value[1])
    if kind == "bool":
        return "1" if value else "0"
    if kind == "float":
        return f"{float(value):.10g}"
    return str(value)


def _number(text: str) -> float:
    """A finite number from URL text; ValueError for ``inf``, ``nan``, ``1e400`` or 10,000 digits."""
    if len(text) > 40:  # no widget value needs more; float() of a long digit string is inf
        raise ValueError(text)
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value


def decode(text: str, kind: str) -> Any:
    """URL text as a widget value; raises ValueError for text that is not of ``kind`` (a number
    must be finite: int(float('inf')) raised OverflowError and took the page down)."""
    if kind == "list":
        return [t for t in text.split(",") if t]
    if kind == "range":
        lo, hi = text.split(RANGE_SEP)
        return (int(_number(lo)), int(_number(hi)))
    if kind == "bool":
        if text not in ("0", "1", "true", "false"):
            raise ValueError(text)
        return text in ("1", "true")
    if kind == "int":
        return int(_number(text))
    if kind == "float":
        return _number(text)
    return text


def _dropped(param: str, text: str, why: str, instead: str = "it shows its default instead") -> None:
    """Say that URL parameter ``param`` was dropped, and drop it (the widget shows its default)."""
    from regime_dash.text import clip, markdown_literal

    st.warning(f"URL parameter {markdown_literal(param)} dropped: {markdown_literal(repr(clip(text)))} {why}; "
               f"{instead}.", icon=":material/link_off:")
    del st.query_params[param]


def _dropped_items(param: str, items: Sequence[str]) -> None:
    """Say which items of list parameter ``param`` were left out (the rest of it is used)."""
    from regime_dash.text import clip, markdown_literal

    st.warning(f"URL parameter {markdown_literal(param)}: {markdown_literal(clip(', '.join(items)))} dropped, "
               "not among what this control takes now; the rest of it is used.",
               icon=":material/link_off:")


def drop_params(params: Sequence[str]) -> None:
    """Remove query parameters of controls the page no longer draws, keeping their values in this
    session: a control that comes back shows them again, and the URL names only what is on screen."""
    for param in params:
        if param in st.query_params:
            del st.query_params[param]


def refuse_params(params: Sequence[str], why: str) -> None:
    """Say and drop each of ``params`` the URL has: parameters no control on this view takes
    (a field of another controller module), which would otherwise be ignored in silence."""
    for param in params:
        if param in st.query_params:
            _dropped(param, st.query_params[param], why, "nothing here uses it")


def _kept() -> dict[str, Any]:
    return st.session_state.setdefault(_KEPT, {})


def restore(key: str, param: str, kind: str, default: Any, *,
            valid: Callable[[Any], bool] | None = None, options: Sequence[Any] | None = None,
            reason: Callable[[Any], str | None] | None = None) -> Any:
    """Seed widget ``key`` before it is drawn; returns the value it will show.

    Parameters
    ----------
    key
        The widget's session-state key (the widget is then drawn without a default).
    param
        Its query-parameter name.
    kind
        One of :data:`KINDS`: how the value reads from and writes to the URL.
    default
        Its value when neither this session nor the URL has one.
    valid, options
        A value that fails ``valid`` or is not among ``options`` (each item of a
        ``list``) is dropped for ``default`` (a URL may name a run since deleted).
    reason
        Says why a value cannot be used (``None``: it can); a URL value it refuses is dropped
        with those words in the warning (a panel set's parse error names the bad item).
    """
    declared = st.session_state.setdefault(_DECLARED, {})
    declared[key] = (param, kind, default)

    def ok(v: Any) -> bool:
        if options is not None:
            items = v if kind == "list" else [v]
            if any(i not in options for i in items):
                return False
        if reason is not None and reason(v) is not None:
            return False
        return valid is None or valid(v)

    st.session_state.setdefault(_SHOWN, set()).add(key)
    if key in st.session_state and ok(st.session_state[key]):
        if key not in st.session_state.get(_SHOWN_BEFORE, ()):
            _reassert(key)
        return st.session_state[key]
    value = default
    kept = _kept()
    if key in kept and ok(kept[key]):
        value = kept[key]
    elif param in st.query_params:
        text = st.query_params[param]
        try:
            v = decode(text, kind)
        except ValueError:
            v = None
            _dropped(param, text, f"is not a{'n' if kind == 'int' else ''} {kind} value here")
        if kind == "list" and v is not None and options is not None:
            gone = [i for i in v if i not in options]
            if gone:  # keep what still exists, and say what does not
                _dropped_items(param, gone)
            v = [i for i in v if i in options]
        if v is not None and ok(v):
            value = v
        elif v is not None:
            why = reason(v) if reason is not None else None
            _dropped(param, text, why or "is outside what this control takes")
    st.session_state[key] = value
    return value


def start_run() -> None:
    """Call first in every run of the whole app (a fragment's own rerun does not run it).

    It starts the record of which persisted widgets this run draws, so that
    :func:`restore` knows the ones the previous run left out (see :func:`_reassert`).
    """
    st.session_state[_SHOWN_BEFORE] = st.session_state.get(_SHOWN, set())
    st.session_state[_SHOWN] = set()


def _reassert(key: str) -> None:
    """Send the browser ``key``'s value again, for a widget the previous run did not draw.

    A run that leaves a widget out (Replay's "Stream file" source stops before the
    what-if sliders) makes the browser forget it, while its value stays in session
    state. Drawn again without ``value=``, the widget would reach the browser with only
    its default (a slider's minimum) and no value to show, and the browser's next
    message would send that minimum back as if the user had picked it. Setting the
    key before the widget is drawn makes Streamlit send the kept value with it.
    """
    st.session_state[key] = st.session_state[key]


def keep(key: str, value: Any) -> None:
    """Set the kept value of ``key`` (for a widget that is redrawn under a new key, or by a callback)."""
    _kept()[key] = value
    st.session_state[key] = value


def forget(key: str, param: str | None = None) -> None:
    """Drop ``key``'s kept and current value, and its query parameter ``param`` (it falls back to its default)."""
    _kept().pop(key, None)
    st.session_state.pop(key, None)
    if param and param in st.query_params:
        del st.query_params[param]


#: Prefix of the flag :func:`page_runs` sets for a fragment.
_PAGE_RUN = "_page_run_before:"


def publish() -> None:
    """Keep every value restored in this run and write the non-default ones to the URL.

    Call once at the end of a page. Parameters of values equal to their
    default are removed, so the URL names only what differs.
    """
    declared = st.session_state.pop(_DECLARED, {})
    kept = _kept()
    for key, (param, kind, default) in declared.items():
        if key not in st.session_state:
            continue
        value = st.session_state[key]
        kept[key] = value
        text = encode(value, kind)
        if value == default or (kind in ("list", "range") and list(value) == list(default)):
            if param in st.query_params:
                del st.query_params[param]
        elif st.query_params.get(param) != text:
            st.query_params[param] = text


def page_runs(fragment: str) -> None:
    """Say, in a run of the whole page and before it calls the fragment ``fragment``, that the
    fragment's next run is part of this page run (see :func:`fragment_rerun`)."""
    st.session_state[_PAGE_RUN + fragment] = True


def fragment_rerun(fragment: str) -> bool:
    """Inside the fragment ``fragment``, once per run: True when this run is the fragment's own
    rerun (``run_every`` or a control inside it), not a run of the whole page.

    A session-state flag, not Streamlit's script-run context: the page sets it
    (:func:`page_runs`) and the fragment takes it, so only a fragment run that no page run
    preceded finds it unset.
    """
    return not st.session_state.pop(_PAGE_RUN + fragment, False)
