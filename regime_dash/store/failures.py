"""The store's I/O failures, each said in one line a person can act on.

A run's files go away under a reader when another process deletes the run (a concurrent
``rm``), and a part can be damaged by hand or by the disk (truncated, emptied, not Parquet,
a ``_meta.json`` that is not JSON). Every reader of a run's files (its metadata, its parts,
its rejects) reads them inside :func:`reading`, which turns either failure into one
:class:`~regime_dash.errors.StoreError` naming the run, the file and the fix. A write that
fails says the system's reason with its code (:func:`os_error_text`).
"""
from __future__ import annotations

import contextlib
import errno
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from regime_dash.errors import StoreError
from regime_dash.store.paths import META

__all__ = ["os_error_text", "reading"]


@contextlib.contextmanager
def reading(root: Path, run_id: str) -> Iterator[list]:
    """Reads of one run's files, their failures said in one line: a run deleted meanwhile
    (a concurrent ``rm``) or a damaged part (truncated, empty, not Parquet). Yields a
    one-item list the caller sets to the file it reads."""
    part: list = [None]
    try:
        yield part
    except FileNotFoundError:
        raise StoreError(f"run {run_id!r} was deleted while it was read (a concurrent rm?); "
                         "list the runs again", run_id=run_id, path=str(root)) from None
    except (OSError, ValueError, pa.ArrowException) as e:  # ValueError: a _meta.json not JSON
        name = Path(part[0]).name if part[0] is not None else META
        reason = " ".join(str(e).split())[:200]
        raise StoreError(f"run {run_id!r} is damaged: {name}: {reason}; `python -m regime_dash doctor "
                         "--repair` moves it to _quarantine/", run_id=run_id,
                         path=str(part[0] or root)) from None


def os_error_text(e: OSError) -> str:
    """The system's reason for ``e`` with its code (``No space left on device (ENOSPC)``), the code
    left out where the reason says it already."""
    code = errno.errorcode.get(e.errno or 0, "")
    return f"{e.strerror or e}" + (f" ({code})" if code and code not in (e.strerror or "") else "")
