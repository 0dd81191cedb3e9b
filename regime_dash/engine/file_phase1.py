"""A stream file's light replay inputs: its per-step fields and its phase 1, read block by block.

A fast replay given phase 1 and no normalize pass reads nothing of the stream but its
per-step fields and b (:class:`regime_dash.core.streams.StepStream`); phase 1 is a reduction
per step. So a page that replays one stream under many configs needs the [T, b] rewards
and lots once, a block at a time, and never holds them: at T = 1,000,000 steps of 128
accounts that is ~40 MB (the per-step fields and phase 1) where the stream is a GB.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regime_dash.engine import fast
from regime_dash.engine.step_stats import StepStats
from regime_dash.core.streams import StepStream, Stream, StreamFile, load


def read(path: str | Path, rows: int | None = None) -> tuple[StepStream, StepStats]:
    """``(per-step fields, phase 1)`` of the stream file ``path``, its [T, b] fields read ``rows`` steps at a
    time (:meth:`StreamFile.blocks`'s default if None), every value checked as :func:`regime_dash.core.streams.load`
    checks it. The phase 1 is ``fast.step_stats(load(path))`` bit for bit.

    Raises
    ------
    StreamError
        The file is not a stream :func:`regime_dash.core.streams.load` would accept.
    """
    source = StreamFile(path)
    steps = source.per_step()
    blocks = ((start, block["rewards"], block["lots"]) for start, block in source.blocks(rows))
    return steps, fast.step_stats_blocks(blocks, source.steps)


@dataclass(frozen=True, eq=False)
class LightFile:
    """A stream file held light: its per-step fields and phase 1 in memory (:func:`read`), the whole
    stream loaded from the file only by :meth:`load`, for what reads the [T, b] arrays (the reference
    and cuda engines, the normalize pass, a sweep or a live run of it).

    ``owner`` is whatever keeps ``path`` on disk while this lives (a temporary directory, say).
    """

    path: Path
    inputs: StepStream
    stats: StepStats
    owner: Any = None

    @property
    def steps(self) -> int:
        return self.inputs.steps

    @property
    def accounts(self) -> int:
        return self.inputs.accounts

    def load(self) -> Stream:
        """The whole stream, read from the file and validated."""
        return load(self.path)


def open_light(path: str | Path, owner: Any = None) -> LightFile:
    """:class:`LightFile` of ``path`` (its file checked as :func:`regime_dash.core.streams.load` checks it)."""
    steps, stats = read(path)
    return LightFile(Path(path), steps, stats, owner)
