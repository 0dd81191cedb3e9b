"""Which step engine a live run drives: :func:`live_engine` names it, :func:`make_stepper` makes it.

The choice sits above both kinds of stepper: :mod:`regime_dash.engine.steppers` (the
reference and backend steppers, and what every stepper shares) and
:mod:`regime_dash.engine.gpu_stepper` (the CUDA-graph stepper, built on the former).
Kept apart from them, the GPU stepper can import the shared parts without the shared
module importing it back.
"""
from __future__ import annotations

import numpy as np

from regime_dash.core.config import RegimeConfig
from regime_dash.engine.backends import engine_status, resolve_engine
from regime_dash.engine.start import initial_isv
from regime_dash.engine.steppers import BackendStepper, ReferenceStepper, StepEngine
from regime_dash.core.slots import DEFAULT_LAYOUT, SlotLayout


def live_engine(engine: str = "auto", *, accounts: int = 64, layout: SlotLayout | None = None) -> str:
    """The engine a live run uses for ``engine``: ``auto`` is the faster stepper on this machine.

    ``auto`` times the GPU stepper (:class:`regime_dash.engine.gpu_stepper.GpuStepper`,
    the ``cuda`` kernels in one CUDA graph a step) against the reference stepper
    at b = ``accounts`` (:func:`~regime_dash.engine.gpu_stepper.fastest_live_engine`,
    once per process) and picks the faster; reference where there is no GPU.
    """
    if engine == "auto":
        if engine_status().get("cuda") is not None:
            return "reference"
        from regime_dash.engine.gpu_stepper import fastest_live_engine

        layout = (layout or DEFAULT_LAYOUT).validate()
        isv0, boot = initial_isv(RegimeConfig(), None, layout)
        return fastest_live_engine(isv0, boot, layout, int(accounts))
    return resolve_engine(engine)


def make_stepper(engine: str, isv0: np.ndarray, boot: np.ndarray, layout: SlotLayout,
                 accounts: int | None = None) -> StepEngine:
    """A :class:`StepEngine` for the engine name (``auto`` as in :func:`live_engine`).

    ``cuda`` with ``accounts`` given is the GPU stepper; without, or for ``fast``,
    the backend stepped through one-step replays (:class:`BackendStepper`).
    """
    name = live_engine(engine, accounts=accounts or 64, layout=layout)
    if name == "reference":
        return ReferenceStepper(isv0, boot, layout)
    if name == "cuda" and accounts is not None:
        from regime_dash.engine.gpu_stepper import GpuStepper

        return GpuStepper(isv0, boot, layout, int(accounts))
    return BackendStepper(name, isv0, boot, layout)


__all__ = ["live_engine", "make_stepper"]
