"""The CLI's one progress bar: a :mod:`tqdm` line on stderr, drawn by the caller only on a terminal."""
from __future__ import annotations

import os
import sys
from typing import TextIO

from tqdm import tqdm


def _screen(stream: TextIO) -> tuple[int, int]:
    """The terminal's columns and rows; 80 x 24 where it reports none (a fresh pty says
    0 x 0, and tqdm would then trim the line to nothing, or not draw it at all)."""
    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return 80, 24
    return size.columns or 80, size.lines or 24


class ProgressBar:
    """A one-line progress bar: done of total, percent, rate; at most ten redraws a second.

    Parameters
    ----------
    label
        Text before the bar (a file name, ``sweep``).
    stream
        Where to draw; defaults to ``sys.stderr``.
    width
        Characters of the bar itself.
    unit
        What is counted, after the count (``MB``, ``configs``).
    scale
        Shown count per counted item: ``1e-6`` counts bytes and shows MB (with one
        decimal); ``1`` shows ``done/total``.
    """

    def __init__(self, label: str, stream: TextIO | None = None, width: int = 30, unit: str = "MB",
                 scale: float = 1e-6):
        from regime_dash.text import terminal_safe

        self.label = terminal_safe(label)  # a file name: tqdm draws it as it is
        self.stream = stream or sys.stderr
        self.width = width
        self.unit = unit
        self.scale = scale
        self._bar: tqdm | None = None

    def __call__(self, done: int, total: int | None) -> None:
        """Move the bar to ``done`` of ``total`` (``None``: a size not known)."""
        if self._bar is None:  # the first call says whether the size is known
            count = "{n:8.1f}" if self.scale != 1 else "{n_fmt}/{total_fmt}"
            fmt = (f"{{desc}} [{{bar:{self.width}}}] {{percentage:3.0f}}% {count} {self.unit} {{rate_fmt}}"
                   if total else f"{{desc}} {count} {self.unit} {{rate_fmt}}")
            cols, rows = _screen(self.stream)
            # exact counts, scaled only for show; the average rate
            self._bar = tqdm(total=total or None, desc=self.label, unit=self.unit,
                             unit_scale=self.scale if self.scale != 1 else False, file=self.stream,
                             mininterval=0.1, smoothing=0, ascii="-#", bar_format=fmt, ncols=cols, nrows=rows)
        self._bar.update(done - self._bar.n)

    def close(self) -> None:
        """Draw the final state and end the line."""
        if self._bar is not None:
            self._bar.close()


__all__ = ["ProgressBar"]
