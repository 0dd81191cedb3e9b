"""Many runs at once: aligned on step, grouped by a tag or a config field, and summed up per group.

Seeds and folds of one config are runs of different lengths that should read as one line with
a spread. :func:`align` puts N runs' values of one column on the union of their steps (NaN
where a run lacks a step); :func:`group_stats` gives, at each step, a group's mean and its band
(min-max, or ±1 σ) over the runs that have a finite value there, and how many that is: a step
only some runs reached is summed over those. :func:`group_options` and :func:`group_runs` say
which runs go together, from the runs table's rows (:mod:`regime_dash.runs.run_table`: ``tags`` and
the logged ``config``).

σ is the population standard deviation (``ddof=0``): a group of one run, or a step one run of
the group reached, has a band of zero width around that run rather than none.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from regime_dash.analysis.diff import steps_of
from regime_dash.errors import ValidationError

__all__ = ["BANDS", "NO_GROUP", "Aligned", "GroupStats", "align", "group_options", "group_runs", "group_stats",
           "grouped_stats"]

#: The band kinds: ``minmax`` (the group's lowest and highest run) or ``sigma`` (mean ± 1 σ).
BANDS = ("minmax", "sigma")
#: The "group by" value that groups nothing (each run drawn as itself).
NO_GROUP = ""
#: Tag separators of a ``key=value`` (or ``key:value``) tag: grouping by ``tag:key`` puts runs of one value together.
_TAG_SEPARATORS = ("=", ":")


@dataclass(frozen=True)
class Aligned:
    """N runs' values of one column on the union of their steps.

    ``steps`` int64 [S], sorted; ``values`` float64 [N, S], NaN where a run has no row at that
    step or no value there; ``labels`` the runs, in the order of ``values``' rows.
    """

    labels: tuple[str, ...]
    steps: np.ndarray
    values: np.ndarray


def _numbers(frame: pd.DataFrame, column: str) -> np.ndarray:
    """``frame[column]`` as float64 (booleans as 0/1, text as NaN); all NaN when the frame lacks it."""
    if column not in frame.columns:
        return np.full(len(frame), np.nan)
    col = frame[column]
    if pd.api.types.is_bool_dtype(col.dtype):
        col = col.astype("float64")
    return pd.to_numeric(col, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


def align(frames: Mapping[str, pd.DataFrame], column: str,
          transform: Callable[[np.ndarray], np.ndarray] | None = None) -> Aligned:
    """Each run's ``column`` at every step any of the runs has.

    ``transform`` (a smoothing) is applied to each run's values in step order, before they
    are placed. A run without the column contributes NaN everywhere.

    Raises
    ------
    ValidationError
        A run with no ``step``, a step that is not a number, or a repeated step (naming the run).
    """
    labels = tuple(frames)
    steps = [steps_of(frames[label], label) for label in labels]
    union = np.unique(np.concatenate(steps)) if steps else np.zeros(0, dtype=np.int64)
    values = np.full((len(labels), len(union)), np.nan)
    for row, (label, run_steps) in enumerate(zip(labels, steps)):
        order = np.argsort(run_steps, kind="stable")
        y = _numbers(frames[label], column)[order]
        if transform is not None and len(y):
            y = np.asarray(transform(y), dtype=np.float64)
        values[row, np.searchsorted(union, run_steps[order])] = y
    return Aligned(labels, union.astype(np.int64), values)


@dataclass(frozen=True)
class GroupStats:
    """One group's statistic of one column at each step (arrays of ``len(steps)``).

    ``mean``, and the band ``lo``..``hi`` (``band``: ``minmax`` or ``sigma``), over the
    ``count`` runs of the group with a finite value at that step; NaN where ``count`` is 0.
    """

    steps: np.ndarray
    mean: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    count: np.ndarray
    band: str


def group_stats(aligned: Aligned, band: str = "minmax") -> GroupStats:
    """The mean and band of all runs of ``aligned`` at each step (NaN and ±Inf left out, as a
    missing step is); steps where no run has a finite value are dropped."""
    if band not in BANDS:
        raise ValidationError(f"band {band!r} is not one of {list(BANDS)}", field="band", value=band)
    v = aligned.values
    finite = np.isfinite(v)
    count = finite.sum(axis=0)
    keep = count > 0
    v, finite, count = v[:, keep], finite[:, keep], count[keep]
    mean = np.where(finite, v, 0.0).sum(axis=0) / np.maximum(count, 1)
    if band == "minmax":
        lo = np.where(finite, v, np.inf).min(axis=0, initial=np.inf)
        hi = np.where(finite, v, -np.inf).max(axis=0, initial=-np.inf)
    else:
        sigma = np.sqrt(np.where(finite, (v - mean) ** 2, 0.0).sum(axis=0) / np.maximum(count, 1))
        lo, hi = mean - sigma, mean + sigma
    return GroupStats(aligned.steps[keep], mean, lo, hi, count.astype(np.int64), band)


def grouped_stats(frames: Mapping[str, pd.DataFrame], groups: Mapping[str, str], column: str,
                  band: str = "minmax",
                  transform: Callable[[np.ndarray], np.ndarray] | None = None) -> dict[str, GroupStats]:
    """``{group: GroupStats}`` of ``column``: each group's runs (``groups`` maps a run's label to its
    group, in the groups' order; a run of ``frames`` it does not name is left out) aligned on their
    own steps."""
    members: dict[str, list[str]] = {}
    for label, group in groups.items():
        if label in frames:
            members.setdefault(group, []).append(label)
    return {g: group_stats(align({label: frames[label] for label in labels}, column, transform), band)
            for g, labels in members.items()}


# ---- which runs go together -----------------------------------------------------------------
def _tag_split(tag: str) -> tuple[str, str] | None:
    """``key=value`` or ``key:value`` as ``(key, value)``; None for a plain tag."""
    for sep in _TAG_SEPARATORS:
        key, found, value = tag.partition(sep)
        if found and key and value:
            return key, value
    return None


def group_options(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The ways ``rows`` (runs table rows: ``tags``, ``config``) can be grouped: ``tags`` (runs with
    the same tags), ``tag:KEY`` for each key of a ``KEY=VALUE`` tag, ``config:FIELD`` for each logged
    config field; only those some row has."""
    tag_keys = sorted({kv[0] for r in rows for t in (r.get("tags") or []) if (kv := _tag_split(t))})
    fields = sorted({f for r in rows for f in (r.get("config") or {})})
    has_tags = any(r.get("tags") for r in rows)
    return (["tags"] if has_tags else []) + [f"tag:{k}" for k in tag_keys] + [f"config:{f}" for f in fields]


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _group_of(row: Mapping[str, Any], by: str) -> tuple[tuple, str]:
    """``(sort key, group name)`` of one row under ``by`` (missing values sort last)."""
    tags = list(row.get("tags") or [])
    if by == "tags":
        return ((1,), "(no tags)") if not tags else ((0, tuple(sorted(tags))), ", ".join(sorted(tags)))
    kind, _, name = by.partition(":")
    if kind == "tag" and name:
        values = sorted(kv[1] for t in tags if (kv := _tag_split(t)) and kv[0] == name)
        return ((0, tuple(values)), f"{name}={'/'.join(values)}") if values else ((1,), f"(no {name})")
    if kind == "config" and name:
        value = (row.get("config") or {}).get(name)
        if value is None:
            return (1,), f"(no {name})"
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        return (0, 0, float(value)) if number else (0, 1, str(value)), f"{name}={_value_text(value)}"
    raise ValidationError(f"group by {by!r} is not 'tags', 'tag:KEY' or 'config:FIELD'", field="group_by",
                          value=by)


def group_runs(rows: Sequence[Mapping[str, Any]], by: str) -> dict[str, str]:
    """``{run_id: group name}`` of ``rows`` grouped ``by`` one of :func:`group_options`' ways, in
    the groups' order (by value; runs without one last, as ``(no KEY)``)."""
    keyed = [(_group_of(r, by), i, r["run_id"]) for i, r in enumerate(rows)]
    keyed.sort(key=lambda t: (t[0][0], t[1]))
    return {rid: name for (_, name), _, rid in keyed}
