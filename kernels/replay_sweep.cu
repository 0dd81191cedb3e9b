// replay_sweep — phase 2 of the fast engine for a sweep: S scenarios, one
// thread each, over the shared phase-1 stats and per-step stream inputs,
// calling regime_step.cuh's scalar_step (the function the per-step kernels and
// replay_scan_warp call), so every float operation is the reference's.
//
// Built for throughput (many scenarios), unlike replay_scan_warp (one chain's
// latency):
//   * the step inputs are the same for every scenario, so a block loads each
//     batch of SWEEP_BATCH steps once, cooperatively, into shared memory, with
//     the state-free quotients already taken (predivide_step_inputs in
//     replay_inputs.cuh; scalar_step then runs with b_size = 1); the next
//     batch's loads are issued into registers before the current batch runs;
//   * only the slots the chain touches are held in registers (CHAIN_SLOT_LIST:
//     every slot regime_step.cuh names, plus the snapshot slots, from the
//     host); the other slots stay in the scenario's row in global memory;
//   * a boundary's reset runs on that row in global memory (spill the chain
//     slots, apply the layout's reset plan, read them back): no stack frame;
//   * the summary is folded in registers (counts as ints, minima and maxima as
//     floats, the kelly sum as a double: the same values summary.accumulate
//     computes in float64, see SummaryAcc) and written once.
//
// isv_rows [S, ISV_SIZE] holds each scenario's initial ISV on entry and its final
// ISV on exit; boot_rows [S, ISV_SIZE] its re-bootstrap row. keep_slot[s] >= 0:
// also write scenario s's snapshot at snap_out[keep_slot[s]] ([K, snap_steps, N_SNAP],
// this launch's steps at rows t0 .. t0 + n_steps).
// acc_in: summary.init's row [N_SUMMARY + 1] (acc_in_stride 0), or each scenario's
// accumulators so far [S, N_SUMMARY + 1] (acc_in_stride N_SUMMARY + 1); acc_out
// [S, N_SUMMARY + 1] (may be acc_in: a thread reads its own row before it writes it).
//
// A sweep may run as one launch over all T steps, or as several over consecutive
// pieces of steps (the per-step input pointers offset to the piece, t0 its first
// step): the state a step leaves is the row (chain slots written back, the others
// never left it) and the accumulators (ints, floats and the double sum, exact in
// double), so the pieces give the same bits as one launch; a piece can then start
// while phase 1 still works on the next.
// Launch: <<<ceil(S / SWEEP_BLOCK), SWEEP_BLOCK>>>, SWEEP_BLOCK >= SWEEP_BATCH.
#include "regime_step.cuh"
#include "replay_inputs.cuh"

#ifndef SWEEP_BLOCK
#define SWEEP_BLOCK 128
#endif
#ifndef SWEEP_BATCH
#define SWEEP_BATCH 64
#endif
#ifndef CHAIN_SLOT_LIST
#define CHAIN_SLOT_LIST ISV_SLOT_LIST
#endif

// The reset a boundary runs, on the scenario's row in global memory.
struct RowReset {
    float* __restrict__ row;
    ResetPlan plan;
    __device__ __forceinline__ void operator()(float* v) const {
#define X(i) row[i] = v[i];
        CHAIN_SLOT_LIST
#undef X
        plan.apply(row);
#define X(i) v[i] = row[i];
        CHAIN_SLOT_LIST
#undef X
    }
};

// summary.accumulate in registers. Every metric is a count, a float32 value's
// min or max, or the float64 kelly sum; counting in int, and comparing float32
// values as floats (double(a) < double(b) iff a < b, NaN compares false either
// way), gives exactly the float64 accumulators, converted once at the end.
struct SummaryAcc {
    int dead_zone, timeouts, timeout_steps, tail, floor_active, tau_boost, kelly_zero, prev_timeout;
    float longest, kelly_min, sigma_max, eps_min;
    double kelly_sum;

