"""Text from files, made safe to show on a terminal (no escape sequences) or in Markdown, and cut
where it is echoed.

File names, keys and values come from files (and URLs) a user did not write; printed raw, an
ESC sequence moves the cursor or recolours the terminal, Markdown in them renders (an image
from another host is fetched), and a 10,000-digit value repeated in a message buries it.
"""
from __future__ import annotations

import re

__all__ = ["clip", "markdown_literal", "terminal_safe"]

# the bidi controls: the embeddings and overrides (U+202A-U+202E), the isolates (U+2066-U+2069)
# and the marks (U+200E, U+200F, U+061C). Shown raw, a right-to-left override reorders what follows
# it on the line: a name "x\u202egnp.exe" reads "xexe.png", a table cell swaps its neighbours.
_BIDI = "\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c"
# one value (a cell, a name): every C0 control (tab, newline and carriage return too: a newline in a
# file's name would start a row of its own), DEL, the C1 controls (CSI 0x9b among them), the bidi ones
_CONTROL = re.compile(f"[\\x00-\\x1f\\x7f-\\x9f{_BIDI}]")
# text of several lines the program composed: the same, tab and newline aside
_CONTROL_LINES = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{_BIDI}]")


def terminal_safe(text: object, *, lines: bool = False) -> str:
    """``text`` with every control character (ESC, newline and tab included) and every bidi control
    written as its escape (``\\x1b``, ``\\n``, ``\\u202e``): one value shown on one line, as it is.

    Every printer shows a value from a file or a user (a run's name, alias, tag or note, a source path,
    a rejected line's reason, an alert's text) through here. ``lines``: ``text`` is several lines the
    program composed (a report, a traceback): its newlines and tabs stay, the rest is escaped; a value
    inside it is escaped on its own first, so no newline of its own can start a line.
    """
    pattern = _CONTROL_LINES if lines else _CONTROL
    return pattern.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))


# every ASCII punctuation character CommonMark lets a backslash escape, so none starts
# Markdown (links, images, code spans, emphasis, HTML, headings; "$" for Streamlit's LaTeX)
_MARKDOWN = re.compile(r"([!-/:-@\[-`{-~])")


def markdown_literal(text: str) -> str:
    """``text`` written so Markdown shows it as it is: each punctuation character backslash-escaped,
    line breaks as spaces (a heading or a list cannot start on a line of it), bidi controls as their
    escapes (``\\u202e``: shown raw, one reorders the rest of the line)."""
    text = re.sub(f"[{_BIDI}]", lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))
    return _MARKDOWN.sub(r"\\\1", re.sub(r"[\r\n]+", " ", text))


def clip(text: str, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was (for echoing input back)."""
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"
