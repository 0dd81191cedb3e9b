"""What-if sensitivity: which config fields move which summary metrics of one stream, and by how much.

:func:`sensitivity` replays one stream under

1. the base config and, one field at a time, every config field across its
   domain (its ``param()`` declaration, :meth:`RegimeConfig.field_specs`; the switches F2, F4,
   F5 and the model switches both ways), the other fields held at the base;
2. then, for the fields that matter most, a grid over each pair of them;

all through :meth:`Prepared.sweep <regime_dash.engine.prepared.Prepared.sweep>` of one prepared stream,
so each batch shares one phase 1 of the fast engine. For every field and every metric of
:data:`regime_dash.engine.summary.METRICS` it reports the base value, the lowest
and highest value the sweep reached and the field values that reached them;
fields are ranked by how much they move the metrics, and each pair by how far
its joint effect departs from the sum of the two single effects (the
interaction).

A field that moves no metric is **no effect here**. So is a field that moves
the metrics only at one end value of its domain and nowhere else in it (the
result says which value and what it moved): on Run #8's trap with F2 on,
``max_duration = 0`` fires the timeout on the first dead-zone step, while no
other value ever does, because the resurrection keeps DURATION at 0 or 1.
Each no-effect field is explained by the findings of the base replay
(:func:`regime_dash.analysis.findings.find`) whose ``fields`` name it, e.g.
``timeout_unreachable`` for ``max_duration``.

Values in, values out: nothing here reads or writes files.
"""
from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from regime_dash.core.config import SWITCHES, RegimeConfig, field_names
from regime_dash.engine.summary import METRICS
from regime_dash.errors import ConfigError, ValidationError
from regime_dash.engine.prepared import Prepared
from regime_dash.engine.step_stats import StepStats
from regime_dash.core.streams import StepStream, Stream

#: The numeric fields' declarations by name: each one's domain is its slider's (min, max, step).
_NUMERIC = RegimeConfig.numeric_specs()


#: Values swept per numeric field (the base value is added when it is not one of them).
POINTS = 9
#: Fields whose pairs get a grid: the top ``PAIR_FIELDS`` of the ranking.
PAIR_FIELDS = 3
#: Values per field in a pairwise grid (the base value included).
PAIR_POINTS = 5
#: A numeric domain this wide (hi / lo, lo > 0) is swept on a log scale.
LOG_SPAN = 100.0

#: ``progress(fraction done in [0, 1], what is running)``.
Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class NoEffect:
    """A field that moves no summary metric over its domain, and why.

    Attributes
    ----------
    field
        The RegimeConfig field.
    except_at
        ``None`` when no swept value moved anything; else the one end value of
        the domain that did (``max_duration = 0``: a timeout on the first
        dead-zone step).
    edge_deltas
        ``{metric: value at except_at − base value}`` for the metrics that end value moved.
    findings
        The base replay's findings whose ``fields`` name this field, as
        ``{"id", "severity", "message", "evidence", "spans"}`` dicts.
    """

    field: str
    except_at: float | bool | None = None
    edge_deltas: dict[str, float] = dc_field(default_factory=dict)
    findings: tuple[dict[str, Any], ...] = ()

    def explanation(self) -> str:
        """The explaining findings' messages (or that none explains it), then the edge exception, as sentences."""
        parts = [f"{f['id']}: {f['message']}" for f in self.findings] or ["No finding explains it."]
        if self.except_at is not None:
            parts.append(self.edge_text())
        return " ".join(parts)

    def edge_text(self) -> str:
        """The edge exception in words; empty when no value moved anything."""
        if self.except_at is None:
            return ""
        moved = ", ".join(f"{m} {d:+g}" for m, d in self.edge_deltas.items())
        return f"Only {self.field}={format_value(self.except_at)}, the end of its range, moves anything ({moved})."

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "except_at": _plain(self.except_at),
                "edge_deltas": _plain(self.edge_deltas), "findings": _plain(list(self.findings)),
                "explanation": self.explanation()}


