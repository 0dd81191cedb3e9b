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

:data:`SCHEMA` declares these fields as :class:`ArraySpec` records, the one
schema type every stream uses (the controller modules' streams too, through
:class:`regime_dash.modules.base.ModuleStream`): :func:`arrays_of` casts and
fills, :func:`problems` lists what is wrong, :func:`check_schema` raises the
first problem or, with ``lazy=True``, all of them at once as one
:class:`~regime_dash.errors.StreamErrors` (pandera's lazy validation).
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np

from regime_dash.errors import StreamError, StreamErrors


# ---- the schema of one field -------------------------------------------------------------
@dataclass(frozen=True)
class ArraySpec:
    """Schema of one stream field; every stream type (the core's, each module's) is a dict of them.

    Attributes
    ----------
    dtype
        Exact NumPy dtype of the field.
    rank
        1 for per-step ``[T]``, 2 for ``[T, n]``. Every rank-2 field of a stream has the same n.
    doc
        What the field holds.
    default
        Fill value of an omitted rank-1 field; ``None`` makes the field required.
    optional
        The field may be ``None`` (absent).
    lo, hi
        Closed range every value must lie in (``None``: unbounded).
    axis
        What the second axis of a rank-2 field counts (for messages): ``account``, ``column``.

    Float fields must be finite everywhere (a NaN or inf would poison the
    controller state for the rest of the replay), and a field named ``step``
    must increase strictly.
    """

    dtype: Any
    rank: int
    doc: str
    default: float | None = None
    optional: bool = False
    lo: float | None = None
    hi: float | None = None
    axis: str = "column"


#: The core stream's fields, in order (T steps, b accounts).
SCHEMA: dict[str, ArraySpec] = {
    "rewards": ArraySpec(np.float32, 2, "rewards after reward_scale (PopArt's input)", axis="account"),
    "lots": ArraySpec(np.int32, 2, "open lots per account after the LobSim step", lo=0, axis="account"),
    "kelly_analytic": ArraySpec(np.float32, 1, "full-Kelly edge p − (1−p)·L/W before the safety fraction, "
                                "the clamp and any override", default=1.0),
    "cooldown": ArraySpec(np.float32, 1, "drawdown cooldown steps remaining", default=0.0, lo=0),
    "session_pnl_worst": ArraySpec(np.float32, 1, "worst session pnl across accounts", default=0.0),
    "tau_action": ArraySpec(np.float32, 1, "IQN τ chosen by the policy, before the clamp", default=0.0),
    "boundary": ArraySpec(np.bool_, 1, "reset_session_state runs before this step", default=False),
    "step": ArraySpec(np.int64, 1, "trainer step numbers, strictly increasing"),
    "v_pred": ArraySpec(np.float32, 2, "V predictions for rl_popart_v_correct", optional=True, axis="account"),
}
OPTIONAL = tuple(name for name, spec in SCHEMA.items() if spec.optional)
#: The per-step fields: all a fast replay given the stream's phase 1 reads of it (besides b).
STEP_FIELDS = tuple(name for name, spec in SCHEMA.items() if spec.rank == 1)
#: The [T, b] fields.
BATCH_FIELDS = tuple(name for name, spec in SCHEMA.items() if spec.rank == 2)


def _where(index: Any, spec: ArraySpec, first: int = 0) -> str:
    """``step index i`` (and ``, <axis> j`` for a rank-2 field) of an np.argwhere row; ``first`` is the
    step index of the array's row 0 (a block of a longer stream)."""
    i = [int(k) for k in np.atleast_1d(index)]
    return f"step index {i[0] + first}" + (f", {spec.axis} {i[1]}" if len(i) > 1 else "")


def cast(name: str, value: Any, spec: ArraySpec, first: int = 0) -> np.ndarray:
    """``value`` as an array of ``spec.dtype`` (as it is if it has it); raise :class:`StreamError` if it does not fit.

    Booleans accept 0/1 integers; integers accept floats that hold whole numbers.
    Values that do not survive the cast unchanged (a fractional lot, say) raise; ``first`` is
    the step index of ``value``'s row 0, for the message.
    """
    dtype = np.dtype(spec.dtype)
    arr = np.asarray(value)
    if arr.dtype == dtype:
        return arr
    if dtype.kind == "b":
        if arr.dtype.kind not in "biu" or not np.isin(arr, (0, 1)).all():
            raise StreamError(f"{name} must be boolean, got dtype {arr.dtype}", field=name, value=str(arr.dtype))
        return arr.astype(np.bool_)
    if arr.dtype.kind not in "biuf":
        raise StreamError(f"{name} must be numeric, got dtype {arr.dtype}", field=name, value=str(arr.dtype))
    with np.errstate(invalid="ignore"):
        out = arr.astype(dtype)
        same = True if dtype.kind == "f" else out.astype(np.float64) == arr.astype(np.float64)
    if not np.all(same):
        i = np.argwhere(~same)[0] if arr.ndim else ()
        bad = arr[tuple(i)].item()
        raise StreamError(f"{name} must hold whole numbers; at {_where(i, spec, first) if arr.ndim else 'the value'} "
                          f"it holds {bad!r}", field=name, value=bad)
    return out


def arrays_of(schema: Mapping[str, ArraySpec], values: Mapping[str, Any], *,
              lazy: bool = False) -> tuple[dict[str, np.ndarray | None], list[StreamError]]:
    """The fields of a stream built from ``values``: each cast to its dtype, omitted ones filled.

    T is the first given array's length; an omitted rank-1 field with a default
    is that default T times, an omitted ``step`` is ``0..T-1``, any other omitted
    field is ``None``. Returns the fields and, when ``lazy``, the cast errors
    (whose fields are left out); otherwise the first cast error raises.
    """
    unknown = sorted(set(values) - set(schema))
    if unknown:
        raise StreamError(f"unknown stream field(s) {unknown}; expected {list(schema)}",
                          field=unknown[0], value=unknown[0])
    t = next((np.shape(values[n])[0] for n in schema if values.get(n) is not None and np.ndim(values[n]) >= 1),
             None)
    kw: dict[str, np.ndarray | None] = {}
    errors: list[StreamError] = []
    for name, spec in schema.items():
        v = values.get(name)
        if v is not None:
            try:
                kw[name] = cast(name, v, spec)
            except StreamError as exc:
                if not lazy:
                    raise
                errors.append(exc)
        elif name == "step" and t is not None:
            kw[name] = np.arange(t, dtype=np.int64)
        elif spec.default is not None and spec.rank == 1 and t is not None:
            kw[name] = np.full(t, spec.default, dtype=spec.dtype)
        else:
            kw[name] = None
    return kw, errors


def problems(arrays: Mapping[str, Any], schema: Mapping[str, ArraySpec], *,
             values: bool = True) -> Iterator[StreamError]:
    """Every way ``arrays`` breaks ``schema``, in field order, as :class:`StreamError` (not raised).

    Per field: present (unless optional), a numpy array of the exact dtype and
    rank; T steps as the first field has and, for rank 2, as many columns as the
    first rank-2 field, neither 0. With ``values``, also finite floats, values
    inside ``[lo, hi]`` and a strictly increasing ``step``. A field whose type,
    dtype or rank is wrong yields that one problem only.
    """
    t = width = None
    t_ref = w_ref = ""
    for name, spec in schema.items():
        arr = arrays.get(name)
        if arr is None:
            if not spec.optional:
                yield StreamError(f"{name} is missing", field=name)
            continue
        if not isinstance(arr, np.ndarray):
            yield StreamError(f"{name} must be a numpy array, got {type(arr).__name__}",
                              field=name, value=type(arr).__name__)
            continue
        if arr.dtype != np.dtype(spec.dtype):
            yield StreamError(f"{name} must have dtype {np.dtype(spec.dtype).name}, got {arr.dtype}",
                              field=name, value=str(arr.dtype))
            continue
        if arr.ndim != spec.rank:
            yield StreamError(f"{name} must have rank {spec.rank}, got shape {arr.shape}",
                              field=name, value=arr.shape)
            continue
        if t is None:
            t, t_ref = arr.shape[0], name
            if t == 0:
                yield StreamError(f"stream has T = 0 steps ({name} shape {arr.shape})", field=name,
                                  value=arr.shape)
        if spec.rank == 2 and width is None:
            width, w_ref = arr.shape[1], name
            if width == 0:
                yield StreamError(f"stream has 0 {spec.axis}s ({name} shape {arr.shape})", field=name,
                                  value=arr.shape)
        want = (t, width) if spec.rank == 2 else (t,)
        if arr.shape != want:
            yield StreamError(f"{name} has shape {arr.shape}, expected {want} ({t_ref} has {t} steps"
                              + (f", {w_ref} has {width} {spec.axis}s" if spec.rank == 2 else "") + ")",
                              field=name, value=arr.shape)
        if values:
            yield from _value_problems(name, arr, spec)


def _value_problems(name: str, arr: np.ndarray, spec: ArraySpec, first: int = 0) -> Iterator[StreamError]:
    if arr.size == 0:
        return
    # a min and a max read the array once with no temporaries (a NaN or an inf carries into them);
    # the masks that find where a bad value sits are built only when there is one
    low, high = arr.min(), arr.max()
    if arr.dtype.kind == "f" and not (np.isfinite(low) and np.isfinite(high)):
        bad = ~np.isfinite(arr)
        if bad.any():
            i = np.argwhere(bad)[0]
            yield StreamError(f"{name} holds a non-finite value {float(arr[tuple(i)])!r} at "
                              f"{_where(i, spec, first)}",
                              field=name, value=float(arr[tuple(i)]))
    if (spec.lo is not None and low < spec.lo) or (spec.hi is not None and high > spec.hi):
        out = np.zeros(arr.shape, dtype=bool)
        if spec.lo is not None:
            out |= arr < spec.lo
        if spec.hi is not None:
            out |= arr > spec.hi
        if out.any():
            i = np.argwhere(out)[0]
            rule = (f"lie in [{spec.lo}, {spec.hi}]" if spec.lo is not None and spec.hi is not None
                    else f"be >= {spec.lo}" if spec.lo is not None else f"be <= {spec.hi}")
            bad = arr[tuple(i)].item()
            yield StreamError(f"{name} must {rule}; at {_where(i, spec, first)} it holds {bad!r}", field=name,
                              value=bad)
    if name == "step" and arr.ndim == 1 and len(arr) > 1:
        d = np.diff(arr)
        if (d <= 0).any():
            i = int(np.flatnonzero(d <= 0)[0])
            yield StreamError(f"step must increase strictly; step[{i}]={int(arr[i])} is followed by "
                              f"step[{i + 1}]={int(arr[i + 1])}", field="step", value=int(arr[i + 1]))


def check_schema(arrays: Mapping[str, Any], schema: Mapping[str, ArraySpec], *, lazy: bool = False,
                 values: bool = True, found: list[StreamError] | None = None) -> None:
    """Raise the first of :func:`problems`, or with ``lazy`` all of them (and ``found``) at once.

    Raises
    ------
    StreamError
        The first problem (``lazy=False``).
    StreamErrors
        Every problem (``lazy=True``), pandera-style: ``.errors`` lists them,
        each naming its field and value.
    """
    found = list(found or [])
    if not lazy:
        if found:
            raise found[0]
        first = next(problems(arrays, schema, values=values), None)
        if first is not None:
            raise first
        return
    skip = {e.field for e in found}
    found += problems({k: v for k, v in arrays.items() if k not in skip},
                      {k: s for k, s in schema.items() if k not in skip}, values=values)
    if found:
        raise StreamErrors(found)


# ---- the core stream ---------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class StepFields:
    """The per-step fields (:data:`STEP_FIELDS`, in the schema's order) of a :class:`Stream` and of a
    :class:`StepStream`: declared once, for both."""

    kelly_analytic: np.ndarray
    cooldown: np.ndarray
    session_pnl_worst: np.ndarray
    tau_action: np.ndarray
    boundary: np.ndarray
    step: np.ndarray


@dataclass(frozen=True, eq=False)
class _BatchArrays:
    # a dataclass takes its bases' fields last base first: as the last base of Stream, these come
    # before the per-step fields, so Stream's fields (and its constructor's) keep the schema's order
    rewards: np.ndarray
    lots: np.ndarray


@dataclass(frozen=True, eq=False)
class Stream(StepFields, _BatchArrays):
    """A validated replay input. Construct with :meth:`Stream.make` to get dtype coercion.

    Its fields, in :data:`SCHEMA`'s order: ``rewards``, ``lots`` ([T, b]), the per-step fields of
    :class:`StepFields`, then the optional ``v_pred`` ([T, b]).
    """

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
             tau_action=None, boundary=None, step=None, v_pred=None, lazy: bool = False) -> "Stream":
        """Build a stream, casting to the schema's dtypes and filling omitted per-step fields.

        Omitted ``kelly_analytic`` is 1.0 (full edge), ``cooldown``, ``session_pnl_worst``
        and ``tau_action`` are 0, ``boundary`` is all False and ``step`` is ``0..T-1``
        (the :data:`SCHEMA` defaults). Values that do not survive the cast
        unchanged (a fractional lot, say) raise. With ``lazy``, every problem is
        collected and raised at once as :class:`~regime_dash.errors.StreamErrors`.
        """
        given = dict(rewards=rewards, lots=lots, kelly_analytic=kelly_analytic, cooldown=cooldown,
                     session_pnl_worst=session_pnl_worst, tau_action=tau_action, boundary=boundary,
                     step=step, v_pred=v_pred)
        kw, errors = arrays_of(SCHEMA, given, lazy=lazy)
        if lazy:
            check_schema(kw, SCHEMA, lazy=True, found=errors)
        return cls(**kw)

    def arrays(self) -> dict[str, np.ndarray]:
        """The fields as a dict, optional ones only when present."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        return {k: v for k, v in out.items() if v is not None}

    def per_step(self) -> "StepStream":
        """Its per-step fields and b, without the [T, b] arrays (the arrays shared, not copied)."""
        return StepStream(**{name: getattr(self, name) for name in STEP_FIELDS}, accounts=self.accounts)

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


@dataclass(frozen=True, eq=False)
class StepStream(StepFields):
    """A stream without its [T, b] arrays: the per-step fields (:class:`StepFields`) and b.

    What a fast replay given the stream's phase 1 (``engine.fast.step_stats``) and no
    normalize pass reads; at T = 1,000,000 steps it is ~20 MB where the whole stream of 128
    accounts is a GB. Made by :meth:`Stream.per_step` or from a file by :class:`StreamFile`;
    validated as the stream's own fields are.
    """

    accounts: int

    def __post_init__(self):
        if isinstance(self.accounts, bool) or not isinstance(self.accounts, (int, np.integer)) or self.accounts < 1:
            raise StreamError(f"accounts must be a whole number >= 1, got {self.accounts!r}", field="accounts",
                              value=self.accounts)
        object.__setattr__(self, "accounts", int(self.accounts))
        check_schema(self.arrays(), {name: SCHEMA[name] for name in STEP_FIELDS})

    @property
    def steps(self) -> int:
        return int(self.step.shape[0])

    def arrays(self) -> dict[str, np.ndarray]:
        """The per-step fields as a dict."""
        return {name: getattr(self, name) for name in STEP_FIELDS}


def check_arrays(stream: Stream) -> tuple[int, int]:
    """Check every field's type, dtype, rank and shape, and that T and b are not 0; return (T, b).

    The part of :func:`validate` a device engine repeats before an upload, since a
    stream's arrays can be replaced after it was validated.
    """
    check_schema({name: getattr(stream, name) for name in SCHEMA}, SCHEMA, values=False)
    t, b = stream.rewards.shape
    return t, b


def validate(stream: Stream, *, lazy: bool = False) -> None:
    """Check ``stream`` against :data:`SCHEMA`; raise :class:`StreamError` naming the value.

    With ``lazy``, collect every problem and raise them together as
    :class:`~regime_dash.errors.StreamErrors`.
    """
    check_schema({name: getattr(stream, name) for name in SCHEMA}, SCHEMA, lazy=lazy)


#: The most array data a stream file may declare (bytes, every member together): a
#: 1,000,000-step stream of 64 accounts (rewards, lots and v_pred) is 768 MB; more is
#: refused from the headers, before anything is inflated.
MAX_STREAM_BYTES = 1 << 30


def _npz_headers(z, name: str) -> tuple[str, np.dtype, tuple[int, ...]]:
    """One ``.npz`` member's field name, dtype and shape, read from its ``.npy`` header only."""
    from numpy.lib import format as npy

    member = z.getinfo(name)
    field = name[:-4] if name.endswith(".npy") else name
    if field not in SCHEMA:
        raise StreamError(f"unknown stream field(s) [{field[:80]!r}]; expected {list(SCHEMA)}", field=field[:80],
                          value=field[:80])
    try:
        with z.open(member) as fh:
            version = npy.read_magic(fh)
            shape, fortran, dtype = (npy.read_array_header_1_0(fh) if version == (1, 0)
                                     else npy.read_array_header_2_0(fh))
    except (ValueError, OSError, EOFError) as e:
        raise StreamError(f"{field}: not a NumPy array ({str(e)[:120]})", field=field) from None
    if dtype.hasobject or dtype.kind not in "biuf":
        raise StreamError(f"{field}: dtype {dtype} is not a number or bool", field=field, value=str(dtype))
    if len(shape) != SCHEMA[field].rank:
        raise StreamError(f"{field}: {len(shape)} dimension(s) {shape}, expected {SCHEMA[field].rank}",
                          field=field, value=shape)
    return field, dtype, tuple(int(n) for n in shape)


