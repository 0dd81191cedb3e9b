"""The chunk size by the source's size: large known sources read in large chunks (the per-chunk
work paid less often), small ones and streams of unknown size in the default ones; an explicit
``chunk_bytes`` wins; the rows are the same whatever the chunks."""
from __future__ import annotations

import io

import pytest

from regime_dash.errors import IngestError
from regime_dash.ingest import iter_batches, sources
from regime_dash.benchmarks.ingest import make_diag_file


def test_the_chunk_size_follows_the_source_s_size():
    assert sources.chunk_bytes_for(None) == sources.DEFAULT_CHUNK_BYTES
    assert sources.chunk_bytes_for(sources.LARGE_SOURCE_BYTES - 1) == sources.DEFAULT_CHUNK_BYTES
    assert sources.chunk_bytes_for(sources.LARGE_SOURCE_BYTES) == sources.LARGE_CHUNK_BYTES
    assert sources.LARGE_CHUNK_BYTES > sources.DEFAULT_CHUNK_BYTES


class _Pipe(io.RawIOBase):
    """A binary stream that cannot seek (its size unknown until its end), as a pipe."""

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = min(len(b), len(self.data) - self.pos)
        b[:n] = self.data[self.pos:self.pos + n]
        self.pos += n
        return n


def _batches(source, **kw) -> tuple[int, list[int]]:
    batches = list(iter_batches(source, workers=2, **kw))
    return len(batches), [s for b in batches for s in b.table.column("step").to_pylist()]


@pytest.mark.slow  # a large file ingested twice: ~1.3 s of CPU
def test_a_large_file_reads_in_fewer_chunks_with_the_same_rows(tmp_path, monkeypatch):
    path = tmp_path / "d.jsonl"
    make_diag_file(path, 2.0, seed=3)
    monkeypatch.setattr(sources, "DEFAULT_CHUNK_BYTES", 64 << 10)
    monkeypatch.setattr(sources, "LARGE_CHUNK_BYTES", 512 << 10)
    monkeypatch.setattr(sources, "LARGE_SOURCE_BYTES", 1 << 20)
    n_large, rows_large = _batches(str(path))
    n_stream, rows_stream = _batches(_Pipe(path.read_bytes()))  # a pipe: size unknown
    n_small, rows_small = _batches(str(path), chunk_bytes=64 << 10)
    assert rows_large == rows_stream == rows_small and len(rows_large) > 1000
    assert n_large <= 10 < n_small and n_stream == n_small, (n_large, n_stream, n_small)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "4MB"])
def test_a_bad_chunk_size_is_refused_with_its_value(bad):
    with pytest.raises(IngestError, match=repr(bad).replace(".", r"\.")):
        next(iter_batches(b'{"step": 1}\n', chunk_bytes=bad))
