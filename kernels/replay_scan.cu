// replay_scan — phase 2 of the fast replay: the scalar state machine over all
// T steps, calling regime_step.cuh's functions (the same the per-step kernels
// call) or their step-by-step twins on the shared phase-1 stats and the
// per-step stream inputs, for the single replay (sweeps of many scenarios run
// replay_sweep.cu). One warp per scenario.
//
// Each scenario has its own ISV row (isv_rows [S, ISV_SIZE], updated in place
// to the final state) and its own re-bootstrap row (boot_rows [S, ISV_SIZE]).
// While the scan runs, the registry's slots live in registers: the ISV is a
// local array indexed only by compile-time constants (slot macros,
// ISV_SLOT_LIST, CHAIN_SLOT_LIST, SNAP_SLOT_LIST from the loader's defines),
// which the compiler turns into registers. Only a boundary goes through
// memory: the slots are spilled to a scratch array, the runtime reset plan
// (reset_session_state_apply) runs on it, and they are read back.
//
// The warp works in batches of SCAN_BATCH = 32 steps, step j of a batch on
// lane j. The 32 lanes load the next batch's inputs with coalesced loads,
// issued into registers before the current batch starts so that they are in
// flight while it runs (the registers are the second buffer), take each step's
// state-free quotients (parked_step_inputs), and park them in shared memory once
// the batch is done; each step's snapshot row and norm params are staged in
// shared memory and the warp writes the batch's rows back with coalesced stores.
//
// How a batch's steps run (SCAN_WARP_SPLIT):
//   * 1 (default), the split chain. A step's slots form a few recurrences that
//     meet only through values of the step before (the spec's one-step lag):
//       PopArt's μ, var and max|r| EMA; Welford's mean, M2 and count; the v9
//       transition countdown                          — state-only, no cross-feeds;
//       tail recency                                  — reads Welford's step values;
//       dead zone, DURATION, TIMEOUT and Kelly's pick — reads ε_live and Kelly's
//                                                       analytic f of the step before.
//     Everything else of a step (σ = sqrt(var), Welford's variance, the tail
//     test, the recovery factor and ε_live, τ, Kelly's f, the v9 safety
//     fraction) is a function of those recurrences' values at that step and of
//     its inputs. So lane 0 runs only the recurrences, in short branch-free
//     loops (MomentChain: PopArt's and Welford's interleaved; DeadZoneChain),
//     and the 32 lanes evaluate everything else for the batch's 32 steps at
//     once, step j on lane j (produce_segment, consume_segment: recency by a
//     ballot over the tail tests, the countdown in closed form). Whole batches
//     without a boundary are pipelined: lane 0 runs batch k's MomentChain and
//     batch k − 1's DeadZoneChain in one loop, interleaved, and batch k − 1's
//     rows are staged after it (-DSCAN_WARP_PIPELINE=0: one batch at a time).
//     Every float operation is the one regime_step.cuh does,
//     on the same operands in the same order, so the bits are the same; only
//     where and when it runs changes. A boundary step, whose reset may touch
//     any slot, runs the unchanged scalar_step on lane 0, and the batch is cut
//     into the segments between boundaries.
//   * 0, the whole chain on lane 0 (scalar_step per step; kept for timing).
//   The split chain assumes the slots regime_step.cuh names are distinct
//   (split_slots_distinct); a layout that aliases two of them gets mode 0.
// Launch: <<<S, 32>>>.
#include "regime_step.cuh"
#include "replay_inputs.cuh"

#ifndef CHAIN_SLOT_LIST
#define CHAIN_SLOT_LIST ISV_SLOT_LIST
#endif
#ifndef SCAN_WARP_SPLIT
#define SCAN_WARP_SPLIT 1
#endif

// The reset a boundary runs: spill the register-held slots to a scratch
// array, apply the layout's runtime reset plan, read them back.
struct RegisterReset {
    ResetPlan plan;
    __device__ __forceinline__ void operator()(float* v) const {
        float scratch[ISV_SIZE];
#define X(i) scratch[i] = v[i];
        ISV_SLOT_LIST
#undef X
        plan.apply(scratch);
#define X(i) v[i] = scratch[i];
        ISV_SLOT_LIST
#undef X
    }
};

// ---- replay_scan_warp: the single replay, one warp per scenario ----
#define SCAN_BATCH 32  // steps per batch: one per lane
#define SCAN_FULL 0xffffffffu

// The loading lanes take the state-free quotients off lane 0's chain
// (predivide_step_inputs, replay_inputs.cuh): two divisions, each a long
// dependent sequence for one thread. -DSCAN_WARP_PREDIVIDE=0 keeps them in the
// chain (for timing).
#ifndef SCAN_WARP_PREDIVIDE
#define SCAN_WARP_PREDIVIDE 1
#endif

// The same quotients on inputs already loaded (for a prefetch: its loads stay in
// flight until the batch is parked).
__device__ __forceinline__ ScanStepInputs parked_step_inputs(ScanStepInputs in, int b_size) {
#if SCAN_WARP_PREDIVIDE
    return predivide_step_inputs(in, b_size);
#else
    return in;
#endif
}


// Where a step's snapshot row and norm params go (each pointer null when not wanted).
struct ScanStage {
    float* snap;  // [SCAN_BATCH, N_SNAP]
    float* norm;  // [SCAN_BATCH, 4]
};

