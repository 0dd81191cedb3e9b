"""One way to show an error in the app: what went wrong, what to do, details collapsed.

Nothing the page shows carries an absolute path of the server: messages and details
are scrubbed (a path is shown by its last component). Errors are turned into an
:class:`ErrorNote` when they are caught, so session state keeps a few strings, not an
exception whose traceback holds the frames (and buffers) of the failed call.
"""
from __future__ import annotations

import os
import re
import traceback
from dataclasses import dataclass

import streamlit as st

from regime_dash.errors import (
    IngestError,
    RegimeDashError,
    StoreError,
    ValidationError,
)
from regime_dash.text import markdown_literal

# an absolute POSIX path (or a Windows drive path) inside a message
_ABS_PATH = re.compile(r"(?<![\w.~-])(?:/|[A-Za-z]:\\)[^\s'\"`,;:()<>]*")


def scrub(text: str) -> str:
    """Replace every absolute path in ``text`` by its last component.

    Parameters
    ----------
    text
        A message or a traceback.

    Returns
    -------
    str
    """
    def last(m: re.Match) -> str:
        tail = os.path.basename(m.group(0).replace("\\", "/").rstrip("/"))
        return tail or "…"

    return _ABS_PATH.sub(last, text)


@dataclass(frozen=True)
class ErrorNote:
    """An error as the page shows it.

    Attributes
    ----------
    what
        What went wrong, in one sentence (no absolute paths).
    todo
        What the person can do about it.
    details
        The error's type and data (and, for an unexpected error, its traceback), for
        the collapsed details (no absolute paths).
    """

    what: str
    todo: str
    details: str

    @classmethod
    def from_exception(cls, exc: BaseException, todo: str | None = None) -> "ErrorNote":
        """Describe an exception (ours by its data; any other as unexpected)."""
        if isinstance(exc, IngestError):
            hint = ("Check that the file is a diag.jsonl (one JSON object per line, plain or .gz) "
                    "and upload it again; the other files were not affected.")
        elif isinstance(exc, StoreError):
            hint = ("Free some space on the run store's disk or fix its permissions "
                    "(REGIME_DASH_STORE names it), then try again. The store is unchanged.")
        elif isinstance(exc, ValidationError):
            hint = "Change the value named above and try again."
        elif isinstance(exc, RegimeDashError):
            hint = "Try again; if it happens again, report it with the details below."
        else:
            hint = ("This is a bug in regime-dash: please report it with the details below. "
                    "Nothing was stored from this file, and the rest of the app works.")
        if isinstance(exc, RegimeDashError):
            what = str(exc)
            data = {k: v for k, v in vars(exc).items() if v is not None and not k.startswith("_")}
            details = type(exc).__name__ + "".join(f"\n{k}: {v}" for k, v in data.items())
        else:
            what = f"Unexpected error: {type(exc).__name__}: {exc}"
            details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        return cls(scrub(what), todo or hint, scrub(details))


def show_error(err: BaseException | ErrorNote, *, context: str = "") -> None:
    """Show an error: what went wrong and what to do, the details in a collapsed expander.

    Parameters
    ----------
    err
        The error (an exception is described with :meth:`ErrorNote.from_exception`).
    context
        Markdown put before the message, e.g. ``"diag.jsonl: not ingested. "``; a file name or
        any other text from a file in it is the caller's to escape
        (:func:`regime_dash.text.markdown_literal`).

    The message is shown as text: an exception's words echo file names, keys and values, whose
    Markdown would render (a link, an image fetched from another host).
    """
    note = err if isinstance(err, ErrorNote) else ErrorNote.from_exception(err)
    st.error(f"{scrub(context)}{markdown_literal(note.what)}\n\n**What to do:** {note.todo}",
             icon=":material/error:")
    with st.expander("Details", expanded=False):
        st.code(note.details, language=None)
