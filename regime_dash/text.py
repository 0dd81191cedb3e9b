"""Text from files, made safe to show on a terminal (no escape sequences) or in Markdown, and cut
where it is echoed.

File names, keys and values come from files (and URLs) a user did not write; printed raw, an
ESC sequence moves the cursor or recolours the terminal, Markdown in them renders (an image
from another host is fetched), and a 10,000-digit value repeated in a message buries it.
"""
from __future__ import annotations

import re

__all__ = ["clip", "markdown_literal", "terminal_safe"]

# C0 controls but tab and newline, DEL, and the C1 controls (CSI 0x9b among them)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """``text`` with every control character (ESC included) written as its escape, ``\\x1b``."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))


# every ASCII punctuation character CommonMark lets a backslash escape, so none starts
# Markdown (links, images, code spans, emphasis, HTML, headings; "$" for Streamlit's LaTeX)
_MARKDOWN = re.compile(r"([!-/:-@\[-`{-~])")


def markdown_literal(text: str) -> str:
    """``text`` written so Markdown shows it as it is: each punctuation character backslash-escaped,
    line breaks as spaces (a heading or a list cannot start on a line of it)."""
    return _MARKDOWN.sub(r"\\\1", re.sub(r"[\r\n]+", " ", str(text)))


def clip(text: str, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was (for echoing input back)."""
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"
