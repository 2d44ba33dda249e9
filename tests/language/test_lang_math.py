"""Element-wise math, where/maximum/minimum/clamp (with NaN), and IEEE edge cases."""
import numpy as np
import pytest

import tilejit
import tilejit.language as tl

RNG = np.random.default_rng(5)


@tilejit.jit
def _unary_math_kernel(x_ptr, out_ptr, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if FN == "exp":
        y = tl.exp(x)
    elif FN == "exp2":
        y = tl.exp2(x)
    elif FN == "log":
        y = tl.log(x)
    elif FN == "log2":
        y = tl.math.log2(x)
    elif FN == "sqrt":
        y = tl.sqrt(x)
    elif FN == "sqrt_rn":
        y = tl.sqrt_rn(x)
    elif FN == "rsqrt":
        y = tl.rsqrt(x)
    elif FN == "sin":
        y = tl.sin(x)
    elif FN == "cos":
        y = tl.math.cos(x)
    elif FN == "abs":
        y = tl.abs(x)
    elif FN == "floor":
        y = tl.floor(x)
    elif FN == "ceil":
        y = tl.ceil(x)
    elif FN == "erf":
        y = tl.erf(x)
    elif FN == "sigmoid":
        y = tl.sigmoid(x)
    else:
        tl.static_assert(False, "unknown FN")
    tl.store(out_ptr + offs, y, mask=mask)


def _erf(x):
    from math import erf
    return np.array([erf(v) for v in x.astype(np.float64)])


MATH = {
    "exp": (np.exp, (-10, 10)), "exp2": (np.exp2, (-10, 10)), "log": (np.log, (1e-3, 100)),
    "log2": (np.log2, (1e-3, 100)), "sqrt": (np.sqrt, (0, 100)), "sqrt_rn": (np.sqrt, (0, 100)),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (1e-2, 100)), "sin": (np.sin, (-6, 6)), "cos": (np.cos, (-6, 6)),
    "abs": (np.abs, (-5, 5)), "floor": (np.floor, (-5, 5)), "ceil": (np.ceil, (-5, 5)), "erf": (_erf, (-3, 3)),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), (-10, 10)),
}


