"""tl.dot: fp16, bf16, fp32 (tf32 and ieee), int8, with an accumulator, out_dtype, batched 3-D and with
several batch axes (rank 4, 5)."""
import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from dot_kernels import f16_accumulator_matmul, multi_batch_dot
from tl_reference import round_to_bf16

RNG = np.random.default_rng(17)


@tilejit.jit
def _dot_kernel(a_ptr, b_ptr, c_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                IN: tl.constexpr, PRECISION: tl.constexpr, USE_ACC: tl.constexpr, OUT: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    if IN == "bf16":
        a = a.to(tl.bfloat16)
        b = b.to(tl.bfloat16)
    if USE_ACC:
        acc = tl.load(c_ptr + rm[:, None] * N + rn[None, :])
        c = tl.dot(a, b, acc, input_precision=PRECISION)
    elif OUT == "fp16":
        c = tl.dot(a, b, out_dtype=tl.float16)
    else:
        c = tl.dot(a, b, input_precision=PRECISION)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], c)


@pytest.mark.parametrize("in_type,precision,use_acc,out", [
    ("float16", None, False, "fp32"), ("float16", None, True, "fp32"), ("float16", None, False, "fp16"),
    ("bf16", None, False, "fp32"), ("float32", "ieee", False, "fp32"), ("float32", "tf32", False, "fp32"),
    ("float32", "ieee", True, "fp32"), ("int8", None, False, "i32"), ("int8", None, True, "i32"),
])
def test_dot(device, in_type, precision, use_acc, out):
    M, N, K = 16, 32, 16
    storage = "float32" if in_type == "bf16" else in_type
    if in_type == "int8":
        a = RNG.integers(-128, 128, (M, K)).astype(np.int8)
        b = RNG.integers(-128, 128, (K, N)).astype(np.int8)
        acc = RNG.integers(-1000, 1000, (M, N)).astype(np.int32)
        expected = a.astype(np.int32) @ b.astype(np.int32)
        out_dtype = np.int32
    else:
        a = RNG.uniform(-1, 1, (M, K)).astype(storage)
        b = RNG.uniform(-1, 1, (K, N)).astype(storage)
        acc = RNG.uniform(-1, 1, (M, N)).astype(np.float32)
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        if in_type == "bf16":
            a64, b64 = round_to_bf16(a).astype(np.float64), round_to_bf16(b).astype(np.float64)
        expected = a64 @ b64
        out_dtype = np.float16 if out == "fp16" else np.float32
    if use_acc:
        expected = expected + acc
    result = device.zeros((M, N), out_dtype)
    _dot_kernel[(1,)](device.tensor(a), device.tensor(b), device.tensor(acc), result, M=M, N=N, K=K,
                      IN="bf16" if in_type == "bf16" else "native", PRECISION=precision, USE_ACC=use_acc, OUT=out)
    got = device.numpy(result)
    if in_type == "int8":
        np.testing.assert_array_equal(got, expected)
    elif precision == "ieee":
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    elif precision == "tf32":  # 10-bit mantissa inputs
        np.testing.assert_allclose(got, expected, rtol=1e-2, atol=1e-2)
    elif out == "fp16":
        np.testing.assert_allclose(got, expected, rtol=2e-3, atol=5e-3)
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


@tilejit.jit
def _batched_dot_kernel(a_ptr, b_ptr, out_ptr, B: tl.constexpr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rb = tl.arange(0, B)[:, None, None]
    a = tl.load(a_ptr + rb * M * K + tl.arange(0, M)[None, :, None] * K + tl.arange(0, K)[None, None, :])
    b = tl.load(b_ptr + rb * K * N + tl.arange(0, K)[None, :, None] * N + tl.arange(0, N)[None, None, :])
    c = tl.dot(a, b)
    tl.store(out_ptr + rb * M * N + tl.arange(0, M)[None, :, None] * N + tl.arange(0, N)[None, None, :], c)


def test_batched_dot(device):
    B, M, N, K = 2, 16, 16, 16
    a = RNG.uniform(-1, 1, (B, M, K)).astype(np.float16)
    b = RNG.uniform(-1, 1, (B, K, N)).astype(np.float16)
    out = device.zeros((B, M, N), np.float32)
    _batched_dot_kernel[(1,)](device.tensor(a), device.tensor(b), out, B=B, M=M, N=N, K=K)
    np.testing.assert_allclose(device.numpy(out), a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3, atol=1e-3)


@tilejit.jit
def _dot3d_kernel(a_ptr, b_ptr, out_ptr, B: tl.constexpr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                  BM: tl.constexpr, BN: tl.constexpr, OUT: tl.constexpr, RESULT: tl.constexpr):
    rb = tl.arange(0, B)[:, None, None]
    rm = (tl.program_id(0) * BM + tl.arange(0, BM))[None, :, None]
    rn = (tl.program_id(1) * BN + tl.arange(0, BN))[None, None, :]
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rb * M * K + rm * K + rk[None, None, :])
    b = tl.load(b_ptr + rb * K * N + rk[None, :, None] * N + rn)
    c = tl.dot(a, b, input_precision="ieee", out_dtype=OUT)
    tl.static_assert(c.dtype == RESULT)
    tl.store(out_ptr + rb * M * N + rm * N + rn, c)