// One whole step on one thread (scalar_step), staged as row j.
__device__ __forceinline__ void serial_step(float* isv, const ScanStepInputs& in, int j,
                                            int chain_b, const RegisterReset& reset,
                                            const ScanStage& stage) {
    float mean, sigma;
    scalar_step(isv, in.boundary, in.cooldown, in.worst, in.kelly_edge, in.tau_action, in.v_sum,
                in.v_ssq, in.v_max, in.flat, chain_b, reset, mean, sigma);
    if (stage.snap != nullptr) {
        float* out = stage.snap + j * N_SNAP;
#define S(c) out[c] = isv[SNAP_SLOT_##c];
        SNAP_SLOT_LIST
#undef S
    }
    if (stage.norm != nullptr) {
        stage.norm[j * 4 + 0] = mean;
        stage.norm[j * 4 + 1] = sigma;
        stage.norm[j * 4 + 2] = isv[POPART_PREV_MEAN_INDEX];
        stage.norm[j * 4 + 3] = isv[POPART_PREV_SIGMA_INDEX];
    }
}

// ---- the split chain (SCAN_WARP_SPLIT=1) ----

// The split chain keeps each named slot in its own variable; two names on one
// index (a layout that overlaps them) would make it differ from scalar_step.
__host__ __device__ constexpr bool indices_distinct() { return true; }
template <class... R>
__host__ __device__ constexpr bool indices_distinct(int a, R... rest) {
    return ((a != rest) && ... && true) && indices_distinct(rest...);
}
constexpr bool split_slots_distinct = indices_distinct(
    RL_COOLDOWN_REMAINING_STEPS_INDEX, RL_SESSION_PNL_WORST_INDEX, RL_KELLY_EDGE_INPUT_INDEX,
    RL_IQN_TAU_ACTION_INPUT_INDEX, POPART_ALPHA_INDEX, POPART_MEAN_INDEX, POPART_VAR_INDEX,
    POPART_PREV_MEAN_INDEX, POPART_PREV_SIGMA_INDEX, POPART_SIGMA_INDEX,
    RL_REGIME_FEATURE_ENVELOPE_INDEX, RL_POPART_MAX_DECAY_ALPHA_INDEX,
    RL_POPART_MAX_ABS_REWARD_EMA_INDEX, RL_KELLY_FRACTION_INDEX, RL_REGIME_DEAD_ZONE_FLAG_INDEX,
    RL_REGIME_DEAD_ZONE_TIMEOUT_FLAG_INDEX, RL_REGIME_DEAD_ZONE_DURATION_INDEX,
    RL_REGIME_MODEL_DURATION_ACROSS_CYCLES_INDEX, RL_REGIME_FEATURE_RESURRECTION_INDEX,
    RL_REGIME_DEAD_ZONE_MAX_DURATION_INDEX, RL_REGIME_PREV_WORST_PNL_INDEX,
    RL_REGIME_SESSION_PNL_VAR_MEAN_INDEX, RL_REGIME_SESSION_PNL_VAR_M2_INDEX,
    RL_REGIME_SESSION_PNL_VAR_COUNT_INDEX, RL_REGIME_SESSION_PNL_VARIANCE_EMA_INDEX,
    RL_REGIME_TAIL_SIGMA_THRESHOLD_INDEX, RL_REGIME_MODEL_TAIL_ON_DEVIATION_INDEX,
    RL_REGIME_TAIL_EVENT_RECENCY_INDEX, RL_KELLY_EPS_RECOVERY_N_RECOVERY_INDEX,
    RL_KELLY_EPS_RECOVERY_MIN_INDEX, RL_KELLY_EPS_RECOVERY_MAX_INDEX,
    RL_REGIME_RECOVERY_FACTOR_INDEX, RL_KELLY_EPS_RECOVERY_LIVE_INDEX,
    RL_IQN_TAU_TAIL_BOOST_N_WINDOW_INDEX, RL_IQN_TAU_TAIL_BOOST_FACTOR_INDEX,
    RL_IQN_ACTION_TAU_MIN_INDEX, RL_REGIME_FEATURE_TAU_BOOST_INDEX, RL_IQN_TAU_MIN_EFFECTIVE_INDEX,
    RL_IQN_TAU_ACTION_INDEX, RL_KELLY_SAFETY_FRAC_INDEX, RL_KELLY_CAP_INDEX,
    RL_KELLY_ANALYTIC_INDEX, RL_REGIME_TRANSITION_REMAINING_INDEX,
    RL_REGIME_TRANSITION_DECAY_STEPS_CONFIG_INDEX, RL_V9_KELLY_SAFETY_FRAC_NORMAL_INDEX,
    RL_V9_KELLY_SAFETY_FRAC_DEFENSIVE_INDEX, RL_FUSED_MIRROR_TAU_BOOST_INDEX,
    RL_FUSED_MIRROR_RESURRECTION_INDEX);
constexpr bool scan_split = SCAN_WARP_SPLIT && split_slots_distinct;

// Lane masks: lanes p..31, and lanes 0..l (l = -1: none).
__device__ __forceinline__ unsigned lanes_from(int p) { return p >= 32 ? 0u : (~0u << p); }
__device__ __forceinline__ unsigned lanes_to(int l) {
    return l >= 31 ? ~0u : ((1u << (l + 1)) - 1u);
}
// The highest lane of a non-empty mask.
__device__ __forceinline__ int top_lane(unsigned m) { return 31 - __clz(m); }
// Value of `x` at the highest lane of `m` (lanes outside m ask lane 0; all lanes take part).
__device__ __forceinline__ float from_top(float x, unsigned m, float otherwise) {
    const float got = __shfl_sync(SCAN_FULL, x, m ? top_lane(m) : 0);
    return m ? got : otherwise;
}

