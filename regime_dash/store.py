"""The Parquet run store: one immutable, hive-style directory per ingested run.

Layout (see DESIGN.md, "Run store")::

    <store>/
      run=<run_id>/
        part-00000.parquet      good rows, flattened dotted columns, plus ``_line``
        part-00001.parquet      a new part starts where a chunk's schema differs
        _meta.json              source, sha256, counts, columns, step range, ingest time
        _rejects.jsonl          one {"line", "reason", "raw"} object per rejected line
      .ingest-<host>-<pid>-<uuid>/   work in progress (renamed into place when done)
      .lock                          serializes the commit step of concurrent ingests

Names starting with ``_`` or ``.`` are skipped by Arrow, DuckDB and Spark dataset
readers, so the store reads as one table (with a ``run`` partition column).

Guarantees
----------
Atomic
    An ingest writes everything into a ``.ingest-*`` directory and renames it to
    ``run=<id>`` as its last step. A killed ingest leaves only the dot directory, which
    readers skip and the next ingest removes (when its process is gone).
Idempotent
    Runs are keyed by the sha256 of the decompressed content: ingesting the same bytes
    again (under any name, plain or gzip) returns the existing run as ``duplicate_of``.
Concurrent
    Parsing runs without a lock; the duplicate check and the rename run under an
    exclusive ``flock`` on ``<store>/.lock``, so two ingests of the same bytes give one
    run and two ingests of different files both land.
Safe names
    Run ids are ``<name>-<sha256[:12]>`` where the name is reduced to
    ``[A-Za-z0-9._-]`` (no leading dot or dash, at most 64 characters), so no name can
    escape the store or hide from readers. Every id given to ``load``/``delete`` is
    checked the same way.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import re
import shutil
import socket
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from regime_dash.errors import IngestError, StoreError
from regime_dash.ingest import (
    DEFAULT_CHUNK_BYTES,
    LINE_COLUMN,
    IngestReport,
    iter_batches,
    unify_tables,
    unify_types,
)

try:  # POSIX advisory locks; on other systems a lock directory stands in
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["ENV_VAR", "IngestResult", "RunStore", "default_store", "sanitize_name"]

#: Environment variable naming the default store directory.
ENV_VAR = "REGIME_DASH_STORE"

#: The hive partition key of the store.
PARTITION = "run"

_META = "_meta.json"
_REJECTS = "_rejects.jsonl"
_TMP_PREFIX = ".ingest-"
_TRASH_PREFIX = ".deleting-"
_ID_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,159}$")
_NAME_MAX = 64
_FORMAT_VERSION = 1

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
        ``[{"line": int, "reason": str}, ...]`` for every rejected line.
    columns
        Column names (dotted paths), without the ``_line`` bookkeeping column.
    first_step, last_step
        Step range of the run (``None`` without a numeric ``step`` column).
    duplicate_of
        The existing run's id when these bytes were stored before, else ``None``.
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

    def to_dict(self) -> dict[str, Any]:
        """The CLI's JSON object for this file."""
        return {
            "run_id": self.run_id,
            "rows": self.rows,
            "rejected": list(self.rejected),
            "columns": list(self.columns),
            "first_step": self.first_step,
            "last_step": self.last_step,
            "duplicate_of": self.duplicate_of,
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


class _PartWriter:
    """Writes batches into ``part-NNNNN.parquet`` files, starting a new part only when a
    batch cannot be cast losslessly to the open part's schema (new column or a type
    the part cannot hold)."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.writer: pq.ParquetWriter | None = None
        self.schema: pa.Schema | None = None
        self.parts = 0

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        if self.writer is not None:
            fitted = self._fit(table)
            if fitted is not None:
                self.writer.write_table(fitted)
                return
            self.close()
        self.schema = table.schema
        path = self.dir / f"part-{self.parts:05d}.parquet"
        self.parts += 1
        strings = [f.name for f in table.schema if pa.types.is_string(f.type)]
        self.writer = pq.ParquetWriter(path, table.schema, use_dictionary=strings or False,
                                       **_PARQUET_KW)
        self.writer.write_table(table)

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
            self.writer.close()
            self.writer = None


class RunStore:
    """A directory of ingested runs, readable as one hive-partitioned Parquet dataset.

    Parameters
    ----------
    root
        The store directory; created on first ingest. Defaults to :func:`default_store`.
    chunk_bytes
        Chunk size handed to :func:`regime_dash.ingest.iter_batches`.
    """

    def __init__(self, root: str | os.PathLike | None = None, *,
                 chunk_bytes: int = DEFAULT_CHUNK_BYTES):
        self.root = Path(root) if root is not None else default_store()
        self.chunk_bytes = chunk_bytes

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

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        if fcntl is not None:
            with open(self.root / ".lock", "a+b") as fh:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        else:  # pragma: no cover - mkdir is atomic everywhere
            lockdir = self.root / ".lockdir"
            while True:
                try:
                    lockdir.mkdir()
                    break
                except FileExistsError:
                    time.sleep(0.05)
            try:
                yield
            finally:
                lockdir.rmdir()

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
        if not self.root.is_dir():
            return removed
        host = sanitize_name(socket.gethostname())
        for p in self.root.iterdir():
            if not (p.name.startswith(_TMP_PREFIX) or p.name.startswith(_TRASH_PREFIX)):
                continue
            parts = p.name.split("~")
            # .ingest-<host>~<pid>~<uuid>
            if len(parts) == 3 and parts[0].endswith(host) and parts[1].isdigit():
                if _pid_alive(int(parts[1])):
                    continue
            elif time.time() - p.stat().st_mtime < 24 * 3600:
                continue  # another host's (or unknown) work dir: only clear it when old
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p.name)
        return removed

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
            The source cannot be read, or it holds no JSON object line at all.
        StoreError
            The store directory cannot be written.
        """
        if source_name is None and isinstance(path_or_bytes, (str, os.PathLike)):
            source_name = os.path.basename(os.fspath(path_or_bytes))
        run_name = sanitize_name(name if name else _name_from_source(source_name))
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"cannot create store {str(self.root)!r}: {e.strerror or e}",
                             path=str(self.root)) from e
        self.clean_stale()
        host = sanitize_name(socket.gethostname())
        tmp = self.root / f"{_TMP_PREFIX}{host}~{os.getpid()}~{uuid.uuid4().hex}"
        tmp.mkdir()
        try:
            report = self._write_run(path_or_bytes, tmp, source_name, progress)
            if report.rows == 0:
                detail = ""
                if report.rejected:
                    r = report.rejected[0]
                    detail = f"; line {r.line}: {r.reason}"
                raise IngestError(
                    f"{source_name or 'input'}: no JSON object lines "
                    f"({report.lines} lines, {len(report.rejected)} rejected{detail})",
                    path=source_name)
            sha = report.sha256 or ""
            meta = {
                "format_version": _FORMAT_VERSION,
                "run_id": None,
                "name": run_name,
                "source": source_name,
                "sha256": sha,
                "source_bytes": report.source_bytes,
                "content_bytes": report.content_bytes,
                "gzip": report.gzip,
                "truncated_gzip": report.truncated_gzip,
                "lines": report.lines,
                "rows": report.rows,
                "blank_lines": report.blank_lines,
                "rejected_count": len(report.rejected),
                "columns": report.columns,
                "first_step": report.first_step,
                "last_step": report.last_step,
                "ingested_at": _now(),
            }
            with self._locked():
                dup = self._find_sha(sha)
                if dup is not None:
                    shutil.rmtree(tmp, ignore_errors=True)
                    m = self.meta(dup)
                    return _result(m, duplicate_of=dup, report=report)
                run_id = self._free_id(run_name, sha)
                meta["run_id"] = run_id
                _write_json(tmp / _META, meta)
                os.replace(tmp, self._run_dir(run_id))
                _fsync_dir(self.root)
            return _result(meta, duplicate_of=None, report=report)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def _write_run(self, source: Any, tmp: Path, source_name: str | None,
                   progress: Callable[[int, int | None], None] | None) -> IngestReport:
        report = IngestReport()
        parts = _PartWriter(tmp)
        with open(tmp / _REJECTS, "w", encoding="utf-8") as rej:
            try:
                for batch in iter_batches(source, chunk_bytes=self.chunk_bytes,
                                          path=source_name, report=report):
                    table = batch.table
                    if PARTITION in table.column_names:
                        # the hive key names the run; a source field of that name moves over
                        table = table.rename_columns(
                            [_free_col(PARTITION, table.column_names) if n == PARTITION else n
                             for n in table.column_names])
                    parts.write(table)
                    for r in batch.rejects:
                        rej.write(json.dumps(_reject_record(r), ensure_ascii=False) + "\n")
                    if progress is not None:
                        progress(batch.bytes_done, report.source_bytes)
            finally:
                parts.close()
            rej.flush()
            os.fsync(rej.fileno())
        if PARTITION in report.columns:
            report.columns = {(_free_col(PARTITION, report.columns) if k == PARTITION else k): v
                              for k, v in report.columns.items()}
        return report

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
            ``ingested_at``, ``source``, ``sha256``.
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
        return json.loads((d / _META).read_text(encoding="utf-8"))

    def rejects(self, run_id: str) -> list[dict[str, Any]]:
        """The run's rejected lines: ``[{"line", "reason", "raw"[, "raw_base64"]}, ...]``."""
        d = self._existing_dir(run_id)
        p = d / _REJECTS
        if not p.exists():
            return []
        with open(p, encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]

    def parts(self, run_id: str) -> list[Path]:
        """The run's Parquet files, in write order."""
        d = self._existing_dir(run_id)
        return sorted(d.glob("part-*.parquet"))

    def load_table(self, run_id: str, columns: Sequence[str] | None = None) -> pa.Table:
        """The run as one Arrow table, types unified across parts, in file order.

        Parameters
        ----------
        run_id
            The run.
        columns
            Columns to read (dotted names); all when ``None``.

        Returns
        -------
        pyarrow.Table

        Raises
        ------
        StoreError
            Unknown run, or a requested column the run does not have.
        """
        files = self.parts(run_id)
        if columns is not None:
            columns = list(columns)
            known = set(self.meta(run_id).get("columns", {})) | {LINE_COLUMN}
            missing = [c for c in columns if c not in known]
            if missing:
                raise StoreError(f"run {run_id!r} has no column {missing[0]!r}",
                                 run_id=run_id)
        tables = []
        for f in files:
            if columns is None:
                tables.append(pq.read_table(f))
            else:
                have = set(pq.read_schema(f).names)
                tables.append(pq.read_table(f, columns=[c for c in columns if c in have]))
        return unify_tables(tables, columns)

    def load(self, run_id: str, columns: Sequence[str] | None = None):
        """The run as a pandas DataFrame sorted by ``step`` (stable, so file order breaks
        ties), with a fresh index.

        Parameters
        ----------
        run_id
            The run.
        columns
            Columns to return (dotted names); all (including ``_line``) when ``None``.

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
        table = self.load_table(run_id, read)
        sort_keys = [(c, "ascending") for c in ("step", LINE_COLUMN) if c in table.column_names
                     and (c != "step" or pa.types.is_integer(table.schema.field(c).type)
                          or pa.types.is_floating(table.schema.field(c).type))]
        if sort_keys:
            table = table.sort_by(sort_keys)
        if want is not None:
            table = table.select(want)
        return table.to_pandas()

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
                for fld in pq.read_schema(f):
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

        The same store from DuckDB and pandas::

            duckdb.sql(f"SELECT * FROM read_parquet('{store}/run=*/*.parquet', "
                       "hive_partitioning=true, union_by_name=true)")
            pandas.read_parquet(store, schema=RunStore(store).schema())

        Returns
        -------
        pyarrow.dataset.Dataset
        """
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
        trash = self.root / f"{_TRASH_PREFIX}{host}~{os.getpid()}~{uuid.uuid4().hex}"
        with self._locked():
            try:
                os.replace(d, trash)
            except FileNotFoundError as e:
                raise StoreError(f"no run {run_id!r} in {self.root}", run_id=run_id) from e
        shutil.rmtree(trash, ignore_errors=True)


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
    )


def _write_json(path: Path, obj: Any) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=1, allow_nan=False, default=str)
        fh.flush()
        os.fsync(fh.fileno())


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
