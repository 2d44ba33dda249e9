"""Places where results used to differ silently from Triton's: shifts of mixed signedness, float
atomic max/min on signed zeros and NaNs, 64-bit random offsets, tl.dot below 16 and its fp32 input
precisions, unary minus and C division.

Expected values come from NumPy models of Triton's rules; the constants marked "Triton 3.9" were
printed by Triton 3.9's own interpreter (TRITON_INTERPRET=1) on the same inputs. For the fp32 dot the
model is what NVIDIA tensor cores do (Triton's tl.dot documentation, PTX ISA): the tests multiply by
an identity matrix, so each result element is one product and the accumulation order cannot matter.
"""
import numpy as np
import pytest

import tilejit
import tilejit.language as tl
from tl_reference import philox4x32, round_to_bf16

# -- shifts: the tensor operand's signedness before promotion picks the shift -------------------------


@tilejit.jit
def _shift_right_kernel(x_ptr, s_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) >> tl.load(s_ptr + offs))


def _shift_model(x, s, out_dtype):
    """x >> s on the promoted type, arithmetic when x's own type is signed (Triton's tensor.__rshift__)."""
    wide = np.dtype(out_dtype)
    promoted = x.astype(wide)  # sign-extends a signed x, zero-extends an unsigned one, then wraps
    if x.dtype.kind == "i":
        signed = promoted.view(f"i{wide.itemsize}")
        return (signed >> s.astype(signed.dtype)).view(wide)
    unsigned = promoted.view(f"u{wide.itemsize}")
    return (unsigned >> s.astype(unsigned.dtype)).view(wide)


@pytest.mark.parametrize("x_dtype,s_dtype,out_dtype", [
    ("int32", "uint32", "uint32"), ("int8", "uint32", "uint32"), ("uint32", "int32", "uint32"),
    ("int16", "uint8", "int16"), ("uint8", "int32", "int32"), ("int64", "uint32", "int64"),
    ("uint16", "int64", "int64"),
])
def test_shift_right_kind_comes_from_left_operand(device, x_dtype, s_dtype, out_dtype):
    values = np.array([-128, -7, 100, 1, -1, 64, -64, 127], dtype=np.int64)
    x = values.astype(x_dtype)  # wraps negatives for unsigned types
    s = np.array([1, 2, 3, 4, 1, 2, 5, 7], dtype=s_dtype)
    out = device.zeros(8, out_dtype)
    _shift_right_kernel[(1,)](device.tensor(x), device.tensor(s), out, BLOCK=8)
    got = device.numpy(out)
    np.testing.assert_array_equal(got, _shift_model(x, s, out_dtype))
    if (x_dtype, s_dtype) in (("int32", "uint32"), ("int8", "uint32")):   # Triton 3.9
        assert got.tolist() == [4294967232, 4294967294, 12, 0, 4294967295, 16, 4294967294, 0]


@tilejit.jit
def _scalar_shifted_kernel(s_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, -256 >> tl.load(s_ptr + offs))


def test_python_number_shifted_by_signed_tensor_is_arithmetic(device):
    s = np.arange(1, 9, dtype=np.int32)
    out = device.zeros(8, np.int32)
    _scalar_shifted_kernel[(1,)](device.tensor(s), out, BLOCK=8)
    assert device.numpy(out).tolist() == [-128, -64, -32, -16, -8, -4, -2, -1]


# -- fp32 atomic max/min: the integer path is chosen by the sign bit -------------------------------------

NAN, NEG_NAN = np.uint32(0x7FC00000), np.uint32(0xFFC00000)


def _f32_bits(values):
    return np.array([np.float32(v).view(np.uint32) if not isinstance(v, np.uint32) else v for v in values],
                    dtype=np.uint32)


def _order_key(bits):
    """Float bits in the order Triton's integer atomics give them: -NaN < -inf < ... < -0.0 < +0.0 <
    ... < +inf < +NaN (sign-magnitude)."""
    bits = np.asarray(bits, dtype=np.uint32).astype(np.int64)
    magnitude = bits & 0x7FFFFFFF
    return np.where(bits >> 31, -magnitude - 1, magnitude)


