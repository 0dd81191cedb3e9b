"""The per-step CUDA engine: the spec's kernels launched each step, as the trainer does.

The ISV buffer lives on the device, filled from the bootstrap plus the ``isv``
overrides (``isv0``). The whole stream goes to the device once; each step,
``replay_load_step`` moves step t into fixed per-step buffers (the trainer's
rewards[b], lots[b], V_pred[b]) and writes the step's scalar inputs into the
ISV, the spec kernels run in the reference's launch order, and
``replay_store_step`` copies the diag slots into a [T, n] device buffer and
advances the device step counter. The trajectory is read back once at the end:
there is no host write or sync per step. With ``graph=True`` one step's launch
sequence is captured in a CUDA graph and the graph is launched T times.

Launch order per step (reference.scalar_step): stream inputs →
reset_session_state (acts only at a boundary) → rl_popart_normalize →
rl_popart_v_correct (with V_pred) → rl_regime_flat_count → rl_regime_observer →
rl_iqn_action_tau_controller → rl_kelly_fraction_controller (or, on the fused
path, the one launch of rl_fused_controllers in their place) → eval_warmup_decay
→ snapshot. rl_popart_* touch only PopArt slots, which none of the later
kernels read, so running them first gives the same state as the spec's
insertion point after the observer.

CuPy is imported only inside functions, so importing this module never needs it.
"""
from __future__ import annotations

import numpy as np

from regime_dash.engine import loader
from regime_dash.engine.controllers import check_controllers
from regime_dash.errors import StreamError, ValidationError
from regime_dash.core.slots import SlotLayout
from regime_dash.core.streams import SCHEMA, STEP_FIELDS, StepStream, Stream, check_arrays, check_schema

#: The .cu files of this engine (one NVRTC module).
FILES: tuple[str, ...] = (
    "replay_io.cu",
    "reset_session_state.cu",
    "rl_popart_normalize.cu",
    "rl_popart_v_correct.cu",
    "rl_regime_flat_count.cu",
    "rl_regime_observer.cu",
    "rl_iqn_action_tau_controller.cu",
    "rl_kelly_fraction_controller.cu",
    "rl_fused_controllers.cu",
    "eval_warmup_decay.cu",
)
#: Kernels this engine launches.
KERNELS: tuple[str, ...] = (
    "replay_load_step", "reset_session_state", "rl_popart_normalize", "rl_popart_v_correct",
    "rl_regime_flat_count", "rl_regime_observer", "rl_iqn_action_tau_controller",
    "rl_kelly_fraction_controller", "rl_fused_controllers", "eval_warmup_decay", "replay_store_step",
)
#: Threads of the reduction kernels; the reference's reduction order assumes 256.
BLOCK = 256


def available() -> str | None:
    """None when this engine can run here, else why not."""
    return loader.available()


def check_inputs(stream: Stream, isv0: np.ndarray, boot: np.ndarray, layout: SlotLayout,
                 snap_idx: np.ndarray, per_step: bool = False) -> tuple[int, int]:
    """Check a backend call's arrays before anything goes to the device; return (T, b).

    ``per_step``: the call reads only the per-step fields (phase 1 given, no normalize pass),
    so a :class:`~regime_dash.core.streams.StepStream` is accepted.

    Streams are validated when built, but a backend can be called directly, with
    arrays changed after validation or sliced into non-contiguous views, so the
    device engines check dtype, shape and contiguity here.

    Raises
    ------
    StreamError
        A stream field has the wrong dtype, shape or memory order, or T or b is 0.
    ValidationError
        ``isv0``, ``boot`` or ``snap_idx`` is not what the layout needs.
    """
    if isinstance(stream, StepStream) and per_step:
        t_steps, b = stream.steps, stream.accounts
        check_schema(stream.arrays(), {name: SCHEMA[name] for name in STEP_FIELDS}, values=False)
    elif not isinstance(stream, Stream):
        raise StreamError(f"stream must be a regime_dash.Stream, got {type(stream).__name__}",
                          field="stream", value=type(stream).__name__)
    else:
        t_steps, b = check_arrays(stream)
    for name, arr in stream.arrays().items():
        if not arr.flags.c_contiguous:
            raise StreamError(f"{name} must be C-contiguous (strides {arr.strides}); "
                              f"pass np.ascontiguousarray({name})", field=name, value=arr.strides)
    n = layout.size
    for name, arr in (("isv0", isv0), ("boot", boot)):
        if not isinstance(arr, np.ndarray) or arr.dtype != np.float32 or arr.shape != (n,):
            raise ValidationError(
                f"{name} must be float32 [{n}] (the layout's ISV size), got "
                f"{getattr(arr, 'dtype', type(arr).__name__)} {getattr(arr, 'shape', '')}",
                field=name, value=getattr(arr, "shape", None))
    if (not isinstance(snap_idx, np.ndarray) or snap_idx.dtype != np.int32 or snap_idx.ndim != 1
            or len(snap_idx) == 0):
        raise ValidationError(f"snap_idx must be a non-empty int32 [n] array, got "
                              f"{getattr(snap_idx, 'dtype', type(snap_idx).__name__)} "
                              f"{getattr(snap_idx, 'shape', '')}", field="snap_idx",
                              value=getattr(snap_idx, "shape", None))
    bad = (snap_idx < 0) | (snap_idx >= n)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise ValidationError(f"snap_idx[{j}] = {int(snap_idx[j])} is outside the ISV [0, {n})",
                              field="snap_idx", value=int(snap_idx[j]))
    return t_steps, b


