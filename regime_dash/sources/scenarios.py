"""Synthetic stream presets: open-loop inputs to replay when there is no recorded stream.

Each preset is a function ``preset(seed=0, steps=None, accounts=None) -> Stream``
that is deterministic in its arguments, and its docstring says what the stream
shows. They are *recordings of a pre-spec trainer*, built on the live run's
market model (:func:`regime_dash.sources.simulator.market_step`, same counter-based
RNG; the whole run stepped in numba by :func:`regime_dash.sources.market_jit.scripted`)
with the position sizing scripted instead of taken from a pipeline: an
account may open while the edge of the previous step is positive (what a Kelly
controller without resurrection allows), with ⌈base·0.5⌉ lots. Replaying a
preset then shows what the regime signals would have done on such a run; for
the closed loop, where kelly_f drives the trades, see :mod:`regime_dash.sources.simulator`.

:data:`SCENARIOS` maps each name to its function; :func:`make` builds one by name, and tells
an ``on_block`` callback each block of steps as it is made (:data:`SCRIPTED` presets take it too).
"""
from __future__ import annotations

import inspect
from pathlib import Path
from typing import Callable

import numpy as np

from regime_dash.core import streams
from regime_dash.errors import ValidationError
from regime_dash.sources.market import BlockSink, Market
from regime_dash.core.streams import Stream

#: Run #8's trap: "Trap continued for 1,737 steps with zero closed trades."
RUN8_TRAP_STEPS = 1737
#: Run #8's tail reward after reward_scale: $6484 × 0.003 (Theorem 6).
RUN8_TAIL_REWARD = np.float32(-19.45)
#: Sizing fraction of the scripted pre-spec trainer while its edge is positive (a model).
SCRIPTED_KELLY = 0.5
#: The recorded sample stream shipped with the repository.
SAMPLE_STREAM = Path(__file__).resolve().parents[2] / "data" / "samples" / "recorded_stream.npz"


def _size(value, default: int, name: str, minimum: int = 1) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValidationError(f"{name} must be an int >= {minimum}, got {value!r}", field=name, value=value)
    return int(value)


def _seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2 ** 64:
        raise ValidationError(f"seed must be an int in [0, 2**64), got {seed!r}", field="seed", value=seed)
    return int(seed)


def _run(seed: int, accounts: int, market: Market, p_true: np.ndarray, **script) -> Stream:
    """The stream of a scripted run: the market stepped in numba (:func:`market_jit.scripted`)."""
    from regime_dash.sources import market_jit

    return Stream(**market_jit.scripted(seed, accounts, market, p_true, kelly=SCRIPTED_KELLY, **script))


def _at(steps: int, step: int) -> np.ndarray:
    """True at ``step`` only."""
    mark = np.zeros(steps, bool)
    mark[step] = True
    return mark


def calm(seed: int = 0, steps: int | None = None, accounts: int | None = None,
         on_block: BlockSink | None = None) -> Stream:
    """A healthy market: p_true 0.6, the edge stays positive and accounts keep trading.

    Shows the quiet baseline: kelly_f never reaches 0, there is never a step
    with every account flat, no cooldown and no boundary, so the dead zone never
    fires. Defaults: 2000 steps, 64 accounts.
    """
    seed, steps, accounts = _seed(seed), _size(steps, 2000, "steps"), _size(accounts, 64, "accounts")
    return _run(seed, accounts, Market(ema_alpha=0.005), np.full(steps, 0.6), on_block=on_block)