// A batch's per-step values that lane 0's recurrences read or write (element j =
// step j; the inputs have one spare element, so the loop reads step j + 1's
// unconditionally while it runs step j).
struct SplitValues {
    float alpha_mean[SCAN_BATCH + 1], alpha_var[SCAN_BATCH + 1];  // α·batch_mean, α·batch_var
    float v_max[SCAN_BATCH + 1], decay_v_max[SCAN_BATCH + 1];     // max|r|, decay_alpha·max|r|
    float dx[SCAN_BATCH + 1];                                     // worst − prev worst
    float mean[SCAN_BATCH], var[SCAN_BATCH], max_ema[SCAN_BATCH];  // PopArt after the step
    float w_mean[SCAN_BATCH], w_m2[SCAN_BATCH], w_count[SCAN_BATCH];  // Welford after the step
    float duration[SCAN_BATCH];
    unsigned dead, timeout;  // lane masks of the flags
};

// eval_warmup_decay_step's countdown over k >= 1 steps from r0: the value
// after the k-th step, and which branch that step took (1: r > 0, 2: r == 0,
// 0: neither). From an integer-valued r0 below 2^23 every r − 1 is exact, so
// the k-th value is r0 − k while r0 >= k, then −1 once, then −1 kept; any
// other start runs the k steps one by one.
__device__ __forceinline__ float countdown(float r0, int k, int& branch) {
    if (r0 == truncf(r0) && fabsf(r0) < 8388608.0f) {
        const float fk = (float)k;
        if (r0 >= fk) {
            branch = 1;
            return r0 - fk;
        }
        branch = (r0 >= 0.0f && r0 == fk - 1.0f) ? 2 : 0;
        return (r0 >= 0.0f) ? -1.0f : r0;
    }
    float r = r0;
    branch = 0;
    for (int i = 0; i < k; ++i) {
        if (r > 0.0f) {
            r = r - 1.0f;
            branch = 1;
        } else if (r == 0.0f) {
            r = -1.0f;
            branch = 2;
        } else {
            branch = 0;
        }
    }
    return r;
}

// Lane 0's part of PopArt's and Welford's recurrences, one step at a time.
// Branch-free (each step's update is computed, then selected), and step
// j + 1's inputs are read while step j runs, so that only the chains' own
// latency is serial.
struct MomentChain {
    float keep, decay_keep;
    bool envelope;
    unsigned welford;  // steps whose Welford statistics update
    float mean, var, max_ema, w_mean, w_m2, w_count;
    float a_mean, a_var, x_max, d_max, d;  // step j's inputs, read ahead

    __device__ __forceinline__ MomentChain(const float* st, const SplitValues& sv, int p,
                                           unsigned welford_steps)
        : keep(1.0f - st[POPART_ALPHA_INDEX]),
          decay_keep(1.0f - st[RL_POPART_MAX_DECAY_ALPHA_INDEX]),
          envelope(st[RL_REGIME_FEATURE_ENVELOPE_INDEX] != 0.0f), welford(welford_steps),
          mean(st[POPART_MEAN_INDEX]), var(st[POPART_VAR_INDEX]),
          max_ema(st[RL_POPART_MAX_ABS_REWARD_EMA_INDEX]),
          w_mean(st[RL_REGIME_SESSION_PNL_VAR_MEAN_INDEX]),
          w_m2(st[RL_REGIME_SESSION_PNL_VAR_M2_INDEX]),
          w_count(st[RL_REGIME_SESSION_PNL_VAR_COUNT_INDEX]),
          a_mean(sv.alpha_mean[p]), a_var(sv.alpha_var[p]), x_max(sv.v_max[p]),
          d_max(sv.decay_v_max[p]), d(sv.dx[p]) {}

    __device__ __forceinline__ void step(int j, SplitValues& sv) {
        const float am = a_mean, av = a_var, xm = x_max, dm = d_max, dj = d;
        a_mean = sv.alpha_mean[j + 1];
        a_var = sv.alpha_var[j + 1];
        x_max = sv.v_max[j + 1];
        d_max = sv.decay_v_max[j + 1];
        d = sv.dx[j + 1];
        // popart_stats_update
        mean = keep * mean + am;
        var = fmaxf(keep * var + av, POPART_VAR_FLOOR);
        const float decayed = decay_keep * max_ema + dm;
        const float captured = (xm > max_ema) ? xm : decayed;
        max_ema = envelope ? captured : max_ema;
        // regime_observer_step, Phase 2
        const float count1 = w_count + 1.0f;
        const float delta = dj - w_mean;
        const float mean1 = w_mean + delta / count1;
        const float delta2 = dj - mean1;
        const float m21 = w_m2 + delta * delta2;
        const bool update = (welford >> j) & 1u;
        w_count = update ? count1 : w_count;
        w_mean = update ? mean1 : w_mean;
        w_m2 = update ? m21 : w_m2;
        sv.mean[j] = mean;
        sv.var[j] = var;
        sv.max_ema[j] = max_ema;
        sv.w_mean[j] = w_mean;
        sv.w_m2[j] = w_m2;
        sv.w_count[j] = w_count;
    }
};

