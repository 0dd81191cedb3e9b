"""The runs table: one row per stored run, with its logged config, its verdict and headline
metrics, and the ``--tag`` / ``--where`` filters of ``runs`` and the Runs page.

A row's ``config`` is each logged config field (:data:`regime_dash.diag.catalogue.LOGGED_CONFIG`:
``max_duration``, ``eps_min``, ..., the switches) at the run's last row that logs it; a field
whose value changed during the run is listed in ``config_varies``. Its ``summary`` is the
verdict (``verdict``: ``pass``/``warn``/``fail``, and the count of checks per status), the run's
segments and writers (:mod:`regime_dash.analysis.structure`: one segment more per resume from a
checkpoint, one writer per rank that wrote the file) and the headline counts of
:func:`regime_dash.analysis.episodes.summary`.

Computed lazily, then cached: the first listing that needs a run's row judges it (the same
verdict as ``check RUN``) and keeps the result in the run's ``_meta.json`` (key
``table``, stamped with the rows it was computed for), so later listings read metadata only.
Not at ingest: the verdict costs more than the parse itself (on the 1,200-row sample,
about 0.2 s against 0.4 s for the ingest, more on a cold start), and ingest's speed is its
own measured target; runs stored by earlier versions get their row the same way. A
followed run, whose rows grow, is judged again when its row count has moved.
"""
from __future__ import annotations

import math
import operator
import re
from typing import Any, Callable, Iterable, Mapping, Sequence

from regime_dash.diag.catalogue import LOGGED_CONFIG
from regime_dash.errors import NotDiagError, StoreError, ValidationError
from regime_dash.store.run_store import RunStore

__all__ = ["HEADLINE", "TABLE_KEY", "Where", "at_slot_precision", "filter_rows", "flat", "logged_config",
           "parse_where", "run_facts", "table"]

#: The ``_meta.json`` key of a run's cached row.
TABLE_KEY = "table"
_VERSION = 2
#: The headline metrics of a row's summary (keys of ``analysis.episodes.summary`` and of the structure's summary).
HEADLINE = ("segments", "writers", "dead_zone_steps", "dead_zone_episodes", "longest_duration", "timeouts",
            "tail_events",
            "floor_active_steps", "kelly_min", "kelly_mean", "sigma_max")


def _finite(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None  # the metadata is strict JSON
    return v


def _config(store: RunStore, run_id: str, columns: Iterable[str]) -> tuple[dict[str, Any], list[str]]:
    """Each logged config field's value at the last row that logs it, and the fields that changed."""
    import pyarrow.compute as pc

    have = {name: col for name, col in LOGGED_CONFIG.items() if col in set(columns)}
    if not have:
        return {}, []
    table = store.load_table(run_id, list(have.values()))
    values, varies = {}, []
    for name, col in have.items():
        a = table.column(col).drop_null()
        if len(a) == 0:
            continue
        values[name] = _finite(a[-1].as_py())
        if pc.min_max(a)["min"] != pc.min_max(a)["max"]:
            varies.append(name)
    return values, varies


def logged_config(store: RunStore, run_id: str) -> dict[str, Any]:
    """The run's logged config (a row's ``config``) read from its config columns alone, without the
    verdict :func:`run_facts` computes on a run's first listing."""
    return _config(store, run_id, store.meta(run_id).get("columns", {}))[0]


def _judge(store: RunStore, run_id: str) -> dict[str, Any]:
    from regime_dash.runs.check_all import store_check

    try:
        doc = store_check(run_id, store.root)
    except NotDiagError as exc:
        return {"verdict": "not a diag", "why": str(exc)}
    out = {"verdict": doc["status"], **doc["counts"]}
    out.update({k: _finite(doc["summary"].get(k)) for k in HEADLINE})
    return out


def run_facts(store: RunStore, run_id: str, meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The run's ``config``, ``config_varies`` and ``summary``: from its metadata's cache when that
    was computed for the run's present rows, else computed now and cached (under the store's lock)."""
    meta = store.meta(run_id) if meta is None else meta
    cached = meta.get(TABLE_KEY)
    if isinstance(cached, dict) and cached.get("version") == _VERSION and cached.get("rows") == meta.get("rows"):
        return cached
    config, varies = _config(store, run_id, meta.get("columns", {}))
    facts = {"version": _VERSION, "rows": meta.get("rows"), "config": config, "config_varies": varies,
             "summary": _judge(store, run_id)}
    try:
        store.update_meta(run_id, lambda m: m.update({TABLE_KEY: facts}))
    except StoreError:
        pass  # a read-only store still lists its runs; the row is computed again next time
    return facts


def table(store: RunStore, progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """Every run of ``store`` (oldest ingest first) with its ``config``, ``config_varies`` and
    ``summary``. ``progress(done, total)`` is called after each run (the first listing judges them)."""
    runs = store.list_runs()
    out = []
    for k, r in enumerate(runs):
        try:
            facts = run_facts(store, r["run_id"])
        except StoreError as exc:  # deleted or damaged meanwhile: listed, with why
            facts = {"config": {}, "config_varies": [], "summary": {"verdict": "unreadable", "why": str(exc)}}
        out.append({**r, **{k_: facts[k_] for k_ in ("config", "config_varies", "summary")}})
        if progress is not None:
            progress(k + 1, len(runs))
    return out


def flat(row: Mapping[str, Any]) -> dict[str, Any]:
    """One table row as flat columns: the run's own keys, then its config fields and summary keys."""
    out = {k: v for k, v in row.items() if k not in ("config", "summary", "config_varies")}
    out.update(row.get("config") or {})
    out.update(row.get("summary") or {})
    return out


# ---- filters ------------------------------------------------------------------------------
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    ">=": operator.ge, "<=": operator.le, "!=": operator.ne, "==": operator.eq, "=": operator.eq,
    ">": operator.gt, "<": operator.lt}
