"""Dot operands loaded in a loop and computed on before the dot: a tile scaled by a per-row gate
(fla's chunked state `h = h * decay + k^T (v * exp(g))`), and tiles that feed two dots, once as
loaded and once transposed (fla's backward `dot(do, trans(v))` next to `dot(v, dh)`). On sm_80+
these loads are pipelined and read back from shared memory in their own layout
(tests/gpu/test_gpu_pipeline.py checks that); here the results are checked on every backend, with
sequence lengths that leave the last chunk partly masked."""
import numpy as np
import pytest

from dot_kernels import (chunk_dq_dk_kernel, delta_state_kernel, gated_state_kernel, gated_tf32_dot_kernel,
                         key_gated_state_kernel, key_gated_state_kernel_in_place, scaled_gram_kernel,
                         state_gradient_kernel, transposed_product_kernel, two_dots_kernel,
                         paired_projection_kernel, gathered_rows_matmul)

RNG = np.random.default_rng(29)


def gated_state_reference(k, v, g, bt):
    T = k.shape[0]
    h = np.zeros((k.shape[1], v.shape[1]))
    for start in range(0, T, bt):
        kc, vc, gc = k[start:start + bt], v[start:start + bt], g[start:start + bt]
        scaled = (vc.astype(np.float32) * np.exp(gc.astype(np.float32))[:, None]).astype(v.dtype)
        h = h * 0.5 + kc.astype(np.float64).T @ scaled.astype(np.float64)
    return h


# (K, V, BT): K = 64 is one m64 block per warpgroup, so on sm_90 the gated v tile, computed in the
# loop, is staged into shared memory for wgmma every iteration; K = 32 runs mma.sync
@pytest.mark.parametrize("K, V, BT", [(32, 64, 32), (64, 64, 64)])
@pytest.mark.parametrize("T", [128, 100])
def test_gated_state(device, T, K, V, BT):
    k = RNG.uniform(-1, 1, (T, K)).astype(np.float16)
    v = RNG.uniform(-1, 1, (T, V)).astype(np.float16)
    g = RNG.uniform(-0.5, 0.0, T).astype(np.float32)
    out = device.zeros((K, V), np.float32)
    gated_state_kernel[(1,)](device.tensor(k), device.tensor(v), device.tensor(g), out, T, K=K, V=V, BT=BT)
    np.testing.assert_allclose(device.numpy(out), gated_state_reference(k, v, g, BT), rtol=2e-3, atol=2e-3)


