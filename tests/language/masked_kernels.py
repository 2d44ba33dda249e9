"""Masked kernels as real code writes them: attention over a ragged sequence (K loaded row-major and
multiplied by `tl.trans(k)`, scores masked with `tl.where`), a matmul whose M, N, K are not multiples
of the tile, a row softmax over a ragged row. Run by `test_lang_masked_loads.py` on every backend and
cross-compiled for cuda:90 by `tests/gpu/test_masked_load_codegen.py` (cp.async zero-fill, wgmma,
vector loads)."""
import os
import sys

import numpy as np

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


@tilejit.jit
def copy_masked_by_compare(x_ptr, y_ptr, z_ptr, n, PRED: tl.constexpr, BLOCK: tl.constexpr):
    """y[i] = x[i] where `i PRED n` (or `n PRED i` for the names ending in "_rev"), else y keeps its
    value; z[i] is the masked load, -1 where the mask is false. With n a multiple of 16 the vector width of these accesses comes
    from the mask's constancy, which depends on the predicate: `i < n` is alike over aligned groups of
    16, `i <= n` is not (it changes at n + 1)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if PRED == "lt":
        mask = offs < n
    elif PRED == "le":
        mask = offs <= n
    elif PRED == "gt":
        mask = offs > n
    elif PRED == "ge":
        mask = offs >= n
    elif PRED == "eq":
        mask = offs == n
    elif PRED == "ne":
        mask = offs != n
    elif PRED == "gt_rev":
        mask = n > offs
    elif PRED == "le_rev":
        mask = n <= offs
    else:
        tl.static_assert(PRED == "lt_rev")
        mask = n < offs
    x = tl.load(x_ptr + offs, mask=mask, other=-1.0)
    tl.store(y_ptr + offs, x, mask=mask)
    tl.store(z_ptr + offs, x)


COMPARE_MASKS = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
                 "eq": np.equal, "ne": np.not_equal, "gt_rev": lambda i, n: n > i,
                 "le_rev": lambda i, n: n <= i, "lt_rev": lambda i, n: n < i}
