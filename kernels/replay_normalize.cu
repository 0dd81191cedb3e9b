// replay_normalize — Pass 3 of rl_popart_normalize (and rl_popart_v_correct)
// for every step at once, given each step's PopArt parameters from the scan.
//
// norm_params[t] = (μ_new, σ_new, μ_old, σ_old) of step t, as replay_scan wrote
// them; the per-element arithmetic is regime_step.cuh's, so the result is
// bit-identical to the per-step kernels. Launch: a grid-stride 1-D grid.
#include "regime_step.cuh"

extern "C" __global__ void replay_normalize(
    float* __restrict__ rewards,             // [T, b], normalized in place
    float* __restrict__ v_pred,              // [T, b], corrected in place when has_v_pred
    int has_v_pred,
    const float* __restrict__ norm_params,   // [T, 4]
    int n_steps,
    int b_size
) {
    const long long total = (long long)n_steps * (long long)b_size;
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < total;
         k += (long long)gridDim.x * blockDim.x) {
        const long long t = k / (long long)b_size;
        const float mean = norm_params[t * 4 + 0];
        const float sigma = norm_params[t * 4 + 1];
        rewards[k] = popart_normalize_one(rewards[k], mean, popart_inv_sigma(sigma));
        if (has_v_pred) {
            float scale, shift;
            popart_v_correct_coeffs(norm_params[t * 4 + 3], sigma, norm_params[t * 4 + 2], mean,
                                    scale, shift);
            v_pred[k] = popart_v_correct_one(v_pred[k], scale, shift);
        }
    }
}