def _npz_heads(z, path: Path) -> list[tuple[str, np.dtype, tuple[int, ...], str]]:
    """Every member's (field, dtype, shape, member name) of an open ``.npz``, checked from the
    headers alone: known fields, each once, one step count, at most :data:`MAX_STREAM_BYTES`."""
    heads = [(*_npz_headers(z, n), n) for n in z.namelist()]
    fields_ = [h[0] for h in heads]
    if len(set(fields_)) != len(fields_):
        raise StreamError(f"{path.name}: a stream field is stored twice", field="path", value=path.name)
    steps = {h[2][0] for h in heads}
    if len(steps) > 1:
        raise StreamError(f"{path.name}: fields disagree on the step count ({sorted(steps)[:4]})",
                          field="step", value=sorted(steps)[:4])
    declared = sum(int(np.prod(shape, dtype=object)) * dtype.itemsize for _, dtype, shape, _ in heads)
    if declared > MAX_STREAM_BYTES:
        raise StreamError(f"{path.name}: its arrays declare {declared:,} bytes, over the "
                          f"{MAX_STREAM_BYTES:,}-byte limit of a stream file", field="path", value=declared)
    return heads


def _open_zip(path: Path):
    import zipfile

    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
        raise StreamError(f"{path.name}: not an .npz file ({e})", field="path", value=path.name) from None


