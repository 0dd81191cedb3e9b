"""Replay Pearl C: per-block counts (kernel or twin) for every step, then the host rate-deficit check."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from regime_dash.modules.base import config_columns, frame_of
from regime_dash.modules.pearl_c import twin
from regime_dash.modules.pearl_c.config import PearlCConfig
from regime_dash.modules.pearl_c.stream import PearlCStream

P = "pearl_c."
COL = SimpleNamespace(count=P + "engage.count", n=P + "engage.n_params", blocks=P + "engage.blocks",
                      block_max=P + "engage.block_max", rate=P + "rate", deficit=P + "rate_deficit",
                      ema=P + "rate_deficit_ema", alpha=P + "ema_alpha", bump=P + "force_bump")
#: The rest of the Pearls A+D state after each step (ema and alpha are above), so each entry can be re-derived.
AD_COL = SimpleNamespace(obs_mean=P + "ad.obs_mean", obs_m2=P + "ad.obs_m2", diff_mean=P + "ad.diff_mean",
                         diff_m2=P + "ad.diff_m2", prev=P + "ad.prev_obs", count=P + "ad.count")
COLUMNS: tuple[str, ...] = (*vars(COL).values(), *vars(AD_COL).values())
#: Config constants written as ``pearl_c.config.<name>`` columns (what the re-derivation reads).
CONFIG_COLUMNS = ("clamp", "block", "blocks", "tracking", "alpha_min", "alpha_max")
#: Column of each Pearls A+D state entry, in the state's order (:data:`regime_dash.modules.f32.PEARLS_AD_STATE`).
STATE_COLUMNS = (COL.ema, COL.alpha, AD_COL.obs_mean, AD_COL.obs_m2, AD_COL.diff_mean, AD_COL.diff_m2, AD_COL.prev,
                 AD_COL.count)
#: Per-block count columns are kept when a step has at most this many blocks (the count's re-derivation sums
#: them; 4096 parameters in blocks of 32, the smallest, make 128).
MAX_BLOCK_COLUMNS = 256


def block_column(b: int) -> str:
    return f"{P}block.{b:03d}"


def per_block_counts(stream: PearlCStream, config: PearlCConfig, engine: str) -> np.ndarray:
    """int32 [T, blocks]: what the kernel leaves in the engagement buffer (zeros when not tracking)."""
    t_steps, n = stream.updates.shape
    blocks = config.grid(n)
    offset = 0 if config.tracking else twin.OFFSET_DISABLED
    if engine == "cuda":
        from regime_dash.modules.pearl_c.cuda import engagement_count

        buf = engagement_count(stream.updates, config.clamp, blocks, config.block, t_steps * blocks, offset)
    else:
        buf = np.zeros(t_steps * blocks, dtype=np.int32)
        twin.engagement_count(stream.updates, config.clamp, blocks, config.block, buf, offset)
    return buf.reshape(t_steps, blocks)


def run(stream: PearlCStream, config: PearlCConfig, engine: str) -> pd.DataFrame:
    """The replay behind :meth:`ControllerModule.replay` for Pearl C."""
    t_steps, n = stream.updates.shape
    counts = per_block_counts(stream, config, engine)
    state = np.zeros(8, dtype=np.float32)
    cols = {c: np.zeros(t_steps, np.float32) for c in (COL.rate, COL.deficit, *STATE_COLUMNS)}
    total = np.zeros(t_steps, np.int64)
    for t in range(t_steps):
        if stream.boundary[t]:
            state[:] = 0.0  # fold reset: Pearl A's sentinel fires on the next observation
        total[t], cols[COL.rate][t], cols[COL.deficit][t] = twin.rate_deficit_check(
            counts[t], n, state, config.alpha_min, config.alpha_max)
        for col, value in zip(STATE_COLUMNS, state):
            cols[col][t] = value
    cols[COL.count] = total
    cols[COL.n] = np.full(t_steps, n, np.int64)
    cols[COL.blocks] = np.full(t_steps, counts.shape[1], np.int32)
    cols[COL.block_max] = twin.busiest_block(counts)
    cols[COL.bump] = twin.force_bump(cols[COL.ema])
    if counts.shape[1] <= MAX_BLOCK_COLUMNS:
        for b in range(counts.shape[1]):
            cols[block_column(b)] = counts[:, b]
    cols.update(config_columns(config, CONFIG_COLUMNS, P, t_steps))
    frame = frame_of(stream.step, stream.boundary, cols)
    frame.attrs["config"] = config.as_dict()
    return frame
