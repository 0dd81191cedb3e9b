"""Reading stored runs: a run's parts as one table or a frame, its rejects and set-aside values,
the whole store's schema and dataset, and the storage type of every column.

A run's parts never change while the run has its id, except that a followed run merges its
small parts (:func:`regime_dash.store.append.compact_parts`): a part listed and then merged
away is read again from a fresh listing. Each read of a run's files goes through
:func:`regime_dash.store.failures.reading`, so a run deleted meanwhile or a damaged part is
said in one line.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from regime_dash.errors import StoreError
from regime_dash.ingest import CANONICAL_TYPES, LINE_COLUMN, conform_table, unified_types, unify_tables, unify_types
from regime_dash.store.failures import reading
from regime_dash.store.metadata import existing_dir, list_runs, run_meta
from regime_dash.store.paths import META, PARTITION, part_files, run_dir, run_dirs, run_id_of

if TYPE_CHECKING:  # pyarrow.dataset loads pandas: only readers of the whole store pay for it
    import pyarrow.dataset as ds

__all__ = ["PartSchemas", "as_float32", "in_order", "load_frame", "sorted_frame", "load_table", "open_dataset", "read_jsonl", "run_parts", "store_schema"]

_READ_ATTEMPTS = 5  # listings of a run's parts tried when one vanishes between the listing and its read
#: Rows a narrowed read takes at a time (whole row groups): its float64 transient, not the run's.
_NARROW_ROWS = 1 << 16


def run_parts(root: Path, run_id: str) -> list[Path]:
    """The run's Parquet files, in write order."""
    d = existing_dir(root, run_id)
    with reading(root, run_id):
        return part_files(d)


def read_jsonl(root: Path, run_id: str, name: str) -> list[dict[str, Any]]:
    """The records of the run's JSON-lines file ``name`` (none when the file is not there)."""
    p = existing_dir(root, run_id) / name
    with reading(root, run_id) as part:
        part[0] = p
        if not p.exists():
            return []
        with open(p, encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]


def load_table(root: Path, run_id: str, columns: Sequence[str] | None = None, *, narrow: bool = False) -> pa.Table:
    """The run as one Arrow table, types unified across parts, in file order (see :meth:`RunStore.load_table`).

    Raises
    ------
    StoreError
        Unknown run, or a requested column the run does not have.
    """
    if columns is not None:
        columns = list(columns)
        known = set(run_meta(root, run_id).get("columns", {})) | {LINE_COLUMN}
        missing = [c for c in columns if c not in known]
        if missing:
            raise StoreError(f"run {run_id!r} has no column {missing[0]!r}", run_id=run_id)
    for _attempt in range(_READ_ATTEMPTS - 1):
        table = _read_parts(root, run_id, columns, vanished_ok=True, narrow=narrow)
        if table is not None:
            return table
    return _read_parts(root, run_id, columns, vanished_ok=False, narrow=narrow)


def _read_parts(root: Path, run_id: str, columns: list[str] | None, vanished_ok: bool,
                narrow: bool = False) -> pa.Table | None:
    """The run's parts read and joined (:func:`unify_tables`, or :func:`_read_narrowed` with ``narrow``),
    or ``None`` (with ``vanished_ok``) when one went between the listing and its read while the run
    stayed; a run deleted meanwhile raises."""
    files = run_parts(root, run_id)
    with reading(root, run_id) as part:
        try:
            if narrow:
                return _read_narrowed(files, columns, part)
            tables = []
            for f in files:
                part[0] = f
                if columns is None:
                    tables.append(pq.read_table(f))
                else:
                    have = set(pq.read_schema(f).names)
                    tables.append(pq.read_table(f, columns=[c for c in columns if c in have]))
        except FileNotFoundError:
            if vanished_ok and (run_dir(root, run_id) / META).is_file():
                return None
            raise
    return unify_tables(tables, columns)


