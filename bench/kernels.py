"""Benchmark kernels, written once for Triton and loaded unchanged by tilejit.

This file imports `triton` and `triton.language as tl` like any Triton program. `bench/common.py`
loads it twice: once as is (real Triton), once with `triton` aliased to `tilejit` — which is the
compatibility promise: the same source runs on both.
"""
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_stride + cols, y, mask=mask)


@triton.jit
def layer_norm_kernel(x_ptr, y_ptr, w_ptr, b_ptr, stride, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    x_ptr += row * stride
    y_ptr += row * stride
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        acc += tl.load(x_ptr + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / n_cols
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_ptr + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        d = tl.where(cols < n_cols, x - mean, 0.0)
        acc += d * d
    rstd = 1 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        w = tl.load(w_ptr + cols, mask=mask)
        b = tl.load(b_ptr + cols, mask=mask)
        x = tl.load(x_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_ptr + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pids_in_group = GROUP_M * num_pid_n
    group = pid // pids_in_group
    first_m = group * GROUP_M
    group_size = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % pids_in_group) % group_size)
    pid_n = (pid % pids_in_group) // group_size
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(c_ptr.dtype.element_ty)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, c, mask=mask)


@triton.jit
def attention_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, seq_len, sm_scale,
                         stride_h, stride_s,
                         HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    head = tl.program_id(1)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    base = head * stride_h
    q = tl.load(q_ptr + base + offs_m[:, None] * stride_s + offs_d[None, :])
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504  # log2(e): exp(x) = exp2(x * log2(e))
    for start_n in range(0, seq_len, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(k_ptr + base + cols[None, :] * stride_s + offs_d[:, None])
        qk = tl.dot(q, k) * qk_scale
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(v_ptr + base + cols[:, None] * stride_s + offs_d[None, :])
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(o_ptr + base + offs_m[:, None] * stride_s + offs_d[None, :], acc.to(o_ptr.dtype.element_ty))


@triton.jit
def attention_fwd_masked_kernel(q_ptr, k_ptr, v_ptr, o_ptr, seq_len, sm_scale,
                                stride_h, stride_s,
                                HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # The common way: any sequence length (masked loads on the sequence dim, -inf scores past it),
    # K loaded row-major and multiplied by tl.trans(k).
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


@triton.jit
def tiny_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr) + 1)


@triton.jit
def gelu_masked_kernel(x_ptr, gate_ptr, out_ptr, n_elements, limit, BLOCK_SIZE: tl.constexpr):
    """An elementwise kernel with two masks, a select and a libdevice call (erf), like the fused
    activations of LLM training libraries."""
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    gate = tl.load(gate_ptr + offsets, mask=mask & (offsets < limit), other=1.0).to(tl.float32)
    gelu = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    y = tl.where(x > 0, gelu * gate, gelu)
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def cumsum_row_kernel(x_ptr, y_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * stride + cols, tl.cumsum(x, axis=0), mask=mask)


@triton.jit
def _linear_recurrence(a1, b1, a2, b2):
    return a1 * a2, b1 * a2 + b2


@triton.jit
def linear_recurrence_row_kernel(a_ptr, b_ptr, y_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    """y_i = a_i * y_(i-1) + b_i along each row: `tl.associative_scan` with a non-commutative
    combine of two values (as in Mamba-style scans)."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    a = tl.load(a_ptr + row * stride + cols, mask=mask, other=1.0)
    b = tl.load(b_ptr + row * stride + cols, mask=mask, other=0.0)
    _, y = tl.associative_scan((a, b), 0, _linear_recurrence)
    tl.store(y_ptr + row * stride + cols, y, mask=mask)


@triton.jit
def sort_row_kernel(x_ptr, y_ptr, stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * stride + cols)
    tl.store(y_ptr + row * stride + cols, tl.sort(x))


@triton.jit
def softplus_kernel(x_ptr, y_ptr, n_elements, beta, threshold, BLOCK_SIZE: tl.constexpr):
    """torch.nn.functional.softplus as activation libraries write it (attorch's act kernels)."""
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    bx = beta * x
    y = tl.where(bx > threshold, x, tl.log(1 + tl.exp(bx)) / beta)
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def batch_norm_fwd_kernel(x_ptr, w_ptr, b_ptr, y_ptr, batch, n_channels, eps, BLOCK_B: tl.constexpr):
    """Training-mode batch norm forward over a [batch, channels] input, one program per channel
    (strided loads down a column), as attorch's batch_norm_forward_kernel for 2-D inputs."""
    c = tl.program_id(0)
    rows = tl.arange(0, BLOCK_B)
    mask = rows < batch
    x = tl.load(x_ptr + rows * n_channels + c, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, 0) / batch
    diff = tl.where(mask, x - mean, 0.0)
    var = tl.sum(diff * diff, 0) / batch
    y = diff * tl.rsqrt(var + eps) * tl.load(w_ptr + c) + tl.load(b_ptr + c)
    tl.store(y_ptr + rows * n_channels + c, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def batched_dot_kernel(a_ptr, b_ptr, c_ptr, BATCH: tl.constexpr, M: tl.constexpr, N: tl.constexpr,
                       K: tl.constexpr):
    """Each program multiplies BATCH independent M x K and K x N matrices with one 3-D `tl.dot` (the
    form of Triton's test_dot3d; batched attention scores and per-expert products are written so)."""
    first = tl.program_id(0) * BATCH
    bb = tl.arange(0, BATCH)[:, None, None] + first
    m = tl.arange(0, M)[None, :, None]
    n = tl.arange(0, N)[None, None, :]
    a = tl.load(a_ptr + bb * (M * K) + m * K + tl.arange(0, K)[None, None, :])
    b = tl.load(b_ptr + bb * (K * N) + tl.arange(0, K)[None, :, None] * N + n)
    tl.store(c_ptr + bb * (M * N) + m * N + n, tl.dot(a, b).to(c_ptr.dtype.element_ty))


@triton.jit
def matmul_fp64_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr):
    """C = A @ B in fp64 for row-major A (M x K), B (K x N) and C, each a multiple of its block."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float64)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rows[:, None] * K + (k + ks)[None, :])
        b = tl.load(b_ptr + (k + ks)[:, None] * N + cols[None, :])
        # Triton 3.6 asserts that the accumulator's type is out_dtype (default fp32) and refuses tf32
        acc = tl.dot(a, b, acc, input_precision="ieee", out_dtype=tl.float64)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc)
