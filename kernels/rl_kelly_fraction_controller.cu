// rl_kelly_fraction_controller — analytic Kelly (a model: clamp(safety_frac·edge, 0, cap))
// with the spec's resurrection block appended at its end; see regime_step.cuh kelly_step.
// Launch: <<<1, 1>>>.
#include "regime_step.cuh"

extern "C" __global__ void rl_kelly_fraction_controller(float* __restrict__ isv) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    kelly_step(isv);
}
