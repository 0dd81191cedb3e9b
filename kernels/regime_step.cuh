// regime_step.cuh — the scalar logic of one training step, as __device__ functions.
//
// Each function is the statement-by-statement twin of its namesake in
// regime_dash/engine/reference.py (same float32 operations in the same order;
// parity builds use --fmad=false so no a*b+c is contracted into an FMA, and
// NVRTC's default IEEE sqrtf and division). The spec's __global__ kernels are
// thin wrappers around these, and the fast scan (replay_scan.cu) calls the same
// functions per scenario.
//
// Slot indices come only from the registry's -D defines (SlotLayout.defines()).
// Where the spec leaves something out (analytic Kelly, PopArt's EMA update, the
// v9 ramp) the function is a model, documented as such in reference.py.
#ifndef REGIME_DASH_REGIME_STEP_CUH
#define REGIME_DASH_REGIME_STEP_CUH

// Model: floor under PopArt's EMA variance (reference.POPART_VAR_FLOOR).
#define POPART_VAR_FLOOR 1e-8f

// Boundary policy codes (slots.POLICY_CODES).
#define RESET_KEEP 0
#define RESET_CLEAR 1
#define RESET_REBOOTSTRAP 2
#define RESET_ALIGN 3

// ---- the trainer's writes of step t's inputs (reference.write_step_inputs) ----
__device__ __forceinline__ void write_step_inputs(float* isv, float cooldown, float worst,
                                                  float kelly_edge, float tau_action) {
    isv[RL_COOLDOWN_REMAINING_STEPS_INDEX] = cooldown;
    isv[RL_SESSION_PNL_WORST_INDEX] = worst;
    isv[RL_KELLY_EDGE_INPUT_INDEX] = kelly_edge;
    isv[RL_IQN_TAU_ACTION_INPUT_INDEX] = tau_action;
}

// ---- reset_session_state: the spec's reset policy, driven by SlotLayout.reset_plan() ----
// Clears and re-bootstraps come before aligns in the plan, so an aligned slot
// never reads a value this reset is about to rewrite.
__device__ __forceinline__ void reset_session_state_apply(float* isv, const float* __restrict__ boot,
                                                          const int* __restrict__ r_idx,
                                                          const int* __restrict__ r_code,
                                                          const int* __restrict__ r_src,
                                                          int n_reset) {
    for (int k = 0; k < n_reset; ++k) {
        const int i = r_idx[k];
        const int code = r_code[k];
        if (code == RESET_CLEAR) {
            isv[i] = 0.0f;
        } else if (code == RESET_REBOOTSTRAP) {
            isv[i] = boot[i];
        } else if (code == RESET_ALIGN) {
            isv[i] = isv[r_src[k]];
        }
    }
}

// ---- rl_popart_normalize, the tid == 0 block (reference.rl_popart_normalize_update) ----
// Model: μ ← (1−α)μ + α·batch_mean, var ← max((1−α)var + α·batch_var, 1e-8),
// σ = sqrt(var); then the spec's F4 envelope floor. μ and σ before the update
// are kept for rl_popart_v_correct.
__device__ __forceinline__ void popart_stats_update(float* isv, float v_sum, float v_ssq,
                                                    float v_max, int b_size, float& new_mean_out,
                                                    float& new_sigma_out) {
    const float b = (float)b_size;
    const float batch_mean = v_sum / b;
    const float batch_var = v_ssq / b - batch_mean * batch_mean;
    const float alpha = isv[POPART_ALPHA_INDEX];
    const float keep = 1.0f - alpha;
    const float old_mean = isv[POPART_MEAN_INDEX];
    const float old_var = isv[POPART_VAR_INDEX];
    isv[POPART_PREV_MEAN_INDEX] = old_mean;
    isv[POPART_PREV_SIGMA_INDEX] = isv[POPART_SIGMA_INDEX];
    const float new_mean = keep * old_mean + alpha * batch_mean;
    const float new_var = fmaxf(keep * old_var + alpha * batch_var, POPART_VAR_FLOOR);
    float new_sigma = sqrtf(new_var);
    isv[POPART_MEAN_INDEX] = new_mean;
    isv[POPART_VAR_INDEX] = new_var;

    if (isv[RL_REGIME_FEATURE_ENVELOPE_INDEX] != 0.0f) {
        // ── NEW: per-account max-magnitude envelope (F4) ──────────────
        const float max_r_this_step = v_max;
        const float decay_alpha = isv[RL_POPART_MAX_DECAY_ALPHA_INDEX];
        float max_r_ema = isv[RL_POPART_MAX_ABS_REWARD_EMA_INDEX];
        if (max_r_this_step > max_r_ema) {
            max_r_ema = max_r_this_step;     // instant capture (fast-up)
        } else {
            max_r_ema = (1.0f - decay_alpha) * max_r_ema
                      + decay_alpha * max_r_this_step;   // slow decay
        }
        isv[RL_POPART_MAX_ABS_REWARD_EMA_INDEX] = max_r_ema;

        // Apply floor: σ_effective = max(σ_existing, max_r_ema)
        new_sigma = fmaxf(new_sigma, max_r_ema);
        // ── END NEW ────────────────────────────────────────────────────
    }

    isv[POPART_SIGMA_INDEX] = new_sigma;
    new_mean_out = new_mean;
    new_sigma_out = new_sigma;
}

