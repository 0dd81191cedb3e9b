"""ModuleStream: the base of a module's frozen input stream dataclass, on the core's schema.

The schema type, the cast and the checks are the core stream's
(:mod:`regime_dash.core.streams`: :class:`~regime_dash.core.streams.ArraySpec`,
:func:`~regime_dash.core.streams.arrays_of`, :func:`~regime_dash.core.streams.check_schema`);
this module only binds them to a dataclass with a ``SCHEMA``.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from regime_dash.errors import ValidationError
from regime_dash.core.streams import ArraySpec, arrays_of, check_schema


class ModuleStream:
    """Mixin for a module's frozen input stream dataclass; ``SCHEMA`` lists its fields.

    Construct with :meth:`make` (casts dtypes, fills defaults); the dataclass
    validates in ``__post_init__`` against ``SCHEMA``, a dict of
    :class:`~regime_dash.core.streams.ArraySpec` as the core :class:`~regime_dash.core.streams.Stream`'s,
    and raises :class:`StreamError` naming the field and the offending value.
    """

    SCHEMA: ClassVar[dict[str, ArraySpec]] = {}

    def __post_init__(self):
        validate_stream(self)

    @property
    def steps(self) -> int:
        return int(next(iter(self.arrays().values())).shape[0])

    def arrays(self) -> dict[str, np.ndarray]:
        """Present fields by name."""
        out = {name: getattr(self, name) for name in self.SCHEMA}
        return {k: v for k, v in out.items() if v is not None}

    @classmethod
    def make(cls, *, lazy: bool = False, **values: Any):
        """Build a stream: cast each field to its schema dtype, fill omitted defaults.

        An omitted ``step`` is ``0..T-1``. Values that do not survive the cast
        unchanged (a fractional action, say) raise. With ``lazy``, every problem
        is collected and raised at once as :class:`~regime_dash.errors.StreamErrors`.
        """
        kw, errors = arrays_of(cls.SCHEMA, values, lazy=lazy)
        if lazy:
            check_schema(kw, cls.SCHEMA, lazy=True, found=errors)
        return cls(**kw)


def validate_stream(stream: Any, *, lazy: bool = False) -> None:
    """Check every field of ``stream`` against its ``SCHEMA`` (see :func:`regime_dash.core.streams.check_schema`)."""
    check_schema({name: getattr(stream, name) for name in stream.SCHEMA}, stream.SCHEMA, lazy=lazy)



def steps_arg(steps: int | None, default: int, name: str = "steps", minimum: int = 1) -> int:
    """``steps`` or ``default``, checked to be a whole number >= ``minimum``."""
    if steps is None:
        return default
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < minimum:
        raise ValidationError(f"{name} must be a whole number >= {minimum}, got {steps!r}",
                              field=name, value=steps)
    return int(steps)



__all__ = ["ArraySpec", "ModuleStream", "steps_arg", "validate_stream"]