@tilejit.jit
def _atomic_minmax_kernel(ptr, val_ptr, old_ptr, IS_MAX: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(val_ptr + offs)
    if IS_MAX:
        old = tl.atomic_max(ptr + offs, v)
    else:
        old = tl.atomic_min(ptr + offs, v)
    tl.store(old_ptr + offs, old)


_STORED = _f32_bits([1.0, -1.0, 0.0, -0.0, 0.0, -0.0, 1.0, -1.0, 3.0, -3.0, np.inf, -np.inf, 2.0, -2.0, 0.0, -0.0])
_OPERANDS = _f32_bits([NAN, NAN, -0.0, 0.0, 0.0, -0.0, NEG_NAN, NEG_NAN, -np.inf, np.inf, NAN, NEG_NAN,
                       -0.0, -0.0, NAN, NEG_NAN])
# Triton 3.9 (interpreter), the stored words after atomic_max / atomic_min of _OPERANDS into _STORED.
_TRITON_MAX = [0x7FC00000, 0x7FC00000, 0x0, 0x0, 0x0, 0x80000000, 0x3F800000, 0xBF800000, 0x40400000,
               0x7F800000, 0x7FC00000, 0xFF800000, 0x40000000, 0x80000000, 0x7FC00000, 0x80000000]
_TRITON_MIN = [0x3F800000, 0xBF800000, 0x80000000, 0x80000000, 0x0, 0x80000000, 0xFFC00000, 0xFFC00000,
               0xFF800000, 0xC0400000, 0x7F800000, 0xFFC00000, 0x80000000, 0xC0000000, 0x0, 0xFFC00000]


@pytest.mark.parametrize("is_max", [True, False])
def test_float_atomic_minmax_signed_zero_and_nan(device, is_max):
    ptr = device.tensor(_STORED.view(np.float32))
    old = device.zeros(16, np.float32)
    _atomic_minmax_kernel[(1,)](ptr, device.tensor(_OPERANDS.view(np.float32)), old, IS_MAX=is_max, BLOCK=16)
    got = device.numpy(ptr).view(np.uint32)
    pick = np.greater if is_max else np.less
    model = np.where(pick(_order_key(_OPERANDS), _order_key(_STORED)), _OPERANDS, _STORED)
    np.testing.assert_array_equal(got, model)
    assert got.tolist() == (_TRITON_MAX if is_max else _TRITON_MIN)
    np.testing.assert_array_equal(device.numpy(old).view(np.uint32), _STORED)


@tilejit.jit
def _contended_max_kernel(ptr, val_ptr, IS_MAX: tl.constexpr, BLOCK: tl.constexpr):
    v = tl.load(val_ptr + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK))
    if IS_MAX:
        tl.atomic_max(ptr + tl.arange(0, BLOCK) * 0, v)
    else:
        tl.atomic_min(ptr + tl.arange(0, BLOCK) * 0, v)


@pytest.mark.parametrize("is_max", [True, False])
def test_float_atomic_minmax_many_programs_one_address(device, is_max):
    """The order the programs run in does not matter: the result is the extreme in the total order."""
    rng = np.random.default_rng(5)
    for specials in ([-0.0, 0.0, NAN, NEG_NAN, np.inf, -np.inf], [-0.0, 0.0, -1e-30, 1e-30]):
        operands = rng.uniform(-2, 2, 64).astype(np.float32).view(np.uint32)
        operands[rng.choice(64, len(specials), replace=False)] = _f32_bits(specials)
        initial = _f32_bits([-0.0])
        ptr = device.tensor(initial.view(np.float32))
        _contended_max_kernel[(8,)](ptr, device.tensor(operands.view(np.float32)), IS_MAX=is_max, BLOCK=8)
        candidates = np.append(operands, initial)
        keys = _order_key(candidates)
        expected = candidates[np.argmax(keys) if is_max else np.argmin(keys)]
        assert device.numpy(ptr).view(np.uint32)[0] == expected


