"""Writers: who wrote each row of a file that several ranks, or a restarted launcher, wrote to.

Where a row carries a writer field (:data:`WRITER_FIELDS`, the first one a frame has),
each value is a writer and each writer a run of its own. Where nothing says who wrote a
line, :func:`content_writers` tells the writers apart by the continuity of their state:
each row joins the writer whose row of the step before it continues
(:mod:`.continuity`), and a row that continues none starts a writer of its own.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from regime_dash.analysis.structure import continuity as ct
from regime_dash.analysis.view import FrameView
from regime_dash.diag.catalogue import WRITER_FIELDS
from regime_dash.errors import ValidationError
#: Copies of one step compared with the copies of the step before when writers are told from the content.
MAX_COPIES = 8


def _label(value) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)) or value is pd.NA:
        return "(none)"
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


def labels(frame: pd.DataFrame, name: str) -> np.ndarray:
    """The writer of each row of ``frame`` by its field ``name``, as text (``(none)`` where a row has none)."""
    codes, uniques = pd.factorize(frame[name], use_na_sentinel=True)
    names = np.array([_label(u) for u in uniques] + ["(none)"], dtype=object)
    return names[codes]


def writer_field(vw: FrameView) -> tuple[str | None, np.ndarray | None]:
    """``(field, label of each view row)`` of the first writer field the frame has; ``(None, None)`` without one."""
    for name in WRITER_FIELDS:
        if name in vw.frame.columns:
            return name, labels(vw.frame, name)
    return None, None


def in_file_order(labels: np.ndarray, order: np.ndarray | None) -> list[str]:
    """The distinct labels, the first writer in the file first."""
    seq = labels if order is None else labels[order]
    return list(dict.fromkeys(seq.tolist()))


def pick(writers: list[str], writer: str | None, field: str) -> str:
    """The writer to judge: ``writer``, else the first in the file.

    Raises
    ------
    ValidationError
        ``writer`` is not one of the file's.
    """
    if writer is None:
        return writers[0]
    if str(writer) not in writers:
        raise ValidationError(f"no writer {writer!r} in this run ({field}: {', '.join(writers[:20])})",
                              field="writer", value=writer)
    return str(writer)


def _candidates(steps: np.ndarray, fo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(earlier, row) pairs of view rows: each row with every copy of the step before it written before it."""
    pos = np.empty(len(fo), dtype=np.int64)
    pos[fo] = np.arange(len(fo))
    order = np.lexsort((pos, steps))
    s_sorted = steps[order]
    a_list, b_list = [], []
    for b in fo:
        lo, hi = np.searchsorted(s_sorted, steps[b] - 1), np.searchsorted(s_sorted, steps[b] - 1, side="right")
        for a in order[lo:hi][:MAX_COPIES]:
            if pos[a] < pos[b]:
                a_list.append(int(a))
                b_list.append(int(b))
    return np.array(a_list, dtype=np.int64), np.array(b_list, dtype=np.int64)


def content_writers(vw: FrameView, order: np.ndarray | None, ulps: float = 0.0) -> np.ndarray:
    """A writer label (``"1"``, ``"2"``, ... by first appearance) for each view row, told from the content."""
    fo = np.arange(vw.n) if order is None else np.asarray(order, dtype=np.int64)
    before, rows = _candidates(vw.step, fo)
    ok = np.array([bool(o.ok) for o in ct.continues(vw, before, rows, ulps)], dtype=bool)
    links: dict[int, list[int]] = {}
    for a, b in zip(before[ok], rows[ok]):
        links.setdefault(int(b), []).append(int(a))
    chain = np.full(vw.n, -1, dtype=np.int64)
    taken: set[int] = set()  # rows whose next step a later row has already taken
    count = 0
    for b in fo:
        a = next((a for a in links.get(int(b), []) if a not in taken), None)
        if a is None:
            chain[b], count = count, count + 1
        else:
            chain[b] = chain[a]
            taken.add(a)
    return np.array([str(c + 1) for c in chain], dtype=object)


__all__ = ["MAX_COPIES", "WRITER_FIELDS", "content_writers", "in_file_order", "labels", "pick", "writer_field"]
