"""Who writes a followed run: one claim a run name, held by its follower for as long as it runs.

A follower claims the run's name when it starts (:func:`take`, under the store's lock, together
with the check that no other run has the name), so two followers never write one run and two
followers of different files never end up with one name: the second is refused, the message
naming the first (its pid, host, start and file).

A claim is ``<store>/.claims/<name>.json``, holding who claimed it, with an OS lock (``flock``)
on an open descriptor of it for the claim's life. The kernel drops that lock when the process
dies, so a follower killed with ``-9`` never keeps its run claimed: the next follower takes the
claim over. A clean end releases it (:meth:`Claim.release`): the file is removed under the
store's lock, as claims are only taken under it, so no taker opens a file being removed.
:func:`held` lists the claims held now (``doctor`` leaves the runs of live followers alone).
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
from dataclasses import asdict, dataclass
from pathlib import Path

from regime_dash.errors import StoreError
from regime_dash.store.lock import StoreLock
from regime_dash.store.metadata import now
from regime_dash.store.paths import CLAIMS, sanitize_name

__all__ = ["Claim", "ClaimedRun", "Holder", "held", "refusal", "take"]


@dataclass(frozen=True)
class Holder:
    """Who holds (or last held) a claim."""

    name: str
    run_id: str
    source: str
    pid: int
    host: str
    started: str

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}, started {self.started}, following {self.source}"


def _path(root: Path, name: str) -> Path:
    return Path(root) / CLAIMS / f"{sanitize_name(name)}.json"


def _read(fd: int) -> Holder | None:
    try:
        got = json.loads(os.pread(fd, 1 << 16, 0) or b"null")
        return Holder(**{k: got[k] for k in Holder.__dataclass_fields__})
    except (OSError, ValueError, TypeError, KeyError):
        return None


def refusal(name: str, run_id: str, other: Holder | None) -> str:
    """Why a follow of run ``run_id`` under ``name`` is refused while ``other`` holds the name."""
    who = other.describe() if other is not None else "another process"
    if other is not None and other.run_id == run_id:
        return (f"run {run_id!r} is already followed ({who}): one follower writes a run; "
                "stop that one first (a killed one frees the run by itself)")
    held_by = f" for run {other.run_id!r}" if other is not None else ""
    return f"run name {name!r} is claimed{held_by} ({who}): follow under another --name"


class Claim:
    """A claim this process holds; :meth:`release` it on a clean end (a death releases it too)."""

    def __init__(self, root: Path, path: Path, fd: int, holder: Holder, took_over: Holder | None):
        self.root, self.path, self.holder, self.took_over = Path(root), path, holder, took_over
        self._fd: int | None = fd

    def __del__(self) -> None:  # a claim dropped without release (its follower failed to start) frees the name
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    @property
    def active(self) -> bool:
        return self._fd is not None

    def release(self, *, holding_lock: bool = False) -> None:
        """Give the claim up: its file removed under the store's lock (``holding_lock``: the caller
        holds it), then the OS lock dropped. Idempotent."""
        if self._fd is None:
            return
        try:
            with contextlib.nullcontext() if holding_lock else StoreLock(self.root):
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()
        finally:
            fd, self._fd = self._fd, None
            os.close(fd)


class ClaimedRun:
    """A followed run that holds its name's claim (a :class:`Claim`, or the Delta store's document claim)
    from its ``open`` until :meth:`release`."""

    claim = None

    def release(self) -> None:
        """Give up the run's claim (a clean end; ``finish`` marks the follow ended first)."""
        if self.claim is not None:
            self.claim.release()


def take(root: Path, name: str, run_id: str, source: str) -> Claim:
    """Claim ``name`` for the follow of ``source`` (run ``run_id``); call under the store's lock.

    Returns the :class:`Claim`; its ``took_over`` names a holder that died without releasing it.

    Raises
    ------
    StoreError
        A live process holds the name (the message names it), or the claim cannot be written.
    """
    path = _path(root, name)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise StoreError(f"cannot claim run name {name!r} in {str(root)!r}: {e.strerror or e}",
                         run_id=run_id, path=str(root)) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        other = _read(fd)
        os.close(fd)
        raise StoreError(refusal(name, run_id, other), run_id=other.run_id if other else run_id,
                         path=str(root)) from None
    before = _read(fd)
    me = Holder(sanitize_name(name), run_id, os.fspath(source), os.getpid(), socket.gethostname(), now())
    try:
        data = json.dumps(asdict(me)).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
        os.fsync(fd)
    except OSError as e:
        os.close(fd)
        raise StoreError(f"cannot claim run name {name!r} in {str(root)!r}: {e.strerror or e}",
                         run_id=run_id, path=str(root)) from None
    return Claim(root, path, fd, me, before)


def held(root: Path) -> dict[str, Holder]:
    """``{run_id: holder}`` of the claims a live process holds now (call under the store's lock, so no
    claim is taken meanwhile)."""
    out: dict[str, Holder] = {}
    folder = Path(root) / CLAIMS
    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.json")):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd)
            if holder is not None:
                out[holder.run_id] = holder
        finally:
            os.close(fd)
    return out
