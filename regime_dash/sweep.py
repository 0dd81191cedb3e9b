"""``sweep(stream, configs)``: what-if replays of one stream under many configs.

Every config gets one row: its fields and the :mod:`regime_dash.engine.summary`
metrics of its replay (dead-zone steps, longest duration, timeouts, tail
events, σ-floor steps, min/mean kelly_f, max σ, ...). With the fast engine,
phase 1 (the per-step batch sums and flat counts) is computed once for the
whole sweep and each config runs only the scalar scan, folding its snapshot
into a row of accumulators, so memory is O(S + T·b), never O(S·T). Configs go
through in chunks, and the full trajectories are kept only for the configs
named in ``keep``.

A sweep row equals :func:`summary.summarize_frame` of the single replay of
that config, exactly: both fold the same snapshot with the same
:func:`summary.accumulate`.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from regime_dash import diag
from regime_dash.config import RegimeConfig, field_names
from regime_dash.engine import (initial_isv, replay_trajectory, resolve_engine,
                                snapshot_indices)
from regime_dash.engine import summary
from regime_dash.errors import ConfigError, StreamError, ValidationError
from regime_dash.slots import DEFAULT_LAYOUT, SlotLayout
from regime_dash.streams import Stream

#: Scenarios per chunk on the CPU: bounds the [chunk, n_isv] initial-state rows
#: (4096 × 716 float32 × 2 ≈ 23 MB) whatever S is.
CPU_CHUNK = 4096
#: Scenarios per chunk on the GPU. ``fast_gpu.sweep_summaries`` runs its own
#: phase 1 per call, so one chunk up to this size keeps it to one phase 1.
GPU_CHUNK = 16384

Progress = Callable[[int, int], None]


@dataclass
class SweepResult:
    """The outcome of :func:`sweep`.

    Attributes
    ----------
    table
        One row per config, in input order: the config fields, then the metrics
        of :data:`summary.METRICS`.
    trajectories
        ``{config index: replay frame}`` for the indices asked for in ``keep``;
        each equals ``replay(stream, configs[i], ...)``.
    engine
        What ran: ``fast-cpu``, ``fast-gpu``, ``reference`` or ``cuda``.
    seconds
        Wall time of the sweep, setup included.
    """

    table: pd.DataFrame
    trajectories: dict[int, pd.DataFrame] = field(default_factory=dict)
    engine: str = ""
    seconds: float = 0.0

    @property
    def configs(self) -> list[RegimeConfig]:
        """The swept configs, rebuilt from the table's config columns."""
        names = field_names()
        return [RegimeConfig(**{n: row[n] for n in names})
                for row in self.table[names].to_dict("records")]


def expand_configs(configs: Sequence[RegimeConfig] | Mapping[str, Any],
                   base: RegimeConfig | None = None) -> list[RegimeConfig]:
    """The configs a sweep runs: a list of :class:`RegimeConfig` as given, or a grid expanded.

    Parameters
    ----------
    configs
        A sequence of :class:`RegimeConfig`, or a grid ``{field: values}`` whose
        cartesian product (first field slowest, like :func:`itertools.product`)
        is applied on top of ``base``. A single value stands for a one-value list.
    base
        The config a grid varies; the spec's defaults if None.

    Raises
    ------
    ConfigError
        An unknown field (the message lists the valid ones), an empty value list,
        a value out of its domain, or an element of the list that is not a RegimeConfig.
    """
    if isinstance(configs, Mapping):
        valid = field_names()
        unknown = [k for k in configs if k not in valid]
        if unknown:
            raise ConfigError(f"unknown config field(s) {unknown} in the sweep grid; "
                              f"valid fields: {', '.join(valid)}", field=str(unknown[0]), value=unknown[0])
        axes = []
        for name, values in configs.items():
            vals = [values] if isinstance(values, (str, bytes)) or not isinstance(values, Iterable) \
                else list(values)
            if not vals:
                raise ConfigError(f"sweep grid field {name!r} has no values", field=name, value=values)
            axes.append(vals)
        base = RegimeConfig() if base is None else base
        fixed = {n: getattr(base, n) for n in valid}
        names = list(configs)
        # fields were checked above; the constructor validates each combination's values
        return [RegimeConfig(**{**fixed, **dict(zip(names, combo))}) for combo in itertools.product(*axes)]
    if isinstance(configs, (str, bytes)) or not isinstance(configs, Iterable):
        raise ConfigError(f"configs must be a list of RegimeConfig or a dict field -> values, "
                          f"got {type(configs).__name__}", field="configs", value=type(configs).__name__)
    out = list(configs)
    for i, c in enumerate(out):
        if not isinstance(c, RegimeConfig):
            raise ConfigError(f"configs[{i}] is a {type(c).__name__}, not a RegimeConfig",
                              field=f"configs[{i}]", value=type(c).__name__)
    return out