// Pass 3 of rl_popart_normalize for one reward (reference.rl_popart_normalize_apply).
__device__ __forceinline__ float popart_inv_sigma(float sigma) { return 1.0f / sigma; }
__device__ __forceinline__ float popart_normalize_one(float r, float mean, float inv_sigma) {
    return (r - mean) * inv_sigma;
}

// rl_popart_v_correct: v ← (σ_old/σ_new)·v + (μ_old − μ_new)/σ_new.
__device__ __forceinline__ void popart_v_correct_coeffs(float s_old, float s_new, float m_old,
                                                        float m_new, float& scale, float& shift) {
    scale = s_old / s_new;
    shift = (m_old - m_new) / s_new;
}
__device__ __forceinline__ float popart_v_correct_one(float v, float scale, float shift) {
    return scale * v + shift;
}

// ---- rl_regime_observer (spec code, single thread) ----
__device__ __forceinline__ void regime_observer_step(float* isv, int flat_count, int b_size) {
    // ─── Phase 1: dead-zone detection ──────────────────────
    const float kelly        = isv[RL_KELLY_FRACTION_INDEX];           // prior-step value
    const float cooldown     = isv[RL_COOLDOWN_REMAINING_STEPS_INDEX];
    // the previous step's flags, before this step writes them (model switch below)
    const float prev_flag    = isv[RL_REGIME_DEAD_ZONE_FLAG_INDEX];
    const float prev_timeout = isv[RL_REGIME_DEAD_ZONE_TIMEOUT_FLAG_INDEX];

    const int dead_zone = (kelly == 0.0f)
                       && (flat_count == b_size)
                       && (cooldown == 0.0f) ? 1 : 0;

    isv[RL_REGIME_DEAD_ZONE_FLAG_INDEX] = (float)dead_zone;

    // Duration counter
    float duration = isv[RL_REGIME_DEAD_ZONE_DURATION_INDEX];
    if (dead_zone) {
        duration += 1.0f;
    } else if (isv[RL_REGIME_MODEL_DURATION_ACROSS_CYCLES_INDEX] != 0.0f && prev_flag != 0.0f
               && prev_timeout == 0.0f && isv[RL_REGIME_FEATURE_RESURRECTION_INDEX] != 0.0f
               && flat_count == b_size && cooldown == 0.0f) {
        // Model switch (not the spec): only F2's ε of the step before took this
        // step out of the dead zone, so DURATION counts on across the cycle.
        duration += 1.0f;
    } else {
        duration = 0.0f;
    }
    isv[RL_REGIME_DEAD_ZONE_DURATION_INDEX] = duration;

    // Safety net: timeout flag fires if dead-zone persists past MAX_DURATION (issue #4)
    const float max_dur = isv[RL_REGIME_DEAD_ZONE_MAX_DURATION_INDEX];
    const int timeout = (duration > max_dur) ? 1 : 0;
    isv[RL_REGIME_DEAD_ZONE_TIMEOUT_FLAG_INDEX] = (float)timeout;

    // ─── Phase 2: session_pnl_change Welford variance ──────
    const float worst_now  = isv[RL_SESSION_PNL_WORST_INDEX];
    const float worst_prev = isv[RL_REGIME_PREV_WORST_PNL_INDEX];
    const float dx         = worst_now - worst_prev;
    isv[RL_REGIME_PREV_WORST_PNL_INDEX] = worst_now;

    float mean   = isv[RL_REGIME_SESSION_PNL_VAR_MEAN_INDEX];
    float m2     = isv[RL_REGIME_SESSION_PNL_VAR_M2_INDEX];
    float count  = isv[RL_REGIME_SESSION_PNL_VAR_COUNT_INDEX];

    // Skip update on bootstrap (both zero)
    if (worst_now != 0.0f || worst_prev != 0.0f) {
        count += 1.0f;
        const float delta  = dx - mean;
        mean += delta / count;
        const float delta2 = dx - mean;
        m2 += delta * delta2;
        isv[RL_REGIME_SESSION_PNL_VAR_MEAN_INDEX]  = mean;
        isv[RL_REGIME_SESSION_PNL_VAR_M2_INDEX]    = m2;
        isv[RL_REGIME_SESSION_PNL_VAR_COUNT_INDEX] = count;
        const float variance = (count > 1.0f) ? (m2 / (count - 1.0f)) : 0.0f;
        isv[RL_REGIME_SESSION_PNL_VARIANCE_EMA_INDEX] = variance;
    }

    // ─── Phase 3: tail-event detection (3σ threshold) ──────
    const float var       = isv[RL_REGIME_SESSION_PNL_VARIANCE_EMA_INDEX];
    const float sigma_thr = isv[RL_REGIME_TAIL_SIGMA_THRESHOLD_INDEX];
    const float sigma     = sqrtf(var);

    // Require count >= 10 before tail detection (Welford bootstrap)
    const int sufficient_count = (count >= 10.0f) ? 1 : 0;
    // Model switch (not the spec): test the deviation from the Welford mean instead of dx
    const float dev = (isv[RL_REGIME_MODEL_TAIL_ON_DEVIATION_INDEX] != 0.0f) ? (dx - mean) : dx;
    const int is_tail = sufficient_count && (sigma > 0.0f) && (fabsf(dev) > sigma_thr * sigma);

    float recency = isv[RL_REGIME_TAIL_EVENT_RECENCY_INDEX];
    if (is_tail) recency = 0.0f; else recency += 1.0f;
    isv[RL_REGIME_TAIL_EVENT_RECENCY_INDEX] = recency;

    // ─── Phase 4: emit recovery_factor and eps_recovery_live (issue #9, drift-free) ──
    const float n_recovery = isv[RL_KELLY_EPS_RECOVERY_N_RECOVERY_INDEX];
    const float eps_min    = isv[RL_KELLY_EPS_RECOVERY_MIN_INDEX];
    const float eps_max    = isv[RL_KELLY_EPS_RECOVERY_MAX_INDEX];

    const float recovery_factor = fminf(1.0f, recency / fmaxf(n_recovery, 1.0f));
    const float eps_live        = eps_min + (eps_max - eps_min) * recovery_factor;

    isv[RL_REGIME_RECOVERY_FACTOR_INDEX]      = recovery_factor;
    isv[RL_KELLY_EPS_RECOVERY_LIVE_INDEX]     = eps_live;
}

