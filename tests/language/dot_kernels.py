"""Dot kernels shared by the language tests (every backend) and the GPU code-generation tests."""
import tilejit
import tilejit.language as tl


@tilejit.jit
def f16_accumulator_matmul(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """acc = tl.dot(a, b, acc, out_dtype=tl.float16) carried through a K loop."""
    m, n, k = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float16)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + m[:, None] * K + (k0 + k)[None, :])
        b = tl.load(b_ptr + (k0 + k)[:, None] * BN + n[None, :])
        acc = tl.dot(a, b, acc, out_dtype=tl.float16)
    tl.store(c_ptr + m[:, None] * BN + n[None, :], acc)


@tilejit.jit
def multi_batch_dot(a_ptr, b_ptr, c_ptr, out_ptr, BATCH: tl.constexpr, M: tl.constexpr, N: tl.constexpr,
                    K: tl.constexpr, TRANS_A: tl.constexpr, TRANS_B: tl.constexpr, USE_ACC: tl.constexpr):
    """[*BATCH, M, K] @ [*BATCH, K, N] (operands stored transposed where TRANS_*, then tl.trans'ed back)."""
    nb: tl.constexpr = len(BATCH)
    size: tl.constexpr = BATCH[0] * BATCH[1] * (BATCH[2] if nb == 3 else 1)
    a = tl.load(a_ptr + tl.arange(0, size * M * K))
    b = tl.load(b_ptr + tl.arange(0, size * K * N))
    if TRANS_A:
        a = tl.trans(a.reshape(list(BATCH) + [K, M]))
    else:
        a = a.reshape(list(BATCH) + [M, K])
    if TRANS_B:
        b = tl.trans(b.reshape(list(BATCH) + [N, K]))
    else:
        b = b.reshape(list(BATCH) + [K, N])
    if USE_ACC:
        c = tl.dot(a, b, tl.load(c_ptr + tl.arange(0, size * M * N)).reshape(list(BATCH) + [M, N]))
    else:
        c = tl.dot(a, b)
    tl.static_assert(len(c.shape) == nb + 2)
    tl.store(out_ptr + tl.arange(0, size * M * N), c.reshape(size * M * N))


@tilejit.jit
def _k_and_v_chunk(k_ptr, v_ptr, i, T, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr):
    """Chunk i of a [T, K] key and a [T, V] value sequence: k as [K, BT] (transposed), v as [BT, V],
    rows past T read as zeros."""
    o_t = i * BT + tl.arange(0, BT)
    m_t = o_t < T
    b_k = tl.load(k_ptr + tl.arange(0, K)[:, None] + o_t[None, :] * K, mask=m_t[None, :], other=0.0)
    b_v = tl.load(v_ptr + o_t[:, None] * V + tl.arange(0, V)[None, :], mask=m_t[:, None], other=0.0)
    return b_k, b_v


@tilejit.jit
def gated_state_kernel(k_ptr, v_ptr, g_ptr, out_ptr, T, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr):
    """fla's chunked state: h = h * decay + k^T (v * exp(g)), the gated v tile computed before its dot."""
    o_k = tl.arange(0, K)
    o_v = tl.arange(0, V)
    h = tl.zeros([K, V], dtype=tl.float32)
    for i in range(tl.cdiv(T, BT)):
        o_t = i * BT + tl.arange(0, BT)
        b_k, b_v = _k_and_v_chunk(k_ptr, v_ptr, i, T, K, V, BT)
        b_g = tl.load(g_ptr + o_t, mask=o_t < T, other=0.0)
        h = h * 0.5
        b_v = (b_v * tl.exp(b_g)[:, None]).to(b_v.dtype)
        h = tl.dot(b_k, b_v, h)
    tl.store(out_ptr + o_k[:, None] * V + o_v[None, :], h)