# 8 warps with BV = 64: on an H100 the 64-row dot's warpgroups split N, B staged K-major each iteration
@pytest.mark.parametrize("T, V, BV, warps", [(64, 128, 32, 4), (50, 100, 32, 4), (50, 128, 64, 8)])
def test_state_gradient_sums_the_state_in_the_loop_next_to_its_dot(device, T, V, BV, warps):
    K, BT = 64, 64
    do = RNG.uniform(-1, 1, (T, V)).astype(np.float16)
    h = RNG.uniform(-1, 1, (K, V)).astype(np.float32)
    dh = RNG.uniform(-1, 1, (K, V)).astype(np.float32)
    dq, dg = device.zeros((T, K), np.float32), device.zeros((T, K), np.float32)
    state_gradient_kernel[(1,)](device.tensor(do), device.tensor(h), device.tensor(dh), dq, dg, T, V, K=K, BT=BT, BV=BV,
                                num_warps=warps)
    want_dq = do.astype(np.float64) @ h.astype(np.float16).astype(np.float64).T
    want_dg = want_dq * (h.astype(np.float64) * dh).sum(axis=1)[None, :]
    np.testing.assert_allclose(device.numpy(dq), want_dq, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(device.numpy(dg), want_dg, rtol=2e-3, atol=2e-2)


@pytest.mark.parametrize("N", [128, 100])
def test_a_tile_feeding_two_dots_loaded_and_transposed(device, N):
    BM, BN = 32, 32
    a = RNG.uniform(-1, 1, (BM, N)).astype(np.float16)
    b = RNG.uniform(-1, 1, (BM, N)).astype(np.float16)
    s = device.zeros((BM, BM), np.float32)
    u = device.zeros((BN, BN), np.float32)
    two_dots_kernel[(1,)](device.tensor(a), device.tensor(b), s, u, N, BM=BM, BN=BN)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want_u = np.zeros((BN, BN))
    for start in range(0, N, BN):
        pa, pb = np.zeros((BM, BN)), np.zeros((BM, BN))
        pa[:, :min(BN, N - start)] = a64[:, start:start + BN]
        pb[:, :min(BN, N - start)] = b64[:, start:start + BN]
        want_u += pa.T @ pb
    np.testing.assert_allclose(device.numpy(s), a64 @ b64.T, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(device.numpy(u), want_u, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("T", [64, 50])
def test_scaled_gram_matrix(device, T):
    """One tile as both operands of a dot, once transposed; rows past T masked."""
    K, BT, BK = 128, 64, 32
    k = RNG.uniform(-1, 1, (T, K)).astype(np.float16)
    beta = RNG.uniform(0, 1, T).astype(np.float32)
    out = device.tensor(np.full((BT, BT), 7.0, np.float32))
    scaled_gram_kernel[(1,)](device.tensor(k), device.tensor(beta), out, T, K=K, BT=BT, BK=BK)
    k64 = k.astype(np.float64)
    want = np.full((BT, BT), 7.0)
    want[:T] = 0.0
    want[:T, :T] = np.tril(beta[:, None] * (k64 @ k64.T), -1)
    np.testing.assert_allclose(device.numpy(out), want, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("K", [64, 48])
def test_gated_tf32_dot(device, K):
    """fp32 operands computed from a 16-bit tile, an fp32 gate tile and a gate vector (tf32 dot)."""
    BC, BK = 16, 32
    q = RNG.uniform(-1, 1, (BC, K)).astype(np.float16)
    k = RNG.uniform(-1, 1, (BC, K)).astype(np.float16)
    g = RNG.uniform(-1, 0, (BC, K)).astype(np.float32)
    out = device.zeros((BC, BC), np.float32)
    gated_tf32_dot_kernel[(1,)](device.tensor(q), device.tensor(k), device.tensor(g), out, K, BC=BC, BK=BK)
    g64 = g.astype(np.float64)
    qg = q.astype(np.float64) * np.exp2(g64 - g64[:1])
    kg = k.astype(np.float64) * np.exp2(g64[:1] - g64)
    np.testing.assert_allclose(device.numpy(out), qg @ kg.T, rtol=1e-2, atol=1e-2)


def chunk_dq_dk_reference(q, k, v, do, h, dh):
    f = np.float64
    ds = do.astype(f) @ v.astype(f).T
    ds = np.tril(ds).astype(q.dtype).astype(f)
    dq = do.astype(f) @ h.astype(f).T + ds @ k.astype(f)
    dk = v.astype(f) @ dh.astype(f).T + ds.T @ q.astype(f)
    return dq, dk


@pytest.mark.parametrize("T, V", [(64, 64), (50, 128)])
def test_chunk_dq_dk(device, T, V):
    """One V block (a loop of one iteration, which becomes straight-line code) and two (a pipelined
    loop, its v and do tiles read in place by two dots each); a chunk shorter than BT is masked."""
    BT, K, BV = 64, 64, 64
    q, k = (RNG.uniform(-0.5, 0.5, (T, K)).astype(np.float16) for _ in range(2))
    v, do = (RNG.uniform(-0.5, 0.5, (T, V)).astype(np.float16) for _ in range(2))
    h, dh = (RNG.uniform(-0.5, 0.5, (K, V)).astype(np.float16) for _ in range(2))
    dq, dk = device.zeros((T, K), np.float32), device.zeros((T, K), np.float32)
    chunk_dq_dk_kernel[(1,)](*(device.tensor(x) for x in (q, k, v, do, h, dh)), dq, dk, T,
                             V=V, BT=BT, K=K, BV=BV)
    want_dq, want_dk = chunk_dq_dk_reference(q, k, v, do, h, dh)
    np.testing.assert_allclose(device.numpy(dq), want_dq, rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(device.numpy(dk), want_dk, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("T", [128, 100])
def test_key_gated_state(device, T):
    """An fp32 gate tile that scales the k tile before its dot (pipelined on sm_80+ and read back in
    the k tile's layout: tests/gpu/test_gpu_pipeline.py)."""
    K, V, BT = 32, 64, 32
    k = RNG.uniform(-1, 1, (T, K)).astype(np.float16)
    v = RNG.uniform(-1, 1, (T, V)).astype(np.float16)
    gk = np.cumsum(RNG.uniform(-0.1, 0.0, (T, K)), axis=0).astype(np.float32)
    out = device.zeros((K, V), np.float32)
    key_gated_state_kernel[(1,)](device.tensor(k), device.tensor(v), device.tensor(gk), out, T, K=K, V=V, BT=BT)
    h = np.zeros((K, V))
    for start in range(0, T, BT):
        kc, vc, gc = k[start:start + BT], v[start:start + BT], gk[start:start + BT].astype(np.float64)
        last = gc[-1]
        h = h * np.exp(last)[:, None]
        scaled = (kc.astype(np.float64) * np.exp(last[None, :] - gc)).astype(np.float16).astype(np.float64)
        h += scaled.T @ vc.astype(np.float64)
    np.testing.assert_allclose(device.numpy(out), h, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("atomic", [False, True])
@pytest.mark.parametrize("T", [128, 100])
def test_a_gate_vector_the_loop_rewrites_is_read_after_the_write(device, T, atomic):
    """Each iteration writes half its gate row into the row the next one reads (a store, or an
    atomic add): the load must see that write (on a GPU it is therefore not loaded iterations
    ahead: tests/gpu/test_gpu_pipeline.py)."""
    K, V, BT = 32, 64, 32
    k = RNG.uniform(-1, 1, (T, K)).astype(np.float16)
    v = RNG.uniform(-1, 1, (T, V)).astype(np.float16)
    gk = RNG.uniform(-0.5, 0.5, (T, K)).astype(np.float32)
    out = device.zeros((K, V), np.float32)
    gk_dev = device.tensor(gk)
    key_gated_state_kernel_in_place[(1,)](device.tensor(k), device.tensor(v), gk_dev, out, T, K=K, V=V, BT=BT,
                                          ATOMIC=atomic)
    g, h = gk.copy(), np.zeros((K, V))   # the gates in fp32, as the kernel writes them
    for start in range(0, T, BT):
        last, next_last = min(start + BT, T) - 1, min(start + 2 * BT, T) - 1
        row = g[last].astype(np.float64)
        if next_last > last:
            g[next_last] = g[last] * np.float32(0.5) + (g[next_last] if atomic else np.float32(0))
        h = h * np.exp(row)[:, None] + k[start:start + BT].astype(np.float64).T @ v[start:start + BT].astype(np.float64)
    np.testing.assert_allclose(device.numpy(out), h, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(device.numpy(gk_dev), g, rtol=1e-6)


# size 64: both dots take wgmma on sm_90 with B (h, then v_new) staged from registers every iteration
@pytest.mark.parametrize("size", [32, 64])
@pytest.mark.parametrize("T", [128, 100])
def test_delta_state(device, T, size):
    K = V = BT = size
    k = RNG.uniform(-0.5, 0.5, (T, K)).astype(np.float16)
    v = RNG.uniform(-0.5, 0.5, (T, V)).astype(np.float16)
    w = RNG.uniform(-0.5, 0.5, (T, K)).astype(np.float16)
    v_new = device.zeros((T, V), np.float32)
    out = device.zeros((K, V), np.float32)
    delta_state_kernel[(1,)](*(device.tensor(x) for x in (k, v, w)), v_new, out, T, K=K, V=V, BT=BT)
    h, want_v = np.zeros((K, V)), np.zeros((T, V))
    for start in range(0, T, BT):
        kc, vc, wc = (x[start:start + BT].astype(np.float64) for x in (k, v, w))
        vn = vc - wc @ h.astype(np.float16).astype(np.float64)
        want_v[start:start + BT] = vn
        h = h + kc.T @ vn.astype(np.float16).astype(np.float64)
    # h is rounded to fp16 before each w h: a rounding that falls the other way moves v_new by ~1e-2
    np.testing.assert_allclose(device.numpy(v_new), want_v, rtol=1e-2, atol=2e-2)
    np.testing.assert_allclose(device.numpy(out), h, rtol=1e-2, atol=2e-2)


@pytest.mark.parametrize("M, N, warps", [(64, 128, 4), (64, 64, 8), (32, 64, 4)])
def test_transposed_dot_result_feeds_both_operands(device, M, N, warps):
    """A dot's result, rounded to fp16, transposed into operand A of one dot and B of another: on the
    GPU one conversion each (the transpose's renaming read by the operand's conversion), or, where
    wgmma stages the operand, the untransposed tile read through a transposed descriptor."""
    a, b = (RNG.integers(-3, 4, (M, M)).astype(np.float16) for _ in range(2))
    q = RNG.integers(-3, 4, (M, N)).astype(np.float16)
    r = RNG.integers(-3, 4, (N, M)).astype(np.float16)
    o, u = device.zeros((M, N), np.float32), device.zeros((N, M), np.float32)
    transposed_product_kernel[(1,)](*(device.tensor(x) for x in (a, b, q, r)), o, u, M=M, N=N, num_warps=warps)
    p = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float16).astype(np.float64)
    np.testing.assert_array_equal(device.numpy(o), p.T @ q.astype(np.float64))
    np.testing.assert_array_equal(device.numpy(u), r.astype(np.float64) @ p.T)


@pytest.mark.parametrize("rows, K, BK", [(64, 128, 32), (45, 128, 32), (45, 512, 64), (45, 256, 16)])
def test_two_dots_sharing_only_indices(device, rows, K, BK):
    """Two accumulators of 64x128 tiles over one K loop, summed after it (Liger's MoE dx): on sm_90
    both dots run wgmma with the warpgroup along M (the generic chain rule asked for warps along N).
    A read from wgmma tiles swizzled by 64 bytes (BK 32), 128 (BK 64) and 32 (BK 16), and both
    dots' groups in flight across iterations."""
    N = 128
    d = RNG.uniform(-1, 1, (64, 2 * K)).astype(np.float16)
    w = RNG.uniform(-1, 1, (2 * K, N)).astype(np.float16)
    out = device.zeros((64, N), np.float32)
    paired_projection_kernel[(1,)](device.tensor(d), device.tensor(w), out, rows, K=K, N=N, BM=64, BN=128, BK=BK,
                                   num_warps=4)
    want = d.astype(np.float64) @ w.astype(np.float64)
    np.testing.assert_allclose(device.numpy(out)[:rows], want[:rows], rtol=2e-3, atol=2e-3)
    np.testing.assert_array_equal(device.numpy(out)[rows:], 0)


@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("T", [128, 112])
def test_dot_of_rows_gathered_by_loaded_indices(device, T, stages):
    """B gathered through indices loaded in the same iteration (on sm_90 both are pipelined: the
    indices loaded ahead, then the gather's copies), rows repeated and out of order."""
    rng = np.random.default_rng(11)
    a = rng.uniform(-1, 1, (64, T)).astype(np.float16)
    x = rng.uniform(-1, 1, (300, 128)).astype(np.float16)
    idx = rng.integers(0, 300, T).astype(np.int32)
    out = device.zeros((64, 128), np.float32)
    gathered_rows_matmul[(1,)](device.tensor(a), device.tensor(x), device.tensor(idx), out, T, H=128, BM=64, BN=128,
                               BK=32, STAGES=stages, num_warps=4)
    want = a.astype(np.float64) @ x.astype(np.float64)[idx]
    np.testing.assert_allclose(device.numpy(out), want, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("stages", [2, 3])
def test_dot_of_blocks_gathered_by_a_block_table(device, stages):
    """B read block by block through a loaded block number (a paged KV cache's block table)."""
    rng = np.random.default_rng(12)
    T, BK = 128, 32
    a = rng.uniform(-1, 1, (64, T)).astype(np.float16)
    x = rng.uniform(-1, 1, (10 * BK, 128)).astype(np.float16)
    table = np.array([7, 2, 2, 9], np.int32)
    out = device.zeros((64, 128), np.float32)
    gathered_rows_matmul[(1,)](device.tensor(a), device.tensor(x), device.tensor(table), out, T, H=128, BM=64,
                               BN=128, BK=BK, STAGES=stages, BY_BLOCK=True, num_warps=4)
    rows = (table[:, None] * BK + np.arange(BK)).reshape(-1)
    want = a.astype(np.float64) @ x.astype(np.float64)[rows]
    np.testing.assert_allclose(device.numpy(out), want, rtol=2e-3, atol=2e-3)