// ---- rl_iqn_action_tau_controller: τ tail boost (F5), then the final clamp ----
// `boost_on` says whether the F5 block runs: the F5 switch in the single kernel
// (iqn_tau_step), the F5 switch and the Layer-2 mirror in rl_fused_controllers.
__device__ __forceinline__ void iqn_tau_apply(float* isv, bool boost_on) {
    // Tail-recency τ_min boost (defense in depth)
    const float recency     = isv[RL_REGIME_TAIL_EVENT_RECENCY_INDEX];
    const float tail_window = isv[RL_IQN_TAU_TAIL_BOOST_N_WINDOW_INDEX];
    const float boost       = isv[RL_IQN_TAU_TAIL_BOOST_FACTOR_INDEX];

    float tau_min_eff = isv[RL_IQN_ACTION_TAU_MIN_INDEX];
    if (boost_on && recency < tail_window) {
        tau_min_eff *= boost;
    }
    const float tau_action = fmaxf(isv[RL_IQN_TAU_ACTION_INPUT_INDEX], tau_min_eff);
    isv[RL_IQN_TAU_MIN_EFFECTIVE_INDEX] = tau_min_eff;
    isv[RL_IQN_TAU_ACTION_INDEX] = tau_action;
}
__device__ __forceinline__ void iqn_tau_step(float* isv) {
    iqn_tau_apply(isv, isv[RL_REGIME_FEATURE_TAU_BOOST_INDEX] != 0.0f);
}

