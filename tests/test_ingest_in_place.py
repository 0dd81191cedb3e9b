"""A regular file is read in blocks that end at a line break (``Blocks.whole_lines``: no
partial line carried and joined to the next block), and reads exactly as the same bytes
given in memory (the usual reading): rows, rejects with their line numbers, blank lines,
CR/CRLF breaks, the hash. A byte order mark, gzip, or a long line at a block's end hand
over to the usual reading, from the start or from where the blocks stopped."""
from __future__ import annotations

import gzip
import json

import pytest

from regime_dash.ingest import parse, sources


def _lines(n: int, seed: int) -> list[bytes]:
    out = []
    for i in range(n):
        line = json.dumps({"step": i, "phase": "train", "x": {"v": i * 0.1 + seed, "s": "y" * (i % 50)}}).encode()
        if i % 97 == 5:
            line = b'{"step": ' + str(i).encode() + b', "broken'  # a bad line
        elif i % 89 == 3:
            line = b"   "  # a blank one
        out.append(line)
    return out


@pytest.fixture
def counted(monkeypatch):
    """How many blocks the in-place reading handed out."""
    seen = []
    real = sources.Blocks.whole_lines

    def whole_lines(self, size, total):
        for block in real(self, size, total):
            seen.append(len(block))
            yield block

    monkeypatch.setattr(sources.Blocks, "whole_lines", whole_lines)
    return seen


def _same(a, b) -> None:
    (ta, ra), (tb, rb) = a, b
    assert ta.equals(tb)
    assert [(r.line, r.reason) for r in ra.rejected] == [(r.line, r.reason) for r in rb.rejected]
    da, db = ra.to_dict(), rb.to_dict()
    da.pop("path"), db.pop("path")  # the file's name, against none for the bytes
    assert da == db and ra.sha256 == rb.sha256 and ra.sha256


@pytest.mark.parametrize("ending", [b"\n", b"\r\n"])
def test_a_file_read_in_place_reads_as_its_bytes(tmp_path, counted, ending):
    data = ending.join(_lines(20_000, 1)) + ending
    path = tmp_path / "d.jsonl"
    path.write_bytes(data)
    kw = {"chunk_bytes": 256 << 10, "workers": 2}
    _same(parse(str(path), **kw), parse(data, **kw))
    assert len(counted) >= 4 and sum(counted) > len(data) // 2, counted


def test_a_long_line_at_a_block_s_end_hands_over_to_the_usual_reading(tmp_path, counted):
    lines = _lines(8_000, 2)
    lines[2_500] = json.dumps({"step": 2500, "long": "z" * (300 << 10)}).encode()  # 300 KB: past a block
    data = b"\n".join(lines)  # and no break after the last line
    path = tmp_path / "d.jsonl"
    path.write_bytes(data)
    kw = {"chunk_bytes": 256 << 10, "workers": 2}
    on, off = parse(str(path), **kw), parse(data, **kw)
    _same(on, off)
    # blocks in place up to the long line, the rest (it included) the usual way
    assert 0 < sum(counted) <= data.index(b'{"step": 2500, "long"'), counted
    assert on[0].column("step").to_pylist()[-1] == 7999


@pytest.mark.parametrize("wrap", ["bom", "gzip"])
def test_a_bom_or_gzip_is_read_the_usual_way(tmp_path, counted, wrap):
    data = b"\n".join(_lines(20_000, 3)) + b"\n"
    raw = b"\xef\xbb\xbf" + data if wrap == "bom" else gzip.compress(data)
    path = tmp_path / "d.jsonl"
    path.write_bytes(raw)
    kw = {"chunk_bytes": 256 << 10, "workers": 2}
    (t, r), (t2, r2) = parse(str(path), **kw), parse(data, **kw)
    assert t.equals(t2) and r.rejected_count == r2.rejected_count
    assert counted == []
