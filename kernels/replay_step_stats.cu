// replay_step_stats — phase 1 of the fast replay: per step, the flat count and
// Σr, Σr², max|r| of the [b] batch, all steps in parallel (one block per step).
//
// The float sums use common.cuh's block reduction in exactly
// rl_popart_normalize's order, so a step's (Σr, Σr², max|r|) is bit-identical
// to what that kernel computes; the flat count uses the same reduction on ints.
//
// Why this is not common.cuh's block_batch_stats: that pass issues one load,
// waits for it, adds, and only then issues the next, and it reads the lots in
// a second loop after the reward reduction, so a block keeps one 4-byte load
// per thread in flight and phase 1 ran at about half the copy bandwidth. Here
// each thread first issues the loads of STATS_PREFETCH rewards and as many lots
// (its elements i = tid, tid + blockDim.x, ...), then folds the rewards in that
// same index order: the float additions are the same operations in the same
// order as batch_stats_pass1's, only the loads are issued earlier.
// Launch: <<<T, 256, (256 * 3 + 8) * 4>>>.
#include "common.cuh"

// Elements per thread whose loads are in flight at once (b = 1024 at 256
// threads: all four of a thread's rewards and lots).
#define STATS_PREFETCH 4

extern "C" __global__ void replay_step_stats(
    const float* __restrict__ rewards,   // [T, b]
    const int* __restrict__ lots,        // [T, b]
    int b_size,
    int n_steps,
    float* __restrict__ stats,           // [T, 3]: Σr, Σr², max|r|
    int* __restrict__ flat               // [T]
) {
    extern __shared__ float sdata[];
    const int t = blockIdx.x;
    if (t >= n_steps) return;
    const int block_dim = blockDim.x;
    const long long base = (long long)t * (long long)b_size;
    const float* __restrict__ r_row = rewards + base;
    const int* __restrict__ l_row = lots + base;

    // batch_stats_pass1's accumulators, same neutral elements
    float local_sum = 0.0f;
    float local_sum_sq = 0.0f;
    float local_max_abs = 0.0f;
    int local_flat = 0;
    for (int i0 = threadIdx.x; i0 < b_size; i0 += block_dim * STATS_PREFETCH) {
        float r[STATS_PREFETCH];
        int lot[STATS_PREFETCH];
#pragma unroll
        for (int k = 0; k < STATS_PREFETCH; ++k) {
            const int i = i0 + k * block_dim;
            r[k] = (i < b_size) ? r_row[i] : 0.0f;
            lot[k] = (i < b_size) ? l_row[i] : 1;
        }
#pragma unroll
        for (int k = 0; k < STATS_PREFETCH; ++k) {
            if (i0 + k * block_dim < b_size) {  // no extra float op past the end
                local_sum += r[k];
                local_sum_sq += r[k] * r[k];
                local_max_abs = fmaxf(local_max_abs, fabsf(r[k]));
                local_flat += (lot[k] == 0) ? 1 : 0;
            }
        }
    }

    // block_reduce's steps 2-4 for the four values at once: the same shuffles
    // and the same partials on the same banks, with one barrier instead of
    // block_batch_stats' four (a block's own latency is what limits phase 1).
    const int lane_id = threadIdx.x & 31;
    const int warp_id = threadIdx.x >> 5;
    const int n_warps = block_dim >> 5;
    float* bank_sum = sdata;
    float* bank_ssq = sdata + block_dim;
    float* bank_max = sdata + block_dim * 2;
    int* bank_flat = (int*)(sdata + block_dim * 3);
    local_sum = warp_reduce<SumOp>(local_sum);
    local_sum_sq = warp_reduce<SumOp>(local_sum_sq);
    local_max_abs = warp_reduce<MaxOp>(local_max_abs);
    local_flat = warp_reduce<SumOp>(local_flat);
    if (lane_id == 0) {
        bank_sum[warp_id] = local_sum;
        bank_ssq[warp_id] = local_sum_sq;
        bank_max[warp_id] = local_max_abs;
        bank_flat[warp_id] = local_flat;
    }
    __syncthreads();
    if (threadIdx.x >= 32) return;
    const int tid = threadIdx.x;
    const float v_sum = warp_reduce<SumOp>((tid < n_warps) ? bank_sum[tid] : 0.0f);
    const float v_ssq = warp_reduce<SumOp>((tid < n_warps) ? bank_ssq[tid] : 0.0f);
    const float v_max = warp_reduce<MaxOp>((tid < n_warps) ? bank_max[tid] : 0.0f);
    const int n_flat = warp_reduce<SumOp>((tid < n_warps) ? bank_flat[tid] : 0);

    if (threadIdx.x == 0) {
        stats[(long long)t * 3 + 0] = v_sum;
        stats[(long long)t * 3 + 1] = v_ssq;
        stats[(long long)t * 3 + 2] = v_max;
        flat[t] = n_flat;
    }
}