// A segment's lane masks that the dead-zone chain reads.
struct DeadZoneInputs {
    unsigned quiet;     // flat_count == b && cooldown == 0
    unsigned eps_zero;  // ε_live == 0
    unsigned f_zero;    // Kelly's analytic f == 0
};

// Lane 0's part of Phase 1 of regime_observer_step and kelly_step: the dead
// zone, DURATION, TIMEOUT, and whether Kelly's fraction is 0, one step at a time.
// `resurrection` is the F2 switch the observer reads; `resurrect` whether this
// path's Kelly controller runs its F2 block (path_resurrection_on).
struct DeadZoneChain {
    bool across, resurrection, resurrect;
    float max_dur;
    bool kelly_zero, prev_flag, prev_timeout;
    float duration;
    unsigned dead, timeout;

    __device__ __forceinline__ explicit DeadZoneChain(const float* st)
        : across(st[RL_REGIME_MODEL_DURATION_ACROSS_CYCLES_INDEX] != 0.0f),
          resurrection(st[RL_REGIME_FEATURE_RESURRECTION_INDEX] != 0.0f),
          resurrect(path_resurrection_on(st)),
          max_dur(st[RL_REGIME_DEAD_ZONE_MAX_DURATION_INDEX]),
          kelly_zero(st[RL_KELLY_FRACTION_INDEX] == 0.0f),
          prev_flag(st[RL_REGIME_DEAD_ZONE_FLAG_INDEX] != 0.0f),
          prev_timeout(st[RL_REGIME_DEAD_ZONE_TIMEOUT_FLAG_INDEX] != 0.0f),
          duration(st[RL_REGIME_DEAD_ZONE_DURATION_INDEX]), dead(0u), timeout(0u) {}

    __device__ __forceinline__ void step(int j, const DeadZoneInputs& dzi, SplitValues& sv) {
        const bool q = (dzi.quiet >> j) & 1u;
        const bool dead_zone = kelly_zero && q;
        if (dead_zone) {
            duration += 1.0f;
        } else if (across && prev_flag && !prev_timeout && resurrection && q) {
            duration += 1.0f;
        } else {
            duration = 0.0f;
        }
        const bool to = duration > max_dur;
        kelly_zero = (resurrect && dead_zone && !to) ? ((dzi.eps_zero >> j) & 1u)
                                                        : ((dzi.f_zero >> j) & 1u);
        prev_flag = dead_zone;
        prev_timeout = to;
        dead |= (unsigned)dead_zone << j;
        timeout |= (unsigned)to << j;
        sv.duration[j] = duration;
    }
    __device__ __forceinline__ void finish(SplitValues& sv) const {
        sv.dead = dead;
        sv.timeout = timeout;
    }
};

// Steps [p, e) of a segment with the dead-zone chain run on lane 0.
__device__ __forceinline__ void dead_zone_loop(const float* st, SplitValues& sv, int p, int e,
                                               const DeadZoneInputs& dzi) {
    if (threadIdx.x == 0) {
        DeadZoneChain dz(st);
        for (int j = p; j < e; ++j) dz.step(j, dzi, sv);
        dz.finish(sv);
    }
    __syncwarp();
}

// One step's slot values apart from the dead-zone chain's (lane l = step l).
struct StepValues {
    float cooldown, worst, kelly_edge, tau_in;
    float prev_mean, prev_sigma, mean, var, max_ema, sigma;
    float w_mean, w_m2, w_count, variance, recency, recovery_factor, eps_live;
    float tau_min_eff, tau_action, f, safety, remaining;
};

