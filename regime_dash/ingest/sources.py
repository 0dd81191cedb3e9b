"""Where the bytes come from: bytes, a path or a binary stream, plain or gzip (inflated a
block at a time), cut into newline-aligned chunks with bounded lines, hashed as read.
"""
from __future__ import annotations

import hashlib
import io
import os
import queue
import stat
import threading
import zlib
from dataclasses import dataclass
from typing import Any, BinaryIO, Iterable, Iterator

from regime_dash.errors import IngestError
from regime_dash.ingest.report import IngestReport


#: Bytes per chunk handed to the parser. A few MB keeps Arrow's per-call overhead small
#: while memory stays a small multiple of it (see ``docs/BENCHMARKS.md``).
DEFAULT_CHUNK_BYTES = 4 << 20

#: Chunks of a source known to be at least ``LARGE_SOURCE_BYTES``: the per-chunk work (a
#: template, the table's columns, the report's fold) is then paid a quarter as often, for
#: 8-15 % of the CPU of a long run's ingest; memory stays bounded by the in-flight budget.
LARGE_CHUNK_BYTES = 16 << 20
LARGE_SOURCE_BYTES = 256 << 20


def chunk_bytes_for(total: int | None) -> int:
    """The chunk size for a source of ``total`` bytes (``None``: unknown, as a stream's)."""
    return LARGE_CHUNK_BYTES if total is not None and total >= LARGE_SOURCE_BYTES else DEFAULT_CHUNK_BYTES


#: Longest line read (bytes, without the line break). A longer line is rejected with its
#: size and is never held whole: the reader skips to its end. Bounds memory on any input.
DEFAULT_MAX_LINE_BYTES = 64 << 20


def to_lf(data: bytes) -> bytes:
    """CR, LF and CRLF all as LF (two memchr-speed passes; no regex)."""
    return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n") if b"\r" in data else data


_BOM = b"\xef\xbb\xbf"


#: Bytes of a too-long line kept with its reject (its first bytes): enough to recognise it, bounded
#: whatever the line's size.
EXCERPT_BYTES = 256


def first_bytes(parts: Iterable[bytes], n: int = EXCERPT_BYTES) -> bytes:
    """The first ``n`` bytes of ``parts`` joined, without joining the rest (a long line's excerpt)."""
    out = b""
    for part in parts:
        out += part[:n - len(out)]
        if len(out) >= n:
            break
    return out


@dataclass
class TooLong:
    """A line the reader skipped because it is longer than the limit: its size and its first bytes."""

    size: int
    head: bytes = b""


def open_source(source: Any, path: str | None) -> tuple[BinaryIO, int | None, list]:
    """Open a source. Returns (binary stream, total bytes if known, things to close)."""
    to_close: list = []
    if isinstance(source, (bytes, bytearray, memoryview)):
        raw: BinaryIO = io.BytesIO(source)
        total: int | None = memoryview(source).nbytes
    elif isinstance(source, (str, os.PathLike)):
        try:
            raw = open(source, "rb", buffering=0)  # noqa: SIM115 - closed by the caller
        except OSError as e:
            raise IngestError(f"cannot read {str(source)!r}: {e.strerror or e}",
                              path=str(source)) from e
        to_close.append(raw)
        try:
            total = os.fstat(raw.fileno()).st_size
        except OSError:
            total = None
    elif hasattr(source, "read"):
        raw = source
        total = None
        try:
            if hasattr(source, "seek") and source.seekable():
                here = source.tell()
                total = source.seek(0, io.SEEK_END) - here
                source.seek(here)
        except (OSError, ValueError):
            total = None
    else:
        raise IngestError(f"cannot ingest a {type(source).__name__}: give bytes, a path or a "
                          "binary stream", path=path)
    return raw, total, to_close


