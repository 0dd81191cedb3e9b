"""The store's ``_common_metadata``: the unified schema of every part of every run, one file.

Plain readers take a folder's schema from its first file, so a column that first appears in a
later part (a followed run's later lines carry a new field) or in a later run is dropped. Handed
this file's schema, pandas and pyarrow read every column (README, "Reading the store directly")::

    schema = pyarrow.parquet.read_schema("data/store/_common_metadata")
    pandas.read_parquet("data/store", schema=schema)

Every commit widens the file under the store's lock *before* its part becomes visible, so a
reader never sees a part whose columns the file lacks. A column whose run was deleted stays in
the file (it reads as null); nothing is ever narrowed by a commit. The file is replaced by a rename
(the temporary name starts with a dot, which no reader's glob reaches).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from regime_dash.ingest import unify_types
from regime_dash.store.paths import PARTITION
from regime_dash.store.reader import store_schema

__all__ = ["FILE", "read", "widen"]

#: The file's name in the store's root: the Parquet convention for a dataset's schema alone.
FILE = "_common_metadata"
_TMP = ".common_metadata.tmp"


def read(root: Path) -> pa.Schema | None:
    """The schema the file holds, or ``None`` when it is missing or unreadable (rebuilt on the next commit)."""
    try:
        return pq.read_schema(root / FILE)
    except (OSError, pa.ArrowException):
        return None


def _joined(base: pa.Schema, schemas: Iterable[pa.Schema]) -> pa.Schema:
    types = {f.name: f.type for f in base if f.name != PARTITION}
    for sch in schemas:
        for f in sch:
            if f.name == PARTITION:
                continue
            old = types.get(f.name)
            types[f.name] = f.type if old is None else unify_types(old, f.type)
    types[PARTITION] = pa.string()
    return pa.schema(list(types.items()))


def widen(root: Path, parts: Iterable[Path]) -> None:
    """Join the schemas of the part files ``parts`` into the store's file (call under the lock,
    before the parts are renamed into view). A missing or unreadable file is rebuilt from every
    part footer of the store first."""
    schemas = [pq.read_schema(p).remove_metadata() for p in parts]
    old = read(root)
    base = old if old is not None else store_schema(root)
    new = _joined(base, schemas)
    if old is not None and new.equals(old):
        return
    tmp = root / _TMP
    pq.write_metadata(new, tmp)
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, root / FILE)
