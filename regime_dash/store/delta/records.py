"""Rejected lines and values set aside as the rejects table keeps them, and names the store reserves.

Each is kept as the JSON object the folder store writes to ``_rejects.jsonl`` (``line``, ``reason``,
``raw``, and ``raw_base64`` beside ``raw`` where the bytes are not UTF-8) or ``_conflicts.jsonl``
(``line``, ``field``, ``value``, ``type``): nothing is lost, and both stores give the same lists.
"""
from __future__ import annotations

import base64
import json
from typing import Any, Sequence

import pyarrow as pa

__all__ = ["REJECTS_SCHEMA", "free_col", "reject_record", "rejects_table"]

#: The rejects table: a rejected line (``kind`` "reject") or a value set aside ("aside"), its line,
#: and the record as JSON text.
REJECTS_SCHEMA = pa.schema([("kind", pa.string()), ("line", pa.int64()), ("record", pa.string())])


def reject_record(line: int, reason: str, raw: bytes) -> dict[str, Any]:
    """A rejected line as the folder store's ``_rejects.jsonl`` keeps it (the exact bytes in base64
    beside the text where they are not UTF-8)."""
    rec: dict[str, Any] = {"line": line, "reason": reason}
    try:
        rec["raw"] = raw.decode("utf-8")
    except UnicodeDecodeError:
        rec["raw"] = raw.decode("utf-8", errors="backslashreplace")
        rec["raw_base64"] = base64.b64encode(raw).decode("ascii")
    return rec


def rejects_table(kind: str, records: Sequence[dict[str, Any]]) -> pa.Table:
    """``records`` of one kind as rows of the rejects table."""
    return pa.table([[kind] * len(records), [int(r["line"]) for r in records],
                     [json.dumps(r, ensure_ascii=False) for r in records]], schema=REJECTS_SCHEMA)


def free_col(base: str, taken) -> str:
    """``base`` with underscores added until no name of ``taken`` has it (a source field named like the
    partition column moves over)."""
    name = base + "_"
    while name in taken:
        name += "_"
    return name