def _read_npz(path: Path, only: tuple[str, ...] | None = None) -> dict[str, np.ndarray]:
    """An ``.npz`` stream file's arrays (those of the fields ``only`` names, if given). Names, dtypes and
    shapes are checked from the member headers first (:func:`_npz_heads`), so a small file that
    inflates to gigabytes is refused before anything is inflated."""
    import zipfile

    from numpy.lib import format as npy

    with _open_zip(path) as z:
        data = {}
        for field, _, _, name in _npz_heads(z, path):
            if only is not None and field not in only:
                continue
            try:
                with z.open(name) as fh:
                    data[field] = npy.read_array(fh, allow_pickle=False)
            except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
                raise StreamError(f"{field}: cannot be read ({str(e)[:120]})", field=field) from None
    return data


def load(path: str | Path, *, lazy: bool = False) -> Stream:
    """Read a stream saved by :meth:`Stream.save` (``.parquet`` or ``.npz``) and validate it (``lazy``: as :meth:`Stream.make`)."""
    path = Path(path)
    if not path.exists():
        raise StreamError(f"stream file {str(path)!r} does not exist", field="path", value=str(path))
    if path.suffix == ".npz":
        data = _read_npz(path)
    elif path.suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        data = {}
        for name in table.column_names:
            col = table.column(name).combine_chunks()
            if hasattr(col, "flatten") and hasattr(col.type, "value_type"):
                # b is the first step's count, as StreamFile reads it (Stream.make compares the fields' b)
                data[name] = list_rows(col, name, _first_length(col))
            else:
                data[name] = col.to_numpy(zero_copy_only=False)
            # writable, as an .npz's are: Arrow hands out read-only views, which the compiled scans refuse
            data[name] = np.require(data[name], requirements="W")
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
    return Stream.make(**data, lazy=lazy)