@dataclass
class SensitivityResult:
    """The outcome of :func:`sensitivity`.

    Attributes
    ----------
    base
        The config every sweep varies.
    oat
        The one-at-a-time sweep: one row per config, a ``field`` column naming
        the varied field (``None`` on the base row, row 0), the config fields and
        the metrics.
    effects
        One row per (field, metric): ``base``, ``low``, ``high`` (the extreme
        metric values over the field's sweep), ``at_low``, ``at_high`` (the field
        values that gave them), ``span`` = high − low and ``share`` = span over
        the largest span a field with an effect reached on that metric (0 where
        none moved it). No-effect fields keep their rows, with span 0 unless an
        end value moved them, and share 0.
    ranking
        ``[(field, score)]``, the fields that move something, most first; the
        score is the sum of the field's shares over the metrics.
    no_effect
        The fields that move nothing here, with their explanations.
    pairs
        One row per (field_a, field_b, metric): ``span`` of the metric over the
        pair's grid and ``interaction``, the largest
        ``|m(a, b) − m(a, b₀) − m(a₀, b) + m(a₀, b₀)|`` over the grid (0: the
        two fields act independently on that metric).
    pair_table
        Every pairwise grid row: ``field_a``, ``field_b``, the config fields and the metrics.
    skipped
        ``[(field, value, message)]``: swept values RegimeConfig rejects next to
        the base (ε_min above the base's ε_max, ...), not replayed.
    findings
        The base replay's findings, as dicts.
    engine, seconds
        What ran the sweeps, and the wall time of the whole analysis.
    steps, accounts
        The stream's size.
    """

    base: RegimeConfig
    oat: pd.DataFrame
    effects: pd.DataFrame
    ranking: list[tuple[str, float]]
    no_effect: list[NoEffect]
    pairs: pd.DataFrame
    pair_table: pd.DataFrame
    skipped: list[tuple[str, Any, str]] = dc_field(default_factory=list)
    findings: list[dict[str, Any]] = dc_field(default_factory=list)
    engine: str = ""
    seconds: float = 0.0
    steps: int = 0
    accounts: int = 0

    def moves(self, name: str) -> dict[str, float]:
        """``{metric: span}`` of the metrics field ``name`` moves (empty for a no-effect field)."""
        if name in self.no_effect_fields:
            return {}
        rows = self.effects[(self.effects["field"] == name) & (self.effects["span"] > 0)]
        return dict(zip(rows["metric"], rows["span"].astype(float)))

    @property
    def no_effect_fields(self) -> list[str]:
        return [n.field for n in self.no_effect]

    def field_sweep(self, name: str) -> pd.DataFrame:
        """The base row and the rows that varied ``name``, sorted by its value."""
        if name not in field_names():
            raise ValidationError(f"unknown config field {name!r}; valid fields: {', '.join(field_names())}",
                                  field="field", value=name)
        rows = self.oat[(self.oat["field"] == name) | self.oat["field"].isna()]
        return rows.sort_values(name, kind="stable").reset_index(drop=True)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the base, per-field effects, ranking, no-effect list, pairs, skipped values."""
        fields_out: dict[str, Any] = {}
        for name, rows in self.effects.groupby("field", sort=False):
            fields_out[name] = {
                "values": _plain(sorted(self.field_sweep(name)[name].unique().tolist())),
                "moves": _plain(self.moves(name)),
                "effects": {r["metric"]: _plain({k: r[k] for k in ("base", "low", "high", "at_low", "at_high",
                                                                   "span", "share")})
                            for r in rows.to_dict("records")},
            }
        return {
            "base": _plain(self.base.as_dict()),
            "steps": self.steps, "accounts": self.accounts, "engine": self.engine,
            "seconds": self.seconds, "replays": len(self.oat) + len(self.pair_table),
            "metrics": list(METRICS),
            "ranking": [{"field": f, "score": s} for f, s in self.ranking],
            "no_effect": [n.to_dict() for n in self.no_effect],
            "fields": fields_out,
            "pairs": _plain(self.pairs.to_dict("records")),
            "skipped": [{"field": f, "value": _plain(v), "message": m} for f, v, m in self.skipped],
            "findings": _plain(self.findings),
        }


# ---- the values swept ------------------------------------------------------------------
def field_values(name: str, base: RegimeConfig, points: int = POINTS) -> list[float | bool]:
    """The values :func:`sensitivity` gives field ``name``: its domain in ``points`` steps, plus the base.

    Switches get both values. A numeric domain is split evenly, or on a log
    scale when it spans :data:`LOG_SPAN` or more above a positive lower end;
    whole-step fields (slider step ≥ 1) are rounded to whole numbers.
    """
    if name in SWITCHES:
        return [False, True]
    if name not in _NUMERIC:
        raise ConfigError(f"unknown config field {name!r}; valid fields: {', '.join(field_names())}",
                          field=name, value=name)
    if isinstance(points, bool) or not isinstance(points, int) or points < 2:
        raise ValidationError(f"points must be an int >= 2, got {points!r}", field="points", value=points)
    lo, hi, step = RegimeConfig.domain(name)
    values = np.geomspace(lo, hi, points) if lo > 0 and hi / lo >= LOG_SPAN else np.linspace(lo, hi, points)
    if step >= 1.0:
        values = np.round(values)
    values = np.append(values, float(getattr(base, name)))
    return [float(v) for v in np.unique(values)]


def _candidates(names: Sequence[str], base: RegimeConfig, points: int
                ) -> tuple[list[RegimeConfig], list[str | None], list[tuple[str, Any, str]]]:
    """The one-at-a-time configs (base first), the field each varies, and the rejected values."""
    configs, varied, skipped = [base], [None], []
    for name in names:
        for v in field_values(name, base, points):
            if v == getattr(base, name):
                continue
            try:
                configs.append(base.replace(**{name: v}))
            except ConfigError as exc:
                skipped.append((name, v, str(exc)))
                continue
            varied.append(name)
    return configs, varied, skipped


# ---- effects -------------------------------------------------------------------------------
def _effects(oat: pd.DataFrame, names: Sequence[str]) -> pd.DataFrame:
    base = oat.iloc[0]
    rows = []
    for name in names:
        sweep = oat[(oat["field"] == name) | oat["field"].isna()]
        for metric in METRICS:
            y = sweep[metric].to_numpy(dtype=float)
            x = sweep[name].to_numpy()
            lo, hi = int(np.nanargmin(y)), int(np.nanargmax(y))
            rows.append({"field": name, "metric": metric, "base": float(base[metric]),
                         "low": float(y[lo]), "high": float(y[hi]), "at_low": _scalar(x[lo]),
                         "at_high": _scalar(x[hi]),
                         "span": float(y[hi] - y[lo])})
    return pd.DataFrame(rows)


def _shares(effects: pd.DataFrame, quiet: Sequence[str]) -> pd.Series:
    """Each row's span over the largest span a field outside ``quiet`` reached on its metric (0 in ``quiet``)."""
    moving = effects["span"].where(~effects["field"].isin(quiet), 0.0)
    largest = moving.groupby(effects["metric"]).transform("max")
    return pd.Series(np.where(largest > 0, moving / largest.where(largest > 0, 1.0), 0.0), index=effects.index)


