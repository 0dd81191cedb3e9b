"""A replay's frame written to a file: diag.jsonl (the cluster's format) or Parquet, chosen by suffix.

``replay --out``, ``replay --single-out`` and ``replay --live --out`` write through here
(:func:`write_frame`), as does the long benchmark's Parquet stage.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

from regime_dash.errors import ValidationError

if TYPE_CHECKING:  # the annotation only: pandas loads when a frame is written
    import pandas as pd

OUT_SUFFIXES = (".jsonl", ".parquet")


def check_out(out: str | Path, option: str = "--out") -> Path:
    """``out`` as a path, or :class:`ValidationError` naming it (as the ``option`` it came from) and its suffix
    when it is neither of :data:`OUT_SUFFIXES`."""
    out = Path(out)
    if out.suffix not in OUT_SUFFIXES:
        raise ValidationError(f"{option} {str(out)!r}: unknown suffix {out.suffix!r}; use one of {OUT_SUFFIXES}",
                              field=option.lstrip("-").replace("-", "_"), value=str(out))
    return out


def write_frame(frame: pd.DataFrame, out: str | Path,
                progress: Callable[[int, int], None] | None = None) -> Path:
    """Write ``frame`` to ``out`` as diag.jsonl or Parquet, chosen by suffix; ``progress(rows_done, rows)``
    follows a diag.jsonl's chunks."""
    from regime_dash.diag import catalogue as diag

    out = check_out(out)
    out.parent.mkdir(parents=True, exist_ok=True)  # a new folder, as the README's data/out/
    if out.suffix == ".jsonl":
        return diag.write_jsonl(frame, out, progress=progress)
    frame.to_parquet(out, index=False, use_dictionary=dictionary_columns(frame))
    return out


#: Rows of a column's head looked at, and the distinct values in them at most, for a dictionary page.
HEAD_ROWS, HEAD_DISTINCT = 4096, 256


def dictionary_columns(frame: pd.DataFrame) -> list[str]:
    """The columns worth a Parquet dictionary: those not of floats whose head repeats (``fold``, ``phase``,
    the counters). A float slot takes a new value most steps: Arrow's writer hashes a megabyte of it before
    it falls back to plain pages, most of the write's time, for a file of the same size."""
    head = frame.iloc[:HEAD_ROWS]
    return [str(c) for i, (c, dtype) in enumerate(frame.dtypes.items())
            if dtype.kind != "f" and head.iloc[:, i].nunique(dropna=False) <= HEAD_DISTINCT]


__all__ = ["OUT_SUFFIXES", "check_out", "dictionary_columns", "write_frame"]
