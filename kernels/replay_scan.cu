// replay_scan — phase 2 of the fast replay: the scalar state machine over all
// T steps, calling regime_step.cuh's functions (the same the per-step kernels
// call) on the shared phase-1 stats and the per-step stream inputs, for the
// single replay (sweeps of many scenarios run replay_sweep.cu). The chain of
// one scenario runs in ONE thread; the warp's other lanes only move data
// (inputs in, snapshot rows out).
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
// replay_scan_warp: one warp per scenario, for the single replay (mode a: the
// snapshot and norm_params, no accumulators). Lane 0 runs the chain with the
// scalar_step; the 32 lanes load the next
// SCAN_BATCH steps' inputs with coalesced loads, issued into registers before
// lane 0 starts the current batch so that they are in flight while it runs
// (the registers are the second buffer), compute each step's state-free
// quotients (warp_step_inputs), and park them in shared memory once the
// batch is done; lane 0 stages each step's snapshot row and norm params in
// shared memory, and the warp writes the batch's rows back with coalesced
// stores. Lane 0 so reads shared memory instead of global memory and issues
// no global store.
// Launch: <<<S, 32>>>.
#include "regime_step.cuh"
#include "replay_inputs.cuh"

// The reset a boundary runs: spill the register-held slots to a scratch
// array, apply the layout's runtime reset plan, read them back.
struct RegisterReset {
    const float* __restrict__ boot;
    const int* __restrict__ r_idx;
    const int* __restrict__ r_code;
    const int* __restrict__ r_src;
    int n_reset;
    __device__ __forceinline__ void operator()(float* v) const {
        float scratch[ISV_SIZE];
#define X(i) scratch[i] = v[i];
        ISV_SLOT_LIST
#undef X
        reset_session_state_apply(scratch, boot, r_idx, r_code, r_src, n_reset);
#define X(i) v[i] = scratch[i];
        ISV_SLOT_LIST
#undef X
    }
};

// ---- replay_scan_warp: the single replay, one warp per scenario ----
#define SCAN_BATCH 32  // steps per batch: one per lane

// The loading lanes take the state-free quotients off lane 0's chain
// (predivided_step_inputs, replay_inputs.cuh): two divisions, each a long
// dependent sequence for one thread. -DSCAN_WARP_PREDIVIDE=0 keeps them in the
// chain (for timing).
#ifndef SCAN_WARP_PREDIVIDE
#define SCAN_WARP_PREDIVIDE 1
#endif

__device__ __forceinline__ ScanStepInputs warp_step_inputs(
    int t, int b_size, const float* __restrict__ stats, const int* __restrict__ flat,
    const float* __restrict__ cooldown, const float* __restrict__ worst,
    const float* __restrict__ kelly_edge, const float* __restrict__ tau_action,
    const int* __restrict__ boundary) {
#if SCAN_WARP_PREDIVIDE
    return predivided_step_inputs(t, b_size, stats, flat, cooldown, worst, kelly_edge, tau_action,
                                  boundary);
#else
    return load_step_inputs(t, stats, flat, cooldown, worst, kelly_edge, tau_action, boundary);
#endif
}

extern "C" __global__ void replay_scan_warp(
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
    float* __restrict__ norm_params,         // [T, 4]
    int do_norm
) {
    __shared__ StepBatch<SCAN_BATCH> batch;
    __shared__ float snap_stage[SCAN_BATCH * N_SNAP];
    __shared__ float norm_stage[SCAN_BATCH * 4];

    const int s = blockIdx.x;
    if (s >= n_scen) return;
    const int lane = threadIdx.x;

    float* row = isv_rows + (long long)s * ISV_SIZE;
    const float* boot = boot_rows + (long long)s * ISV_SIZE;
    float isv[ISV_SIZE];  // constant indices only: registers (lane 0's are the state)
    if (lane == 0) {
#define X(i) isv[i] = row[i];
        ISV_SLOT_LIST
#undef X
    }
    const RegisterReset reset{boot, r_idx, r_code, r_src, n_reset};
    const int slot = keep_slot[s];
    float* snap = (slot >= 0) ? snap_out + (long long)slot * n_steps * N_SNAP : nullptr;
    const int write_norm = do_norm && s == 0;
    const int chain_b = SCAN_WARP_PREDIVIDE ? 1 : b_size;  // see warp_step_inputs

    if (lane < n_steps) {
        batch.put(lane, warp_step_inputs(lane, b_size, stats, flat, cooldown, worst, kelly_edge,
                                         tau_action, boundary));
    }
    __syncwarp();
    for (int base = 0; base < n_steps; base += SCAN_BATCH) {
        const int n = min(SCAN_BATCH, n_steps - base);
        // The next batch's inputs do not depend on the state: issue their loads
        // now, so they are in flight while lane 0 runs this batch.
        const int t_next = base + SCAN_BATCH + lane;
        ScanStepInputs pending;
        if (t_next < n_steps) {
            pending = warp_step_inputs(t_next, b_size, stats, flat, cooldown, worst,
                                       kelly_edge, tau_action, boundary);
        }
        if (lane == 0) {
            ScanStepInputs next = batch.get(0);
            for (int j = 0; j < n; ++j) {
                const ScanStepInputs in = next;
                if (j + 1 < n) next = batch.get(j + 1);
                float mean, sigma;
                scalar_step(isv, in.boundary, in.cooldown, in.worst, in.kelly_edge,
                            in.tau_action, in.v_sum, in.v_ssq, in.v_max, in.flat, chain_b, reset,
                            mean, sigma);
                if (snap != nullptr) {
                    float* out = snap_stage + j * N_SNAP;
#define S(c) out[c] = isv[SNAP_SLOT_##c];
                    SNAP_SLOT_LIST
#undef S
                }
                if (write_norm) {
                    norm_stage[j * 4 + 0] = mean;
                    norm_stage[j * 4 + 1] = sigma;
                    norm_stage[j * 4 + 2] = isv[POPART_PREV_MEAN_INDEX];
                    norm_stage[j * 4 + 3] = isv[POPART_PREV_SIGMA_INDEX];
                }
            }
        }
        __syncwarp();
        // lane 0 is done with this batch: park the next one, write this one's
        // rows back ([T, N_SNAP] and [T, 4] are row-major, so a batch's rows
        // are one contiguous run)
        if (t_next < n_steps) batch.put(lane, pending);
        if (snap != nullptr) {
            float* dst = snap + (long long)base * N_SNAP;
#pragma unroll 8
            for (int i = lane; i < n * N_SNAP; i += SCAN_BATCH) dst[i] = snap_stage[i];
        }
        if (write_norm) {
            float* dst = norm_params + (long long)base * 4;
            for (int i = lane; i < n * 4; i += SCAN_BATCH) dst[i] = norm_stage[i];
        }
        __syncwarp();
    }

    if (lane == 0) {
#define X(i) row[i] = isv[i];
        ISV_SLOT_LIST
#undef X
    }
}