class StepLaunches:
    """Device buffers and the launch sequence of one per-step replay."""

    def __init__(self, cp, mod, stream: Stream, isv0, boot, layout, snap_idx, t_steps, b, fused=False):
        i32, f32 = np.int32, np.float32
        self.cp, self.mod = cp, mod
        self.fused = bool(fused)  # the risk-stack path: rl_fused_controllers instead of the single kernels
        for name in KERNELS:  # resolve every function now, not during a graph capture
            mod[name]
        self.t_steps, self.b = t_steps, b
        self.n_snap = len(snap_idx)
        self.has_v = stream.v_pred is not None
        r_idx, r_code, r_src = layout.reset_plan()
        d = cp.asarray
        self.rewards_all = d(stream.rewards)
        self.lots_all = d(stream.lots)
        self.v_pred_all = d(stream.v_pred) if self.has_v else cp.zeros(1, f32)
        self.cooldown = d(stream.cooldown)
        self.worst = d(stream.session_pnl_worst)
        self.kelly_edge = d(stream.kelly_analytic)
        self.tau_action = d(stream.tau_action)
        self.boundary = d(stream.boundary.astype(i32))
        self.isv = d(isv0).copy()
        self.boot = d(boot)
        self.r_idx, self.r_code, self.r_src = d(r_idx), d(r_code), d(r_src)
        self.n_reset = i32(len(r_idx))
        self.snap_idx = d(snap_idx)
        self.rewards_cur = cp.empty(b, f32)
        self.lots_cur = cp.empty(b, i32)
        self.v_pred_cur = cp.empty(b if self.has_v else 1, f32)
        self.reset_active = cp.zeros(1, i32)
        self.flat_count = cp.zeros(1, i32)
        self.t_d = cp.zeros(1, i32)
        self.rewards_out = cp.empty((t_steps, b), f32)
        self.v_pred_out = cp.empty((t_steps, b) if self.has_v else 1, f32)
        self.flat_out = cp.empty(t_steps, i32)
        self.snap_out = cp.empty((t_steps, self.n_snap), f32)

    def launch_step(self) -> None:
        """Enqueue one step's kernels on the current stream (no host sync)."""
        m, b = self.mod, np.int32(self.b)
        has_v = np.int32(self.has_v)
        one = (1,)
        m["replay_load_step"](one, (BLOCK,), (
            self.t_d, self.rewards_all, self.lots_all, self.v_pred_all, has_v, self.cooldown,
            self.worst, self.kelly_edge, self.tau_action, self.boundary, self.rewards_cur,
            self.lots_cur, self.v_pred_cur, self.reset_active, self.isv, b))
        m["reset_session_state"](one, one, (
            self.isv, self.boot, self.r_idx, self.r_code, self.r_src, self.n_reset,
            self.reset_active))
        # spec: (block_dim * 3 + 3) floats of shared memory
        m["rl_popart_normalize"](one, (BLOCK,), (self.rewards_cur, self.isv, b),
                                 shared_mem=(BLOCK * 3 + 3) * 4)
        if self.has_v:
            m["rl_popart_v_correct"](((self.b + BLOCK - 1) // BLOCK,), (BLOCK,),
                                     (self.v_pred_cur, self.isv, b))
        # spec: <<<1, 256, 256 * sizeof(int)>>>
        m["rl_regime_flat_count"](one, (BLOCK,), (self.lots_cur, self.flat_count, b),
                                  shared_mem=BLOCK * 4)
        m["rl_regime_observer"](one, one, (self.isv, self.flat_count, b))
        if self.fused:  # launch order step 8: one launch in place of the single controllers
            m["rl_fused_controllers"](one, one, (self.isv,))
        else:
            m["rl_iqn_action_tau_controller"](one, one, (self.isv,))
            m["rl_kelly_fraction_controller"](one, one, (self.isv,))
        m["eval_warmup_decay"](one, one, (self.isv,))
        m["replay_store_step"](one, (BLOCK,), (
            self.t_d, self.rewards_cur, self.v_pred_cur, has_v, self.flat_count, self.isv,
            self.snap_idx, np.int32(self.n_snap), self.rewards_out, self.v_pred_out,
            self.flat_out, self.snap_out, b))

    def capture(self):
        """One step's launch sequence as a CUDA graph (the current stream must not be the null stream)."""
        s = self.cp.cuda.get_current_stream()
        s.begin_capture()
        try:
            self.launch_step()
        finally:
            g = s.end_capture()
        return g

    def run_all(self, graph: bool) -> None:
        if graph:
            g = self.capture()
            s = self.cp.cuda.get_current_stream()
            for _ in range(self.t_steps):
                g.launch(s)
        else:
            for _ in range(self.t_steps):
                self.launch_step()

    def results(self):
        cp = self.cp
        return (cp.asnumpy(self.snap_out), cp.asnumpy(self.flat_out), cp.asnumpy(self.rewards_out),
                cp.asnumpy(self.v_pred_out) if self.has_v else None, cp.asnumpy(self.isv))


def run(stream: Stream, isv0: np.ndarray, boot: np.ndarray, layout: SlotLayout,
        snap_idx: np.ndarray, *, graph: bool = False,
        options: tuple[str, ...] = loader.PARITY_OPTIONS, controllers: str = "single"):
    """Replay ``stream`` with the spec kernels launched per step (the backend contract).

    Parameters
    ----------
    stream, isv0, boot, layout, snap_idx
        As for every backend (see :mod:`regime_dash.engine`).
    graph
        Capture one step's launches in a CUDA graph and launch it T times.
    options
        NVRTC options; the default compiles with ``--fmad=false`` for parity.
    controllers
        The risk-stack path: ``"single"`` or ``"fused"`` (:mod:`regime_dash.engine.controllers`).

    Returns
    -------
    (snap float32 [T, n], flat int32 [T], rewards_normalized float32 [T, b],
    v_pred_corrected float32 [T, b] or None, isv_final float32 [n_isv])
    """
    fused = check_controllers(controllers) == "fused"
    t_steps, b = check_inputs(stream, isv0, boot, layout, snap_idx)
    if not isinstance(graph, (bool, np.bool_)):
        raise ValidationError(f"graph must be True or False, got {graph!r}", field="graph", value=graph)
    cp = loader.cupy_module()
    mod = loader.load_module(FILES, layout, options)
    with cp.cuda.Stream(non_blocking=True) as s:
        rep = StepLaunches(cp, mod, stream, isv0, boot, layout, snap_idx, t_steps, b, fused)
        rep.run_all(bool(graph))
        out = rep.results()
        s.synchronize()
    return out


def per_step_us(stream: Stream, isv0: np.ndarray, boot: np.ndarray, layout: SlotLayout,
                snap_idx: np.ndarray, *, graph: bool, repeats: int = 3,
                options: tuple[str, ...] = loader.PARITY_OPTIONS) -> float:
    """Measured µs per step of this engine on ``stream`` (best of ``repeats``; CUDA events).

    Compiles and (with ``graph``) captures before timing; each timed repeat
    replays all T steps from ``isv0`` and ends with one device sync.
    """
    t_steps, b = check_inputs(stream, isv0, boot, layout, snap_idx)
    cp = loader.cupy_module()
    mod = loader.load_module(FILES, layout, options)
    best = float("inf")
    with cp.cuda.Stream(non_blocking=True) as s:
        rep = StepLaunches(cp, mod, stream, isv0, boot, layout, snap_idx, t_steps, b)
        g = rep.capture() if graph else None
        d_isv0 = cp.asarray(isv0)
        for _ in range(repeats):
            rep.t_d.fill(0)
            rep.isv[...] = d_isv0
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record(s)
            for _ in range(t_steps):
                if g is not None:
                    g.launch(s)
                else:
                    rep.launch_step()
            stop.record(s)
            stop.synchronize()
            best = min(best, cp.cuda.get_elapsed_time(start, stop) * 1e3 / t_steps)
    return best