#: Elements of one [T, b] field a :meth:`StreamFile.blocks` block holds (16 MB of float32).
BLOCK_ELEMENTS = 1 << 22


class StreamFile:
    """A stream file (``.npz`` or ``.parquet``, as :meth:`Stream.save` writes) read without its [T, b]
    arrays held at once: the per-step fields whole (:meth:`per_step`), the [T, b] fields a block of
    steps at a time (:meth:`blocks`), each value checked as :func:`load` checks it.

    Opening reads the headers only (the ``.npy`` member headers, the Parquet schema): the field
    names, T and b. Reading every block of :meth:`blocks` once checks what :func:`load` would; a
    file with several problems may name another of them first.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.exists():
            raise StreamError(f"stream file {str(self.path)!r} does not exist", field="path", value=str(self.path))
        if self.path.suffix not in (".npz", ".parquet"):
            raise StreamError(f"unknown stream file type {self.path.suffix!r} (use .parquet or .npz)",
                              field="path", value=str(self.path))
        self.fields = self._npz_fields() if self.path.suffix == ".npz" else self._parquet_fields()
        missing = [n for n in SCHEMA if n not in self.fields and n not in OPTIONAL]
        if missing:
            raise StreamError(f"{self.path.name}: missing stream field(s) {missing}", field=missing[0])
        self.accounts = self._width()

    @property
    def steps(self) -> int:
        return self.fields["step"][1][0]

    def _npz_fields(self) -> dict[str, tuple[np.dtype, tuple[int, ...], str]]:
        with _open_zip(self.path) as z:
            return {field: (dtype, shape, name) for field, dtype, shape, name in _npz_heads(z, self.path)}

    def _parquet_fields(self) -> dict[str, tuple[Any, tuple[int, ...], str]]:
        import pyarrow.parquet as pq

        try:
            meta = pq.ParquetFile(self.path)
        except (OSError, ValueError) as e:
            raise StreamError(f"{self.path.name}: not a Parquet file ({str(e)[:120]})", field="path",
                              value=self.path.name) from None
        unknown = sorted(set(meta.schema_arrow.names) - set(SCHEMA))
        if unknown:
            raise StreamError(f"{self.path.name}: unknown stream field(s) {unknown}; expected {list(SCHEMA)}",
                              field=unknown[0], value=unknown[0])
        t = meta.metadata.num_rows
        return {name: (meta.schema_arrow.field(name).type, (t,) if SCHEMA[name].rank == 1 else (t, -1), name)
                for name in meta.schema_arrow.names}

    def _width(self) -> int:
        """b, and the same T and b in every field (the step count and the account count not 0)."""
        t = self.steps
        widths = {name: self._first_row_width(name) for name in BATCH_FIELDS if name in self.fields}
        b = widths["rewards"]
        for name, w in widths.items():
            if w != b:
                raise StreamError(f"{name} has {w} accounts, rewards has {b}", field=name, value=w)
        if t == 0 or b == 0:
            raise StreamError(f"stream has T = {t} steps and b = {b} accounts", field="rewards", value=(t, b))
        return b

    def _first_row_width(self, name: str) -> int:
        shape = self.fields[name][1]
        if shape[-1] >= 0 or shape[0] == 0:
            return max(shape[-1], 0)
        first = next(self._parquet_batches((name,), 1))  # a list column: b is its first row's length
        return len(first.column(0).flatten())

    def per_step(self) -> StepStream:
        """The per-step fields and b, checked."""
        if self.path.suffix == ".npz":
            data = _read_npz(self.path, only=STEP_FIELDS)
        else:
            import pyarrow.parquet as pq

            table = pq.read_table(self.path, columns=list(STEP_FIELDS))
            # writable, as load's arrays are (Arrow hands out read-only views; the compiled scans take writable ones)
            data = {name: np.require(table.column(name).to_numpy(), requirements="W") for name in STEP_FIELDS}
        values = {name: cast(name, data[name], SCHEMA[name]) for name in STEP_FIELDS}
        return StepStream(**values, accounts=self.accounts)

    def blocks(self, rows: int | None = None) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        """``(first step index, {field: block})`` of every [T, b] field the file holds, ``rows`` steps at a
        time (default: :data:`BLOCK_ELEMENTS` elements a field), each block cast to its dtype and checked.

        Raises
        ------
        StreamError
            A block's values break :data:`SCHEMA` (named at their step index in the whole stream).
        """
        rows = max(1, BLOCK_ELEMENTS // self.accounts) if rows is None else int(rows)
        if rows < 1:
            raise StreamError(f"rows must be >= 1, got {rows}", field="rows", value=rows)
        names = tuple(n for n in BATCH_FIELDS if n in self.fields)
        raw = self._npz_blocks(names, rows) if self.path.suffix == ".npz" else self._parquet_blocks(names, rows)
        start = 0
        for block in raw:
            yield start, {name: self._checked(name, arr, start) for name, arr in block.items()}
            start += len(block[names[0]])
        if start != self.steps:
            raise StreamError(f"{self.path.name}: its [T, b] fields hold {start} steps, not {self.steps}",
                              field="rewards", value=start)

    def _checked(self, name: str, arr: np.ndarray, start: int) -> np.ndarray:
        spec = SCHEMA[name]
        out = cast(name, arr, spec, first=start)
        if out.ndim != 2 or out.shape[1] != self.accounts:
            raise StreamError(f"{name} has shape {out.shape} at step index {start}, expected "
                              f"({len(out)}, {self.accounts})", field=name, value=out.shape)
        first = next(_value_problems(name, out, spec, first=start), None)
        if first is not None:
            raise first
        return out

    def _npz_blocks(self, names: tuple[str, ...], rows: int) -> Iterator[dict[str, np.ndarray]]:
        import zipfile

        with _open_zip(self.path) as z:
            readers = {}
            try:
                for name in names:
                    dtype, shape, member = self.fields[name]
                    readers[name] = _npy_rows(z.open(member), name, dtype, shape, rows)
                while True:
                    block = {name: next(reader, None) for name, reader in readers.items()}
                    if any(v is None for v in block.values()):
                        return
                    yield block
            except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
                raise StreamError(f"{self.path.name}: cannot be read ({str(e)[:120]})", field="path") from None
            finally:
                for reader in readers.values():
                    reader.close()

    def _parquet_batches(self, names: tuple[str, ...], rows: int):
        import pyarrow.parquet as pq

        return pq.ParquetFile(self.path).iter_batches(batch_size=rows, columns=list(names))

    def _parquet_blocks(self, names: tuple[str, ...], rows: int) -> Iterator[dict[str, np.ndarray]]:
        start = 0
        for batch in self._parquet_batches(names, rows):
            yield {name: list_rows(batch.column(name), name, self.accounts, start) for name in names}
            start += batch.num_rows


def _first_length(col) -> int:
    """The length of a list column's first row (0 for no row or a null one): b, as a stream file gives it."""
    import pyarrow.compute as pc

    return int(pc.list_value_length(col[:1]).fill_null(0).to_numpy(zero_copy_only=False).sum())


