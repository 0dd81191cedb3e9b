// rl_regime_flat_count — number of flat accounts (lots == 0) in the batch.
//
// The spec's code, verbatim: a shared-memory int tree reduce rather than
// common.cuh's warp-shuffle reduction. Integer sums are exact and so do not
// depend on the reduction order; the result equals common.cuh's reduction and
// the reference's count_nonzero bit for bit.
// Launch: <<<1, 256, 256 * sizeof(int)>>> (block size a power of two).

extern "C" __global__ void rl_regime_flat_count(
    const int* __restrict__ lots,
    int* __restrict__ flat_count_out,
    int b_size
) {
    extern __shared__ int s_count[];
    int tid = threadIdx.x;
    int sum = 0;
    for (int b = tid; b < b_size; b += blockDim.x) {
        sum += (lots[b] == 0) ? 1 : 0;
    }
    s_count[tid] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) s_count[tid] += s_count[tid + s];
        __syncthreads();
    }
    if (tid == 0) flat_count_out[0] = s_count[0];
}
