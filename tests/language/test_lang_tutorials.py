"""Triton-tutorial-style kernels, written as for Triton (only the imports differ), against NumPy."""
import numpy as np
import pytest

import tilejit as triton
import tilejit.language as tl
from tl_reference import philox4x32, uint32_to_uniform

RNG = np.random.default_rng(2024)


@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(output_ptr + offsets, x + y, mask=mask)


def test_vector_add(device):
    n = 1000
    x, y = RNG.random(n, dtype=np.float32), RNG.random(n, dtype=np.float32)
    out = device.zeros(n, np.float32)
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)  # noqa: E731
    add_kernel[grid](device.tensor(x), device.tensor(y), out, n, BLOCK_SIZE=256)
    np.testing.assert_array_equal(device.numpy(out), x + y)


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_rows, n_cols,
                   BLOCK_SIZE: tl.constexpr, num_stages: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step, num_stages=num_stages):
        row_start_ptr = input_ptr + row_idx * input_row_stride
        col_offsets = tl.arange(0, BLOCK_SIZE)
        input_ptrs = row_start_ptr + col_offsets
        mask = col_offsets < n_cols
        row = tl.load(input_ptrs, mask=mask, other=-float("inf"))
        row_minus_max = row - tl.max(row, axis=0)
        numerator = tl.exp(row_minus_max)
        denominator = tl.sum(numerator, axis=0)
        softmax_output = numerator / denominator
        output_row_start_ptr = output_ptr + row_idx * output_row_stride
        tl.store(output_row_start_ptr + col_offsets, softmax_output, mask=mask)