@tilejit.jit
def two_dots_kernel(a_ptr, b_ptr, s_ptr, u_ptr, N, BM: tl.constexpr, BN: tl.constexpr):
    """s = a b^T and u = a^T b over column blocks: each loaded tile feeds one dot as loaded, one transposed."""
    o_m = tl.arange(0, BM)
    s = tl.zeros([BM, BM], dtype=tl.float32)
    u = tl.zeros([BN, BN], dtype=tl.float32)
    for j in range(tl.cdiv(N, BN)):
        o_n = j * BN + tl.arange(0, BN)
        m = o_n[None, :] < N
        a = tl.load(a_ptr + o_m[:, None] * N + o_n[None, :], mask=m, other=0.0)   # [BM, BN]
        b = tl.load(b_ptr + o_m[:, None] * N + o_n[None, :], mask=m, other=0.0)
        s = tl.dot(a, tl.trans(b), s)      # a as loaded, b transposed
        u = tl.dot(tl.trans(a), b, u)      # a transposed, b as loaded
    tl.store(s_ptr + o_m[:, None] * BM + o_m[None, :], s)
    o_n = tl.arange(0, BN)
    tl.store(u_ptr + o_n[:, None] * BN + o_n[None, :], u)


@tilejit.jit
def chunk_dq_dk_kernel(q_ptr, k_ptr, v_ptr, do_ptr, h_ptr, dh_ptr, dq_ptr, dk_ptr, T, V: tl.constexpr,
                       BT: tl.constexpr, K: tl.constexpr, BV: tl.constexpr):
    """The shape of fla's chunked backward for dq and dk of one chunk of BT rows: over blocks of V,
    ds = do v^T, dq = do h^T, dk = v dh^T (v and do feed two dots each, v once transposed); then the
    causal part of ds, rounded to the inputs' type, adds ds k to dq and ds^T q to dk after the loop."""
    o_t = tl.arange(0, BT)
    m_t = o_t < T
    o_k = tl.arange(0, K)
    ds = tl.zeros([BT, BT], dtype=tl.float32)
    dq = tl.zeros([BT, K], dtype=tl.float32)
    dk = tl.zeros([BT, K], dtype=tl.float32)
    for i_v in range(tl.cdiv(V, BV)):
        o_v = i_v * BV + tl.arange(0, BV)
        m_tv = m_t[:, None] & (o_v < V)[None, :]
        b_v = tl.load(v_ptr + o_t[:, None] * V + o_v[None, :], mask=m_tv, other=0.0)      # [BT, BV]
        b_do = tl.load(do_ptr + o_t[:, None] * V + o_v[None, :], mask=m_tv, other=0.0)
        b_h = tl.load(h_ptr + o_v[:, None] + o_k[None, :] * V, mask=(o_v < V)[:, None], other=0.0)   # [BV, K]
        b_dh = tl.load(dh_ptr + o_v[:, None] + o_k[None, :] * V, mask=(o_v < V)[:, None], other=0.0)
        ds = tl.dot(b_do, tl.trans(b_v), ds)
        dq = tl.dot(b_do, b_h, dq)
        dk = tl.dot(b_v, b_dh, dk)
    b_q = tl.load(q_ptr + o_t[:, None] * K + o_k[None, :], mask=m_t[:, None], other=0.0)
    b_k = tl.load(k_ptr + o_t[:, None] * K + o_k[None, :], mask=m_t[:, None], other=0.0)
    ds = tl.where(o_t[:, None] >= o_t[None, :], ds, 0.0).to(b_k.dtype)
    dq = tl.dot(ds, b_k, dq)
    dk = tl.dot(tl.trans(ds), b_q, dk)
    tl.store(dq_ptr + o_t[:, None] * K + o_k[None, :], dq, mask=m_t[:, None])
    tl.store(dk_ptr + o_t[:, None] * K + o_k[None, :], dk, mask=m_t[:, None])


@tilejit.jit
def key_gated_state_kernel(k_ptr, v_ptr, gk_ptr, out_ptr, T, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr):
    """gla's chunked state with a gate per key: h = h exp(gk_last) + (k exp(gk_last - gk))^T v, the
    fp32 gate tile loaded [K, BT] beside the 16-bit k tile it scales."""
    o_k = tl.arange(0, K)
    o_v = tl.arange(0, V)
    h = tl.zeros([K, V], dtype=tl.float32)
    for i in range(tl.cdiv(T, BT)):
        o_t = i * BT + tl.arange(0, BT)
        m_t = o_t < T
        b_k = tl.load(k_ptr + o_k[:, None] + o_t[None, :] * K, mask=m_t[None, :], other=0.0)     # [K, BT]
        b_gk = tl.load(gk_ptr + o_k[:, None] + o_t[None, :] * K, mask=m_t[None, :], other=0.0)   # [K, BT]
        b_v = tl.load(v_ptr + o_t[:, None] * V + o_v[None, :], mask=m_t[:, None], other=0.0)     # [BT, V]
        b_gk_last = tl.load(gk_ptr + (tl.minimum((i + 1) * BT, T) - 1) * K + o_k)
        h = h * tl.exp(b_gk_last)[:, None]
        b_k = (b_k * tl.exp(b_gk_last[:, None] - b_gk)).to(b_k.dtype)
        h = tl.dot(b_k, b_v, h)
    tl.store(out_ptr + o_k[:, None] * V + o_v[None, :], h)


