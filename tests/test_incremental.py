"""The incremental verdict equals a full verdict of the same rows, at every cut point.

The contract of regime_dash.analysis.incremental: after each batch, every check's id, status,
violations, first step, steps, spans and column (a ``rederive.*`` check's evidence too: rows
compared, the divergences up to their cap), and every finding's id, severity, steps and spans,
are those of ``verdict`` on all the rows so far. Frames: clean replays, each planted violation
of test_invariants, a cycling dead zone, a broken resurrection without its switch, a trap that
outlives a batch, the committed sample, replays from step 0 with every input logged (planted
divergences across batches, a switch turned on late), a controller module's run.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from regime_dash.analysis import view as v
from regime_dash.analysis.incremental import IncrementalVerdict
from regime_dash.analysis.invariants import CheckOptions
from regime_dash.analysis.verdict import verdict
from test_checks_planted import F2, broken_resurrection
from test_findings import dead_zone_frame
from test_invariants import PLANTED, plant, rich_frame, timeout_frame

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "samples" / "diag.jsonl"


def key(vd):
    checks = [(c.id, c.status, c.violations, c.first_step, list(c.steps), [tuple(s) for s in c.spans], c.column,
               c.evidence if c.id.startswith("rederive.") else None, c.detail if c.id.startswith("rederive.") else None)
              for c in vd.checks]
    finds = [(f.id, f.severity, list(f.steps), [tuple(s) for s in f.spans]) for f in vd.findings]
    return checks, finds


def assert_equal_at_cuts(frame: pd.DataFrame, cuts, options=None):
    """Feed ``frame`` in the batches between ``cuts``; compare with a full verdict at each cut."""
    inc = IncrementalVerdict(options, reload=lambda: frame.iloc[:done].reset_index(drop=True))
    done = 0
    for cut in [*sorted(set(cuts)), len(frame)]:
        if cut <= done:
            continue
        got = inc.update(frame.iloc[done:cut].reset_index(drop=True))
        done = cut
        want = verdict(frame.iloc[:cut].reset_index(drop=True), options)
        assert key(got) == key(want), f"differs after {cut} rows"
        assert got.status == want.status
    return inc


CUTS = (1, 2, 3, 150, 199, 260, 601, 602, 900, 1201, 1500, 1799, 1800, 1801, 2300)


@pytest.mark.parametrize("make", [rich_frame, timeout_frame], ids=["resurrection", "timeout"])
def test_clean_replays_at_many_cut_points(make):
    inc = assert_equal_at_cuts(make(), CUTS)
    assert inc.rebuilds == 0


@pytest.mark.parametrize("case", PLANTED, ids=[c[0] for c in PLANTED])
def test_each_planted_violation_at_cut_points_around_it(case):
    _id, make, check_id, row, column, value, *_ = case
    f = make()
    k = row(f)
    bad = plant(f, k, column, value(f, k))
    inc = assert_equal_at_cuts(bad, (k - 1, k, k + 1, k + 2, k + 50, 2000))
    assert next(c for c in inc.current.checks if c.id == check_id).status == "fail"


def test_a_cycling_dead_zone_split_across_batches():
    frame = dead_zone_frame(cycling=True)
    inc = assert_equal_at_cuts(frame, range(50, len(frame), 97))
    assert any(f.id == "timeout_unreachable" and f.severity == "fail" for f in inc.current.findings)


def test_a_trap_that_outlives_its_batches():
    frame = rich_frame()
    a = 500
    frame.loc[a:a + 400, v.KELLY] = 0.0
    frame.loc[a:a + 400, v.FLAT] = frame.loc[a:a + 400, v.B_SIZE]
    inc = assert_equal_at_cuts(frame, (a + 10, a + 150, a + 250, a + 399, a + 401, a + 402))
    trap = next(c for c in inc.current.checks if c.id == "kelly_trap")
    assert trap.status == "fail" and trap.spans


@pytest.mark.slow  # a long run analysed batch by batch: ~1.4 s of CPU
def test_resurrection_inferred_from_the_whole_run_without_its_switch():
    bad, _first = broken_resurrection(rich_frame())
    assert_equal_at_cuts(bad.drop(columns=[F2]), CUTS)
    clean = rich_frame().drop(columns=[F2])
    assert_equal_at_cuts(clean, CUTS)


@pytest.mark.slow  # a long run analysed in small batches: ~1.4 s of CPU
def test_options_carry_through_and_small_batches():
    frame = rich_frame().iloc[:700].reset_index(drop=True)
    assert_equal_at_cuts(frame, range(1, 700, 13), CheckOptions(trap_steps=40, ulps=2))


def test_a_column_seen_late_and_a_step_going_back_re_judge_once():
    frame = rich_frame().iloc[:900].reset_index(drop=True)
    late = frame.copy()
    late.loc[:299, v.COUNT] = np.nan
    early = late.drop(columns=[v.COUNT]).iloc[:300]
    inc = IncrementalVerdict(reload=lambda: early)
    inc.update(early)
    got = inc.update(late.iloc[300:].reset_index(drop=True))
    assert inc.rebuilds == 1
    whole = pd.concat([early, late.iloc[300:]], ignore_index=True)
    assert key(got) == key(verdict(whole))
    # a trainer restarted from a checkpoint logs steps 200.. again
    again = frame.iloc[200:260].reset_index(drop=True)
    inc2 = IncrementalVerdict(reload=lambda: frame)
    inc2.update(frame)
    got = inc2.update(again)
    assert inc2.rebuilds == 1 and key(got) == key(verdict(pd.concat([frame, again], ignore_index=True)))


def test_the_committed_sample():
    from regime_dash import ingest
    from regime_dash.diag.aliases import canonical_frame

    table, _ = ingest.parse(SAMPLE)
    frame = canonical_frame(table.to_pandas().drop(columns=["_line"]))
    assert_equal_at_cuts(frame, (1, 100, 333, 600, 601, 1000))


def _logged_replay(name="fold_boundary", seed=2, steps=2400, **cfg):
    import regime_dash as rdash
    from regime_dash.sources import scenarios
    from regime_dash.core.config import RegimeConfig

    return rdash.replay(scenarios.make(name, seed=seed, steps=steps), RegimeConfig(**cfg), engine="reference",
                        log_inputs=True)


def _rederived(vd):
    return {c.id: c for c in vd.checks if c.id.startswith("rederive.")}


def test_rederivation_from_step_zero_with_every_input_logged():
    frame = _logged_replay(tail_on_deviation=True)
    inc = assert_equal_at_cuts(frame, CUTS)
    got = _rederived(inc.current)
    assert got and all(c.status == "pass" for c in got.values()), [(c.id, c.status) for c in got.values()]
    assert got["rederive.variance"].evidence["compared"] >= len(frame) - 1  # the Welford chain carried over


def test_rederivation_divergences_across_batches_up_to_the_cap():
    from regime_dash.analysis.rederive import MAX_DIVERGENCES

    frame = _logged_replay("tail_shock", seed=0, steps=2000)
    frame[v.SIGMA] = frame[v.SIGMA].astype(np.float32)
    frame.loc[400:400 + MAX_DIVERGENCES + 49, v.SIGMA] *= np.float32(1.001)  # one span over several batches
    frame.loc[1500, v.SIGMA] *= np.float32(0.999)
    inc = assert_equal_at_cuts(frame, (1, 401, 450, 451, 620, 649, 650, 651, 1500, 1501))
    sigma = _rederived(inc.current)["rederive.sigma"]
    assert sigma.status == "fail" and len(sigma.evidence["divergences"]) == MAX_DIVERGENCES
    assert sigma.spans[0] == (int(frame["step"][400]), int(frame["step"][649]))


def test_a_chain_switch_turned_on_late_re_reads_the_earlier_batches():
    frame = _logged_replay(tail_on_deviation=True, steps=1500)
    col = "risk_stack.config.tail_on_deviation"
    frame[col] = 0.0
    frame.loc[1200:, col] = 1.0
    assert_equal_at_cuts(frame, (300, 900, 1201, 1300))


def test_a_controller_modules_checks_from_the_registry():
    from regime_dash.modules import MODULES

    module = MODULES["pearl_c"]
    frame = module.replay(module.demo_stream(0, 600), module.config_type())
    inc = assert_equal_at_cuts(frame, (1, 150, 151, 400))
    assert any(c.id in set(module.check_ids) for c in inc.current.checks)


def _envelope_finding(vd):
    return [(f.severity, f.steps, f.spans, f.evidence, f.message) for f in vd.findings if f.id == "envelope_decay_horizon"]


def long_envelope_frame(peak_at: tuple, n: int = 60_000, rate: float = 0.01) -> pd.DataFrame:
    """A long run of a noisy resting envelope captured to ever higher peaks (each decaying at ``rate`` by
    the kernel's line), a fall faster than α_d in the decay of the last peak, a phase change, and a new
    lowest value late in the run (it moves the end when the resting level is the lowest value)."""
    rng = np.random.default_rng(7)
    env = np.ones(n, np.float32) + np.arange(n, dtype=np.float32) % 7 / 100
    one, r = np.float32(1.0), np.float32(rate)
    for k, p in enumerate(peak_at):
        env[p] = 41.0 + 10 * k
        for i in range(p + 1, n):
            env[i] = (one - r) * env[i - 1] + r * (one + np.float32(rng.random() * 0.01))
    if len(peak_at) > 1:
        env[peak_at[-1] + 150] *= np.float32(0.5)  # faster than any batch allows
    env[30_000] = 0.6
    frame = pd.DataFrame({"step": np.arange(n), v.ENVELOPE: env, v.DECAY_ALPHA: np.full(n, 0.01, np.float32)})
    frame["phase"] = np.where(np.arange(n) < n - 5000, "train", "eval")
    return frame


@pytest.mark.parametrize("peak_at", [(5,), (500, 20_000, 41_000)], ids=["rest-is-lowest", "rest-is-median"])
def test_envelope_decay_horizon_across_long_prefixes_keeps_no_rows(peak_at):
    """The envelope carry at cut points of a long run (peaks moving, the end moving, a divergent row) equals
    the full finder, message and evidence too, and holds no per-row state."""
    frame = long_envelope_frame(peak_at)
    inc = IncrementalVerdict(reload=lambda: frame.iloc[:done].reset_index(drop=True))
    done, ends = 0, {}
    for cut in [4, 6, 7, 100, 155, 156, 157, 300, 5_000, 19_999, 20_001, 20_100, 20_300, 29_999, 30_001, 41_000,
                41_149, 41_150, 41_151, 41_400, 50_000, 55_001, 60_000]:
        got = inc.update(frame.iloc[done:cut].reset_index(drop=True))
        done = cut
        want = verdict(frame.iloc[:cut].reset_index(drop=True))
        assert _envelope_finding(got) == _envelope_finding(want), f"differs after {cut} rows"
        ends[cut] = [tuple(f[2][0]) for f in _envelope_finding(got)]
    (sev, *_rest), = _envelope_finding(got)
    assert inc.rebuilds == 0 and sev == ("fail" if len(peak_at) > 1 else "info")
    if len(peak_at) == 1:  # the lowest value at 30,000 lowers the resting level: the end moves later
        assert ends[29_999][0][1] < ends[30_001][0][1]
    carry = inc.finders["envelope_decay_horizon"]
    assert len(getattr(carry, "records", [])) < 2_000  # records from the end on, not the run's rows
    assert not any(isinstance(x, (pd.DataFrame, np.ndarray)) and len(x) > 2_000 for x in vars(carry).values())
