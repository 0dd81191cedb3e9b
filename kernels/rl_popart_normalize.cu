// rl_popart_normalize — the F4 version: batch Σr, Σr², max|r| (third shared
// bank), PopArt statistics update with the max-magnitude envelope floor on σ,
// then Pass 3 normalizes the rewards in place.
//
// Shared memory: block_dim * 3 + 3 floats —
//   [0, block_dim)              sum bank
//   [block_dim, 2*block_dim)    sum_sq bank
//   [2*block_dim, 3*block_dim)  max_abs bank (F4)
//   [3*block_dim, +3)           broadcast (new_mean, new_sigma); Pass 3 reads
//                               them at block_dim * 3 (issue β of the spec's v3)
// Launch: <<<1, 256, (256 * 3 + 3) * sizeof(float)>>>. Kernel args unchanged:
// (rewards, isv, b_size).
#include "common.cuh"
#include "regime_step.cuh"

extern "C" __global__ void rl_popart_normalize(
    float* __restrict__ rewards,
    float* __restrict__ isv,
    int b_size
) {
    extern __shared__ float sdata[];
    const int tid = threadIdx.x;
    const int block_dim = blockDim.x;

    // Pass 1 + warp/shared reductions (common.cuh, the one reduction order).
    float v_sum, v_ssq, v_max;
    block_batch_stats(rewards, b_size, sdata, v_sum, v_ssq, v_max);

    if (tid == 0) {
        // PopArt update and the F4 envelope floor (regime_step.cuh).
        float new_mean, new_sigma;
        popart_stats_update(isv, v_sum, v_ssq, v_max, b_size, new_mean, new_sigma);

        // Broadcast to all threads via shared mem; the 3rd bank (max_abs)
        // occupies the pre-F4 broadcast region, so the slots sit at block_dim*3.
        sdata[block_dim * 3 + 0] = new_mean;
        sdata[block_dim * 3 + 1] = new_sigma;

        __threadfence_system();
    }
    __syncthreads();

    // ── Pass 3: normalize rewards in place ──────────
    const float mean  = sdata[block_dim * 3 + 0];
    const float sigma = sdata[block_dim * 3 + 1];
    const float inv_sigma = popart_inv_sigma(sigma);
    for (int i = tid; i < b_size; i += block_dim) {
        rewards[i] = popart_normalize_one(rewards[i], mean, inv_sigma);
    }
}
