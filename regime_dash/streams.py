"""Stream: the input of a replay.

A stream is what the trainer hands the regime pipeline each step, recorded or
synthetic: the batch of rewards and position lots, and a few per-step scalars.

Fields (T steps, b accounts)
----------------------------
``rewards``            float32 [T, b]  rewards after reward_scale (PopArt's input)
``lots``               int32   [T, b]  open lots per account after the LobSim step
``kelly_analytic``     float32 [T]     full-Kelly edge p − (1−p)·L/W of the step, before
                                        the safety fraction, the clamp and any override
``cooldown``           float32 [T]     drawdown cooldown steps remaining
``session_pnl_worst``  float32 [T]     worst session pnl across accounts
``tau_action``         float32 [T]     IQN τ chosen by the policy, before the clamp
``boundary``           bool    [T]     reset_session_state runs before this step
``step``               int64   [T]     trainer step numbers, strictly increasing
``v_pred``             float32 [T, b]  optional V predictions for rl_popart_v_correct

Saved as Parquet (one row per step, list columns for the [T, b] arrays) or as
``.npz``; :func:`load` and :meth:`Stream.save` pick by suffix.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from regime_dash.errors import StreamError

#: field -> (dtype, rank); rank 2 is [T, b]
SCHEMA: dict[str, tuple[type, int]] = {
    "rewards": (np.float32, 2),
    "lots": (np.int32, 2),
    "kelly_analytic": (np.float32, 1),
    "cooldown": (np.float32, 1),
    "session_pnl_worst": (np.float32, 1),
    "tau_action": (np.float32, 1),
    "boundary": (np.bool_, 1),
    "step": (np.int64, 1),
    "v_pred": (np.float32, 2),
}
OPTIONAL = ("v_pred",)
#: Fields that may hold NaN/inf: none. A non-finite input would poison the ISV
#: state for the rest of the replay, so it is rejected where it enters.
FINITE = ("rewards", "kelly_analytic", "cooldown", "session_pnl_worst", "tau_action", "v_pred")


@dataclass(frozen=True, eq=False)
class Stream:
    """A validated replay input. Construct with :meth:`Stream.make` to get dtype coercion."""

    rewards: np.ndarray
    lots: np.ndarray
    kelly_analytic: np.ndarray
    cooldown: np.ndarray
    session_pnl_worst: np.ndarray
    tau_action: np.ndarray
    boundary: np.ndarray
    step: np.ndarray
    v_pred: np.ndarray | None = None

    def __post_init__(self):
        validate(self)

    @property
    def steps(self) -> int:
        return int(self.rewards.shape[0])

    @property
    def accounts(self) -> int:
        return int(self.rewards.shape[1])

    @classmethod
    def make(cls, *, rewards, lots, kelly_analytic=None, cooldown=None, session_pnl_worst=None,
             tau_action=None, boundary=None, step=None, v_pred=None) -> "Stream":
        """Build a stream, casting to the schema's dtypes and filling omitted per-step fields.

        Omitted ``kelly_analytic`` is 1.0 (full edge), ``cooldown``, ``session_pnl_worst``
        and ``tau_action`` are 0, ``boundary`` is all False and ``step`` is ``0..T-1``.
        Values that do not survive the cast unchanged (a fractional lot, say) raise.
        """
        rewards = _cast("rewards", rewards)
        if rewards.ndim != 2:
            raise StreamError(f"rewards must be [T, b], got shape {rewards.shape}",
                              field="rewards", value=rewards.shape)
        t = rewards.shape[0]
        defaults = {"kelly_analytic": 1.0, "cooldown": 0.0, "session_pnl_worst": 0.0,
                    "tau_action": 0.0, "boundary": False}
        given = {"kelly_analytic": kelly_analytic, "cooldown": cooldown,
                 "session_pnl_worst": session_pnl_worst, "tau_action": tau_action,
                 "boundary": boundary}
        kw: dict[str, Any] = {"rewards": rewards, "lots": _cast("lots", lots)}
        for name, value in given.items():
            kw[name] = (np.full(t, defaults[name], dtype=SCHEMA[name][0]) if value is None
                        else _cast(name, value))
        kw["step"] = np.arange(t, dtype=np.int64) if step is None else _cast("step", step)
        kw["v_pred"] = None if v_pred is None else _cast("v_pred", v_pred)
        return cls(**kw)

    def arrays(self) -> dict[str, np.ndarray]:
        """The fields as a dict, optional ones only when present."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        return {k: v for k, v in out.items() if v is not None}

    def slice(self, start: int, stop: int) -> "Stream":
        """Steps ``[start, stop)`` as a new stream."""
        return Stream(**{k: v[start:stop] for k, v in self.arrays().items()})

    def save(self, path: str | Path) -> Path:
        """Write to ``.parquet`` (a row per step) or ``.npz``, chosen by suffix."""
        path = Path(path)
        if path.suffix == ".npz":
            np.savez_compressed(path, **self.arrays())
        elif path.suffix == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            cols = {}
            for name, arr in self.arrays().items():
                if arr.ndim == 2:
                    cols[name] = pa.FixedSizeListArray.from_arrays(pa.array(arr.reshape(-1)), arr.shape[1])
                else:
                    cols[name] = pa.array(arr)
            pq.write_table(pa.table(cols), path)
        else:
            raise StreamError(f"unknown stream file type {path.suffix!r} (use .parquet or .npz)",
                              field="path", value=str(path))
        return path


