"""Text from files, made safe to show: on a terminal (no escape sequences) and in Markdown (no markup).

File names, keys and values come from files a user did not write; printed raw, an ESC
sequence moves the cursor or recolours the terminal, and a backtick or ``![..](..)``
breaks out of inline code and makes a browser fetch an image.
"""
from __future__ import annotations

import re

__all__ = ["clip", "markdown_code", "markdown_text", "terminal_safe"]

# C0 controls but tab and newline, DEL, and the C1 controls (CSI 0x9b among them)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~$])")


def terminal_safe(text: str) -> str:
    """``text`` with every control character (ESC included) written as its escape, ``\\x1b``."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))


def clip(text: str, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was (for echoing input back)."""
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def markdown_text(text: str) -> str:
    """``text`` shown literally in Markdown: every markup character escaped, controls escaped."""
    return _MD_SPECIAL.sub(r"\\\1", terminal_safe(text)).replace("\n", " ")


def markdown_code(text: str) -> str:
    """``text`` as inline code that nothing in it can close: a backtick fence longer than any
    run of backticks inside, padded with spaces where it starts or ends with one."""
    text = terminal_safe(text).replace("\n", " ")
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"
