// rl_popart_v_correct — affine fix of V_pred for this step's σ/μ change:
//   v_pred ← (σ_old / σ_new) · v_pred + (μ_old − μ_new) / σ_new
// σ_old/μ_old are the POPART_PREV_* slots rl_popart_normalize wrote.
// Launch: <<<ceil(b / 256), 256>>>.
#include "regime_step.cuh"

extern "C" __global__ void rl_popart_v_correct(
    float* __restrict__ v_pred,
    const float* __restrict__ isv,
    int b_size
) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= b_size) return;
    float scale, shift;
    popart_v_correct_coeffs(isv[POPART_PREV_SIGMA_INDEX], isv[POPART_SIGMA_INDEX],
                            isv[POPART_PREV_MEAN_INDEX], isv[POPART_MEAN_INDEX], scale, shift);
    v_pred[i] = popart_v_correct_one(v_pred[i], scale, shift);
}
