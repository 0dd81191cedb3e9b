"""engine="fast" on the CPU: bit-identical to the reference on streams that exercise every branch.

The streams have session boundaries, tail shocks and a steady drift in the worst-pnl series,
all-flat stretches (dead zones), cooldowns and reward spikes (the envelope's
fast-up path), and batch sizes below, at and above one 256-thread block stride.
"""
from __future__ import annotations

import numpy as np
import pytest

from regime_dash import RegimeConfig, Stream, replay_trajectory
from regime_dash.engine import fast, initial_isv, reference, snapshot_indices
from regime_dash.errors import EngineUnavailable, ValidationError
from regime_dash.core.slots import DEFAULT_LAYOUT


def regime_stream(rng: np.random.Generator, steps: int, accounts: int, v_pred: bool = True) -> Stream:
    """A stream that walks through dead zones, tails, boundaries, cooldowns and reward spikes."""
    rewards = (rng.standard_normal((steps, accounts)) * 0.3).astype(np.float32)
    spikes = rng.random((steps, accounts)) < 0.002
    rewards[spikes] *= 40.0
    lots = (rng.random((steps, accounts)) < 0.4).astype(np.int32) * rng.integers(1, 4, (steps, accounts))
    flat_stretch = (np.arange(steps) // 40) % 3 == 1        # every third 40-step stretch is all flat
    lots[flat_stretch] = 0
    kelly = rng.normal(0.05, 0.1, steps).astype(np.float32)
    kelly[flat_stretch] = -0.2                                # analytic Kelly clamps to 0 there
    worst = np.cumsum(rng.standard_normal(steps) * 0.1).astype(np.float32)
    worst[rng.random(steps) < 0.02] -= 25.0                   # tail shocks
    worst[:5] = 0.0                                          # the Welford bootstrap skip
    drift = np.arange(5, min(steps, 60))
    worst[drift] = np.float32(-0.37) * (drift - 4).astype(np.float32)  # a steady drift: Δworst ≈ const
    cooldown = np.where(rng.random(steps) < 0.05, 3.0, 0.0).astype(np.float32)
    cooldown[flat_stretch] = 0.0                              # so the dead zones last
    boundary = np.zeros(steps, dtype=bool)
    boundary[[steps // 3, steps // 3 + 1, 2 * steps // 3]] = True
    return Stream.make(rewards=rewards, lots=lots, kelly_analytic=kelly, cooldown=cooldown,
                       session_pnl_worst=worst, tau_action=rng.random(steps).astype(np.float32),
                       boundary=boundary, step=np.arange(steps) * 2 + 100,
                       v_pred=rng.standard_normal((steps, accounts)) if v_pred else None)


def assert_bits_equal(a: np.ndarray, b: np.ndarray, what: str) -> None:
    assert a.dtype == b.dtype == np.float32, what
    assert a.shape == b.shape, what
    bad = np.argwhere(a.view(np.int32) != b.view(np.int32))
    assert bad.size == 0, f"{what}: first difference at {bad[0].tolist()}: {a[tuple(bad[0])]!r} vs {b[tuple(bad[0])]!r}"


CONFIGS = [
    RegimeConfig(),
    RegimeConfig(resurrection=False, max_duration=20, eps_min=0.0, tau_boost_window=20),
    RegimeConfig(envelope=False, tau_boost=False, envelope_decay_alpha=0.5, popart_alpha=0.2,
                 transition_steps=50, transition_decay_steps=20),
    RegimeConfig(tail_on_deviation=True),
    RegimeConfig(duration_across_cycles=True, max_duration=20),
]


def assert_frames_bit_equal(want, got):
    """Every column the same: float32 ones bit for bit, the rest value for value."""
    for col in want.columns:
        a, b = want[col].to_numpy(), got[col].to_numpy()
        if a.dtype == np.float32:
            assert_bits_equal(a, b, col)
        else:
            np.testing.assert_array_equal(a, b, err_msg=col)


@pytest.mark.parametrize("accounts", [1, 31, 1500])
@pytest.mark.parametrize("config", CONFIGS, ids=["spec", "no-resurrection", "switches-off", "tail-on-deviation",
                                                 "duration-across-cycles"])
def test_fast_cpu_is_bit_identical_to_reference(accounts, config):
    stream = regime_stream(np.random.default_rng(accounts), 300, accounts)
    ref = replay_trajectory(stream, config, engine="reference")
    got = replay_trajectory(stream, config, engine="fast", device="cpu")
    assert got.engine == "fast"
    assert_frames_bit_equal(ref.frame, got.frame)
    assert_bits_equal(ref.rewards_normalized, got.rewards_normalized, "rewards_normalized")
    assert_bits_equal(ref.v_pred_corrected, got.v_pred_corrected, "v_pred_corrected")
    assert_bits_equal(ref.isv, got.isv, "final isv")


@pytest.mark.parametrize("steps", [1, 2, 7])
def test_fast_cpu_short_streams_are_bit_identical_to_reference(steps):
    """A live stepper replays one step at a time: a [1, n] snapshot is C- and F-contiguous at once, which the
    scan's one signature takes as well as the column-major [T, n] of a long replay."""
    stream = regime_stream(np.random.default_rng(steps), 300, 8).slice(95, 95 + steps)
    ref = replay_trajectory(stream, RegimeConfig(), engine="reference")
    got = replay_trajectory(stream, RegimeConfig(), engine="fast", device="cpu")
    assert len(got.frame) == steps
    assert_frames_bit_equal(ref.frame, got.frame)
    assert_bits_equal(ref.isv, got.isv, "final isv")


def test_the_streams_reach_the_branches_they_are_meant_to():
    # Without this a parity test on a stream that never leaves the quiet path proves little.
    stream = regime_stream(np.random.default_rng(31), 300, 31)
    frame = replay_trajectory(stream, CONFIGS[1], engine="fast", device="cpu").frame
    r = "risk_stack.regime."
    assert frame[r + "dead_zone.flag"].sum() > 20
    assert frame[r + "dead_zone.timeout_flag"].sum() > 0
    assert (frame[r + "tail.recency"] == 0).sum() > 0
    spec = replay_trajectory(stream, CONFIGS[0], engine="fast", device="cpu").frame
    floor = spec["risk_stack.popart.sigma"] > np.sqrt(spec["risk_stack.popart.var"])
    assert floor.any() and (~floor).any()
    assert (spec[r + "kelly_eps_recovery.live"] < 0.5).any()
    # the model switches' own branches: fewer tails on the deviation, a timeout with F2 on
    deviation = replay_trajectory(stream, CONFIGS[3], engine="fast", device="cpu").frame
    tails = (spec[r + "tail.recency"] == 0).sum()
    assert 0 < (deviation[r + "tail.recency"] == 0).sum() != tails
    across = replay_trajectory(stream, CONFIGS[4], engine="fast", device="cpu").frame
    carried = (across[r + "dead_zone.flag"] == 0) & (across[r + "dead_zone.duration"] > 0)
    assert carried.any() and across[r + "dead_zone.timeout_flag"].sum() > 0
    assert spec[r + "dead_zone.timeout_flag"].sum() == 0


def test_phase1_matches_the_reference_reduction_per_step():
    stream = regime_stream(np.random.default_rng(7), 50, 700, v_pred=False)
    stats = fast.step_stats(stream)
    for t in range(stream.steps):
        want = reference.block_reduce_stats(stream.rewards[t])
        assert_bits_equal(stats.sums[t], np.array(want, dtype=np.float32), f"step {t}")
        assert stats.flat[t] == np.count_nonzero(stream.lots[t] == 0)


@pytest.mark.parametrize("b", [1, 31, 33, 128, 256, 257, 600])
def test_phase1_kernel_gives_the_numpy_reduction_bits_at_warp_and_block_edges(b):
    rng = np.random.default_rng(b)
    rewards = (rng.standard_normal((200, b)) * 10).astype(np.float32)
    rewards[rng.random(rewards.shape) < 0.2] = 0.0
    rewards[rng.random(rewards.shape) < 0.1] = -0.0  # the sign of a zero sum is kept, as the tree gives it
    lots = (rng.random((200, b)) < 0.5).astype(np.int32)
    stats = fast.step_stats(Stream.make(rewards=rewards, lots=lots))
    s, q, m = reference.block_reduce_stats(rewards)
    assert stats.sums.tobytes() == np.stack([s, q, m], axis=1).astype(np.float32).tobytes()
    assert np.array_equal(stats.flat, np.count_nonzero(lots == 0, axis=1))


def test_kept_phase1_and_no_normalize_change_no_frame_bit():
    stream = regime_stream(np.random.default_rng(3), 40, 300, v_pred=False)
    whole = replay_trajectory(stream, CONFIGS[1], engine="fast", device="cpu")
    kept = replay_trajectory(stream, CONFIGS[1], engine="fast", device="cpu", stats=fast.step_stats(stream),
                             normalized=False)
    assert kept.rewards_normalized is None and whole.rewards_normalized is not None
    for col in whole.frame.columns:
        assert whole.frame[col].equals(kept.frame[col]), col


def test_cpu_sweep_scan_equals_single_scans():
    stream = regime_stream(np.random.default_rng(3), 200, 31, v_pred=False)
    rows = [initial_isv(c, None, DEFAULT_LAYOUT) for c in CONFIGS]
    isv0s = np.stack([r[0] for r in rows])
    boots = np.stack([r[1] for r in rows])
    acc, kept = fast.sweep_cpu(stream, isv0s, boots, DEFAULT_LAYOUT, keep=[2, 0])
    assert sorted(kept) == [0, 2]
    assert acc.shape[0] == len(CONFIGS)
    for k in (0, 2):
        snap = reference.run(stream, isv0s[k], boots[k], DEFAULT_LAYOUT, snapshot_indices(DEFAULT_LAYOUT))[0]
        assert_bits_equal(kept[k], snap, f"kept snapshot {k}")


def test_device_choice():
    stream = regime_stream(np.random.default_rng(1), 20, 4)
    with pytest.raises(ValidationError, match="'tpu'"):
        replay_trajectory(stream, engine="fast", device="tpu")
    if fast._gpu_reason() is not None:
        with pytest.raises(EngineUnavailable, match="GPU"):
            replay_trajectory(stream, engine="fast", device="gpu")
    assert fast.available() is None


def test_sweep_cpu_rejects_bad_keep_and_shapes():
    stream = regime_stream(np.random.default_rng(1), 20, 4)
    isv0, boot = initial_isv(RegimeConfig(), None, DEFAULT_LAYOUT)
    with pytest.raises(ValidationError, match="keep index 3"):
        fast.sweep_cpu(stream, isv0[None], boot[None], DEFAULT_LAYOUT, keep=[3])
    with pytest.raises(ValidationError, match="boot_rows"):
        fast.sweep_cpu(stream, isv0[None], np.stack([boot, boot]), DEFAULT_LAYOUT, keep=[])


@pytest.mark.gpu
def test_fast_gpu_through_replay_is_bit_identical_and_auto_picks_it():
    stream = regime_stream(np.random.default_rng(77), 300, 300)
    ref = replay_trajectory(stream, CONFIGS[1], engine="reference")
    for device in ("gpu", "auto"):
        got = replay_trajectory(stream, CONFIGS[1], engine="fast", device=device)
        for col in ref.frame.columns:
            a, b = ref.frame[col].to_numpy(), got.frame[col].to_numpy()
            if a.dtype == np.float32:
                assert_bits_equal(a, b, f"{device}: {col}")
            else:
                np.testing.assert_array_equal(a, b, err_msg=col)
        assert_bits_equal(ref.rewards_normalized, got.rewards_normalized, "rewards_normalized")
        assert_bits_equal(ref.v_pred_corrected, got.v_pred_corrected, "v_pred_corrected")
    assert fast.use_gpu("auto") is True


def test_kernels_compile_without_a_writable_cache(monkeypatch):
    # numba raises RuntimeError at decoration when no cache location is writable
    # (a read-only install); the kernels must then be built uncached, not fail.
    import numba

    real, calls = numba.njit, []

    def njit(*args, cache=False, **kw):
        calls.append(cache)
        if cache:
            raise RuntimeError("cannot cache function 'scan': no locator available for file")
        return real(*args, cache=False, **kw)

    monkeypatch.setattr(numba, "njit", njit)
    for name in ("scan", "sweep"):  # dispatchers compile lazily: nothing is compiled here
        assert fast._dispatcher(name, "fingerprint").signatures == []
    assert calls == [True, False] * 2


_CACHE_PROBE = """
import json, sys
from regime_dash.engine import fast
out = {"before": {e: fast.cpu_cache_warm(e) for e in fast.ENTRIES}}
real = fast.dependency_fingerprint
fast.dependency_fingerprint = lambda: real() + "-edited"  # as if reference.py had changed
out["edited"] = fast.cpu_cache_warm("replay")
fast.dependency_fingerprint = real
out["compiled_by_probe"] = sorted(fast._KERNELS)
if sys.argv[1] == "compile":
    fast.compile_cpu("replay")
    out["hits"] = sum(fast._KERNELS["scan"].stats.cache_hits.values())
    out["after"] = fast.cpu_cache_warm("replay")
print(json.dumps(out))
"""


def _probe(tmp_path, action: str) -> dict:
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    done = subprocess.run([sys.executable, "-c", _CACHE_PROBE, action], env=env, capture_output=True, text=True,
                          timeout=600, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # a cold numba compile in a subprocess: ~7 s of CPU
def test_cpu_cache_warm_tells_a_cold_cache_from_a_warm_one_without_compiling(tmp_path):
    first = _probe(tmp_path, "compile")           # a fresh cache: nothing there, so the replay kernel compiles
    assert first["before"] == {"replay": False, "sweep": False}
    assert first["compiled_by_probe"] == []       # asking compiled nothing
    assert first["hits"] == 0 and first["after"] is True
    second = _probe(tmp_path, "compile")          # a new process over the same cache: loaded, not compiled
    assert second["before"] == {"replay": True, "sweep": False}
    assert second["edited"] is False              # another dependency fingerprint is another cache key
    assert second["compiled_by_probe"] == []
    assert second["hits"] == 1


def test_the_session_fixture_built_every_cpu_kernel_before_the_first_test(numba_cache):
    if not numba_cache:
        pytest.skip("numba is not installed: the fast engine's CPU kernels are not built")
    assert all(name in fast._KERNELS for names in fast.ENTRIES.values() for name in names)
    assert all(fast.cpu_cache_warm(entry) for entry in fast.ENTRIES)


def test_compile_cpu_gives_one_specialization_and_rejects_unknown_entries():
    with pytest.raises(ValidationError, match="'warp'"):
        fast.compile_cpu("warp")
    with pytest.raises(ValidationError, match="'warp'"):
        fast.cpu_cache_warm("warp")
    fast.compile_cpu("replay")
    assert "scan" in fast._KERNELS and fast.cpu_cache_warm("replay") is True
    scan = fast._KERNELS["scan"]
    assert len(scan.signatures) == 1              # one specialization, and no call can add another
    with pytest.raises(TypeError):
        scan(*([np.zeros(1, dtype=np.float64)] * 17))