    __device__ __forceinline__ void init(const double* __restrict__ a) {
        dead_zone = (int)a[0];
        longest = (float)a[1];
        timeouts = (int)a[2];
        timeout_steps = (int)a[3];
        tail = (int)a[4];
        floor_active = (int)a[5];
        tau_boost = (int)a[6];
        kelly_min = (float)a[7];
        kelly_sum = a[8];
        kelly_zero = (int)a[9];
        sigma_max = (float)a[10];
        eps_min = (float)a[11];
        prev_timeout = a[N_SUMMARY] != 0.0;
    }
    __device__ __forceinline__ void fold(const float* isv) {
        const float timeout = isv[SNAP_SLOT(SNAP_TIMEOUT)];
        const float kelly = isv[SNAP_SLOT(SNAP_KELLY)];
        const float sigma = isv[SNAP_SLOT(SNAP_SIGMA)];
        const float envelope = isv[SNAP_SLOT(SNAP_ENVELOPE)];
        const float duration = isv[SNAP_SLOT(SNAP_DURATION)];
        const float eps = isv[SNAP_SLOT(SNAP_EPS_LIVE)];
        dead_zone += isv[SNAP_SLOT(SNAP_FLAG)] != 0.0f;
        if (duration > longest) longest = duration;
        const int t_on = timeout != 0.0f;
        timeout_steps += t_on;
        timeouts += t_on & !prev_timeout;
        prev_timeout = t_on;
        tail += isv[SNAP_SLOT(SNAP_RECENCY)] == 0.0f;
        if (sigma == envelope && envelope > sqrtf(isv[SNAP_SLOT(SNAP_VAR)])) floor_active += 1;
        tau_boost += isv[SNAP_SLOT(SNAP_TAU_MIN_EFF)] > isv[SNAP_SLOT(SNAP_TAU_MIN)];
        if (kelly < kelly_min) kelly_min = kelly;
        kelly_sum += (double)kelly;
        kelly_zero += kelly == 0.0f;
        if (sigma > sigma_max) sigma_max = sigma;
        if (eps < eps_min) eps_min = eps;
    }
    __device__ __forceinline__ void store(double* __restrict__ a) const {
        a[0] = (double)dead_zone;
        a[1] = (double)longest;
        a[2] = (double)timeouts;
        a[3] = (double)timeout_steps;
        a[4] = (double)tail;
        a[5] = (double)floor_active;
        a[6] = (double)tau_boost;
        a[7] = (double)kelly_min;
        a[8] = kelly_sum;
        a[9] = (double)kelly_zero;
        a[10] = (double)sigma_max;
        a[11] = (double)eps_min;
        a[N_SUMMARY] = prev_timeout ? 1.0 : 0.0;
    }
};

extern "C" __global__ void __launch_bounds__(SWEEP_BLOCK) replay_sweep(
    REPLAY_SCAN_PARAMS,
    const double* acc_in,                    // [N_SUMMARY + 1] or [S, N_SUMMARY + 1] (may alias acc_out)
    int acc_in_stride,                       // 0 or N_SUMMARY + 1
    double* acc_out,                         // [S, N_SUMMARY + 1]
    int t0,                                  // this launch's first step in the stream
    int snap_steps                           // T: the snapshot's rows
) {
    __shared__ StepBatch<SWEEP_BATCH> batch;
    const int s = blockIdx.x * blockDim.x + threadIdx.x;
    const bool active = s < n_scen;  // the others still load inputs and reach every barrier
    const int tid = threadIdx.x;
    const StepInputArrays inputs{stats, flat, cooldown, worst, kelly_edge, tau_action, boundary};

    float* row = isv_rows + (long long)(active ? s : 0) * ISV_SIZE;
    float isv[ISV_SIZE];  // constant indices only, chain slots only: registers
    SummaryAcc acc;
    float* snap = nullptr;
    if (active) {
#define X(i) isv[i] = row[i];
        CHAIN_SLOT_LIST
#undef X
        acc.init(acc_in + (long long)s * acc_in_stride);
        const int slot = keep_slot[s];
        if (slot >= 0) snap = snap_out + ((long long)slot * snap_steps + t0) * N_SNAP;
    }
    const RowReset reset{row, {boot_rows + (long long)(active ? s : 0) * ISV_SIZE, r_idx, r_code, r_src,
                                n_reset}};

    ScanStepInputs pending;
    if (tid < SWEEP_BATCH && tid < n_steps) {
        batch.put(tid, predivide_step_inputs(inputs.load(tid), b_size));
    }
    __syncthreads();
    for (int base = 0; base < n_steps; base += SWEEP_BATCH) {
        const int n = min(SWEEP_BATCH, n_steps - base);
        const int t_next = base + SWEEP_BATCH + tid;
        const bool loads = tid < SWEEP_BATCH && t_next < n_steps;
        if (loads) {  // in flight while this batch runs
            pending = predivide_step_inputs(inputs.load(t_next), b_size);
        }
        if (active) {
            for (int j = 0; j < n; ++j) {
                const ScanStepInputs in = batch.get(j);
                float mean, sigma;
                scalar_step(isv, in.boundary, in.cooldown, in.worst, in.kelly_edge,
                            in.tau_action, in.v_sum, in.v_ssq, in.v_max, in.flat, 1, reset, mean,
                            sigma);
                acc.fold(isv);
                if (snap != nullptr) {
                    float* out = snap + (long long)(base + j) * N_SNAP;
#define S(c) out[c] = isv[SNAP_SLOT_##c];
                    SNAP_SLOT_LIST
#undef S
                }
            }
        }
        __syncthreads();  // everyone is done with this batch
        if (loads) batch.put(tid, pending);
        __syncthreads();  // the next batch is parked
    }

    if (active) {
#define X(i) row[i] = isv[i];
        CHAIN_SLOT_LIST
#undef X
        acc.store(acc_out + (long long)s * (N_SUMMARY + 1));
    }
}