@tilejit.jit
def key_gated_state_kernel_in_place(k_ptr, v_ptr, gk_ptr, out_ptr, T, K: tl.constexpr, V: tl.constexpr,
                                    BT: tl.constexpr, ATOMIC: tl.constexpr = False):
    """key_gated_state_kernel that also writes the gate row it will read next iteration, in place:
    half of this iteration's row, stored (or added with `tl.atomic_add` when ATOMIC). The gate vector
    of iteration i + 1 depends on iteration i's write."""
    o_k = tl.arange(0, K)
    o_v = tl.arange(0, V)
    h = tl.zeros([K, V], dtype=tl.float32)
    for i in range(tl.cdiv(T, BT)):
        b_k, b_v = _k_and_v_chunk(k_ptr, v_ptr, i, T, K, V, BT)
        last = tl.minimum((i + 1) * BT, T) - 1
        b_gk_last = tl.load(gk_ptr + last * K + o_k)
        next_last = tl.minimum((i + 2) * BT, T) - 1
        if ATOMIC:
            tl.atomic_add(gk_ptr + next_last * K + o_k, b_gk_last * 0.5, mask=(o_k < K) & (next_last > last))
        else:
            tl.store(gk_ptr + next_last * K + o_k, b_gk_last * 0.5, mask=next_last > last)
        h = h * tl.exp(b_gk_last)[:, None]
        h = tl.dot(b_k, b_v, h)
    tl.store(out_ptr + o_k[:, None] * V + o_v[None, :], h)


@tilejit.jit
def delta_state_kernel(k_ptr, v_ptr, w_ptr, v_new_ptr, out_ptr, T, K: tl.constexpr, V: tl.constexpr,
                       BT: tl.constexpr):
    """The delta rule's chunked state: v_new = v - w h is stored and multiplied into h += k^T v_new, so
    the v tile reaches a dot through a subtraction while the store reads it too."""
    o_k = tl.arange(0, K)
    o_v = tl.arange(0, V)
    h = tl.zeros([K, V], dtype=tl.float32)
    for i in range(tl.cdiv(T, BT)):
        o_t = i * BT + tl.arange(0, BT)
        m_t = o_t < T
        b_w = tl.load(w_ptr + o_t[:, None] * K + o_k[None, :], mask=m_t[:, None], other=0.0)     # [BT, K]
        b_v = tl.load(v_ptr + o_t[:, None] * V + o_v[None, :], mask=m_t[:, None], other=0.0)     # [BT, V]
        b_v = b_v - tl.dot(b_w, h.to(b_w.dtype))
        tl.store(v_new_ptr + o_t[:, None] * V + o_v[None, :], b_v, mask=m_t[:, None])
        b_k = tl.load(k_ptr + o_k[:, None] + o_t[None, :] * K, mask=m_t[None, :], other=0.0)     # [K, BT]
        h = tl.dot(b_k, b_v.to(b_k.dtype), h)
    tl.store(out_ptr + o_k[:, None] * V + o_v[None, :], h)


