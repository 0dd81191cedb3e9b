"""The exceptions regime-dash raises at its edges.

A small hierarchy in the spirit of pandera: every error carries the data that
locates the problem (path, line, field, value) as attributes, and its message
quotes the offending value, so a caller can both print it and act on it.
"""
from __future__ import annotations

from typing import Any


class RegimeDashError(Exception):
    """Base class of every error regime-dash raises on purpose.

    A subclass declares the data it carries as annotated class attributes with
    their defaults; the keywords of the same names set them (every one lands on
    the instance, in declaration order, so ``vars(error)`` lists them all), and
    any other keyword is a :class:`TypeError`: a misspelt field must not vanish.
    """

    def __init__(self, message: str = "", **data: Any):
        carried = [name for cls in reversed(type(self).__mro__) for name in vars(cls).get("__annotations__", {})]
        unknown = sorted(set(data) - set(carried))
        if unknown:
            raise TypeError(f"{type(self).__name__} carries no {', '.join(unknown)}")
        super().__init__(message)
        for name in carried:
            setattr(self, name, data[name] if name in data else getattr(type(self), name))

    def __reduce__(self):
        # Exception's own reduce calls cls(*self.args), which a subclass with its own __init__
        # signature (ParseError, StreamErrors) cannot take; errors cross processes (dask pickles
        # them in distributed.gather_shards), so rebuild without calling __init__ at all.
        return _rebuild, (type(self), self.args, dict(vars(self)))


def _rebuild(cls: type[RegimeDashError], args: tuple, state: dict[str, Any]) -> RegimeDashError:
    """Unpickle a :class:`RegimeDashError`: its args and carried data as they were, no ``__init__`` run."""
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class ValidationError(RegimeDashError, ValueError):
    """A value handed to regime-dash is not acceptable.

    Parameters
    ----------
    message
        What is wrong, in words, quoting the bad value.
    field
        The name of the field, argument or column at fault.
    value
        The value that was rejected.
    """

    field: str | None = None
    value: Any = None


class ConfigError(ValidationError):
    """A RegimeConfig field (or a ``--set FIELD=VALUE``) is out of its domain."""


class StreamError(ValidationError):
    """A replay input stream has the wrong shape, dtype or values."""


class StreamErrors(StreamError):
    """Every problem a lazy stream validation found, raised at once (pandera's ``SchemaErrors``).

    Parameters
    ----------
    errors
        The problems, each a :class:`StreamError` naming its field and value;
        ``field`` and ``value`` are the first one's.
    """

    def __init__(self, errors: list[StreamError]):
        self.errors = list(errors)
        lines = "".join(f"\n  - {e}" for e in self.errors)
        super().__init__(f"{len(self.errors)} problem(s) in the stream:{lines}", field=self.errors[0].field,
                         value=self.errors[0].value)


class SlotLayoutError(ValidationError):
    """An ISV slot layout (or an imported ``isv_slots.rs``) is unusable."""


class ParseError(RegimeDashError):
    """One input line could not be parsed; carries where and why.

    Parameters
    ----------
    line
        1-based line number in the source file.
    reason
        Why the line was rejected.
    path
        The source file, when known.
    """

    line: int
    reason: str
    path: str | None = None

    def __init__(self, reason: str, *, line: int, path: str | None = None):
        where = f"{path}:{line}" if path else f"line {line}"
        super().__init__(f"{where}: {reason}", line=line, reason=reason, path=path)


class IngestError(RegimeDashError):
    """A whole file could not be ingested (unreadable, not JSONL at all)."""

    path: str | None = None


class NotDiagError(IngestError):
    """A file, an upload or a stored run is not a diag (:mod:`regime_dash.ingest.diag_rows`).

    Parameters
    ----------
    message
        ``'<name>' is not a diag file: <reason>``, in one line.
    path
        The file, upload or run it names.
    reason
        Why, in words (no lines; no JSON object line; no diag field; no ``step``).
    """

    reason: str | None = None


class StoreError(RegimeDashError):
    """The run store refused an operation (unknown run, bad name, ...)."""

    run_id: str | None = None
    path: str | None = None


class EngineUnavailable(RegimeDashError):
    """The requested replay engine cannot run here (no cupy, no CUDA device, no numba)."""

    engine: str | None = None


class KernelCompileError(RegimeDashError):
    """NVRTC/nvcc rejected a kernel; the log cites the real ``kernels/*.cu`` file and line."""

    kernel: str | None = None
    log: str = ""


class ExportError(RegimeDashError):
    """A view could not be written as a download (CSV or Parquet); says which column and why.

    Parameters
    ----------
    message
        What failed, quoting the column and the reason.
    column
        The column that could not be written, when one is to blame.
    format
        ``parquet`` or ``csv``.
    """

    column: str | None = None
    format: str | None = None