@pytest.mark.parametrize("B,M,K,BM,out", [(1, 8, 16, 8, tl.float32), (2, 64, 64, 32, tl.float32),
                                          (4, 32, 32, 32, tl.float64)])
def test_fp64_dot_accumulates_in_fp64(device, B, M, K, BM, out):
    """fp64 operands give an fp64 dot whatever out_dtype says (Triton's test_dot3d passes
    out_dtype=tl.float32 with them): the result is NumPy's fp64 matmul to within fp64 rounding."""
    a = RNG.standard_normal((B, M, K))
    b = RNG.standard_normal((B, K, M))
    result = device.zeros((B, M, M), np.float64)
    _dot3d_kernel[(M // BM, M // BM)](device.tensor(a), device.tensor(b), result, B=B, M=M, N=M, K=K, BM=BM, BN=BM,
                                      OUT=out, RESULT=tl.float64)
    np.testing.assert_allclose(device.numpy(result), a @ b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("in_dtype,storage", [(tl.float32, np.float32), (tl.bfloat16, np.float32)])
def test_fp32_and_bf16_dots_accumulate_in_fp32_whatever_out_dtype(device, in_dtype, storage):
    """As in Triton, out_dtype=float16 only applies to fp16/fp8 operands."""
    B, M, K = 1, 16, 16
    a = RNG.uniform(-1, 1, (B, M, K)).astype(storage)
    b = RNG.uniform(-1, 1, (B, K, M)).astype(storage)
    if in_dtype == tl.bfloat16:
        a, b = round_to_bf16(a), round_to_bf16(b)
    result = device.zeros((B, M, M), np.float32)
    _dot3d_cast_kernel[(1, 1)](device.tensor(a), device.tensor(b), result, M=M, K=K, IN=in_dtype)
    np.testing.assert_allclose(device.numpy(result), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


@tilejit.jit
def _dot3d_cast_kernel(a_ptr, b_ptr, out_ptr, M: tl.constexpr, K: tl.constexpr, IN: tl.constexpr):
    rm, rk = tl.arange(0, M), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :]).to(IN)
    b = tl.load(b_ptr + rk[:, None] * M + rm[None, :]).to(IN)
    c = tl.dot(a, b, input_precision="ieee", out_dtype=tl.float16)
    tl.static_assert(c.dtype == tl.float32)
    tl.store(out_ptr + rm[:, None] * M + rm[None, :], c)


def test_fp16_accumulator_dot3d_keeps_tritons_accuracy(device):
    """out_dtype=float16 (Triton's test_dot3d[4-4-64-64-64-32-32-float16-float16], same data): within
    1e-2 of the fp32-accumulated product rounded to fp16. An f16 FMA per product (tilejit's GPU
    lowering before) missed it on 44 of 16384 elements; Triton's mma rounds once per k16 step."""
    rs = np.random.RandomState(17)
    B, M, K = 4, 64, 64
    a = rs.normal(0, 1, (B, M, K)).astype(np.float16)
    b = rs.normal(0, 1, (B, K, M)).astype(np.float16)
    result = device.zeros((B, M, M), np.float16)
    _dot3d_kernel[(2, 2)](device.tensor(a), device.tensor(b), result, B=B, M=M, N=M, K=K, BM=32, BN=32,
                          OUT=tl.float16, RESULT=tl.float16, num_warps=4)
    expected = np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(np.float16)
    np.testing.assert_allclose(device.numpy(result).astype(np.float32), expected.astype(np.float32),
                               rtol=1e-2, atol=1e-2)


def test_f16_accumulator_carried_through_a_k_loop(device):
    """acc = tl.dot(a, b, acc, out_dtype=tl.float16) in a K loop (on an H100: pipelined wgmma with
    f16 D registers): the fp32 product within the rounding of an fp16 sum of 256 terms."""
    rs = np.random.RandomState(3)
    BM, BN, BK, K = 64, 64, 32, 256
    a = rs.uniform(-1, 1, (BM, K)).astype(np.float16)
    b = rs.uniform(-1, 1, (K, BN)).astype(np.float16)
    result = device.zeros((BM, BN), np.float16)
    f16_accumulator_matmul[(1,)](device.tensor(a), device.tensor(b), result, K, BM=BM, BN=BN, BK=BK, num_warps=4)
    expected = a.astype(np.float32) @ b.astype(np.float32)
    got = device.numpy(result).astype(np.float32)
    np.testing.assert_allclose(got, expected, rtol=1e-2, atol=3e-2)


@tilejit.jit
def _strided_b_matmul(a_ptr, b_ptr, c_ptr, K, stride_bk, stride_bn,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, ACC: tl.constexpr = tl.float32):
    """The tutorial matmul's loop with B read through its strides (K-major: stride_bk == 1)."""
    m, n, k = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), ACC)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + m[:, None] * K + (k0 + k)[None, :])
        b = tl.load(b_ptr + (k0 + k)[:, None] * stride_bk + n[None, :] * stride_bn)
        acc = tl.dot(a, b, acc, out_dtype=ACC)
    tl.store(c_ptr + m[:, None] * BN + n[None, :], acc)


