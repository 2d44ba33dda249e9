"""Masked kernels as real code writes them: attention over a ragged sequence (K loaded row-major and
multiplied by `tl.trans(k)`, scores masked with `tl.where`), a matmul whose M, N, K are not multiples
of the tile, a row softmax over a ragged row. Run by `test_lang_masked_loads.py` on every backend and
cross-compiled for cuda:90 by `tests/gpu/test_masked_load_codegen.py` (cp.async zero-fill, wgmma,
vector loads)."""
import os
import sys

import tilejit
import tilejit.language as tl

# The attention kernel is the benchmark's own (bench/kernels.py), so the tests check what is timed.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from common import load_kernels  # noqa: E402

attention_fwd_masked = load_kernels("tilejit").attention_fwd_masked_kernel


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
