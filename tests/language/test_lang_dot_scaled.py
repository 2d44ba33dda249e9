"""`tl.dot_scaled` (microscaling formats) on every backend, against a NumPy decode of the formats."""
import numpy as np
import pytest

import tilejit
import tilejit.language as tl

RNG = np.random.default_rng(23)
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def decode_e2m1(codes):
    magnitude = E2M1[codes & 7]
    return np.where(codes & 8, -magnitude, magnitude)


def decode_fp8(byte, exponent_bits):
    """e4m3 (bias 7, no infinities, 0x7f/0xff NaN) or e5m2 (bias 15, IEEE-like) bytes as float64."""
    byte = byte.astype(np.int64)
    mantissa_bits = 7 - exponent_bits
    bias = (1 << (exponent_bits - 1)) - 1
    sign = np.where(byte & 0x80, -1.0, 1.0)
    e = (byte >> mantissa_bits) & ((1 << exponent_bits) - 1)
    m = byte & ((1 << mantissa_bits) - 1)
    value = np.where(e == 0, m / (1 << mantissa_bits) * 2.0 ** (1 - bias),
                     (1 + m / (1 << mantissa_bits)) * 2.0 ** (e - bias))
    return sign * value


def e8m0(scale, zero_is_tiny):
    value = 2.0 ** (scale.astype(np.float64) - 127)
    if not zero_is_tiny:
        value = np.where(scale == 0, 0.0, value)
    return np.where(scale == 255, np.nan, value)


