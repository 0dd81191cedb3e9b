"""``replay(stream, config, engine=...)``: one entry point, several backends, one typed interface.

A replay is :func:`prepare` (the stream, the engine, its :class:`ReplayOptions`, checked once;
the stream's phase 1 held) then :meth:`Prepared.replay` of a config (a :class:`Trajectory`)
or :meth:`Prepared.sweep` of many. Each engine is a :class:`Backend` class in the registry
:data:`ENGINES` (:mod:`regime_dash.engine.backends`); every backend receives the same
already-checked inputs (a validated stream and a :class:`StartState`) and returns a
:class:`BackendOutput`, which is turned into the frame here. :func:`replay` and
:func:`replay_trajectory` keep their keyword form (``**options``: ``device``, ``graph``,
``normalized``, and ``stats``, a stream's phase 1) as thin wrappers over it.
"""
from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from regime_dash.core.config import RegimeConfig
from regime_dash.core.slots import SlotLayout
from regime_dash.core.streams import Stream
from regime_dash.engine.backends import (AUTO_ORDER, ENGINES, Backend, BackendOutput, backend, engine_status,
                                         resolve_engine, usable_backend)
from regime_dash.engine.controllers import CONTROLLERS, check_controllers
from regime_dash.engine.logged_inputs import input_columns, step_sums
from regime_dash.engine.options import DEVICES, ReplayOptions
from regime_dash.engine.prepared import Prepared, Trajectory, prepare
from regime_dash.engine.start import StartState, initial_isv, snapshot_indices


def _keyword_form(options: Mapping[str, Any], log_inputs: bool, controllers: str) -> tuple[ReplayOptions, Any]:
    """``(ReplayOptions, stats)`` of the keyword form ``**options`` (read, never changed)."""
    backend_options = {k: v for k, v in options.items() if k != "stats"}
    return (ReplayOptions.of(log_inputs=log_inputs, controllers=controllers, **backend_options),
            options.get("stats"))


def replay_trajectory(stream: Stream, config: RegimeConfig | None = None, engine: str = "reference",
                      isv: Mapping[str, float] | None = None, layout: SlotLayout | None = None,
                      log_inputs: bool = False, controllers: str = "single", **options: Any) -> Trajectory:
    """Like :func:`replay`, returning the full :class:`Trajectory` (``rewards_normalized`` None where
    the normalize pass is left out): ``prepare(...).replay(config)``."""
    typed, stats = _keyword_form(options, log_inputs, controllers)
    return prepare(stream, engine, typed, isv=isv, layout=layout, stats=stats).replay(config)


def replay(stream: Stream, config: RegimeConfig | None = None, engine: str = "reference",
           isv: Mapping[str, float] | None = None, layout: SlotLayout | None = None,
           log_inputs: bool = False, controllers: str = "single", **options: Any) -> pd.DataFrame:
    """Replay the regime pipeline over ``stream``; one frame row per step.

    Parameters
    ----------
    stream
        The inputs (see :mod:`regime_dash.core.streams`); a :class:`~regime_dash.core.streams.StepStream` (its
        per-step fields only) on engine ``fast`` given its phase 1 (``stats=``).
    config
        What-if config; defaults to the spec's values.
    engine
        ``reference`` (NumPy oracle), ``cuda`` (spec kernels per step),
        ``fast`` (two-phase) or ``auto``.
    isv
        Initial slot values by slot name, applied after bootstrap and config.
    layout
        Slot layout (e.g. from :func:`regime_dash.core.slots.import_rust`).
    log_inputs
        Also log the inputs a diag does not carry (:data:`regime_dash.diag.catalogue.INPUT_COLUMNS`: the Kelly edge,
        IQN τ before its clamp, each step's batch sums), so every output can be re-derived from the file.
    controllers
        The risk-stack path: ``"single"`` (the single controller kernels, launch order
        step 7) or ``"fused"`` (``rl_fused_controllers``, step 8, with the config's mirror
        switches); :mod:`regime_dash.engine.controllers`. Both give the same bits while
        the mirror switches are on.
    **options
        Backend options, the fields of :class:`ReplayOptions` (``device=`` for ``fast``, ``graph=True`` for
        ``cuda``), and ``stats=`` (phase 1) for ``fast``; an unknown one is a ``ValidationError`` naming it.
        The typed form of the same replay: ``prepare(stream, engine, ReplayOptions(...)).replay(config)``.

    Returns
    -------
    pandas.DataFrame
        ``step``, ``fold``, ``phase``, the dotted diag columns, the config columns (F2/F4/F5, models,
        mirrors and the config slots; :data:`regime_dash.diag.catalogue.CONFIG_COLUMNS`), the input columns
        with ``log_inputs`` and, on the fused path,
        :data:`regime_dash.diag.catalogue.FUSED_COLUMN`. ``attrs`` carries ``layout_fingerprint``,
        ``engine`` and ``controllers``.
    """
    typed, stats = _keyword_form({"normalized": False, **options}, log_inputs, controllers)  # the frame alone
    return prepare(stream, engine, typed, isv=isv, layout=layout, stats=stats).replay(config).frame


__all__ = ["AUTO_ORDER", "CONTROLLERS", "DEVICES", "ENGINES", "Backend", "BackendOutput", "Prepared", "ReplayOptions",
           "StartState", "Trajectory", "backend", "check_controllers", "engine_status", "initial_isv",
           "input_columns", "prepare", "replay", "replay_trajectory", "resolve_engine", "snapshot_indices",
           "step_sums", "usable_backend"]