def load_frame(root: Path, run_id: str, columns: Sequence[str] | None = None, *, narrow: bool = False):
    """The run as a pandas DataFrame sorted by ``step``, then file line (see :meth:`RunStore.load`)."""
    want = None if columns is None else list(columns)
    read = want
    if want is not None:
        extra = [c for c in ("step", LINE_COLUMN) if c not in want
                 and c in (set(run_meta(root, run_id).get("columns", {})) | {LINE_COLUMN})]
        read = want + extra
    return sorted_frame(load_table(root, run_id, read, narrow=narrow), want)


def sorted_frame(table: pa.Table, want: Sequence[str] | None):
    """``table`` as :meth:`RunStore.load` gives it: sorted by ``step`` then ``_line`` (numeric steps), the
    columns ``want`` asks for (all: ``None``), a fresh index."""
    keys = [(c, "ascending") for c in ("step", LINE_COLUMN) if c in table.column_names
            and (c != "step" or pa.types.is_integer(table.schema.field(c).type)
                 or pa.types.is_floating(table.schema.field(c).type))]
    if keys and not in_order(table, [c for c, _ in keys]):
        table = table.sort_by(keys)
    if want is not None:
        table = table.select(list(want))
    # a block per column and each Arrow column freed once converted: no second copy of the run
    return table.to_pandas(split_blocks=True, self_destruct=True)


def in_order(table: pa.Table, keys: Sequence[str]) -> bool:
    """Whether ``table`` is already sorted by ``keys`` (the first strictly increasing, with no null,
    settles it): a run written in step order needs no sorted copy."""
    import pyarrow.compute as pc

    first = table.column(keys[0])
    if len(first) < 2:
        return True
    if first.null_count or (pa.types.is_floating(first.type) and pc.any(pc.is_nan(first)).as_py()):
        return False
    return bool(pc.all(pc.greater(first.slice(1), first.slice(0, len(first) - 1))).as_py())


def as_float32(col: pa.ChunkedArray | pa.Array):
    """``(fits, col as float32)``: whether every value of the float64 ``col`` (nulls aside, NaN kept) is a float32."""
    import pyarrow.compute as pc

    small = pc.cast(col, pa.float32(), safe=False)
    same = pc.or_kleene(pc.equal(pc.cast(small, pa.float64()), col), pc.is_nan(col))
    return pc.all(same).as_py() is not False, small


def _row_group_runs(part: pq.ParquetFile) -> Iterator[tuple[list[int], int]]:
    """``part``'s row groups in runs of about :data:`_NARROW_ROWS` rows: each run's indices and first row."""
    meta, group, first, rows = part.metadata, [], 0, 0
    for g in range(meta.num_row_groups):
        group.append(g)
        rows += meta.row_group(g).num_rows
        if rows >= _NARROW_ROWS or g == meta.num_row_groups - 1:
            yield group, first
            group, first, rows = [], first + rows, 0


def _read_narrowed(files: Sequence[Path], columns: Sequence[str] | None, at: list) -> pa.Table:
    """The parts as :func:`unify_tables` joins them, each float64 column whose every value is a float32 as
    float32, read a few row groups at a time: a float64 column is kept as float32 while every value so far
    is one, so the run's float64 copy is never whole in memory. A column found wider later is read again
    as float64 for the pieces before (``at[0]``: the part being read, for the caller's message)."""
    handles = []
    for f in files:
        at[0] = f
        handles.append(pq.ParquetFile(f))
    names, types = unified_types([h.schema_arrow for h in handles], columns)
    narrow = [n for n in names if pa.types.is_float64(types[n])]
    pieces: list[tuple[int, int, pa.Table]] = []  # (part, its first row there, the piece)
    for k, h in enumerate(handles):
        at[0] = files[k]
        have = [n for n in names if n in h.schema_arrow.names]
        for groups, first in _row_group_runs(h):
            piece = conform_table(h.read_row_groups(groups, columns=have, use_threads=True), names, types)
            for n in list(narrow):
                fits, small = as_float32(piece.column(n))
                if fits:
                    piece = piece.set_column(names.index(n), pa.field(n, pa.float32()), small)
                else:
                    narrow.remove(n)
                    pieces = _widened(pieces, n, handles, files, at)
            pieces.append((k, first, piece))
    if not pieces:
        return pa.table([pa.array([], pa.float32() if n in narrow else types[n]) for n in names], names=names)
    return pa.concat_tables([piece for _, _, piece in pieces])


