// sp18_td_lambda — truncated TD(lambda) returns with q_next as an input (SP18 B-leg).
//
// Samples are env-major [n_envs, t_len]. For sample t the trace ends at the
// first done in [t, t + max_trace) or at the rollout's end:
//   G = r_end + gamma (1 - d_end) q_next_end,
//   G = r_k + gamma (1 - d_k) ((1 - lambda) q_next_k + lambda G),  k = end-1 .. t.
// q_next_k is the bootstrap value after step k: the rewards themselves in the
// defect the design audits (q_next = rewards), the DDQN target bootstrap in
// the fix. out_dones is the done flag at the trace's end. The trainer's
// td_lambda_kernel is not given; this forward view is a model (twin: td_lambda).
// Launch: one thread per sample, any grid.
extern "C" __global__ void sp18_td_lambda(
    const float* __restrict__ rewards, const float* __restrict__ dones, const float* __restrict__ q_next,
    int n_envs, int t_len, float gamma, float lambda, int max_trace,
    float* __restrict__ out_rewards, float* __restrict__ out_dones) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_envs * t_len) return;
    const int e = i / t_len;
    const int t = i - e * t_len;
    const float* r = rewards + (size_t)e * t_len;
    const float* d = dones + (size_t)e * t_len;
    const float* q = q_next + (size_t)e * t_len;
    int end = min(t + max_trace, t_len) - 1;
    for (int k = t; k <= end; ++k) {
        if (d[k] > 0.5f) {
            end = k;
            break;
        }
    }
    float g = r[end] + gamma * (1.0f - d[end]) * q[end];
    for (int k = end - 1; k >= t; --k) {
        g = r[k] + gamma * (1.0f - d[k]) * ((1.0f - lambda) * q[k] + lambda * g);
    }
    out_rewards[i] = g;
    out_dones[i] = d[end];
}