def _edge_only(oat: pd.DataFrame, name: str) -> tuple[Any, dict[str, float]] | None:
    """``(value, deltas)`` when only one end value of ``name``'s domain moves any metric, else None."""
    if name in SWITCHES:
        return None
    base = oat.iloc[0]
    rows = oat[oat["field"] == name]
    moved = rows[(rows[list(METRICS)].to_numpy() != base[list(METRICS)].to_numpy(dtype=float)).any(axis=1)]
    lo, hi, _ = RegimeConfig.domain(name)
    if len(moved) != 1 or float(moved[name].iloc[0]) not in (lo, hi):
        return None
    row = moved.iloc[0]
    return float(row[name]), {m: float(row[m] - base[m]) for m in METRICS if row[m] != base[m]}


def explain(names: Sequence[str], findings: Sequence[Any]) -> dict[str, tuple[dict[str, Any], ...]]:
    """``{field: the findings whose fields name it}`` for each of ``names``.

    ``findings`` are :class:`regime_dash.analysis.findings.Finding`; each comes
    back as its ``id``, ``severity``, ``message``, ``evidence`` and ``spans``.
    """
    keys = ("id", "severity", "message", "evidence", "spans")
    docs = [(f.fields, f.to_dict()) for f in findings]
    return {name: tuple({k: d[k] for k in keys} for fields_, d in docs if name in fields_) for name in names}


