// common.cuh — the one warp/block reduction every kernel uses.
//
// Reduction order (the reference engine's block_reduce_stats emulates exactly
// this, so float sums are bit-identical to it):
//   1. thread tid accumulates i = tid, tid + blockDim.x, ... in index order;
//   2. each warp reduces with __shfl_down_sync, offsets 16, 8, 4, 2, 1; a lane
//      whose source lane is past the warp's end reads its own value back;
//   3. lane 0 of each warp writes its partial to a shared bank;
//   4. the first warp reduces the partials, lanes >= n_warps holding the
//      operation's identity (0 for sums, 0 for max|r| since |r| >= 0).
// The result is valid in thread 0 only. blockDim.x must be a multiple of 32.
#ifndef REGIME_DASH_COMMON_CUH
#define REGIME_DASH_COMMON_CUH

#define FULL_WARP_MASK 0xFFFFFFFFu

struct SumOp {
    template <typename T>
    __device__ __forceinline__ static T apply(T a, T b) { return a + b; }
};

struct MaxOp {
    // fmaxf, as the spec's warp_reduce_max: a NaN operand yields the other one.
    __device__ __forceinline__ static float apply(float a, float b) { return fmaxf(a, b); }
};

template <class Op, typename T>
__device__ __forceinline__ T warp_reduce(T val) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        val = Op::apply(val, __shfl_down_sync(FULL_WARP_MASK, val, offset));
    }
    return val;
}

// The spec's names for the two float warp reductions.
__device__ __forceinline__ float warp_reduce_sum(float val) { return warp_reduce<SumOp>(val); }
__device__ __forceinline__ float warp_reduce_max(float val) { return warp_reduce<MaxOp>(val); }

// Steps 2-4 for one value; `bank` holds at least blockDim.x / 32 elements.
// Ends with every thread past the __syncthreads, so the caller may reuse
// other banks at once; `bank` itself must not be rewritten before the next
// __syncthreads (the first warp still reads it).
template <class Op, typename T>
__device__ __forceinline__ T block_reduce(T val, T* bank) {
    const int tid = threadIdx.x;
    const int lane_id = tid & 31;
    const int warp_id = tid >> 5;
    const int n_warps = blockDim.x >> 5;
    val = warp_reduce<Op>(val);
    if (lane_id == 0) bank[warp_id] = val;
    __syncthreads();
    T out = T(0);
    if (tid < 32) {
        out = (tid < n_warps) ? bank[tid] : T(0);
        out = warp_reduce<Op>(out);
    }
    return out;
}

// Pass 1 of rl_popart_normalize: this thread's Σr, Σr², max|r| over
// i = tid, tid + block_dim, ...
__device__ __forceinline__ void batch_stats_pass1(const float* __restrict__ rewards, int b_size,
                                                  float& local_sum, float& local_sum_sq,
                                                  float& local_max_abs) {
    const int tid = threadIdx.x;
    const int block_dim = blockDim.x;
    local_sum = 0.0f;
    local_sum_sq = 0.0f;
    local_max_abs = 0.0f;  // neutral element (|r| >= 0)
    for (int i = tid; i < b_size; i += block_dim) {
        const float r = rewards[i];
        local_sum += r;
        local_sum_sq += r * r;
        local_max_abs = fmaxf(local_max_abs, fabsf(r));
    }
}

// (Σr, Σr², max|r|) of one step's batch, valid in thread 0. `sdata` is the
// spec's shared layout: three banks of block_dim floats (sum, sum_sq, max_abs).
__device__ __forceinline__ void block_batch_stats(const float* __restrict__ rewards, int b_size,
                                                  float* sdata, float& v_sum, float& v_ssq,
                                                  float& v_max) {
    const int block_dim = blockDim.x;
    float local_sum, local_sum_sq, local_max_abs;
    batch_stats_pass1(rewards, b_size, local_sum, local_sum_sq, local_max_abs);
    v_sum = block_reduce<SumOp>(local_sum, sdata);
    v_ssq = block_reduce<SumOp>(local_sum_sq, sdata + block_dim);
    v_max = block_reduce<MaxOp>(local_max_abs, sdata + block_dim * 2);
}
#endif  // REGIME_DASH_COMMON_CUH
