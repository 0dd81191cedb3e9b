"""The run store on Delta Lake (delta-rs): a local folder or an object store URI, shared by a team.

Tables (each a Delta table: a ``_delta_log`` and plain Parquet files)::

    <store>/
      rows/       every run's rows, partitioned by ``run`` (``run=<id>/part-*.parquet``): the
                  flattened dotted diag columns plus ``_line``; one schema, the union of the runs'
                  columns, one type per column
      rejects/    every run's rejected lines and values set aside, partitioned by ``run``:
                  ``kind`` ("reject" or "aside"), ``line``, ``record`` (the exact JSON object the
                  folder store keeps in ``_rejects.jsonl`` / ``_conflicts.jsonl``)
      runs/       the catalogue: one row a run (``key``, ``state``, ``name``, ``doc``: its metadata,
                  aliases, tags, notes, sha256, verdict cache, follow state, removal)
      settings/   named chart layouts and the maintenance record
      _staging/   (local stores) files being written, before their commit

Why this design
---------------
- **One rows table partitioned by run**, not a table per run: readers (pandas and polars
  through ``deltalake``, DuckDB's and Spark's Delta readers) read the whole store as one
  table with a ``run`` column, as they read the folder store's hive layout; a run's rows are
  added in one commit and removed in one commit of remove actions, so a run is never half
  there; a run is read by partition pruning alone. The folder store's "one type per column"
  is the Delta table's single schema.
- **Rejects in a table of their own**, as JSON records: their shape is not the rows' and a
  reader of the rows must never meet them; kept as the exact objects, nothing is lost.
- **The catalogue as a small table of documents** changed by compare-and-swap
  (:mod:`.documents`): the metadata changes (tags, notes, renames, aliases, a follower's
  state, the verdict cache) that the folder store made under its flock become commits that
  must be the table's next version, retried on a fresh read when another writer was first.
  ``runs`` is one read of one small table, local or remote.
- **Two tables cannot commit together**, so a run's state in the catalogue orders the
  commits (claim, rejects, rows, live; see :mod:`.catalogue`): the rows commit is the one
  that makes a run exist, and whoever comes next finishes or undoes what a killed writer left.

Concurrency on object storage: every commit is a put-if-absent of the next log entry. delta-rs
(1.x) does it with S3's conditional writes (``If-None-Match``), which AWS S3 has, as do
MinIO, Cloudflare R2 and most S3-compatible servers, so several hosts can write one store
with no lock service. A server without conditional writes is not safe for a shared store:
don't set ``AWS_S3_ALLOW_UNSAFE_RENAME`` for one that several writers use. GCS and Azure have
their own conditional writes, which delta-rs uses.
"""
from __future__ import annotations

from regime_dash.store.delta.store import DEFAULT_RETENTION_HOURS, DEFAULT_VACUUM_EVERY_HOURS, DeltaRunStore

__all__ = ["DEFAULT_RETENTION_HOURS", "DEFAULT_VACUUM_EVERY_HOURS", "DeltaRunStore"]