# ---- pairs ---------------------------------------------------------------------------------
def _subsample(values: list, base_value: Any, n: int) -> list:
    """``n`` of ``values`` spread evenly, always with ``base_value``."""
    if len(values) <= n:
        return list(values)
    others = [v for v in values if v != base_value]
    idx = np.round(np.linspace(0, len(others) - 1, n - 1)).astype(int)
    return sorted({others[i] for i in idx} | {base_value})


def _pair_configs(top: Sequence[str], oat: pd.DataFrame, base: RegimeConfig, points: int
                  ) -> tuple[list[RegimeConfig], list[tuple[str, str]], list[tuple[str, Any, str]]]:
    configs, owners, skipped = [], [], []
    for a, b in itertools.combinations(top, 2):
        grid_a = _subsample(sorted(oat[(oat["field"] == a) | oat["field"].isna()][a].unique().tolist()),
                            getattr(base, a), points)
        grid_b = _subsample(sorted(oat[(oat["field"] == b) | oat["field"].isna()][b].unique().tolist()),
                            getattr(base, b), points)
        for va, vb in itertools.product(grid_a, grid_b):
            try:
                configs.append(base.replace(**{a: va, b: vb}))
            except ConfigError as exc:
                skipped.append((f"{a}×{b}", (va, vb), str(exc)))
                continue
            owners.append((a, b))
    return configs, owners, skipped


def _pair_effects(table: pd.DataFrame, base: RegimeConfig, base_row: pd.Series) -> pd.DataFrame:
    rows = []
    for (a, b), grid in table.groupby(["field_a", "field_b"], sort=False):
        a0, b0 = getattr(base, a), getattr(base, b)
        for metric in METRICS:
            m = {(ra, rb): float(v) for ra, rb, v in zip(grid[a], grid[b], grid[metric])}
            m0 = float(base_row[metric])
            inter = 0.0
            for (va, vb), v in m.items():
                if (va, b0) in m and (a0, vb) in m:
                    inter = max(inter, abs(v - m[(va, b0)] - m[(a0, vb)] + m0))
            rows.append({"field_a": a, "field_b": b, "metric": metric,
                         "span": float(grid[metric].max() - grid[metric].min()), "interaction": inter})
    return pd.DataFrame(rows, columns=["field_a", "field_b", "metric", "span", "interaction"])


# ---- the analysis --------------------------------------------------------------------------
def sensitivity(stream: Stream | StepStream, base: RegimeConfig | None = None, *,
                fields: Sequence[str] | None = None, points: int = POINTS, pair_fields: int = PAIR_FIELDS,
                pair_points: int = PAIR_POINTS, engine: str = "auto", device: str = "auto", layout=None,
                progress: Progress | None = None, explain_findings: bool = True,
                stats: StepStats | None = None) -> SensitivityResult:
    """Sweep every config field around ``base`` on ``stream``; rank them; pair the top ones.

    The keyword form of :func:`prepared_sensitivity` of ``prepare(stream, engine, ReplayOptions(device=device),
    layout=layout, stats=stats)``.

    Parameters
    ----------
    stream
        The replayed inputs: a Stream, or on engine ``fast`` given its phase 1 (``stats``)
        a :class:`~regime_dash.core.streams.StepStream`, its per-step fields only.
    base, fields, points, pair_fields, pair_points, progress, explain_findings
        As in :func:`prepared_sensitivity`.
    engine, device, layout, stats
        As in :func:`regime_dash.runs.sweeps.sweep` (``stats``: the stream's phase 1, shared by
        every sweep of the analysis; the same result as without it).

    Raises
    ------
    ConfigError
        ``base`` is not a RegimeConfig, or ``fields`` names an unknown field.
    ValidationError
        Bad ``points``, ``pair_fields`` or ``pair_points``; ``stats`` as :func:`regime_dash.runs.sweeps.sweep`
        refuses it.
    StreamError
        A StepStream on an engine other than ``fast``, or without ``stats``.
    """
    from regime_dash.engine.options import ReplayOptions
    from regime_dash.engine.prepared import prepare
    from regime_dash.engine.sweep import sweep_engine

    _checked_args(base, fields, pair_fields, pair_points)  # before the stream is prepared, as the analysis checks
    prepared = prepare(stream, sweep_engine(engine), ReplayOptions(device=device), layout=layout, stats=stats)
    return prepared_sensitivity(prepared, base, fields=fields, points=points, pair_fields=pair_fields,
                                pair_points=pair_points, progress=progress, explain_findings=explain_findings)