def _cast(name: str, value: Any) -> np.ndarray:
    dtype = SCHEMA[name][0]
    arr = np.asarray(value)
    if arr.dtype == dtype:
        return arr
    if dtype is np.bool_:
        if arr.dtype.kind not in "biu" or not np.isin(arr, (0, 1)).all():
            raise StreamError(f"{name} must be boolean, got dtype {arr.dtype}", field=name, value=arr.dtype)
        return arr.astype(np.bool_)
    if arr.dtype.kind not in "biuf":
        raise StreamError(f"{name} must be numeric, got dtype {arr.dtype}", field=name, value=arr.dtype)
    out = arr.astype(dtype)
    if np.issubdtype(dtype, np.integer):
        back = out.astype(arr.dtype)
        mismatch = ~((back == arr) | (np.isnan(arr) if arr.dtype.kind == "f" else False))
        if arr.dtype.kind == "f" and (mismatch.any() or np.isnan(arr).any()):
            i = np.flatnonzero(mismatch | np.isnan(arr))[0] if arr.ndim == 1 else \
                np.argwhere(mismatch | np.isnan(arr))[0].tolist()
            bad = arr.reshape(-1)[np.ravel_multi_index(i, arr.shape) if arr.ndim > 1 else i]
            raise StreamError(f"{name} must hold whole numbers; at {i} it holds {float(bad)!r}",
                              field=name, value=bad)
    return out


def check_arrays(stream: Stream) -> tuple[int, int]:
    """Check every field's type, dtype, rank and shape, and that T and b are not 0; return (T, b).

    The part of :func:`validate` a device engine repeats before an upload, since a
    stream's arrays can be replaced after it was validated.
    """
    for name, (dtype, rank) in SCHEMA.items():
        arr = getattr(stream, name)
        if arr is None:
            if name in OPTIONAL:
                continue
            raise StreamError(f"{name} is missing", field=name)
        if not isinstance(arr, np.ndarray):
            raise StreamError(f"{name} must be a numpy array, got {type(arr).__name__}",
                              field=name, value=type(arr).__name__)
        if arr.dtype != dtype:
            raise StreamError(f"{name} must have dtype {np.dtype(dtype).name}, got {arr.dtype}",
                              field=name, value=str(arr.dtype))
        if arr.ndim != rank:
            raise StreamError(f"{name} must have rank {rank}, got shape {arr.shape}",
                              field=name, value=arr.shape)
    t, b = stream.rewards.shape
    if t == 0:
        raise StreamError(f"stream has T = 0 steps (rewards shape {stream.rewards.shape})", field="rewards",
                          value=stream.rewards.shape)
    if b == 0:
        raise StreamError(f"stream has b = 0 accounts (rewards shape {stream.rewards.shape})", field="rewards",
                          value=stream.rewards.shape)
    for name, (_, rank) in SCHEMA.items():
        arr = getattr(stream, name)
        if arr is None:
            continue
        want = (t, b) if rank == 2 else (t,)
        if arr.shape != want:
            raise StreamError(f"{name} has shape {arr.shape}, expected {want} (rewards is {(t, b)})",
                              field=name, value=arr.shape)
    return t, b


def validate(stream: Stream) -> None:
    """Check shapes, dtypes, finiteness and monotone steps; raise :class:`StreamError` naming the value."""
    check_arrays(stream)
    for name in FINITE:
        arr = getattr(stream, name)
        if arr is None:
            continue
        finite = np.isfinite(arr)
        if not finite.all():
            where = np.argwhere(~finite)[0]
            raise StreamError(f"{name} holds a non-finite value {float(arr[tuple(where)])!r} at step index "
                              f"{int(where[0])}" + (f", account {int(where[1])}" if arr.ndim == 2 else ""),
                              field=name, value=float(arr[tuple(where)]))
    if (stream.lots < 0).any():
        i = np.argwhere(stream.lots < 0)[0]
        raise StreamError(f"lots must be >= 0; step index {int(i[0])} account {int(i[1])} holds "
                          f"{int(stream.lots[tuple(i)])}", field="lots", value=int(stream.lots[tuple(i)]))
    if (stream.cooldown < 0).any():
        i = int(np.flatnonzero(stream.cooldown < 0)[0])
        raise StreamError(f"cooldown must be >= 0; step index {i} holds {float(stream.cooldown[i])!r}",
                          field="cooldown", value=float(stream.cooldown[i]))
    d = np.diff(stream.step)
    if (d <= 0).any():
        i = int(np.flatnonzero(d <= 0)[0])
        raise StreamError(f"step must increase strictly; step[{i}]={int(stream.step[i])} is followed by "
                          f"step[{i + 1}]={int(stream.step[i + 1])}", field="step",
                          value=int(stream.step[i + 1]))


def load(path: str | Path) -> Stream:
    """Read a stream saved by :meth:`Stream.save` (``.parquet`` or ``.npz``) and validate it."""
    path = Path(path)
    if not path.exists():
        raise StreamError(f"stream file {str(path)!r} does not exist", field="path", value=str(path))
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    elif path.suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        data = {}
        for name in table.column_names:
            col = table.column(name).combine_chunks()
            if hasattr(col, "flatten") and hasattr(col.type, "value_type"):
                flat = col.flatten().to_numpy(zero_copy_only=False)
                data[name] = flat.reshape(len(col), -1) if len(col) else flat.reshape(0, 0)
            else:
                data[name] = col.to_numpy(zero_copy_only=False)
    else:
        raise StreamError(f"unknown stream file type {path.suffix!r} (use .parquet or .npz)",
                          field="path", value=str(path))
    unknown = sorted(set(data) - set(SCHEMA))
    if unknown:
        raise StreamError(f"{path.name}: unknown stream field(s) {unknown}; expected {list(SCHEMA)}",
                          field=unknown[0], value=unknown[0])
    missing = [n for n in SCHEMA if n not in data and n not in OPTIONAL]
    if missing:
        raise StreamError(f"{path.name}: missing stream field(s) {missing}", field=missing[0])
    return Stream.make(**data)
