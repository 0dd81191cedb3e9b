"""A followed run held in memory by a reader and grown with each commit, at the cost of the new rows.

:class:`LiveFrame` holds a run's frame as the dashboard draws it (canonical column
names, ``step`` as int64, sorted by step then line) and the file line it reaches. Its
:meth:`~LiveFrame.refresh` reads only the rows past that line
(the store's ``rows_after``, which reads only the files holding them)
and appends them. What appending cannot keep exact reads the run whole again, once: a
step lower than the last one held (a trainer restarted from a checkpoint: the rows sort
in among the earlier ones), a column seen for the first time, a row without a whole-number
step (the whole-run reader leaves those out and counts them).
"""
from __future__ import annotations

import time
from typing import Any, Mapping

import pandas as pd

from regime_dash.diag.aliases import canonical_frame
from regime_dash.ingest import LINE_COLUMN
from regime_dash.store.run_store import PARTITION, RunStore

__all__ = ["LiveFrame", "read_whole", "run_frame"]

#: Reads of a whole run that may meet a follow's merge of parts before one holds every row committed.
WHOLE_ATTEMPTS = 5


def run_frame(table_frame: pd.DataFrame, aliases: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Stored rows as the dashboard draws them: canonical names, whole-number ``int64`` steps (the rows
    without one left out and counted in ``attrs["rows_without_step"]``), a step from the row order
    where the run has no step field (``attrs["step_from_row"]``)."""
    frame = canonical_frame(table_frame.drop(columns=[c for c in (PARTITION,) if c in table_frame.columns]),
                            dict(aliases) if aliases else None)
    if "step" not in frame.columns:
        frame.insert(0, "step", range(len(frame)))
        frame.attrs["step_from_row"] = True
        return frame
    step = pd.to_numeric(frame["step"], errors="coerce")
    bad = step.isna() | (step != step.round())
    if bad.any():
        attrs = dict(frame.attrs)
        frame = frame[~bad].copy()
        frame.attrs = {**attrs, "rows_without_step": int(bad.sum())}
        step = step[~bad]
    frame["step"] = step.astype("int64")
    return frame


def read_whole(store: RunStore, run_id: str, aliases: Mapping[str, Any] | None = None,
               attempts: int = WHOLE_ATTEMPTS) -> pd.DataFrame:
    """The run read whole (:func:`run_frame` of ``store.load``), holding at least the rows its metadata
    counted before the read: a read that meets a follow's merge of parts sees a shorter prefix of the run
    (the merged parts go before the merged part comes), and is read again."""
    for attempt in range(attempts):
        counted = store.meta(run_id).get("rows") or 0
        rows = store.load(run_id, narrow=True)
        if len(rows) >= counted:
            break
        time.sleep(0.05 * (attempt + 1))
    return run_frame(rows, aliases)


class LiveFrame:
    """One followed run's frame, grown by :meth:`refresh` (see the module doc).

    Attributes
    ----------
    frame
        The rows so far (callers must not change it: it is the one held).
    lines
        The file lines it holds up to.
    reloads
        Times the run was read whole (the first read included).
    """

    def __init__(self, store: RunStore, run_id: str, aliases: Mapping[str, Any] | None = None):
        self.store, self.run_id, self.aliases = store, run_id, aliases
        self.frame = pd.DataFrame()
        self.lines = 0
        self.reloads = 0

    def refresh(self) -> int:
        """Read what was committed since the last call; the rows added (all of them on a whole read)."""
        table, reach = self.store.rows_after(self.run_id, self.lines)
        if table is None or not table.num_rows:
            self.lines = reach
            return 0
        if self.lines == 0:
            return self._whole(reach)
        raw = table.to_pandas()
        new = run_frame(raw, self.aliases)
        held = self.frame
        if (new.attrs.get("rows_without_step") or new.attrs.get("step_from_row") or held.attrs.get("step_from_row")
                or held.attrs.get("rows_without_step") or not set(new.columns) <= set(held.columns)
                or (len(held) and int(new["step"].min()) < int(held["step"].iloc[-1]))):
            return self._whole(reach)
        new = new.sort_values(["step", LINE_COLUMN], kind="stable") if LINE_COLUMN in new.columns else new
        attrs = dict(held.attrs)
        self.frame = pd.concat([held, new], ignore_index=True)
        self.frame.attrs = attrs
        self.lines = reach
        return len(new)

    def _whole(self, reach: int) -> int:
        """The run read whole (as ``store.load`` reads it: sorted by step, then line)."""
        self.frame = run_frame(self.store.load(self.run_id), self.aliases)
        # the lines of the rows read, not ``reach``: a read during a merge may see a shorter prefix
        have_lines = LINE_COLUMN in self.frame.columns and len(self.frame)
        self.lines = int(self.frame[LINE_COLUMN].max()) if have_lines else reach
        self.reloads += 1
        return len(self.frame)
