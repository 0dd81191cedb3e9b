"""The reference reading: one line at a time with :func:`json.loads`, the verdict every
line gets (kept, rejected with its reason, or values set aside). Slow and exact; the
Arrow path is only accepted where it provably agrees with it.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any, Mapping, Sequence

import pyarrow as pa

from regime_dash.ingest.types import (
    CANONICAL_TYPES,
    FLOAT_MAX,
    first_type,
    join_types,
    type_kind,
    type_of_value,
)
from regime_dash.ingest.report import Aside, LINE_COLUMN, Reject, merge_counts
from regime_dash.ingest.columns import (
    JSON_STARTS,
    coerce_to,
    drop_empty_structs,
    settle_pending,
    values_into,
)
from regime_dash.ingest.sources import to_lf


# A number literal that may lie outside float64: an exponent of 3+ digits or a run of
# 300+ digits. Only consulted where a parse produced an infinity (or on the reference
# path, to decide whether the number hooks are needed), so false positives cost nothing.
OVERFLOW_RE = re.compile(rb"[0-9.][eE][+-]?[0-9]{3,}|[0-9]{300,}")


_OVERFLOW_TEXT_RE = re.compile(r"[0-9.][eE][+-]?[0-9]{3,}|[0-9]{300,}")


def flatten_into(prefix: str, obj: dict, out: dict) -> None:
    """The JSON object ``obj``'s leaves put into ``out`` under dotted names (``prefix.key.key``); a later
    value under a dotted name already there replaces it, and takes the later place in the order."""
    for k, v in obj.items():
        name = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            # a later value under the same dotted name replaces an earlier one
            flatten_into(name, v, out)
        else:
            out.pop(name, None)  # keep "later wins" also for column order
            out[name] = v


def _column_from_values(values: list, lines: Sequence[int], name: str,
                        target: pa.DataType | None = None, pending: list | None = None,
                        ) -> tuple[pa.Array, list[Aside], dict[str, dict[str, int]]]:
    """Build one column from Python values: its fixed type, else the kind of its first
    value (values of other kinds go to ``pending``)."""
    seen: dict[Any, list] = {}
    for v in values:
        if v is None:
            continue
        t = type_of_value(v)
        key = t if t is not None else "mixed"
        if key in seen:
            seen[key][1] += 1
        else:
            seen[key] = [t, 1]
    if not seen:
        return pa.nulls(len(values), target or pa.null()), [], {}
    fixed = target is not None
    if target is None:
        target = first_type([(t, k) for t, k in seen.values()])
    if len(seen) == 1:
        only = next(iter(seen.values()))[0]
        if only is not None and (only == target or join_types(only, target) == target) \
                and type_kind(only) == type_kind(target):
            try:
                return pa.array([coerce_to(v, target) for v in values], type=target), [], {}
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                pass
    return values_into(values, lines, name, target, fixed, None if fixed else pending)


def _reject_reason_json(err: json.JSONDecodeError, truncated: bool) -> str:
    msg = f"not JSON: {err.msg} at column {err.colno}"
    if truncated:
        return f"truncated last line (no newline at end of file): {msg}"
    return msg


class _OutOfRange(ValueError):
    """A number literal outside float64 (raised by the json number hooks)."""

    def __init__(self, token: str):
        super().__init__(token)
        self.token = token


def _checked_float(s: str) -> float:
    x = float(s)
    if math.isinf(x):
        raise _OutOfRange(s)
    return x


def _checked_int(s: str) -> int:
    digits = len(s.lstrip("-"))
    if digits > 308 and (digits > 309 or abs(int(s)) > FLOAT_MAX):
        raise _OutOfRange(s)
    return int(s)


def _out_of_range_reason(token: str) -> str:
    shown = token if len(token) <= 24 else f"{token[:12]}…{token[-6:]} ({len(token)} characters)"
    return f"number out of float64 range: {shown} (it would be stored as infinity)"


def too_long_reason(size: int, limit: int) -> str:
    """The reject reason of a line over the length limit."""
    return f"line too long: {size:,} bytes, over the {limit:,}-byte limit (not read)"


def _parse_one(raw: bytes, line: int, truncated_candidate: bool) -> tuple[dict | None, Reject | None]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        reason = f"invalid UTF-8: byte 0x{raw[e.start]:02x} at offset {e.start}"
        if truncated_candidate:
            reason = f"truncated last line (no newline at end of file): {reason}"
        return None, Reject(line, reason, raw)
    body = text.lstrip(" \t\n\r")
    first = body[:1]
    if first and first < "\x80" and first not in JSON_STARTS and not truncated_candidate:
        # what json.loads says, without raising (a flood of junk lines costs less)
        return None, Reject(line, f"not JSON: Expecting value at column {len(text) - len(body) + 1}", raw)
    try:
        if _OVERFLOW_TEXT_RE.search(text):
            obj = json.loads(text, parse_float=_checked_float, parse_int=_checked_int)
        else:
            obj = json.loads(text)
    except json.JSONDecodeError as e:
        return None, Reject(line, _reject_reason_json(e, truncated_candidate), raw)
    except _OutOfRange as e:
        return None, Reject(line, _out_of_range_reason(e.token), raw)
    except RecursionError:
        return None, Reject(line, "not JSON: nested too deeply", raw)
    except ValueError as e:  # e.g. an integer literal past Python's digit limit
        return None, Reject(line, f"not JSON: {e}", raw)
    if not isinstance(obj, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null",
                int: "a number", float: "a number"}.get(type(obj), type(obj).__name__)
        return None, Reject(line, f"JSON value is {kind}, not an object", raw)
    flat: dict[str, Any] = {}
    try:
        flatten_into("", obj, flat)
    except RecursionError:
        return None, Reject(line, "not JSON: nested too deeply", raw)
    if LINE_COLUMN in flat:
        flat[free_name(LINE_COLUMN, flat)] = flat.pop(LINE_COLUMN)
    # lone surrogates can only come from \\u escapes; Arrow cannot store them
    if "\\u" in text and _has_surrogate(obj):
        return None, Reject(line, "invalid unicode escape: lone surrogate", raw)
    return flat, None


def _has_surrogate(v: Any) -> bool:
    if isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(v, list):
        return any(_has_surrogate(x) for x in v)
    if isinstance(v, dict):
        return any(_has_surrogate(k) or _has_surrogate(x) for k, x in v.items())
    return False


def free_name(base: str, taken) -> str:
    """A name for a field ``base`` whose name is taken by a column of our own: ``base`` with
    underscores added until no name in ``taken`` has it."""
    name = base + "_"
    while name in taken:
        name += "_"
    return name


def blank_line(raw: bytes) -> bool:
    """Whether the line ``raw`` (without its line break) holds only spaces, tabs and CRs."""
    return not raw.strip(b" \t\r")


def parse_lines_reference(data: bytes, first_line: int = 1, *,
                          final_unterminated: bool = False,
                          types: Mapping[str, pa.DataType] | None = None,
                          ) -> tuple[pa.Table, list[Reject], int]:
    """Parse complete lines one by one with :func:`json.loads` (the reference reading).

    Parameters
    ----------
    data
        Whole lines; every line ends with ``\\n`` (or a lone ``\\r``) except possibly
        the last.
    first_line
        Line number of the first line.
    final_unterminated
        The last line of ``data`` is the file's last line and has no newline, so a
        parse failure there is reported as a truncated last line.
    types
        Fixed column types (default: :data:`CANONICAL_TYPES`).

    Returns
    -------
    table, rejects, blank_lines
        The good rows (flattened, with ``_line``), the rejected lines, the count of
        blank lines.
    """
    data = to_lf(data)
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines.pop()
    blanks = sum(1 for raw in lines if blank_line(raw))
    last = first_line + len(lines) - 1 if final_unterminated else -1
    keep = [(first_line + i, raw) for i, raw in enumerate(lines) if not blank_line(raw)]
    fixed = CANONICAL_TYPES if types is None else types
    pending: list = []
    table, rejects, _aside, _coerced = read_reference(keep, last, fixed, pending)
    if pending:  # settle the values of other kinds as a one-chunk run would
        table, _a, _c = settle_pending(table, pending, {})
    return table, rejects, blanks


def read_reference(lines: Sequence[tuple[int, bytes]], truncated_line: int,
               fixed: Mapping[str, pa.DataType], pending: list):
    """Read (line number, bytes) pairs with the reference; returns the good rows as a
    table, the rejects, and the set-aside values and coercions of its columns."""
    rows: list[dict] = []
    line_nos: list[int] = []
    rejects: list[Reject] = []
    for n, raw in lines:
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        row, rej = _parse_one(raw, n, n == truncated_line)
        if rej is not None:
            rejects.append(rej)
        else:
            rows.append(row)
            line_nos.append(n)
    try:
        mark = len(pending)
        table, aside, coerced = _rows_to_table(rows, line_nos, fixed, pending)
    except Exception:  # noqa: BLE001 - find the rows that cannot be stored, keep the rest
        del pending[mark:]
        table, aside, coerced, more = _rows_one_by_one(rows, line_nos, fixed, pending)
        rejects = sorted(rejects + more, key=lambda r: r.line)
    return table, rejects, aside, coerced


def _rows_one_by_one(rows: list[dict], line_nos: list[int], fixed: Mapping[str, pa.DataType],
                     pending: list):
    good, nos, bad = [], [], []
    for row, n in zip(rows, line_nos):
        try:
            _rows_to_table([row], [n], fixed, [])
        except Exception as e:  # noqa: BLE001 - a value Arrow cannot hold: reject the line
            bad.append(Reject(n, f"cannot be stored: {type(e).__name__}: {str(e)[:200]}",
                              json.dumps(row, default=str).encode()))
            continue
        good.append(row)
        nos.append(n)
    table, aside, coerced = _rows_to_table(good, nos, fixed, pending)
    return table, aside, coerced, bad


def _rows_to_table(rows: list[dict], line_nos: list[int], fixed: Mapping[str, pa.DataType],
                   pending: list):
    names: dict[str, None] = {}
    for r in rows:
        for k in r:
            names.setdefault(k, None)
    cols = {LINE_COLUMN: pa.array(line_nos, type=pa.int64())}
    aside: list[Aside] = []
    coerced: dict[str, dict[str, int]] = {}
    for n in names:
        col, a, c = _column_from_values([r.get(n) for r in rows], line_nos, n, fixed.get(n), pending)
        cols[n] = col
        aside.extend(a)
        merge_counts(coerced, c)
    return drop_empty_structs(pa.table(cols)), aside, coerced
