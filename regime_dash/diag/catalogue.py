"""Diag fields: what a cluster run emits per step, and what a replay returns.

One JSON object per step. The ``risk_stack.regime`` block is exactly the spec's
"Diag emit structure" (six groups); around it sit the kelly, positions,
session_pnl, popart and iqn blocks of docs/CONTRACTS.md. Flattened, a column is the
dotted path, e.g. ``risk_stack.regime.tail.recency``.

Every diag value is read straight from an ISV slot (the spec's drift-free
principle), except ``positions.flat_count`` (rl_regime_flat_count's output
buffer) and ``positions.b_size`` (the launch argument). So an engine only has to
snapshot the slots in :data:`SNAPSHOT_SLOTS` each step plus the flat count; this
module turns that into the frame.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

import numpy as np

if TYPE_CHECKING:  # pandas loads where a frame is built: ingest's field list needs none
    import pandas as pd

from regime_dash.core.config import FIELD_SLOTS, SWITCHES

P = "risk_stack."
R = "risk_stack.regime."

# ---- the column catalogue --------------------------------------------------------------------
# One name per diag column: the analysis, the summary and the engines read these, never a literal.
KELLY = P + "kelly.fraction"
KELLY_ANALYTIC = P + "kelly.analytic"
SAFETY_FRAC = P + "kelly.safety_frac"
COOLDOWN = P + "kelly.cooldown_remaining"
FLAT_COUNT = P + "positions.flat_count"
B_SIZE = P + "positions.b_size"
WORST = P + "session_pnl.worst"
POPART_MEAN = P + "popart.mean"
POPART_VAR = P + "popart.var"
SIGMA = P + "popart.sigma"
TAU_MIN = P + "iqn.tau_min"
TAU_MIN_EFF = P + "iqn.tau_min_effective"
TAU_ACTION = P + "iqn.tau_action"
FLAG = R + "dead_zone.flag"
DURATION = R + "dead_zone.duration"
TIMEOUT = R + "dead_zone.timeout_flag"
MAX_DURATION = R + "dead_zone.max_duration"
REMAINING = R + "transition.remaining"
STEPS_CONFIG = R + "transition.steps_config"
DECAY_STEPS_CONFIG = R + "transition.decay_steps_config"
RECENCY = R + "tail.recency"
VARIANCE = R + "tail.session_pnl_variance_ema"
SIGMA_THR = R + "tail.sigma_threshold"
COUNT = R + "tail.welford_count"
FACTOR = R + "kelly_eps_recovery.factor"
LIVE = R + "kelly_eps_recovery.live"
EPS_MIN = R + "kelly_eps_recovery.min"
EPS_MAX = R + "kelly_eps_recovery.max"
N_RECOVERY = R + "kelly_eps_recovery.n_recovery"
ENVELOPE = R + "popart_envelope.max_abs_reward_ema"
DECAY_ALPHA = R + "popart_envelope.decay_alpha"
BOOST_FACTOR = R + "iqn_tau_boost.factor"
BOOST_WINDOW = R + "iqn_tau_boost.n_window"

#: (column, source): source is an ISV slot name, or "flat_count" / "b_size".
DIAG_FIELDS: tuple[tuple[str, str], ...] = (
    (KELLY, "RL_KELLY_FRACTION_INDEX"),
    (KELLY_ANALYTIC, "RL_KELLY_ANALYTIC_INDEX"),
    (SAFETY_FRAC, "RL_KELLY_SAFETY_FRAC_INDEX"),
    (COOLDOWN, "RL_COOLDOWN_REMAINING_STEPS_INDEX"),
    (FLAT_COUNT, "flat_count"),
    (B_SIZE, "b_size"),
    (WORST, "RL_SESSION_PNL_WORST_INDEX"),
    (POPART_MEAN, "POPART_MEAN_INDEX"),
    (POPART_VAR, "POPART_VAR_INDEX"),
    (SIGMA, "POPART_SIGMA_INDEX"),
    (TAU_MIN, "RL_IQN_ACTION_TAU_MIN_INDEX"),
    (TAU_MIN_EFF, "RL_IQN_TAU_MIN_EFFECTIVE_INDEX"),
    (TAU_ACTION, "RL_IQN_TAU_ACTION_INDEX"),
    (FLAG, "RL_REGIME_DEAD_ZONE_FLAG_INDEX"),
    (DURATION, "RL_REGIME_DEAD_ZONE_DURATION_INDEX"),
    (TIMEOUT, "RL_REGIME_DEAD_ZONE_TIMEOUT_FLAG_INDEX"),
    (MAX_DURATION, "RL_REGIME_DEAD_ZONE_MAX_DURATION_INDEX"),
    (REMAINING, "RL_REGIME_TRANSITION_REMAINING_INDEX"),
    (STEPS_CONFIG, "RL_REGIME_TRANSITION_STEPS_CONFIG_INDEX"),
    (DECAY_STEPS_CONFIG, "RL_REGIME_TRANSITION_DECAY_STEPS_CONFIG_INDEX"),
    (RECENCY, "RL_REGIME_TAIL_EVENT_RECENCY_INDEX"),
    (VARIANCE, "RL_REGIME_SESSION_PNL_VARIANCE_EMA_INDEX"),
    (SIGMA_THR, "RL_REGIME_TAIL_SIGMA_THRESHOLD_INDEX"),
    (COUNT, "RL_REGIME_SESSION_PNL_VAR_COUNT_INDEX"),
    (FACTOR, "RL_REGIME_RECOVERY_FACTOR_INDEX"),
    (LIVE, "RL_KELLY_EPS_RECOVERY_LIVE_INDEX"),
    (EPS_MIN, "RL_KELLY_EPS_RECOVERY_MIN_INDEX"),
    (EPS_MAX, "RL_KELLY_EPS_RECOVERY_MAX_INDEX"),
    (N_RECOVERY, "RL_KELLY_EPS_RECOVERY_N_RECOVERY_INDEX"),
    (ENVELOPE, "RL_POPART_MAX_ABS_REWARD_EMA_INDEX"),
    (DECAY_ALPHA, "RL_POPART_MAX_DECAY_ALPHA_INDEX"),
    (BOOST_FACTOR, "RL_IQN_TAU_TAIL_BOOST_FACTOR_INDEX"),
    (BOOST_WINDOW, "RL_IQN_TAU_TAIL_BOOST_N_WINDOW_INDEX"),
)

#: The ISV slots an engine snapshots each step, in column order.
SNAPSHOT_SLOTS: tuple[str, ...] = tuple(src for _, src in DIAG_FIELDS if src.endswith("_INDEX"))
#: Column of each snapshot slot.
SNAPSHOT_COLUMNS: tuple[str, ...] = tuple(col for col, src in DIAG_FIELDS if src.endswith("_INDEX"))
META_COLUMNS = ("step", "fold", "phase", "wall_time")
#: Fields that say which rank or process wrote a line (several writers in one file), in the order they are
#: looked for: each value is a writer, and each writer a run of its own.
WRITER_FIELDS = ("rank", "global_rank", "process_index", "local_rank", "writer", "writer_id", "worker_id")

#: Switch columns a replay writes (F2, F4, F5 and the model switches of
#: :data:`regime_dash.core.config.SWITCHES`), one constant 0/1 per row. The switches are ISV config slots, so
#: a file that carries them says which features and readings ran, and the checks need not infer it from
#: the rows (as the controller modules write their ``<prefix>config.*`` constants).
SWITCH_COLUMNS: dict[str, str] = {name: P + "config." + name for name in SWITCHES}
#: Config columns a replay writes, one constant per row: the switches, then the config slots the spec's
#: diag block does not log (PopArt's α, the v9 targets, the Kelly cap), which re-derivation needs.
CONFIG_COLUMNS: dict[str, str] = {**SWITCH_COLUMNS, **{name: P + "config." + name for name in (
    "popart_alpha", "safety_frac_defensive", "safety_frac_normal", "kelly_cap")}}
#: Every config field a diag can log, by its :class:`~regime_dash.core.config.RegimeConfig` name: the config
#: slots of the spec's diag block (``risk_stack.regime.dead_zone.max_duration``, ...) where the block has
#: the field's slot, else its ``risk_stack.config.*`` column. The runs table's config columns.
LOGGED_CONFIG: dict[str, str] = {
    name: next((col for col, src in DIAG_FIELDS if src == slot), None) or CONFIG_COLUMNS[name]
    for name, slot in FIELD_SLOTS.items()
    if any(src == slot for _, src in DIAG_FIELDS) or name in CONFIG_COLUMNS}
#: Inputs a replay can log beside the slots (``replay(..., log_inputs=True)``): the stream's analytic-Kelly
#: edge and IQN τ before its clamp, and each step's batch sums of rl_popart_normalize.
INPUT_COLUMNS: dict[str, str] = {name: P + "inputs." + name for name in (
    "kelly_edge", "tau_action_input", "batch_sum", "batch_sumsq", "batch_max_abs")}
#: The controller path a replay ran, beside the config columns: 1 where ``rl_fused_controllers`` ran,
#: the only rows whose mirror switches matter (:mod:`regime_dash.engine.controllers`). A replay of the
#: single path leaves it out, so its frame is the frame every replay wrote before the fused path.
FUSED_COLUMN = P + "config.fused_controllers"

#: Columns that are integers in a frame (the rest of the diag columns are float32, like the ISV).
INT_COLUMNS = {"step": np.int64, "fold": np.int32, FLAT_COUNT: np.int32, B_SIZE: np.int32}

#: The unit of each catalogue column a chart's y axis names (a custom panel's title). The kinds: a
#: count of steps, a fraction (kelly, ε, safety), reward units (PopArt's statistics and its reward
#: envelope, after normalisation's inputs), pnl units (the session pnl and its variance's EMA, in pnl²),
#: a quantile level (IQN's τ), a count (accounts, observations), a 0/1 flag. A column not named
#: here (a trainer's own field) gets no unit rather than a guessed one.
UNITS: dict[str, str] = {
    KELLY: "fraction", KELLY_ANALYTIC: "fraction", SAFETY_FRAC: "fraction", COOLDOWN: "steps",
    FLAT_COUNT: "count", B_SIZE: "count", WORST: "pnl units",
    POPART_MEAN: "reward units", POPART_VAR: "reward units²", SIGMA: "reward units",
    TAU_MIN: "quantile level", TAU_MIN_EFF: "quantile level", TAU_ACTION: "quantile level",
    FLAG: "0/1 flag", DURATION: "steps", TIMEOUT: "0/1 flag", MAX_DURATION: "steps",
    REMAINING: "steps", STEPS_CONFIG: "steps", DECAY_STEPS_CONFIG: "steps",
    RECENCY: "steps", VARIANCE: "pnl units²", SIGMA_THR: "σ multiples", COUNT: "count",
    FACTOR: "fraction", LIVE: "fraction", EPS_MIN: "fraction", EPS_MAX: "fraction", N_RECOVERY: "steps",
    ENVELOPE: "reward units", DECAY_ALPHA: "fraction", BOOST_FACTOR: "multiple", BOOST_WINDOW: "steps",
    **{col: "0/1 flag" for col in SWITCH_COLUMNS.values()}, FUSED_COLUMN: "0/1 flag",
    "step": "steps", "fold": "count", "wall_time": "unix seconds",
}


def fold_and_phase(boundary: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fold number and phase of each step, derived from the boundary markers.

    Model: a run alternates train and eval segments at each boundary, starting
    with train (walk-forward: fold k trains, crosses into its eval, then fold
    k+1 trains). Segment ``s`` is ``train`` when even, ``eval`` when odd, and its
    fold is ``s // 2``.
    """
    seg = _segments(boundary)
    phase = np.where(seg % 2 == 0, "train", "eval").astype(object)
    return (seg // 2).astype(np.int32), phase


def _segments(boundary: np.ndarray) -> np.ndarray:
    """int32 [T] (int64 past 2**31 - 1 steps): the segment of each step (:func:`fold_and_phase`'s
    model), never negative. A count of steps fits int32 below that, and its running sum is
    several times faster than int64's."""
    flags = np.asarray(boundary, dtype=bool)
    seg = np.cumsum(flags, dtype=np.int32 if len(flags) < 2**31 else np.int64)
    if len(seg) and boundary[0]:
        seg -= 1  # a boundary at the first step opens segment 0, it does not end one
    return seg


def _phase_column(seg: np.ndarray):
    """The ``phase`` column of :func:`fold_and_phase` as pandas' own string array, taken from the two
    words by index: the column pandas would make of the words, with no [T] array of Python strings."""
    import pandas as pd

    return pd.Series(["train", "eval"]).array.take((seg & 1).astype(np.int8))  # the parity of each segment


def frame_from_snapshot(snap: np.ndarray, flat_count: np.ndarray, b_size: int, step: np.ndarray,
                        boundary: np.ndarray, config: Any = None, fused: bool = False) -> pd.DataFrame:
    """Build a replay frame from an engine's per-step snapshot.

    Parameters
    ----------
    snap
        float32 [T, len(SNAPSHOT_SLOTS)], the slot values after each step.
    flat_count
        int32 [T], rl_regime_flat_count's output each step.
    b_size
        Accounts in the batch.
    step, boundary
        From the replayed stream.
    config
        The replay's :class:`~regime_dash.core.config.RegimeConfig` (or a mapping holding its switches):
        its switches (the mirror switches among them) and config slots become the
        :data:`CONFIG_COLUMNS` (left out when ``None``).
    fused
        Whether the fused controller path ran: then the frame has the :data:`FUSED_COLUMN` (all 1).
    """
    seg = _segments(boundary)
    counts = np.empty((2, len(step)), dtype=np.int32)  # fold and b_size: the rows of one block
    np.right_shift(seg, 1, out=counts[0], casting="same_kind" if seg.dtype == np.int32 else "unsafe")
    counts[1].fill(b_size)
    cols: dict[str, Any] = {"step": np.asarray(step, dtype=np.int64), "fold": counts[0], "phase": _phase_column(seg)}
    for col, values in zip(SNAPSHOT_COLUMNS, _columns_of(snap)):
        cols[col] = values
    cols[FLAT_COUNT] = np.asarray(flat_count, dtype=np.int32)
    cols[B_SIZE] = counts[1]
    ordered = ["step", "fold", "phase"] + [c for c, _ in DIAG_FIELDS]
    constant = {}
    if config is not None:
        for name, col in CONFIG_COLUMNS.items():
            if isinstance(config, Mapping) and name not in config:
                continue
            value = config[name] if isinstance(config, Mapping) else getattr(config, name)
            constant[col] = config_value(name, value)
    if fused:
        constant[FUSED_COLUMN] = np.float32(1.0)
    cols.update(_constant_columns(constant, len(step)))
    ordered += list(constant)
    import pandas as pd

    # each column its own block, no copy: a 1,000,000-step frame in milliseconds, not the
    # seconds of pandas gathering fifty columns into one 2-D block
    return pd.DataFrame({c: cols[c] for c in ordered}, copy=False)


def _constant_columns(values: Mapping[str, np.float32], rows: int) -> dict[str, np.ndarray]:
    """``{column: float32 [rows] of its value}``, the rows of one block: a 1,000,000-step frame's
    dozen constant columns are 48 MB, which NumPy asks the kernel to back with huge pages, where a
    4 MB column a time takes a page fault every 4 KB (several times the time to fill them)."""
    block = np.empty((len(values), rows), dtype=np.float32)
    out = {}
    for row, (col, value) in zip(block, values.items()):
        row.fill(value)
        out[col] = row
    return out


#: Rows of the snapshot transposed at a time: a [rows, n] tile and its [n, rows] image stay in cache.
_TILE_ROWS = 2048


def _columns_of(snap: np.ndarray) -> np.ndarray:
    """float32 [n, T]: the snapshot's columns, each contiguous (a tiled transpose: a plain
    ``snap.T.copy()`` strides through all of ``snap`` for every column, several times slower); a
    column-major ``snap``'s own columns, uncopied."""
    snap = np.asarray(snap)
    if snap.dtype == np.float32 and snap.flags.f_contiguous and not snap.flags.c_contiguous:
        return snap.T  # column-major already (the CPU fast scan's, made for the frame): its columns as they are
    out = np.empty((snap.shape[1], snap.shape[0]), dtype=np.float32)
    for a in range(0, snap.shape[0], _TILE_ROWS):
        out[:, a:a + _TILE_ROWS] = snap[a:a + _TILE_ROWS].T
    return out


def config_value(name: str, value: Any) -> np.float32:
    """The float32 a config column holds for ``value``: 0/1 for a switch, the number otherwise."""
    return np.float32(bool(value)) if name in SWITCH_COLUMNS else np.float32(value)


def coerce(frame: pd.DataFrame) -> pd.DataFrame:
    """Cast known diag columns to the dtypes a replay frame has (float32 slots, int counters).

    Columns this module does not know are left as they are.
    """
    import pandas as pd

    out = frame.copy()
    known = set(SNAPSHOT_COLUMNS) | set(CONFIG_COLUMNS.values()) | set(INPUT_COLUMNS.values()) | {FUSED_COLUMN}
    for col in out.columns:
        if col in INT_COLUMNS and out[col].notna().all():
            out[col] = out[col].astype(INT_COLUMNS[col])
        elif col in known:
            out[col] = pd.to_numeric(out[col], errors="coerce").astype(np.float32)
    return out


def flatten(obj: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}``."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    """``{"a.b": 1}`` → ``{"a": {"b": 1}}``; the inverse of :func:`flatten`."""
    out: dict[str, Any] = {}
    for name, value in flat.items():
        node = out
        *parents, leaf = name.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


def write_jsonl(frame: pd.DataFrame, path: str | Path, *,
                progress: Callable[[int, int], None] | None = None) -> Path:
    """Write ``frame`` as a diag.jsonl: one nested object per step, the spec's structure.

    The nesting is :func:`unflatten`'s of the dotted column names. Floats are written as
    the exact float64 value of the float32 slot, so :func:`read_jsonl` restores them bit
    for bit; NaN and ±inf as Python's json writes them (``NaN``, ``Infinity``); a
    ``None``, or a NaN in a :data:`META_COLUMNS` column, leaves the key out of that row.
    The file is built column by column a chunk of rows at a time
    (:mod:`regime_dash.diag.jsonl`) and renamed into place once complete;
    ``progress(rows_done, rows)`` follows the chunks.
    """
    from regime_dash.diag import jsonl as diag_jsonl

    return diag_jsonl.write(frame, path, skip_nan=META_COLUMNS, progress=progress)


def read_jsonl(path: str | Path) -> pd.DataFrame:
    """Read a diag.jsonl written by :func:`write_jsonl` back into a frame.

    This is the strict reader for our own files: a malformed line raises
    :class:`~regime_dash.errors.ParseError` with its line number. Cluster files
    go through :mod:`regime_dash.ingest`, which quarantines bad lines instead.
    """
    from regime_dash.errors import ParseError

    rows = []
    with open(path, "r", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ParseError(f"not JSON ({exc.msg})", line=lineno, path=str(path)) from None
            if not isinstance(obj, dict):
                raise ParseError(f"JSON {type(obj).__name__}, not an object", line=lineno, path=str(path))
            rows.append(flatten(obj))
    import pandas as pd

    return coerce(pd.DataFrame(rows))
