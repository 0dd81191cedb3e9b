"""The live run's GPU stepper: the spec's kernels, one CUDA graph launch per step.

:class:`GpuStepper` keeps the whole pipeline state (the ISV, the bootstrap row,
the reset plan, the step counter) on the device between steps. A step is, on
one stream, one launch of a CUDA graph holding the ``cuda`` engine's launch
sequence for one step (``cuda.StepLaunches.launch_step``: replay_load_step,
reset_session_state, rl_popart_normalize, rl_regime_flat_count,
rl_regime_observer, rl_iqn_action_tau_controller, rl_kelly_fraction_controller,
eval_warmup_decay, replay_store_step), and one stream synchronize. There is no
copy call around it:

* the step's inputs (rewards[b], lots[b], cooldown, worst, edge, τ, the
  boundary flag) are written by the host into row ``r`` of mapped pinned host
  buffers (``[rows, b]`` and ``[rows]``), and ``replay_load_step`` reads them
  from there itself (zero copy: with unified addressing a pinned host pointer
  is a device pointer too);
* ``replay_store_step`` writes the step's diag snapshot row and flat count into
  row ``r`` of mapped pinned host buffers, so the trajectory is in host memory
  as soon as the step has synchronized: nothing is read back, and the market's
  kelly_f is one load from that row.

``r`` is the device step counter that replay_load_step and replay_store_step
share (the store kernel advances it). When the ``rows`` rows are used up the
host keeps a copy of them as a block of the trajectory and sets the counter back
to 0 (one memset every ``rows`` steps). A block of steps whose inputs are known
ahead (:meth:`GpuStepper.steps`: a recorded stream, the Live page's 20 steps a
tick) is written into consecutive rows and run as one graph of k steps.

The kernels are the ``cuda`` engine's, so the frames and the final ISV are
bit-identical to the reference stepper's (tests/test_gpu_stepper.py checks it).

:func:`fastest_live_engine` times this stepper against the reference stepper on
the machine at hand (a few warm steps each) and returns the faster one's name;
the live run's ``engine="auto"`` (:func:`regime_dash.engine.stepper_choice.live_engine`)
uses it.

CuPy is imported only inside functions.
"""
from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

import numpy as np

from regime_dash.engine import loader
from regime_dash.engine.start import snapshot_indices
from regime_dash.engine.steppers import (KELLY_COL, ReferenceStepper, StepEngine, StepInputs, TrajectoryLog,
                                         check_block)
from regime_dash.errors import EngineUnavailable, ValidationError
from regime_dash.core.slots import SlotLayout
from regime_dash.core.streams import Stream

#: Bytes of mapped input rows the default ring holds (rows = this // (8 b), within [1, MAX_ROWS]).
RING_BYTES = 1 << 23
#: Most rows of the ring.
MAX_ROWS = 4096
#: Most steps captured in one graph; longer blocks launch it several times.
MAX_GRAPH_STEPS = 64
#: Graphs of distinct block lengths kept at once (least recently used dropped first).
GRAPH_CACHE = 8


def available() -> str | None:
    """None when the GPU stepper can run here, else why not."""
    return loader.available()


