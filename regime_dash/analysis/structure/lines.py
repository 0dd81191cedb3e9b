"""Where each row stood in the file: the file's own order of a view's rows, and a list of places in words.

A view sorts its rows by step, and the run store keeps a run sorted by step, so the
order the lines were written in is read back from what the reader kept: the file line of
each row (the store's ``_line`` column, or ``frame.attrs[LINES_ATTR]`` where a reader
dropped that column), else the row order of the frame first handed to ``view``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from regime_dash.analysis.view import FrameView

#: The run store's column of each row's line in the file it was ingested from.
LINE_COLUMN = "_line"
#: ``frame.attrs`` key of each row's file line, where a reader dropped the ``_line`` column.
LINES_ATTR = "file_lines"


class Shared:
    """An array kept in ``frame.attrs`` and shared, not copied: pandas deep-copies a frame's attrs into
    every frame and column it derives from it (a column read, a slice), which for a million file lines
    is a copy of 8 MB at each."""

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = np.array(array, dtype=np.int64)
        self.array.flags.writeable = False

    def __deepcopy__(self, memo) -> "Shared":
        return self  # read only: the one copy is every frame's

    def __len__(self) -> int:
        return len(self.array)


def _attr_lines(frame: pd.DataFrame) -> np.ndarray | None:
    given = frame.attrs.get(LINES_ATTR)
    if given is None:
        return None
    return given.array if isinstance(given, Shared) else np.asarray(given, dtype=np.int64)


def file_lines(vw: FrameView) -> np.ndarray:
    """int64 [n]: each view row's line in the file (1-based; the row's place among the diag's rows where
    the reader kept no line numbers), so the rows in that order are the file's."""
    if LINE_COLUMN in vw.frame.columns:
        return frame_lines(vw.frame)
    given = _attr_lines(vw.frame)
    source = np.arange(vw.n, dtype=np.int64) if vw.source_rows is None else np.asarray(vw.source_rows, np.int64)
    if given is not None:
        if len(given) > (source.max() if len(source) else -1):
            return given[source]
    return source + 1


def file_order(vw: FrameView) -> np.ndarray | None:
    """The view's rows in the order the file has them (positions), or ``None`` where that is the view's order."""
    lines = file_lines(vw)
    if len(lines) < 2 or (lines[1:] > lines[:-1]).all():
        return None
    return np.argsort(lines, kind="stable")


def file_ordered(frame: pd.DataFrame) -> pd.DataFrame:
    """A stored run's frame without the store's own columns (``_line``, ``run``), each row's file line kept in
    ``attrs[LINES_ATTR]``: the store sorts a run by step, and a resume or a second writer is read in the
    file's order."""
    if LINE_COLUMN in frame.columns:
        frame.attrs[LINES_ATTR] = Shared(frame[LINE_COLUMN].to_numpy())
    out = frame.drop(columns=[c for c in (LINE_COLUMN, "run") if c in frame.columns])
    out.attrs = dict(frame.attrs)
    return out


def frame_lines(frame: pd.DataFrame) -> np.ndarray:
    """int64 [rows]: each row's file line (the ``_line`` column, the lines a reader kept in the attrs, else
    the row's place, 1-based)."""
    if LINE_COLUMN in frame.columns:
        return frame[LINE_COLUMN].to_numpy().astype(np.int64)
    given = _attr_lines(frame)
    if given is not None and len(given) == len(frame):
        return given
    return np.arange(1, len(frame) + 1, dtype=np.int64)


def judged_rows(frame: pd.DataFrame, outline) -> pd.DataFrame:
    """The rows of ``frame`` a verdict with structure ``outline`` judged (the judged writer's, where a field
    names writers, without the rows it set aside): the run drawn once. ``frame`` itself where that is all."""
    if outline is None:
        return frame
    keep = np.ones(len(frame), dtype=bool)
    if len(outline.set_aside):
        keep &= ~np.isin(frame_lines(frame), outline.set_aside)
    if len(outline.writers) > 1 and outline.writer_field in frame.columns:
        from regime_dash.analysis.structure.writers import labels

        keep &= labels(frame, outline.writer_field) == outline.writer
    if keep.all():
        return frame
    out = frame[keep].reset_index(drop=True)
    out.attrs = dict(frame.attrs)
    return out


def row_at_line(frame: pd.DataFrame, line: int) -> int | None:
    """The position of the row of file line ``line`` in ``frame`` (``None`` where none)."""
    at = np.flatnonzero(frame_lines(frame) == int(line))
    return int(at[0]) if len(at) else None


def ordinal(k: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ... ``11th``, ``12th``, ``21st``."""
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


def pattern(places: np.ndarray, unit: str = "line") -> str:
    """The places (sorted whole numbers, e.g. 1-based line numbers) in words: ``line 12``, ``every 500th
    line from line 500``, ``lines 40–49``, or ``7 lines from line 3 to line 90``."""
    places = np.asarray(places, dtype=np.int64)
    if len(places) == 0:
        return f"no {unit}"
    if len(places) == 1:
        return f"{unit} {places[0]:,}"
    d = np.diff(places)
    if (d == 1).all():
        return f"{unit}s {places[0]:,}–{places[-1]:,}"
    if len(places) >= 3 and (d == d[0]).all():
        return f"every {ordinal(int(d[0]))} {unit} from {unit} {places[0]:,} ({len(places):,} {unit}s)"
    return f"{len(places):,} {unit}s from {unit} {places[0]:,} to {unit} {places[-1]:,}"


__all__ = ["LINES_ATTR", "LINE_COLUMN", "file_lines", "file_order", "file_ordered", "frame_lines", "judged_rows",
           "ordinal", "pattern", "row_at_line"]
