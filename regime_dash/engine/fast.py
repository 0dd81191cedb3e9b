"""``engine="fast"``: the two-phase replay, on the CPU (numba) or the GPU (``fast_gpu``).

A step's only [b]-wide work that feeds the state machine is rl_regime_flat_count
and the three batch sums of rl_popart_normalize (Σr, Σr², max|r|), and none of
it depends on the ISV state. So the replay splits in two:

phase 1
    every step's (Σr, Σr², max|r|) and flat count, in parallel over steps
    (:func:`step_stats`). It calls :func:`reference.block_reduce_stats`, the
    twin of ``common.cuh``'s block reduction, so the sums come out in the GPU's
    reduction order.
phase 2
    the scalar state machine, a scan over steps per scenario. It calls
    :func:`reference.scalar_step`, the very source of the oracle, compiled.
    The rewards are then normalized in parallel with the (μ, σ) of each step
    (:func:`reference.rl_popart_normalize_apply`).

A sweep runs phase 1 once and phase 2 once per config (:func:`sweep_summaries`),
folding each step's snapshot into :func:`summary.accumulate` so no [S, T, n]
array ever exists.

With a GPU (``fast_gpu.available()`` is None) and ``device`` allowing it, the
GPU backend runs; otherwise the CPU path. Both match the reference bit for bit.
"""
from __future__ import annotations

import hashlib
import inspect
import threading
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from regime_dash.engine import reference, summary
from regime_dash.engine._jit import HAVE_NUMBA
from regime_dash.errors import EngineUnavailable, ValidationError
from regime_dash.slots import SlotLayout

DEVICES = ("auto", "cpu", "gpu")


@dataclass(frozen=True)
class StepStats:
    """Phase 1 of a stream: what the state machine needs from the [T, b] arrays.

    Attributes
    ----------
    sums
        float32 [T, 3]: Σr, Σr², max|r| of each step, in rl_popart_normalize's order.
    flat
        int32 [T]: accounts with zero lots (rl_regime_flat_count).
    """

    sums: np.ndarray
    flat: np.ndarray


# ---- compiled kernels -------------------------------------------------------------
def _dependency_fingerprint() -> str:
    # numba's cache key covers only a function's own bytecode and closure cells;
    # the reference and summary functions it inlines live in other files. Their
    # source hash rides in the closure, so editing them invalidates the cache.
    h = hashlib.sha256()
    from regime_dash.engine import _jit
    for module in (reference, summary, _jit):
        h.update(inspect.getsource(module).encode())
    return h.hexdigest()


def _build(fingerprint: str) -> dict[str, Any]:
    from numba import njit, prange

    block_reduce_stats = reference.block_reduce_stats
    scalar_step = reference.scalar_step
    normalize_apply = reference.rl_popart_normalize_apply
    v_correct = reference.rl_popart_v_correct
    accumulate = summary.accumulate

    def phase1(rewards, lots, sums, flat):
        fingerprint  # noqa: B018 - keeps the dependency hash in the cache key
        t_steps, b = rewards.shape
        for t in prange(t_steps):
            s, q, m = block_reduce_stats(rewards[t])
            sums[t, 0] = s
            sums[t, 1] = q
            sums[t, 2] = m
            n = 0
            for j in range(b):
                if lots[t, j] == 0:
                    n += 1
            flat[t] = n

    def scan(sums, flat, boundary, cooldown, worst, kelly, tau, isv, ix, boot, r_idx, r_code, r_src,
             snap_idx, b_size, snap, mean, sigma, v_pred, has_v):
        fingerprint  # noqa: B018
        for t in range(sums.shape[0]):
            m, s = scalar_step(isv, ix, boot, r_idx, r_code, r_src, snap_idx, snap[t], boundary[t],
                               cooldown[t], worst[t], kelly[t], tau[t], sums[t, 0], sums[t, 1],
                               sums[t, 2], flat[t], b_size)
            mean[t] = m
            sigma[t] = s
            if has_v:
                # reads the ISV right after the step, which only the scan holds
                v_correct(v_pred[t], isv, ix)

    def normalize(rewards, mean, sigma):
        fingerprint  # noqa: B018
        for t in prange(rewards.shape[0]):
            normalize_apply(rewards[t], mean[t], sigma[t])

    def sweep(sums, flat, boundary, cooldown, worst, kelly, tau, isv0s, boots, ix, r_idx, r_code,
              r_src, snap_idx, b_size, acc, keep_slot, kept):
        fingerprint  # noqa: B018
        n_snap = snap_idx.shape[0]
        for k in prange(isv0s.shape[0]):
            isv = isv0s[k].copy()
            boot = boots[k]
            row = np.empty(n_snap, dtype=np.float32)
            a = acc[k]
            slot = keep_slot[k]
            for t in range(sums.shape[0]):
                scalar_step(isv, ix, boot, r_idx, r_code, r_src, snap_idx, row, boundary[t],
                            cooldown[t], worst[t], kelly[t], tau[t], sums[t, 0], sums[t, 1],
                            sums[t, 2], flat[t], b_size)
                accumulate(a, row)
                if slot >= 0:
                    kept[slot, t, :] = row

    def jit(fn, parallel=False):
        try:
            return njit(cache=True, parallel=parallel)(fn)
        except RuntimeError:  # no writable cache location (read-only install): compile per process
            return njit(cache=False, parallel=parallel)(fn)

    return {"phase1": jit(phase1, parallel=True), "scan": jit(scan), "normalize": jit(normalize, parallel=True),
            "sweep": jit(sweep, parallel=True)}


