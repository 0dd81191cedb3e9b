// rl_iqn_action_tau_controller — the spec's τ_min tail boost, then τ = max(τ, τ_min_eff);
// see regime_step.cuh iqn_tau_step. Launch: <<<1, 1>>>.
#include "regime_step.cuh"

extern "C" __global__ void rl_iqn_action_tau_controller(float* __restrict__ isv) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    iqn_tau_step(isv);
}
