"""Arithmetic, type promotion, integer wrap-around, C division, shifts, comparisons and casts."""
import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tl_reference import round_to_bf16, round_to_fp8

RNG = np.random.default_rng(1234)
INT_TYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOAT_TYPES = ["float16", "float32", "float64"]


def _random(dtype, n, low=None, high=None, nonzero=False):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        x = RNG.uniform(-10 if low is None else low, 10 if high is None else high, n).astype(dtype)
    else:
        info = np.iinfo(dtype)
        x = RNG.integers(info.min if low is None else low, (info.max if high is None else high), n,
                         dtype=dtype, endpoint=True)
    if nonzero:
        x[x == 0] = 1
    return x


@tilejit.jit
def _binary_kernel(x_ptr, y_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    if OP == "add":
        z = x + y
    elif OP == "sub":
        z = x - y
    elif OP == "mul":
        z = x * y
    elif OP == "floordiv":
        z = x // y
    elif OP == "mod":
        z = x % y
    elif OP == "and":
        z = x & y
    elif OP == "or":
        z = x | y
    elif OP == "xor":
        z = x ^ y
    elif OP == "truediv":
        z = x / y
    else:
        tl.static_assert(False, "unknown OP")
    tl.store(out_ptr + offs, z, mask=mask)


def _run_binary(device, op, x, y, out_dtype):
    out = device.empty(x.shape, out_dtype)
    _binary_kernel[(1,)](device.tensor(x), device.tensor(y), out, x.size, OP=op, BLOCK=64)
    return device.numpy(out)


@pytest.mark.parametrize("dtype", INT_TYPES + FLOAT_TYPES)
@pytest.mark.parametrize("op", ["add", "sub", "mul"])
def test_add_sub_mul_wrap_like_numpy(device, dtype, op):
    x, y = _random(dtype, 50), _random(dtype, 50)
    with np.errstate(over="ignore"):
        expected = {"add": x + y, "sub": x - y, "mul": x * y}[op]
    got = _run_binary(device, op, x, y, dtype)
    if np.dtype(dtype).kind == "f":
        np.testing.assert_allclose(got, expected, rtol=1e-3 if dtype == "float16" else 1e-6)
    else:
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_signed_division_truncates_toward_zero(device, dtype):
    x = np.array([7, -7, 7, -7, 0, 5, -1, 100] * 2, dtype=dtype)
    y = np.array([2, 2, -2, -2, 3, 7, 3, -9] * 2, dtype=dtype)
    quotient = _run_binary(device, "floordiv", x, y, dtype)
    remainder = _run_binary(device, "mod", x, y, dtype)
    expected_q = np.trunc(x.astype(np.float64) / y).astype(dtype)
    np.testing.assert_array_equal(quotient, expected_q)
    np.testing.assert_array_equal(remainder, np.fmod(x, y))


@pytest.mark.parametrize("dtype", ["uint8", "uint32", "uint64"])
def test_unsigned_division(device, dtype):
    x, y = _random(dtype, 40), _random(dtype, 40, low=1)
    np.testing.assert_array_equal(_run_binary(device, "floordiv", x, y, dtype), x // y)
    np.testing.assert_array_equal(_run_binary(device, "mod", x, y, dtype), x % y)


def test_float_modulo_is_c_fmod(device):
    x = np.array([-7.5, 7.5, -7.5, 7.5, 1.0, -0.5], dtype=np.float32)
    y = np.array([2.0, -2.0, -2.0, 2.0, 3.0, 0.25], dtype=np.float32)
    np.testing.assert_array_equal(_run_binary(device, "mod", x, y, np.float32), np.fmod(x, y))


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint16", "int64"])
@pytest.mark.parametrize("op", ["and", "or", "xor"])
def test_bitwise(device, dtype, op):
    x, y = _random(dtype, 33), _random(dtype, 33)
    expected = {"and": x & y, "or": x | y, "xor": x ^ y}[op]
    np.testing.assert_array_equal(_run_binary(device, op, x, y, dtype), expected)


def test_integer_true_division_gives_float32(device):
    x = np.array([1, 7, -9, 100], dtype=np.int32)
    y = np.array([2, 2, 4, 3], dtype=np.int32)
    got = _run_binary(device, "truediv", x, y, np.float32)
    np.testing.assert_allclose(got, x.astype(np.float32) / y.astype(np.float32), rtol=1e-6)


@tilejit.jit
def _overflow_kernel(out8_ptr, out_u8_ptr, out32_ptr):
    offs = tl.arange(0, 2)
    big8 = tl.full([2], 127, tl.int8)
    zero_u8 = tl.full([2], 0, tl.uint8)
    big32 = tl.full([2], 2147483647, tl.int32)
    tl.store(out8_ptr + offs, big8 + offs.to(tl.int8) + 1)
    tl.store(out_u8_ptr + offs, zero_u8 - 1 - offs.to(tl.uint8))
    tl.store(out32_ptr + offs, big32 + 1 + offs)


def test_integer_overflow_wraps(device):
    out8, out_u8, out32 = device.zeros(2, np.int8), device.zeros(2, np.uint8), device.zeros(2, np.int32)
    _overflow_kernel[(1,)](out8, out_u8, out32)
    np.testing.assert_array_equal(device.numpy(out8), [-128, -127])
    np.testing.assert_array_equal(device.numpy(out_u8), [255, 254])
    np.testing.assert_array_equal(device.numpy(out32), [-2147483648, -2147483647])


@tilejit.jit
def _shift_kernel(x_ptr, s_ptr, left_ptr, right_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    s = tl.load(s_ptr + offs)
    tl.store(left_ptr + offs, x << s)
    tl.store(right_ptr + offs, x >> s)


@pytest.mark.parametrize("dtype", ["int32", "uint32", "int8", "uint64"])
def test_shifts_arithmetic_for_signed_logical_for_unsigned(device, dtype):
    bits = np.dtype(dtype).itemsize * 8
    x = _random(dtype, 16)
    x[0] = -8 if np.dtype(dtype).kind == "i" else np.iinfo(dtype).max
    x[1] = 1
    s = RNG.integers(0, bits, 16).astype(dtype)
    left, right = device.zeros(16, dtype), device.zeros(16, dtype)
    _shift_kernel[(1,)](device.tensor(x), device.tensor(s), left, right, BLOCK=16)
    np.testing.assert_array_equal(device.numpy(left), np.left_shift(x, s))
    np.testing.assert_array_equal(device.numpy(right), np.right_shift(x, s))


@tilejit.jit
def _compare_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    # one bit per comparison, so that one store checks all six
    bits = ((x < y).to(tl.int32) | ((x <= y).to(tl.int32) << 1) | ((x > y).to(tl.int32) << 2)
            | ((x >= y).to(tl.int32) << 3) | ((x == y).to(tl.int32) << 4) | ((x != y).to(tl.int32) << 5))
    tl.store(out_ptr + offs, bits)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32"])
def test_comparisons(device, dtype):
    x, y = _random(dtype, 32), _random(dtype, 32)
    y[:8] = x[:8]
    if np.dtype(dtype).kind == "u":  # values above the signed maximum check unsigned predicates
        x[8] = np.iinfo(dtype).max
        y[8] = 1
    out = device.zeros(32, np.int32)
    _compare_kernel[(1,)](device.tensor(x), device.tensor(y), out, BLOCK=32)
    expected = ((x < y) * 1 | (x <= y) * 2 | (x > y) * 4 | (x >= y) * 8 | (x == y) * 16 | (x != y) * 32)
    np.testing.assert_array_equal(device.numpy(out), expected)


def test_nan_comparisons_are_unordered(device):
    x = np.array([np.nan, 1.0, np.nan, 0.0], dtype=np.float32)
    y = np.array([1.0, np.nan, np.nan, -0.0], dtype=np.float32)
    out = device.zeros(4, np.int32)
    _compare_kernel[(1,)](device.tensor(x), device.tensor(y), out, BLOCK=4)
    # NaN: every ordered predicate false, != true; 0.0 == -0.0
    np.testing.assert_array_equal(device.numpy(out), [32, 32, 32, 2 | 8 | 16])


@tilejit.jit
def _promotion_kernel(out_ptr, A: tl.constexpr, B: tl.constexpr, EXPECTED: tl.constexpr):
    a = tl.full([4], 1, A)
    b = tl.full([4], 1, B)
    tl.static_assert((a + b).dtype == EXPECTED, "a + b has the wrong type")
    tl.static_assert((b * a).dtype == EXPECTED, "b * a has the wrong type")
    tl.store(out_ptr + tl.arange(0, 4), (a + b).to(tl.int32) * 7)


@pytest.mark.parametrize("a,b,expected", [
    (tl.int8, tl.int32, tl.int32), (tl.int8, tl.int16, tl.int16), (tl.int32, tl.uint32, tl.uint32),
    (tl.int64, tl.uint32, tl.int64), (tl.uint8, tl.int16, tl.int16), (tl.uint64, tl.int8, tl.uint64),
    (tl.float16, tl.float32, tl.float32), (tl.float16, tl.bfloat16, tl.float16),  # Triton: a half operand wins first
    (tl.float32, tl.float64, tl.float64), (tl.int32, tl.float16, tl.float16), (tl.int64, tl.float32, tl.float32),
    (tl.bfloat16, tl.bfloat16, tl.bfloat16), (tl.int1, tl.int8, tl.int8),
], ids=str)
def test_type_promotion_of_tensors(device, a, b, expected):
    out = device.zeros(4, np.int32)
    _promotion_kernel[(1,)](out, A=a, B=b, EXPECTED=expected)
    np.testing.assert_array_equal(device.numpy(out), [14] * 4)


@tilejit.jit
def _scalar_promotion_kernel(out_ptr):
    i8 = tl.full([4], 1, tl.int8)
    u8 = tl.full([4], 1, tl.uint8)
    i32 = tl.full([4], 1, tl.int32)
    i64 = tl.full([4], 1, tl.int64)
    u32 = tl.full([4], 1, tl.uint32)
    f16 = tl.full([4], 1, tl.float16)
    bf16 = tl.full([4], 1, tl.bfloat16)
    # Python literals do not widen a tensor of their own kind
    tl.static_assert((f16 * 2.0).dtype == tl.float16, "fp16 * float literal")
    tl.static_assert((bf16 + 1).dtype == tl.bfloat16, "bf16 + int literal")
    tl.static_assert((i8 + 3).dtype == tl.int8, "int8 + int literal")
    tl.static_assert((u8 * 2).dtype == tl.uint8, "uint8 * int literal")
    tl.static_assert((i32 + 1.5).dtype == tl.float32, "int32 + float literal")
    # true division of integers is fp32; of halves stays half
    tl.static_assert((i8 / i8).dtype == tl.float32, "int8 / int8")
    tl.static_assert((f16 / 2).dtype == tl.float32, "fp16 / int literal")  # no fp16 division in PTX
    tl.static_assert((f16 / f16).dtype == tl.float32, "fp16 / fp16")
    tl.static_assert((bf16 + bf16).dtype == tl.bfloat16, "bf16 + bf16")
    tl.static_assert((i32 < i64).dtype == tl.int1, "comparison type")
    tl.static_assert((-u32).dtype == tl.uint32, "negated uint32")
    tl.store(out_ptr + tl.arange(0, 4), (i8 + i32) * 7)


def test_type_promotion_with_python_scalars(device):
    out = device.zeros(4, np.int32)
    _scalar_promotion_kernel[(1,)](out)
    np.testing.assert_array_equal(device.numpy(out), [14] * 4)


@tilejit.jit
def _mixed_kernel(a_ptr, b_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs)  # int8
    b = tl.load(b_ptr + offs)  # int32
    tl.store(out_ptr + offs, a * b + 1000)


def test_int8_times_int32_computes_in_int32(device):
    a = np.array([100, -100, 127, -128], dtype=np.int8)
    b = np.array([100, 100, 1000, 1000], dtype=np.int32)
    out = device.zeros(4, np.int32)
    _mixed_kernel[(1,)](device.tensor(a), device.tensor(b), out, BLOCK=4)
    np.testing.assert_array_equal(device.numpy(out), a.astype(np.int32) * b + 1000)


@tilejit.jit
def _cast_kernel(x_ptr, out_ptr, n, DST: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x.to(DST), mask=mask)


@pytest.mark.parametrize("src,dst,tl_dst", [
    ("float32", "int32", tl.int32), ("float32", "int8", tl.int8), ("float64", "int64", tl.int64),
    ("float32", "float16", tl.float16), ("float16", "float32", tl.float32), ("float64", "float32", tl.float32),
    ("int32", "float32", tl.float32), ("int8", "int64", tl.int64), ("int64", "int16", tl.int16),
    ("uint8", "int32", tl.int32), ("int8", "uint32", tl.uint32), ("uint32", "float64", tl.float64),
])
def test_casts(device, src, dst, tl_dst):
    if np.dtype(src).kind == "f" and np.dtype(dst).kind in "iu":
        bound = min(100.0, float(np.iinfo(dst).max))
        x = RNG.uniform(-bound, bound, 40).astype(src)  # fp -> int truncates toward zero
        x[:4] = np.array([-2.7, 2.7, -0.5, 0.99]).astype(src)
        expected = np.trunc(x).astype(dst)
    else:
        x = _random(src, 40)
        with np.errstate(over="ignore"):
            expected = x.astype(dst)
    out = device.zeros(40, dst)
    _cast_kernel[(1,)](device.tensor(x), out, 40, DST=tl_dst, BLOCK=64)
    np.testing.assert_array_equal(device.numpy(out), expected)


def test_bool_cast_is_nonzero_test(device):
    x = np.array([0.0, -0.0, 0.5, -3.0, np.nan, np.inf, 0, 1], dtype=np.float32)
    out = device.zeros(8, np.int8)

    @tilejit.jit
    def kernel(x_ptr, out_ptr):
        offs = tl.arange(0, 8)
        b = tl.load(x_ptr + offs).to(tl.int1)
        tl.store(out_ptr + offs, b.to(tl.int8))

    kernel[(1,)](device.tensor(x), out)
    np.testing.assert_array_equal(device.numpy(out), (x != 0).astype(np.int8))


@tilejit.jit
def _bitcast_kernel(x_ptr, as_int_ptr, back_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    bits = x.to(tl.int32, bitcast=True)
    tl.store(as_int_ptr + offs, bits)
    flipped = bits ^ -2147483648  # flips the sign bit
    tl.store(back_ptr + offs, tl.cast(flipped, tl.float32, bitcast=True))
    tl.store(back_ptr + BLOCK + offs, tl.cast(x, tl.int32).to(tl.float32))


def test_bitcast(device):
    x = np.array([1.0, -2.5, 0.0, -0.0, np.inf, 3.0e-40, 1e9, -7.25], dtype=np.float32)
    x = np.where(np.isinf(x), 5.5, x).astype(np.float32)  # keep the value cast in the int32 range
    as_int, back = device.zeros(8, np.int32), device.zeros(16, np.float32)
    _bitcast_kernel[(1,)](device.tensor(x), as_int, back, BLOCK=8)
    np.testing.assert_array_equal(device.numpy(as_int), x.view(np.int32))
    np.testing.assert_array_equal(device.numpy(back)[:8].view(np.int32), (-x).view(np.int32))
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(device.numpy(back)[8:], np.clip(np.trunc(x), -2**31, 2**31 - 1).astype(np.int32))


@tilejit.jit
def _round_trip_kernel(x_ptr, out_ptr, bits_ptr, MID: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    narrow = x.to(MID)
    tl.store(out_ptr + offs, narrow.to(tl.float32))
    tl.store(bits_ptr + offs, narrow.to(tl.uint8, bitcast=True))


@pytest.mark.parametrize("name,tl_type,limit", [("fp8e5", tl.float8e5, 50000.0), ("fp8e4nv", tl.float8e4nv, 400.0),
                                                ("fp8e4b8", tl.float8e4b8, 200.0), ("fp8e5b16", tl.float8e5b16, 50000.0)])
def test_fp8_round_trip(device, name, tl_type, limit):
    x = RNG.uniform(-limit, limit, 64) * RNG.choice([1.0, 1e-2, 1e-4], 64)
    x = x.astype(np.float32)
    x[:4] = [0.0, 1.0, -2.0, 0.375]
    out, bits = device.zeros(64, np.float32), device.zeros(64, np.uint8)
    _round_trip_kernel[(1,)](device.tensor(x), out, bits, MID=tl_type, BLOCK=64)
    expected = round_to_fp8(x, name)
    np.testing.assert_array_equal(device.numpy(out), expected)
    # the stored code decodes to the same value
    from tl_reference import fp8_table
    np.testing.assert_array_equal(fp8_table(name)[device.numpy(bits)].astype(np.float32), expected)


@tilejit.jit
def _bf16_kernel(x_ptr, y_ptr, round_ptr, sum_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs).to(tl.bfloat16)
    y = tl.load(y_ptr + offs).to(tl.bfloat16)
    tl.store(round_ptr + offs, x.to(tl.float32))
    s = x + y
    tl.static_assert(s.dtype == tl.bfloat16)
    tl.store(sum_ptr + offs, s.to(tl.float32))


def test_bfloat16_rounding_and_arithmetic(device):
    x = RNG.uniform(-100, 100, 32).astype(np.float32)
    y = RNG.uniform(-100, 100, 32).astype(np.float32)
    x[:2] = [1.00390625, 1.01171875]  # exact ties: round to even
    rounded, total = device.zeros(32, np.float32), device.zeros(32, np.float32)
    _bf16_kernel[(1,)](device.tensor(x), device.tensor(y), rounded, total, BLOCK=32)
    np.testing.assert_array_equal(device.numpy(rounded), round_to_bf16(x))
    np.testing.assert_array_equal(device.numpy(total), round_to_bf16(round_to_bf16(x) + round_to_bf16(y)))


def test_fp16_arithmetic_rounds_each_step(device):
    x = RNG.uniform(-4, 4, 40).astype(np.float16)
    y = RNG.uniform(-4, 4, 40).astype(np.float16)
    np.testing.assert_array_equal(_run_binary(device, "mul", x, y, np.float16), x * y)


@tilejit.jit
def _unary_kernel(x_ptr, neg_ptr, inv_ptr, not_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(neg_ptr + offs, -x)
    tl.store(inv_ptr + offs, ~x)
    tl.store(not_ptr + offs, (x == 0).to(tl.int32))


def test_unary_minus_and_invert(device):
    x = np.array([0, 1, -1, 127, -128, 5, 64, -3], dtype=np.int8)
    neg, inv, nz = device.zeros(8, np.int8), device.zeros(8, np.int8), device.zeros(8, np.int32)
    _unary_kernel[(1,)](device.tensor(x), neg, inv, nz, BLOCK=8)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(device.numpy(neg), -x)
    np.testing.assert_array_equal(device.numpy(inv), ~x)
    np.testing.assert_array_equal(device.numpy(nz), (x == 0).astype(np.int32))
