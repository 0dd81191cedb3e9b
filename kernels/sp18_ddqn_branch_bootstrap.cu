// sp18_ddqn_branch_bootstrap — the SP18 B-leg per-branch double-DQN bootstrap (B-DD2, B-DD3, T8).
//
// q_next[b] = sum over the branches dir [0, 4), mag [4, 7), ord [7, 10),
// urg [10, 13) of Q_target[b, argmax_{a in branch} Q_online[b, a]]: each
// branch's argmax on its own factored Q table (ties: lowest index, a strict >
// scan), the selected target values summed in branch order.
// Launch: one thread per sample, any grid. Twin: ddqn_branch_bootstrap.
#if !defined(SP18_N_ACTIONS) || !defined(SP18_DIR_END)
#error "compile with the SP18 defines: regime_dash.modules.kernel_defines('sp18_ddqn_branch_bootstrap.cu')"
#endif

__device__ __forceinline__ int sp18_branch_argmax(const float* q, int start, int end) {
    int best = start;
    for (int a = start + 1; a < end; ++a) {
        if (q[a] > q[best]) best = a;
    }
    return best;
}

extern "C" __global__ void sp18_ddqn_branch_bootstrap(
    const float* __restrict__ q_online, const float* __restrict__ q_target, int batch,
    float* __restrict__ q_next) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= batch) return;
    const float* on = q_online + (size_t)b * SP18_N_ACTIONS;
    const float* tg = q_target + (size_t)b * SP18_N_ACTIONS;
    float total = 0.0f;
    total = total + tg[sp18_branch_argmax(on, 0, SP18_DIR_END)];
    total = total + tg[sp18_branch_argmax(on, SP18_DIR_END, SP18_MAG_END)];
    total = total + tg[sp18_branch_argmax(on, SP18_MAG_END, SP18_ORD_END)];
    total = total + tg[sp18_branch_argmax(on, SP18_ORD_END, SP18_N_ACTIONS)];
    q_next[b] = total;
}