# -- tl.randint with 64-bit offsets and seeds -----------------------------------------------------------

_OFFSETS_64 = np.array([0, 1, 2**32 + 5, 2**40 + 17, -1, -2**33, 123456789012, 7], dtype=np.int64)


@tilejit.jit
def _randint_kernel(x_ptr, out_ptr, seed, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.randint(seed, tl.load(x_ptr + offs)))


@pytest.mark.parametrize("seed", [42, 2**35 + 3, 2**63 + 11])
@pytest.mark.parametrize("offset_dtype", ["int64", "uint64"])
def test_randint_64bit_offsets_match_triton(device, seed, offset_dtype):
    offsets = _OFFSETS_64.astype(offset_dtype)
    out = device.zeros(8, np.uint32)
    _randint_kernel[(1,)](device.tensor(offsets), out, seed, N=8)
    # Triton's counter: (offset as uint32, offset >> 32 as uint32, 0, 0); key: the seed's two halves.
    low = offsets.astype(np.uint64) & np.uint64(0xFFFFFFFF)
    high = (offsets >> (np.int64(32) if offset_dtype == "int64" else np.uint64(32))).astype(np.uint64) & np.uint64(0xFFFFFFFF)
    zero = np.zeros(8, np.uint64)
    expected = philox4x32([low, high, zero, zero], (seed & 0xFFFFFFFF, seed >> 32))[0]
    np.testing.assert_array_equal(device.numpy(out), expected)
    if seed == 2**35 + 3 and offset_dtype == "int64":   # Triton 3.9
        assert device.numpy(out).tolist() == [3695365581, 1913894139, 716263102, 2116053662, 656781269,
                                               1036441581, 4114659577, 3957941407]


def test_randint_16bit_offsets_sign_extend(device):
    offsets = np.array([0, 1, 2, 3, -1, -5, 300, 100], dtype=np.int16)
    out = device.zeros(8, np.uint32)
    _randint_kernel[(1,)](device.tensor(offsets), out, 7, N=8)
    zero = np.zeros(8, np.uint64)
    low = offsets.astype(np.int64).astype(np.uint64) & np.uint64(0xFFFFFFFF)
    np.testing.assert_array_equal(device.numpy(out), philox4x32([low, zero, zero, zero], (7, 0))[0])
    assert device.numpy(out)[:2].tolist() == [4099963437, 1747881627]   # Triton 3.9


def _philox4x64(counters, key, rounds=10):
    """Philox-4x64 (Random123) on Python ints, with the constants Triton uses for 64-bit counters."""
    mask = (1 << 64) - 1
    c0, c1, c2, c3 = counters
    k0, k1 = key
    for _ in range(rounds):
        prod_a, prod_b = 0xD2E7470EE14C6C93 * c0, 0xCA5A826395121157 * c2
        c0, c1, c2, c3 = (prod_b >> 64) ^ c1 ^ k0, prod_b & mask, (prod_a >> 64) ^ c3 ^ k1, prod_a & mask
        k0, k1 = (k0 + 0x9E3779B97F4A7C15) & mask, (k1 + 0xBB67AE8584CAA73B) & mask
    return c0, c1, c2, c3


@tilejit.jit
def _philox64_kernel(x_ptr, out_ptr, seed, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    a, b, c, d = tl.philox(seed, x, x, x, x)
    tl.store(out_ptr + offs, a)
    tl.store(out_ptr + N + offs, b)
    tl.store(out_ptr + 2 * N + offs, c)
    tl.store(out_ptr + 3 * N + offs, d)


def test_philox_on_64bit_counters_is_philox4x64(device):
    seed = 2**35 + 3
    out = device.zeros(32, np.uint64)
    _philox64_kernel[(1,)](device.tensor(_OFFSETS_64), out, seed, N=8)
    got = device.numpy(out).reshape(4, 8)
    for i, x in enumerate(_OFFSETS_64.astype(np.uint64).tolist()):
        assert tuple(int(w) for w in got[:, i]) == _philox4x64((x, x, x, x), (seed, 0))
    assert int(got[0, 0]) == 14350474539064601441   # Triton 3.9


# -- tl.dot: dimensions below 16 -----------------------------------------------------------------------

@tilejit.jit
def _dot_kernel(a_ptr, b_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, PRECISION: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b, input_precision=PRECISION))


