"""The server's freed memory handed back to the system: glibc's ``malloc_trim`` every few seconds.

A live follow redraws each open tab every second: the run's new rows, its verdict read again at each
commit, the figure's JSON and its message, each block a little bigger than the last as the run grows.
glibc keeps what is freed in its arenas (one per thread that allocates, and streamlit runs each
session's script on a thread of its own) and reuses it only for blocks that fit, so the served app's
RSS kept rising with nothing more held: in a two-tab soak, 188 MB lay free in the arenas after six
minutes beside 93 MB in use. ``malloc_trim(0)`` returns the free pages of every arena; one call on
that server took its RSS from 492 to 435 MB. Trimming alone still left the RSS rising: glibc raises its
mmap threshold to the largest block freed (up to 32 MB), so the redraws' big blocks come from the arenas
and leave holes there; :func:`keep_trimmed` therefore fixes the threshold (:data:`MMAP_THRESHOLD`: a
block that big is mapped and unmapped on free) and caps the arenas (:data:`ARENA_MAX`) before it starts
trimming. Where there is no glibc (musl, macOS) nothing is done.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import threading
from typing import Any, Callable

import streamlit as st

#: Seconds between two trims: a trim walks the arenas (a few ms), a second's redraw frees a few MB.
TRIM_SECONDS = 10.0
THREAD_NAME = "regime-dash-malloc-trim"
#: Blocks of this many bytes or more are mapped on their own and unmapped when freed (twice glibc's
#: starting value; setting it stops glibc raising it).
MMAP_THRESHOLD = 256 * 1024
#: Arenas glibc may make (its default is eight a core, each keeping its own free memory).
ARENA_MAX = 2
#: ``mallopt``'s parameter numbers (glibc's malloc.h).
M_MMAP_THRESHOLD, M_ARENA_MAX = -3, -8


def _libc(name: str, *argtypes) -> Callable[..., int] | None:
    """glibc's function ``name``, or None where the C library has none."""
    try:
        fn = getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), name)
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = list(argtypes), ctypes.c_int
    return fn


_TRIM = _libc("malloc_trim", ctypes.c_size_t)
_MALLOPT = _libc("mallopt", ctypes.c_int, ctypes.c_int)


def tune() -> bool:
    """Fix glibc's mmap threshold at :data:`MMAP_THRESHOLD` and cap its arenas at :data:`ARENA_MAX`
    (arenas made before stay); False where there is no glibc to ask or it refused."""
    if _MALLOPT is None:
        return False
    return bool(_MALLOPT(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) & bool(_MALLOPT(M_ARENA_MAX, ARENA_MAX))


def trim() -> bool:
    """Hand the allocator's free pages back to the system now; False where there is no glibc to ask."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True


@st.cache_resource(show_spinner=False)
def keep_trimmed() -> dict[str, Any]:
    """:func:`tune` the allocator, then start, once a process, a daemon thread that calls :func:`trim` every
    :data:`TRIM_SECONDS`: ``{"thread", "trims", "stop", "tuned"}`` (``trims`` counts the calls; set ``stop``
    to end it)."""
    box: dict[str, Any] = {"trims": 0, "stop": threading.Event(), "tuned": tune()}
    seconds = TRIM_SECONDS

    def loop() -> None:
        while not box["stop"].wait(seconds):
            if not trim():
                return  # no glibc: nothing to hand back
            box["trims"] += 1

    box["thread"] = threading.Thread(target=loop, name=THREAD_NAME, daemon=True)
    box["thread"].start()
    return box
