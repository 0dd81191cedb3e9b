// sp18_hold_opportunity_cost — the SP18 D-leg per-bar Hold reward (design "Architecture Changes D-leg").
//
// compute_sp18_hold_opportunity_cost: 0.0 unless the bar's direction is Hold;
// else capped_pnl(-2 * next_log_return / vol_proxy, isv_neg_cap, isv_pos_cap)
// * shaping_scale, with the caps read from ISV[HOLD_REWARD_POS/NEG_CAP] or the
// sentinels 5.0 / -10.0 while a slot is unset. hold_segment_bars is part of the
// design's signature; its output formula does not use it. Models (documented in
// regime_dash/modules/sp18_hold/twin.py): the capped pnl is a clamp, the vol
// normalisation divides by max(vol_proxy, vol_floor).
// Launch: one thread per bar, any grid. Twin: hold_opportunity_cost_batch.
#if !defined(HOLD_REWARD_POS_CAP_INDEX) || !defined(SP18_DIR_HOLD)
#error "compile with the SP18 defines: regime_dash.modules.kernel_defines('sp18_hold_opportunity_cost.cu')"
#endif

__device__ __forceinline__ float sp18_capped_pnl(float x, float neg_cap, float pos_cap) {
    return fminf(fmaxf(x, neg_cap), pos_cap);
}

__device__ __forceinline__ float compute_sp18_hold_opportunity_cost(
    int dir_idx, float next_log_return, float vol_proxy, int hold_segment_bars, float isv_pos_cap,
    float isv_neg_cap, float shaping_scale, float vol_floor) {
    (void)hold_segment_bars;
    if (dir_idx != SP18_DIR_HOLD) return 0.0f;
    const float vol_norm = next_log_return / fmaxf(vol_proxy, vol_floor);
    return sp18_capped_pnl(-2.0f * vol_norm, isv_neg_cap, isv_pos_cap) * shaping_scale;
}

extern "C" __global__ void sp18_hold_opportunity_cost(
    const int* __restrict__ dir_idx, const float* __restrict__ next_log_return,
    const float* __restrict__ vol_proxy, const int* __restrict__ hold_segment_bars,
    const float* __restrict__ isv, float shaping_scale, float vol_floor, int n, float* __restrict__ out) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float pos_slot = isv[HOLD_REWARD_POS_CAP_INDEX];
    const float neg_slot = isv[HOLD_REWARD_NEG_CAP_INDEX];
    const float pos_cap = pos_slot > 0.0f ? pos_slot : SP18_POS_FALLBACK;
    const float neg_cap = neg_slot < 0.0f ? neg_slot : SP18_NEG_FALLBACK;
    out[i] = compute_sp18_hold_opportunity_cost(dir_idx[i], next_log_return[i], vol_proxy[i],
                                                hold_segment_bars[i], pos_cap, neg_cap, shaping_scale,
                                                vol_floor);
}
