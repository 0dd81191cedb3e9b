// pearl_c_engagement_count — SP4 Pearl C (Layer A, A14): per-block clamp-engagement counts.
//
// Each thread sets local_engage for every update it owns (grid-stride) whose
// magnitude exceeds the clamp, as the five Adam kernels do at their clamp;
// the block tree-reduces the counts in shared memory (no atomicAdd, the
// dqn_grad_norm_kernel pattern) and the block leader writes the block's count
// to per_block_buf[engage_buf_offset + blockIdx.y * gridDim.x + blockIdx.x].
// engage_buf_offset == -1 (SP4_ENGAGE_OFFSET_DISABLED) skips the writeback.
// blockIdx.y batches steps for a replay (updates are [gridDim.y, n]); the
// trainer launches one step (gridDim.y = 1). The Adam update itself is not
// modelled: `updates` are the pre-clamp step magnitudes.
// Launch: <<<dim3(blocks, steps), block, block * sizeof(int)>>>, block a power of two.
#define SP4_ENGAGE_OFFSET_DISABLED (-1)

extern "C" __global__ void pearl_c_engagement_count(
    const float* __restrict__ updates, int n, float clamp, int* __restrict__ per_block_buf,
    int engage_buf_offset) {
    extern __shared__ int s_engage[];
    const int tid = threadIdx.x;
    const float* u = updates + (size_t)blockIdx.y * n;
    int local_engage = 0;
    for (int j = blockIdx.x * blockDim.x + tid; j < n; j += gridDim.x * blockDim.x) {
        if (fabsf(u[j]) > clamp) local_engage += 1;
    }
    s_engage[tid] = local_engage;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) s_engage[tid] += s_engage[tid + s];
        __syncthreads();
    }
    if (tid == 0 && engage_buf_offset != SP4_ENGAGE_OFFSET_DISABLED) {
        per_block_buf[engage_buf_offset + blockIdx.y * gridDim.x + blockIdx.x] = s_engage[0];
    }
}
