"""Each kernel against its NumPy twin in regime_dash/engine/reference.py, bit for bit.

One parametrized test per kernel over awkward batch sizes (1, 31, 1500), each
on many random ISV states chosen to hit both sides of every branch. Kernels
are compiled with ``--fmad=false`` (the loader's parity options), so float
results must be bit-identical: compared as int32 views.
"""
from __future__ import annotations

import numpy as np
import pytest

from regime_dash.engine import reference as ref
from regime_dash.engine import cuda as cuda_engine
from regime_dash.engine import fast_gpu, loader
from regime_dash.core.slots import DEFAULT_LAYOUT as L

pytestmark = pytest.mark.gpu

SIZES = (1, 31, 1500)
TRIALS = 24
IX = ref.index_table(L)


def idx(name: str) -> int:
    return L.index(name)


@pytest.fixture(scope="module")
def cp():
    return loader.cupy_module()


@pytest.fixture(scope="module")
def mod(cp):
    return loader.load_module(cuda_engine.FILES + fast_gpu.FILES)


def random_isv(rng: np.random.Generator) -> np.ndarray:
    """A bootstrap ISV with every slot the kernels read set to a random, branch-hitting value."""
    isv = L.bootstrap_vector()
    c = rng.choice

    def put(name, value):
        isv[idx(name)] = np.float32(value)

    put("RL_KELLY_FRACTION_INDEX", c([0.0, 0.0, 0.3]))
    put("RL_COOLDOWN_REMAINING_STEPS_INDEX", c([0.0, 0.0, 2.0]))
    put("RL_REGIME_DEAD_ZONE_DURATION_INDEX", c([0.0, 5.0, 999.0, 1000.0]))
    put("RL_REGIME_DEAD_ZONE_FLAG_INDEX", c([0.0, 1.0]))
    put("RL_REGIME_DEAD_ZONE_TIMEOUT_FLAG_INDEX", c([0.0, 0.0, 1.0]))
    both_zero = rng.random() < 0.2
    put("RL_SESSION_PNL_WORST_INDEX", 0.0 if both_zero else rng.normal(-50, 30))
    put("RL_REGIME_PREV_WORST_PNL_INDEX", 0.0 if both_zero else rng.normal(-50, 30))
    put("RL_REGIME_SESSION_PNL_VAR_COUNT_INDEX", c([0.0, 1.0, 8.0, 9.0, 10.0, 57.0]))
    put("RL_REGIME_SESSION_PNL_VAR_MEAN_INDEX", rng.normal(0, 3))
    put("RL_REGIME_SESSION_PNL_VAR_M2_INDEX", rng.uniform(0, 500))
    put("RL_REGIME_SESSION_PNL_VARIANCE_EMA_INDEX", c([0.0, rng.uniform(0.1, 40)]))
    put("RL_REGIME_TAIL_EVENT_RECENCY_INDEX", c([0.0, 7.0, 99.0, 100.0, 1e6]))
    put("RL_KELLY_EPS_RECOVERY_MIN_INDEX", rng.uniform(0, 0.1))
    put("RL_KELLY_EPS_RECOVERY_MAX_INDEX", rng.uniform(0.3, 0.7))
    put("RL_KELLY_EPS_RECOVERY_N_RECOVERY_INDEX", c([0.0, 37.0, 100.0]))
    put("RL_KELLY_EPS_RECOVERY_LIVE_INDEX", rng.uniform(0, 0.5))
    put("RL_KELLY_EDGE_INPUT_INDEX", rng.normal(0.1, 0.5))
    put("RL_KELLY_SAFETY_FRAC_INDEX", rng.uniform(0.2, 0.6))
    put("RL_KELLY_CAP_INDEX", c([1.0, 0.15]))
    put("RL_IQN_TAU_ACTION_INPUT_INDEX", rng.uniform(0, 0.3))
    put("RL_IQN_ACTION_TAU_MIN_INDEX", rng.uniform(0.05, 0.2))
    put("POPART_MEAN_INDEX", rng.normal(0, 1))
    put("POPART_VAR_INDEX", c([1e-9, rng.uniform(0.1, 10)]))
    put("POPART_SIGMA_INDEX", rng.uniform(0.3, 5))
    put("POPART_PREV_MEAN_INDEX", rng.normal(0, 1))
    put("POPART_PREV_SIGMA_INDEX", rng.uniform(0.3, 5))
    put("RL_POPART_MAX_ABS_REWARD_EMA_INDEX", c([0.0, rng.uniform(0, 30)]))
    put("RL_REGIME_TRANSITION_REMAINING_INDEX", c([-1.0, 0.0, 1.0, 249.0, 499.0]))
    put("RL_REGIME_TRANSITION_DECAY_STEPS_CONFIG_INDEX", c([0.0, 250.0]))
    for feature in ("RESURRECTION", "ENVELOPE", "TAU_BOOST"):
        put(f"RL_REGIME_FEATURE_{feature}_INDEX", c([0.0, 1.0, 1.0]))
    for model in ("TAIL_ON_DEVIATION", "DURATION_ACROSS_CYCLES"):  # the model switches, both ways
        put(f"RL_REGIME_MODEL_{model}_INDEX", c([0.0, 1.0]))
    for mirror in ("TAU_BOOST", "RESURRECTION"):  # the fused kernel's mirror switches, both ways
        put(f"RL_FUSED_MIRROR_{mirror}_INDEX", c([0.0, 1.0, 1.0]))
    return isv