class Blocks:
    """Content blocks of a source (decompressed when it is gzip), and the progress.

    Gzip is inflated here with :mod:`zlib` rather than :class:`gzip.GzipFile`, whose
    ``read`` drops the data of its last call when a crashed writer cut the stream
    short; here everything inflated before the cut is kept and ``truncated`` is set.
    """

    def __init__(self, raw: BinaryIO, path: str | None):
        self.raw = raw
        self.path = path
        self.done = 0  # source bytes consumed
        self.gzip = False
        self.truncated = False

    def _unreadable(self, e: OSError) -> IngestError:
        return IngestError(f"cannot read {self.path or 'input'}: {e}", path=self.path)

    def _read(self, n: int) -> bytes:
        try:
            b = self.raw.read(n)
        except OSError as e:
            raise self._unreadable(e) from e
        b = b or b""
        self.done += len(b)
        return bytes(b) if not isinstance(b, bytes) else b

    def __call__(self, size: int, plain: bool = False) -> Iterator[bytes]:
        """Blocks of about ``size`` bytes, inflated where the source is gzip (``plain``: the
        source is known not to be, as after :meth:`whole_lines`)."""
        first = self._read(size)
        while 0 < len(first) < 4:  # a stream may hand out fewer bytes than asked
            more = self._read(size)
            if not more:
                break
            first += more
        if plain or not _is_gzip_header(first):
            while first:
                yield first
                first = self._read(size)
            return
        self.gzip = True
        d = zlib.decompressobj(wbits=31)
        buf = first
        inflated = False
        while True:
            if not buf:
                buf = self._read(size)
                if not buf:
                    if not d.eof and not inflated:
                        raise IngestError(f"cannot read {self.path or 'input'}: gzip data ends at "
                                          f"byte {self.done}, before anything inflated", path=self.path)
                    if not d.eof:
                        self.truncated = True  # the writer died mid-stream
                    return
            try:
                out = d.decompress(buf, size)
            except zlib.error as e:
                raise IngestError(f"cannot read {self.path or 'input'}: corrupt gzip data "
                                  f"near byte {self.done} ({e})", path=self.path) from e
            buf = d.unconsumed_tail
            if out:
                inflated = True
                yield out
            if d.eof:
                rest = d.unused_data + buf
                rest = rest + self._read(2) if len(rest) < 2 else rest
                if rest[:2] == b"\x1f\x8b":
                    d = zlib.decompressobj(wbits=31)  # the next member
                    buf = rest
                    continue
                if rest.strip(b"\0") or self._read(size).strip(b"\0"):
                    raise IngestError(f"cannot read {self.path or 'input'}: data after the "
                                      "end of the gzip stream", path=self.path)
                return

    def in_place(self) -> int | None:
        """The size of the source where it is a regular file read from its start, neither
        gzip nor opening with a byte order mark (:meth:`whole_lines` reads it), else ``None``."""
        if not isinstance(self.raw, io.FileIO) or self.done:
            return None
        try:
            st = os.fstat(self.raw.fileno())
            head = os.pread(self.raw.fileno(), 4, 0) if self.raw.tell() == 0 else b""
        except (OSError, ValueError):
            return None
        if not stat.S_ISREG(st.st_mode) or len(head) < 4 or _is_gzip_header(head) or head.startswith(_BOM):
            return None
        return st.st_size

    def whole_lines(self, size: int, total: int) -> Iterator[bytes]:
        """Blocks of a regular file (:meth:`in_place`, ``total`` bytes) that end at a line
        break: where the last one of about ``size`` bytes lies is read first (the last
        ``_PEEK`` bytes of the block), then the block up to it, so no partial line is
        carried and joined to the next block (a copy of every byte, and its page faults).
        Stops at a block whose last ``_PEEK`` bytes hold no line break, and before the
        last two blocks (the usual reading takes the rest, from the file's position)."""
        fd = self.raw.fileno()
        pos = 0
        while total - pos > 2 * size and size > _PEEK:
            try:
                window = os.pread(fd, _PEEK, pos + size - _PEEK)
                cut = window.rfind(b"\n")
                block = os.pread(fd, size - _PEEK + cut + 1, pos) if cut >= 0 else b""
            except OSError as e:
                raise self._unreadable(e) from e
            if cut < 0 or len(block) != size - _PEEK + cut + 1 or not block.endswith(b"\n"):
                break  # a long line, or the file changed under us: the usual way from here
            pos += len(block)
            self.done += len(block)
            yield block
        self.raw.seek(pos)


#: Bytes at the end of a block searched for its last line break (:meth:`Blocks.whole_lines`).
_PEEK = 64 << 10


def _is_gzip_header(head: bytes) -> bool:
    """Whether ``head`` opens a gzip member: the magic, deflate (the only method gzip
    defines) and no reserved flag bits. Text that merely starts with the two magic bytes
    is read as lines, so its bad lines are rejected one by one like any others."""
    return len(head) >= 4 and head[:3] == b"\x1f\x8b\x08" and not head[3] & 0xE0


#: Most lines in one chunk: a chunk of one-byte junk lines holds millions, and the
#: per-line objects of their rejects would otherwise cost hundreds of MB per chunk.
MAX_CHUNK_LINES = 1 << 16


def split_lines(piece: bytes, nl) -> list[bytes]:
    """``piece`` (whole lines; ``nl``: the offsets of its line breaks) as pieces of at most
    ``MAX_CHUNK_LINES`` lines. The parsing workers count a chunk's lines (they need its
    line breaks anyway) and hand back an over-full one to be cut here, so the reading
    thread makes no pass over the bytes of real data for this."""
    cuts = nl[MAX_CHUNK_LINES - 1::MAX_CHUNK_LINES] + 1
    pieces, start = [], 0
    for cut in cuts.tolist():
        pieces.append(piece[start:cut])
        start = cut
    if start < len(piece):
        pieces.append(piece[start:])
    return pieces


