// sp18_hold_reward_cap_update — the SP18 D-leg cap producer (DD3 = b, DD5 = b).
//
// One block. Counts the Long/Short closes of the batch with a shared-memory
// tree reduction (no atomics), selects p99 of |step_ret| over them exactly
// (nearest rank: the ceil(0.99 n)-th smallest, found by counting ranks, so no
// sort and no float arithmetic), then thread 0 feeds obs = p99 * safety_factor
// through Pearls A+D (first-observation bootstrap while the count slot is 0,
// Wiener-alpha EMA from Welford accumulators) and writes
// POS = clamp(EMA, pos_min, pos_max), NEG = -neg_ratio * POS.
// The Pearls A+D formulas are a model, twin: regime_dash.modules.f32.pearls_ad_update.
// Launch: <<<1, 256, 0>>> (block size a power of two, at most 1024).
#if !defined(HOLD_REWARD_POS_CAP_INDEX) || !defined(HRC_SAMPLE_COUNT_INDEX)
#error "compile with the SP18 defines: regime_dash.modules.kernel_defines('sp18_hold_reward_cap_update.cu')"
#endif

__device__ void sp18_pearls_ad_update(float* isv, float obs, float alpha_min, float alpha_max) {
    float ema = isv[HOLD_REWARD_CAP_EMA_INDEX];
    float alpha = isv[HOLD_REWARD_CAP_ALPHA_INDEX];
    float mean = isv[HRC_OBS_MEAN_INDEX];
    float m2 = isv[HRC_OBS_M2_INDEX];
    float dmean = isv[HRC_DIFF_MEAN_INDEX];
    float dm2 = isv[HRC_DIFF_M2_INDEX];
    const float prev = isv[HRC_PREV_OBS_INDEX];
    const float count = isv[HRC_SAMPLE_COUNT_INDEX] + 1.0f;
    if (count == 1.0f) {  // Pearl A: the sentinel gives way to the first observation
        ema = obs;
        alpha = 1.0f;
        mean = obs;
        m2 = 0.0f;
        dmean = 0.0f;
        dm2 = 0.0f;
    } else {
        const float d = obs - mean;
        mean = mean + d / count;
        m2 = m2 + d * (obs - mean);
        const float diff = obs - prev;
        const float nd = count - 1.0f;
        const float dd = diff - dmean;
        dmean = dmean + dd / nd;
        dm2 = dm2 + dd * (diff - dmean);
        const float var_obs = m2 / (count - 1.0f);
        const float var_diff = dm2 / fmaxf(nd - 1.0f, 1.0f);
        const float noise = var_diff * 0.5f;
        const float signal = fmaxf(var_obs - noise, 0.0f);
        const float total = signal + noise;
        alpha = total <= 0.0f ? alpha_min : signal / total;
        alpha = fminf(fmaxf(alpha, alpha_min), alpha_max);
        ema = ema + alpha * (obs - ema);
    }
    isv[HOLD_REWARD_CAP_EMA_INDEX] = ema;
    isv[HOLD_REWARD_CAP_ALPHA_INDEX] = alpha;
    isv[HRC_OBS_MEAN_INDEX] = mean;
    isv[HRC_OBS_M2_INDEX] = m2;
    isv[HRC_DIFF_MEAN_INDEX] = dmean;
    isv[HRC_DIFF_M2_INDEX] = dm2;
    isv[HRC_PREV_OBS_INDEX] = obs;
    isv[HRC_SAMPLE_COUNT_INDEX] = count;
}

extern "C" __global__ void sp18_hold_reward_cap_update(
    float* __restrict__ isv, const float* __restrict__ step_ret, const int* __restrict__ is_ls_close, int n,
    float safety_factor, float neg_ratio, float pos_min, float pos_max, float alpha_min, float alpha_max) {
    extern __shared__ int s_count[];
    __shared__ float s_p99;
    const int tid = threadIdx.x;
    int local = 0;
    for (int i = tid; i < n; i += blockDim.x) local += is_ls_close[i] != 0 ? 1 : 0;
    s_count[tid] = local;
    if (tid == 0) s_p99 = 0.0f;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) s_count[tid] += s_count[tid + s];
        __syncthreads();
    }
    const int n_close = s_count[0];
    if (n_close == 0) return;  // every thread returns: no close, no update
    const int k = (99 * n_close + 99) / 100 - 1;
    for (int i = tid; i < n; i += blockDim.x) {
        if (is_ls_close[i] == 0) continue;
        const float v = fabsf(step_ret[i]);
        int less = 0, less_eq = 0;
        for (int j = 0; j < n; ++j) {
            if (is_ls_close[j] == 0) continue;
            const float w = fabsf(step_ret[j]);
            less += w < v ? 1 : 0;
            less_eq += w <= v ? 1 : 0;
        }
        // every writer holds the same value: the k-th smallest
        if (less <= k && k < less_eq) s_p99 = v;
    }
    __syncthreads();
    if (tid == 0) {
        const float obs = s_p99 * safety_factor;
        sp18_pearls_ad_update(isv, obs, alpha_min, alpha_max);
        const float pos = fminf(fmaxf(isv[HOLD_REWARD_CAP_EMA_INDEX], pos_min), pos_max);
        isv[HOLD_REWARD_POS_CAP_INDEX] = pos;
        isv[HOLD_REWARD_NEG_CAP_INDEX] = -neg_ratio * pos;
    }
}