def tail_shock(seed: int = 0, steps: int | None = None, accounts: int | None = None) -> Stream:
    """Theorem 6's case: one account takes −19.45 among b while the others sit near 0.

    Every account holds one lot throughout; each step's rewards are small
    (normal, σ = 0.01, a model of quiet marking) except at step ``steps // 2``,
    where one account (chosen by the seed) takes Run #8's −19.45 ($6484 ×
    0.003). The edge is constant at 0.2. Replayed, PopArt's batch variance
    barely moves (the tail is averaged away over b), while the F4 envelope
    lifts σ to 19.45 in that one step and the observer sees a tail event in
    Δworst. Defaults: 1000 steps, 1024 accounts (Run #8's b).
    """
    seed, steps, accounts = _seed(seed), _size(steps, 1000, "steps", 20), _size(accounts, 1024, "accounts")
    g = np.random.Generator(np.random.Philox(key=seed, counter=[0, 0, 1, 0]))
    rewards = (0.01 * g.standard_normal((steps, accounts))).astype(np.float32)
    t_shock, who = steps // 2, int(g.integers(accounts))
    rewards[t_shock, who] = RUN8_TAIL_REWARD
    session = np.cumsum(rewards.astype(np.float64) / Market().reward_scale, axis=0)
    worst = np.minimum.accumulate(session, axis=0).min(axis=1).astype(np.float32)
    return Stream.make(rewards=rewards, lots=np.ones((steps, accounts), np.int32),
                       kelly_analytic=np.full(steps, 0.2, np.float32), session_pnl_worst=worst,
                       tau_action=np.full(steps, 0.05, np.float32))


def kelly_trap_run8(seed: int = 0, steps: int | None = None, accounts: int | None = None,
                    on_block: BlockSink | None = None) -> Stream:
    """The spec's Run #8: kelly_f goes to 0, open positions drain to 0, then 1,737 steps with no closes.

    p_true is 0.6 for the first fifth of the run, then 0.3. Once the edge of
    the win/loss EMAs is no longer positive the scripted Kelly stays at 0 (Run
    #8's never came back), so no account opens again; the open positions close
    one by one (the last ones are closed at step ``steps − 1737 − 1`` if any are
    left) and the final 1,737 steps hold every account flat with no close, the
    EMAs and the edge frozen: the absorbing state. Replayed with resurrection
    off, the dead zone fires for all of those steps and the timeout flag after
    ``max_duration``. Defaults: 3000 steps (at least 1,937), 128 accounts.
    """
    seed = _seed(seed)
    steps = _size(steps, 3000, "steps", RUN8_TRAP_STEPS + 200)
    accounts = _size(accounts, 128, "accounts")
    t_adverse, t_trap = (steps - RUN8_TRAP_STEPS) // 5, steps - RUN8_TRAP_STEPS
    p_true = np.where(np.arange(steps) >= t_adverse, 0.3, 0.6)
    return _run(seed, accounts, Market(ema_alpha=0.005), p_true, force_flat=_at(steps, t_trap - 1),
                latch_from=t_adverse, on_block=on_block)


def fold_boundary(seed: int = 0, steps: int | None = None, accounts: int | None = None,
                  on_block: BlockSink | None = None) -> Stream:
    """Train switches to eval at step ``steps // 2``; reset_session_state runs there.

    The market trades as in :func:`calm` (p_true 0.6 in train, 0.57 in eval);
    at the boundary the session pnl, its worst and the cooldown restart at 0
    and ``boundary`` marks the step. Replayed, the phase turns from train to
    eval, the v9 transition counts down from ``transition_steps``, the tail
    recency re-bootstraps without a false tail event (PREV_WORST_PNL is
    aligned, issue γ) and the PopArt envelope starts afresh. Defaults: 2000
    steps, 64 accounts.
    """
    seed, steps, accounts = _seed(seed), _size(steps, 2000, "steps", 2), _size(accounts, 64, "accounts")
    t_b = steps // 2
    return _run(seed, accounts, Market(ema_alpha=0.005), np.where(np.arange(steps) < t_b, 0.6, 0.57),
                boundary=_at(steps, t_b), on_block=on_block)