def list_rows(col, name: str, width: int, first: int = 0) -> np.ndarray:
    """A Parquet list column (a [T, b] field, a list of b values a step) as a [rows, b] array, every
    step's list checked to hold ``width`` values; ``first`` is the step index of the column's row 0.

    Counting the values alone would miss a ragged column whose total is right (lists of 3, 4 and 2
    values where each step has 3): reshaped, each step after the shifted value would read another
    account's numbers. So every row's own length is checked.

    Raises
    ------
    StreamError
        A row is null or its list is not ``width`` long: the message names the first such step
        (its step index and row), the length found and the one expected, and how many rows differ.
    """
    import pyarrow.compute as pc

    lengths = pc.list_value_length(col).fill_null(-1).to_numpy(zero_copy_only=False)
    bad = np.flatnonzero(lengths != width)
    if bad.size:
        i = int(bad[0])
        found = "no list (null)" if lengths[i] < 0 else f"{int(lengths[i])} value(s)"
        shown = ", ".join(str(int(n)) for n in lengths[max(0, i - 2):i + 3])
        raise StreamError(f"{name} is ragged: row {first + i} (step index {first + i}) holds {found}, expected "
                          f"{width} (b, the first step's count); {bad.size:,} of the {len(lengths):,} rows read "
                          f"differ (lengths {shown} from row {first + max(0, i - 2)})",
                          field=name, value={"step_index": first + i, "found": int(lengths[i]), "expected": width})
    flat = col.flatten().to_numpy(zero_copy_only=False)
    return flat.reshape(len(col), width)


