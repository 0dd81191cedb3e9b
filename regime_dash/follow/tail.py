"""A growing file read the way ``tail -F`` reads it: whole lines as they are written.

:class:`Tail` hands out the bytes of complete lines (up to and including the last
line break written so far); a partial last line waits for its line break. A line
longer than ``max_line`` bytes is never held: once its bytes pass the limit they are
dropped as they arrive and a :class:`~regime_dash.ingest.sources.TooLong` (its size
and first bytes) stands for it, as whole-file ingest reads such a line. It notices
what happens to a log a trainer writes:

replaced
    The path names another file (the trainer rotated its log, or wrote a new one in
    its place): the old file is read to its end first, its unfinished last line
    handed out as it is, then the new file is read from its start.
truncated
    The file is shorter than what was read (the trainer reopened it with ``w``).
rewritten
    The same file holds other bytes where it was read (``cp`` over it, or a trainer
    restarted while the follower was down, writing more than was read before): its
    first bytes or the bytes just before the read position differ.
symlink
    The path became a symbolic link: it is not followed (unless ``follow_symlinks``),
    and nothing is read from its target.

After ``truncated`` or ``rewritten`` the unfinished last line read is handed out as it
is, and the file is read again from byte 0 (a new segment of its run).

A followed file is identified by its inode, its size and hashes of its first bytes
and of the bytes before the read position (:meth:`Tail.identity`); a follower stores
them with its offset, so a restarted follower tells a rewritten file from a grown one.

A gzip file cannot be followed (its bytes are not lines until the stream ends):
:func:`refuse_gzip` says so. The position is a byte offset at a line start, so a
follower that stores it can resume exactly there.
"""
from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regime_dash.errors import IngestError
from regime_dash.ingest.sources import DEFAULT_MAX_LINE_BYTES, TooLong, first_bytes

#: Bytes read from the file per call at most (a busy writer's backlog is read in pieces).
READ_BYTES = 8 << 20
#: Bytes at the file's start, and before the read position, that identify the file read.
HEAD_BYTES = 4096
_GZIP_MAGIC = b"\x1f\x8b"
#: What a read that found the file rewritten under it says (a new segment of the run).
REWRITE_EVENTS = ("truncated", "rewritten")


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


def symlink_text(path: str | os.PathLike) -> str | None:
    """``'path' is a symbolic link to 'target'`` when ``path`` is one, else ``None``."""
    try:
        if not stat.S_ISLNK(os.lstat(path).st_mode):
            return None
        target = os.readlink(path)
    except OSError:
        return None
    return f"{str(path)!r} is a symbolic link to {target!r}"