def adverse_regime(seed: int = 0, steps: int | None = None, accounts: int | None = None,
                   on_block: BlockSink | None = None) -> Stream:
    """The edge stays negative for a long stretch while in-flight positions keep closing.

    p_true is 0.6 for the first tenth, 0.3 until 35 % of the run, then 0.85.
    Positions are long-lived (hazard 0.0015), so when the edge turns negative
    and opening stops, the book drains slowly and is never empty: the losing
    closes hold the edge below 0 for hundreds of steps, then the winning closes
    of the good regime lift it back above 0 and trading resumes, the way Runs
    #1–#7 escaped. Replayed, kelly_f sits at 0 for the stretch but the dead zone
    never fires (some account is always open). Defaults: 3000 steps, 128 accounts.
    """
    seed, steps, accounts = _seed(seed), _size(steps, 3000, "steps", 10), _size(accounts, 128, "accounts")
    t = np.arange(steps)
    p_true = np.where(t < steps // 10, 0.6, np.where(t < 35 * steps // 100, 0.3, 0.85))
    return _run(seed, accounts, Market(hazard=0.0015, ema_alpha=0.05), p_true, on_block=on_block)


def recorded(seed: int = 0, steps: int | None = None, accounts: int | None = None,
             path: str | Path | None = None) -> Stream:
    """A stream file (``.npz`` or ``.parquet``), by default the sample in ``data/samples/``.

    The sample is a live run (:mod:`regime_dash.sources.simulator`, resurrection on)
    through an adverse regime, a tail shock and a fold boundary; see
    :mod:`regime_dash.sources.samples`. ``steps`` and ``accounts`` keep the first steps
    and accounts; asking for more than the file has raises. ``seed`` is unused.
    """
    _seed(seed)
    stream = streams.load(SAMPLE_STREAM if path is None else path)
    t = _size(steps, stream.steps, "steps")
    b = _size(accounts, stream.accounts, "accounts")
    if t > stream.steps or b > stream.accounts:
        raise ValidationError(f"the recorded stream has {stream.steps} steps × {stream.accounts} accounts; "
                              f"asked for {t} × {b}", field="steps" if t > stream.steps else "accounts",
                              value=t if t > stream.steps else b)
    if (t, b) == (stream.steps, stream.accounts):
        return stream
    # copies, not views: a GPU engine takes C-contiguous arrays only, and the first accounts of each row are not
    return Stream(**{k: np.ascontiguousarray(v[:t, :b] if v.ndim == 2 else v[:t]) for k, v in stream.arrays().items()})


#: Preset name -> function.
SCENARIOS: dict[str, Callable[..., Stream]] = {
    "calm": calm,
    "tail_shock": tail_shock,
    "kelly_trap_run8": kelly_trap_run8,
    "fold_boundary": fold_boundary,
    "adverse_regime": adverse_regime,
    "recorded": recorded,
}


def describe(name: str) -> str:
    """The first line of preset ``name``'s docstring."""
    return _lookup(name).__doc__.strip().splitlines()[0]


def _lookup(name: str) -> Callable[..., Stream]:
    if name not in SCENARIOS:
        raise ValidationError(f"unknown scenario {name!r}; choose one of {sorted(SCENARIOS)}",
                              field="scenario", value=name)
    return SCENARIOS[name]


#: The presets whose market runs a block of steps at a time (:func:`market_jit.scripted`): those taking ``on_block``.
SCRIPTED = frozenset(name for name, preset in SCENARIOS.items() if "on_block" in inspect.signature(preset).parameters)


def make(name: str, seed: int = 0, steps: int | None = None, accounts: int | None = None,
         on_block: BlockSink | None = None, **kwargs) -> Stream:
    """Build preset ``name`` (``kwargs`` go to the preset, e.g. ``path`` for ``recorded``).

    ``on_block(lo, hi, rewards, lots)``, where given, is told as rows ``lo .. hi`` of the [T, b]
    arrays are made: block by block for a :data:`SCRIPTED` preset, once for the whole run otherwise.
    """
    preset = _lookup(name)
    if on_block is not None and name in SCRIPTED:
        kwargs["on_block"] = on_block
    stream = preset(seed=seed, steps=steps, accounts=accounts, **kwargs)
    if on_block is not None and name not in SCRIPTED:
        on_block(0, stream.steps, stream.rewards, stream.lots)
    return stream