def prepared_sensitivity(prepared: Prepared, base: RegimeConfig | None = None, *,
                         fields: Sequence[str] | None = None, points: int = POINTS, pair_fields: int = PAIR_FIELDS,
                         pair_points: int = PAIR_POINTS, progress: Progress | None = None,
                         explain_findings: bool = True) -> SensitivityResult:
    """Sweep every config field around ``base`` on a prepared stream (every sweep shares its phase 1); rank
    the fields; pair the top ones.

    Parameters
    ----------
    prepared
        The stream, its engine and options (:func:`regime_dash.engine.prepared.prepare`).
    base
        The config the fields vary around; the spec's defaults if None.
    fields
        The fields to sweep; every RegimeConfig field if None.
    points
        Values per numeric field (see :func:`field_values`).
    pair_fields
        How many of the top-ranked fields get pairwise grids (0: none).
    pair_points
        Values per field in a pairwise grid.
    progress
        Called as ``progress(fraction, label)`` while it runs.
    explain_findings
        Look up the base replay's findings to explain the no-effect fields.

    Returns
    -------
    SensitivityResult

    Raises
    ------
    ConfigError
        ``base`` is not a RegimeConfig, or ``fields`` names an unknown field.
    ValidationError
        Bad ``points``, ``pair_fields`` or ``pair_points``.
    """
    t0 = time.perf_counter()
    base, names = _checked_args(base, fields, pair_fields, pair_points)
    report = progress or (lambda fraction, label: None)
    run = prepared.sweep

    one, oat, skipped = _one_at_a_time(run, names, base, points, pair_fields, pair_points, report)
    effects, quiet, edges = _field_effects(oat, names)
    done = len(oat) / _total(len(oat), len(names), pair_fields, pair_points)
    found = _base_findings(one, quiet, explain_findings, report, done)
    why = explain(quiet, found)
    no_effect = [NoEffect(n, None if edges[n] is None else edges[n][0],
                          {} if edges[n] is None else edges[n][1], why[n]) for n in quiet]
    score = effects[~effects["field"].isin(quiet)].groupby("field", sort=False)["share"].sum()
    ranking = sorted(((n, float(s)) for n, s in score.items()), key=lambda t: -t[1])

    pair_table, pairs, pair_skipped = _pairs(run, [n for n, _ in ranking[:pair_fields]], oat, base, pair_points,
                                             report)
    report(1.0, "done")
    return SensitivityResult(base=base, oat=oat, effects=effects, ranking=ranking, no_effect=no_effect,
                             pairs=pairs, pair_table=pair_table, skipped=skipped + pair_skipped,
                             findings=[f.to_dict() for f in found], engine=one.engine,
                             seconds=time.perf_counter() - t0, steps=prepared.steps, accounts=prepared.accounts)


def _checked_args(base: Any, fields: Sequence[str] | None, pair_fields: Any, pair_points: Any
                  ) -> tuple[RegimeConfig, list[str]]:
    """``(base, field names)`` of :func:`sensitivity`'s arguments, checked (the spec's defaults for no base)."""
    base = RegimeConfig() if base is None else base
    if not isinstance(base, RegimeConfig):
        raise ConfigError(f"base must be a RegimeConfig, got {type(base).__name__}", field="base",
                          value=type(base).__name__)
    names = field_names() if fields is None else list(dict.fromkeys(fields))
    unknown = [n for n in names if n not in field_names()]
    if unknown:
        raise ConfigError(f"unknown config field(s) {unknown}; valid fields: {', '.join(field_names())}",
                          field=unknown[0], value=unknown[0])
    for label, v, least in (("pair_fields", pair_fields, 0), ("pair_points", pair_points, 2)):
        if isinstance(v, bool) or not isinstance(v, int) or v < least:
            raise ValidationError(f"{label} must be an int >= {least}, got {v!r}", field=label, value=v)
    return base, names


def _total(n_configs: int, n_names: int, pair_fields: int, pair_points: int) -> int:
    """The progress bar's length before the pairwise grids are known: those counted at their largest."""
    return n_configs + math.comb(min(pair_fields, n_names), 2) * pair_points ** 2