def refuse_symlink(path: str | os.PathLike) -> None:
    """Raise :class:`~regime_dash.errors.IngestError` naming ``path`` and its target when it is a symlink."""
    said = symlink_text(path)
    if said is not None:
        raise IngestError(f"{said}: not followed (a log swapped for a link would store another file's "
                          f"lines); follow the file itself, or give --follow-symlinks", path=str(path))


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Piece:
    """What one :meth:`Tail.read` found.

    Attributes
    ----------
    items
        In file order: bytes of whole lines, and a :class:`TooLong` for each line over the limit
        (``final`` pieces may end without a line break).
    offset
        Byte offset in the current file just after the items (a line start).
    event
        ``None``, ``"replaced"``, ``"truncated"``, ``"rewritten"`` or ``"symlink"``: what happened
        before the next piece; the items are what was left of the file before it.
    final
        The items end the file they came from (the last line may lack its line break).
    read
        Bytes this call read from the file (a long line being skipped reads without handing out).
    """

    items: list = field(default_factory=list)
    offset: int = 0
    event: str | None = None
    final: bool = False
    read: int = 0

    @property
    def data(self) -> bytes:
        """The bytes of the whole lines (the lines over the limit left out)."""
        return b"".join(i for i in self.items if isinstance(i, bytes))


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
    identity
        :meth:`identity` as stored with ``offset``: when the file's bytes there differ, the offset
        is void and the file is read from 0 (``"rewritten"``).
    max_line
        Longest line held, in bytes; a longer one is handed out as a :class:`TooLong`.
    follow_symlinks
        Follow a path that is a symbolic link (else it is refused, or stops the follow).
    """

    def __init__(self, path: str | os.PathLike, offset: int = 0, inode: int | None = None,
                 identity: dict[str, Any] | None = None, *, max_line: int = DEFAULT_MAX_LINE_BYTES,
                 follow_symlinks: bool = False):
        self.path = Path(path)
        self.offset = int(offset)  # file offset of the first byte not handed out
        self.inode = inode
        self.max_line, self.follow_symlinks = max_line, follow_symlinks
        self._stored = identity
        self._fh = None
        self._reset(self.offset)

    def _reset(self, offset: int) -> None:
        self.offset = self._pos = offset  # _pos: the file position (bytes read)
        self._buf = b""  # bytes read past the last line break: the partial last line
        self._skip: list | None = None  # [size, head, CR last] of a line over the limit, being dropped
        self._head = b""  # the file's first bytes read (at most HEAD_BYTES)
        self._seen = b""  # the last bytes read, ending at _pos (at most HEAD_BYTES)
        self._before = b""  # the last bytes before offset (at most HEAD_BYTES)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def identity(self) -> dict[str, Any]:
        """What identifies the file read up to :attr:`offset`: inode, size, and the hashes of its first
        bytes and of the bytes before the offset (with their lengths)."""
        head = self._head[: self.offset]
        size = None
        if self._fh is not None:
            size = os.fstat(self._fh.fileno()).st_size
        return {"inode": self.inode, "size": size, "head_bytes": len(head), "head_sha256": _sha(head),
                "before_bytes": len(self._before), "before_sha256": _sha(self._before)}

    def _stat(self):
        try:
            return os.stat(self.path)
        except FileNotFoundError:
            return None

    def _open_fd(self):
        flags = os.O_RDONLY | (0 if self.follow_symlinks else os.O_NOFOLLOW)
        try:
            return os.fdopen(os.open(self.path, flags), "rb")
        except OSError:
            if symlink_text(self.path) is not None and not self.follow_symlinks:
                return None
            raise

    def _open(self) -> str | None:
        """Open the path if not open; the event that opening it is (a void offset, a symlink)."""
        if self._stat() is None:
            return None
        if not self.follow_symlinks and symlink_text(self.path) is not None:
            return "symlink"
        refuse_gzip(self.path)
        self._fh = self._open_fd()
        if self._fh is None:
            return "symlink"
        st = os.fstat(self._fh.fileno())
        event = None
        if self.inode is not None and st.st_ino != self.inode:
            event, offset = "replaced", 0
        elif st.st_size < self.offset:
            event, offset = "truncated", 0
        elif not self._same_as_stored():
            event, offset = "rewritten", 0
        else:
            offset = self.offset
        self.inode, self._stored = st.st_ino, None
        self._reset(offset)
        fd = self._fh.fileno()
        self._head = os.pread(fd, min(HEAD_BYTES, offset), 0)
        self._seen = self._before = os.pread(fd, min(HEAD_BYTES, offset), offset - min(HEAD_BYTES, offset))
        self._fh.seek(offset)
        return event

    def _same_as_stored(self) -> bool:
        """Whether the open file's bytes at the stored offset are those the stored identity hashed."""
        ident, fd = self._stored, self._fh.fileno()
        if not ident or ident.get("head_sha256") is None:
            return True  # a state stored before identities were: the inode and size alone
        n, m = int(ident.get("head_bytes", 0)), int(ident.get("before_bytes", 0))
        return (_sha(os.pread(fd, n, 0)) == ident["head_sha256"]
                and _sha(os.pread(fd, m, self.offset - m)) == ident.get("before_sha256"))

    def _unchanged(self) -> bool:
        """Whether the open file still holds, at its start and before the read position, the bytes read there."""
        fd = self._fh.fileno()
        return (os.pread(fd, len(self._head), 0) == self._head
                and os.pread(fd, len(self._seen), self._pos - len(self._seen)) == self._seen)

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
                    return Piece([], self.offset, event)
            chunk = self._fh.read(limit)
            if chunk and not self._unchanged():
                return self._restart("rewritten", len(chunk))
            if chunk:
                return self._lines(chunk)
            return self._check_path()
        except OSError as e:
            raise IngestError(f"cannot read {str(self.path)!r}: {e.strerror or e}", path=str(self.path)) from None

    def _advance(self, chunk: bytes, upto: int) -> None:
        """The offset moved to ``upto`` bytes into ``chunk`` (read at ``_pos``): the bytes before it kept."""
        self._before = (self._seen + chunk[:upto])[-HEAD_BYTES:]
        self.offset = self._pos + upto

    def _lines(self, chunk: bytes) -> Piece:
        items: list = []
        i, n = 0, len(chunk)
        if self._skip is not None:
            i = self._skip_to_break(chunk, items)
        if i < n:
            data = self._buf + chunk[i:]
            cut = _last_break(data)
            if cut:
                items.append(data[:cut])
                self._advance(chunk, i + cut - len(self._buf))
            self._buf = data[cut:]
            cr = self._buf.endswith(b"\r")  # a CR last: the line's break, or half of it
            if len(self._buf) - cr > self.max_line:  # too long: stop holding it
                self._skip, self._buf = [len(self._buf) - cr, first_bytes([self._buf]), cr], b""
        self._read_done(chunk)
        return Piece(items, self.offset, read=n)

    def _skip_to_break(self, chunk: bytes, items: list) -> int:
        """Drop the bytes of the line being skipped up to its line break in ``chunk``; where after it to go on."""
        if self._skip[2]:  # the line ended with a CR at the end of the last chunk: with this LF, one break
            return self._end_skip(chunk, 1 if chunk[:1] == b"\n" else 0, items)
        brk = _first_break(chunk)
        if brk < 0 or (brk == len(chunk) - 1 and chunk[brk:] == b"\r"):
            self._skip[0] += len(chunk) if brk < 0 else brk
            self._skip[2] = brk >= 0  # a CR ending the chunk: an LF may follow, making one break with it
            return len(chunk)
        return self._end_skip(chunk, brk + (2 if chunk[brk:brk + 2] == b"\r\n" else 1), items, brk)

    def _end_skip(self, chunk: bytes, end: int, items: list, more: int = 0) -> int:
        """The skipped line ends ``more`` bytes into ``chunk``, its line break ``end`` bytes in."""
        size, head, _cr = self._skip
        items.append(TooLong(size + more, head))
        self._skip = None
        self._advance(chunk, end)
        return end

    def _read_done(self, chunk: bytes) -> None:
        if len(self._head) < HEAD_BYTES:
            self._head += chunk[: HEAD_BYTES - len(self._head)]
        self._seen = (self._seen + chunk[-HEAD_BYTES:])[-HEAD_BYTES:]
        self._pos += len(chunk)

    def _unfinished(self) -> list:
        """The unfinished last line read (a skipped one as its :class:`TooLong`), handed out as it is."""
        if self._skip is not None:
            return [TooLong(self._skip[0], self._skip[1])]
        return [self._buf] if self._buf else []

    def _restart(self, event: str, read: int = 0) -> Piece:
        """The file was truncated or rewritten: what was read of it ends, and it is read again from 0."""
        rest = self._unfinished()
        self._reset(0)
        self._fh.seek(0)
        return Piece(rest, 0, event, final=True, read=read)

    def _check_path(self) -> Piece:
        """At the end of the open file: has the path been replaced, or the file truncated or rewritten?"""
        st, own = self._stat(), os.fstat(self._fh.fileno())
        if st is not None and st.st_ino != own.st_ino or (not self.follow_symlinks
                                                         and symlink_text(self.path) is not None):
            rest = self._unfinished()
            self.close()
            self.inode = None
            self._reset(0)
            event = "symlink" if not self.follow_symlinks and symlink_text(self.path) is not None else "replaced"
            if event == "replaced":
                self._open()  # the new file, from its start
            return Piece(rest, 0, event, final=True)
        if own.st_size < self._pos:
            return self._restart("truncated")
        if not self._unchanged():
            return self._restart("rewritten")
        return Piece([], self.offset)

    def rest(self) -> Piece:
        """The partial last line, handed out as it is (the follow is ending)."""
        rest = self._unfinished()
        self._buf, self._skip = b"", None
        self.offset = self._pos
        return Piece(rest, self.offset, final=True)


def _first_break(data: bytes) -> int:
    """Where the first line break (LF or CR) of ``data`` is, -1 if none."""
    found = [i for i in (data.find(b"\n"), data.find(b"\r")) if i >= 0]
    return min(found) if found else -1


def _last_break(data: bytes) -> int:
    """How many bytes of ``data`` are whole lines: up to its last LF, or its last CR that is not its last
    byte (a CR there may be the first half of a CRLF still being written)."""
    lf = data.rfind(b"\n")
    cr = data.rfind(b"\r", 0, len(data) - 1)
    return max(lf, cr) + 1
