"""Hostile inputs for the ingest tests: good diag lines, the RSS bound, and the child
process helpers of the ingest benchmark (gzip bombs, peak RSS of one child from the
kernel, the Runs page's upload path in a child)."""
from __future__ import annotations

import json
from pathlib import Path

from artifacts import artifact
from regime_dash.benchmarks.ingest import (  # noqa: F401 - re-exported for the tests
    child_env,
    app_upload_args as app_upload,
    cli_args as cli,
    finish_child as finish_measured,
    start_child as start_measured,
    write_gzip_bomb as write_bomb,
)

REPO = Path(__file__).resolve().parents[1]

#: The stated bound on the peak RSS of one ingest process, whatever the input (bytes).
RSS_BOUND = 1 << 30


def record_figure(key: str, value) -> None:
    """Keep a measured figure in hostile.json among the session's artifacts (for docs/BENCHMARKS.md)."""
    path = artifact("hostile.json")
    data = json.loads(path.read_text()) if path.exists() else {}
    data[key] = value
    path.write_text(json.dumps(data, indent=1) + "\n")


def good_lines(n: int, start: int = 0) -> bytes:
    return b"".join(json.dumps({"step": i, "fold": 0, "phase": "train",
                                "risk_stack": {"popart": {"sigma": 1.0 + i}}}).encode() + b"\n"
                    for i in range(start, start + n))


def run_measured(args: list[str], **kw) -> tuple[int, str, str, int]:
    """Run a child to its end: (exit status, stdout, stderr, peak RSS bytes)."""
    return finish_measured(*start_measured(args, **kw))


def write_npz_bomb(path: Path, members: dict[str, tuple[tuple[int, ...], str]], *, fill_mb: int | None = None) -> Path:
    """An ``.npz`` whose members declare ``{name: (shape, dtype)}``, their data zeros,
    deflated (a few MB that inflate to the declared size). With ``fill_mb`` each member's
    data is that many MiB whatever its header says (a header that lies)."""
    import zipfile

    import numpy as np
    from numpy.lib import format as npy

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for name, (shape, dtype) in members.items():
            with z.open(name, "w", force_zip64=True) as fh:
                npy.write_array_header_1_0(fh, {"descr": npy.dtype_to_descr(np.dtype(dtype)),
                                                "fortran_order": False, "shape": shape})
                size = (fill_mb << 20) if fill_mb is not None else int(np.prod(shape)) * np.dtype(dtype).itemsize
                block = bytes(1 << 22)
                while size > 0:
                    fh.write(block[: min(size, len(block))])
                    size -= len(block)
    return path


def cli_in_process(capsys, *argv: str) -> tuple[int, str]:
    """One command in this process (:func:`regime_dash.cli.main`): its exit status and all it printed."""
    from regime_dash.cli import main

    try:
        rc = main(list(argv))
    except SystemExit as exc:  # argparse's refusals
        rc = exc.code
    got = capsys.readouterr()
    return rc, got.out + got.err
