"""ModuleConfig: the base of a module's frozen config dataclass.

The fields are declared with :func:`regime_dash.core.params.param`, the records
:class:`regime_dash.core.config.RegimeConfig` is declared with too: the app builds its
sliders from :meth:`ModuleConfig.field_specs`, the CLI parses ``--set`` and
``--grid`` through :mod:`regime_dash.core.params`. What a module config adds is its
validation: every value inside its ``[lo, hi]``, whole where ``integer``, then
the subclass's cross-field :meth:`ModuleConfig._check`.
"""
from __future__ import annotations

import math
from dataclasses import fields

import numpy as np

from regime_dash.errors import ConfigError
from regime_dash.core.params import ConfigFields, FieldSpec, float32_problem, float32_range, param


class ModuleConfig(ConfigFields):
    """Mixin for a module's frozen config dataclass (fields made with :func:`param`).

    Validation runs at construction: switches must be booleans, numbers must
    be finite, inside ``[lo, hi]`` and whole where ``integer``; then the
    subclass's :meth:`_check` runs cross-field rules.
    """

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            meta = f.metadata
            if isinstance(f.default, bool):
                if not isinstance(v, (bool, np.bool_, int)) or v not in (0, 1):
                    raise ConfigError(f"{f.name} must be a boolean, got {v!r}", field=f.name, value=v)
                object.__setattr__(self, f.name, bool(v))
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
                    or not math.isfinite(float(v)):
                raise ConfigError(f"{f.name} must be a finite number, got {v!r}", field=f.name, value=v)
            v = float(v)
            lo, hi = meta.get("lo"), meta.get("hi")
            if (lo is not None and v < lo) or (hi is not None and v > hi):
                raise ConfigError(f"{f.name}={v!r} is outside [{lo}, {hi}]", field=f.name, value=v)
            problem = float32_problem(v, bool(meta.get("integer")))
            if problem is not None:  # the kernels hold a module's values as float32 too
                raise ConfigError(f"{f.name}={v!r} {problem}, as the kernels hold it; they hold "
                                  f"{float32_range(bool(meta.get('integer')))}", field=f.name, value=v)
            if meta.get("integer"):
                if v != int(v):
                    raise ConfigError(f"{f.name}={v!r} must be a whole number", field=f.name, value=v)
                v = int(v)
            object.__setattr__(self, f.name, v)
        self._check()

    def _check(self) -> None:
        """Cross-field rules; raise :class:`ConfigError` naming the values."""



__all__ = ["FieldSpec", "ModuleConfig", "param"]