// Everything of steps [p, e) (no boundary among them) but the dead-zone
// chain, from the state `st` (the chain's slots, the same on every lane). On
// return, st holds the state after step e − 1 in every slot but the dead-zone
// chain's (FLAG, DURATION, TIMEOUT, KELLY_FRACTION), and `dzi` what that chain
// reads. Called by all 32 lanes; p and e are warp-uniform. With `fuse` (only
// for a whole batch, p = 0 and e = SCAN_BATCH), lane 0 also runs the dead-zone
// chain of the batch before (inputs `pend`) in the same loop, interleaved.
__device__ __forceinline__ StepValues produce_segment(float* st, SplitValues& sv,
                                                      const StepBatch<SCAN_BATCH>& batch, int p,
                                                      int e, int chain_b, DeadZoneInputs& dzi,
                                                      bool fuse, DeadZoneInputs pend) {
    const int l = threadIdx.x;
    const bool act = l >= p && l < e;
    const ScanStepInputs in = batch.get(act ? l : p);
    const unsigned before_me = lanes_to(l - 1), up_to_me = lanes_to(l);
    const int left = l > 0 ? l - 1 : 0;
    StepValues out;
    out.cooldown = in.cooldown;
    out.worst = in.worst;
    out.kelly_edge = in.kelly_edge;
    out.tau_in = in.tau_action;

    // ---- the state-free part (popart_stats_update's batch moments, Phase 2's dx) ----
    const float alpha = st[POPART_ALPHA_INDEX];
    const float b = (float)chain_b;
    const float batch_mean = in.v_sum / b;
    const float batch_var = in.v_ssq / b - batch_mean * batch_mean;
    const float worst_left = __shfl_sync(SCAN_FULL, in.worst, left);
    const float worst_prev = (l == p) ? st[RL_REGIME_PREV_WORST_PNL_INDEX] : worst_left;
    const float dx = in.worst - worst_prev;
    const unsigned welford = __ballot_sync(SCAN_FULL, act && (in.worst != 0.0f || worst_prev != 0.0f));
    sv.alpha_mean[l] = alpha * batch_mean;
    sv.alpha_var[l] = alpha * batch_var;
    sv.v_max[l] = in.v_max;
    sv.decay_v_max[l] = st[RL_POPART_MAX_DECAY_ALPHA_INDEX] * in.v_max;
    sv.dx[l] = dx;
    __syncwarp();

    // ---- lane 0: PopArt's and Welford's recurrences (and the batch before's dead zone) ----
    if (l == 0) {
        MomentChain mc(st, sv, p, welford);
        if (fuse) {
            DeadZoneChain dz(st);
#pragma unroll 4
            for (int j = 0; j < SCAN_BATCH; ++j) {
                mc.step(j, sv);
                dz.step(j, pend, sv);
            }
            dz.finish(sv);
        } else {
            for (int j = p; j < e; ++j) mc.step(j, sv);
        }
    }
    __syncwarp();

    // ---- every lane: its step's values that hang off those recurrences ----
    const bool envelope = st[RL_REGIME_FEATURE_ENVELOPE_INDEX] != 0.0f;
    out.mean = sv.mean[l];
    out.var = sv.var[l];
    out.max_ema = sv.max_ema[l];
    out.w_mean = sv.w_mean[l];
    out.w_m2 = sv.w_m2[l];
    out.w_count = sv.w_count[l];
    out.sigma = sqrtf(out.var);
    if (envelope) out.sigma = fmaxf(out.sigma, out.max_ema);
    const float mean_left = __shfl_sync(SCAN_FULL, out.mean, left);
    const float sigma_left = __shfl_sync(SCAN_FULL, out.sigma, left);
    out.prev_mean = (l == p) ? st[POPART_MEAN_INDEX] : mean_left;
    out.prev_sigma = (l == p) ? st[POPART_SIGMA_INDEX] : sigma_left;
    // Welford's variance: written on the steps that update, kept on the others
    const float variance_own = (out.w_count > 1.0f) ? (out.w_m2 / (out.w_count - 1.0f)) : 0.0f;
    out.variance = from_top(variance_own, welford & up_to_me,
                            st[RL_REGIME_SESSION_PNL_VARIANCE_EMA_INDEX]);
    // v9 safety fraction: written while the ramp runs and when it ends, kept after
    int branch;
    out.remaining = countdown(st[RL_REGIME_TRANSITION_REMAINING_INDEX], l - p + 1, branch);
    float safety_own = st[RL_V9_KELLY_SAFETY_FRAC_NORMAL_INDEX];
    if (branch == 1) {
        const float decay = st[RL_REGIME_TRANSITION_DECAY_STEPS_CONFIG_INDEX];
        const float w = fminf(1.0f, out.remaining / fmaxf(decay, 1.0f));
        const float normal = st[RL_V9_KELLY_SAFETY_FRAC_NORMAL_INDEX];
        const float defensive = st[RL_V9_KELLY_SAFETY_FRAC_DEFENSIVE_INDEX];
        safety_own = normal + (defensive - normal) * w;
    }
    const unsigned safety_set = __ballot_sync(SCAN_FULL, act && branch != 0);
    out.safety = from_top(safety_own, safety_set & up_to_me, st[RL_KELLY_SAFETY_FRAC_INDEX]);
    const float safety_before = from_top(safety_own, safety_set & before_me,
                                         st[RL_KELLY_SAFETY_FRAC_INDEX]);
    // Phase 3: the tail test
    const float sigma_thr = st[RL_REGIME_TAIL_SIGMA_THRESHOLD_INDEX];
    const float tail_sigma = sqrtf(out.variance);
    const int sufficient_count = (out.w_count >= 10.0f) ? 1 : 0;
    const float dev = (st[RL_REGIME_MODEL_TAIL_ON_DEVIATION_INDEX] != 0.0f) ? (dx - out.w_mean) : dx;
    const int is_tail = sufficient_count && (tail_sigma > 0.0f) && (fabsf(dev) > sigma_thr * tail_sigma);
    // recency: 0 at a tail, +1.0f a step otherwise. Counting up from a tail's 0
    // (or from an integer-valued start below 2^23) every sum is exact, so the
    // count of steps is the serial sum; any other start adds one at a time.
    const unsigned tails = __ballot_sync(SCAN_FULL, act && is_tail) & up_to_me;
    float recency;
    if (tails) {
        recency = (float)(l - top_lane(tails));
    } else {
        recency = st[RL_REGIME_TAIL_EVENT_RECENCY_INDEX];
        const int k = l - p + 1;
        if (recency == truncf(recency) && fabsf(recency) < 8388608.0f) {
            recency = recency + (float)k;
        } else {
            for (int i = 0; i < k; ++i) recency += 1.0f;
        }
    }
    out.recency = recency;
    // Phase 4
    const float n_recovery = st[RL_KELLY_EPS_RECOVERY_N_RECOVERY_INDEX];
    const float eps_min = st[RL_KELLY_EPS_RECOVERY_MIN_INDEX];
    const float eps_max = st[RL_KELLY_EPS_RECOVERY_MAX_INDEX];
    out.recovery_factor = fminf(1.0f, recency / fmaxf(n_recovery, 1.0f));
    out.eps_live = eps_min + (eps_max - eps_min) * out.recovery_factor;
    // iqn_tau_apply, with this path's F5 block (path_tau_boost_on)
    out.tau_min_eff = st[RL_IQN_ACTION_TAU_MIN_INDEX];
    if (path_tau_boost_on(st)
        && recency < st[RL_IQN_TAU_TAIL_BOOST_N_WINDOW_INDEX]) {
        out.tau_min_eff *= st[RL_IQN_TAU_TAIL_BOOST_FACTOR_INDEX];
    }
    out.tau_action = fmaxf(in.tau_action, out.tau_min_eff);
    // kelly_step's analytic f (the safety fraction of the step before)
    out.f = fminf(fmaxf(safety_before * in.kelly_edge, 0.0f), st[RL_KELLY_CAP_INDEX]);
    dzi.quiet = __ballot_sync(SCAN_FULL, act && (in.flat == chain_b) && (in.cooldown == 0.0f));
    dzi.eps_zero = __ballot_sync(SCAN_FULL, out.eps_live == 0.0f);
    dzi.f_zero = __ballot_sync(SCAN_FULL, out.f == 0.0f);

    // ---- the state after step e − 1, but the dead-zone chain's slots ----
    const int last = e - 1;
    write_step_inputs(st, __shfl_sync(SCAN_FULL, out.cooldown, last),
                      __shfl_sync(SCAN_FULL, out.worst, last),
                      __shfl_sync(SCAN_FULL, out.kelly_edge, last),
                      __shfl_sync(SCAN_FULL, out.tau_in, last));
    st[RL_REGIME_PREV_WORST_PNL_INDEX] = st[RL_SESSION_PNL_WORST_INDEX];
    st[POPART_PREV_MEAN_INDEX] = __shfl_sync(SCAN_FULL, out.prev_mean, last);
    st[POPART_PREV_SIGMA_INDEX] = __shfl_sync(SCAN_FULL, out.prev_sigma, last);
    st[POPART_MEAN_INDEX] = __shfl_sync(SCAN_FULL, out.mean, last);
    st[POPART_VAR_INDEX] = __shfl_sync(SCAN_FULL, out.var, last);
    st[RL_POPART_MAX_ABS_REWARD_EMA_INDEX] = __shfl_sync(SCAN_FULL, out.max_ema, last);
    st[POPART_SIGMA_INDEX] = __shfl_sync(SCAN_FULL, out.sigma, last);
    st[RL_REGIME_SESSION_PNL_VAR_MEAN_INDEX] = __shfl_sync(SCAN_FULL, out.w_mean, last);
    st[RL_REGIME_SESSION_PNL_VAR_M2_INDEX] = __shfl_sync(SCAN_FULL, out.w_m2, last);
    st[RL_REGIME_SESSION_PNL_VAR_COUNT_INDEX] = __shfl_sync(SCAN_FULL, out.w_count, last);
    st[RL_REGIME_SESSION_PNL_VARIANCE_EMA_INDEX] = __shfl_sync(SCAN_FULL, out.variance, last);
    st[RL_REGIME_TAIL_EVENT_RECENCY_INDEX] = __shfl_sync(SCAN_FULL, out.recency, last);
    st[RL_REGIME_RECOVERY_FACTOR_INDEX] = __shfl_sync(SCAN_FULL, out.recovery_factor, last);
    st[RL_KELLY_EPS_RECOVERY_LIVE_INDEX] = __shfl_sync(SCAN_FULL, out.eps_live, last);
    st[RL_IQN_TAU_MIN_EFFECTIVE_INDEX] = __shfl_sync(SCAN_FULL, out.tau_min_eff, last);
    st[RL_IQN_TAU_ACTION_INDEX] = __shfl_sync(SCAN_FULL, out.tau_action, last);
    st[RL_KELLY_ANALYTIC_INDEX] = __shfl_sync(SCAN_FULL, out.f, last);
    st[RL_KELLY_SAFETY_FRAC_INDEX] = __shfl_sync(SCAN_FULL, out.safety, last);
    st[RL_REGIME_TRANSITION_REMAINING_INDEX] = __shfl_sync(SCAN_FULL, out.remaining, last);
    return out;
}

