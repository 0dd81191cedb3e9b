"""The options of a replay, typed: one frozen record every engine reads, checked when it is made.

:class:`ReplayOptions` replaces the ``**options`` a replay used to hand its backend
(``device``, ``graph``, ``normalized``) and the flags beside them (``log_inputs``,
``controllers``). A value that is not one of the field's own is a
:class:`~regime_dash.errors.ValidationError` naming it; an option that does not apply
to an engine is refused by that engine's backend
(:meth:`regime_dash.engine.backends.Backend.check`). Nothing here imports numba or cupy.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from regime_dash.engine.controllers import check_controllers
from regime_dash.errors import ValidationError

#: Devices of the fast engine: ``auto`` (the GPU when it can run here, else the CPU), ``cpu``, ``gpu``.
DEVICES: tuple[str, ...] = ("auto", "cpu", "gpu")
#: The backend options ``replay(..., **options)`` accepts, as :class:`ReplayOptions` fields.
BACKEND_OPTIONS: tuple[str, ...] = ("device", "graph", "normalized")
_SWITCHES = ("graph", "normalized", "log_inputs")


@dataclass(frozen=True)
class ReplayOptions:
    """How a replay runs, beside its stream and config.

    Attributes
    ----------
    device
        For engine ``fast``: one of :data:`DEVICES`.
    graph
        For engine ``cuda``: one step's launches captured in a CUDA graph and launched T times.
    normalized
        Whether the [T, b] pass after the scan runs (``Trajectory.rewards_normalized`` and
        ``v_pred_corrected``); False: a replay whose frame is all that is kept skips it, and the
        fast engine reads only the per-step inputs and phase 1.
    log_inputs
        Also log the inputs a diag does not carry (:data:`regime_dash.diag.catalogue.INPUT_COLUMNS`).
    controllers
        The risk-stack path, ``"single"`` or ``"fused"`` (:mod:`regime_dash.engine.controllers`).
    """

    device: str = "auto"
    graph: bool = False
    normalized: bool = True
    log_inputs: bool = False
    controllers: str = "single"

    def __post_init__(self) -> None:
        if not isinstance(self.device, str) or self.device not in DEVICES:
            raise ValidationError(f"device must be one of {list(DEVICES)}, got {self.device!r}",
                                  field="device", value=self.device)
        for name in _SWITCHES:
            value = getattr(self, name)
            if not isinstance(value, (bool, np.bool_)):
                raise ValidationError(f"{name} must be True or False, got {value!r}", field=name, value=value)
            object.__setattr__(self, name, bool(value))  # a NumPy bool as the Python one
        check_controllers(self.controllers)

    def replace(self, **changes: Any) -> "ReplayOptions":
        """A copy with ``changes`` applied (and checked); this one is left as it is."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def of(cls, *, log_inputs: bool = False, controllers: str = "single", **backend: Any) -> "ReplayOptions":
        """The options of ``replay(..., log_inputs=, controllers=, **backend)``'s keyword form.

        Raises
        ------
        ValidationError
            ``backend`` names an option that is not one of :data:`BACKEND_OPTIONS`, or a value is bad.
        """
        unknown = sorted(set(backend) - set(BACKEND_OPTIONS))
        if unknown:
            given = ", ".join(f"{name}={backend[name]!r}" for name in unknown)
            raise ValidationError(f"unknown replay option(s) {given}; the options are {list(BACKEND_OPTIONS)} "
                                  "(and stats=, a stream's phase 1)", field=unknown[0], value=backend[unknown[0]])
        return cls(log_inputs=log_inputs, controllers=controllers, **backend)


def checked_options(options: Any) -> ReplayOptions:
    """``options`` when it is a :class:`ReplayOptions` (None: the defaults), else a ValidationError naming it."""
    if options is None:
        return ReplayOptions()
    if not isinstance(options, ReplayOptions):
        raise ValidationError(f"options must be a ReplayOptions, got {type(options).__name__} {options!r}",
                              field="options", value=options)
    return options


__all__ = ["BACKEND_OPTIONS", "DEVICES", "ReplayOptions", "checked_options"]
