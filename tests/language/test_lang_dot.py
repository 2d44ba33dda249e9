"""tl.dot: fp16, bf16, fp32 (tf32 and ieee), int8, with an accumulator, out_dtype, batched 3-D."""
import numpy as np
import pytest

import tilejit
import tilejit.language as tl
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