// Steps [p, e) once their dead-zone chain has run (sv.dead, sv.timeout,
// sv.duration): each lane's step staged as row l, and the dead-zone chain's
// slots of `st` moved to after step e − 1.
__device__ __forceinline__ void consume_segment(float* st, const SplitValues& sv,
                                                const StepValues& in, int p, int e,
                                                const ScanStage& stage) {
    const int l = threadIdx.x;
    const bool act = l >= p && l < e;
    const bool resurrection = path_resurrection_on(st);  // this path's Kelly F2 block
    const bool dead_zone = (sv.dead >> l) & 1u;
    const bool timeout = (sv.timeout >> l) & 1u;
    const float flag = (float)dead_zone;
    const float duration = sv.duration[l];
    const float to = (float)timeout;
    const float kelly = (resurrection && dead_zone && !timeout) ? in.eps_live : in.f;
    if (act && stage.snap != nullptr) {
        float v[ISV_SIZE];  // constant indices only: registers
#define X(i) v[i] = st[i];
        CHAIN_SLOT_LIST
#undef X
        write_step_inputs(v, in.cooldown, in.worst, in.kelly_edge, in.tau_in);
        v[POPART_PREV_MEAN_INDEX] = in.prev_mean;
        v[POPART_PREV_SIGMA_INDEX] = in.prev_sigma;
        v[POPART_MEAN_INDEX] = in.mean;
        v[POPART_VAR_INDEX] = in.var;
        v[RL_POPART_MAX_ABS_REWARD_EMA_INDEX] = in.max_ema;
        v[POPART_SIGMA_INDEX] = in.sigma;
        v[RL_REGIME_DEAD_ZONE_FLAG_INDEX] = flag;
        v[RL_REGIME_DEAD_ZONE_DURATION_INDEX] = duration;
        v[RL_REGIME_DEAD_ZONE_TIMEOUT_FLAG_INDEX] = to;
        v[RL_REGIME_PREV_WORST_PNL_INDEX] = in.worst;
        v[RL_REGIME_SESSION_PNL_VAR_MEAN_INDEX] = in.w_mean;
        v[RL_REGIME_SESSION_PNL_VAR_M2_INDEX] = in.w_m2;
        v[RL_REGIME_SESSION_PNL_VAR_COUNT_INDEX] = in.w_count;
        v[RL_REGIME_SESSION_PNL_VARIANCE_EMA_INDEX] = in.variance;
        v[RL_REGIME_TAIL_EVENT_RECENCY_INDEX] = in.recency;
        v[RL_REGIME_RECOVERY_FACTOR_INDEX] = in.recovery_factor;
        v[RL_KELLY_EPS_RECOVERY_LIVE_INDEX] = in.eps_live;
        v[RL_IQN_TAU_MIN_EFFECTIVE_INDEX] = in.tau_min_eff;
        v[RL_IQN_TAU_ACTION_INDEX] = in.tau_action;
        v[RL_KELLY_ANALYTIC_INDEX] = in.f;
        v[RL_KELLY_FRACTION_INDEX] = kelly;
        v[RL_KELLY_SAFETY_FRAC_INDEX] = in.safety;
        v[RL_REGIME_TRANSITION_REMAINING_INDEX] = in.remaining;
        float* out = stage.snap + l * N_SNAP;
#define S(c) out[c] = v[SNAP_SLOT_##c];
        SNAP_SLOT_LIST
#undef S
    }
    if (act && stage.norm != nullptr) {
        stage.norm[l * 4 + 0] = in.mean;
        stage.norm[l * 4 + 1] = in.sigma;
        stage.norm[l * 4 + 2] = in.prev_mean;
        stage.norm[l * 4 + 3] = in.prev_sigma;
    }
    const int last = e - 1;
    st[RL_REGIME_DEAD_ZONE_FLAG_INDEX] = __shfl_sync(SCAN_FULL, flag, last);
    st[RL_REGIME_DEAD_ZONE_DURATION_INDEX] = __shfl_sync(SCAN_FULL, duration, last);
    st[RL_REGIME_DEAD_ZONE_TIMEOUT_FLAG_INDEX] = __shfl_sync(SCAN_FULL, to, last);
    st[RL_KELLY_FRACTION_INDEX] = __shfl_sync(SCAN_FULL, kelly, last);
}