_KERNELS: dict[str, Any] | None = None
_LOCK = threading.Lock()


def _kernels() -> dict[str, Any]:
    global _KERNELS
    if _KERNELS is None:
        if not HAVE_NUMBA:
            raise EngineUnavailable("engine 'fast' on the CPU needs numba, which is not installed",
                                    engine="fast")
        with _LOCK:
            if _KERNELS is None:
                _KERNELS = _build(_dependency_fingerprint())
    return _KERNELS


# ---- backend choice -----------------------------------------------------------------
def _gpu_reason() -> str | None:
    """None when the GPU backend can run here, else why not."""
    try:
        from regime_dash.engine import fast_gpu
    except ImportError as exc:
        return f"fast_gpu not importable ({exc})"
    probe = getattr(fast_gpu, "available", None)
    return probe() if probe else None


def available() -> str | None:
    """None when ``engine="fast"`` can run here (CPU with numba, or the GPU), else why not."""
    if HAVE_NUMBA:
        return None
    gpu = _gpu_reason()
    return None if gpu is None else f"numba is not installed and the GPU path cannot run: {gpu}"


def use_gpu(device: str) -> bool:
    """Whether ``device`` ("auto", "cpu" or "gpu") selects the GPU backend here.

    Raises
    ------
    ValidationError
        ``device`` is not one of :data:`DEVICES`.
    EngineUnavailable
        ``device="gpu"`` where the GPU backend cannot run, or the CPU path is needed without numba.
    """
    if device not in DEVICES:
        raise ValidationError(f"device must be one of {list(DEVICES)}, got {device!r}",
                              field="device", value=device)
    if device == "cpu":
        return False
    reason = _gpu_reason()
    if device == "gpu" and reason is not None:
        raise EngineUnavailable(f"engine 'fast' on the GPU cannot run here: {reason}", engine="fast")
    return reason is None


# ---- CPU path -------------------------------------------------------------------------
def step_stats(stream) -> StepStats:
    """Phase 1 on the CPU: per-step (Σr, Σr², max|r|) and flat count, parallel over steps."""
    t_steps = stream.steps
    sums = np.empty((t_steps, 3), dtype=np.float32)
    flat = np.empty(t_steps, dtype=np.int32)
    _kernels()["phase1"](np.ascontiguousarray(stream.rewards), np.ascontiguousarray(stream.lots), sums, flat)
    return StepStats(sums, flat)


def _step_inputs(stream) -> tuple[np.ndarray, ...]:
    # contiguous, so a strided view of a stream does not compile another specialization
    return tuple(np.ascontiguousarray(a) for a in (stream.boundary, stream.cooldown, stream.session_pnl_worst,
                                                   stream.kelly_analytic, stream.tau_action))


def _plan(layout: SlotLayout) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    r_idx, r_code, r_src = layout.reset_plan()
    return reference.index_table(layout), r_idx, r_code, r_src


def run_cpu(stream, isv0: np.ndarray, boot: np.ndarray, layout: SlotLayout, snap_idx: np.ndarray,
            stats: StepStats | None = None):
    """The CPU fast replay; the backend contract of :func:`regime_dash.engine.replay_trajectory`.

    ``stats`` is phase 1 of ``stream`` when the caller already has it.
    """
    k = _kernels()
    stats = step_stats(stream) if stats is None else stats
    ix, r_idx, r_code, r_src = _plan(layout)
    t_steps, b = stream.rewards.shape
    isv = np.array(isv0, dtype=np.float32, copy=True)
    snap = np.empty((t_steps, snap_idx.shape[0]), dtype=np.float32)
    mean = np.empty(t_steps, dtype=np.float32)
    sigma = np.empty(t_steps, dtype=np.float32)
    v_pred = None if stream.v_pred is None else stream.v_pred.copy()
    k["scan"](stats.sums, stats.flat, *_step_inputs(stream), isv, ix, np.asarray(boot, dtype=np.float32), r_idx,
              r_code, r_src, np.asarray(snap_idx, dtype=np.int32), b, snap, mean, sigma,
              v_pred if v_pred is not None else np.empty((0, b), dtype=np.float32), v_pred is not None)
    normalized = stream.rewards.copy()
    k["normalize"](normalized, mean, sigma)
    return snap, stats.flat.copy(), normalized, v_pred, isv