// ---- rl_kelly_fraction_controller: analytic Kelly (a model), then the resurrection block ----
// Model: f = clamp(safety_frac · edge, 0, cap), edge from the stream. `resurrect_on`
// says whether the F2 block runs: the F2 switch in the single kernel (kelly_step),
// the F2 switch and the Layer-4 mirror in rl_fused_controllers.
__device__ __forceinline__ void kelly_apply(float* isv, bool resurrect_on) {
    const float edge = isv[RL_KELLY_EDGE_INPUT_INDEX];
    const float safety = isv[RL_KELLY_SAFETY_FRAC_INDEX];
    const float cap = isv[RL_KELLY_CAP_INDEX];
    const float f = fminf(fmaxf(safety * edge, 0.0f), cap);
    isv[RL_KELLY_ANALYTIC_INDEX] = f;
    isv[RL_KELLY_FRACTION_INDEX] = f;

    // Kelly resurrection (Theorem 1): override analytic kelly if DEAD_ZONE_FLAG fires
    //
    // Two safety checks:
    //   1. DEAD_ZONE_TIMEOUT_FLAG: if dead-zone has persisted > MAX_DURATION steps,
    //      stop trying to resurrect (let kelly stay at 0; halt the bleed).
    //      The trainer monitors TIMEOUT_FLAG as a halt-training signal.
    //   2. Otherwise: kelly_f overridden with ε_recovery_live (computed by regime_observer).
    const int dead_zone = (int)isv[RL_REGIME_DEAD_ZONE_FLAG_INDEX];
    const int timeout   = (int)isv[RL_REGIME_DEAD_ZONE_TIMEOUT_FLAG_INDEX];
    if (resurrect_on && dead_zone && !timeout) {
        isv[RL_KELLY_FRACTION_INDEX] = isv[RL_KELLY_EPS_RECOVERY_LIVE_INDEX];
    }
}
__device__ __forceinline__ void kelly_step(float* isv) {
    kelly_apply(isv, isv[RL_REGIME_FEATURE_RESURRECTION_INDEX] != 0.0f);
}

// ---- rl_fused_controllers: the risk-stack controllers in one launch (launch order step 8) ----
// The spec's order is CMDP → IQN τ → Inventory β → Kelly; regime-dash models
// Layer 2 (IQN τ) and Layer 4 (Kelly) only. Each branch calls the single
// kernel's own function, so the fused path is the single path bit for bit
// while both mirrors are on (the spec). A mirror switch off leaves its block
// out of the fused copy: a trainer whose fused kernel was never updated.
__device__ __forceinline__ bool fused_tau_boost_on(const float* isv) {
    return isv[RL_REGIME_FEATURE_TAU_BOOST_INDEX] != 0.0f && isv[RL_FUSED_MIRROR_TAU_BOOST_INDEX] != 0.0f;
}
__device__ __forceinline__ bool fused_resurrection_on(const float* isv) {
    return isv[RL_REGIME_FEATURE_RESURRECTION_INDEX] != 0.0f
        && isv[RL_FUSED_MIRROR_RESURRECTION_INDEX] != 0.0f;
}
__device__ __forceinline__ void fused_controllers_step(float* isv) {
    // Layer-1 branch, CMDP: not modelled (the spec changes nothing in it)
    // Layer-2 branch, IQN τ: "Mirror in rl_fused_controllers.cu Layer-2 branch" (F5)
    iqn_tau_apply(isv, fused_tau_boost_on(isv));
    // Layer-3 branch, Inventory β: not modelled (the spec changes nothing in it)
    // Layer-4 branch, Kelly: "Mirror same logic in rl_fused_controllers.cu Layer-4 branch" (F2)
    kelly_apply(isv, fused_resurrection_on(isv));
}

