"""Kernels compiled by the frontend tests (kept in a file so that their source can be read)."""
import tilejit.language as tl
from tilejit.runtime.jit import jit


@jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


@jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(in_ptr + row * in_stride + cols, mask=cols < n_cols, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_stride + cols, num / den, mask=cols < n_cols)


@jit
def layer_norm_kernel(x_ptr, y_ptr, w_ptr, b_ptr, stride, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_ptr += row * stride
    y_ptr += row * stride
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        a = tl.load(x_ptr + cols, mask=cols < N, other=0.).to(tl.float32)
        acc += a
    mean = tl.sum(acc, axis=0) / N
    var_acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        a = tl.load(x_ptr + cols, mask=cols < N, other=0.).to(tl.float32)
        d = tl.where(cols < N, a - mean, 0.)
        var_acc += d * d
    rstd = 1 / tl.sqrt(tl.sum(var_acc, axis=0) / N + eps)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < N
        w = tl.load(w_ptr + cols, mask=mask)
        b = tl.load(b_ptr + cols, mask=mask)
        a = tl.load(x_ptr + cols, mask=mask, other=0.).to(tl.float32)
        tl.store(y_ptr + cols, (a - mean) * rstd * w + b, mask=mask)


@jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                  stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, K, BLOCK_K, num_stages=3):
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < K - k, other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(tl.float16)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, c, mask=mask)


@jit
def attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, seq_len, sm_scale, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr, HEAD: tl.constexpr):
    start_m = tl.program_id(0)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD)
    q = tl.load(q_ptr + offs_m[:, None] * HEAD + offs_d[None, :])
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD], dtype=tl.float32)
    for start_n in range(0, seq_len, BLOCK_N):
        k = tl.load(k_ptr + (start_n + offs_n)[None, :] * HEAD + offs_d[:, None])
        qk = tl.dot(q, k) * sm_scale
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp(qk - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + (start_n + offs_n)[:, None] * HEAD + offs_d[None, :])
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(o_ptr + offs_m[:, None] * HEAD + offs_d[None, :], acc.to(tl.float16))


@jit
def _add_combine(a, b):
    return a + b


@jit
def reduce_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    total = tl.reduce(x, 0, _add_combine)
    idx = tl.argmax(x, axis=0)
    tl.store(out_ptr, total)
    tl.store(out_ptr + 1, idx.to(tl.float32))


@jit
def _scale(x, factor):
    return x * factor, x + factor


@jit
def call_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    a, b = _scale(x, 2.0)
    tl.store(x_ptr + offs, a + b)


@jit
def control_kernel(x_ptr, n, flag, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    if flag > 0:
        y = x + 1.0
    else:
        y = x * 2.0
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(0, n):
        acc += y
    j = 0
    while j < n:
        j += 2
    tl.store(x_ptr + offs, acc + j)


@jit
def static_kernel(x_ptr, BLOCK: tl.constexpr, MODE: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    for i in tl.static_range(3):
        x = x + i
    if MODE == 1:
        x = x * 4.0
    else:
        x = x - 4.0
    tl.store(x_ptr + offs, x)


@jit
def promote_kernel(a_ptr, b_ptr, h_ptr, u_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs)          # int8
    b = tl.load(b_ptr + offs)          # int32
    h = tl.load(h_ptr + offs)          # fp16
    u = tl.load(u_ptr + offs)          # uint32
    s = a + b
    hh = h * 2.0
    lt = u < 7
    q = b // 3
    r = b % 5
    sh = u >> 1
    tl.store(out_ptr + offs, s + q + r + lt.to(tl.int32) + sh.to(tl.int32) + hh.to(tl.int32))


@jit
def block_ptr_kernel(a_ptr, M, N, stride_m, BLOCK: tl.constexpr):
    p = tl.make_block_ptr(a_ptr, (M, N), (stride_m, 1), (0, 0), (BLOCK, BLOCK), (1, 0))
    x = tl.load(p, boundary_check=(0, 1), padding_option="zero")
    p = tl.advance(p, (BLOCK, 0))
    tl.store(p, x, boundary_check=(0,))


@jit
def _early_return(x, flag):
    if flag > 0:
        return x + 1
    return x - 1


@jit
def early_return_kernel(p, flag):
    v = tl.load(p)
    tl.store(p, _early_return(v, flag))


@jit
def atomics_kernel(p, q, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_add(p + offs, 1.0)
    tl.atomic_max(q + offs, 3)
    tl.atomic_cas(q, 0, 1)