def _npy_rows(fh, name: str, dtype: np.dtype, shape: tuple[int, ...], rows: int) -> Iterator[np.ndarray]:
    """An open ``.npy`` member's [T, b] array ``rows`` rows at a time, read past its header (closed at the end).

    A Fortran-ordered member (rows are not contiguous in it) is read whole and handed out in rows."""
    from numpy.lib import format as npy

    with fh:
        version = npy.read_magic(fh)
        _, fortran, _ = npy.read_array_header_1_0(fh) if version == (1, 0) else npy.read_array_header_2_0(fh)
        t, b = shape
        if fortran:
            whole = np.frombuffer(_read_exact(fh, t * b * dtype.itemsize, name), dtype).reshape(shape, order="F")
            for a in range(0, t, rows):
                yield whole[a:a + rows]
            return
        for a in range(0, t, rows):
            n = min(rows, t - a)
            yield np.frombuffer(_read_exact(fh, n * b * dtype.itemsize, name), dtype).reshape(n, b)


def _read_exact(fh, size: int, name: str) -> bytearray:
    """``size`` bytes of ``fh``, writable (an array over them is writable, as :func:`load`'s are)."""
    data = bytearray(fh.read(size))
    if len(data) != size:
        raise StreamError(f"{name}: the file ends inside its array ({len(data):,} of {size:,} bytes)", field=name)
    return data
