"""The alias table: how the dashboard finds a diag signal under another name.

Real diag files carry more fields than docs/CONTRACTS.md lists, lack some, and rename
some (an older trainer still writes ``eval_warmup.remaining`` for what F3
renamed ``regime.transition.remaining``; a hand-written logger writes
``kelly_f``). Every analysis and figure works on the *canonical* dotted column
names of :mod:`regime_dash.diag.catalogue`; :func:`canonical_frame` renames a frame's
columns to them through :data:`ALIASES`, which a user extends with their own
mapping (``{canonical: [alternative, ...]}``, e.g. from a JSON file read with
:func:`parse_alias_json`).
"""
from __future__ import annotations

import json
from typing import Iterable, Mapping

import pandas as pd

from regime_dash.diag import catalogue as diag
from regime_dash.errors import ValidationError

#: Canonical columns that are not diag slots but that checks can use when a file has them.
#: Model: the spec's success criterion 2 ("eval pnl >= -$507k") needs an eval pnl the
#: DESIGN's diag does not carry; ``eval.pnl`` is the name regime-dash looks for.
EXTRA_CANONICAL = ("eval.pnl",)


def _generated() -> dict[str, list[str]]:
    """Alternatives every diag column gets: without ``risk_stack.``, its ISV slot name,
    and its last two path parts joined by ``_`` (``dead_zone_flag``)."""
    out: dict[str, list[str]] = {}
    for col, source in diag.DIAG_FIELDS:
        alts = [col[len(diag.P):]]
        if source.endswith("_INDEX"):
            alts.append(source)
        parts = col.split(".")
        alts.append("_".join(parts[-2:]))
        out[col] = alts
    # what a replay adds: its config, its inputs and the controller path
    for col in (*diag.CONFIG_COLUMNS.values(), *diag.INPUT_COLUMNS.values(), diag.FUSED_COLUMN):
        out[col] = [col[len(diag.P):]]
    return out


#: Alternatives known from trainers and loggers, tried after the user's own and
#: before the generated ones.
_KNOWN: dict[str, list[str]] = {
    "step": ["global_step", "train_step", "iteration", "iter"],
    "fold": ["fold_idx", "fold_index", "walk_forward_fold"],
    "phase": ["mode", "split", "stage"],
    "wall_time": ["time", "timestamp", "wall_clock", "unix_time"],
    diag.P + "kelly.fraction": ["kelly_f", "risk_stack.kelly.kelly_f", "risk_stack.kelly.f",
                                "kelly_fraction"],
    diag.P + "kelly.analytic": ["kelly_analytic", "risk_stack.kelly.analytic_f"],
    diag.P + "kelly.safety_frac": ["kelly_safety_frac", "risk_stack.kelly.safety"],
    diag.P + "kelly.cooldown_remaining": ["cooldown_remaining", "risk_stack.cooldown.remaining",
                                          "risk_stack.cmdp.cooldown_remaining"],
    diag.P + "positions.flat_count": ["flat_count", "risk_stack.regime.flat_count"],
    diag.P + "positions.b_size": ["b_size", "batch_size", "n_accounts", "risk_stack.b_size"],
    diag.P + "session_pnl.worst": ["session_pnl_worst", "risk_stack.session_pnl_worst",
                                   "risk_stack.cmdp.session_pnl_worst"],
    diag.P + "popart.sigma": ["popart_sigma", "risk_stack.popart.sigma_effective",
                              "popart.sigma_effective"],
    diag.P + "popart.mean": ["popart_mean", "popart_mu"],
    diag.P + "popart.var": ["popart_var", "popart.variance", "risk_stack.popart.variance"],
    diag.R + "transition.remaining": ["risk_stack.eval_warmup.remaining", "eval_warmup.remaining",
                                      "eval_warmup_remaining", "RL_EVAL_WARMUP_REMAINING_INDEX"],
    diag.R + "transition.steps_config": ["risk_stack.eval_warmup.steps_config",
                                         "eval_warmup.steps_config",
                                         "RL_EVAL_WARMUP_STEPS_CONFIG_INDEX"],
    diag.R + "transition.decay_steps_config": ["risk_stack.eval_warmup.decay_steps_config",
                                               "eval_warmup.decay_steps_config",
                                               "RL_EVAL_WARMUP_DECAY_STEPS_CONFIG_INDEX"],
    "eval.pnl": ["eval_pnl", "metrics.eval_pnl", "eval.total_pnl", "eval_total_pnl"],
}


