// replay_scan — phase 2 of the fast replay: one thread per scenario runs the
// scalar state machine over all T steps, calling regime_step.cuh's functions
// (the same the per-step kernels call) on the shared phase-1 stats and the
// per-step stream inputs.
//
// Each scenario has its own ISV row (isv_rows [S, ISV_SIZE], updated in place
// to the final state) and its own re-bootstrap row (boot_rows [S, ISV_SIZE]).
// While the scan runs, the registry's slots live in registers: the thread's
// ISV is a local array indexed only by compile-time constants (slot macros,
// ISV_SLOT_LIST, SNAP_SLOT_LIST from the loader's defines), which the
// compiler turns into registers. Only a boundary goes through memory: the
// slots are spilled to a scratch array, the runtime reset plan
// (reset_session_state_apply) runs on it, and they are read back.
//
// Outputs, each optional:
//   keep_slot[s] >= 0: write scenario s's [T, N_SNAP] snapshot at
//                      snap_out[keep_slot[s]] (mode a: a single replay);
//   do_acc:            fold every step's snapshot row into acc[s] (float64,
//                      N_SUMMARY + 1; initialized by the host) — mode b, the
//                      sweep, which never materializes trajectories;
//   do_norm:           scenario 0 writes (μ_new, σ_new, μ_old, σ_old) of each
//                      step to norm_params [T, 4] for replay_normalize.
// Launch: <<<ceil(S / 64), 64>>>.
#include "regime_step.cuh"

// One step's inputs: phase-1 stats and the stream's per-step scalars.
struct ScanStepInputs {
    int boundary, flat;
    float cooldown, worst, kelly_edge, tau_action, v_sum, v_ssq, v_max;
};

__device__ __forceinline__ ScanStepInputs load_step_inputs(
    int t, const float* __restrict__ stats, const int* __restrict__ flat,
    const float* __restrict__ cooldown, const float* __restrict__ worst,
    const float* __restrict__ kelly_edge, const float* __restrict__ tau_action,
    const int* __restrict__ boundary) {
    ScanStepInputs in;
    in.boundary = boundary[t];
    in.flat = flat[t];
    in.cooldown = cooldown[t];
    in.worst = worst[t];
    in.kelly_edge = kelly_edge[t];
    in.tau_action = tau_action[t];
    in.v_sum = stats[(long long)t * 3 + 0];
    in.v_ssq = stats[(long long)t * 3 + 1];
    in.v_max = stats[(long long)t * 3 + 2];
    return in;
}

extern "C" __global__ void replay_scan(
    float* __restrict__ isv_rows,            // [S, ISV_SIZE] in/out
    const float* __restrict__ boot_rows,     // [S, ISV_SIZE]
    int n_scen,
    int n_steps,
    int b_size,
    const int* __restrict__ r_idx,
    const int* __restrict__ r_code,
    const int* __restrict__ r_src,
    int n_reset,
    const float* __restrict__ stats,         // [T, 3] phase 1: Σr, Σr², max|r|
    const int* __restrict__ flat,            // [T]    phase 1: flat count
    const float* __restrict__ cooldown,      // [T]
    const float* __restrict__ worst,         // [T]
    const float* __restrict__ kelly_edge,    // [T]
    const float* __restrict__ tau_action,    // [T]
    const int* __restrict__ boundary,        // [T]
    const int* __restrict__ keep_slot,       // [S]
    float* __restrict__ snap_out,            // [K, T, N_SNAP]
    double* __restrict__ acc_out,            // [S, N_SUMMARY + 1]
    int do_acc,
    float* __restrict__ norm_params,         // [T, 4]
    int do_norm
) {
    const int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= n_scen) return;

    float* row = isv_rows + (long long)s * ISV_SIZE;
    const float* boot = boot_rows + (long long)s * ISV_SIZE;
    float isv[ISV_SIZE];  // constant indices only: registers
#define X(i) isv[i] = row[i];
    ISV_SLOT_LIST
#undef X

    // A boundary spills the slots, applies the layout's reset plan, reloads them.
    auto reset = [&](float* v) {
        float scratch[ISV_SIZE];
#define X(i) scratch[i] = v[i];
        ISV_SLOT_LIST
#undef X
        reset_session_state_apply(scratch, boot, r_idx, r_code, r_src, n_reset);
#define X(i) v[i] = scratch[i];
        ISV_SLOT_LIST
#undef X
    };

    double acc[N_SUMMARY + 1];
    double* acc_row = acc_out + (long long)s * (N_SUMMARY + 1);
    if (do_acc) {
        for (int k = 0; k <= N_SUMMARY; ++k) acc[k] = acc_row[k];
    }
    const int slot = keep_slot[s];
    float* snap = (slot >= 0) ? snap_out + (long long)slot * n_steps * N_SNAP : nullptr;
    const int write_norm = do_norm && s == 0;

    // The inputs do not depend on the state: load step t+1's while step t runs,
    // so the scan's serial chain does not wait on global-memory latency.
    ScanStepInputs next = load_step_inputs(0, stats, flat, cooldown, worst, kelly_edge,
                                           tau_action, boundary);
    for (int t = 0; t < n_steps; ++t) {
        const ScanStepInputs in = next;
        if (t + 1 < n_steps) {
            next = load_step_inputs(t + 1, stats, flat, cooldown, worst, kelly_edge, tau_action,
                                    boundary);
        }
        float mean, sigma;
        scalar_step(isv, in.boundary, in.cooldown, in.worst, in.kelly_edge, in.tau_action,
                    in.v_sum, in.v_ssq, in.v_max, in.flat, b_size, reset, mean, sigma);
        if (snap != nullptr) {
            float* out = snap + (long long)t * N_SNAP;
#define S(j) out[j] = isv[SNAP_SLOT_##j];
            SNAP_SLOT_LIST
#undef S
        }
        if (do_acc) accumulate_summary(acc, isv);
        if (write_norm) {
            norm_params[(long long)t * 4 + 0] = mean;
            norm_params[(long long)t * 4 + 1] = sigma;
            norm_params[(long long)t * 4 + 2] = isv[POPART_PREV_MEAN_INDEX];
            norm_params[(long long)t * 4 + 3] = isv[POPART_PREV_SIGMA_INDEX];
        }
    }

#define X(i) row[i] = isv[i];
    ISV_SLOT_LIST
#undef X
    if (do_acc) {
        for (int k = 0; k <= N_SUMMARY; ++k) acc_row[k] = acc[k];
    }
}
