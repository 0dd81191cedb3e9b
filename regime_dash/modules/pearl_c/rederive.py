"""Pearl C re-derivation: the host check's outputs recomputed from the logged row through the twin.

Row ``t`` logs the step's per-block counts (``pearl_c.block.NNN``, while a step
has at most :data:`~.replay.MAX_BLOCK_COLUMNS` blocks), their sum, the rate and
its deficit, the whole Pearls A+D state after the step (``rate_deficit_ema``,
``ema_alpha``, ``ad.*``) and the config. Each output is recomputed by the twin
function the replay runs for it (:mod:`.twin`, :mod:`regime_dash.modules.f32`),
from row ``t``'s logged values of what the step computed before it and row
``t−1``'s Pearls A+D state (zeros at a fold start, where the trainer resets it).
Check ids ``pearl_c.rederive.<output>``.

Not checkable: the per-block counts themselves, which need every parameter's
pre-clamp update (``T × n`` floats a frame does not log).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from regime_dash.analysis.invariants import CheckOptions, CheckResult
from regime_dash.modules import f32
from regime_dash.modules.pearl_c import twin
from regime_dash.modules.pearl_c.config import grid_blocks
from regime_dash.modules.pearl_c.replay import AD_COL, COL, CONFIG_COLUMNS, MAX_BLOCK_COLUMNS, P, STATE_COLUMNS
from regime_dash.modules.rederive import Derived, Formula, Unit
from regime_dash.modules.rederive import coverage as _coverage
from regime_dash.modules.rederive import run_units, skip

HOST = "pearl_c_post_adam_engagement_check"
KERNEL = "pearl_c_engagement_count"
_F = Formula
_PREV = {c: "prev:" + c for c in STATE_COLUMNS}
COUNT = _F("count", COL.count, HOST, "engaged count = Σ of the step's per-block counts")
BLOCK_MAX = _F("block_max", COL.block_max, KERNEL, "block_max = the largest per-block count of the step")
UNITS: tuple[Unit, ...] = (
    Unit(_F("blocks", COL.blocks, KERNEL, "blocks = the config's blocks, or ceil(n / block) when it is 0"),
         lambda n, block, blocks: grid_blocks(int(n), int(block), int(blocks)),
         (COL.n, "config:block", "config:blocks")),
    Unit(_F("rate", COL.rate, HOST, "engagement_rate = engaged count / parameters"),
         lambda total, n: twin.engagement_rate(int(total), int(n)), (COL.count, COL.n)),
    Unit(_F("rate_deficit", COL.deficit, HOST, "rate_deficit = engagement_rate − 0.01"), twin.rate_deficit,
         (COL.rate,)),
    Unit(_F("ad_count", AD_COL.count, HOST, "count = count(t−1) + 1 (0 after a fold reset)"), f32.ad_count,
         (_PREV[AD_COL.count],)),
    Unit(_F("ad_obs_mean", AD_COL.obs_mean, HOST,
            "Welford mean of the deficits: the deficit at a fold's first step, else mean(t−1) + (d − mean(t−1)) / count"),
         f32.ad_mean, (_PREV[AD_COL.obs_mean], COL.deficit, AD_COL.count)),
    Unit(_F("ad_obs_m2", AD_COL.obs_m2, HOST,
            "Welford M2 of the deficits: 0 first, else M2(t−1) + (d − mean(t−1)) · (d − mean)", fma=True),
         f32.ad_m2, (_PREV[AD_COL.obs_m2], _PREV[AD_COL.obs_mean], AD_COL.obs_mean, COL.deficit, AD_COL.count)),
    Unit(_F("ad_diff_mean", AD_COL.diff_mean, HOST,
            "Welford mean of successive deficit differences (d − prev(t−1)) over count − 1 of them; 0 first"),
         f32.ad_diff_mean, (_PREV[AD_COL.diff_mean], COL.deficit, _PREV[AD_COL.prev], AD_COL.count)),
    Unit(_F("ad_diff_m2", AD_COL.diff_m2, HOST, "Welford M2 of successive deficit differences; 0 first", fma=True),
         f32.ad_diff_m2, (_PREV[AD_COL.diff_m2], _PREV[AD_COL.diff_mean], AD_COL.diff_mean, COL.deficit,
                          _PREV[AD_COL.prev], AD_COL.count)),
    Unit(_F("ad_prev_obs", AD_COL.prev, HOST, "prev_obs = this step's deficit"), f32.ad_prev, (COL.deficit,)),
    Unit(_F("ema_alpha", COL.alpha, HOST,
            "Pearl D: α = s / (s + r) in [α_min, α_max], r = var(differences)/2, s = max(var(deficits) − r, 0); "
            "1 at a fold's first step", fma=True),
         f32.ad_alpha, (AD_COL.obs_m2, AD_COL.diff_m2, AD_COL.count, "config:alpha_min", "config:alpha_max")),
    Unit(_F("rate_deficit_ema", COL.ema, HOST,
            "Pearls A+D EMA: the deficit at a fold's first step, else ema(t−1) + α · (d − ema(t−1))", fma=True),
         f32.ad_ema, (_PREV[COL.ema], COL.alpha, COL.deficit, AD_COL.count)),
    Unit(_F("force_bump", COL.bump, HOST, "force_bump = rate_deficit_ema > 0 (Layer B would bump)"),
         twin.force_bump, (COL.ema,)),
)
FORMULAS = (COUNT, BLOCK_MAX, *(u.formula for u in UNITS))
CHECK_IDS = tuple(f.check_id(P) for f in FORMULAS)
#: The Pearls A+D state before a fold's first step: the trainer zeroes it.
RESETS = {c: 0.0 for c in STATE_COLUMNS}

INPUTS = {COL.n: "the parameter group's size", **{f"{P}config.{n}": "logged config" for n in CONFIG_COLUMNS}}
_NEEDS_UPDATES = "every parameter's pre-clamp update of the step (T × n floats, not logged)"
#: Range checks that also cover a column.
BOUNDED = {COL.count: ("pearl_c.count_range",), COL.rate: ("pearl_c.rate_definition",),
           COL.deficit: ("pearl_c.deficit_definition",),
           COL.ema: ("pearl_c.first_observation", "pearl_c.ema_within_observations")}


def block_columns(frame: pd.DataFrame) -> list[str]:
    return sorted(c for c in frame.columns if c.startswith(P + "block."))


def _from_blocks(frame: pd.DataFrame) -> list[Derived | CheckResult]:
    """The count and the busiest block, from the logged per-block counts."""
    blocks = block_columns(frame)
    if not blocks:
        why = (f"not checkable: needs the per-block counts ({P}block.NNN), which a replay logs only while a "
               f"step has at most {MAX_BLOCK_COLUMNS} blocks")
        return [skip(P, COUNT, why, [P + "block.*"]), skip(P, BLOCK_MAX, why, [P + "block.*"])]
    counts = frame[blocks].to_numpy(dtype=np.int64)
    rows = np.ones(len(frame), dtype=bool)
    inputs = {c: counts[:, j] for j, c in enumerate(blocks)}
    reads = ()  # the per-block counts are not re-derived: nothing to blame
    total = np.array([twin.engaged_total(r) for r in counts], dtype=np.float64)
    busiest = twin.busiest_block(counts).astype(np.float64) if len(frame) else np.zeros(0)
    return [Derived(COUNT, total, rows, inputs, reads), Derived(BLOCK_MAX, busiest, rows, inputs, reads)]


def checks(frame: pd.DataFrame, options: CheckOptions | None = None) -> list[CheckResult]:
    """The ``pearl_c.rederive.*`` results of ``frame``."""
    opt = options or CheckOptions()
    return run_units(frame, P, UNITS, RESETS, opt.rederive_ulps, more=_from_blocks(frame))


def coverage(frame: pd.DataFrame) -> list[dict]:
    """One entry per logged field of a Pearl C frame: ``{"field", "status", "checks", "needs"}``."""
    return _coverage(frame, P, FORMULAS, INPUTS, {c: _NEEDS_UPDATES for c in block_columns(frame)}, BOUNDED)