// Write a batch's staged rows back ([T, N_SNAP] and [T, 4] are row-major, so
// a batch's rows are one contiguous run).
__device__ __forceinline__ void write_rows(float* snap, float* norm_params, const float* snap_stage,
                                           const float* norm_stage, long long base, int n) {
    const int lane = threadIdx.x;
    if (snap != nullptr) {
        float* dst = snap + base * N_SNAP;
#pragma unroll 8
        for (int i = lane; i < n * N_SNAP; i += SCAN_BATCH) dst[i] = snap_stage[i];
    }
    if (norm_params != nullptr) {
        float* dst = norm_params + base * 4;
        for (int i = lane; i < n * 4; i += SCAN_BATCH) dst[i] = norm_stage[i];
    }
}

// The split chain pipelines whole batches without a boundary: while lane 0
// runs batch k's PopArt and Welford recurrences it also runs batch k − 1's
// dead-zone chain (the two are independent), and batch k − 1's rows are
// staged after. -DSCAN_WARP_PIPELINE=0 runs each batch's chains one after the
// other (for timing).
#ifndef SCAN_WARP_PIPELINE
#define SCAN_WARP_PIPELINE 1
#endif

// One warp a block, one block a scenario: all 255 registers are the warp's.
extern "C" __global__ void __launch_bounds__(SCAN_BATCH, 1) replay_scan_warp(
    REPLAY_SCAN_PARAMS,
    float* __restrict__ norm_params,         // [T, 4]
    int do_norm
) {
    __shared__ StepBatch<SCAN_BATCH> batch;
    __shared__ float snap_stage[SCAN_BATCH * N_SNAP];
    __shared__ float norm_stage[SCAN_BATCH * 4];
    __shared__ SplitValues split_values;

    const int s = blockIdx.x;
    if (s >= n_scen) return;
    const int lane = threadIdx.x;
    const StepInputArrays inputs{stats, flat, cooldown, worst, kelly_edge, tau_action, boundary};

    float* row = isv_rows + (long long)s * ISV_SIZE;
    const float* boot = boot_rows + (long long)s * ISV_SIZE;
    float isv[ISV_SIZE];  // constant indices only: registers (lane 0's: the whole ISV)
    float st[ISV_SIZE];   // split chain: the chain's slots, on every lane
    if (lane == 0) {
#define X(i) isv[i] = row[i];
        ISV_SLOT_LIST
#undef X
    }
    if (scan_split) {
#define X(i) st[i] = row[i];
        CHAIN_SLOT_LIST
#undef X
    }
    const RegisterReset reset{{boot, r_idx, r_code, r_src, n_reset}};
    const int slot = keep_slot[s];
    float* snap = (slot >= 0) ? snap_out + (long long)slot * n_steps * N_SNAP : nullptr;
    float* norm = (do_norm && s == 0) ? norm_params : nullptr;
    const ScanStage stage{snap != nullptr ? snap_stage : nullptr,
                          norm != nullptr ? norm_stage : nullptr};
    const int chain_b = SCAN_WARP_PREDIVIDE ? 1 : b_size;  // see parked_step_inputs

    // split chain, pipelined: the batch whose dead-zone chain and rows are still to come
    bool pending = false;
    int pending_base = 0;
    StepValues pending_values;
    DeadZoneInputs pending_dzi;

    if (lane < n_steps) {
        batch.put(lane, parked_step_inputs(inputs.load(lane), b_size));
    }
    __syncwarp();
    for (int base = 0; base < n_steps; base += SCAN_BATCH) {
        const int n = min(SCAN_BATCH, n_steps - base);
        // The next batch's inputs do not depend on the state: issue their loads
        // now, so they are in flight while this batch runs (nothing uses them
        // before the batch is parked: parked_step_inputs).
        const int t_next = base + SCAN_BATCH + lane;
        ScanStepInputs next_inputs;
        if (t_next < n_steps) {
            next_inputs = inputs.load(t_next);
        }
        if (scan_split) {
            const unsigned bounds = __ballot_sync(SCAN_FULL, lane < n && batch.boundary[lane] != 0);
            if (SCAN_WARP_PIPELINE && n == SCAN_BATCH && bounds == 0u) {
                DeadZoneInputs dzi;
                const StepValues values = produce_segment(st, split_values, batch, 0, SCAN_BATCH,
                                                          chain_b, dzi, pending, pending_dzi);
                if (pending) {
                    consume_segment(st, split_values, pending_values, 0, SCAN_BATCH, stage);
                    __syncwarp();
                    write_rows(snap, norm, snap_stage, norm_stage, pending_base, SCAN_BATCH);
                }
                pending = true;
                pending_base = base;
                pending_values = values;
                pending_dzi = dzi;
            } else {
                if (pending) {
                    dead_zone_loop(st, split_values, 0, SCAN_BATCH, pending_dzi);
                    consume_segment(st, split_values, pending_values, 0, SCAN_BATCH, stage);
                    __syncwarp();
                    write_rows(snap, norm, snap_stage, norm_stage, pending_base, SCAN_BATCH);
                    __syncwarp();
                    pending = false;
                }
                // segments between boundaries; a boundary step runs whole on lane 0
                int p = 0;
                while (p < n) {
                    if ((bounds >> p) & 1u) {
                        if (lane == 0) {
#define X(i) isv[i] = st[i];
                            CHAIN_SLOT_LIST
#undef X
                            serial_step(isv, batch.get(p), p, chain_b, reset, stage);
                        }
#define X(i) st[i] = __shfl_sync(SCAN_FULL, isv[i], 0);
                        CHAIN_SLOT_LIST
#undef X
                        p += 1;
                    } else {
                        const unsigned later = bounds & lanes_from(p + 1);
                        const int e = later ? min(__ffs(later) - 1, n) : n;
                        DeadZoneInputs dzi;
                        const StepValues values = produce_segment(st, split_values, batch, p, e,
                                                                  chain_b, dzi, false, dzi);
                        dead_zone_loop(st, split_values, p, e, dzi);
                        consume_segment(st, split_values, values, p, e, stage);
                        __syncwarp();
                        p = e;
                    }
                }
                __syncwarp();
                write_rows(snap, norm, snap_stage, norm_stage, base, n);
            }
        } else {
            if (lane == 0) {
                ScanStepInputs next = batch.get(0);
                for (int j = 0; j < n; ++j) {
                    const ScanStepInputs in = next;
                    if (j + 1 < n) next = batch.get(j + 1);
                    serial_step(isv, in, j, chain_b, reset, stage);
                }
            }
            __syncwarp();
            write_rows(snap, norm, snap_stage, norm_stage, base, n);
        }
        __syncwarp();
        // this batch's inputs are used: park the next one's
        if (t_next < n_steps) batch.put(lane, parked_step_inputs(next_inputs, b_size));
        __syncwarp();
    }
    if (pending) {
        dead_zone_loop(st, split_values, 0, SCAN_BATCH, pending_dzi);
        consume_segment(st, split_values, pending_values, 0, SCAN_BATCH, stage);
        __syncwarp();
        write_rows(snap, norm, snap_stage, norm_stage, pending_base, SCAN_BATCH);
    }

    if (lane == 0) {
        if (scan_split) {
#define X(i) isv[i] = st[i];
            CHAIN_SLOT_LIST
#undef X
        }
#define X(i) row[i] = isv[i];
        ISV_SLOT_LIST
#undef X
    }
}