@pytest.mark.parametrize("fn", sorted(MATH))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_unary_math(device, fn, dtype):
    reference, (low, high) = MATH[fn]
    x = RNG.uniform(low, high, 100).astype(dtype)
    out = device.zeros(100, dtype)
    _unary_math_kernel[(1,)](device.tensor(x), out, 100, FN=fn, BLOCK=128)
    exact = fn in ("abs", "floor", "ceil", "sqrt_rn") or (fn == "sqrt" and dtype == "float64")
    expected = reference(x.astype(np.float64)).astype(dtype)
    if exact:
        np.testing.assert_array_equal(device.numpy(out), expected)
    else:  # GPU fast-math functions are within a few ulp
        np.testing.assert_allclose(device.numpy(out), expected, rtol=2e-6 if dtype == "float32" else 1e-12,
                                   atol=1e-6 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_abs_of_integers(device, dtype):
    x = RNG.integers(-100, 100, 32).astype(dtype)
    out = device.zeros(32, dtype)
    _unary_math_kernel[(1,)](device.tensor(x), out, 32, FN="abs", BLOCK=32)
    np.testing.assert_array_equal(device.numpy(out), np.abs(x))


@tilejit.jit
def _ternary_kernel(x_ptr, y_ptr, z_ptr, out_ptr, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    z = tl.load(z_ptr + offs)
    if FN == "fma":
        r = tl.fma(x, y, z)
    elif FN == "fdiv":
        r = tl.fdiv(x, y)
    elif FN == "div_rn":
        r = tl.div_rn(x, y)
    elif FN == "where":
        r = tl.where(x > y, x, z)
    elif FN == "maximum":
        r = tl.maximum(x, y)
    elif FN == "minimum":
        r = tl.minimum(x, y)
    elif FN == "maximum_nan":
        r = tl.maximum(x, y, propagate_nan=tl.PropagateNan.ALL)
    elif FN == "minimum_nan":
        r = tl.minimum(x, y, tl.PropagateNan.ALL)
    elif FN == "clamp":
        r = tl.clamp(x, z, z + 1.0)
    else:
        tl.static_assert(False, "unknown FN")
    tl.store(out_ptr + offs, r)


def _ternary(device, fn, x, y, z):
    out = device.zeros(x.shape, x.dtype)
    _ternary_kernel[(1,)](device.tensor(x), device.tensor(y), device.tensor(z), out, FN=fn, BLOCK=x.size)
    return device.numpy(out)


def test_fma_fdiv_div_rn_where(device):
    x, y, z = (RNG.uniform(0.5, 4, 32).astype(np.float32) for _ in range(3))
    np.testing.assert_allclose(_ternary(device, "fma", x, y, z), x * y + z, rtol=1e-6)
    np.testing.assert_allclose(_ternary(device, "fdiv", x, y, z), x / y, rtol=3e-6)
    np.testing.assert_array_equal(_ternary(device, "div_rn", x, y, z), x / y)  # IEEE division
    np.testing.assert_array_equal(_ternary(device, "where", x, y, z), np.where(x > y, x, z))


def test_maximum_minimum_and_nan_propagation(device):
    x = np.array([1.0, np.nan, 3.0, np.nan, -0.0, 2.0, -np.inf, 5.0], dtype=np.float32)
    y = np.array([2.0, 1.0, np.nan, np.nan, 0.0, 2.0, 1.0, np.inf], dtype=np.float32)
    z = np.zeros(8, np.float32)
    # PropagateNan.ALL: NaN in either input gives NaN
    np.testing.assert_array_equal(_ternary(device, "maximum_nan", x, y, z), np.maximum(x, y))
    np.testing.assert_array_equal(_ternary(device, "minimum_nan", x, y, z), np.minimum(x, y))
    # default (NONE): values without NaN are exact; a NaN in one input may give either
    plain_max = _ternary(device, "maximum", x, y, z)
    plain_min = _ternary(device, "minimum", x, y, z)
    clean = ~(np.isnan(x) | np.isnan(y))
    np.testing.assert_array_equal(plain_max[clean], np.maximum(x, y)[clean])
    np.testing.assert_array_equal(plain_min[clean], np.minimum(x, y)[clean])


def test_clamp(device):
    x = np.array([-3.0, 0.2, 0.7, 5.0, 1.0, 1.5, -1.0, 2.5], dtype=np.float32)
    lo = np.array([0.0, 0.0, 0.0, 0.0, 1.0, 1.0, -2.0, 2.0], dtype=np.float32)
    np.testing.assert_array_equal(_ternary(device, "clamp", x, x, lo), np.clip(x, lo, lo + 1))


@tilejit.jit
def _umulhi_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.umulhi(tl.load(x_ptr + offs), tl.load(y_ptr + offs)))


@pytest.mark.parametrize("dtype", ["uint32", "int32"])
def test_umulhi(device, dtype):
    x = RNG.integers(0, 2**32, 32, dtype=np.uint64).astype(np.uint32).view(dtype)
    y = RNG.integers(0, 2**32, 32, dtype=np.uint64).astype(np.uint32).view(dtype)
    out = device.zeros(32, dtype)
    _umulhi_kernel[(1,)](device.tensor(x), device.tensor(y), out, BLOCK=32)
    # umulhi multiplies as unsigned whatever the signedness (Triton's tt.mulhiui)
    wide = x.view(np.uint32).astype(np.uint64) * y.view(np.uint32).astype(np.uint64)
    np.testing.assert_array_equal(device.numpy(out), (wide >> np.uint64(32)).astype(np.uint32).view(dtype))


@tilejit.jit
def _ieee_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs * 4 + 0, x * 2.0)
    tl.store(out_ptr + offs * 4 + 1, x - x)
    tl.store(out_ptr + offs * 4 + 2, 1.0 / x)
    tl.store(out_ptr + offs * 4 + 3, -x)


def test_nan_inf_signed_zero_and_denormals(device):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -3e-39, 1.0], dtype=np.float32)
    out = device.zeros(32, np.float32)
    _ieee_kernel[(1,)](device.tensor(x), out, BLOCK=8)
    got = device.numpy(out).reshape(8, 4)
    with np.errstate(all="ignore"):
        expected = np.stack([x * 2, x - x, np.float32(1) / x, -x], axis=1)
    # compare bit patterns (signed zeros) except NaN payloads; denormals are not flushed
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    finite = ~np.isnan(expected)
    np.testing.assert_array_equal(got[finite].view(np.int32), expected[finite].view(np.int32))


@tilejit.jit
def _sum_with_nan_kernel(x_ptr, out_ptr):
    x = tl.load(x_ptr + tl.arange(0, 8))
    tl.store(out_ptr, tl.sum(x))
    tl.store(out_ptr + 1, tl.max(x))


def test_nan_propagates_through_sum(device):
    x = np.array([1, 2, np.nan, 4, 5, 6, 7, 8], dtype=np.float32)
    out = device.zeros(2, np.float32)
    _sum_with_nan_kernel[(1,)](device.tensor(x), out)
    assert np.isnan(device.numpy(out)[0])