# 8 warps on 64-row tiles: on an H100 wgmma's two warpgroups split N (Triton's warpsPerCTA [4, 2]),
# each reading its own column block of B: rows further in a K-major tile (BN = 64), a 128-byte slab
# further in an N-major one (BN = 128); an N-major B with 32-column blocks keeps mma.sync, and a B
# read with a column stride of 2 (no vector copies, so not pipelined) runs mma.sync on the split
# layout's registers.
@pytest.mark.parametrize("BN, b_order", [(128, "n"), (64, "k"), (64, "n"), (128, "n, stride 2")])
def test_a_64_row_matmul_loop_at_8_warps(device, BN, b_order):
    BM, BK, K = 64, 64, 256
    rs = np.random.RandomState(11)
    a = rs.uniform(-1, 1, (BM, K)).astype(np.float16)
    b = rs.uniform(-1, 1, (K, BN)).astype(np.float16)
    if b_order == "k":
        b_arg, stride_bk, stride_bn = device.tensor(np.ascontiguousarray(b.T)), 1, K
    elif b_order == "n":
        b_arg, stride_bk, stride_bn = device.tensor(b), BN, 1
    else:
        spread = np.zeros((K, 2 * BN), np.float16)
        spread[:, ::2] = b
        b_arg, stride_bk, stride_bn = device.tensor(spread), 2 * BN, 2
    out = device.zeros((BM, BN), np.float32)
    _strided_b_matmul[(1,)](device.tensor(a), b_arg, out, K, stride_bk, stride_bn, BM=BM, BN=BN, BK=BK, num_warps=8)
    np.testing.assert_allclose(device.numpy(out), a.astype(np.float64) @ b.astype(np.float64), rtol=1e-2, atol=1e-2)