def _widened(pieces: list[tuple[int, int, pa.Table]], name: str, handles: Sequence[pq.ParquetFile],
             files: Sequence[Path], at: list) -> list[tuple[int, int, pa.Table]]:
    """``pieces`` with their float32 column ``name`` read again as float64 (each part's column once)."""
    whole: dict[int, pa.ChunkedArray] = {}
    out = []
    for k, first, piece in pieces:
        if k not in whole:
            at[0] = files[k]
            have = name in handles[k].schema_arrow.names
            whole[k] = (conform_table(handles[k].read(columns=[name]), [name], {name: pa.float64()}).column(0)
                        if have else pa.chunked_array([pa.nulls(handles[k].metadata.num_rows, pa.float64())]))
        i = piece.column_names.index(name)
        out.append((k, first, piece.set_column(i, pa.field(name, pa.float64()), whole[k].slice(first, piece.num_rows))))
    return out


def store_schema(root: Path) -> pa.Schema:
    """The unified schema of the whole store (every part footer, joined by name), ``run`` last."""
    types: dict[str, pa.DataType] = {}
    for d in run_dirs(root):
        for f in part_files(d):
            try:
                fields = pq.read_schema(f)
            except (OSError, pa.ArrowException):
                continue  # deleted meanwhile, or damaged: `doctor` lists it, a load of it says so
            for fld in fields:
                old = types.get(fld.name)
                types[fld.name] = fld.type if old is None else unify_types(old, fld.type)
    types[PARTITION] = pa.string()
    return pa.schema(list(types.items()))


def open_dataset(root: Path) -> ds.Dataset:
    """The whole store as one ``pyarrow.dataset.Dataset``, unified by column name (see
    :meth:`RunStore.open_dataset`)."""
    import pyarrow.dataset as ds

    if not run_dirs(root):
        return ds.dataset(pa.table({PARTITION: pa.array([], pa.string())}))
    part = ds.partitioning(pa.schema([(PARTITION, pa.string())]), flavor="hive")
    files = [str(f) for d in run_dirs(root) for f in part_files(d)]
    return ds.dataset(files, schema=store_schema(root), format="parquet", partitioning=part,
                      partition_base_dir=str(root))


class PartSchemas:
    """The part schemas of each run, read once per run id (a stored run's parts keep their types),
    and the storage type of every column the store holds."""

    def __init__(self) -> None:
        self._by_run: dict[str, list[pa.Schema]] = {}  # run id -> part schemas

    def clear(self) -> None:
        """Forget what was read: other processes may have committed runs since."""
        self._by_run.clear()

    def of(self, folder: Path) -> list[pa.Schema]:
        """The schemas of the run folder's parts, in write order."""
        rid = run_id_of(folder)
        if rid not in self._by_run:
            self._by_run[rid] = [pq.read_schema(f) for f in part_files(folder)]
        return self._by_run[rid]

    def column_types(self, root: Path) -> dict[str, pa.DataType]:
        """Column name -> Arrow type of the store at ``root`` (see :meth:`RunStore.column_types`)."""
        types: dict[str, pa.DataType] = {}
        by_id = {run_id_of(d): d for d in run_dirs(root)}
        for r in list_runs(root):
            d = by_id.get(r["run_id"])
            if d is None:
                continue
            try:
                schemas = self.of(d)
            except (OSError, pa.ArrowInvalid):
                continue
            for sch in schemas:
                for f in sch:
                    if f.name != LINE_COLUMN and f.name not in types and not pa.types.is_null(f.type):
                        types[f.name] = f.type
        types.update(CANONICAL_TYPES)
        return types
