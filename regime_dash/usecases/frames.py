"""``--out FILE`` of ``replay`` and ``replay --live``: the frame written as diag.jsonl or Parquet.

Both commands write through here, so ``replay`` can hand ``--live`` over to
:mod:`regime_dash.cli.replay_live` without that module importing ``replay`` back.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from regime_dash.errors import ValidationError

if TYPE_CHECKING:  # the annotation only: pandas loads when a frame is written
    import pandas as pd

OUT_SUFFIXES = (".jsonl", ".parquet")


def check_out(out: str | Path) -> Path:
    """``out`` as a path, or :class:`ValidationError` naming its suffix when it is neither of :data:`OUT_SUFFIXES`."""
    out = Path(out)
    if out.suffix not in OUT_SUFFIXES:
        raise ValidationError(f"--out {str(out)!r}: unknown suffix {out.suffix!r}; use one of {OUT_SUFFIXES}",
                              field="out", value=str(out))
    return out


def write(frame: pd.DataFrame, out: str | Path) -> Path:
    """Write ``frame`` to ``out`` as diag.jsonl or Parquet, chosen by suffix."""
    from regime_dash.diag import catalogue as diag

    out = check_out(out)
    out.parent.mkdir(parents=True, exist_ok=True)  # a new folder, as the README's data/out/
    if out.suffix == ".jsonl":
        bar = None
        if sys.stderr.isatty():
            from regime_dash.cli.progress import ProgressBar

            bar = ProgressBar(out.name, unit="steps", scale=1)
        try:
            return diag.write_jsonl(frame, out, progress=bar)
        finally:
            if bar is not None:
                bar.close()
    frame.to_parquet(out, index=False, use_dictionary=dictionary_columns(frame))
    return out


#: Rows of a column's head looked at, and the distinct values in them at most, for a dictionary page.
_HEAD_ROWS, _HEAD_DISTINCT = 4096, 256


def dictionary_columns(frame: pd.DataFrame) -> list[str]:
    """The columns worth a Parquet dictionary: those not of floats whose head repeats (``fold``, ``phase``,
    the counters). A float slot takes a new value most steps: Arrow's writer hashes a megabyte of it before
    it falls back to plain pages, most of the write's time, for a file of the same size."""
    head = frame.iloc[:_HEAD_ROWS]
    return [str(c) for i, (c, dtype) in enumerate(frame.dtypes.items())
            if dtype.kind != "f" and head.iloc[:, i].nunique(dropna=False) <= _HEAD_DISTINCT]
