"""The live run's GPU stepper: the spec's kernels, one CUDA graph launch per step.

:class:`GpuStepper` keeps the whole pipeline state (the ISV, the bootstrap row,
the reset plan) on the device between steps. One step is, on one stream: one
asynchronous host-to-device copy of the step's inputs (rewards[b], lots[b],
cooldown, worst, edge, τ, the boundary flag, packed in one pinned buffer); one
launch of a CUDA graph holding the ``cuda`` engine's launch sequence for one
step (``cuda._Replay.launch_step``: replay_load_step, reset_session_state,
rl_popart_normalize, rl_regime_flat_count, rl_regime_observer,
rl_iqn_action_tau_controller, rl_kelly_fraction_controller, eval_warmup_decay,
replay_store_step); and one asynchronous device-to-host copy of what the
simulator reads back, the diag snapshot row and the flat count (another pinned
buffer). CuPy refuses host copies inside a stream capture, so the two copies
sit around the graph rather than in it. The
kernels are the ``cuda`` engine's, so a step is bit-identical to the reference
stepper's (tests/test_gpu_stepper.py checks it).

:func:`fastest_live_engine` times this stepper against the reference stepper on
the machine at hand (a few warm steps each) and returns the faster one's name;
the live run's ``engine="auto"``
(:func:`regime_dash.engine.steppers.live_engine`) uses it.

CuPy is imported only inside functions.
"""
from __future__ import annotations

import ctypes
import time

import numpy as np

from regime_dash.engine import loader, snapshot_indices
from regime_dash.engine.steppers import ReferenceStepper, StepInputs
from regime_dash.errors import ValidationError
from regime_dash.slots import SlotLayout
from regime_dash.streams import Stream


def available() -> str | None:
    """None when the GPU stepper can run here, else why not."""
    return loader.available()


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
    """

    name = "cuda"

    def __init__(self, isv0: np.ndarray, boot: np.ndarray, layout: SlotLayout, accounts: int):
        from regime_dash.engine import cuda

        if isinstance(accounts, bool) or not isinstance(accounts, (int, np.integer)) or accounts < 1:
            raise ValidationError(f"accounts must be an int >= 1, got {accounts!r}", field="accounts",
                                  value=accounts)
        cp = loader.cupy_module()
        import cupyx

        b = int(accounts)
        self._cp, self.accounts = cp, b
        snap_idx = snapshot_indices(layout)
        n_snap = len(snap_idx)
        mod = loader.load_module(cuda.FILES, layout, loader.PARITY_OPTIONS)
        one = Stream.make(rewards=np.zeros((1, b), np.float32), lots=np.zeros((1, b), np.int32))
        cuda.check_inputs(one, isv0, boot, layout, snap_idx)
        self._stream = cp.cuda.Stream(non_blocking=True)
        with self._stream:
            rep = cuda._Replay(cp, mod, one, isv0, boot, layout, snap_idx, 1, b)
            # inputs: rewards f32[b] | lots i32[b] | cooldown, worst, edge, τ f32[4] | boundary, t i32[2]
            n_in = 8 * b + 24
            self._in_d = cp.empty(n_in, np.uint8)
            self._in_h = cupyx.empty_pinned(n_in, np.uint8)
            rep.rewards_all = self._in_d[:4 * b].view(np.float32).reshape(1, b)
            rep.lots_all = self._in_d[4 * b:8 * b].view(np.int32).reshape(1, b)
            scal = self._in_d[8 * b:8 * b + 16].view(np.float32)
            rep.cooldown, rep.worst, rep.kelly_edge, rep.tau_action = (scal[k:k + 1] for k in range(4))
            ints = self._in_d[8 * b + 16:].view(np.int32)
            rep.boundary, rep.t_d = ints[0:1], ints[1:2]  # t stays 0: every step is step 0 of a 1-step stream
            self._rewards_h = self._in_h[:4 * b].view(np.float32)
            self._lots_h = self._in_h[4 * b:8 * b].view(np.int32)
            self._scal_h = self._in_h[8 * b:8 * b + 16].view(np.float32)
            self._ints_h = self._in_h[8 * b + 16:].view(np.int32)
            # outputs: snapshot row f32[n] | flat count i32[1]
            n_out = 4 * n_snap + 4
            out_d = cp.empty(n_out, np.uint8)
            self._out_h = cupyx.empty_pinned(n_out, np.uint8)
            rep.snap_out = out_d[:4 * n_snap].view(np.float32).reshape(1, n_snap)
            rep.flat_out = out_d[4 * n_snap:].view(np.int32)
            self._snap_h = self._out_h[:4 * n_snap].view(np.float32)
            self._flat_h = self._out_h[4 * n_snap:].view(np.int32)
            self._rep = rep
            self._out_d = out_d
            self._n_in, self._n_out = n_in, n_out
            self._graph = rep.capture()  # cupy captures no host copies: they go around the launch
        self._ints_h[1] = 0

    def step(self, rewards: np.ndarray, lots: np.ndarray, inputs: StepInputs) -> tuple[np.ndarray, int]:
        """Run one step (one graph launch); return (snapshot row float32 [n], flat count)."""
        if rewards.shape != (self.accounts,) or lots.shape != (self.accounts,):
            raise ValidationError(f"rewards and lots must be [{self.accounts}], got {rewards.shape} and "
                                  f"{lots.shape}", field="rewards", value=rewards.shape)
        self._rewards_h[:] = rewards
        self._lots_h[:] = lots
        self._scal_h[:] = (inputs.cooldown, inputs.worst, inputs.kelly_edge, inputs.tau_action)
        self._ints_h[0] = 1 if inputs.boundary else 0
        s = self._stream
        self._in_d.data.copy_from_host_async(ctypes.c_void_p(self._in_h.ctypes.data), self._n_in, s)
        self._graph.launch(s)
        self._out_d.data.copy_to_host_async(ctypes.c_void_p(self._out_h.ctypes.data), self._n_out, s)
        s.synchronize()
        return self._snap_h.copy(), int(self._flat_h[0])

    @property
    def isv(self) -> np.ndarray:
        """The device ISV after the last step (a copy)."""
        with self._stream:
            out = self._cp.asnumpy(self._rep.isv)
            self._stream.synchronize()
        return out


def _time_steps(stepper, b: int, steps: int) -> float:
    """Seconds a step of ``stepper`` takes (median over ``steps`` steps after one warm step)."""
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
            TIMINGS[key] = {"cuda": _time_steps(GpuStepper(isv0, boot, layout, accounts), accounts, steps),
                            "reference": _time_steps(ReferenceStepper(isv0, boot, layout), accounts, steps)}
            _FASTEST[key] = min(TIMINGS[key], key=TIMINGS[key].get)
    return _FASTEST[key]


__all__ = ["GpuStepper", "TIMINGS", "available", "fastest_live_engine"]