def test_fused_softmax(device):
    n_rows, n_cols = 23, 97
    x = RNG.standard_normal((n_rows, n_cols)).astype(np.float32)
    out = device.zeros((n_rows, n_cols), np.float32)
    softmax_kernel[(4, 1, 1)](out, device.tensor(x), n_cols, n_cols, n_rows, n_cols,
                              BLOCK_SIZE=triton.next_power_of_2(n_cols), num_stages=2)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(device.numpy(out), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


@triton.jit
def layer_norm_fwd(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    mean = 0
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        x_hat = (x - mean) * rstd
        y = x_hat * w + b
        tl.store(Y + cols, y, mask=mask)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_layer_norm_forward(device, dtype):
    M, N, eps = 8, 100, 1e-5
    x = RNG.standard_normal((M, N)).astype(dtype)
    w, b = RNG.random(N).astype(dtype), RNG.random(N).astype(dtype)
    y, mean, rstd = device.zeros((M, N), dtype), device.zeros(M, np.float32), device.zeros(M, np.float32)
    layer_norm_fwd[(M,)](device.tensor(x), y, device.tensor(w), device.tensor(b), mean, rstd, N, N, eps,
                         BLOCK_SIZE=32)
    x64 = x.astype(np.float64)
    mu, var = x64.mean(axis=1, keepdims=True), x64.var(axis=1, keepdims=True)
    expected = (x64 - mu) / np.sqrt(var + eps) * w + b
    tol = 1e-4 if dtype == "float32" else 1e-2
    np.testing.assert_allclose(device.numpy(y).astype(np.float64), expected, rtol=tol, atol=tol)
    np.testing.assert_allclose(device.numpy(mean), mu.ravel(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(device.numpy(rstd), 1 / np.sqrt(var.ravel() + eps), rtol=1e-4)


@triton.jit
def leaky_relu(x):
    return tl.where(x >= 0, x, 0.01 * x)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                  GROUP_SIZE_M: tl.constexpr, ACTIVATION: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    if ACTIVATION == "leaky_relu":
        accumulator = leaky_relu(accumulator)
    c = accumulator.to(tl.float16)
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


@pytest.mark.parametrize("activation", ["", "leaky_relu"])
def test_grouped_matmul(device, activation):
    M, N, K = 48, 40, 56
    a = RNG.standard_normal((M, K)).astype(np.float16)
    b = RNG.standard_normal((K, N)).astype(np.float16)
    c = device.zeros((M, N), np.float16)
    meta = dict(BLOCK_SIZE_M=16, BLOCK_SIZE_N=16, BLOCK_SIZE_K=16, GROUP_SIZE_M=2)
    grid = (triton.cdiv(M, 16) * triton.cdiv(N, 16),)
    matmul_kernel[grid](device.tensor(a), device.tensor(b), c, M, N, K, K, 1, N, 1, N, 1,
                        ACTIVATION=activation, **meta)
    expected = a.astype(np.float32) @ b.astype(np.float32)
    if activation:
        expected = np.where(expected >= 0, expected, 0.01 * expected)
    np.testing.assert_allclose(device.numpy(c).astype(np.float32), expected, rtol=1e-2, atol=2e-2)


@triton.jit
def seeded_dropout_kernel(x_ptr, output_ptr, n_elements, p, seed, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    random = tl.rand(seed, offsets)
    x_keep = random > p
    output = tl.where(x_keep, x / (1 - p), 0.0)
    tl.store(output_ptr + offsets, output, mask=mask)


def test_seeded_dropout(device):
    n, p, seed = 1000, 0.5, 123
    x = RNG.standard_normal(n).astype(np.float32) + 5  # never exactly zero
    out = device.zeros(n, np.float32)
    seeded_dropout_kernel[(triton.cdiv(n, 256),)](device.tensor(x), out, n, p, seed, BLOCK_SIZE=256)
    zero = np.zeros(n, np.uint64)
    keep = uint32_to_uniform(philox4x32([np.arange(n), zero, zero, zero], (seed, 0))[0]) > p
    np.testing.assert_allclose(device.numpy(out), np.where(keep, x / (1 - p), 0.0), rtol=1e-6)
    again = device.zeros(n, np.float32)
    seeded_dropout_kernel[(triton.cdiv(n, 256),)](device.tensor(x), again, n, p, seed, BLOCK_SIZE=256)
    np.testing.assert_array_equal(device.numpy(out), device.numpy(again))


@triton.jit
def attention_fwd_kernel(Q, K, V, Out, sm_scale, seq_len, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    off_h = tl.program_id(1)
    base = off_h * seq_len * HEAD_DIM
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_m[:, None] < seq_len, other=0.0)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504  # exp(x) == exp2(x * log2(e))
    for start_n in range(0, seq_len, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = tl.load(K + base + offs_n[None, :] * HEAD_DIM + offs_d[:, None], mask=offs_n[None, :] < seq_len, other=0.0)
        qk = tl.dot(q, k)
        qk = tl.where(offs_n[None, :] < seq_len, qk * qk_scale, -1.0e6)
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(V + base + offs_n[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_n[:, None] < seq_len, other=0.0)
        acc = tl.dot(p.to(tl.float16), v, acc)
        m_i = m_ij
    acc = acc / l_i[:, None]
    tl.store(Out + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], acc.to(tl.float16),
             mask=offs_m[:, None] < seq_len)


def test_flash_attention_forward(device):
    heads, seq_len, head_dim = 2, 40, 16
    q, k, v = (RNG.standard_normal((heads, seq_len, head_dim)).astype(np.float16) for _ in range(3))
    out = device.zeros((heads, seq_len, head_dim), np.float16)
    sm_scale = 1.0 / np.sqrt(head_dim)
    attention_fwd_kernel[(triton.cdiv(seq_len, 16), heads)](device.tensor(q), device.tensor(k), device.tensor(v), out,
                                                            sm_scale, seq_len, HEAD_DIM=head_dim, BLOCK_M=16, BLOCK_N=16)
    s = q.astype(np.float32) @ np.swapaxes(k.astype(np.float32), 1, 2) * sm_scale
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    expected = (p / p.sum(axis=-1, keepdims=True)) @ v.astype(np.float32)
    np.testing.assert_allclose(device.numpy(out).astype(np.float32), expected, rtol=2e-2, atol=2e-2)


@triton.jit
def block_ptr_copy_kernel(src, dst, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    src_block = tl.make_block_ptr(src, (M, N), (N, 1), (pid_m * BLOCK_M, pid_n * BLOCK_N), (BLOCK_M, BLOCK_N), (1, 0))
    dst_block = tl.make_block_ptr(dst, (N, M), (1, N), (pid_n * BLOCK_N, pid_m * BLOCK_M), (BLOCK_N, BLOCK_M), (0, 1))
    tile = tl.load(src_block, boundary_check=(0, 1))
    tl.store(dst_block, tl.trans(tile), boundary_check=(0, 1))  # dst is src viewed column-major


def test_block_pointer_copy(device):
    M, N = 30, 20
    src = RNG.standard_normal((M, N)).astype(np.float32)
    dst = device.zeros((M, N), np.float32)
    block_ptr_copy_kernel[(2, 2)](device.tensor(src), dst, M, N, BLOCK_M=16, BLOCK_N=16)
    np.testing.assert_array_equal(device.numpy(dst), src)


@triton.jit
def descriptor_copy_kernel(src, dst, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    in_desc = tl.make_tensor_descriptor(src, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    out_desc = tl.make_tensor_descriptor(dst, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    moffset = tl.program_id(0) * BLOCK_M
    noffset = tl.program_id(1) * BLOCK_N
    block = in_desc.load([moffset, noffset])
    out_desc.store([moffset, noffset], block)


def test_tensor_descriptor_copy(device):
    M, N = 50, 36
    src = RNG.standard_normal((M, N)).astype(np.float16)
    dst = device.zeros((M, N), np.float16)
    descriptor_copy_kernel[(triton.cdiv(M, 16), triton.cdiv(N, 16))](device.tensor(src), dst, M, N,
                                                                        BLOCK_M=16, BLOCK_N=16)
    np.testing.assert_array_equal(device.numpy(dst), src)