// The controller path a scan compiles for (the loader's -DREPLAY_CONTROLLERS_FUSED=1
// for the fused path): the per-step engine picks its kernels at launch instead.
#ifndef REPLAY_CONTROLLERS_FUSED
#define REPLAY_CONTROLLERS_FUSED 0
#endif
// Whether this path's τ controller and Kelly controller run their F5 and F2 blocks.
__device__ __forceinline__ bool path_tau_boost_on(const float* isv) {
    return REPLAY_CONTROLLERS_FUSED ? fused_tau_boost_on(isv)
                                    : isv[RL_REGIME_FEATURE_TAU_BOOST_INDEX] != 0.0f;
}
__device__ __forceinline__ bool path_resurrection_on(const float* isv) {
    return REPLAY_CONTROLLERS_FUSED ? fused_resurrection_on(isv)
                                    : isv[RL_REGIME_FEATURE_RESURRECTION_INDEX] != 0.0f;
}
// Step 7 (the single controllers) or step 8 (rl_fused_controllers) of the launch order.
__device__ __forceinline__ void risk_stack_controllers(float* isv) {
#if REPLAY_CONTROLLERS_FUSED
    fused_controllers_step(isv);
#else
    iqn_tau_step(isv);
    kelly_step(isv);
#endif
}

// ---- eval_warmup_decay: v9 transition ramp (a model) ----
// remaining N-1 … 0 then -1; safety_frac linear from defensive to normal over
// the last decay_steps steps of the transition.
__device__ __forceinline__ void eval_warmup_decay_step(float* isv) {
    float r = isv[RL_REGIME_TRANSITION_REMAINING_INDEX];
    if (r > 0.0f) {
        r = r - 1.0f;
        const float decay = isv[RL_REGIME_TRANSITION_DECAY_STEPS_CONFIG_INDEX];
        const float w = fminf(1.0f, r / fmaxf(decay, 1.0f));
        const float normal = isv[RL_V9_KELLY_SAFETY_FRAC_NORMAL_INDEX];
        const float defensive = isv[RL_V9_KELLY_SAFETY_FRAC_DEFENSIVE_INDEX];
        isv[RL_KELLY_SAFETY_FRAC_INDEX] = normal + (defensive - normal) * w;
        isv[RL_REGIME_TRANSITION_REMAINING_INDEX] = r;
    } else if (r == 0.0f) {
        isv[RL_REGIME_TRANSITION_REMAINING_INDEX] = -1.0f;
        isv[RL_KELLY_SAFETY_FRAC_INDEX] = isv[RL_V9_KELLY_SAFETY_FRAC_NORMAL_INDEX];
    }
}

// ---- one step's scalar kernels in the spec's launch order (reference.scalar_step) ----
// Everything of one step except the [b]-wide passes and the snapshot. `reset`
// is called as reset(isv) at a boundary and must apply the reset plan
// (reset_session_state_apply); the fast scan passes one that keeps the ISV in
// registers (see replay_scan.cu).
template <class ResetFn>
__device__ __forceinline__ void scalar_step(float* isv, int boundary, float cooldown, float worst,
                                            float kelly_edge, float tau_action, float v_sum,
                                            float v_ssq, float v_max, int flat_count, int b_size,
                                            ResetFn reset, float& mean, float& sigma) {
    write_step_inputs(isv, cooldown, worst, kelly_edge, tau_action);
    if (boundary) reset(isv);
    popart_stats_update(isv, v_sum, v_ssq, v_max, b_size, mean, sigma);
    regime_observer_step(isv, flat_count, b_size);
    risk_stack_controllers(isv);
    eval_warmup_decay_step(isv);
}

// Snapshot column j of a step is isv[SNAP_SLOT(j)]: SNAP_SLOT_<j> (the layout's
// diag snapshot slots) come from the loader's defines, SNAP_* positions and
// N_SUMMARY from summary.DEFINES. The summary fold itself (the twin of
// regime_dash/engine/summary.py accumulate) is SummaryAcc in replay_sweep.cu.
#define SNAP_SLOT_(j) SNAP_SLOT_##j
#define SNAP_SLOT(j) SNAP_SLOT_(j)

#endif  // REGIME_DASH_REGIME_STEP_CUH