def test_a_64_row_dot_at_8_warps_outside_loops(device):
    """B staged from registers by the dot, K-major so that each warpgroup starts its own columns."""
    M = N = K = 64
    rs = np.random.RandomState(12)
    a = rs.uniform(-1, 1, (M, K)).astype(np.float16)
    b = rs.uniform(-1, 1, (K, N)).astype(np.float16)
    out = device.zeros((M, N), np.float32)
    _dot_kernel[(1,)](device.tensor(a), device.tensor(b), out, out, M=M, N=N, K=K, IN="float16", PRECISION=None,
                      USE_ACC=False, OUT="fp32", num_warps=8)
    np.testing.assert_allclose(device.numpy(out), a.astype(np.float64) @ b.astype(np.float64), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2", "float32"])
def test_k_major_matmul_loop_in_fp8_and_tf32(device, dtype):
    """fp8 and fp32 (tf32) operands with A and B both K-major, in a K loop: on an H100 the pipelined
    wgmma m64nNk32 (e4m3/e5m2) and m64nNk8 (tf32) read both tiles by descriptor."""
    BM, BN, K = 64, 64, 256
    BK = 32 if dtype == "float32" else 128
    rs = np.random.RandomState(5)
    if dtype == "float32":
        a = rs.uniform(-1, 1, (BM, K)).astype(np.float32)
        bt = rs.uniform(-1, 1, (BN, K)).astype(np.float32)   # B^T, row-major: B is K-major
        a_arg, b_arg, a_val, b_val = device.tensor(a), device.tensor(bt), a, bt
    else:
        torch = pytest.importorskip("torch")
        if not hasattr(device, "torch"):
            pytest.skip("fp8 tensors are torch tensors: NumPy has no fp8 dtype")
        fp8 = getattr(torch, dtype)
        a_t = torch.from_numpy(rs.uniform(-2, 2, (BM, K)).astype(np.float32)).to(fp8)
        b_t = torch.from_numpy(rs.uniform(-2, 2, (BN, K)).astype(np.float32)).to(fp8)
        a_val, b_val = a_t.float().numpy(), b_t.float().numpy()
        a_arg, b_arg = device.tensor(a_t.view(torch.uint8).numpy()).view(fp8), device.tensor(b_t.view(torch.uint8).numpy()).view(fp8)
    out = device.zeros((BM, BN), np.float32)
    _strided_b_matmul[(1,)](a_arg, b_arg, out, K, 1, K, BM=BM, BN=BN, BK=BK, num_warps=4)
    expected = a_val.astype(np.float64) @ b_val.astype(np.float64).T
    # fp8 products are exact (the tensor cores' fp8 accumulation keeps about 14 mantissa bits);
    # tf32 rounds the inputs to 10-bit mantissas
    atol = 5e-2 if dtype == "float32" else 2e-2
    np.testing.assert_allclose(device.numpy(out), expected, rtol=1e-2, atol=atol)


@pytest.mark.parametrize("batch, trans_a, trans_b, use_acc", [
    ((2, 2), False, False, False), ((2, 2), True, False, True), ((2, 2), False, True, False),
    ((2, 1, 2), True, True, False), ((1, 2, 2), False, False, True)])
def test_dot_with_several_batch_axes(device, batch, trans_a, trans_b, use_acc):
    """Rank-4 and rank-5 dots (Triton 3.x: the leading axes are batch axes), built by Triton's rule:
    the batch axes reshaped into one for a 3-D dot. Small integers: exact in any order."""
    M, N, K = 16, 16, 16
    a = RNG.integers(-4, 5, batch + (M, K)).astype(np.float16)
    b = RNG.integers(-4, 5, batch + (K, N)).astype(np.float16)
    c = RNG.integers(-8, 9, batch + (M, N)).astype(np.float32)
    a_in = np.ascontiguousarray(np.swapaxes(a, -1, -2)) if trans_a else a
    b_in = np.ascontiguousarray(np.swapaxes(b, -1, -2)) if trans_b else b
    out = device.zeros(c.size, np.float32)
    multi_batch_dot[(1,)](device.tensor(a_in), device.tensor(b_in), device.tensor(c), out, BATCH=batch,
                          M=M, N=N, K=K, TRANS_A=trans_a, TRANS_B=trans_b, USE_ACC=use_acc)
    expected = a.astype(np.float32) @ b.astype(np.float32) + (c if use_acc else 0)
    np.testing.assert_array_equal(device.numpy(out).reshape(expected.shape), expected)


@tilejit.jit
def _dot_batch_mismatch_kernel(a_ptr):
    a = tl.load(a_ptr + tl.arange(0, 1024)).reshape(2, 2, 16, 16)
    b = tl.load(a_ptr + tl.arange(0, 1024)).reshape(4, 1, 16, 16)
    tl.store(a_ptr + tl.arange(0, 1024), tl.dot(a, b).reshape(1024))


def test_dot_batch_axes_must_match(device):
    with pytest.raises(tilejit.TritonError) as info:
        _dot_batch_mismatch_kernel[(1,)](device.zeros(1024, np.float16))
    assert "dot: batch dimensions differ: [2, 2] and [4, 1]" in str(info.value)


@pytest.mark.parametrize("k_major_b", [False, True])
def test_fp64_matmul_loop(device, k_major_b):
    """fp64 operands in a K loop: on sm_80+ DMMA (mma.m8n8k4.f64) reading cp.async-pipelined tiles
    with plain shared loads (ldmatrix takes 16-bit elements only), B stored N- or K-major."""
    BM, BN, BK, K = 64, 64, 16, 128
    rs = np.random.RandomState(7)
    a = rs.uniform(-1, 1, (BM, K))
    b = rs.uniform(-1, 1, (K, BN))
    b_arg = np.ascontiguousarray(b.T) if k_major_b else b
    strides = (1, K) if k_major_b else (BN, 1)
    out = device.zeros((BM, BN), np.float64)
    _strided_b_matmul[(1,)](device.tensor(a), device.tensor(b_arg), out, K, *strides, BM=BM, BN=BN, BK=BK,
                            ACC=tl.float64, num_warps=4)
    np.testing.assert_allclose(device.numpy(out), a @ b, rtol=1e-12, atol=1e-12)