def default_rows(accounts: int) -> int:
    """Rows of the input/trajectory ring for b = ``accounts`` (see :data:`RING_BYTES`)."""
    return max(1, min(MAX_ROWS, RING_BYTES // (8 * int(accounts))))


def block_plan(row: int, rows: int, total: int) -> list[tuple[int, int]]:
    """The graph launches :meth:`GpuStepper.steps` makes for a block of ``total`` steps.

    Parameters
    ----------
    row
        The ring row the block starts at (``rows`` means the ring is full: it is emptied first).
    rows
        Rows of the ring.
    total
        Steps in the block.

    Returns
    -------
    list of (int, int)
        (ring row the launch starts at, k steps in its graph), in launch order.
        A block splits where the ring wraps or at :data:`MAX_GRAPH_STEPS`, so a
        block length that does not divide ``rows`` gives graphs of several k.
    """
    plan, done = [], 0
    while done < total:
        if row == rows:
            row = 0
        k = min(total - done, rows - row, MAX_GRAPH_STEPS)
        plan.append((row, k))
        row += k
        done += k
    return plan


class _Mapped:
    """A pinned host array (``host``) and a CuPy array over the same bytes (``device``) for the kernels.

    With unified addressing every pinned allocation is mapped into the device's
    address space (:func:`_check_mapping` makes sure), so the kernels read and
    write it in place over the bus; the device view keeps the host array alive.
    """

    def __init__(self, cp, shape: tuple[int, ...], dtype):
        import cupyx

        self.host = cupyx.empty_pinned(shape, dtype)
        self.host[...] = 0
        ptr = self.host.ctypes.data
        dev_ptr = cp.cuda.runtime.pointerGetAttributes(ptr).devicePointer
        if not dev_ptr:
            raise EngineUnavailable("the GPU stepper needs pinned host memory mapped into the device "
                                    f"(no device pointer for host address {ptr:#x})", engine="cuda")
        mem = cp.cuda.UnownedMemory(dev_ptr, max(1, self.host.nbytes), self.host, cp.cuda.Device().id)
        self.device = cp.ndarray(shape, dtype, cp.cuda.MemoryPointer(mem, 0))


def _check_mapping(cp) -> None:
    """EngineUnavailable unless the device reaches pinned host memory through the host's pointer."""
    rt = cp.cuda.runtime
    dev = cp.cuda.Device().id
    for name, attr in (("unified addressing", rt.cudaDevAttrUnifiedAddressing),
                       ("mapped host memory", rt.cudaDevAttrCanMapHostMemory)):
        if not rt.deviceGetAttribute(attr, dev):
            raise EngineUnavailable(f"the GPU stepper needs a device with {name} (device {dev} has none)",
                                    engine="cuda")


class GpuStepper:
    """A :class:`regime_dash.engine.steppers.StepEngine` on the GPU (see the module docstring).

    Parameters
    ----------
    isv0, boot
        float32 [n_isv]: the initial ISV and the row a boundary re-bootstraps from.
    layout
        Slot layout.
    accounts
        b, the batch width every step has.
    rows
        Rows of the mapped input/trajectory ring (default :func:`default_rows`).
    events
        Record CUDA events around every graph launch; :attr:`event_ms` then holds
        each launch's device milliseconds (for the benchmark; off by default).
    """

    name = "cuda"

    def __init__(self, isv0: np.ndarray, boot: np.ndarray, layout: SlotLayout, accounts: int, *,
                 rows: int | None = None, events: bool = False):
        from regime_dash.engine import cuda

        for field, v in (("accounts", accounts), ("rows", 1 if rows is None else rows)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValidationError(f"{field} must be an int >= 1, got {v!r}", field=field, value=v)
        cp = loader.cupy_module()
        _check_mapping(cp)
        b = int(accounts)
        n_rows = default_rows(b) if rows is None else int(rows)
        self._cp, self.accounts, self.rows = cp, b, n_rows
        snap_idx = snapshot_indices(layout)
        n_snap = len(snap_idx)
        mod = loader.load_module(cuda.FILES, layout, loader.PARITY_OPTIONS)
        one = Stream.make(rewards=np.zeros((1, b), np.float32), lots=np.zeros((1, b), np.int32))
        cuda.check_inputs(one, isv0, boot, layout, snap_idx)
        self._stream = cp.cuda.Stream(non_blocking=True)
        f32, i32 = np.float32, np.int32
        # the ring: inputs the load kernel reads, outputs the store kernel writes, all at the counter's row
        self._in = {k: _Mapped(cp, shape, dt) for k, shape, dt in (
            ("rewards", (n_rows, b), f32), ("lots", (n_rows, b), i32), ("cooldown", (n_rows,), f32),
            ("worst", (n_rows,), f32), ("edge", (n_rows,), f32), ("tau", (n_rows,), f32),
            ("boundary", (n_rows,), i32))}
        self._snap = _Mapped(cp, (n_rows, n_snap), f32)
        self._flat = _Mapped(cp, (n_rows,), i32)
        with self._stream:
            rep = cuda.StepLaunches(cp, mod, one, isv0, boot, layout, snap_idx, 1, b)
            d = {k: m.device for k, m in self._in.items()}
            rep.rewards_all, rep.lots_all = d["rewards"], d["lots"]
            rep.cooldown, rep.worst, rep.kelly_edge = d["cooldown"], d["worst"], d["edge"]
            rep.tau_action, rep.boundary = d["tau"], d["boundary"]
            rep.snap_out, rep.flat_out = self._snap.device, self._flat.device
            rep.rewards_out = cp.empty((n_rows, b), f32)  # the normalized rewards: the live run reads none
            self._stream.synchronize()
        self._rep = rep
        h = {k: m.host for k, m in self._in.items()}
        self._rewards_h, self._lots_h = h["rewards"], h["lots"]
        self._cool_h, self._worst_h, self._edge_h = h["cooldown"], h["worst"], h["edge"]
        self._tau_h, self._bound_h = h["tau"], h["boundary"]
        self._snap_h, self._flat_h = self._snap.host, self._flat.host
        self._r = 0  # the device counter's value, mirrored: rows used since the ring was last emptied
        self._log = TrajectoryLog(n_snap)
        self._graphs: OrderedDict[int, Any] = OrderedDict()
        self._graph1 = self._graph(1)
        self.event_ms: list[float] | None = [] if events else None
        self._events = (cp.cuda.Event(), cp.cuda.Event()) if events else None

    # ---- graphs and the ring ------------------------------------------------------------
    def _graph(self, k: int):
        """The graph of ``k`` consecutive steps (captured on first use, a few kept)."""
        g = self._graphs.get(k)
        if g is None:
            with self._stream:
                s = self._stream
                s.begin_capture()
                try:
                    for _ in range(k):
                        self._rep.launch_step()
                finally:
                    g = s.end_capture()
            self._graphs[k] = g
            if len(self._graphs) > GRAPH_CACHE:
                self._graphs.popitem(last=False)
        else:
            self._graphs.move_to_end(k)
        return g

    def capture(self, k: int) -> None:
        """Capture the graph of ``k`` consecutive steps now, so that no later :meth:`steps` call does.

        The benchmark warms the graph lengths its timed blocks use this way
        (:func:`block_plan` says which); at most :data:`GRAPH_CACHE` are kept.
        """
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= MAX_GRAPH_STEPS:
            raise ValidationError(f"k must be an int in [1, {MAX_GRAPH_STEPS}], got {k!r}", field="k", value=k)
        self._graph(int(k))

    def _launch(self, g) -> None:
        s = self._stream
        if self._events is None:
            g.launch(s)
            s.synchronize()
            return
        start, stop = self._events
        start.record(s)
        g.launch(s)
        stop.record(s)
        s.synchronize()
        self.event_ms.append(self._cp.cuda.get_elapsed_time(start, stop))

    def _spill(self) -> None:
        """Keep the ring's rows as a trajectory block and set the device counter back to row 0."""
        r = self._r
        if r:
            self._log.add(self._snap_h[:r].copy(), self._flat_h[:r].copy())
            self._rep.t_d.data.memset_async(0, 4, self._stream)
            self._r = 0

    # ---- the StepEngine API ----------------------------------------------------------------
    def step(self, rewards: np.ndarray, lots: np.ndarray, inputs: StepInputs) -> float:
        """Run one step (one graph launch); return its kelly_f."""
        if rewards.shape != (self.accounts,) or lots.shape != (self.accounts,):
            raise ValidationError(f"rewards and lots must be [{self.accounts}], got {rewards.shape} and "
                                  f"{lots.shape}", field="rewards", value=rewards.shape)
        if self._r == self.rows:
            self._spill()
        r = self._r
        self._rewards_h[r] = rewards
        self._lots_h[r] = lots
        self._cool_h[r] = inputs.cooldown
        self._worst_h[r] = inputs.worst
        self._edge_h[r] = inputs.kelly_edge
        self._tau_h[r] = inputs.tau_action
        self._bound_h[r] = inputs.boundary
        self._launch(self._graph1)
        self._r = r + 1
        return float(self._snap_h[r, KELLY_COL])

    def steps(self, block: Stream) -> None:
        """Run every row of ``block``: its rows go into the ring at once, then one graph of k steps runs."""
        check_block(block, self.accounts)
        done = 0
        for r, k in block_plan(self._r, self.rows, block.steps):
            if r != self._r:  # the plan wrapped: the ring is full
                self._spill()
            src = slice(done, done + k)
            dst = slice(r, r + k)
            self._rewards_h[dst] = block.rewards[src]
            self._lots_h[dst] = block.lots[src]
            self._cool_h[dst] = block.cooldown[src]
            self._worst_h[dst] = block.session_pnl_worst[src]
            self._edge_h[dst] = block.kelly_analytic[src]
            self._tau_h[dst] = block.tau_action[src]
            self._bound_h[dst] = block.boundary[src]
            self._launch(self._graph(k))
            self._r = r + k
            done += k

    def trajectory(self) -> tuple[np.ndarray, np.ndarray]:
        """(snapshot rows [n, n_snap], flat counts [n]) of every step so far (host memory: no device read)."""
        r = self._r
        return self._log.arrays((self._snap_h[:r].copy(), self._flat_h[:r].copy()))

    def reconfigure(self, isv: np.ndarray, boot: np.ndarray) -> None:
        """Write a new ISV and bootstrap row into the device buffers the graphs use."""
        n = self._rep.isv.shape[0]
        for name, arr in (("isv", isv), ("boot", boot)):
            if not isinstance(arr, np.ndarray) or arr.dtype != np.float32 or arr.shape != (n,):
                raise ValidationError(f"{name} must be float32 [{n}], got "
                                      f"{getattr(arr, 'dtype', type(arr).__name__)} {getattr(arr, 'shape', '')}",
                                      field=name, value=getattr(arr, "shape", None))
        self._rep.isv.set(np.ascontiguousarray(isv), stream=self._stream)
        self._rep.boot.set(np.ascontiguousarray(boot), stream=self._stream)
        self._stream.synchronize()

    @property
    def isv(self) -> np.ndarray:
        """The device ISV after the last step (a copy)."""
        out = self._rep.isv.get(stream=self._stream)
        self._stream.synchronize()
        return out


def time_steps(stepper: StepEngine, b: int, steps: int) -> float:
    """Seconds one ``stepper.step`` call takes: the median over ``steps`` calls after one untimed warm step.

    Every call runs the same fixed inputs (seeded rewards and lots, no boundary),
    so the stepper's state afterwards is of no use: pass a throwaway one.

    Parameters
    ----------
    stepper
        The step engine to time (it runs ``steps + 1`` steps).
    b
        Accounts of each step's rewards and lots (the stepper's batch width).
    steps
        Timed calls.

    Returns
    -------
    float
        The median wall seconds of one call.
    """
    rng = np.random.default_rng(0)
    rewards = rng.standard_normal(b).astype(np.float32)
    lots = (rng.random(b) < 0.5).astype(np.int32)
    inputs = StepInputs(False, np.float32(0), np.float32(-1), np.float32(0.1), np.float32(0.1), 0)
    stepper.step(rewards, lots, inputs)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        stepper.step(rewards, lots, inputs)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


_FASTEST: dict[tuple, str] = {}
#: {(layout fingerprint, b): {engine: seconds a step}} as measured by :func:`fastest_live_engine`.
TIMINGS: dict[tuple, dict[str, float]] = {}


def fastest_live_engine(isv0: np.ndarray, boot: np.ndarray, layout: SlotLayout, accounts: int,
                        steps: int = 20) -> str:
    """``"cuda"`` if the GPU stepper's step is faster than the reference stepper's here, else ``"reference"``.

    Measured once per (layout, b) and process: ``steps`` steps of each on
    throwaway steppers (their state is discarded).
    """
    key = (layout.fingerprint_hex(), int(accounts))
    if key not in _FASTEST:
        if available() is not None:
            _FASTEST[key] = "reference"
        else:
            gpu = GpuStepper(isv0, boot, layout, accounts, rows=steps + 1)
            TIMINGS[key] = {"cuda": time_steps(gpu, accounts, steps),
                            "reference": time_steps(ReferenceStepper(isv0, boot, layout), accounts, steps)}
            _FASTEST[key] = min(TIMINGS[key], key=TIMINGS[key].get)
    return _FASTEST[key]


__all__ = ["GpuStepper", "MAX_GRAPH_STEPS", "TIMINGS", "available", "block_plan", "default_rows",
           "fastest_live_engine", "time_steps"]
