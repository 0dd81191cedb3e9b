// sp14_alpha_grad_gate — the SP14 Earned-Gradient-Flow α-grad gate (commit note B.4).
//
// A single-thread state machine on the ISV bus. Per step:
//   1. read aux_dir_acc, q_disagreement, the variance EMAs, the Schmitt state
//      and the previous smoothed α;
//   2. adaptive k_aux = K_BASE_AUX/(1 + var_aux/VARIANCE_REF_AUX), k_q likewise,
//      both floored at K_MIN;
//   3. Schmitt-trigger Gate 1: opens at target+h, closes at target-h;
//   4. Gate 1 sigmoid (aux competence) and Gate 2 sigmoid (disagreement vs the
//      0.5 chance baseline), arguments clipped to [-30, 30];
//   5. alpha_raw = gate1 * gate2 * warmup_gate (structurally in [0, 1]);
//   6. variance EMA of alpha_raw -> beta in [BETA_BASE, BETA_MAX];
//   7. alpha_smoothed = beta * prev + (1 - beta) * raw;
//   8. write the 7 outputs.
// Where the note is silent (the variance-EMA and beta formulas, the base
// constants) the model is documented in regime_dash/modules/sp14_alpha_grad_gate.
// The exponential is sp14_exp_f32, a portable Cody-Waite + polynomial exp,
// instead of __expf, so the NumPy twin matches bit for bit (compile with
// --fmad=false). Slot indices come only from the -D defines of
// regime_dash.modules.kernel_defines("sp14_alpha_grad_gate.cu").
// Launch: sp14_alpha_grad_gate <<<1, 1>>> per step; sp14_alpha_grad_gate_replay
// <<<1, 1>>> runs a whole stream.
#if !defined(AUX_DIR_ACC_SHORT_EMA_INDEX) || !defined(ALPHA_GRAD_SMOOTHED_INDEX)
#error "compile with the SP14 slot defines: regime_dash.modules.kernel_defines('sp14_alpha_grad_gate.cu')"
#endif

#define SP14_SNAPSHOT 14

struct Sp14Params {
    float k_base_aux, k_base_q, var_ref_aux, var_ref_q, k_min, target, hysteresis;
    float beta_base, beta_max, var_ref_beta, var_ema_alpha;
};

// e**x for |x| <= 30: n = rint(x log2 e), r = x - n ln2 (Cody-Waite), Taylor to r^6.
__device__ __forceinline__ float sp14_exp_f32(float x) {
    const float n = rintf(x * __int_as_float(0x3fb8aa3b));
    float r = x - n * __int_as_float(0x3f317200);
    r = r - n * __int_as_float(0x35bfbe8e);
    float p = __int_as_float(0x3ab60b61);
    p = p * r + __int_as_float(0x3c088889);
    p = p * r + __int_as_float(0x3d2aaaab);
    p = p * r + __int_as_float(0x3e2aaaab);
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    return p * __int_as_float((static_cast<int>(n) + 127) << 23);
}

__device__ __forceinline__ float sp14_sigmoid(float x) {
    x = fminf(fmaxf(x, -30.0f), 30.0f);  // fp32 overflow guard; saturates bit-equal
    return 1.0f / (1.0f + sp14_exp_f32(-x));
}

__device__ void sp14_alpha_grad_gate_step(float* isv, float warmup_gate, const Sp14Params p,
                                          float* gate1_out, float* gate2_out) {
    // 1.
    const float aux = isv[AUX_DIR_ACC_SHORT_EMA_INDEX];
    const float q_dis = isv[Q_DISAGREEMENT_SHORT_EMA_INDEX];
    const float var_aux = isv[AUX_DIR_ACC_VARIANCE_EMA_INDEX];
    const float var_q = isv[Q_DISAGREEMENT_VARIANCE_EMA_INDEX];
    float var_alpha = isv[ALPHA_GRAD_RAW_VARIANCE_EMA_INDEX];
    float gate1_state = isv[GATE1_OPEN_STATE_INDEX];
    const float alpha_prev = isv[ALPHA_GRAD_SMOOTHED_INDEX];
    // 2.
    const float k_aux = fmaxf(p.k_min, p.k_base_aux / (1.0f + var_aux / p.var_ref_aux));
    const float k_q = fmaxf(p.k_min, p.k_base_q / (1.0f + var_q / p.var_ref_q));
    // 3.
    const float open_th = p.target + p.hysteresis;
    const float close_th = p.target - p.hysteresis;
    if (gate1_state < 0.5f) {
        if (aux >= open_th) gate1_state = 1.0f;
    } else {
        if (aux <= close_th) gate1_state = 0.0f;
    }
    // 4.
    const float gate1 = gate1_state * sp14_sigmoid(k_aux * (aux - p.target));
    const float gate2 = sp14_sigmoid(k_q * (0.5f - q_dis));
    // 5.
    const float raw = gate1 * gate2 * warmup_gate;
    // 6.
    const float dev = raw - alpha_prev;
    var_alpha = (1.0f - p.var_ema_alpha) * var_alpha + p.var_ema_alpha * (dev * dev);
    const float beta = fminf(p.beta_max, fmaxf(p.beta_base, p.beta_base * (1.0f + var_alpha / p.var_ref_beta)));
    // 7.
    const float smoothed = beta * alpha_prev + (1.0f - beta) * raw;
    // 8.
    isv[K_AUX_ADAPTIVE_INDEX] = k_aux;
    isv[K_Q_ADAPTIVE_INDEX] = k_q;
    isv[BETA_RATE_LIMITER_ADAPTIVE_INDEX] = beta;
    isv[ALPHA_GRAD_RAW_VARIANCE_EMA_INDEX] = var_alpha;
    isv[GATE1_OPEN_STATE_INDEX] = gate1_state;
    isv[ALPHA_GRAD_RAW_INDEX] = raw;
    isv[ALPHA_GRAD_SMOOTHED_INDEX] = smoothed;
    *gate1_out = gate1;
    *gate2_out = gate2;
}

