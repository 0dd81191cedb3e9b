"""Diag files as cluster jobs write them, built from real replays: a trainer that checkpoints its ISV every
K steps and is preempted, several ranks writing one file, a step counter that slips.

A trainer's checkpoint holds its state, and the regime pipeline's state is the ISV: the job
resumed from the last checkpoint before it was preempted replays the steps after it with the
ISV it saved (``restore=True``), or, where the trainer forgot to restore it, from the bootstrap
values (``restore=False``). The first attempt's lines up to the preemption stay in the file, and
the resumed job appends its own, the steps after the checkpoint logged again.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

import regime_dash as rd
from regime_dash.core.slots import DEFAULT_LAYOUT
from regime_dash.engine import replay_trajectory
from regime_dash.sources import scenarios


@dataclass
class Job:
    """A scenario replayed as one uninterrupted run: the reference every file below is cut from."""

    stream: rd.Stream
    config: rd.RegimeConfig
    frame: pd.DataFrame

    @classmethod
    def of(cls, scenario: str = "tail_shock", steps: int = 1500, accounts: int = 32, seed: int = 0,
           **config) -> "Job":
        stream = scenarios.make(scenario, steps=steps, accounts=accounts, seed=seed)
        cfg = rd.RegimeConfig(**config)
        return cls(stream, cfg, rd.replay(stream, cfg, engine="reference", log_inputs=True))

    def isv_after(self, step: int) -> dict[str, float]:
        """The ISV a checkpoint taken after ``step`` holds, by slot name."""
        k = int(np.flatnonzero(self.stream.step == step)[0])
        tr = replay_trajectory(self.stream.slice(0, k + 1), self.config, engine="reference", log_inputs=True)
        return {name: float(tr.isv[DEFAULT_LAYOUT.index(name)]) for name in DEFAULT_LAYOUT.names}

    def resumed_rows(self, checkpoint: int, restore: bool) -> pd.DataFrame:
        """What the job resumed from the checkpoint after ``checkpoint`` logs: every step after it."""
        k = int(np.flatnonzero(self.stream.step == checkpoint)[0]) + 1
        isv = self.isv_after(checkpoint) if restore else None
        out = rd.replay(self.stream.slice(k, self.stream.steps), self.config, engine="reference", isv=isv,
                        log_inputs=True)
        # the trainer knows its fold and phase: a replay of a slice would count them from its own start
        out["fold"], out["phase"] = self.frame["fold"].iloc[k:].to_numpy(), self.frame["phase"].iloc[k:].to_numpy()
        return out


def preempted(job: Job, every: int, preempted_after: int, restore: bool = True) -> tuple[pd.DataFrame, int]:
    """The file of ``job`` checkpointed every ``every`` steps, preempted after step ``preempted_after`` and
    resumed from its last checkpoint; returns ``(frame in file order, the checkpoint step)``."""
    first_step = int(job.stream.step[0])
    checkpoint = first_step + ((preempted_after - first_step) // every) * every
    if checkpoint >= preempted_after:
        checkpoint -= every
    first = job.frame[job.frame["step"] <= preempted_after]
    return pd.concat([first, job.resumed_rows(checkpoint, restore)], ignore_index=True), checkpoint


def interleaved(a: pd.DataFrame, b: pd.DataFrame, block: int = 1, rank: str | None = None) -> pd.DataFrame:
    """Two writers' rows in one file, ``block`` lines of one then ``block`` of the other (a writer's buffer
    flushed at a time); with ``rank``, each line names its writer in that field."""
    if rank is not None:
        a, b = a.assign(**{rank: 0}), b.assign(**{rank: 1})
    parts = []
    for k in range(0, max(len(a), len(b)), block):
        parts += [a.iloc[k:k + block], b.iloc[k:k + block]]
    return pd.concat(parts, ignore_index=True)


def slipped(frame: pd.DataFrame, repeat_at: int, rows: int) -> pd.DataFrame:
    """A step counter that logs step ``repeat_at`` twice and catches up ``rows`` lines later: the lines between
    are labelled one step low, their state the real one."""
    out = frame.copy()
    step = out["step"].to_numpy().copy()
    k = int(np.flatnonzero(step == repeat_at)[0]) + 1
    step[k:k + rows] -= 1
    out["step"] = step
    return out
