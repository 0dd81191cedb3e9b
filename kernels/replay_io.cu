// replay_io — the per-step CUDA engine's stand-in for the trainer around the spec kernels.
//
// The trainer hands the regime kernels fixed per-step buffers (rewards[b],
// lots[b], V_pred[b]) and writes its scalar inputs into the ISV. A replay keeps
// the whole stream on the device as [T, b] / [T] arrays, so these two kernels
// move step t in and out of the fixed buffers, with t read from a device
// counter. The launch sequence of a step then never changes, which is what
// lets it be captured once in a CUDA graph and replayed T times, with no host
// write or sync per step.
// Launch each: <<<1, 256>>> (one block: the store kernel advances the counter
// after a __syncthreads, once every thread has read it).
#include "regime_step.cuh"

extern "C" __global__ void replay_load_step(
    const int* __restrict__ t_d,
    const float* __restrict__ rewards_all,   // [T, b]
    const int* __restrict__ lots_all,        // [T, b]
    const float* __restrict__ v_pred_all,    // [T, b] when has_v_pred
    int has_v_pred,
    const float* __restrict__ cooldown,      // [T]
    const float* __restrict__ worst,         // [T]
    const float* __restrict__ kelly_edge,    // [T]
    const float* __restrict__ tau_action,    // [T]
    const int* __restrict__ boundary,        // [T]
    float* __restrict__ rewards_cur,         // [b]
    int* __restrict__ lots_cur,              // [b]
    float* __restrict__ v_pred_cur,          // [b] when has_v_pred
    int* __restrict__ reset_active,          // [1] reset_session_state's flag
    float* __restrict__ isv,
    int b_size
) {
    const int t = t_d[0];
    const long long base = (long long)t * (long long)b_size;
    for (int i = threadIdx.x; i < b_size; i += blockDim.x) {
        rewards_cur[i] = rewards_all[base + i];
        lots_cur[i] = lots_all[base + i];
        if (has_v_pred) v_pred_cur[i] = v_pred_all[base + i];
    }
    if (threadIdx.x == 0) {
        write_step_inputs(isv, cooldown[t], worst[t], kelly_edge[t], tau_action[t]);
        reset_active[0] = boundary[t];
    }
}

extern "C" __global__ void replay_store_step(
    int* __restrict__ t_d,
    const float* __restrict__ rewards_cur,   // [b] normalized by rl_popart_normalize
    const float* __restrict__ v_pred_cur,    // [b] corrected by rl_popart_v_correct
    int has_v_pred,
    const int* __restrict__ flat_count_d,    // [1] rl_regime_flat_count's output
    const float* __restrict__ isv,
    const int* __restrict__ snap_idx,        // [n_snap] diag slots
    int n_snap,
    float* __restrict__ rewards_out,         // [T, b]
    float* __restrict__ v_pred_out,          // [T, b] when has_v_pred
    int* __restrict__ flat_out,              // [T]
    float* __restrict__ snap_out,            // [T, n_snap]
    int b_size
) {
    const int t = t_d[0];
    const long long base = (long long)t * (long long)b_size;
    for (int i = threadIdx.x; i < b_size; i += blockDim.x) {
        rewards_out[base + i] = rewards_cur[i];
        if (has_v_pred) v_pred_out[base + i] = v_pred_cur[i];
    }
    for (int j = threadIdx.x; j < n_snap; j += blockDim.x) {
        snap_out[(long long)t * n_snap + j] = isv[snap_idx[j]];
    }
    if (threadIdx.x == 0) flat_out[t] = flat_count_d[0];
    __syncthreads();
    if (threadIdx.x == 0) t_d[0] = t + 1;
}
