"""Masked loads as real kernels write them, against NumPy: attention over a ragged sequence
(`tl.trans(k)`, `tl.where` on the scores), a matmul with M, N, K off the tile, `other` through a
transposed load (constant, zero and tensor), a ragged row softmax. On a GPU these take the cp.async
zero-fill pipeline and vector loads (tests/gpu/test_masked_load_codegen.py checks the code)."""
import numpy as np
import pytest

from masked_kernels import (COMPARE_MASKS, attention_fwd_masked, copy_masked_by_compare, dot_transposed_masked_other,
                            matmul_masked, softmax_masked)

RNG = np.random.default_rng(12)


def _attention_ref(q, k, v, scale):
    s = np.einsum("hmd,hnd->hmn", q.astype(np.float32), k.astype(np.float32)) * scale
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(axis=-1, keepdims=True)
    return np.einsum("hmn,hnd->hmd", p, v.astype(np.float32))


# (seq_len, head_dim, block_m, block_n, num_warps): a small tile; and the bench's tile (wgmma with
# both K and V pipelined on sm_90), with a sequence that ends inside a block.
@pytest.mark.parametrize("seq,d,bm,bn,warps", [(40, 16, 16, 16, 4), (200, 64, 128, 64, 4)])
def test_masked_attention(device, seq, d, bm, bn, warps):
    heads = 2
    q, k, v = (RNG.standard_normal((heads, seq, d)).astype(np.float16) for _ in range(3))
    out = device.full((heads, seq, d), np.nan, np.float16)
    scale = d ** -0.5
    grid = ((seq + bm - 1) // bm, heads)
    attention_fwd_masked[grid](device.tensor(q), device.tensor(k), device.tensor(v), out, seq, scale,
                               seq * d, d, HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, num_warps=warps, num_stages=2)
    np.testing.assert_allclose(device.numpy(out).astype(np.float32), _attention_ref(q, k, v, scale),
                               rtol=2e-2, atol=2e-2)


# Off-tile sizes: not multiples of 16 (scalar masked loads), and multiples of 16 but not of the tile
# (vector loads, pipelined with zero-filled copies on sm_80+).
@pytest.mark.parametrize("M,N,K", [(100, 70, 90), (80, 112, 160)])
def test_masked_matmul_off_tile_sizes(device, M, N, K):
    a = RNG.standard_normal((M, K)).astype(np.float16)
    b = RNG.standard_normal((K, N)).astype(np.float16)
    c = device.full((M, N), np.nan, np.float16)
    bm, bn, bk = 64, 64, 32
    grid = ((M + bm - 1) // bm, (N + bn - 1) // bn)
    matmul_masked[grid](device.tensor(a), device.tensor(b), c, M, N, K, K, N, N,
                        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=4, num_stages=3)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(device.numpy(c).astype(np.float32), want, rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("other", [0.0, 2.0, None])
def test_transposed_masked_load_puts_other_where_the_mask_is_false(device, other):
    bm, bn, bk, N, K = 64, 64, 64, 20, 128   # the tile wgmma and the pipeline take on sm_90
    a = RNG.integers(-2, 3, (bm, K)).astype(np.float16)
    b = RNG.integers(-2, 3, (N, K)).astype(np.float16)
    out = device.full((bm, bn), np.nan, np.float32)
    dot_transposed_masked_other[(1,)](device.tensor(a), device.tensor(b), out, N, K, OTHER=other,
                                      BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=4, num_stages=2)
    full = np.empty((bn, K), np.float32)
    full[:N] = b
    n, kk = np.meshgrid(np.arange(N, bn), np.arange(K) % bk, indexing="ij")
    full[N:] = (n + kk) % 4 if other is None else other
    np.testing.assert_array_equal(device.numpy(out), a.astype(np.float32) @ full.T)


@pytest.mark.parametrize("n_cols", [37, 48, 64])
def test_masked_softmax_ragged_rows(device, n_cols):
    rows, block, stride = 5, 64, 80
    x = RNG.standard_normal((rows, stride)).astype(np.float32)
    out = device.full((rows, stride), np.nan, np.float32)
    softmax_masked[(rows,)](out, device.tensor(x), stride, stride, n_cols, BLOCK_SIZE=block)
    got = device.numpy(out)
    e = np.exp(x[:, :n_cols] - x[:, :n_cols].max(axis=1, keepdims=True))
    np.testing.assert_allclose(got[:, :n_cols], e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
    assert np.isnan(got[:, n_cols:]).all()   # masked-off lanes store nothing


# n = 48 is specialized as a multiple of 16 on the GPU: the accesses are 128-bit only where the mask
# is alike over each group of 4 (`<`, `>=`); `<=`, `>`, `==`, `!=` change next to n (a GPU once read
# and wrote x[49:52] for `offs <= 48`).
@pytest.mark.parametrize("pred", sorted(COMPARE_MASKS))
def test_mask_from_each_comparison(device, pred):
    n, block = 48, 64
    x = RNG.standard_normal(2 * block).astype(np.float32)
    y = device.full((2 * block,), -2.0, np.float32)
    z = device.full((2 * block,), np.nan, np.float32)
    copy_masked_by_compare[(2,)](device.tensor(x), y, z, n, PRED=pred, BLOCK=block)
    mask = COMPARE_MASKS[pred](np.arange(2 * block), n)
    np.testing.assert_array_equal(device.numpy(y), np.where(mask, x, -2.0))
    np.testing.assert_array_equal(device.numpy(z), np.where(mask, x, -1.0))
