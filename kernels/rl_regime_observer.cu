// rl_regime_observer — dead zone, Welford variance of Δworst, tail recency, ε ramp.
// Single-thread single-block (the spec's kernel); the body is
// regime_step.cuh's regime_observer_step, shared with the fast scan.
// Launch: <<<1, 1>>>.
#include "regime_step.cuh"

extern "C" __global__ void rl_regime_observer(
    float* __restrict__ isv,
    const int* __restrict__ flat_count_d,
    int b_size
) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    regime_observer_step(isv, flat_count_d[0], b_size);
}
