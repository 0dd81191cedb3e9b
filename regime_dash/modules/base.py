"""The controller-module pattern: one small package per adaptive controller.

A :class:`ControllerModule` bundles what the app, the CLI, the sweep and
``check`` need to treat a controller like the regime observer. The building
blocks every module shares live in their own modules; this one gathers their
names, so a module imports them from one place:

* :mod:`regime_dash.modules.module_config`: :class:`ModuleConfig`, its fields
  declared with :func:`param` (the core's :mod:`regime_dash.core.params`, as
  :class:`~regime_dash.core.config.RegimeConfig` is).
* :mod:`regime_dash.modules.module_stream`: :class:`ModuleStream` on the core's
  :class:`~regime_dash.core.streams.ArraySpec` schema, :func:`steps_arg`.
* :mod:`regime_dash.modules.checks`: invariant results as
  :class:`regime_dash.analysis.invariants.CheckResult` and their helpers.
* :mod:`regime_dash.modules.frames`: the replay frame and its config constants.
* :mod:`regime_dash.modules.kernels`: :func:`load_kernels`, :func:`cuda_available`.
* :mod:`regime_dash.modules.controller`: the :class:`ControllerModule` record.
"""
from __future__ import annotations

from regime_dash.modules.checks import (Checks, check_result, check_skip, close_f32, f32, missing_columns,
                                        skip_if_missing)
from regime_dash.modules.controller import MODULE_ENGINES, ControllerModule
from regime_dash.modules.frames import config_columns, config_value, fold_starts, frame_of, frame_steps
from regime_dash.modules.kernels import cuda_available, load_kernels
from regime_dash.modules.module_config import FieldSpec, ModuleConfig, param
from regime_dash.modules.module_stream import ArraySpec, ModuleStream, steps_arg, validate_stream

__all__ = ["MODULE_ENGINES", "ArraySpec", "Checks", "ControllerModule", "FieldSpec", "ModuleConfig", "ModuleStream",
           "check_result", "check_skip", "close_f32", "config_columns", "config_value", "cuda_available", "f32",
           "fold_starts", "frame_of", "frame_steps", "load_kernels", "missing_columns", "param",
           "skip_if_missing", "steps_arg", "validate_stream"]