class _Hasher:
    """sha256 of the blocks on a thread of its own: :mod:`hashlib` releases the GIL on
    large buffers, so the hash runs beside the reading thread's work rather than in it.
    At most a few blocks wait for it (bounded memory)."""

    def __init__(self) -> None:
        self.h = hashlib.sha256()
        self.blocks: queue.Queue = queue.Queue(maxsize=4)
        self.thread = threading.Thread(target=self._run, name="ingest-sha256", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (block := self.blocks.get()) is not None:
            self.h.update(block)

    def update(self, block: bytes) -> None:
        self.blocks.put(block)

    def hexdigest(self) -> str:
        self.stop()
        return self.h.hexdigest()

    def stop(self) -> None:
        if self.thread.is_alive():
            self.blocks.put(None)
            self.thread.join()


def _hashed(blocks: Iterable[bytes], h, report: IngestReport) -> Iterator[bytes]:
    for block in blocks:
        h.update(block)
        report.content_bytes += len(block)
        yield block


def _without_bom(blocks: Iterable[bytes]) -> Iterator[bytes]:
    """The blocks without a UTF-8 byte order mark at the very start (which may arrive
    split over blocks: gzip hands out what it has inflated)."""
    head = b""
    it = iter(blocks)
    for block in it:
        head += block
        if len(head) >= len(_BOM):
            break
    else:
        if head and head != _BOM:
            yield head
        return
    yield head[len(_BOM):] if head.startswith(_BOM) else head
    yield from it


def read_chunks(blocks: Blocks, size: int, report: IngestReport,
                 max_line: int = DEFAULT_MAX_LINE_BYTES) -> Iterator[tuple[bytes | TooLong, bool]]:
    """Yield (whole lines, final_unterminated); hash as we go.

    A line is never held whole beyond ``max_line`` bytes: once the bytes of a line
    without a break pass the limit, they are dropped as they arrive (hashed and
    counted, not kept) and a :class:`TooLong` marker stands for the line. Memory thus
    stays at a few chunks plus one line of at most ``max_line`` bytes, for any input,
    decompressed gzip bombs included.

    Line numbers are not counted here (a scan on the one reading thread); workers
    number lines within their chunk and :class:`_Renumber` shifts them, and cut a chunk
    of more than ``MAX_CHUNK_LINES`` lines (:func:`split_lines`).
    """
    h = _Hasher()
    try:
        total = blocks.in_place()
        if total is not None:  # a regular file: whole lines read in place while they last
            for block in _hashed(blocks.whole_lines(size, total), h, report):
                yield to_lf(block), False
        yield from _lines_of_blocks(blocks(size, plain=total is not None), h, report, max_line,
                                    at_start=total is None)
        report.sha256 = h.hexdigest()
    finally:
        h.stop()


def _lines_of_blocks(blocks: Iterator[bytes], h: _Hasher, report: IngestReport,
                     max_line: int, at_start: bool = True) -> Iterator[tuple[bytes | TooLong, bool]]:
    """:func:`read_chunks`' reading, the hash ``h`` fed as blocks arrive (``at_start``: the
    blocks open the source, where a byte order mark is dropped)."""
    carry: list[bytes] = []
    carry_len = 0
    skipped = 0  # bytes of an over-long line dropped so far
    head = b""  # the first bytes of that line, kept with its reject
    cr = b""  # a CR that ended the previous block: a line break unless LF follows
    hashed = _hashed(blocks, h, report)
    for block in _without_bom(hashed) if at_start else hashed:
        if cr or b"\r" in block:
            # CR, LF and CRLF all end a line: a lone CR becomes LF here, so line lengths
            # (and the long-line limit) count the same whatever the line breaks
            block = cr + block
            cr = b"\r" if block.endswith(b"\r") else b""
            if cr:
                block = block[:-1]
            block = to_lf(block)
        if skipped:
            nl = block.find(b"\n")
            if nl < 0:
                skipped += len(block)
                continue
            yield TooLong(skipped + nl, head), False
            skipped = 0
            block = block[nl + 1:]
            if not block:
                continue
        cut = block.rfind(b"\n") + 1
        if cut == 0:
            if carry_len + len(block) > max_line:
                skipped = carry_len + len(block)  # too long: stop holding it
                head = first_bytes((*carry, block))
                carry, carry_len = [], 0
            else:
                carry.append(block)  # a line longer than a chunk: keep reading
                carry_len += len(block)
            continue
        if carry:
            nl = block.find(b"\n")
            if carry_len + nl > max_line:
                yield TooLong(carry_len + nl, first_bytes((*carry, block))), False
                carry, carry_len = [], 0
                block = block[nl + 1:]
                cut -= nl + 1
        if not carry and cut == len(block):
            piece = block
        else:  # one copy: the carried partial line + the whole lines of this block
            piece = b"".join((*carry, memoryview(block)[:cut]))
        carry = [block[cut:]] if cut < len(block) else []
        carry_len = len(block) - cut
        if piece:
            yield piece, False
    if cr:  # the file ended with a lone CR: it ended the last line
        if skipped:
            yield TooLong(skipped, head), False
            skipped = 0
        else:
            yield b"".join(carry) + b"\n", False
            carry, carry_len = [], 0
    if skipped:
        yield TooLong(skipped, head), True
    elif carry:
        yield b"".join(carry), True