def random_rewards(rng, b):
    r = (rng.standard_normal(b) * rng.choice([0.01, 1.0, 30.0])).astype(np.float32)
    if rng.random() < 0.5:
        r[rng.integers(0, b)] = np.float32(rng.choice([-100.0, 19.45]))  # a tail account
    return r


def bits(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32).view(np.int32)


def assert_bits_equal(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    bad = np.flatnonzero(bits(got).ravel() != bits(want).ravel())
    assert bad.size == 0, (f"{what}: {bad.size} values differ, first at {int(bad[0])}: "
                           f"got {got.ravel()[bad[0]]!r}, want {want.ravel()[bad[0]]!r}")


def one(cp, kernel, args, block=1, shared=0):
    kernel((1,), (block,), args, shared_mem=shared)
    cp.cuda.get_current_stream().synchronize()


# ---- one case per kernel: (device run, NumPy twin) on one random state -------------
def case_popart_normalize(cp, mod, rng, b):
    isv, r = random_isv(rng), random_rewards(rng, b)
    d_isv, d_r = cp.asarray(isv), cp.asarray(r)
    one(cp, mod["rl_popart_normalize"], (d_r, d_isv, np.int32(b)), block=256,
        shared=(256 * 3 + 3) * 4)
    v_sum, v_ssq, v_max = ref.block_reduce_stats(r)
    mean, sigma = ref.rl_popart_normalize_update(isv, IX, v_sum, v_ssq, v_max, b)
    ref.rl_popart_normalize_apply(r, mean, sigma)
    return [(d_isv, isv, "isv"), (d_r, r, "rewards")]


def case_popart_v_correct(cp, mod, rng, b):
    isv = random_isv(rng)
    v = (rng.standard_normal(b) * 3).astype(np.float32)
    d_v = cp.asarray(v)
    mod["rl_popart_v_correct"](((b + 255) // 256,), (256,), (d_v, cp.asarray(isv), np.int32(b)))
    cp.cuda.get_current_stream().synchronize()
    ref.rl_popart_v_correct(v, isv, IX)
    return [(d_v, v, "v_pred")]


def case_flat_count(cp, mod, rng, b):
    lots = rng.integers(0, 3, b).astype(np.int32)
    if rng.random() < 0.3:
        lots[:] = 0
    out = cp.full(1, -1, np.int32)
    one(cp, mod["rl_regime_flat_count"], (cp.asarray(lots), out, np.int32(b)), block=256,
        shared=256 * 4)
    assert int(out[0]) == int(np.count_nonzero(lots == 0))
    return []


def case_observer(cp, mod, rng, b):
    isv = random_isv(rng)
    flat = int(rng.choice([b, b, max(b - 1, 0)]))
    d_isv = cp.asarray(isv)
    one(cp, mod["rl_regime_observer"], (d_isv, cp.asarray(np.array([flat], np.int32)), np.int32(b)))
    ref.rl_regime_observer(isv, IX, flat, b)
    return [(d_isv, isv, "isv")]


def _scalar(name, twin):
    def case(cp, mod, rng, b):
        isv = random_isv(rng)
        d_isv = cp.asarray(isv)
        one(cp, mod[name], (d_isv,))
        twin(isv, IX)
        return [(d_isv, isv, "isv")]
    return case


def case_reset(cp, mod, rng, b):
    isv, boot = random_isv(rng), random_isv(rng)
    r_idx, r_code, r_src = L.reset_plan()
    active = int(rng.integers(0, 2))
    d_isv = cp.asarray(isv)
    one(cp, mod["reset_session_state"], (d_isv, cp.asarray(boot), cp.asarray(r_idx), cp.asarray(r_code),
                                         cp.asarray(r_src), np.int32(len(r_idx)),
                                         cp.asarray(np.array([active], np.int32))))
    if active:
        ref.reset_session_state(isv, boot, r_idx, r_code, r_src)
    return [(d_isv, isv, "isv")]


def case_step_stats(cp, mod, rng, b):
    t_steps = 5
    rewards = np.stack([random_rewards(rng, b) for _ in range(t_steps)])
    lots = rng.integers(0, 2, (t_steps, b)).astype(np.int32)
    stats = cp.empty((t_steps, 3), np.float32)
    flat = cp.empty(t_steps, np.int32)
    mod["replay_step_stats"]((t_steps,), (256,), (cp.asarray(rewards), cp.asarray(lots), np.int32(b),
                                                  np.int32(t_steps), stats, flat),
                             shared_mem=(256 * 3 + 8) * 4)
    want = np.array([ref.block_reduce_stats(r) for r in rewards], dtype=np.float32)
    assert np.array_equal(cp.asnumpy(flat), (lots == 0).sum(axis=1))
    return [(stats, want, "stats")]


def case_normalize_pass(cp, mod, rng, b):
    t_steps = 4
    rewards = np.stack([random_rewards(rng, b) for _ in range(t_steps)])
    v = (rng.standard_normal((t_steps, b)) * 2).astype(np.float32)
    params = np.column_stack([rng.normal(0, 1, t_steps), rng.uniform(0.3, 20, t_steps),
                              rng.normal(0, 1, t_steps), rng.uniform(0.3, 20, t_steps)]).astype(np.float32)
    d_r, d_v = cp.asarray(rewards), cp.asarray(v)
    mod["replay_normalize"]((3,), (256,), (d_r, d_v, np.int32(1), cp.asarray(params),
                                           np.int32(t_steps), np.int32(b)))
    isv = L.bootstrap_vector()
    for t in range(t_steps):
        mean, sigma, m_old, s_old = params[t]
        ref.rl_popart_normalize_apply(rewards[t], mean, sigma)
        isv[idx("POPART_MEAN_INDEX")], isv[idx("POPART_SIGMA_INDEX")] = mean, sigma
        isv[idx("POPART_PREV_MEAN_INDEX")], isv[idx("POPART_PREV_SIGMA_INDEX")] = m_old, s_old
        ref.rl_popart_v_correct(v[t], isv, IX)
    return [(d_r, rewards, "rewards"), (d_v, v, "v_pred")]


CASES = {
    "rl_popart_normalize": case_popart_normalize,
    "rl_popart_v_correct": case_popart_v_correct,
    "rl_regime_flat_count": case_flat_count,
    "rl_regime_observer": case_observer,
    "rl_iqn_action_tau_controller": _scalar("rl_iqn_action_tau_controller",
                                            ref.rl_iqn_action_tau_controller),
    "rl_kelly_fraction_controller": _scalar("rl_kelly_fraction_controller",
                                            ref.rl_kelly_fraction_controller),
    "rl_fused_controllers": _scalar("rl_fused_controllers", ref.rl_fused_controllers),
    "eval_warmup_decay": _scalar("eval_warmup_decay", ref.eval_warmup_decay),
    "reset_session_state": case_reset,
    "replay_step_stats": case_step_stats,
    "replay_normalize": case_normalize_pass,
}


@pytest.mark.parametrize("b", SIZES)
@pytest.mark.parametrize("kernel", sorted(CASES))
def test_kernel_matches_its_numpy_twin(cp, mod, kernel, b):
    rng = np.random.default_rng([b, len(kernel)])
    for trial in range(TRIALS):
        for got, want, what in CASES[kernel](cp, mod, rng, b):
            assert_bits_equal(cp.asnumpy(got), want, f"{kernel} b={b} trial {trial}: {what}")
