"""Masked kernels as real code writes them: attention over a ragged sequence (K loaded row-major and
multiplied by `tl.trans(k)`, scores masked with `tl.where`), a matmul whose M, N, K are not multiples
of the tile, a row softmax over a ragged row. Run by `test_lang_masked_loads.py` on every backend and
cross-compiled for cuda:90 by `tests/gpu/test_masked_load_codegen.py` (cp.async zero-fill, wgmma,
vector loads)."""
import tilejit
import tilejit.language as tl


@tilejit.jit
def attention_fwd_masked(q_ptr, k_ptr, v_ptr, o_ptr, seq_len, sm_scale, stride_h, stride_s,
                         HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    head = tl.program_id(1)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    base = head * stride_h
    q = tl.load(q_ptr + base + offs_m[:, None] * stride_s + offs_d[None, :], mask=offs_m[:, None] < seq_len,
                other=0.0)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    for start_n in range(0, seq_len, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(k_ptr + base + cols[:, None] * stride_s + offs_d[None, :], mask=cols[:, None] < seq_len,
                    other=0.0)
        qk = tl.dot(q, tl.trans(k))
        qk = tl.where(cols[None, :] < seq_len, qk * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(v_ptr + base + cols[:, None] * stride_s + offs_d[None, :], mask=cols[:, None] < seq_len,
                    other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(o_ptr + base + offs_m[:, None] * stride_s + offs_d[None, :], acc.to(o_ptr.dtype.element_ty),
             mask=offs_m[:, None] < seq_len)


@tilejit.jit
def matmul_masked(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@tilejit.jit
def dot_transposed_masked_other(a_ptr, b_ptr, out_ptr, N, K, OTHER: tl.constexpr,
                                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """out = a @ trans(b) with b's rows past N read as `other` (a constant, or a tensor when OTHER is
    None): the whole BLOCK_M x BLOCK_N tile is stored, so `other` shows in the columns past N."""
    rm = tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :])
        b_ptrs = b_ptr + rn[:, None] * K + (k0 + rk)[None, :]
        if OTHER is None:
            b = tl.load(b_ptrs, mask=rn[:, None] < N, other=((rn[:, None] + rk[None, :]) % 4).to(tl.float16))
        else:
            b = tl.load(b_ptrs, mask=rn[:, None] < N, other=OTHER)
        acc = tl.dot(a, tl.trans(b), acc)
    tl.store(out_ptr + rm[:, None] * BLOCK_N + rn[None, :], acc)


@tilejit.jit
def softmax_masked(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_stride + cols, y, mask=mask)