def _builtin() -> dict[str, tuple[str, ...]]:
    gen = _generated()
    out: dict[str, tuple[str, ...]] = {}
    for canonical in [*diag.META_COLUMNS, *gen, *EXTRA_CANONICAL]:
        seen: list[str] = []
        for alt in [*_KNOWN.get(canonical, []), *gen.get(canonical, [])]:
            if alt != canonical and alt not in seen:
                seen.append(alt)
        out[canonical] = tuple(seen)
    return out


#: canonical dotted column -> alternative names, most specific first.
ALIASES: dict[str, tuple[str, ...]] = _builtin()
#: Every canonical column the table knows.
CANONICAL: tuple[str, ...] = tuple(ALIASES)


def normalize_user_aliases(user: Mapping[str, str | Iterable[str]] | None) -> dict[str, tuple[str, ...]]:
    """Check a user alias mapping and give it the table's shape.

    Parameters
    ----------
    user
        ``{canonical: alternative}`` or ``{canonical: [alternative, ...]}``. The
        canonical name may be any column (not only the known ones), so a user can
        also name new signals.

    Raises
    ------
    ValidationError
        When a key or an alternative is not a non-empty string.
    """
    out: dict[str, tuple[str, ...]] = {}
    for canonical, alts in (user or {}).items():
        if not isinstance(canonical, str) or not canonical:
            raise ValidationError(f"alias key {canonical!r} is not a column name", field="aliases",
                                  value=canonical)
        names = [alts] if isinstance(alts, str) else list(alts) if isinstance(alts, Iterable) else None
        if names is None or not all(isinstance(a, str) and a for a in names):
            raise ValidationError(f"aliases of {canonical!r} must be a name or a list of names, got {alts!r}",
                                  field=canonical, value=alts)
        out[canonical] = tuple(names)
    return out


def merged_table(user: Mapping[str, str | Iterable[str]] | None = None) -> dict[str, tuple[str, ...]]:
    """The built-in table with the user's alternatives tried first."""
    table = dict(ALIASES)
    for canonical, alts in normalize_user_aliases(user).items():
        table[canonical] = alts + tuple(a for a in table.get(canonical, ()) if a not in alts)
    return table


def resolve_columns(columns: Iterable[str],
                    user: Mapping[str, str | Iterable[str]] | None = None) -> dict[str, str]:
    """``{present column: canonical name}`` for the columns that an alias renames.

    A canonical column already present is never replaced; among several
    alternatives present for one canonical name, the first in the table wins and
    the others stay as they are.
    """
    present = list(columns)
    have = set(present)
    renames: dict[str, str] = {}
    for canonical, alts in merged_table(user).items():
        if canonical in have:
            continue
        for alt in alts:
            if alt in have and alt not in renames:
                renames[alt] = canonical
                break
    return renames


def canonical_frame(frame: pd.DataFrame,
                    user: Mapping[str, str | Iterable[str]] | None = None) -> pd.DataFrame:
    """A copy of ``frame`` with its columns renamed to canonical names.

    Columns no alias matches are kept under their own names. The renames applied
    are recorded in ``attrs["aliases_applied"]`` (``{old: canonical}``).
    """
    renames = resolve_columns(frame.columns, user)
    out = frame.rename(columns=renames)
    out.attrs = dict(frame.attrs)
    out.attrs["aliases_applied"] = dict(renames)
    return out


def parse_alias_json(text: str) -> dict[str, tuple[str, ...]]:
    """Read a user alias file: a JSON object ``{canonical: name | [names]}``.

    Raises
    ------
    ValidationError
        When the text is not JSON, not an object, or holds a bad entry.
    """
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"alias file is not JSON ({exc.msg} at line {exc.lineno})",
                              field="aliases", value=text[:80]) from None
    if not isinstance(obj, dict):
        raise ValidationError(f"alias file must hold a JSON object, got {type(obj).__name__}",
                              field="aliases", value=type(obj).__name__)
    return normalize_user_aliases(obj)