def initial_rows(configs: Sequence[RegimeConfig], isv: Mapping[str, float] | None,
                 layout: SlotLayout) -> tuple[np.ndarray, np.ndarray]:
    """float32 [S, n_isv] ``(isv0s, boot_rows)``: :func:`engine.initial_isv` of every config.

    The vectorized form of ``initial_isv``: the configs differ only in the slots
    :meth:`RegimeConfig.to_isv` names, so the first config's vectors are tiled
    and those columns filled per config; the ``isv`` overrides are then
    re-applied, as ``initial_isv`` applies them last. A test checks the two agree.
    """
    isv0, boot = initial_isv(configs[0], isv, layout)
    boot_rows = np.tile(boot, (len(configs), 1))
    slots = list(configs[0].to_isv())
    values = np.array([[d[s] for s in slots] for d in (c.to_isv() for c in configs)], dtype=np.float32)
    boot_rows[:, [layout.index(s) for s in slots]] = values
    isv0s = boot_rows.copy()
    for name in (isv or {}):
        isv0s[:, layout.index(name)] = isv0[layout.index(name)]
    return isv0s, boot_rows


def _chunks(n: int, size: int) -> Iterable[tuple[int, int]]:
    for start in range(0, n, size):
        yield start, min(n, start + size)


def _trajectory_frame(snap: np.ndarray, flat: np.ndarray, stream: Stream, layout: SlotLayout,
                      engine: str, config: RegimeConfig | None = None) -> pd.DataFrame:
    frame = diag.frame_from_snapshot(snap, flat, stream.accounts, stream.step, stream.boundary, config)
    frame.attrs["layout_fingerprint"] = layout.fingerprint_hex()
    frame.attrs["engine"] = engine
    return frame


def _sweep_fast(stream, configs, keep, layout, isv, progress, device, chunk_size):
    from regime_dash.engine import fast

    gpu = fast.use_gpu(device)
    size = chunk_size or (GPU_CHUNK if gpu else CPU_CHUNK)
    # Phase 1 once for the whole sweep on the CPU; the GPU path runs its own (see GPU_CHUNK).
    stats = None if gpu else fast.step_stats(stream)
    snap_idx = snapshot_indices(layout)
    acc = np.empty((len(configs), summary.N_METRICS + 1), dtype=np.float64)
    kept: dict[int, np.ndarray] = {}
    for start, stop in _chunks(len(configs), size):
        isv0s, boot_rows = initial_rows(configs[start:stop], isv, layout)
        local = [k - start for k in keep if start <= k < stop]
        if gpu:
            a, snaps = fast.sweep_summaries(stream, isv0s, boot_rows, layout, local, device="gpu")
        else:
            a, snaps = fast.sweep_cpu(stream, isv0s, boot_rows, layout, local, stats=stats, snap_idx=snap_idx)
        acc[start:stop] = a
        kept.update({start + k: s for k, s in snaps.items()})
        if progress is not None:
            progress(stop, len(configs))
    rows = [summary.finalize(acc[k], stream.steps) for k in range(len(configs))]
    # kept trajectories need the flat counts, which the GPU sweep does not return
    flat = stats.flat if stats is not None else np.count_nonzero(stream.lots == 0, axis=1).astype(np.int32)
    trajectories = {k: _trajectory_frame(kept[k], flat, stream, layout, "fast", configs[k]) for k in keep}
    return rows, trajectories, "fast-gpu" if gpu else "fast-cpu"


