"""``engine="fast"``: the two-phase replay, on the CPU (numba) or the GPU (``fast_gpu``).

A step's only [b]-wide work that feeds the state machine is rl_regime_flat_count
and the three batch sums of rl_popart_normalize (Σr, Σr², max|r|), and none of
it depends on the ISV state. So the replay splits in two:

phase 1
    every step's (Σr, Σr², max|r|) and flat count (:func:`step_stats`): a
    numba kernel over blocks of steps on every core, doing per row the float32
    operations of :func:`reference.block_reduce_stats` (the twin of
    ``common.cuh``'s block reduction) in its order, so the sums come out in the
    GPU's reduction order. It does not depend on the config: a caller that
    replays one stream under many configs keeps it (``stats=``).
phase 2
    the scalar state machine, a scan over steps per scenario: the one numba
    kernel of a replay. It calls :func:`reference.scalar_step`, the very
    source of the oracle, compiled. The rewards are then normalized (and
    ``v_pred`` corrected) in NumPy with each step's (μ, σ), by the reference's
    own :func:`reference.rl_popart_normalize_apply` and ``rl_popart_v_correct``.

A sweep runs phase 1 once and phase 2 once per config (:func:`sweep_cpu`),
folding each step into :func:`summary.fold` in registers, so no [S, T, n]
array ever exists.

Compile time: each kernel has one explicit signature and is compiled on the
first use of its entry point (:data:`ENTRIES`; :func:`compile_cpu` does it
ahead, :func:`cpu_cache_warm` says whether numba's disk cache already holds
it). Of the [b]-wide work only phase 1 is compiled; the normalize pass is NumPy.

With a GPU (``fast_gpu.available()`` is None) and ``device`` allowing it, the
GPU backend runs; otherwise the CPU path. Both match the reference bit for bit.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from regime_dash.engine import reference, summary
from regime_dash.engine.jit import HAVE_NUMBA, jitable, register_pending
from regime_dash.engine.options import DEVICES  # noqa: F401  (public: the devices ``use_gpu`` takes)
from regime_dash.engine.controllers import check_controllers
from regime_dash.engine.step_stats import StepStats
from regime_dash.errors import EngineUnavailable, StreamError, ValidationError
from regime_dash.core.slots import SlotLayout
from regime_dash.core.streams import StepStream

register_pending()  # the compiled engine: numba now, so its step functions (and any compiled caller's) register


# ---- compiled kernels -------------------------------------------------------------
#: The numba kernels each entry point needs. Each is compiled (or loaded from
#: numba's on-disk cache) on the first use of its entry point, for one signature.
ENTRIES: dict[str, tuple[str, ...]] = {"replay": ("stats", "scan"), "sweep": ("stats", "sweep")}

# The sweep runs on a compact ISV: the registry slots in SLOT_ORDER order, then
# any other slot the reset plan or the snapshot names. So the slot table is
# the identity and a compile-time constant, every slot read of the chain has a
# constant offset, and a scenario's state is ~200 bytes.
_COMPACT_IX = np.arange(len(reference.SLOT_ORDER), dtype=np.int32)


def _compact_pos(snapshot_pos: int) -> int:
    from regime_dash.diag import catalogue as diag

    return reference.SLOT_ORDER.index(diag.SNAPSHOT_SLOTS[snapshot_pos])


# Compact positions of the slots the summary folds.
_S_FLAG, _S_DURATION, _S_TIMEOUT, _S_RECENCY, _S_SIGMA, _S_VAR, _S_ENVELOPE, _S_TAU_MIN, _S_TAU_MIN_EFF, \
    _S_KELLY, _S_EPS_LIVE = (_compact_pos(p) for p in (
        summary.POS_FLAG, summary.POS_DURATION, summary.POS_TIMEOUT, summary.POS_RECENCY, summary.POS_SIGMA,
        summary.POS_VAR, summary.POS_ENVELOPE, summary.POS_TAU_MIN, summary.POS_TAU_MIN_EFF, summary.POS_KELLY,
        summary.POS_EPS_LIVE))


def dependency_fingerprint() -> str:
    """A hash of every source the compiled kernels freeze in (their cache key's missing part)."""
    # numba's cache key covers only a kernel's own bytecode and closure cells and
    # fast.py's mtime. The step functions it inlines live in other files, and the
    # module constants it freezes in (slot positions, policy codes, summary
    # positions) come from the registry; both ride in the closure, so editing
    # either invalidates the cache, and nothing else does.
    from regime_dash.diag import catalogue as diag
    from regime_dash.core.slots import POLICY_CODES
    from regime_dash.engine import jit

    h = hashlib.sha256()
    for module in (reference, summary, jit):
        h.update(inspect.getsource(module).encode())
    h.update(repr((reference.SLOT_ORDER, sorted(POLICY_CODES.items()), diag.SNAPSHOT_SLOTS,
                   diag.SNAPSHOT_COLUMNS)).encode())
    return h.hexdigest()


def _make_scan(fingerprint: str):
    scalar_step = reference.scalar_step
    prev_mean_k, prev_sigma_k = reference.POPART_PREV_MEAN_INDEX, reference.POPART_PREV_SIGMA_INDEX

    def scan(sums, flat, boundary, cooldown, worst, kelly, tau, isv, ix, boot, r_idx, r_code, r_src,
             snap_idx, b_size, snap, popart, fused):
        fingerprint  # noqa: B018 - keeps the dependency hash in the cache key
        for t in range(sums.shape[0]):
            m, s = scalar_step(isv, ix, boot, r_idx, r_code, r_src, snap_idx, snap[t], boundary[t],
                               cooldown[t], worst[t], kelly[t], tau[t], sums[t, 0], sums[t, 1],
                               sums[t, 2], flat[t], b_size, fused)
            # what the [b]-wide passes after the scan read: normalize (μ, σ), v_correct also the old pair
            popart[t, 0] = m
            popart[t, 1] = s
            popart[t, 2] = isv[ix[prev_mean_k]]
            popart[t, 3] = isv[ix[prev_sigma_k]]

    return scan


_BLOCK_DIM, _WARP, _N_WARPS = reference.BLOCK_DIM, reference.WARP, reference.N_WARPS


@jitable
def _fmax(a, b):
    """np.fmax: a NaN loses to a number."""
    if a != a:
        return b
    if b != b:
        return a
    return a if a >= b else b


@jitable
def _tree(v, lo, op_max):
    """Lane ``lo`` after the shuffle-down steps 16..1 over lanes ``lo .. lo + 31`` (in place), as
    :func:`reference._warp_reduce_sum` / ``_warp_reduce_max`` compute it."""
    offset = _WARP // 2
    while offset > 0:
        for lane in range(lo, lo + offset):
            v[lane] = _fmax(v[lane], v[lane + offset]) if op_max else v[lane] + v[lane + offset]
        offset >>= 1
    return v[lo]


@jitable
def stats_row(rewards, lots, t, sums, flat, local):
    """Phase 1 of row ``t``: reduced as :func:`reference.block_reduce_stats` reduces one step (the same
    float32 operations in the same order) into ``sums[t]``, and its flat count into ``flat[t]``.
    ``local`` is float32 [3, 288] scratch. The simulator's compiled loop calls it a step at a time."""
    b = rewards.shape[1]
    # lanes no element reaches hold +0, and so does the tree of a warp of such lanes: only the
    # warps that some element reaches are reduced, the others' partials are the +0 they give
    lanes = min(b, _BLOCK_DIM)
    warps = (lanes + _WARP - 1) // _WARP
    for q in range(3):
        for lane in range(warps * _WARP):
            local[q, lane] = np.float32(0.0)
    for start in range(0, b, _BLOCK_DIM):  # thread tid takes i = tid, tid + 256, ...
        for lane in range(min(_BLOCK_DIM, b - start)):
            x = rewards[t, start + lane]
            local[0, lane] += x
            local[1, lane] += x * x
            local[2, lane] = _fmax(local[2, lane], abs(x))
    for q in range(3):
        row = local[q]
        for w in range(_WARP):  # each warp's partial to lane w of the first warp, the rest 0
            row[_BLOCK_DIM + w] = _tree(row, w * _WARP, q == 2) if w < warps else np.float32(0.0)
        sums[t, q] = _tree(row, _BLOCK_DIM, q == 2)
    n_flat = 0
    for i in range(b):
        if lots[t, i] == 0:
            n_flat += 1
    flat[t] = n_flat


def _make_stats(fingerprint: str):
    def stats(rewards, lots, sums, flat, local):
        """Phase 1 of rows ``0 .. len(flat)``: :func:`stats_row` of each."""
        fingerprint  # noqa: B018
        for t in range(rewards.shape[0]):
            stats_row(rewards, lots, t, sums, flat, local)

    return stats


# Module globals rather than closure cells: numba freezes them in, and dependency_fingerprint
# (the closure) covers the sources they come from.
_STEP = reference.scalar_step
_FOLD = summary.fold
_ACC_INIT = summary.INIT
_NO_SNAP = np.zeros(0, dtype=np.int32)  # a constant: LLVM drops scalar_step's snapshot loop


def _make_sweep(fingerprint: str):
    def sweep(sums, flat, boundary, cooldown, worst, kelly, tau, isv0s, boots, r_idx, r_code, r_src,
              snap_c, b_size, acc, keep_slot, kept, isv, no_row):
        fingerprint  # noqa: B018
        n_snap = snap_c.shape[0]
        for k in range(isv0s.shape[0]):
            for j in range(isv.shape[0]):
                isv[j] = isv0s[k, j]
            boot = boots[k]
            slot = keep_slot[k]
            a = _ACC_INIT  # the summary lives in registers and is written once
            for t in range(sums.shape[0]):
                _STEP(isv, _COMPACT_IX, boot, r_idx, r_code, r_src, _NO_SNAP, no_row, boundary[t], cooldown[t],
                      worst[t], kelly[t], tau[t], sums[t, 0], sums[t, 1], sums[t, 2], flat[t], b_size)
                a = _FOLD(a, isv[_S_FLAG], isv[_S_DURATION], isv[_S_TIMEOUT], isv[_S_RECENCY], isv[_S_SIGMA],
                          isv[_S_VAR], isv[_S_ENVELOPE], isv[_S_TAU_MIN], isv[_S_TAU_MIN_EFF], isv[_S_KELLY],
                          isv[_S_EPS_LIVE])
                if slot >= 0:
                    for j in range(n_snap):
                        kept[slot, t, j] = isv[snap_c[j]]
            for i in range(len(_ACC_INIT)):
                acc[k, i] = a[i]

    return sweep


def _signatures() -> dict[str, Any]:
    # One explicit signature per kernel: the wrappers below pass exactly these
    # types, so no call ever compiles a second specialization.
    from numba import types as nt

    f32, i32 = nt.Array(nt.float32, 1, "C"), nt.Array(nt.int32, 1, "C")
    f32_2, boolean = nt.Array(nt.float32, 2, "C"), nt.Array(nt.boolean, 1, "C")
    steps = (f32_2, i32, boolean, f32, f32, f32, f32)  # sums, flat, boundary, cooldown, worst, kelly, tau
    plan = (i32, i32, i32)  # r_idx, r_code, r_src
    return {
        "stats": nt.void(f32_2, nt.Array(nt.int32, 2, "C"), f32_2, i32, f32_2),
        # the snapshot column-major ([T, n] in Fortran order): each slot's column is the frame's, uncopied;
        # layout A, as a one-step snapshot is C- and F-contiguous at once and numba types it C
        "scan": nt.void(*steps, f32, i32, f32, *plan, i32, nt.int64, nt.Array(nt.float32, 2, "A"), f32_2,
                        nt.boolean),
        "sweep": nt.void(*steps, f32_2, f32_2, *plan, i32, nt.int64, nt.Array(nt.float64, 2, "C"),
                         i32, nt.Array(nt.float32, 3, "C"), f32, f32),
    }


_MAKERS = {"stats": _make_stats, "scan": _make_scan, "sweep": _make_sweep}


def _dispatcher(name: str, fingerprint: str):
    """The uncompiled numba dispatcher of kernel ``name`` (cached on disk where it can be)."""
    from numba import njit

    fn = _MAKERS[name](fingerprint)
    # nogil, not parallel=True: the sweep runs its scenario blocks on Python threads, which
    # costs nothing to compile, where numba's parfor pass tripled the sweep's compile time.
    # Public options only: the kernels allocate nothing (every buffer comes from the
    # caller), so numba's runtime costs them no more than the reference counts of their
    # array arguments at entry. error_model="numpy": a division by zero gives inf as in
    # the NumPy oracle, with no zero-check branch per division.
    opts = {"nogil": True, "error_model": "numpy"}
    try:
        return njit(cache=True, **opts)(fn)
    except RuntimeError:  # no writable cache location (read-only install): compile per process
        return njit(cache=False, **opts)(fn)


_KERNELS: dict[str, Any] = {}
_LOCK = threading.Lock()


def _require_numba() -> None:
    if not HAVE_NUMBA:
        raise EngineUnavailable("engine 'fast' on the CPU needs numba, which is not installed", engine="fast")


def _kernel(name: str):
    """Kernel ``name``, compiled for its one signature (or loaded from numba's cache) on first use."""
    kernel = _KERNELS.get(name)
    if kernel is None:
        _require_numba()
        with _LOCK:
            kernel = _KERNELS.get(name)
            if kernel is None:
                fingerprint = dependency_fingerprint()
                kernel = _dispatcher(name, fingerprint)
                kernel.compile(_signatures()[name])
                _mark_ready(name, kernel, fingerprint)
                kernel.disable_compile()  # a call with other types fails loudly instead of compiling again
                _KERNELS[name] = kernel
    return kernel


def _entry(entry: str) -> tuple[str, ...]:
    if entry not in ENTRIES:
        raise ValidationError(f"entry must be one of {list(ENTRIES)}, got {entry!r}", field="entry", value=entry)
    return ENTRIES[entry]


def compile_cpu(entry: str = "replay") -> None:
    """Compile (or load from numba's on-disk cache) the CPU kernels of ``entry``.

    Safe to call from a background thread while other threads replay: a kernel
    is built once under a lock.

    Parameters
    ----------
    entry
        ``"replay"`` (:func:`run_cpu`) or ``"sweep"`` (:func:`sweep_cpu`).

    Raises
    ------
    ValidationError
        ``entry`` is not a key of :data:`ENTRIES`.
    EngineUnavailable
        numba is not installed.
    """
    for name in _entry(entry):
        _kernel(name)


def built_here(entry: str = "replay") -> bool:
    """Whether this process holds the compiled kernels of ``entry`` (nothing left to load or compile)."""
    return all(name in _KERNELS for name in _entry(entry))


def cpu_cache_warm(entry: str = "replay") -> bool:
    """Whether every kernel of ``entry`` is ready without a compile: built in this process,
    or held by numba's on-disk cache for the current sources. Compiles nothing.

    The probe uses no numba internals. Each time a kernel is built or loaded here,
    :func:`_mark_ready` writes a marker into numba's cache folder (the dispatcher's
    public ``stats.cache_path``) named by everything numba's own cache key holds: the
    dependency fingerprint, the signature, this file's size and mtime, the numba and Python
    versions and the host CPU (llvmlite's public ``get_host_cpu_name``/``features``). The
    marker records the size and mtime of numba's index file for that kernel (``*.nbi``) at
    that moment. The kernel counts as cached when its marker exists and the index file is
    still the one recorded; a rewritten or deleted index (a cleared cache, a compile for
    other sources) makes the answer ``False``, which only costs a compile announced ahead.

    Raises
    ------
    ValidationError
        ``entry`` is not a key of :data:`ENTRIES`.
    """
    names = _entry(entry)
    if all(n in _KERNELS for n in names):
        return True
    if not HAVE_NUMBA:
        return False
    fingerprint = dependency_fingerprint()
    for name in names:
        if name in _KERNELS:
            continue
        marker = _ready_marker(name, _dispatcher(name, fingerprint), fingerprint)
        if marker is None or not marker[0].is_file():
            return False
        try:
            if json.loads(marker[0].read_text(encoding="utf-8")) != marker[1]():
                return False
        except (OSError, ValueError):
            return False
    return True


def _ready_marker(name: str, disp, fingerprint: str):
    """(the marker file of kernel ``name``, a callable giving what it should hold); None without a cache folder."""
    import sys

    import numba
    from llvmlite import binding

    folder = getattr(disp.stats, "cache_path", None)
    if not folder:
        return None
    folder = Path(folder)
    own = Path(__file__).stat()
    key = hashlib.sha256(repr((name, fingerprint, str(_signatures()[name]), own.st_size, own.st_mtime_ns,
                               numba.__version__, sys.version, binding.get_host_cpu_name(),
                               binding.get_host_cpu_features().flatten())).encode()).hexdigest()[:32]

    def index_state() -> list:
        return [[p.name, p.stat().st_size, p.stat().st_mtime_ns]
                for p in sorted(folder.glob(f"fast.*.{name}-*.nbi"))]

    return folder / "regime_dash-ready" / f"{name}-{key}.json", index_state


def _mark_ready(name: str, disp, fingerprint: str) -> None:
    """Record that kernel ``name`` is in numba's cache now (see :func:`cpu_cache_warm`); best effort."""
    marker = _ready_marker(name, disp, fingerprint)
    if marker is None:
        return
    try:
        marker[0].parent.mkdir(parents=True, exist_ok=True)
        marker[0].write_text(json.dumps(marker[1]()), encoding="utf-8")
    except OSError:  # a read-only cache folder: the probe answers False, which only announces a compile
        pass


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
#: Steps per phase-1 / normalize block: keeps the NumPy temporaries in cache (1024 × b floats each).
ROW_BLOCK = 1024


def step_stats(stream) -> StepStats:
    """Phase 1 on the CPU: per-step (Σr, Σr², max|r|) and flat count.

    The ``stats`` kernel over blocks of steps, on every core (it releases the GIL): each
    row reduced as :func:`reference.block_reduce_stats` (the twin of ``common.cuh``'s block
    reduction) reduces one step, the same float32 operations in the same order, with no
    [steps, b] temporaries. Without numba, that NumPy function over the blocks.
    """
    return step_stats_blocks([(0, stream.rewards, stream.lots)], stream.steps)


def step_stats_blocks(blocks, t_steps: int) -> StepStats:
    """Phase 1 of a stream handed over a block of steps at a time: ``blocks`` yields
    ``(first step index, rewards [n, b], lots [n, b])`` covering steps ``0 .. t_steps`` once.

    Phase 1 is a reduction per row, so it is :func:`step_stats` of the whole stream bit for bit,
    whatever the blocks (a stream file read in blocks, :meth:`regime_dash.core.streams.StreamFile.blocks`).

    Raises
    ------
    ValidationError
        The blocks do not cover ``0 .. t_steps`` in order.
    """
    sums = np.empty((t_steps, 3), dtype=np.float32)
    flat = np.empty(t_steps, dtype=np.int32)
    kernel = _kernel("stats") if HAVE_NUMBA else None
    done = 0
    for start, rewards, lots in blocks:
        n = len(rewards)
        if start != done or len(lots) != n or start + n > t_steps:
            raise ValidationError(f"a phase-1 block of {n} steps at step index {start} does not follow step "
                                  f"index {done} of {t_steps}", field="blocks", value=start)
        # the kernel's one signature takes writable C arrays (Arrow hands out read-only ones)
        _stats_into(kernel, np.require(rewards, np.float32, "CW"), np.require(lots, np.int32, "CW"),
                    sums[start:start + n], flat[start:start + n])
        done += n
    if done != t_steps:
        raise ValidationError(f"the phase-1 blocks cover {done} of {t_steps} steps", field="blocks", value=done)
    return StepStats(sums, flat)


def _stats_into(kernel, rewards: np.ndarray, lots: np.ndarray, sums: np.ndarray, flat: np.ndarray) -> None:
    """Phase 1 of these rows into ``sums`` and ``flat``, :data:`ROW_BLOCK` rows a task on every core."""
    def block(rows: slice) -> None:
        if kernel is not None:  # lanes 256 .. 287: the first warp's tree
            kernel(rewards[rows], lots[rows], sums[rows], flat[rows], np.empty((3, _BLOCK_DIM + _WARP), np.float32))
            return
        s, q, m = reference.block_reduce_stats(rewards[rows])
        sums[rows, 0], sums[rows, 1], sums[rows, 2] = s, q, m
        flat[rows] = np.count_nonzero(lots[rows] == 0, axis=1)  # rl_regime_flat_count

    _run_blocks(block, _row_blocks(len(rewards)))


def _step_inputs(stream, stats: StepStats) -> tuple[np.ndarray, ...]:
    # contiguous and of the kernels' exact dtypes: the kernels have one signature each
    return (np.ascontiguousarray(stats.sums, dtype=np.float32), np.ascontiguousarray(stats.flat, dtype=np.int32),
            np.ascontiguousarray(stream.boundary, dtype=np.bool_),
            *(np.ascontiguousarray(a, dtype=np.float32) for a in (
                stream.cooldown, stream.session_pnl_worst, stream.kelly_analytic, stream.tau_action)))


def _i32(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.int32)


#: ``ix`` of the [4, T, 1] per-step PopArt table a scan returns: it holds the
#: four slots rl_popart_v_correct reads, so the reference's function runs on all steps at once.
_POPART_IX = np.zeros(len(reference.SLOT_ORDER), dtype=np.int32)
_POPART_IX[[reference.POPART_MEAN_INDEX, reference.POPART_SIGMA_INDEX, reference.POPART_PREV_MEAN_INDEX,
            reference.POPART_PREV_SIGMA_INDEX]] = np.arange(4)


def run_cpu(stream, isv0: np.ndarray, boot: np.ndarray, layout: SlotLayout, snap_idx: np.ndarray,
            stats: StepStats | None = None, controllers: str = "single", normalized: bool = True):
    """The CPU fast replay; the backend contract of :func:`regime_dash.engine.replay_trajectory`.

    ``stats`` is phase 1 of ``stream`` when the caller already has it; ``controllers``
    the risk-stack path (:mod:`regime_dash.engine.controllers`). ``normalized=False`` leaves
    out the [T, b] pass after the scan (the normalized rewards and ``v_pred`` come back None):
    a caller that keeps only the diag frame does not pay for them.
    """
    fused = check_controllers(controllers) == "fused"
    scan = _kernel("scan")
    stats = step_stats(stream) if stats is None else stats
    r_idx, r_code, r_src = layout.reset_plan()
    t_steps = stream.steps
    isv = np.array(isv0, dtype=np.float32, copy=True)
    snap = np.empty((len(snap_idx), t_steps), dtype=np.float32).T  # [T, n], each slot's column contiguous
    popart = np.empty((t_steps, 4), dtype=np.float32)  # μ, σ, μ_old, σ_old of each step
    scan(*_step_inputs(stream, stats), isv, _i32(reference.index_table(layout)),
         np.ascontiguousarray(boot, dtype=np.float32), _i32(r_idx), _i32(r_code), _i32(r_src), _i32(snap_idx),
         stream.accounts, snap, popart, fused)
    # The [b]-wide passes in NumPy, by the reference's own functions over blocks of
    # steps: the same float32 operations per element, and nothing to compile.
    if not normalized:
        return snap, stats.flat.copy(), None, None, isv
    per_step = popart.T[:, :, None]  # [4, T, 1], read through _POPART_IX
    normalized = stream.rewards.copy()
    v_pred = None if stream.v_pred is None else stream.v_pred.copy()

    def block(rows: slice) -> None:
        reference.rl_popart_normalize_apply(normalized[rows], popart[rows, 0, None], popart[rows, 1, None])
        if v_pred is not None:
            reference.rl_popart_v_correct(v_pred[rows], per_step[:, rows], _POPART_IX)

    _run_blocks(block, _row_blocks(t_steps))
    return snap, stats.flat.copy(), normalized, v_pred, isv


def _compact_plan(layout: SlotLayout, snap_idx: np.ndarray) -> tuple[np.ndarray, ...]:
    """``(columns, r_idx, r_code, r_src, snap)``: the sweep's compact ISV.

    ``columns`` are the layout indices a compact row holds (the registry slots in
    :data:`reference.SLOT_ORDER` order first, so its slot table is
    :data:`_COMPACT_IX`); the reset plan and the snapshot indices are mapped into it.
    """
    r_idx, r_code, r_src = layout.reset_plan()
    columns = list(reference.index_table(layout))
    pos = {int(c): p for p, c in enumerate(columns)}
    for i in (*r_idx, *r_src, *snap_idx):  # slots outside the registry that a reset or the snapshot names
        if int(i) not in pos:
            pos[int(i)] = len(columns)
            columns.append(int(i))

    def remap(a):
        return np.array([pos[int(i)] for i in a], dtype=np.int32)

    return np.array(columns, dtype=np.intp), remap(r_idx), _i32(r_code), remap(r_src), remap(snap_idx)


def sweep_cpu(stream, isv0s: np.ndarray, boot_rows: np.ndarray, layout: SlotLayout, keep: Sequence[int],
              stats: StepStats | None = None, snap_idx: np.ndarray | None = None):
    """Phase 2 for S scenarios on the CPU, parallel over scenarios; same contract as ``fast_gpu.sweep_summaries``.

    Each scenario runs on a compact copy of its ISV (the slots the chain, the
    reset and the snapshot touch) and keeps its summary accumulators in
    registers (:func:`summary.fold`), written once at the end.

    Parameters
    ----------
    stream
        The replayed stream; given ``stats``, only its per-step fields and b are read, so it may
        be a :class:`~regime_dash.core.streams.StepStream`.
    isv0s, boot_rows
        float32 [S, n_isv]: each scenario's initial ISV and its boundary bootstrap.
    layout
        Slot layout.
    keep
        Scenario indices whose full snapshot is returned.
    stats
        Phase 1 of ``stream``, shared by every call of one sweep; computed here if None.
    snap_idx
        Slot indices of the kept snapshots; the layout's :data:`diag.SNAPSHOT_SLOTS` by default.
        The summary always folds the diag snapshot slots.

    Returns
    -------
    acc : float64 [S, N_METRICS + 1]
        Each scenario's accumulator row (:data:`summary.INIT` order); :func:`summary.finalize` reads it.
    kept : dict
        ``{k: float32 [T, n_snap]}`` for ``k`` in ``keep``.

    Raises
    ------
    StreamError
        ``stream`` is a StepStream and ``stats`` is None: phase 1 reads the [T, b] arrays.
    """
    from regime_dash.engine.start import snapshot_indices

    if isinstance(stream, StepStream) and stats is None:
        raise StreamError("a StepStream holds no [T, b] rewards and lots to compute phase 1 from: give its "
                          "phase 1 (stats=)", field="stream", value=type(stream).__name__)
    kernel = _kernel("sweep")
    stats = step_stats(stream) if stats is None else stats
    snap_idx = snapshot_indices(layout) if snap_idx is None else _i32(snap_idx)
    isv0s = np.asarray(isv0s, dtype=np.float32)
    boot_rows = np.asarray(boot_rows, dtype=np.float32)
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
    columns, r_idx, r_code, r_src, snap_c = _compact_plan(layout, snap_idx)
    inputs = _step_inputs(stream, stats)
    isv_c, boot_c = np.ascontiguousarray(isv0s[:, columns]), np.ascontiguousarray(boot_rows[:, columns])

    def block(rows: slice) -> None:
        kernel(*inputs, isv_c[rows], boot_c[rows], r_idx, r_code, r_src, snap_c, stream.accounts, acc[rows],
               keep_slot[rows], kept, np.empty(len(columns), dtype=np.float32), np.empty(0, dtype=np.float32))

    per_thread = -(-n_scen // _threads())  # one contiguous block of scenarios per thread
    _run_blocks(block, [slice(a, min(n_scen, a + per_thread)) for a in range(0, n_scen, per_thread)])
    return acc, {i: kept[keep_slot[i]] for i in keep}


def _threads() -> int:
    from numba import config

    return max(1, int(config.NUMBA_NUM_THREADS))  # the CPU count, or NUMBA_NUM_THREADS where set


def _row_blocks(n: int) -> list[slice]:
    return [slice(a, min(n, a + ROW_BLOCK)) for a in range(0, n, ROW_BLOCK)]


def _run_blocks(block, blocks: Sequence[slice]) -> None:
    """``block(rows)`` for every slice of ``blocks``, on one thread per core.

    The work is NumPy or a nogil kernel, so the threads run in parallel; a
    block's exception is re-raised here.
    """
    workers = min(len(blocks), _threads())
    if workers <= 1:
        for rows in blocks:
            block(rows)
        return
    with ThreadPoolExecutor(workers) as pool:
        for done in [pool.submit(block, rows) for rows in blocks]:
            done.result()


# ---- the backend ------------------------------------------------------------------------
def run(stream, isv0: np.ndarray, boot: np.ndarray, layout: SlotLayout, snap_idx: np.ndarray,
        device: str = "auto", controllers: str = "single", stats: StepStats | None = None,
        normalized: bool = True):
    """Backend of ``replay(..., engine="fast", device=...)``.

    Parameters
    ----------
    device
        ``"gpu"`` runs ``fast_gpu`` (raising :class:`EngineUnavailable` where it cannot),
        ``"cpu"`` the numba path, ``"auto"`` the GPU when it can run, else the CPU.
    controllers
        The risk-stack path, ``"single"`` or ``"fused"`` (:mod:`regime_dash.engine.controllers`).
    stats
        Phase 1 of ``stream`` (:func:`step_stats`) when the caller keeps it between replays of
        one stream (it does not depend on the config); the CPU path then skips phase 1, and the
        GPU path uploads only the [T]-sized inputs (not the [T, b] rewards and lots).
    normalized
        False: the pass after the scan is left out; the normalized rewards and ``v_pred`` come back
        None.

    Returns
    -------
    The backend contract's five arrays (see :mod:`regime_dash.engine`).

    Raises
    ------
    StreamError
        ``stream`` is a :class:`~regime_dash.core.streams.StepStream` (no [T, b] arrays) and ``stats`` is None
        or ``normalized`` is True: both read the [T, b] arrays.
    """
    check_controllers(controllers)
    if isinstance(stream, StepStream) and (stats is None or normalized):
        raise StreamError("a StepStream holds no [T, b] rewards and lots: give its phase 1 (stats=) and "
                          "normalized=False", field="stream", value=type(stream).__name__)
    if use_gpu(device):
        from regime_dash.engine import fast_gpu

        return fast_gpu.run(stream, isv0, boot, layout, snap_idx, controllers=controllers, stats=stats,
                            normalized=normalized)
    return run_cpu(stream, isv0, boot, layout, snap_idx, stats=stats, controllers=controllers,
                   normalized=normalized)


def sweep_summaries(stream, isv0s: np.ndarray, boot_rows: np.ndarray, layout: SlotLayout,
                    keep: Sequence[int], device: str = "auto", stats: StepStats | None = None):
    """A sweep's phase 2 on the device ``device`` selects; returns ``(acc, kept)`` as :func:`sweep_cpu`.

    ``stats`` (phase 1 on the CPU) is used by the CPU path only; the GPU path runs its own phase 1.
    """
    if use_gpu(device):
        from regime_dash.engine import fast_gpu

        return fast_gpu.sweep_summaries(stream, isv0s, boot_rows, layout, list(keep))
    return sweep_cpu(stream, isv0s, boot_rows, layout, keep, stats=stats)
