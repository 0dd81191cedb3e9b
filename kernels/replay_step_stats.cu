// replay_step_stats — phase 1 of the fast replay: per step, the flat count and
// Σr, Σr², max|r| of the [b] batch, all steps in parallel (one block per step).
//
// The float sums use common.cuh's block reduction in exactly
// rl_popart_normalize's order, so a step's (Σr, Σr², max|r|) is bit-identical
// to what that kernel computes; the flat count uses the same reduction on ints.
// Launch: <<<T, 256, (256 * 3 + 8) * 4>>>.
#include "common.cuh"

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

    float v_sum, v_ssq, v_max;
    block_batch_stats(rewards + base, b_size, sdata, v_sum, v_ssq, v_max);

    int local_flat = 0;
    for (int i = threadIdx.x; i < b_size; i += block_dim) {
        local_flat += (lots[base + i] == 0) ? 1 : 0;
    }
    const int n_flat = block_reduce<SumOp>(local_flat, (int*)(sdata + block_dim * 3));

    if (threadIdx.x == 0) {
        stats[(long long)t * 3 + 0] = v_sum;
        stats[(long long)t * 3 + 1] = v_ssq;
        stats[(long long)t * 3 + 2] = v_max;
        flat[t] = n_flat;
    }
}
