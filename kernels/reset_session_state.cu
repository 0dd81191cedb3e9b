// reset_session_state — the spec's boundary reset policy as a kernel.
//
// Driven by SlotLayout.reset_plan(): r_idx/r_code/r_src (int32, n_reset rows)
// say which slot is cleared, re-bootstrapped from `boot`, or aligned to another
// slot. `active` is a device flag (nonzero at a boundary) so the same launch
// sequence can be captured in a CUDA graph and run every step.
// Launch: <<<1, 1>>>.
#include "regime_step.cuh"

extern "C" __global__ void reset_session_state(
    float* __restrict__ isv,
    const float* __restrict__ boot,
    const int* __restrict__ r_idx,
    const int* __restrict__ r_code,
    const int* __restrict__ r_src,
    int n_reset,
    const int* __restrict__ active
) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    if (active[0] == 0) return;
    reset_session_state_apply(isv, boot, r_idx, r_code, r_src, n_reset);
}
