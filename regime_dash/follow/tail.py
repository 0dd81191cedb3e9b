"""A growing file read the way ``tail -F`` reads it: whole lines as they are written.

:class:`Tail` hands out the bytes of complete lines (up to and including the last
``\\n`` written so far); a partial last line waits for its newline. It notices the
two things that happen to a log a trainer writes:

replaced
    The path names another file (the trainer rotated its log, or wrote a new one in
    its place): the old file is read to its end first, its unfinished last line
    handed out as it is, then the new file is read from its start.
truncated
    The file is shorter than what was read (the trainer reopened it with ``w``):
    what was read stays; reading starts again at byte 0.

A gzip file cannot be followed (its bytes are not lines until the stream ends):
:func:`refuse_gzip` says so. The position is a byte offset at a line start, so a
follower that stores it can resume exactly there.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from regime_dash.errors import IngestError

#: Bytes read from the file per call at most (a busy writer's backlog is read in pieces).
READ_BYTES = 8 << 20
_GZIP_MAGIC = b"\x1f\x8b"


def refuse_gzip(path: str | os.PathLike) -> None:
    """Raise :class:`~regime_dash.errors.IngestError` when ``path`` is gzip (by name or by its first bytes)."""
    p = Path(path)
    head = b""
    try:
        with open(p, "rb") as fh:
            head = fh.read(2)
    except OSError:
        pass
    if p.name.lower().endswith(".gz") or head == _GZIP_MAGIC:
        raise IngestError(f"{str(p)!r} is gzip-compressed: a gzip stream cannot be followed while it is "
                          f"written (its lines are readable only once it is complete); follow the plain "
                          f".jsonl, or ingest the .gz once the job has ended", path=str(p))


@dataclass
class Piece:
    """What one :meth:`Tail.read` found.

    Attributes
    ----------
    data
        Bytes of whole lines (may be empty). ``final`` pieces may end without a newline.
    offset
        Byte offset in the current file just after ``data`` (a line start).
    event
        ``None``, ``"replaced"`` or ``"truncated"``: what happened before the next
        piece; ``data`` is what was left of the file before it.
    final
        ``data`` ends the file it came from (its last line may lack a newline).
    """

    data: bytes
    offset: int
    event: str | None = None
    final: bool = False


class Tail:
    """Whole lines of ``path`` from byte ``offset`` on, as the file grows.

    Parameters
    ----------
    path
        The file; it may not exist yet (it is waited for).
    offset
        Where to start: a line start in the file whose inode is ``inode``.
    inode
        The inode ``offset`` belongs to; when the path now names another file, the
        offset is void and that file is read from 0 (an ``event`` of ``"replaced"``).
    """

    def __init__(self, path: str | os.PathLike, offset: int = 0, inode: int | None = None):
        self.path = Path(path)
        self.offset = int(offset)  # file offset of the first byte not handed out
        self.inode = inode
        self._fh = None
        self._buf = b""  # bytes read past the last newline: the partial last line

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def _stat(self):
        try:
            return os.stat(self.path)
        except FileNotFoundError:
            return None

    def _open(self) -> str | None:
        """Open the path if not open; the event that opening it is (a void offset)."""
        st = self._stat()
        if st is None:
            return None
        refuse_gzip(self.path)
        self._fh = open(self.path, "rb")
        ino = os.fstat(self._fh.fileno()).st_ino
        event = None
        if self.inode is not None and ino != self.inode:
            event, self.offset = "replaced", 0
        elif st.st_size < self.offset:
            event, self.offset = "truncated", 0
        self.inode = ino
        self._fh.seek(self.offset)
        self._buf = b""
        return event

    def read(self, limit: int = READ_BYTES) -> Piece:
        """The whole lines written since the last call (empty when nothing new).

        Raises
        ------
        IngestError
            The file cannot be read, or it is gzip.
        """
        try:
            if self._fh is None:
                event = self._open()
                if self._fh is None or event is not None:
                    return Piece(b"", self.offset, event)
            chunk = self._fh.read(limit - len(self._buf) if len(self._buf) < limit else limit)
            if chunk:
                return self._lines(chunk)
            return self._check_path()
        except OSError as e:
            raise IngestError(f"cannot read {str(self.path)!r}: {e.strerror or e}", path=str(self.path)) from None

    def _lines(self, chunk: bytes) -> Piece:
        data = self._buf + chunk
        cut = data.rfind(b"\n") + 1
        if cut == 0 and len(data) < READ_BYTES * 8:
            self._buf = data  # a partial line waits for its newline
            return Piece(b"", self.offset)
        if cut == 0:
            cut = len(data)  # a line longer than any diag line: handed out, ingest rejects it by size
        self._buf = data[cut:]
        self.offset += cut
        return Piece(data[:cut], self.offset)

    def _check_path(self) -> Piece:
        """At the end of the open file: has the path been replaced, or the file truncated?"""
        st, own = self._stat(), os.fstat(self._fh.fileno())
        if st is not None and st.st_ino != own.st_ino:
            rest = self._buf
            self.offset += len(rest)
            self.close()
            self.inode, self.offset, self._buf = None, 0, b""
            self._open()  # the new file, from its start
            return Piece(rest, 0, "replaced", final=True)
        if own.st_size < self.offset + len(self._buf):
            self._fh.seek(0)
            self.offset, self._buf = 0, b""
            return Piece(b"", 0, "truncated")
        return Piece(b"", self.offset)

    def rest(self) -> Piece:
        """The partial last line, handed out as it is (the follow is ending)."""
        rest, self._buf = self._buf, b""
        self.offset += len(rest)
        return Piece(rest, self.offset, final=True)
