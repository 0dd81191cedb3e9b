"""The run store's lock: one exclusive lock a store, held while a change is committed.

Ingests, deletes, a followed run's commits, label and layout changes and quarantine moves
each take it for their commit step only (parsing and reading run without it). It is an OS
lock on an open descriptor of ``<store>/.lock`` (:mod:`filelock`, ``flock`` on POSIX): the
kernel drops it when its process dies, so a writer killed with ``-9`` never blocks the next.
Not reentrant: a holder never takes it again.
"""
from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType

from filelock import FileLock

from regime_dash.store.paths import LOCK_FILE

__all__ = ["StoreLock"]


class StoreLock:
    """The lock of the store at ``root``, as a context manager (``with StoreLock(root): ...``).

    The store folder is created on entry when it is not there. Each ``with`` takes the lock
    afresh on a descriptor of its own and releases it on exit.
    """

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self._held: FileLock | None = None

    @property
    def path(self) -> Path:
        """The lock file."""
        return self.root / LOCK_FILE

    def __enter__(self) -> "StoreLock":
        self.root.mkdir(parents=True, exist_ok=True)
        held = FileLock(self.path)
        held.acquire()
        self._held = held
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        held, self._held = self._held, None
        if held is not None:
            held.release()
