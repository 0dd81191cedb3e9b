"""The Parquet run store: one immutable, hive-style directory per ingested run.

Layout (see docs/CONTRACTS.md, "Run store")::

    <store>/
      run=<run_id>/
        part-00000.parquet      good rows, flattened dotted columns, plus ``_line``
        part-00001.parquet      a new part starts where a chunk's schema differs
        _meta.json              source, sha256, counts, columns, step range, ingest time
        _rejects.jsonl          one {"line", "reason", "raw"} object per rejected line
        _conflicts.jsonl        one {"line", "field", "value", "type"} per value set aside
      .lock                     serializes the commit step of concurrent ingests
      _layouts.json             named chart layouts (regime_dash.store.layouts)
    .<store>.staging/           beside the store, on the same file system:
      ingest-<host>~<pid>~<uuid>/   work in progress (renamed into place when done)
      deleting-<host>~<pid>~<uuid>/ a run being deleted

Work in progress lives outside the store directory, where no reader's glob reaches
(DuckDB's ``<store>/**/*.parquet`` descends into dot directories). Where the store is
a mount point (its parent is another file system, so a rename could not cross), the
staging directory is ``<store>/.staging`` and parts are written as ``*.parquet.tmp``,
renamed just before the run directory is: no glob for ``*.parquet`` matches a file
still being written. Names starting with ``_`` or ``.`` are skipped by Arrow and Spark
dataset readers, so the store reads as one table (with a ``run`` partition column).

Guarantees
----------
Atomic
    An ingest writes everything into a ``.ingest-*`` directory and renames it to
    ``run=<id>`` as its last step. A killed ingest leaves only the dot directory, which
    readers skip and the next ingest removes (when its process is gone).
Idempotent
    Runs are keyed by the sha256 of the decompressed content: ingesting the same bytes
    again (under any name, plain or gzip) returns the existing run as ``duplicate_of``;
    a name it has not had becomes an alias of that run (``aliases`` in ``_meta.json``),
    which :meth:`RunStore.resolve` accepts as it does the run's name.
Concurrent
    Parsing runs without a lock; the duplicate check and the rename run under an
    exclusive ``flock`` on ``<store>/.lock`` (:mod:`filelock`), so two ingests of the
    same bytes give one run and two ingests of different files both land; a process
    killed while it holds the lock releases it with its death.
Safe names
    Run ids are ``<name>-<sha256[:12]>`` where the name is reduced to
    ``[A-Za-z0-9._-]`` (no leading dot or dash, at most 64 characters), so no name can
    escape the store or hide from readers. Every id given to ``load``/``delete`` is
    checked the same way. :meth:`RunStore.resolve` also accepts the name given at
    ingest, or an alias, where it is unique. A rename changes the name, never the id.
One type per column
    Every field of the diag contract has one canonical type in every run
    (:data:`regime_dash.ingest.CANONICAL_TYPES`); any other column keeps the first type
    the store saw for it, and later runs are cast to it. A value that does not fit
    losslessly is set aside (null in the column, kept exactly in ``_conflicts.jsonl``
    and counted in the ingest report). So the whole store reads as one typed table in
    pyarrow (``unify_schemas`` with default promotion), DuckDB (``union_by_name``) and
    Spark (``mergeSchema``).
Failures
    An I/O failure (disk full, permission denied, read-only volume) leaves the store as
    it was and raises one :class:`~regime_dash.errors.StoreError` saying what failed,
    where, and how much space the run needed.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import json
import os
import re
import shutil
import socket
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import pyarrow as pa
import pyarrow.parquet as pq
from filelock import FileLock

if TYPE_CHECKING:  # pyarrow.dataset loads pandas: only readers of the whole store pay for it
    import pyarrow.dataset as ds

from regime_dash.errors import IngestError, StoreError
from regime_dash.ingest.diag_rows import meta_reason
from regime_dash.ingest import (
    CANONICAL_TYPES,
    DEFAULT_MAX_LINE_BYTES,
    LINE_COLUMN,
    Aside,
    IngestReport,
    conform_column,
    iter_batches,
    report_reason,
    require_diag,
    conform_table,
    unified_types,
    unify_tables,
    unify_types,
)

__all__ = ["ENV_VAR", "IngestResult", "MAX_COLUMNS", "RunStore", "default_store", "resolve_target", "sanitize_name"]

#: Environment variable naming the default store directory.
ENV_VAR = "REGIME_DASH_STORE"

#: The hive partition key of the store.
PARTITION = "run"

_META = "_meta.json"
_REJECTS = "_rejects.jsonl"
_CONFLICTS = "_conflicts.jsonl"
_TMP_PREFIX = "ingest-"
_TRASH_PREFIX = "deleting-"
_PART_TMP = ".tmp"  # suffix of a part while it is written (in-store staging only)
_QUARANTINE = "_quarantine"  # damaged or stray things moved aside, never deleted
_QUARANTINED = ".quarantined"  # suffix of a Parquet file there: no *.parquet glob reads it
_ID_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,159}$")
_NAME_MAX = 64
_FORMAT_VERSION = 1
_READ_ATTEMPTS = 5  # listings of a run's parts tried when one vanishes between the listing and its read

# Parquet settings: snappy without dictionaries is ~3x faster to write than Arrow's
# default on diag data (mostly unique floats) and no larger; strings get dictionaries.
_PARQUET_KW: dict[str, Any] = {"compression": "snappy"}


def default_store() -> Path:
    """The store directory: ``$REGIME_DASH_STORE``, else ``data/store`` under the cwd.

    Returns
    -------
    pathlib.Path
    """
    env = os.environ.get(ENV_VAR)
    return Path(env) if env else Path.cwd() / "data" / "store"


def sanitize_name(name: str) -> str:
    """Reduce a run name to a safe directory component.

    Anything outside ``[A-Za-z0-9._-]`` becomes ``-``; leading dots and dashes go (no
    hidden, relative or option-like names); the result has at most 64 characters and
    is ``run`` when nothing is left.

    Parameters
    ----------
    name
        A user-chosen name or a file name.

    Returns
    -------
    str
    """
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", str(name))
    s = re.sub(r"\.{2,}", ".", s)  # no ".." anywhere, even though "/" is gone already
    s = s.lstrip(".-")[:_NAME_MAX].rstrip(".-")
    return s or "run"


def _name_from_source(source_name: str | None) -> str:
    if not source_name:
        return "run"
    base = os.path.basename(str(source_name).replace("\\", "/"))
    for ext in (".gz", ".jsonl", ".ndjson", ".json", ".txt"):
        if base.lower().endswith(ext):
            base = base[: -len(ext)]
    return base or "run"


@dataclass
class IngestResult:
    """What :meth:`RunStore.ingest` did with one source.

    Attributes
    ----------
    run_id
        The run holding the data (the existing one for a duplicate).
    rows
        Good rows stored.
    rejected
        ``[{"line": int, "reason": str}, ...]`` for the first 1,000 rejected lines (all
        of them are in the run's ``_rejects.jsonl``).
    rejected_count
        Rejected lines.
    aside
        ``[{"line", "field", "value", "type"}, ...]``: the first 1,000 values set aside
        (all in ``_conflicts.jsonl``); ``aside_count`` counts them.
    coerced
        ``{column: {source type: count}}`` of lossless coercions across kinds.
    columns
        Column names (dotted paths), without the ``_line`` bookkeeping column.
    first_step, last_step
        Step range of the run (``None`` without a numeric ``step`` column).
    duplicate_of
        The existing run's id when these bytes were stored before, else ``None``.
    alias_added
        For a duplicate: the name it came under, now an alias of the existing run (``None``
        when it was that run's name or alias already, or another run holds it).
    alias_taken_by
        For a duplicate whose name another run holds: that run's id (no alias was added).
    given_name
        For a duplicate: the name it came under (sanitized).
    sha256
        Content hash.
    """

    run_id: str
    rows: int
    rejected: list[dict[str, Any]]
    columns: list[str]
    first_step: int | float | None
    last_step: int | float | None
    duplicate_of: str | None = None
    sha256: str | None = None
    meta: dict[str, Any] = field(default_factory=dict, repr=False)
    rejected_count: int = 0
    aside: list[dict[str, Any]] = field(default_factory=list)
    aside_count: int = 0
    coerced: dict[str, dict[str, int]] = field(default_factory=dict)
    alias_added: str | None = None
    alias_taken_by: str | None = None
    given_name: str | None = None

    def duplicate_text(self) -> str:
        """What an ingest of bytes stored before did, in one sentence (the CLI's and the Runs page's)."""
        name = self.meta.get("name") or self.run_id
        head = f"same content as run {name} ({self.run_id})"
        if self.alias_added:
            return f"{head}; added the name {self.alias_added}"
        if self.alias_taken_by:
            return f"{head}; the name was not added: run {self.alias_taken_by} already has it"
        return f"{head}; {self.given_name or 'that name'} is already one of its names, no new run was made"

    def to_dict(self) -> dict[str, Any]:
        """The CLI's JSON object for this file."""
        return {
            "run_id": self.run_id,
            "rows": self.rows,
            "rejected": list(self.rejected),
            "rejected_count": self.rejected_count,
            "aside": list(self.aside),
            "aside_count": self.aside_count,
            "coerced": dict(self.coerced),
            "columns": list(self.columns),
            "first_step": self.first_step,
            "last_step": self.last_step,
            "duplicate_of": self.duplicate_of,
            "alias_added": self.alias_added,
            "alias_taken_by": self.alias_taken_by,
        }


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stale_work_dir(p: Path, host: str) -> bool:
    """A ``ingest-*`` / ``deleting-*`` work directory whose process is gone (this host's,
    ``<prefix><host>~<pid>~<uuid>``), or another host's (or unknown) older than a day."""
    name = p.name.lstrip(".")
    if not (name.startswith(_TMP_PREFIX) or name.startswith(_TRASH_PREFIX)):
        return False
    parts = name.split("~")
    if len(parts) == 3 and parts[0].endswith(host) and parts[1].isdigit():
        return not _pid_alive(int(parts[1]))
    try:
        return time.time() - p.stat().st_mtime >= 24 * 3600
    except OSError:
        return True


#: The most columns one run may have. The diag contract has about a hundred fields; a file
#: with tens of thousands of keys is refused (its parse cost grows with the key count, and
#: every reader of the run pays for each column again).
MAX_COLUMNS = 4096


def _check_width(report: IngestReport, source_name: str | None) -> None:
    if len(report.columns) > MAX_COLUMNS:
        extra = list(report.columns)[MAX_COLUMNS]
        raise IngestError(f"{source_name or 'input'}: more than {MAX_COLUMNS:,} columns (the "
                          f"{MAX_COLUMNS + 1:,}th is {extra[:60]!r}); a run holds at most {MAX_COLUMNS:,}. "
                          "Nothing was stored", path=source_name)


def _errno_name(e: OSError) -> str:
    code = errno.errorcode.get(e.errno or 0, "")
    return f" ({code})" if code and code not in (e.strerror or "") else ""


def _meta_of(d: Path) -> dict[str, Any] | None:
    """A run directory's ``_meta.json``, or None when it is missing or unreadable."""
    try:
        m = json.loads((d / _META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return m if isinstance(m, dict) else None


#: Rows and bytes of batches a part writer gathers into one row group: a row group per ~4 MB
#: chunk (a few thousand rows) costs its columns' page and statistics overhead each time,
#: about half the Parquet write of a diag; past these the gain is gone and memory grows.
_GROUP_ROWS = 1 << 14
_GROUP_BYTES = 16 << 20


class _PartWriter:
    """Writes batches into ``part-NNNNN.parquet.tmp`` files, starting a new part only when
    a batch cannot be cast losslessly to the open part's schema (new column or a type
    the part cannot hold). Batches that fit are gathered into row groups of about
    :data:`_GROUP_ROWS` rows. :meth:`RunStore.ingest` renames them to ``*.parquet`` at commit.
    """

    def __init__(self, directory: Path):
        self.dir = directory
        self.writer: pq.ParquetWriter | None = None
        self.schema: pa.Schema | None = None
        self.parts = 0
        self.held: list[pa.Table] = []  # fitted batches not yet written
        self.held_rows = 0
        self.held_bytes = 0

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        fitted = self._fit(table) if self.writer is not None else None
        if fitted is None:
            self.close()
            self.schema = table.schema
            path = self.dir / f"part-{self.parts:05d}.parquet{_PART_TMP}"
            self.parts += 1
            self.writer = _open_writer(path, table.schema)
            fitted = table
        self.held.append(fitted)
        self.held_rows += fitted.num_rows
        self.held_bytes += fitted.nbytes
        if self.held_rows >= _GROUP_ROWS or self.held_bytes >= _GROUP_BYTES:
            self._flush()

    def _flush(self) -> None:
        if self.held and self.writer is not None:
            held, self.held, self.held_rows, self.held_bytes = self.held, [], 0, 0
            self.writer.write_table(held[0] if len(held) == 1 else pa.concat_tables(held))

    def _fit(self, table: pa.Table) -> pa.Table | None:
        schema = self.schema
        if schema is None:
            return None
        if table.schema.equals(schema):
            return table
        names = set(table.column_names)
        if not names <= set(schema.names):
            return None
        cols = []
        for f in schema:
            if f.name not in names:
                cols.append(pa.nulls(table.num_rows, f.type))
                continue
            col = table.column(f.name)
            if col.type == f.type:
                cols.append(col)
            elif pa.types.is_null(col.type):
                cols.append(pa.nulls(table.num_rows, f.type))
            else:
                return None  # a real type change: a new part keeps both types exact
        return pa.table(cols, schema=schema)

    def close(self) -> None:
        if self.writer is not None:
            try:
                self._flush()
            finally:
                writer, self.writer = self.writer, None
                self.held, self.held_rows, self.held_bytes = [], 0, 0
                writer.close()


def _open_writer(path: Path, schema: pa.Schema) -> pq.ParquetWriter:
    strings = [f.name for f in schema if pa.types.is_string(f.type)]
    return pq.ParquetWriter(path, schema, use_dictionary=strings or False, **_PARQUET_KW)


def _in_order(table: pa.Table, keys: Sequence[str]) -> bool:
    """Whether ``table`` is already sorted by ``keys`` (the first strictly increasing, with no null,
    settles it): a run written in step order needs no sorted copy."""
    import pyarrow.compute as pc

    first = table.column(keys[0])
    if len(first) < 2:
        return True
    if first.null_count or (pa.types.is_floating(first.type) and pc.any(pc.is_nan(first)).as_py()):
        return False
    return bool(pc.all(pc.greater(first.slice(1), first.slice(0, len(first) - 1))).as_py())


def _as_float32(col: pa.ChunkedArray | pa.Array):
    """``(fits, col as float32)``: whether every value of the float64 ``col`` (nulls aside, NaN kept) is a float32."""
    import pyarrow.compute as pc

    small = pc.cast(col, pa.float32(), safe=False)
    same = pc.or_kleene(pc.equal(pc.cast(small, pa.float64()), col), pc.is_nan(col))
    return pc.all(same).as_py() is not False, small


#: Rows a narrowed read takes at a time (whole row groups): its float64 transient, not the run's.
_NARROW_ROWS = 1 << 16


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
                fits, small = _as_float32(piece.column(n))
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


class RunStore:
    """A directory of ingested runs, readable as one hive-partitioned Parquet dataset.

    Parameters
    ----------
    root
        The store directory; created on first ingest. Defaults to :func:`default_store`.
    chunk_bytes
        Chunk size handed to :func:`regime_dash.ingest.iter_batches` (``None``: by the
        source's size).
    max_line_bytes
        Longest line an ingest reads; a longer one is rejected with its size, unread.
    """

    def __init__(self, root: str | os.PathLike | None = None, *,
                 chunk_bytes: int | None = None,
                 max_line_bytes: int = DEFAULT_MAX_LINE_BYTES):
        self.root = Path(root) if root is not None else default_store()
        self.chunk_bytes = chunk_bytes
        self.max_line_bytes = max_line_bytes
        self._schemas: dict[str, list[pa.Schema]] = {}  # run id -> part schemas (runs are immutable)

    def __repr__(self) -> str:
        return f"RunStore({str(self.root)!r})"

    # ------------------------------------------------------------------ paths, locks

    def _run_dir(self, run_id: str) -> Path:
        if not isinstance(run_id, str) or not _ID_RE.match(run_id) or ".." in run_id:
            raise StoreError(f"invalid run id {run_id!r}: ids are [A-Za-z0-9._-], no '..', "
                             "no leading dot or dash", run_id=str(run_id))
        return self.root / f"{PARTITION}={run_id}"

    def _existing_dir(self, run_id: str) -> Path:
        d = self._run_dir(run_id)
        if not (d / _META).is_file():
            known = ", ".join(r["run_id"] for r in self.list_runs()[:10]) or "none"
            raise StoreError(f"no run {run_id!r} in {self.root} (runs: {known})",
                             run_id=run_id, path=str(self.root))
        return d

    def _staging_candidates(self) -> list[Path]:
        root = self.root.absolute()
        return [root.parent / f".{root.name}.staging", root / ".staging"]

    def staging_dir(self) -> Path:
        """Where work in progress lives: beside the store on the same file system, else
        ``<store>/.staging`` (a store on a mount point of its own). Created if needed.

        Returns
        -------
        pathlib.Path
        """
        self.root.mkdir(parents=True, exist_ok=True)
        beside, inside = self._staging_candidates()
        with contextlib.suppress(OSError):
            if os.stat(beside.parent).st_dev == os.stat(self.root).st_dev:
                beside.mkdir(exist_ok=True)
                return beside
        inside.mkdir(exist_ok=True)
        return inside

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        # filelock's lock is an OS lock on an open descriptor (flock on POSIX): the kernel
        # drops it when its process dies, so an ingest killed with -9 never blocks the next
        self.root.mkdir(parents=True, exist_ok=True)
        with FileLock(self.root / ".lock"):
            yield

    def _run_dirs(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.iterdir()
                      if p.is_dir() and p.name.startswith(f"{PARTITION}=") and (p / _META).is_file())

    def clean_stale(self) -> list[str]:
        """Remove work directories left by killed ingests (their process is gone).

        Only directories of this host whose process no longer runs are removed, so a
        concurrent ingest is never disturbed. Called by every ingest.

        Returns
        -------
        list of str
            Names of the removed directories.
        """
        removed = []
        for p in self.staging_debris():
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p.name)
        return removed

    def staging_debris(self) -> list[Path]:
        """Work directories of ingests and deletes whose process is gone (this host's), or
        another host's older than a day: what :meth:`clean_stale` removes."""
        host = sanitize_name(socket.gethostname())
        # the store root too: earlier versions staged in ".ingest-*" directories there
        places = [d for d in (*self._staging_candidates(), self.root) if d.is_dir()]
        return [p for place in places for p in sorted(place.iterdir()) if _stale_work_dir(p, host)]

    # ----------------------------------------------------------------- run addressing

    def resolve(self, ref: str) -> str:
        """The run id a reference names: a run id, the run's name, or one of its aliases
        (a name it was ingested under again), when one run has it.

        Parameters
        ----------
        ref
            A full run id (``fold1-3f2a9c0b1d2e``), a run name (``fold1``) or an alias.

        Returns
        -------
        str
            The run id.

        Raises
        ------
        StoreError
            No run has that id, name or alias, or several runs have that name (the
            message lists their ids).
        """
        return self.resolve_ref(ref)[0]

    def resolve_ref(self, ref: str) -> tuple[str, str]:
        """:meth:`resolve`, and how ``ref`` named the run: ``"id"``, ``"name"`` or ``"alias"``."""
        ref = str(ref)
        runs = self.list_runs()
        if any(r["run_id"] == ref for r in runs):
            return ref, "id"
        for how, holders in (("name", [r["run_id"] for r in runs if r["name"] == ref]),
                             ("alias", [r["run_id"] for r in runs if ref in r["aliases"]])):
            if len(holders) == 1:
                return holders[0], how
            if holders:
                raise StoreError(f"run {how} {ref!r} is ambiguous: {len(holders)} runs have it "
                                 f"({', '.join(holders)}); give the full id", run_id=ref,
                                 path=str(self.root))
        known = ", ".join(f"{r['name']} ({r['run_id']})" for r in runs[:10]) or "none"
        raise StoreError(f"no run named {ref!r} in store {str(self.root)!r} (runs: {known})",
                         run_id=ref, path=str(self.root))

    def holder_of(self, name: str, *, besides: str | None = None) -> str | None:
        """The run (other than ``besides``) whose id, name or alias is ``name``, else None."""
        for r in self.list_runs():
            if r["run_id"] != besides and name in (r["run_id"], r["name"], *r["aliases"]):
                return r["run_id"]
        return None

    # ------------------------------------------------------------------- metadata

    def update_meta(self, run_id: str, change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
        """Change a run's ``_meta.json`` under the store's lock: read it, ``change(meta)`` edits
        the dict in place, and the file is replaced in one rename (a reader never sees half of
        it, and a follower committing meanwhile keeps the change: it too reads the metadata
        under the lock). Returns the new metadata.

        Raises
        ------
        StoreError
            Unknown run, or the store cannot be written (the run is left as it was).
        """
        d = self._existing_dir(run_id)
        try:
            with self._locked():
                meta = self.meta(run_id)
                change(meta)
                _replace_json(d / _META, meta)
        except OSError as e:
            raise StoreError(f"cannot update run {run_id!r} in {str(self.root)!r}: {e.strerror or e}"
                             f"{_errno_name(e)}; the run is unchanged", run_id=run_id,
                             path=str(self.root)) from None
        return meta

    # ------------------------------------------------------------------------ types

    def _part_schemas(self, d: Path) -> list[pa.Schema]:
        rid = d.name.split("=", 1)[1]
        if rid not in self._schemas:
            self._schemas[rid] = [pq.read_schema(f) for f in sorted(d.glob("part-*.parquet"))]
        return self._schemas[rid]

    def column_types(self) -> dict[str, pa.DataType]:
        """The storage type of every column the store holds: the canonical type of a diag
        contract field, else the type of the first run (oldest ingest) that has values
        for it.

        Returns
        -------
        dict
            Column name -> Arrow type (the ``run`` key and ``_line`` excluded).
        """
        types: dict[str, pa.DataType] = {}
        by_id = {d.name.split("=", 1)[1]: d for d in self._run_dirs()}
        for r in self.list_runs():
            d = by_id.get(r["run_id"])
            if d is None:
                continue
            try:
                schemas = self._part_schemas(d)
            except (OSError, pa.ArrowInvalid):
                continue
            for sch in schemas:
                for f in sch:
                    if f.name != LINE_COLUMN and f.name not in types and not pa.types.is_null(f.type):
                        types[f.name] = f.type
        types.update(CANONICAL_TYPES)
        return types

    # ------------------------------------------------------------------------ ingest

    def ingest(self, path_or_bytes: Any, *, name: str | None = None,
               source_name: str | None = None,
               progress: Callable[[int, int | None], None] | None = None) -> IngestResult:
        """Parse a diag.jsonl source and store it as a new run (or find it stored).

        Parameters
        ----------
        path_or_bytes
            A path, bytes, or a binary stream; plain or gzip.
        name
            Run name (sanitized); defaults to the source file name without extensions.
        source_name
            What to record as the source (e.g. an upload's file name); defaults to the
            path's file name.
        progress
            Called as ``progress(done_bytes, total_bytes)`` after each chunk (total may
            be ``None`` for a stream of unknown size).

        Returns
        -------
        IngestResult

        Raises
        ------
        IngestError
            The source cannot be read; :class:`~regime_dash.errors.NotDiagError` when it is
            not a diag (:mod:`regime_dash.ingest.diag_rows`: no JSON object line, no line
            with a diag field, no ``step``). A diag's JSON object lines without a diag
            field are quarantined as rejected lines.
        StoreError
            The store cannot be written (its message says what failed, where, and how
            much space the run needed); the store is left as it was.
        """
        if source_name is None and isinstance(path_or_bytes, (str, os.PathLike)):
            source_name = os.path.basename(os.fspath(path_or_bytes))
        run_name = sanitize_name(name if name else _name_from_source(source_name))
        state = {"done": 0, "total": None, "content": 0, "written": 0}
        tmp: Path | None = None
        try:
            try:
                staging = self.staging_dir()
            except OSError as e:
                raise StoreError(f"cannot create store {str(self.root)!r}: {e.strerror or e}",
                                 path=str(self.root)) from None
            self.clean_stale()
            host = sanitize_name(socket.gethostname())
            tmp = staging / f"{_TMP_PREFIX}{host}~{os.getpid()}~{uuid.uuid4().hex}"
            tmp.mkdir()

            def tick(done: int, total: int | None) -> None:
                state["done"], state["total"] = done, total
                if progress is not None:
                    progress(done, total)

            report = self._write_run(path_or_bytes, tmp, source_name, tick, state)
            require_diag(source_name, report_reason(report))  # nothing is stored: tmp goes below
            with self._locked():
                self._quarantine_copies_of(report.sha256 or "")
                dup = self._find_sha(report.sha256 or "")
                if dup is not None:
                    shutil.rmtree(tmp, ignore_errors=True)
                    return self._as_alias(dup, run_name, report)
                columns = self._settle_types(tmp, report)
                run_id = self._free_id(run_name, report.sha256 or "")
                meta = _meta(run_id, run_name, source_name, report, columns)
                for part in sorted(tmp.glob(f"part-*.parquet{_PART_TMP}")):
                    os.replace(part, part.with_name(part.name[: -len(_PART_TMP)]))
                _write_json(tmp / _META, meta)
                os.replace(tmp, self._run_dir(run_id))
                _fsync_dir(self.root)
            return _result(meta, duplicate_of=None, report=report)
        except OSError as e:
            raise self._io_error(e, tmp, state) from None
        finally:
            if tmp is not None and tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)

    def _as_alias(self, dup: str, run_name: str, report: IngestReport) -> IngestResult:
        """Bytes stored before as ``dup``: the new name becomes an alias of that run, unless it
        is the run's own name or alias already, or another run holds it (the caller holds the lock)."""
        meta = self.meta(dup)
        added = taken = None
        if run_name != meta.get("name") and run_name not in meta.get("aliases", []):
            taken = self.holder_of(run_name, besides=dup)
            if taken is None:
                meta["aliases"] = sorted({*meta.get("aliases", []), run_name})
                _replace_json(self._run_dir(dup) / _META, meta)
                added = run_name
        res = _result(meta, duplicate_of=dup, report=report)
        res.alias_added, res.alias_taken_by, res.given_name = added, taken, run_name
        return res

    def _io_error(self, e: OSError, tmp: Path | None, state: dict) -> StoreError:
        """One line a person can act on: what failed, where, how much space was needed."""
        written = 0
        if tmp is not None and tmp.is_dir():
            written = sum(f.stat().st_size for f in tmp.iterdir() if f.is_file())
        done, total = state["done"], state["total"]
        what = e.strerror or str(e)
        code = errno.errorcode.get(e.errno or 0, "")
        if code and code not in what:
            what += f" ({code})"
        msg = f"cannot store the run in {str(self.root)!r}: {what}"
        mb = written / 1e6
        # bytes written per content byte of the rows written, times the whole content
        # (for gzip, the compressed size times the expansion seen so far)
        content_total = total * state["content"] / done if total and done else None
        if content_total and state["written"] and written:
            need = written / state["written"] * content_total
            msg += f"; the run needs about {need / 1e6:.1f} MB ({mb:.1f} MB written before the failure)"
        elif written:
            msg += f"; the run needs more than the {mb:.1f} MB written before the failure"
        with contextlib.suppress(OSError):
            free = shutil.disk_usage(tmp.parent if tmp is not None else self.root).free
            msg += f", {free / 1e6:.1f} MB free there"
        return StoreError(msg + ". The store is unchanged.", path=str(self.root))

    def _write_run(self, source: Any, tmp: Path, source_name: str | None,
                   progress: Callable[[int, int | None], None], state: dict) -> IngestReport:
        report = IngestReport()
        parts = _PartWriter(tmp)
        types = self.column_types()
        with open(tmp / _REJECTS, "w", encoding="utf-8") as rej, \
                open(tmp / _CONFLICTS, "w", encoding="utf-8") as conf:
            try:
                for batch in iter_batches(source, chunk_bytes=self.chunk_bytes, path=source_name,
                                          report=report, types=types,
                                          max_line_bytes=self.max_line_bytes, diag_only=True):
                    table = batch.table
                    _check_width(report, source_name)
                    if PARTITION in table.column_names:
                        # the hive key names the run; a source field of that name moves over
                        table = table.rename_columns(
                            [_free_col(PARTITION, table.column_names) if n == PARTITION else n
                             for n in table.column_names])
                    state["content"] = report.content_bytes
                    parts.write(table)
                    state["written"] += batch.content_bytes
                    if batch.rejects:
                        rej.write("".join(json.dumps(_reject_record(r), ensure_ascii=False) + "\n"
                                          for r in batch.rejects))
                    if batch.aside:
                        conf.write("".join(json.dumps(a.to_dict(), ensure_ascii=False) + "\n"
                                           for a in batch.aside))
                    progress(batch.bytes_done, report.source_bytes)
            finally:
                parts.close()
            for fh in (rej, conf):
                fh.flush()
                if fh.tell():  # an empty file has nothing to make durable
                    os.fsync(fh.fileno())
        if PARTITION in report.columns:
            report.columns = {(_free_col(PARTITION, report.columns) if k == PARTITION else k): v
                              for k, v in report.columns.items()}
            report._types = {(_free_col(PARTITION, report._types) if k == PARTITION else k): v
                             for k, v in report._types.items()}
        return report

    def _settle_types(self, tmp: Path, report: IngestReport) -> dict[str, str]:
        """Give every column of the new run the store's type (under the lock, so two
        ingests racing on a new column agree), and every part the run's final types.

        A column another run gave a type first is cast to it (values that do not fit
        are set aside); a column whose type widened during this ingest (int64 then
        float64) is widened in the earlier parts. Returns column -> type string.
        """
        self._schemas.clear()  # other processes may have committed runs meanwhile
        store = self.column_types()
        final = {k: store.get(k, t) for k, t in report._types.items()}
        for k, t in final.items():
            if pa.types.is_null(t) and k in store:
                final[k] = store[k]
        for part in sorted(tmp.glob(f"part-*.parquet{_PART_TMP}")):
            schema = pq.read_schema(part)
            if all(final.get(f.name, f.type) == f.type for f in schema):
                continue
            table = pq.read_table(part)
            lines = table.column(LINE_COLUMN).to_numpy()
            aside: list[Aside] = []
            coerced: dict[str, dict[str, int]] = {}
            for i, f in enumerate(table.schema):
                want = final.get(f.name, f.type)
                if want != f.type:
                    col, a, c = conform_column(table.column(i), want, lines, f.name)
                    table = table.set_column(i, f.name, col)
                    aside.extend(a)
                    for k, by in c.items():
                        for kind, n in by.items():
                            coerced.setdefault(k, {})[kind] = coerced.get(k, {}).get(kind, 0) + n
            fresh = part.with_name(part.name + ".new")
            w = _open_writer(fresh, table.schema)
            try:
                w.write_table(table)
            finally:
                w.close()
            os.replace(fresh, part)
            if aside:
                with open(tmp / _CONFLICTS, "a", encoding="utf-8") as conf:
                    conf.write("".join(json.dumps(a.to_dict(), ensure_ascii=False) + "\n"
                                       for a in sorted(aside, key=lambda a: a.line)))
            report.note(aside, coerced)
        return {k: str(t) for k, t in final.items()}

    def _find_sha(self, sha: str) -> str | None:
        for d in self._run_dirs():
            try:
                m = json.loads((d / _META).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if m.get("sha256") == sha:
                return m.get("run_id") or d.name.split("=", 1)[1]
        return None

    def _free_id(self, name: str, sha: str) -> str:
        for n in (12, 16, 24, 64):
            rid = f"{name}-{sha[:n]}"
            if not self._run_dir(rid).exists():
                return rid
        raise StoreError(f"run id {name}-{sha} is taken", run_id=name)  # pragma: no cover

    # ------------------------------------------------------------------------- read

    def list_runs(self) -> list[dict[str, Any]]:
        """Every run, oldest ingest first.

        Returns
        -------
        list of dict
            ``name``, ``run_id``, ``rows``, ``rejected``, ``first_step``, ``last_step``,
            ``ingested_at``, ``source``, ``sha256``, ``not_diag``: why the run is not a
            diag (:func:`regime_dash.ingest.diag_rows.meta_reason`; a run an older version
            stored can be none), ``None`` for a diag; ``aliases`` (other names the same bytes
            were ingested under), ``tags`` and ``notes`` (:mod:`regime_dash.store.labels`).
        """
        out = []
        for d in self._run_dirs():
            try:
                m = json.loads((d / _META).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            out.append({
                "run_id": m.get("run_id") or d.name.split("=", 1)[1],
                "name": m.get("name"),
                "rows": m.get("rows"),
                "rejected": m.get("rejected_count"),
                "first_step": m.get("first_step"),
                "last_step": m.get("last_step"),
                "ingested_at": m.get("ingested_at"),
                "source": m.get("source"),
                "sha256": m.get("sha256"),
                "not_diag": meta_reason(m),
                "aliases": list(m.get("aliases") or []),
                "tags": list(m.get("tags") or []),
                "notes": m.get("notes") or "",
            })
        out.sort(key=lambda r: (r["ingested_at"] or "", r["run_id"]))
        return out

    def meta(self, run_id: str) -> dict[str, Any]:
        """The run's ``_meta.json`` as a dict.

        Raises
        ------
        StoreError
            Unknown or invalid run id.
        """
        d = self._existing_dir(run_id)
        with self._reading(run_id) as part:
            part[0] = d / _META
            return json.loads((d / _META).read_text(encoding="utf-8"))

    def rejects(self, run_id: str) -> list[dict[str, Any]]:
        """The run's rejected lines: ``[{"line", "reason", "raw"[, "raw_base64"]}, ...]``."""
        return self._jsonl(run_id, _REJECTS)

    def _jsonl(self, run_id: str, name: str) -> list[dict[str, Any]]:
        p = self._existing_dir(run_id) / name
        with self._reading(run_id) as part:
            part[0] = p
            if not p.exists():
                return []
            with open(p, encoding="utf-8") as fh:
                return [json.loads(line) for line in fh if line.strip()]

    def conflicts(self, run_id: str) -> list[dict[str, Any]]:
        """The run's values set aside: ``[{"line", "field", "value", "type"}, ...]``."""
        return self._jsonl(run_id, _CONFLICTS)

    def parts(self, run_id: str) -> list[Path]:
        """The run's Parquet files, in write order."""
        d = self._existing_dir(run_id)
        with self._reading(run_id):
            return sorted(d.glob("part-*.parquet"))

    def load_table(self, run_id: str, columns: Sequence[str] | None = None, *, narrow: bool = False) -> pa.Table:
        """The run as one Arrow table, types unified across parts, in file order.

        Parameters
        ----------
        run_id
            The run.
        columns
            Columns to read (dotted names); all when ``None``.
        narrow
            Each float64 column whose every value is a float32 as float32 (:meth:`load`'s), read a few
            row groups at a time: the run's float64 copy is never held whole.

        Returns
        -------
        pyarrow.Table

        Raises
        ------
        StoreError
            Unknown run, or a requested column the run does not have.
        """
        if columns is not None:
            columns = list(columns)
            known = set(self.meta(run_id).get("columns", {})) | {LINE_COLUMN}
            missing = [c for c in columns if c not in known]
            if missing:
                raise StoreError(f"run {run_id!r} has no column {missing[0]!r}",
                                 run_id=run_id)
        for _attempt in range(_READ_ATTEMPTS - 1):
            # a followed run merges its small parts (store_append.compact_parts): a part listed then
            # merged away is read again from a fresh listing
            table = self._read_parts(run_id, columns, vanished_ok=True, narrow=narrow)
            if table is not None:
                return table
        return self._read_parts(run_id, columns, vanished_ok=False, narrow=narrow)

    def _read_parts(self, run_id: str, columns: list[str] | None, vanished_ok: bool,
                    narrow: bool = False) -> pa.Table | None:
        """The run's parts read and joined (:func:`unify_tables`, or :func:`_read_narrowed` with ``narrow``),
        or ``None`` (with ``vanished_ok``) when one went between the listing and its read while the run
        stayed; a run deleted meanwhile raises."""
        files = self.parts(run_id)
        with self._reading(run_id) as part:
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
                if vanished_ok and (self._run_dir(run_id) / _META).is_file():
                    return None
                raise
        return unify_tables(tables, columns)

    @contextlib.contextmanager
    def _reading(self, run_id: str) -> Iterator[list]:
        """Reads of one run's files, their failures said in one line: a run deleted meanwhile
        (a concurrent ``rm``) or a damaged part (truncated, empty, not Parquet). Yields a
        one-item list the caller sets to the file it reads."""
        part: list = [None]
        try:
            yield part
        except FileNotFoundError:
            raise StoreError(f"run {run_id!r} was deleted while it was read (a concurrent rm?); "
                             "list the runs again", run_id=run_id, path=str(self.root)) from None
        except (OSError, ValueError, pa.ArrowException) as e:  # ValueError: a _meta.json not JSON
            name = Path(part[0]).name if part[0] is not None else _META
            reason = " ".join(str(e).split())[:200]
            raise StoreError(f"run {run_id!r} is damaged: {name}: {reason}; `python -m regime_dash doctor "
                             "--repair` moves it to _quarantine/", run_id=run_id,
                             path=str(part[0] or self.root)) from None

    def load(self, run_id: str, columns: Sequence[str] | None = None, *, narrow: bool = False):
        """The run as a pandas DataFrame sorted by ``step`` (stable, so file order breaks
        ties), with a fresh index.

        Parameters
        ----------
        run_id
            The run.
        columns
            Columns to return (dotted names); all (including ``_line``) when ``None``.
        narrow
            Give a float64 column whose every value is a float32 (the diag's ISV slots, stored
            from JSON as doubles) as float32: the same values in half the memory, in the dtype a
            replay frame has. A column with any other value stays float64.

        Returns
        -------
        pandas.DataFrame
        """
        want = None if columns is None else list(columns)
        read = want
        if want is not None:
            extra = [c for c in ("step", LINE_COLUMN) if c not in want
                     and c in (set(self.meta(run_id).get("columns", {})) | {LINE_COLUMN})]
            read = want + extra
        table = self.load_table(run_id, read, narrow=narrow)
        sort_keys = [(c, "ascending") for c in ("step", LINE_COLUMN) if c in table.column_names
                     and (c != "step" or pa.types.is_integer(table.schema.field(c).type)
                          or pa.types.is_floating(table.schema.field(c).type))]
        if sort_keys and not _in_order(table, [c for c, _ in sort_keys]):
            table = table.sort_by(sort_keys)
        if want is not None:
            table = table.select(want)
        # a block per column and each Arrow column freed once converted: no second copy of the run
        return table.to_pandas(split_blocks=True, self_destruct=True)

    def schema(self) -> pa.Schema:
        """The unified schema of the whole store (every part footer, joined by name).

        Returns
        -------
        pyarrow.Schema
            With the ``run`` partition column last.
        """
        types: dict[str, pa.DataType] = {}
        for d in self._run_dirs():
            for f in sorted(d.glob("part-*.parquet")):
                try:
                    fields = pq.read_schema(f)
                except (OSError, pa.ArrowException):
                    continue  # deleted meanwhile, or damaged: `doctor` lists it, a load of it says so
                for fld in fields:
                    old = types.get(fld.name)
                    types[fld.name] = fld.type if old is None else unify_types(old, fld.type)
        types[PARTITION] = pa.string()
        return pa.schema(list(types.items()))

    def open_dataset(self) -> ds.Dataset:
        """The whole store as one ``pyarrow.dataset.Dataset``, unified by column name.

        Columns a run lacks read as null; a column whose type differs between runs is
        read as the :func:`regime_dash.ingest.unify_types` join (int64+float64 ->
        float64; other conflicts -> string, via Arrow's cast). The ``run`` column is the
        hive partition key.

        The same store from DuckDB and pandas (``'{store}/**/*.parquet'`` works as well:
        work in progress never lies under the store directory)::

            duckdb.sql(f"SELECT * FROM read_parquet('{store}/run=*/*.parquet', "
                       "hive_partitioning=true, union_by_name=true)")
            pandas.read_parquet(store, schema=RunStore(store).schema())

        Every column has one type in every run (see the module docstring), so
        ``pyarrow.unify_schemas`` with default promotion and Spark's
        ``mergeSchema=true`` read it too.

        Returns
        -------
        pyarrow.dataset.Dataset
        """
        import pyarrow.dataset as ds

        if not self._run_dirs():
            return ds.dataset(pa.table({PARTITION: pa.array([], pa.string())}))
        part = ds.partitioning(pa.schema([(PARTITION, pa.string())]), flavor="hive")
        files = [str(f) for d in self._run_dirs() for f in sorted(d.glob("part-*.parquet"))]
        return ds.dataset(files, schema=self.schema(), format="parquet", partitioning=part,
                          partition_base_dir=str(self.root))

    # ----------------------------------------------------------------------- delete

    def delete(self, run_id: str) -> None:
        """Remove a run. The directory is renamed away first, so readers never see half
        a run.

        Raises
        ------
        StoreError
            Unknown or invalid run id.
        """
        d = self._existing_dir(run_id)
        host = sanitize_name(socket.gethostname())
        try:
            # out of the store first (one rename), so no reader sees part of a run
            trash = self.staging_dir() / f"{_TRASH_PREFIX}{host}~{os.getpid()}~{uuid.uuid4().hex}"
            with self._locked():
                os.replace(d, trash)
        except FileNotFoundError:
            raise StoreError(f"no run {run_id!r} in {self.root} (deleted meanwhile?)", run_id=run_id) from None
        except OSError as e:  # a read-only store, a permission: one line, the run left as it was
            raise StoreError(f"cannot delete run {run_id!r} from {str(self.root)!r}: {e.strerror or e}"
                             f"{_errno_name(e)}; the run is unchanged", run_id=run_id,
                             path=str(self.root)) from None
        shutil.rmtree(trash, ignore_errors=True)

    # ------------------------------------------------------------------- quarantine

    def orphan_dirs(self) -> list[Path]:
        """Run directories no reader lists (no readable ``_meta.json``) whose parts a
        ``**/*.parquet`` or ``run=*/*.parquet`` glob still reads."""
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.iterdir() if p.name.startswith(f"{PARTITION}=")
                      and p.is_dir() and not p.is_symlink() and _meta_of(p) is None)

    def quarantine(self, path: Path, why: str) -> Path:
        """Move ``path`` (in the store or its staging) to ``<store>/_quarantine/``; nothing
        is deleted. Its Parquet files are renamed ``*.parquet.quarantined`` first, so no
        ``*.parquet`` glob (DuckDB's ``<store>/**/*.parquet`` descends into every folder)
        reads them; a symlink is moved as the link, its target untouched. A ``_why.txt``
        beside it says where it came from and why.

        Returns
        -------
        pathlib.Path
            Where it lies now.
        """
        path = Path(path)
        try:
            with self._locked():
                return self._move_aside(path, why)
        except OSError as e:
            raise StoreError(f"cannot move {str(path)!r} to {str(self.root / _QUARANTINE)!r}: "
                             f"{e.strerror or e}", path=str(path)) from None

    def _move_aside(self, path: Path, why: str) -> Path:
        """:meth:`quarantine`'s move, for a caller holding the lock."""
        box = self.root / _QUARANTINE / f"{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
        box.mkdir(parents=True)
        (box / "_why.txt").write_text(f"{path}\n{why}\n", encoding="utf-8")
        if not path.is_symlink():
            for f in ([path] if path.is_file() else sorted(path.rglob("*.parquet"))):
                if f.suffix == ".parquet":
                    os.replace(f, f.with_name(f.name + _QUARANTINED))
            if path.suffix == ".parquet" and not path.exists():
                path = path.with_name(path.name + _QUARANTINED)
        dest = box / path.name
        os.replace(path, dest)
        return dest

    def _quarantine_copies_of(self, sha: str) -> list[Path]:
        """Orphan directories holding these same bytes (the run id ends in a prefix of their
        sha256): an earlier ingest whose ``_meta.json`` went. Moved aside (the caller holds
        the lock), so the new run is not read twice by DuckDB."""
        moved = []
        for d in self.orphan_dirs():
            m = re.search(r"-([0-9a-f]{12,64})$", d.name)
            if sha and m and sha.startswith(m.group(1)):
                moved.append(self._move_aside(d, "an orphan copy (no _meta.json) of bytes ingested again"))
        return moved


_PATH_SUFFIXES = (".jsonl", ".json", ".ndjson", ".gz", ".parquet", ".txt")


def resolve_target(target: str, store: str | os.PathLike | None = None) -> tuple[str, str]:
    """What a command-line target names: a file, or a run in the store.

    An existing file wins; otherwise the store is asked (a run id, or a unique run
    name). A target that names neither is a missing file when it looks like a path
    (it has a directory part or a data-file suffix), else a missing run.

    Parameters
    ----------
    target
        A path, a run id or a run name.
    store
        The store directory (default: :func:`default_store`).

    Returns
    -------
    ("file", path) or ("run", run_id)

    Raises
    ------
    IngestError
        A path that does not exist (or is a directory).
    StoreError
        No run has that id or name, or the name is ambiguous.
    """
    target = str(target)
    p = Path(target)
    if p.is_file():
        return "file", target
    try:
        return "run", RunStore(store).resolve(target)
    except StoreError as e:
        if p.is_dir():
            raise IngestError(f"{target!r} is a directory, not a diag file or a run", path=target) from None
        if "/" in target or os.sep in target or target.lower().endswith(_PATH_SUFFIXES):
            raise IngestError(f"no such file: {target!r} (nor a run of that name in the store)",
                              path=target) from None
        raise e from None


def _free_col(base: str, taken) -> str:
    name = base + "_"
    while name in taken:
        name += "_"
    return name


def _reject_record(r) -> dict[str, Any]:
    rec: dict[str, Any] = {"line": r.line, "reason": r.reason}
    try:
        rec["raw"] = r.raw.decode("utf-8")
    except UnicodeDecodeError:
        import base64

        # keep the exact bytes too: "nothing lost"
        rec["raw"] = r.raw.decode("utf-8", errors="backslashreplace")
        rec["raw_base64"] = base64.b64encode(r.raw).decode("ascii")
    return rec


def _meta(run_id: str, run_name: str, source_name: str | None, report: IngestReport,
          columns: dict[str, str]) -> dict[str, Any]:
    return {
        "format_version": _FORMAT_VERSION,
        "run_id": run_id,
        "name": run_name,
        "source": source_name,
        "sha256": report.sha256 or "",
        "source_bytes": report.source_bytes,
        "content_bytes": report.content_bytes,
        "gzip": report.gzip,
        "truncated_gzip": report.truncated_gzip,
        "lines": report.lines,
        "rows": report.rows,
        "blank_lines": report.blank_lines,
        "rejected_count": report.rejected_count,
        "aside_count": report.aside_count,
        "coerced": report.coerced,
        "columns": columns,
        "first_step": report.first_step,
        "last_step": report.last_step,
        "ingested_at": _now(),
    }


def _result(meta: dict[str, Any], *, duplicate_of: str | None, report: IngestReport) -> IngestResult:
    return IngestResult(
        run_id=meta["run_id"],
        rows=int(meta.get("rows") or 0),
        rejected=[r.to_dict() for r in report.rejected],
        columns=list(meta.get("columns", {})),
        first_step=meta.get("first_step"),
        last_step=meta.get("last_step"),
        duplicate_of=duplicate_of,
        sha256=meta.get("sha256"),
        meta=meta,
        rejected_count=report.rejected_count,
        aside=[a.to_dict() for a in report.aside],
        aside_count=report.aside_count,
        coerced={k: dict(v) for k, v in report.coerced.items()},
    )


def _write_json(path: Path, obj: Any) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=1, allow_nan=False, default=str)
        fh.flush()
        os.fsync(fh.fileno())


def _replace_json(path: Path, obj: Any) -> None:
    """A JSON file (``_meta.json``) replaced in one rename, so a reader never sees half of it."""
    tmp = path.with_name(path.name + ".tmp")
    _write_json(tmp, obj)
    os.replace(tmp, path)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