@pytest.mark.parametrize("dtype", ["float16", "float32", "int8"])
@pytest.mark.parametrize("M,N,K", [(1, 16, 16), (16, 1, 16), (16, 16, 1), (2, 4, 8), (8, 8, 8), (32, 2, 16)])
def test_dot_dimensions_below_16(device, dtype, M, N, K):
    rng = np.random.default_rng(M * 100 + N * 10 + K)
    if dtype == "int8":
        a, b = rng.integers(-100, 100, (M, K)).astype(np.int8), rng.integers(-100, 100, (K, N)).astype(np.int8)
        expected, out_dtype = a.astype(np.int32) @ b.astype(np.int32), np.int32
    else:
        a, b = rng.uniform(-1, 1, (M, K)).astype(dtype), rng.uniform(-1, 1, (K, N)).astype(dtype)
        expected, out_dtype = a.astype(np.float64) @ b.astype(np.float64), np.float32
    out = device.zeros((M, N), out_dtype)
    _dot_kernel[(1,)](device.tensor(a), device.tensor(b), out, M=M, N=N, K=K,
                      PRECISION="ieee" if dtype == "float32" else None)
    if dtype == "int8":
        np.testing.assert_array_equal(device.numpy(out), expected)
    else:
        np.testing.assert_allclose(device.numpy(out), expected, rtol=1e-3, atol=1e-3)


# -- tl.dot: fp32 input precisions --------------------------------------------------------------------