_WHERE_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(>=|<=|!=|==|=|>|<)\s*(.+?)\s*$")


def at_slot_precision(field: str, value: float) -> float:
    """``value`` as field ``field`` is logged: rounded to float32 for a logged config field.

    Every logged config field is an ISV slot, and ISV slots are float32: a run configured with
    ``eps_min=0.05`` logs 0.05000000074505806, which a test against the float64 0.05 would miss.
    Both sides of a test on such a field are rounded alike, so ``eps_min==0.05`` matches it and
    ``eps_min>0.05`` does not. Other fields (counts, summary metrics) compare as they are.
    """
    if field not in LOGGED_CONFIG:
        return value
    import numpy as np

    with np.errstate(over="ignore"):  # past float32's range is inf, as the slot would hold it
        return float(np.float32(value))


class Where:
    """One ``FIELD OP VALUE`` test of a flat row (:func:`parse_where`); a logged config field
    is compared at its slot's float32 precision (:func:`at_slot_precision`)."""

    def __init__(self, field: str, op: str, value: Any, text: str):
        self.field, self.op, self.value, self.text = field, op, value, text

    def __call__(self, row: Mapping[str, Any]) -> bool:
        v = row.get(self.field)
        if v is None:
            return False  # a run that does not log the field matches no test on it
        if isinstance(self.value, float):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                return False
            return _OPS[self.op](at_slot_precision(self.field, float(v)),
                                 at_slot_precision(self.field, self.value))
        return _OPS[self.op](str(v), self.value)


def parse_where(text: str) -> Where:
    """``max_duration>500``, ``verdict==fail``, ``fail>=1``: a field, an operator
    (``> >= < <= == = !=``) and a number (any operator) or a text (``==`` and ``!=`` only)."""
    m = _WHERE_RE.match(str(text))
    if not m:
        raise ValidationError(f"--where {text!r} is not FIELD OP VALUE (e.g. 'max_duration>500'; "
                              "OP is one of > >= < <= == !=)", field="where", value=text)
    field, op, raw = m.groups()
    try:
        value: Any = float(raw)
    except ValueError:
        value = raw.strip("'\"")
        if op not in ("==", "=", "!="):
            raise ValidationError(f"--where {text!r}: {op} needs a number, got {raw!r}", field="where",
                                  value=text) from None
    return Where(field, op, value, str(text))


def filter_rows(rows: Sequence[Mapping[str, Any]], *, tags: Sequence[str] = (),
                where: Sequence[str] = ()) -> list[Mapping[str, Any]]:
    """The rows (of :func:`table`) that have every tag in ``tags`` and pass every test in ``where``.

    Raises
    ------
    ValidationError
        A test that does not parse, or names a field no row has (the message lists the fields).
    """
    tests = [parse_where(w) for w in where]
    flats = [flat(r) for r in rows]
    known = sorted({k for f in flats for k in f})
    for t in tests:
        if flats and t.field not in known:
            raise ValidationError(f"--where {t.text!r}: no run has a field {t.field!r} (fields: "
                                  f"{', '.join(known)})", field="where", value=t.text)
    return [r for r, f in zip(rows, flats)
            if all(t in (f.get("tags") or []) for t in tags) and all(t(f) for t in tests)]
