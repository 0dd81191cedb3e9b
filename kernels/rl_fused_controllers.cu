// rl_fused_controllers — step 8 of the spec's launch order, "mirrors single-controller
// behavior": the risk-stack controllers (CMDP → IQN τ → Inventory β → Kelly) in one
// launch. regime-dash models the IQN τ (Layer 2) and Kelly (Layer 4) branches only;
// the Layer-2 branch applies the F5 τ boost and the Layer-4 branch the F2 resurrection
// by calling the single kernels' own functions, each behind its mirror switch
// (RL_FUSED_MIRROR_*: 0 is a fused copy that never got the block). See regime_step.cuh
// fused_controllers_step. Launch: <<<1, 1>>>.
#include "regime_step.cuh"

extern "C" __global__ void rl_fused_controllers(float* __restrict__ isv) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    fused_controllers_step(isv);
}