def _truncate_tf32(x):
    return (np.asarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def _round_tf32_away(x):
    bits = np.asarray(x, np.float32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


def _tf32_operand(rng, shape):
    """fp32 values whose low 13 mantissa bits are random, so truncation, rounding and full precision all
    differ, and whose tf32x3 'small' part sometimes needs more than 11 bits."""
    x = rng.uniform(0.5, 4, shape).astype(np.float32) * rng.choice([-1, 1], shape).astype(np.float32)
    return x


def _needs_tf32_lowering(device, request, precision="tf32"):
    """CUDA runs tf32 on mma.sync .tf32 and tf32x3 / bf16x3 / bf16x6 as chains of tf32 / bf16 dots
    (`tritongpu-split-f32-dots`); the AMD backend's precisions are Triton's HIP list."""
    if device.is_gpu and device.name == "hip":
        pytest.skip("tf32 is NVIDIA's (and CDNA3's): the AMD backend's precisions are not set yet")


@pytest.mark.parametrize("precision", ["tf32", "tf32x3", "bf16x3", "bf16x6", "ieee"])
def test_fp32_dot_input_rounding_matches_tensor_cores(device, precision, request):
    """With B the identity every output is one product, so the result is the A the hardware read."""
    if precision != "ieee":
        _needs_tf32_lowering(device, request, precision)
    rng = np.random.default_rng(3)
    a = _tf32_operand(rng, (16, 16))
    out = device.zeros((16, 16), np.float32)
    _dot_kernel[(1,)](device.tensor(a), device.tensor(np.eye(16, dtype=np.float32)), out, M=16, N=16, K=16,
                      PRECISION=precision)
    if precision == "tf32":
        expected = _truncate_tf32(a)            # mma .tf32 ignores the low 13 bits
    elif precision == "tf32x3":
        big = _round_tf32_away(a)               # cvt.rna.tf32.f32
        expected = big + _truncate_tf32(a - big)
    elif precision == "ieee":
        expected = a
    else:
        hi = round_to_bf16(a)
        mid = round_to_bf16(a - hi)
        lo = round_to_bf16((a - hi) - mid)
        expected = (hi + mid) if precision == "bf16x3" else hi + (mid + lo)
    got = device.numpy(out)
    np.testing.assert_array_equal(got, expected.astype(np.float32))
    if precision in ("tf32", "tf32x3", "bf16x3"):
        assert (got != a).any()   # the inputs really carried bits that this precision drops


@pytest.mark.parametrize("precision,rtol", [("tf32", 5e-3), ("tf32x3", 2e-6), ("bf16x3", 2e-5),
                                            ("bf16x6", 2e-6), ("ieee", 2e-6)])
def test_fp32_dot_precisions_error_bounds(device, precision, rtol):
    if precision != "ieee" and device.is_gpu and device.name == "hip":
        pytest.skip("tf32 is NVIDIA's (and CDNA3's): the AMD backend's precisions are not set yet")
    rng = np.random.default_rng(11)
    a, b = rng.uniform(0.5, 1, (16, 32)).astype(np.float32), rng.uniform(0.5, 1, (32, 16)).astype(np.float32)
    out = device.zeros((16, 16), np.float32)
    _dot_kernel[(1,)](device.tensor(a), device.tensor(b), out, M=16, N=16, K=32, PRECISION=precision)
    np.testing.assert_allclose(device.numpy(out), a.astype(np.float64) @ b.astype(np.float64), rtol=rtol)


@tilejit.jit
def _default_precision_dot_kernel(a_ptr, b_ptr, out_ptr, ALLOW_TF32: tl.constexpr):
    r = tl.arange(0, 16)
    a = tl.load(a_ptr + r[:, None] * 16 + r[None, :])
    b = tl.load(b_ptr + r[:, None] * 16 + r[None, :])
    if ALLOW_TF32 == "default":
        c = tl.dot(a, b)
    else:
        c = tl.dot(a, b, allow_tf32=ALLOW_TF32 == "true")
    tl.store(out_ptr + r[:, None] * 16 + r[None, :], c)


@pytest.mark.parametrize("allow_tf32", ["default", "true", "false"])
def test_fp32_dot_default_is_tf32_unless_disallowed(device, allow_tf32, request):
    if allow_tf32 != "false":
        _needs_tf32_lowering(device, request)
    a = _tf32_operand(np.random.default_rng(4), (16, 16))
    out = device.zeros((16, 16), np.float32)
    _default_precision_dot_kernel[(1,)](device.tensor(a), device.tensor(np.eye(16, dtype=np.float32)), out,
                                        ALLOW_TF32=allow_tf32)
    np.testing.assert_array_equal(device.numpy(out), a if allow_tf32 == "false" else _truncate_tf32(a))


@pytest.mark.parametrize("knob", ["TRITON_F32_DEFAULT", "TILEJIT_F32_DEFAULT"])
def test_f32_default_knob_sets_the_precision(monkeypatch, knob):
    """TRITON_F32_DEFAULT overrides even allow_tf32=False (as in Triton) and is part of the cache key."""
    def ttir(allow_tf32):
        sig = {"a_ptr": "*fp32", "b_ptr": "*fp32", "out_ptr": "*fp32", "ALLOW_TF32": "constexpr"}
        src = tilejit.ASTSource(_default_precision_dot_kernel, sig, {"ALLOW_TF32": allow_tf32})
        return tilejit.compile(src, target="interpreter").asm["ttir"]

    monkeypatch.setenv(knob, "ieee")
    assert 'inputPrecision = "ieee"' in ttir("default")
    monkeypatch.setenv(knob, "tf32x3")
    assert 'inputPrecision = "tf32x3"' in ttir("false")
    monkeypatch.delenv(knob)
    assert 'inputPrecision = "tf32"' in ttir("default")
    assert 'inputPrecision = "ieee"' in ttir("false")


def test_dot_rejects_unknown_precision_and_both_arguments():
    sig = {"a_ptr": "*fp32", "b_ptr": "*fp32", "out_ptr": "*fp32", "M": "constexpr", "N": "constexpr",
           "K": "constexpr", "PRECISION": "constexpr"}
    with pytest.raises(tilejit.CompilationError, match="input_precision must be one of"):
        tilejit.compile(tilejit.ASTSource(_dot_kernel, sig, {"M": 16, "N": 16, "K": 16, "PRECISION": "fp64"}),
                        target="interpreter")
    with pytest.raises(tilejit.CompilationError, match="only one of input_precision and allow_tf32"):
        tilejit.compile(tilejit.ASTSource(_both_precision_kernel, {"a_ptr": "*fp32"}, {}), target="interpreter")


@tilejit.jit
def _both_precision_kernel(a_ptr):
    r = tl.arange(0, 16)
    a = tl.load(a_ptr + r[:, None] * 16 + r[None, :])
    tl.store(a_ptr + r[:, None] * 16 + r[None, :], tl.dot(a, a, input_precision="ieee", allow_tf32=True))


# -- unary minus and C division, as Triton ------------------------------------------------------------

@tilejit.jit
def _negate_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, -tl.load(x_ptr + offs))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_float_negation_flips_the_sign_bit(device, dtype):
    """-x is a negation (Triton emits arith.negf), not 0 - x: -(+0.0) is -0.0.

    A NaN stays a NaN; its sign is not checked, since PTX's neg (what Triton's fneg becomes on an
    NVIDIA GPU) leaves the sign of a NaN result unspecified."""
    x = np.array([0.0, -0.0, 1.5, np.nan, np.inf, -2.0, 1e-45, -1e-45], dtype=dtype)
    out = device.zeros(8, dtype)
    _negate_kernel[(1,)](device.tensor(x), out, BLOCK=8)
    got = device.numpy(out)
    number = ~np.isnan(x)
    np.testing.assert_array_equal(np.signbit(got[number]), ~np.signbit(x[number]))
    np.testing.assert_array_equal(got, -x)


@pytest.mark.parametrize("dtype,values,expected", [
    ("int8", [-128, 127, 0, -1, 1, 5, -5, 100], [-128, -127, 0, 1, -1, -5, 5, -100]),   # Triton 3.9
    ("int32", [-2**31, 2**31 - 1, 0, -1, 1, 5, -5, 100], [-2**31, -2**31 + 1, 0, 1, -1, -5, 5, -100]),
    ("uint8", [0, 1, 2, 255, 128, 7, 100, 200], [0, 255, 254, 1, 128, 249, 156, 56]),
])
def test_integer_negation_wraps(device, dtype, values, expected):
    out = device.zeros(8, dtype)
    _negate_kernel[(1,)](device.tensor(np.array(values, dtype=dtype)), out, BLOCK=8)
    assert device.numpy(out).tolist() == expected


@tilejit.jit
def _divmod_kernel(x_ptr, y_ptr, q_ptr, r_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x, y = tl.load(x_ptr + offs), tl.load(y_ptr + offs)
    tl.store(q_ptr + offs, x // y)
    tl.store(r_ptr + offs, x % y)


def test_integer_division_by_negative_numbers_is_c_division(device):
    x = np.array([7, -7, 7, -7, -128, 5, -1, 0], dtype=np.int8)
    y = np.array([2, 2, -2, -2, -1, -7, 3, -3], dtype=np.int8)
    q, r = device.zeros(8, np.int8), device.zeros(8, np.int8)
    _divmod_kernel[(1,)](device.tensor(x), device.tensor(y), q, r, BLOCK=8)
    assert device.numpy(q).tolist() == [3, -3, -3, 3, -128, 0, 0, 0]   # Triton 3.9
    assert device.numpy(r).tolist() == [1, -1, 1, -1, 0, 5, -1, 0]