def _sweep_per_replay(stream, configs, keep, layout, isv, progress, engine, options):
    rows, trajectories = [], {}
    wanted = set(keep)
    for k, config in enumerate(configs):
        frame = replay_trajectory(stream, config, engine, isv, layout, **options).frame
        rows.append(summary.summarize_frame(frame))
        if k in wanted:
            trajectories[k] = frame
        if progress is not None:
            progress(k + 1, len(configs))
    return rows, trajectories, engine


def sweep(stream: Stream, configs: Sequence[RegimeConfig] | Mapping[str, Any], engine: str = "auto",
          keep: Sequence[int] | None = None, layout: SlotLayout | None = None,
          progress: Progress | None = None, *, isv: Mapping[str, float] | None = None,
          device: str = "auto", chunk_size: int | None = None, base: RegimeConfig | None = None,
          **options: Any) -> SweepResult:
    """Replay ``stream`` under every config and summarize each replay in one row.

    Parameters
    ----------
    stream
        The replayed inputs.
    configs
        A list of :class:`RegimeConfig`, or a grid ``{field: values}`` (see :func:`expand_configs`).
    engine
        ``fast`` (one shared phase 1, a scan per config), ``reference`` or
        ``cuda`` (one full replay per config), or ``auto`` (``fast`` where it
        can run, else ``reference``).
    keep
        Config indices whose full trajectories to return.
    layout
        Slot layout; the default registry if None.
    progress
        Called as ``progress(done, total)`` after each chunk (fast) or config.
    isv
        Initial slot overrides by name, as in :func:`regime_dash.replay`.
    device
        For ``fast``: ``auto``, ``cpu`` or ``gpu``.
    chunk_size
        Scenarios per chunk; :data:`CPU_CHUNK` / :data:`GPU_CHUNK` if None.
    base
        The config a grid varies.
    **options
        Backend options of the per-replay engines (e.g. ``graph=True`` for ``cuda``).

    Returns
    -------
    SweepResult
    """
    t0 = time.perf_counter()
    if not isinstance(stream, Stream):
        raise StreamError(f"stream must be a regime_dash.Stream, got {type(stream).__name__}",
                          field="stream", value=type(stream).__name__)
    configs = expand_configs(configs, base)
    if not configs:
        raise ConfigError("the sweep has no configs", field="configs", value=configs)
    layout = (layout or DEFAULT_LAYOUT).validate()
    keep = [] if keep is None else list(dict.fromkeys(keep))
    for k in keep:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k < len(configs):
            raise ValidationError(f"keep index {k!r} is not a config index in 0..{len(configs) - 1}",
                                  field="keep", value=k)
    keep = [int(k) for k in keep]
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int)
                                   or chunk_size < 1):
        raise ValidationError(f"chunk_size must be a positive integer, got {chunk_size!r}",
                              field="chunk_size", value=chunk_size)
    if engine == "auto":
        name = "fast" if resolve_engine("auto") == "fast" else "reference"
    else:
        name = resolve_engine(engine)
    if name != "fast" and device != "auto":
        raise ValidationError(f"device={device!r} applies to engine 'fast' only, not {name!r}",
                              field="device", value=device)
    if name == "fast":
        if options:
            raise ValidationError(f"engine 'fast' sweeps take no options, got {sorted(options)}",
                                  field="options", value=sorted(options))
        rows, trajectories, ran = _sweep_fast(stream, configs, keep, layout, isv, progress, device, chunk_size)
    else:
        rows, trajectories, ran = _sweep_per_replay(stream, configs, keep, layout, isv, progress, name,
                                                    options)
    columns = {n: [getattr(c, n) for c in configs] for n in field_names()}  # not as_dict: it deep-copies
    table = pd.concat([pd.DataFrame(columns), pd.DataFrame(rows, columns=summary.METRICS)], axis=1)
    table.attrs.update(engine=ran, steps=stream.steps, accounts=stream.accounts,
                       layout_fingerprint=layout.fingerprint_hex())
    return SweepResult(table, trajectories, ran, time.perf_counter() - t0)


__all__ = ["SweepResult", "sweep", "expand_configs", "initial_rows"]
