"""The shape scanner's word reads (ingest/shape_jit.py): literals compared and digits read
8 bytes at a time give what the byte-by-byte reading, and so the reference, gives.

Each source is parsed with the scanner on and off (``_both`` of test_ingest_shapes): a
mismatch at any byte of a literal, at any alignment, lines shorter than a word, digit
runs of every length across word boundaries, and lines that end at the very end of a
chunk (read from the padded copy) must all come out as the reference reads them.
"""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from tests.test_ingest_shapes import _both, _same, kernels  # noqa: F401 - the fixture


def _good(i: int) -> str:
    # values of varying widths, so the lines start at every offset modulo 8
    return json.dumps({"step": i, "phase": "train" + "x" * (i % 8),
                       "risk_stack": {"kelly": {"fraction": 0.1 * i + 1e-9 * (i % 5)}, "flag": i % 2 == 0}},
                      separators=(",", ":"))


def test_a_literal_byte_changed_anywhere_is_read_as_the_reference_reads_it(kernels, monkeypatch):
    template = _good(0)
    lines = [template]
    for pos in range(len(template)):
        for shift in range(8):  # the same change at every alignment of the line's start
            good = _good(pos * 8 + shift + 1)
            lines.extend([good, good])
            c = good[pos]
            bad = good[:pos] + ("Z" if c != "Z" else "Y") + good[pos + 1:]
            lines.append(" " * shift + bad)
    (t, r), off = _both(monkeypatch, ("\n".join(lines) + "\n").encode())
    _same((t, r), off)
    assert r.rejected_count > 0


@pytest.mark.parametrize("chunk_bytes", [7, 9, 64, 1 << 20])
def test_lines_shorter_than_a_word_and_lines_at_the_end_of_a_chunk(kernels, monkeypatch, chunk_bytes):
    lines = ['{"a":1}'] * 70 + ['{"a":12}', '{"a":-1}', '{"b":1}', '{"a":}', '{"a":1',
                                '{"a":1} ', '{"a":1}\t', '{"a":1e5}', '{"a":null}', '{"a":0}',
                                '{"a":01}', '{"a":1.}', '{"a":-}', '{"a":7']
    for tail in (b"", b"\n"):  # the last line with and without its line break
        source = "\n".join(lines).encode() + tail
        _same(*_both(monkeypatch, source, chunk_bytes=chunk_bytes, workers=1))


def test_digit_runs_of_every_length_across_word_boundaries(kernels, monkeypatch):
    texts = []
    for n in range(1, 21):
        digits = "".join(str((7 * j + n) % 10) for j in range(n))
        lead = digits if digits[0] != "0" or n == 1 else "1" + digits[1:]
        texts += [lead, "-" + lead, "0." + digits, lead + "." + digits, "1e" + digits[:3],
                  lead[:9] + "E-" + digits[:2], "0." + "0" * n + "5"]
    lines = []
    for pad in range(8):  # each value at every offset modulo 8 (one shape: the string pads)
        lines += [f'{{"step": {i}, "s": "{"x" * pad}", "k": {v}, "z": 1}}' for i, v in enumerate(texts)]
    src = ("\n".join(lines) + "\n").encode()
    (t, r), off = _both(monkeypatch, src)
    _same((t, r), off)
    assert t.num_rows == len(lines) - r.rejected_count
    rejected = {x.line for x in r.rejected}
    assert t.schema.field("k").type == pa.float64()  # integers and fractions together
    for i, line in enumerate(lines):
        if i + 1 in rejected:
            continue
        value = json.loads(line)["k"]
        got = t.column("k").to_pylist()[t.column("_line").to_pylist().index(i + 1)]
        assert got == float(value), (line, got)  # Python's float of the text, to the bit


def test_the_word_helpers_agree_with_a_byte_by_byte_reading():
    from regime_dash.ingest import shape_jit as k  # numba's helpers (the C ones are its port)

    for pos in range(8):
        for byte in range(256):
            raw = bytearray(b"73059128")
            raw[pos] = byte
            w = int(np.frombuffer(bytes(raw), "<u8")[0])
            want = next((j for j, b in enumerate(raw) if not 48 <= b <= 57), 8)
            assert k._leading_digits(np.uint64(w)) == want, (pos, byte)
            assert k._digits_value(np.uint64(w), want) == (int(raw[:want]) if want else 0), (pos, byte)


def test_a_window_is_the_eight_bytes_at_its_index():
    from regime_dash.ingest import shape_jit

    buf = np.frombuffer(bytes(range(40)), np.uint8)[3:]  # a view at an odd address
    w = shape_jit.windows(buf)
    assert len(w) == len(buf) - 7
    assert [int(x) for x in w] == [int.from_bytes(buf[i:i + 8].tobytes(), "little") for i in range(len(w))]
    assert len(shape_jit.windows(buf[:5])) == 0


def test_line_breaks_read_by_words_are_numpy_s_at_every_offset(kernels):
    """Line feeds at every position of a 32-byte step and of a word, buffers of every
    length around the steps, views at odd addresses, bytes next to ``\\n`` (``\\x0b``,
    ``\\x8a``, ``\\t``, CR) and feeds dense enough to pass the kernel's capacity (``[-1]``:
    NumPy's turn)."""
    k = kernels
    rng = np.random.default_rng(3)
    tricky = np.array([9, 10, 11, 13, 0x8A, 0x0A ^ 0x80, 0, 255], np.uint8)
    for n in [*range(0, 100), 255, 256, 257, 4096 + 31]:
        for density in (0.0, 0.02, 0.3, 1.0):
            raw = np.concatenate((np.zeros(3, np.uint8), rng.choice(tricky, n)))
            raw[3:][rng.random(n) >= density] = 10 ^ 1
            raw[3:][rng.random(n) < density] = 10
            buf = raw[3:]  # a view at an odd address
            want = np.flatnonzero(buf == 10)
            got = k.line_breaks(buf, k.windows(buf))
            if len(want) > n // 64 + 8 - 1 and len(got) == 1 and got[0] == -1:
                continue  # over its capacity: said so, not cut short
            assert got.tolist() == want.tolist(), (n, density)
    for at in range(64):
        buf = np.full(64, 32, np.uint8)
        buf[at] = 10
        assert k.line_breaks(buf, k.windows(buf)).tolist() == [at]


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"])
def test_chunks_whose_line_breaks_the_kernel_finds_read_as_the_reference_reads_them(kernels, monkeypatch,
                                                                                     ending):
    """Chunks large enough for the workers to look for their line breaks (the kernel's
    word reads there), with blank and blank-looking lines, CR and CRLF breaks, and a last
    line with no break: as with the kernels off (NumPy's line breaks, Arrow's reading)."""
    from regime_dash.ingest import pipeline

    calls = []
    real = pipeline._line_breaks
    monkeypatch.setattr(pipeline, "_line_breaks", lambda d: calls.append(len(d)) or real(d))
    lines = [_good(i) for i in range(1500)]
    for i in range(0, 1500, 97):
        lines[i] = ["", "   ", "\t", _good(i) + "  "][i % 4]
    body = ending.join(lines) + ending
    body += _good(9999)  # the last line, no break after it
    on, off = _both(monkeypatch, body.encode(), chunk_bytes=150_000)
    _same(on, off)
    assert len(calls) >= 2 and on[1].blank_lines > 0 and on[0].num_rows > 1400