@tilejit.jit
def scaled_gram_kernel(k_ptr, beta_ptr, a_ptr, T, K: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr):
    """A = tril(beta[:, None] * k k^T, -1) over K blocks for one chunk of BT rows (fla's
    `chunk_scaled_dot_kkt`): the loaded tile is both operands of one dot, once transposed."""
    o_t = tl.arange(0, BT)
    m_t = o_t < T
    acc = tl.zeros([BT, BT], dtype=tl.float32)
    for i_k in range(tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        b_k = tl.load(k_ptr + o_t[:, None] * K + o_k[None, :], mask=m_t[:, None] & (o_k < K)[None, :], other=0.0)
        acc = tl.dot(b_k, tl.trans(b_k), acc)
    acc *= tl.load(beta_ptr + o_t, mask=m_t, other=0.0)[:, None]
    acc = tl.where((o_t[:, None] > o_t[None, :]) & m_t[:, None] & m_t[None, :], acc, 0)
    tl.store(a_ptr + o_t[:, None] * BT + o_t[None, :], acc, mask=m_t[:, None])


@tilejit.jit
def gated_tf32_dot_kernel(q_ptr, k_ptr, g_ptr, a_ptr, K, BC: tl.constexpr, BK: tl.constexpr):
    """A = sum over K blocks of (q * exp2(g - gn)) (k * exp2(gn - g))^T with gn the gates' first row
    (gla's `intra_sub_inter`): an fp32 (tf32) dot whose operands are computed from 16-bit and fp32
    tiles and a vector, k and its gates loaded transposed."""
    o_i = tl.arange(0, BC)
    acc = tl.zeros([BC, BC], dtype=tl.float32)
    for i_k in range(tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_k = o_k < K
        b_gn = tl.load(g_ptr + o_k, mask=m_k, other=0)
        b_q = tl.load(q_ptr + o_i[:, None] * K + o_k[None, :], mask=m_k[None, :], other=0.0)
        b_g = tl.load(g_ptr + o_i[:, None] * K + o_k[None, :], mask=m_k[None, :], other=0.0)
        b_qg = b_q * tl.exp2(b_g - b_gn[None, :])
        b_k = tl.load(k_ptr + o_k[:, None] + o_i[None, :] * K, mask=m_k[:, None], other=0.0)
        b_gk = tl.load(g_ptr + o_k[:, None] + o_i[None, :] * K, mask=m_k[:, None], other=0.0)
        b_kg = b_k * tl.exp2(b_gn[:, None] - b_gk)
        acc = tl.dot(b_qg, b_kg, acc)
    tl.store(a_ptr + o_i[:, None] * BC + o_i[None, :], acc)


@tilejit.jit
def state_gradient_kernel(do_ptr, h_ptr, dh_ptr, dq_ptr, dg_ptr, T, V, K: tl.constexpr, BT: tl.constexpr,
                          BV: tl.constexpr):
    """dq = do h^T and dg = (sum over v of h * dh) * dq[0] over V blocks (gla's backward `inter`):
    fp32 state tiles stored [K, V] and read [BV, K] (contiguous along dim 0), summed along V in the
    loop and cast to 16 bits for the dot; the carried sum is used after the loop next to the dot's
    result, columns past V masked."""
    o_t = tl.arange(0, BT)
    o_k = tl.arange(0, K)
    m_t = o_t < T
    dq = tl.zeros([BT, K], dtype=tl.float32)
    dgk = tl.zeros([K], dtype=tl.float32)
    for i_v in range(tl.cdiv(V, BV)):
        o_v = i_v * BV + tl.arange(0, BV)
        m_v = o_v < V
        b_do = tl.load(do_ptr + o_t[:, None] * V + o_v[None, :], mask=m_t[:, None] & m_v[None, :], other=0.0)
        b_h = tl.load(h_ptr + o_v[:, None] + o_k[None, :] * V, mask=m_v[:, None], other=0.0)
        b_dh = tl.load(dh_ptr + o_v[:, None] + o_k[None, :] * V, mask=m_v[:, None], other=0.0)
        dgk += tl.sum(b_h * b_dh, axis=0)
        dq = tl.dot(b_do, b_h.to(b_do.dtype), dq)
    tl.store(dq_ptr + o_t[:, None] * K + o_k[None, :], dq, mask=m_t[:, None])
    tl.store(dg_ptr + o_t[:, None] * K + o_k[None, :], dq * dgk[None, :], mask=m_t[:, None])


@tilejit.jit
def transposed_product_kernel(a_ptr, b_ptr, q_ptr, r_ptr, o_ptr, u_ptr, M: tl.constexpr, N: tl.constexpr):
    """p = (a b) in the inputs' type, then o = p^T q and u = r p^T: a dot's result transposed into
    operand A of one dot and operand B of another (attention's backward `dot(trans(p), do)`, fla's
    `dot(trans(ds), q)`)."""
    m, n = tl.arange(0, M), tl.arange(0, N)
    a = tl.load(a_ptr + m[:, None] * M + m[None, :])
    b = tl.load(b_ptr + m[:, None] * M + m[None, :])
    p = tl.dot(a, b).to(a.dtype)
    q = tl.load(q_ptr + m[:, None] * N + n[None, :])    # [M, N]
    r = tl.load(r_ptr + n[:, None] * M + m[None, :])    # [N, M]
    tl.store(o_ptr + m[:, None] * N + n[None, :], tl.dot(tl.trans(p), q))
    tl.store(u_ptr + n[:, None] * M + m[None, :], tl.dot(r, tl.trans(p)))


@tilejit.jit
def paired_projection_kernel(d_ptr, w_ptr, out_ptr, rows, K: tl.constexpr, N: tl.constexpr, BM: tl.constexpr,
                             BN: tl.constexpr, BK: tl.constexpr):
    """out = d[:, :K] @ w[:K] + d[:, K:] @ w[K:], two accumulators over one K loop whose dots share
    only indices, summed after it (Liger's MoE backward dx: the gate and up halves); rows masked."""
    m, n, k = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    row_mask = m < rows
    acc_gate = tl.zeros((BM, BN), dtype=tl.float32)
    acc_up = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in tl.range(0, K, BK):
        kk = k0 + k
        d_gate = tl.load(d_ptr + m[:, None] * (2 * K) + kk[None, :], mask=row_mask[:, None], other=0.0)
        w_gate = tl.load(w_ptr + kk[:, None] * N + n[None, :])
        acc_gate = tl.dot(d_gate, w_gate, acc=acc_gate)
        d_up = tl.load(d_ptr + m[:, None] * (2 * K) + (K + kk)[None, :], mask=row_mask[:, None], other=0.0)
        w_up = tl.load(w_ptr + (K + kk)[:, None] * N + n[None, :])
        acc_up = tl.dot(d_up, w_up, acc=acc_up)
    acc = acc_gate + acc_up
    tl.store(out_ptr + m[:, None] * N + n[None, :], acc, mask=row_mask[:, None])


@tilejit.jit
def gathered_rows_matmul(a_ptr, x_ptr, idx_ptr, out_ptr, T, H: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                         BK: tl.constexpr, STAGES: tl.constexpr, BY_BLOCK: tl.constexpr = False):
    """out = a @ x[idx] over a loop of T rows: B is a gather whose row indices are loaded in the
    same iteration (Liger's MoE weight gradients read their tokens so); the tail masked. BY_BLOCK:
    one loaded index a block of BK rows (a paged KV cache's block table), rows idx[j] * BK + k."""
    m, n, k = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in tl.range(0, T, BK, num_stages=STAGES):
        kk = k0 + k
        k_mask = kk < T
        a = tl.load(a_ptr + m[:, None] * T + kk[None, :], mask=k_mask[None, :], other=0.0)
        if BY_BLOCK:
            rows = tl.load(idx_ptr + k0 // BK).to(tl.int64) * BK + k
        else:
            rows = tl.load(idx_ptr + kk, mask=k_mask, other=0).to(tl.int64)
        x = tl.load(x_ptr + rows[:, None] * H + n[None, :], mask=k_mask[:, None], other=0.0)
        acc = tl.dot(a, x, acc)
    tl.store(out_ptr + m[:, None] * BN + n[None, :], acc)


@tilejit.jit
def add_accumulated_matmul(a_ptr, b_ptr, d_ptr, out_ptr, M, K: tl.constexpr, N: tl.constexpr, BM: tl.constexpr,
                           BN: tl.constexpr, BK: tl.constexpr, DOT_FIRST: tl.constexpr, ALSO_READ: tl.constexpr):
    """out = d + a @ b, accumulated the way many kernels write it: `acc += tl.dot(a, b)` (Liger's
    neighborhood attention), or `tl.dot(a, b) + acc` (DOT_FIRST); rows masked. ALSO_READ: each
    partial product is also summed into a second accumulator, so the dot has two uses."""
    m, n, k = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    row_mask = m < M
    acc = tl.load(d_ptr + m[:, None] * N + n[None, :], mask=row_mask[:, None], other=0)
    seen = tl.zeros((BM, BN), dtype=acc.dtype)
    for k0 in tl.range(0, K, BK):
        kk = k0 + k
        a = tl.load(a_ptr + m[:, None] * K + kk[None, :], mask=row_mask[:, None], other=0)
        b = tl.load(b_ptr + kk[:, None] * N + n[None, :])
        partial = tl.dot(a, b)
        if DOT_FIRST:
            acc = partial + acc
        else:
            acc += partial
        if ALSO_READ:
            seen += partial
    if ALSO_READ:
        acc = acc + seen
    tl.store(out_ptr + m[:, None] * N + n[None, :], acc, mask=row_mask[:, None])