def _one_at_a_time(run: Callable[..., Any], names: Sequence[str], base: RegimeConfig, points: int,
                   pair_fields: int, pair_points: int, report: Progress) -> tuple[Any, pd.DataFrame, list]:
    """The one-at-a-time sweep (the base replay kept): ``(its SweepResult, the table with the varied
    field first, the values the config rejected)``."""
    configs, varied, skipped = _candidates(names, base, points)
    total = _total(len(configs), len(names), pair_fields, pair_points)
    report(0.0, f"one field at a time: {len(configs)} replays")
    one = run(configs, keep=[0],
              progress=lambda done, _n: report(done / total, f"one field at a time: {done}/{len(configs)}"))
    oat = pd.concat([pd.Series(varied, name="field", dtype=object), one.table], axis=1)
    return one, oat, skipped


def _field_effects(oat: pd.DataFrame, names: Sequence[str]) -> tuple[pd.DataFrame, list[str], dict]:
    """``(effects with their shares, the no-effect fields, {field: its edge-only move or None})``."""
    effects = _effects(oat, names)
    edges = {n: _edge_only(oat, n) for n in names}
    spans = effects.groupby("field", sort=False)["span"].max()
    quiet = [n for n in names if spans[n] == 0 or edges[n] is not None]
    effects["share"] = _shares(effects, quiet)
    return effects, quiet, edges


def _base_findings(one: Any, quiet: Sequence[str], explain_findings: bool, report: Progress,
                   fraction: float) -> list[Any]:
    """The base replay's findings, looked up only when some field has no effect to explain."""
    if not (explain_findings and quiet):
        return []
    report(fraction, "findings of the base replay")
    from regime_dash.analysis.findings import find

    return list(find(one.trajectories[0]))


def _pairs(run: Callable[..., Any], top: Sequence[str], oat: pd.DataFrame, base: RegimeConfig,
           pair_points: int, report: Progress) -> tuple[pd.DataFrame, pd.DataFrame, list]:
    """The pairwise grids of the ``top`` fields: ``(their table, each pair's span and interaction per metric,
    the values the config rejected)``."""
    pair_cfgs, owners, skipped = _pair_configs(top, oat, base, pair_points)
    pair_table = pd.DataFrame(columns=["field_a", "field_b", *field_names(), *METRICS])
    if pair_cfgs:
        done0 = len(oat)
        total = done0 + len(pair_cfgs)
        report(done0 / total, f"pairs: {len(pair_cfgs)} replays")
        two = run(pair_cfgs, progress=lambda done, _n: report((done0 + done) / total,
                                                              f"pairs: {done}/{len(pair_cfgs)}"))
        pair_table = pd.concat([pd.DataFrame(owners, columns=["field_a", "field_b"]), two.table], axis=1)
    pairs = _pair_effects(pair_table, base, oat.iloc[0]) if len(pair_table) else \
        pd.DataFrame(columns=["field_a", "field_b", "metric", "span", "interaction"])
    return pair_table, pairs, skipped


# ---- helpers -------------------------------------------------------------------------------
def _scalar(v: Any) -> Any:
    """A NumPy scalar as the Python bool or float it stands for."""
    return bool(v) if isinstance(v, (bool, np.bool_)) else float(v)


def format_value(v: Any) -> str:
    """A swept value as the report writes it: ``true``/``false``, ``%g``, a pair as ``(a, b)``."""
    if isinstance(v, tuple):
        return "(" + ", ".join(format_value(x) for x in v) + ")"
    return str(bool(v)).lower() if isinstance(v, (bool, np.bool_)) else f"{v:g}"


def _plain(v: Any) -> Any:
    """``v`` with NumPy scalars and tuples turned into JSON's types (non-finite floats as strings)."""
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, np.ndarray):
        return [_plain(x) for x in v.tolist()]
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        v = float(v)
        return v if math.isfinite(v) else str(v)
    return v


__all__ = ["SensitivityResult", "NoEffect", "sensitivity", "prepared_sensitivity", "field_values", "explain", "format_value", "POINTS",
           "PAIR_FIELDS", "PAIR_POINTS"]
