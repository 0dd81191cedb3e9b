// eval_warmup_decay — the v9 transition ramp on the F3-renamed slots 685-687
// (a model; see regime_step.cuh eval_warmup_decay_step). Launch: <<<1, 1>>>.
#include "regime_step.cuh"

extern "C" __global__ void eval_warmup_decay(float* __restrict__ isv) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    eval_warmup_decay_step(isv);
}