extern "C" __global__ void sp14_alpha_grad_gate(
    float* __restrict__ isv, float warmup_gate,
    float k_base_aux, float k_base_q, float var_ref_aux, float var_ref_q, float k_min, float target,
    float hysteresis, float beta_base, float beta_max, float var_ref_beta, float var_ema_alpha) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    const Sp14Params p = {k_base_aux, k_base_q, var_ref_aux, var_ref_q, k_min, target, hysteresis,
                          beta_base, beta_max, var_ref_beta, var_ema_alpha};
    float g1, g2;
    sp14_alpha_grad_gate_step(isv, warmup_gate, p, &g1, &g2);
}

// The whole stream in one launch: fold reset, stream inputs into the ISV, one
// step, snapshot of SP14_SNAPSHOT floats (the twin's SNAPSHOT order).
extern "C" __global__ void sp14_alpha_grad_gate_replay(
    float* __restrict__ isv, const float* __restrict__ aux, const float* __restrict__ q_dis,
    const float* __restrict__ var_q, const float* __restrict__ var_aux, int has_var_aux,
    const float* __restrict__ warmup, const int* __restrict__ boundary,
    const int* __restrict__ reset_idx, const float* __restrict__ reset_val, int n_reset, int t_steps,
    float k_base_aux, float k_base_q, float var_ref_aux, float var_ref_q, float k_min, float target,
    float hysteresis, float beta_base, float beta_max, float var_ref_beta, float var_ema_alpha,
    float* __restrict__ snap) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    const Sp14Params p = {k_base_aux, k_base_q, var_ref_aux, var_ref_q, k_min, target, hysteresis,
                          beta_base, beta_max, var_ref_beta, var_ema_alpha};
    for (int t = 0; t < t_steps; ++t) {
        if (boundary[t]) {
            for (int k = 0; k < n_reset; ++k) isv[reset_idx[k]] = reset_val[k];
        }
        isv[AUX_DIR_ACC_SHORT_EMA_INDEX] = aux[t];
        isv[Q_DISAGREEMENT_SHORT_EMA_INDEX] = q_dis[t];
        isv[Q_DISAGREEMENT_VARIANCE_EMA_INDEX] = var_q[t];
        if (has_var_aux) isv[AUX_DIR_ACC_VARIANCE_EMA_INDEX] = var_aux[t];
        float g1, g2;
        sp14_alpha_grad_gate_step(isv, warmup[t], p, &g1, &g2);
        float* row = snap + (size_t)t * SP14_SNAPSHOT;
        row[0] = isv[AUX_DIR_ACC_SHORT_EMA_INDEX];
        row[1] = isv[Q_DISAGREEMENT_SHORT_EMA_INDEX];
        row[2] = isv[AUX_DIR_ACC_VARIANCE_EMA_INDEX];
        row[3] = isv[Q_DISAGREEMENT_VARIANCE_EMA_INDEX];
        row[4] = warmup[t];
        row[5] = isv[K_AUX_ADAPTIVE_INDEX];
        row[6] = isv[K_Q_ADAPTIVE_INDEX];
        row[7] = isv[BETA_RATE_LIMITER_ADAPTIVE_INDEX];
        row[8] = isv[ALPHA_GRAD_RAW_VARIANCE_EMA_INDEX];
        row[9] = isv[GATE1_OPEN_STATE_INDEX];
        row[10] = g1;
        row[11] = g2;
        row[12] = isv[ALPHA_GRAD_RAW_INDEX];
        row[13] = isv[ALPHA_GRAD_SMOOTHED_INDEX];
    }
}