def sweep_cpu(stream, isv0s: np.ndarray, boot_rows: np.ndarray, layout: SlotLayout, keep: Sequence[int],
              stats: StepStats | None = None, snap_idx: np.ndarray | None = None):
    """Phase 2 for S scenarios on the CPU, parallel over scenarios; same contract as ``fast_gpu.sweep_summaries``.

    Parameters
    ----------
    stream
        The replayed stream.
    isv0s, boot_rows
        float32 [S, n_isv]: each scenario's initial ISV and its boundary bootstrap.
    layout
        Slot layout.
    keep
        Scenario indices whose full snapshot is returned.
    stats
        Phase 1 of ``stream``, shared by every call of one sweep; computed here if None.
    snap_idx
        Snapshot slot indices; the layout's :data:`diag.SNAPSHOT_SLOTS` by default.

    Returns
    -------
    acc : float64 [S, N_METRICS + 1]
        Each scenario's :func:`summary.accumulate` row; :func:`summary.finalize` reads it.
    kept : dict
        ``{k: float32 [T, n_snap]}`` for ``k`` in ``keep``.
    """
    from regime_dash.engine import snapshot_indices

    k = _kernels()
    stats = step_stats(stream) if stats is None else stats
    snap_idx = snapshot_indices(layout) if snap_idx is None else np.asarray(snap_idx, dtype=np.int32)
    isv0s = np.ascontiguousarray(isv0s, dtype=np.float32)
    boot_rows = np.ascontiguousarray(boot_rows, dtype=np.float32)
    n_scen = isv0s.shape[0]
    if boot_rows.shape != isv0s.shape:
        raise ValidationError(f"boot_rows has shape {boot_rows.shape}, isv0s {isv0s.shape}",
                              field="boot_rows", value=boot_rows.shape)
    keep = list(dict.fromkeys(int(i) for i in keep))
    for i in keep:
        if not 0 <= i < n_scen:
            raise ValidationError(f"keep index {i} is outside 0..{n_scen - 1}", field="keep", value=i)
    keep_slot = np.full(n_scen, -1, dtype=np.int32)
    keep_slot[keep] = np.arange(len(keep), dtype=np.int32)
    kept = np.empty((len(keep), stream.steps, snap_idx.shape[0]), dtype=np.float32)
    acc = np.empty((n_scen, summary.N_METRICS + 1), dtype=np.float64)
    if n_scen:
        summary.init(acc[0])
        acc[1:] = acc[0]
    ix, r_idx, r_code, r_src = _plan(layout)
    k["sweep"](stats.sums, stats.flat, *_step_inputs(stream), isv0s, boot_rows, ix, r_idx, r_code, r_src,
               snap_idx, stream.accounts, acc, keep_slot, kept)
    return acc, {i: kept[keep_slot[i]] for i in keep}


# ---- the backend ------------------------------------------------------------------------
def run(stream, isv0: np.ndarray, boot: np.ndarray, layout: SlotLayout, snap_idx: np.ndarray,
        device: str = "auto"):
    """Backend of ``replay(..., engine="fast", device=...)``.

    Parameters
    ----------
    device
        ``"gpu"`` runs ``fast_gpu`` (raising :class:`EngineUnavailable` where it cannot),
        ``"cpu"`` the numba path, ``"auto"`` the GPU when it can run, else the CPU.

    Returns
    -------
    The backend contract's five arrays (see :mod:`regime_dash.engine`).
    """
    if use_gpu(device):
        from regime_dash.engine import fast_gpu

        return fast_gpu.run(stream, isv0, boot, layout, snap_idx)
    return run_cpu(stream, isv0, boot, layout, snap_idx)


def sweep_summaries(stream, isv0s: np.ndarray, boot_rows: np.ndarray, layout: SlotLayout,
                    keep: Sequence[int], device: str = "auto", stats: StepStats | None = None):
    """A sweep's phase 2 on the device ``device`` selects; returns ``(acc, kept)`` as :func:`sweep_cpu`.

    ``stats`` (phase 1 on the CPU) is used by the CPU path only; the GPU path runs its own phase 1.
    """
    if use_gpu(device):
        from regime_dash.engine import fast_gpu

        return fast_gpu.sweep_summaries(stream, isv0s, boot_rows, layout, list(keep))
    return sweep_cpu(stream, isv0s, boot_rows, layout, keep, stats=stats)
