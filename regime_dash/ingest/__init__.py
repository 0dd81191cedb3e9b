"""diag.jsonl bytes -> flattened Arrow tables plus the lines that were rejected.

This module is the pure core of ingestion: it reads a source (bytes, a path, or a
binary stream; plain or gzip) and yields values. It writes nothing; the run store
(:mod:`regime_dash.store.run_store`) decides where the tables go.

Layout
------
The package is split along its seams, each module importing only those above it:
:mod:`~regime_dash.ingest.arrays` (NumPy <-> Arrow without pyarrow's pandas shim),
:mod:`~regime_dash.ingest.types` (the type lattice), :mod:`~regime_dash.ingest.report`
(rejects, set-aside values, batches, the report), :mod:`~regime_dash.ingest.columns`
(one type per column), :mod:`~regime_dash.ingest.sources` (bytes, paths, streams, gzip,
chunks), :mod:`~regime_dash.ingest.reference` (the line-by-line reading),
:mod:`~regime_dash.ingest.arrow` (the fast path) and :mod:`~regime_dash.ingest.pipeline`
(:func:`iter_batches` and :func:`parse`). The public names are re-exported here.

How a file is read
------------------
The source is read in newline-aligned chunks of ``chunk_bytes`` (a few MB), so memory
is bounded by a handful of chunks whatever the file size; gzip is inflated at most a
block at a time, and a line longer than ``max_line_bytes`` (64 MB) is never held: its
bytes are dropped as they arrive and the line is rejected with its size. So a gzip bomb
(4 MB inflating to 4 GiB of zeros without a line break) costs what a 64 MB line costs.

Within a chunk, every line is classified by vectorized scans (a flood of blank lines
costs NumPy passes, not Python per line): blank, too long, a candidate (opens with
``{`` and ends with ``}``), or other (the reference reads it; it is almost always
rejected). The stretches of candidates go through Arrow's C++ JSON reader (the fast
path). Arrow is stricter and looser than Python's ``json`` in a few places, so its
result is only accepted when it provably means the same as the line-by-line reference
reading:

* the row count equals the number of candidate lines (Arrow reads ``{..} {..}`` on one
  line without complaint; Python rejects it): such a line is found and read alone;
* every string value and key is valid UTF-8 (Arrow does not check);
* no Arrow-only tokens (``-NaN``, ``Inf``) where the table holds NaN or infinities, and
  no number literal outside float64 (Arrow reads ``1e400`` as infinity);
* no two flattened columns share a name, no string was turned into a timestamp
  (Arrow infers timestamps from strings; such paths are re-read as strings).

When Arrow fails and names the row ("... in row N"), the lines before it take the fast
path, that line is read by the reference, and parsing resumes after it; without a row,
the piece is halved; after a few failures in one chunk the rest goes in blocks (linear
time on a chunk full of bad lines). Pieces of at most ``_SLOW_LINES`` lines are read
line by line with :func:`json.loads` (the reference reading), which is where bad lines
are found and quarantined. Either way every line gets the reference's verdict, and no
exception escapes: a value Arrow cannot hold, or any failure this module did not
foresee, becomes a rejected line with its reason.

Semantics (the contract the tests check)
----------------------------------------
Lines
    ``\n``, ``\r\n`` and a lone ``\r`` each end a line (a lone CR never merges two
    records). Line numbers are 1-based and count every line, blank or not. A UTF-8 byte
    order mark at the very start of the file is skipped.
Blank lines
    Lines holding nothing but spaces and tabs are skipped; they are not errors.
Rejected lines
    A line is rejected, with its line number and a reason, when it is longer than
    ``max_line_bytes`` (reason ``line too long: N bytes``; only its first 256 bytes are
    kept), not valid UTF-8, not JSON (as Python's ``json.loads`` reads it: strict, but
    accepting the ``NaN``, ``Infinity`` and ``-Infinity`` tokens Python writes), a JSON
    value that is not an object, or holds a number outside float64 (see Values). A last
    line without a newline that does not parse is rejected as a truncated last line (the
    trainer crashed mid-write); one that parses is kept. Every other line is kept.
Values
    ``NaN``/``Infinity``/``-Infinity`` become float NaN/+inf/-inf. A number literal
    outside float64 (``1e400``, a 400-digit integer) rejects its line with the reason
    ``number out of float64 range``: never a silent infinity, never a traceback.
    Integers are int64; integers outside the int64 range become float64 (as Arrow reads
    them, rounded). Lists stay lists (``list<...>`` columns, objects inside lists stay
    structs).
Flattening
    Nested objects become dotted columns: ``{"a": {"b": 1}}`` -> column ``a.b``. An empty
    object contributes no column. If a key containing a literal dot collides with a
    flattened path (``{"a.b": 1, "a": {"b": 2}}``), the value that comes later in the
    line wins.
Duplicate keys
    As in Python's ``json``: the last occurrence of a key in an object wins (and an
    earlier nested object under that key is dropped as a whole). The line is kept and
    is not reported. (Arrow refuses such lines; they go through the reference.)
Late keys
    There is no schema sampling: a key that first appears on the last line is a column.
One type per column
    A row is never dropped for its types, and one odd value never retypes its column:

    * every field of the diag contract has its canonical type (:data:`CANONICAL_TYPES`:
      ``step``, ``fold``, flat count and batch size int64, ``phase`` string, the other
      ``risk_stack.*`` fields float64);
    * another column takes the kind of its first value in the file (bool, number,
      string, list; the store passes the type an earlier run gave it, which wins),
      widened only within that kind: int64 then float64 -> float64, list items alike;
    * a value of another kind is coerced when that is lossless (``"1"`` -> 1, ``1.0``
      -> 1, ``true`` -> 1.0, 0/1 -> bool, any value -> its JSON text in a string
      column) and counted in the report's ``coerced``; otherwise the row keeps a null
      there and the value is set aside exactly, as JSON text with its line
      (:class:`Aside`, the run's ``_conflicts.jsonl``). In a column whose type is not
      fixed, a string goes into a number column only as an integer's text, so the
      verdict does not depend on whether the column is int64 or float64 yet.

    Decided by first values and source order, the result does not depend on where
    chunk boundaries fall.
Reserved columns
    Every table carries ``_line`` (int64): the 1-based source line of the row. A source
    field that is itself called ``_line`` is renamed ``_line_`` (more underscores until
    the name is free).
Diag lines
    With ``diag_only`` (the store and ``check`` read so), a JSON object line with no diag
    field (``{"a": 1}``: neither ``step`` nor a ``risk_stack.*`` field, under any alias) is
    rejected with the reason :data:`NOT_DIAG_LINE`, its bytes kept; a source left with no
    diag line, or with no ``step``, is not a diag (:mod:`~regime_dash.ingest.diag_rows`).
``step``
    int64, as every contract field has its canonical type: ``1.0`` is stored as 1, a
    fractional step is set aside.
"""
from __future__ import annotations

from regime_dash.ingest.columns import conform_column, conform_table, json_text, unified_types, unify_tables
from regime_dash.ingest.diag_rows import NOT_DIAG_LINE, not_diag_reason, report_reason, require_diag
from regime_dash.ingest.pipeline import iter_batches, parse
from regime_dash.ingest.reference import free_name, parse_lines_reference
from regime_dash.ingest.report import LINE_COLUMN, Aside, Batch, IngestReport, Reject
from regime_dash.ingest.sources import DEFAULT_CHUNK_BYTES, DEFAULT_MAX_LINE_BYTES
from regime_dash.ingest.types import CANONICAL_TYPES, unify_types

__all__ = [
    "CANONICAL_TYPES",
    "DEFAULT_CHUNK_BYTES",
    "DEFAULT_MAX_LINE_BYTES",
    "LINE_COLUMN",
    "NOT_DIAG_LINE",
    "Aside",
    "Batch",
    "IngestReport",
    "Reject",
    "conform_column",
    "conform_table",
    "free_name",
    "iter_batches",
    "parse",
    "parse_lines_reference",
    "unified_types",
    "unify_tables",
    "unify_types",
    "json_text",
    "not_diag_reason",
    "report_reason",
    "require_diag",
]