@tilejit.jit
def _scaled_kernel(a_ptr, a_scale_ptr, b_ptr, b_scale_ptr, acc_ptr, out_ptr,
                   A_ROWS: tl.constexpr, A_COLS: tl.constexpr, B_ROWS: tl.constexpr, B_COLS: tl.constexpr,
                   M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, FMT_A: tl.constexpr, FMT_B: tl.constexpr,
                   SCALE_A: tl.constexpr, SCALE_B: tl.constexpr, A_K_PACK: tl.constexpr, B_K_PACK: tl.constexpr,
                   USE_ACC: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, A_ROWS)[:, None] * A_COLS + tl.arange(0, A_COLS)[None, :])
    b = tl.load(b_ptr + tl.arange(0, B_ROWS)[:, None] * B_COLS + tl.arange(0, B_COLS)[None, :])
    a_scale = None
    b_scale = None
    if SCALE_A:
        a_scale = tl.load(a_scale_ptr + tl.arange(0, M)[:, None] * (K // 32) + tl.arange(0, K // 32)[None, :])
    if SCALE_B:
        b_scale = tl.load(b_scale_ptr + tl.arange(0, N)[:, None] * (K // 32) + tl.arange(0, K // 32)[None, :])
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    if USE_ACC:
        c = tl.dot_scaled(a, a_scale, FMT_A, b, b_scale, FMT_B, acc=tl.load(acc_ptr + offs),
                          lhs_k_pack=A_K_PACK, rhs_k_pack=B_K_PACK)
    else:
        c = tl.dot_scaled(a, a_scale, FMT_A, b, b_scale, FMT_B, lhs_k_pack=A_K_PACK, rhs_k_pack=B_K_PACK)
    tl.store(out_ptr + offs, c)


def _operand(fmt, rows, cols, packed_axis, fp16_compute=False):
    """(stored array, decoded float64 [rows, cols]) of one operand. Beside an fp16 operand the
    products are taken in fp16 (as Triton's GPU emulation), so e5m2 codes keep to fp16's range there,
    as in Triton's test_scaled_dot."""
    if fmt == "e2m1":
        codes = RNG.integers(0, 16, (rows, cols)).astype(np.uint8)
        if packed_axis == 1:
            stored = codes[:, 0::2] | (codes[:, 1::2] << 4)
        else:
            stored = codes[0::2, :] | (codes[1::2, :] << 4)
        return stored.astype(np.uint8), decode_e2m1(codes)
    if fmt in ("e4m3", "e5m2"):
        stored = RNG.integers(0, 256, (rows, cols)).astype(np.uint8)
        exponent_bits = 4 if fmt == "e4m3" else 5
        nonfinite = 0x7F if fmt == "e4m3" else 0x7C
        stored = np.where(stored & nonfinite == nonfinite, stored & 0xB0, stored).astype(np.uint8)
        if fmt == "e5m2" and fp16_compute:
            stored &= 0xBB   # exponent field <= 14: |value| < 2
        return stored, decode_fp8(stored, exponent_bits)
    values = RNG.normal(0, 1, (rows, cols)).astype(np.float16)
    return values, values.astype(np.float64)


CASES = [  # (lhs format, rhs format, lhs scaled, rhs scaled, lhs k-pack, rhs k-pack, acc)
    ("e2m1", "fp16", True, False, True, True, False),
    ("fp16", "e2m1", False, True, True, True, True),
    ("e4m3", "fp16", True, False, True, True, False),
    ("fp16", "e5m2", False, True, True, True, False),
    ("e5m2", "e2m1", True, True, True, True, True),
    ("e2m1", "e2m1", True, True, False, False, False),
]


@pytest.mark.parametrize("case", CASES, ids=["-".join(map(str, c)) for c in CASES])
def test_dot_scaled(device, case):
    fmt_a, fmt_b, scale_a, scale_b, a_k_pack, b_k_pack, use_acc = case
    M, N, K = 16, 32, 64
    fp16_compute = "fp16" in (fmt_a, fmt_b)
    a_stored, a = _operand(fmt_a, M, K, 1 if a_k_pack else 0, fp16_compute)
    b_stored, b = _operand(fmt_b, K, N, 0 if b_k_pack else 1, fp16_compute)
    low, high = (124, 132) if fp16_compute else (120, 134)   # Triton's test: 124..131 beside fp16
    a_scale = RNG.integers(low, high, (M, K // 32)).astype(np.uint8)
    b_scale = RNG.integers(low, high, (N, K // 32)).astype(np.uint8)
    a_scale[0, 0] = 255  # a NaN scale poisons its row
    if scale_a:
        a = a * np.repeat(e8m0(a_scale, not fp16_compute), 32, axis=1)
    if scale_b:
        b = b * np.repeat(e8m0(b_scale, not fp16_compute), 32, axis=1).T
    acc = RNG.normal(0, 1, (M, N)).astype(np.float32)
    expected = a @ b + (acc if use_acc else 0)
    out = device.zeros((M, N), "float32")
    _scaled_kernel[(1,)](device.tensor(a_stored), device.tensor(a_scale), device.tensor(b_stored),
                         device.tensor(b_scale), device.tensor(acc), out,
                         A_ROWS=a_stored.shape[0], A_COLS=a_stored.shape[1], B_ROWS=b_stored.shape[0],
                         B_COLS=b_stored.shape[1], M=M, N=N, K=K, FMT_A=fmt_a, FMT_B=fmt_b, SCALE_A=scale_a,
                         SCALE_B=scale_b, A_K_PACK=a_k_pack, B_K_PACK=b_k_pack, USE_ACC=use_acc)
    got = device.numpy(out)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5 * np.nanmax(np.abs(expected)))
    if scale_a:
        assert np.isnan(got[0]).all() and not np.isnan(got[1:]).any()


def test_dot_scaled_rejects_an_unknown_format(device):
    a = device.tensor(np.zeros((16, 32), np.uint8))
    with pytest.raises(tilejit.CompilationError, match="lhs_format"):
        _scaled_kernel[(1,)](a, a, a, a, a, device.zeros((16, 32), "float32"), A_ROWS=16, A_COLS=32, B_ROWS=32,
                             B_COLS=32, M=16, N=32, K=32, FMT_A="e3m2", FMT_B="e4m3", SCALE_A=False, SCALE_B=False,
                             A_K_PACK=True, B_K_PACK=True, USE_ACC=False)
