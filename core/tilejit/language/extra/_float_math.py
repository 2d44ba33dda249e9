"""libdevice's floating-point functions: one `math` op where TTIR has it, compositions of existing
ops otherwise. fp32 compositions are evaluated in fp64 and rounded once, which makes them correctly
rounded or within an ulp; fp64 compositions keep fp64 and are within a few ulp, except the special
functions at the end (erfc, erfinv, gamma), whose fp64 accuracy is stated in docs/language.md.
"""
from __future__ import annotations

from ...runtime.jit import jit
from .. import core
from ._common import bits, expect, m_cbrt, m_copysign, m_fmod, m_log1p, m_pow, m_round, step, wide

_PI = core.constexpr(3.141592653589793)
_LN2 = core.constexpr(0.6931471805599453)
_SQRT2 = core.constexpr(1.4142135623730951)
_SQRT_PI = core.constexpr(1.7724538509055159)
_TWO_OVER_SQRT_PI = core.constexpr(1.1283791670955126)


# ------------------------------------------------------------------------------------------------
# rounding to integers, classification, bits
# ------------------------------------------------------------------------------------------------

@jit
def rint(arg0):
    """Round to the nearest integer, ties to even (the IEEE default rounding)."""
    expect("rint", "fp32 fp64", arg0)
    f = core.floor(arg0)
    d = arg0 - f  # exact: f and arg0 share the integer part
    half_f = f * 0.5
    even = core.floor(half_f) == half_f
    r = core.where(d > 0.5, f + 1, core.where(d < 0.5, f, core.where(even, f, f + 1)))
    return m_copysign(r, arg0)  # rint(-0.3) is -0.0


@jit
def nearbyint(arg0):
    """Same as rint (no floating-point exceptions exist in a kernel)."""
    return rint(arg0)


@jit
def llrint(arg0):
    return rint(arg0).to(core.int64)


@jit
def llround(arg0):
    return m_round(arg0).to(core.int64)


@jit
def isnan(arg0):
    expect("isnan", "fp32 fp64", arg0)
    return arg0 != arg0


@jit
def isinf(arg0):
    expect("isinf", "fp32 fp64", arg0)
    return core.abs(arg0) == float("inf")


@jit
def finitef(arg0):
    expect("finitef", "fp32", arg0)
    return core.abs(arg0) < float("inf")


@jit
def isfinited(arg0):
    expect("isfinited", "fp64", arg0)
    return core.abs(arg0) < float("inf")


@jit
def signbit(arg0):
    """1 (int32) where the sign bit is set (also for -0.0 and negative NaNs), else 0."""
    expect("signbit", "fp32 fp64", arg0)
    return (bits(arg0) < 0).to(core.int32)


@jit
def nextafter(arg0, arg1):
    """The float next to arg0 in the direction of arg1."""
    expect("nextafter", "fp32 fp64", arg0, arg1)
    moved = step(arg0, arg1 > arg0)
    out = core.where(arg0 == arg1, arg1, moved)
    return core.where((arg0 != arg0) | (arg1 != arg1), arg0 + arg1, out)


@jit
def ilogb(arg0):
    """The unbiased exponent as int32; INT_MIN for 0 and NaN, INT_MAX for infinities (CUDA's values)."""
    expect("ilogb", "fp32 fp64", arg0)
    if arg0.dtype == core.float64:
        scaled = arg0 * 18446744073709551616.0  # 2**64 lifts subnormals into the normal range
        e = ((bits(arg0) >> 52) & 0x7FF).to(core.int32) - 1023
        e_scaled = ((bits(scaled) >> 52) & 0x7FF).to(core.int32) - 1087
        e = core.where(e == -1023, e_scaled, e)
    else:
        scaled = arg0 * 18446744073709551616.0
        e = ((bits(arg0) >> 23) & 0xFF) - 127
        e_scaled = ((bits(scaled) >> 23) & 0xFF) - 191
        e = core.where(e == -127, e_scaled, e)
    e = core.where(core.abs(arg0) == float("inf"), 2147483647, e)
    return core.where((arg0 == 0) | (arg0 != arg0), -2147483648, e)


@jit
def logb(arg0):
    """The unbiased exponent as a float; -inf for 0, +inf for infinities."""
    e = ilogb(arg0).to(arg0.dtype)
    e = core.where(arg0 == 0, -float("inf"), e)
    e = core.where(core.abs(arg0) == float("inf"), float("inf"), e)
    return core.where(arg0 != arg0, arg0, e)


@jit
def _pow2(k, like):
    """2**k as `like`'s float type, for k in the normal exponent range."""
    if like.dtype == core.float64:
        out = ((k.to(core.int64) + 1023) << 52).to(core.float64, bitcast=True)
    else:
        out = ((k + 127) << 23).to(core.float32, bitcast=True)
    return out


@jit
def ldexp(arg0, arg1):
    """arg0 * 2**arg1 (arg1 an int32), in exact power-of-two steps."""
    expect("ldexp", "fp32 fp64", arg0)
    expect("ldexp", "int32", arg1)
    if arg0.dtype == core.float64:
        n = core.minimum(core.maximum(arg1, -2200), 2200)
        lo, hi = -1022, 1023
    else:
        n = core.minimum(core.maximum(arg1, -400), 400)
        lo, hi = -126, 127
    x = arg0
    for _ in core.static_range(4):
        k = core.minimum(core.maximum(n, lo), hi)
        x = x * _pow2(k, arg0)
        n = n - k
    return x


@jit
def scalbn(arg0, arg1):
    return ldexp(arg0, arg1)


@jit
def saturatef(arg0):
    """Clamp to [0, 1]; NaN gives 0."""
    expect("saturatef", "fp32", arg0)
    return core.where(arg0 > 0, core.minimum(arg0, 1.0), 0.0)


@jit
def fdim(arg0, arg1):
    """arg0 - arg1 where arg0 > arg1, else +0 (NaN in, NaN out)."""
    expect("fdim", "fp32 fp64", arg0, arg1)
    out = core.where(arg0 > arg1, arg0 - arg1, 0.0)
    return core.where((arg0 != arg0) | (arg1 != arg1), arg0 + arg1, out)


@jit
def remainder(arg0, arg1):
    """IEEE remainder: arg0 - n * arg1 with n = arg0 / arg1 rounded to nearest even, computed exactly
    from fmod."""
    expect("remainder", "fp32 fp64", arg0, arg1)
    r = m_fmod(arg0, arg1)
    ay = core.abs(arg1)
    n_is_odd = core.abs(m_fmod(arg0, ay + ay)) >= ay
    ar = core.abs(r)
    half = ay * 0.5
    adjust = (ar > half) | ((ar == half) & n_is_odd)
    return core.where(adjust, r - m_copysign(ay, r), r)


@jit
def rcp64h(arg0):
    """1 / arg0 with the low 32 bits of the result cleared (the high word, as __nv_rcp64h)."""
    expect("rcp64h", "fp64", arg0)
    r = 1.0 / arg0
    return (bits(r) & -4294967296).to(core.float64, bitcast=True)


# ------------------------------------------------------------------------------------------------
# elementary functions composed from math ops
# ------------------------------------------------------------------------------------------------

@jit
def exp10(arg0):
    expect("exp10", "fp32 fp64", arg0)
    return m_pow(10.0, arg0)


@jit
def _sinpi_reduced(t):
    """sin(pi * t) for t in [-1, 1], reduced to [-0.5, 0.5] exactly so that integers give 0."""
    t = core.where(core.abs(t) > 0.5, m_copysign(1.0, t) - t, t)
    return core.sin(_PI * t)


@jit
def sinpi(arg0):
    expect("sinpi", "fp32 fp64", arg0)
    x = wide(arg0)
    r = x - 2.0 * rint(x * 0.5)  # exact, in [-1, 1]
    return _sinpi_reduced(r).to(arg0.dtype)


@jit
def cospi(arg0):
    expect("cospi", "fp32 fp64", arg0)
    x = wide(arg0)
    a = core.abs(x - 2.0 * rint(x * 0.5))  # in [0, 1]
    return _sinpi_reduced(0.5 - a).to(arg0.dtype)


@jit
def acosh(arg0):
    expect("acosh", "fp32 fp64", arg0)
    x = wide(arg0)
    t = x - 1.0
    small = m_log1p(t + core.sqrt(t * (t + 2.0)))
    return core.where(x > 1e150, core.log(x) + _LN2, small).to(arg0.dtype)


@jit
def asinh(arg0):
    expect("asinh", "fp32 fp64", arg0)
    x = wide(arg0)
    a = core.abs(x)
    small = m_log1p(a + a * a / (1.0 + core.sqrt(1.0 + a * a)))
    out = core.where(a > 1e150, core.log(a) + _LN2, small)
    return m_copysign(out, x).to(arg0.dtype)


@jit
def atanh(arg0):
    expect("atanh", "fp32 fp64", arg0)
    x = wide(arg0)
    return (0.5 * m_log1p(2.0 * x / (1.0 - x))).to(arg0.dtype)


@jit
def _hypot_wide(a, b):
    """sqrt(a*a + b*b) for fp64 a, b without overflow or underflow of the squares."""
    a = core.abs(a)
    b = core.abs(b)
    big = core.maximum(a, b)
    small = core.minimum(a, b)
    q = small / core.where(big == 0, 1.0, big)
    out = big * core.sqrt(1.0 + q * q)
    inf = (a == float("inf")) | (b == float("inf"))
    return core.where(inf, float("inf"), out)


@jit
def hypot(arg0, arg1):
    expect("hypot", "fp32 fp64", arg0, arg1)
    if arg0.dtype == core.float32:
        x = wide(arg0)
        y = wide(arg1)
        out = core.sqrt(x * x + y * y).to(core.float32)
    else:
        out = _hypot_wide(arg0, arg1)
    return out


@jit
def rhypot(arg0, arg1):
    if arg0.dtype == core.float32:
        x = wide(arg0)
        y = wide(arg1)
        out = (1.0 / core.sqrt(x * x + y * y)).to(core.float32)
    else:
        out = 1.0 / hypot(arg0, arg1)
    return out


@jit
def norm3d(arg0, arg1, arg2):
    expect("norm3d", "fp32 fp64", arg0, arg1, arg2)
    return _hypot_wide(_hypot_wide(wide(arg0), wide(arg1)), wide(arg2)).to(arg0.dtype)


@jit
def rnorm3d(arg0, arg1, arg2):
    expect("rnorm3d", "fp32 fp64", arg0, arg1, arg2)
    return (1.0 / _hypot_wide(_hypot_wide(wide(arg0), wide(arg1)), wide(arg2))).to(arg0.dtype)


@jit
def norm4d(arg0, arg1, arg2, arg3):
    expect("norm4d", "fp32 fp64", arg0, arg1, arg2, arg3)
    return _hypot_wide(_hypot_wide(wide(arg0), wide(arg1)), _hypot_wide(wide(arg2), wide(arg3))).to(arg0.dtype)


@jit
def rnorm4d(arg0, arg1, arg2, arg3):
    expect("rnorm4d", "fp32 fp64", arg0, arg1, arg2, arg3)
    norm = _hypot_wide(_hypot_wide(wide(arg0), wide(arg1)), _hypot_wide(wide(arg2), wide(arg3)))
    return (1.0 / norm).to(arg0.dtype)


@jit
def rcbrt(arg0):
    expect("rcbrt", "fp32 fp64", arg0)
    return (1.0 / m_cbrt(wide(arg0))).to(arg0.dtype)


# ------------------------------------------------------------------------------------------------
# error function family, normal distribution, gamma
# ------------------------------------------------------------------------------------------------

@jit
def _erfcx_tail(z):
    """exp(z*z) * erfc(z) for z >= 0: the Chebyshev fit of Numerical Recipes' erfcc (relative error
    below 1.2e-7 everywhere), in which exp(-z*z) cancels."""
    t = 1.0 / (1.0 + 0.5 * z)
    p: core.constexpr = 0.17087277  # constexpr: the coefficient stays exact in fp64
    p = -0.82215223 + t * p
    p = 1.48851587 + t * p
    p = -1.13520398 + t * p
    p = 0.27886807 + t * p
    p = -0.18628806 + t * p
    p = 0.09678418 + t * p
    p = 0.37409196 + t * p
    p = 1.00002368 + t * p
    p = -1.26551223 + t * p
    return t * core.exp(p)


@jit
def _erfc_wide(x):
    small = 1.0 - core.erf(x)  # no cancellation while erfc(x) > 0.48
    z = core.abs(x)
    tail = core.exp(-z * z) * _erfcx_tail(z)
    tail = core.where(x < 0, 2.0 - tail, tail)
    return core.where(core.abs(x) < 0.5, small, tail)


@jit
def _erfcx_wide(x):
    return core.where(x >= 0.5, _erfcx_tail(core.maximum(x, 0.0)), core.exp(x * x) * _erfc_wide(x))


@jit
def erfc(arg0):
    expect("erfc", "fp32 fp64", arg0)
    return _erfc_wide(wide(arg0)).to(arg0.dtype)


@jit
def erfcx(arg0):
    expect("erfcx", "fp32 fp64", arg0)
    return _erfcx_wide(wide(arg0)).to(arg0.dtype)


@jit
def _erfinv_guess(y):
    """Winitzki's closed-form approximation of erfinv (relative error ~2e-3)."""
    w = core.log((1.0 - y) * (1.0 + y))
    c: core.constexpr = 4.3307467508569  # 2 / (pi * 0.147)
    u = c + 0.5 * w
    return m_copysign(core.sqrt(core.sqrt(u * u - w / 0.147) - u), y)


@jit
def _erfcinv_positive(y):
    """erfcinv(y) for y in (0, 1] (x >= 0): Newton steps on log(erfc(x)) = log(y), which stay well
    conditioned down to the smallest y (erfc(x) = exp(-x*x) * erfcx(x))."""
    t = core.sqrt(-core.log(y))
    tail = core.sqrt(core.maximum(-core.log(y * t * _SQRT_PI), 0.0))
    x = core.where(y < 0.0625, tail, _erfinv_guess(1.0 - y))
    log_y = core.log(y)
    for _ in core.static_range(5):
        cx = _erfcx_wide(x)
        f = -x * x + core.log(cx) - log_y
        x = x + f * (_SQRT_PI * 0.5) * cx
    return x


@jit
def _erfinv_newton(y):
    """erfinv(y) for |y| <= 0.9999: Newton steps on erf(x) = y (quadratic from a 2e-3 start; erf's
    slope stays above 5e-4 there, so fp64 keeps ~1e-13)."""
    x = _erfinv_guess(y)
    for _ in core.static_range(4):
        x = x - (core.erf(x) - y) / (_TWO_OVER_SQRT_PI * core.exp(-x * x))
    return x


@jit
def _erfcinv_wide(y):
    upper = y > 1.0
    tail = _erfcinv_positive(core.where(upper, 2.0 - y, y))
    tail = core.where(upper, -tail, tail)
    c = 1.0 - y
    x = core.where(core.abs(c) <= 0.9999, _erfinv_newton(core.minimum(core.maximum(c, -0.9999), 0.9999)), tail)
    x = core.where(y == 0, float("inf"), core.where(y == 2, -float("inf"), x))
    return core.where((y < 0) | (y > 2) | (y != y), float("nan"), x)


@jit
def _erfinv_wide(y):
    a = core.abs(y)
    x = _erfinv_newton(core.minimum(core.maximum(y, -0.9999), 0.9999))
    far = m_copysign(_erfcinv_positive(core.maximum(1.0 - a, 1e-300)), y)
    x = core.where(a > 0.9999, far, x)
    x = core.where(a == 1, m_copysign(float("inf"), y), x)
    return core.where((a > 1) | (y != y), float("nan"), x)


@jit
def erfinv(arg0):
    expect("erfinv", "fp32 fp64", arg0)
    return _erfinv_wide(wide(arg0)).to(arg0.dtype)


@jit
def erfcinv(arg0):
    expect("erfcinv", "fp32 fp64", arg0)
    return _erfcinv_wide(wide(arg0)).to(arg0.dtype)


@jit
def normcdf(arg0):
    expect("normcdf", "fp32 fp64", arg0)
    return (0.5 * _erfc_wide(-wide(arg0) / _SQRT2)).to(arg0.dtype)


@jit
def normcdfinv(arg0):
    expect("normcdfinv", "fp32 fp64", arg0)
    return (-_SQRT2 * _erfcinv_wide(2.0 * wide(arg0))).to(arg0.dtype)


@jit
def _lgamma_lanczos(z):
    """log(Gamma(z)) for z >= 0.5: Lanczos' approximation (g = 7, 9 terms; ~1e-15 relative)."""
    z = z - 1.0
    s: core.constexpr = 0.99999999999980993  # constexpr: exact in fp64 (a plain local is an fp32 tensor)
    s += 676.5203681218851 / (z + 1.0)
    s += -1259.1392167224028 / (z + 2.0)
    s += 771.32342877765313 / (z + 3.0)
    s += -176.61502916214059 / (z + 4.0)
    s += 12.507343278686905 / (z + 5.0)
    s += -0.13857109526572012 / (z + 6.0)
    s += 9.9843695780195716e-6 / (z + 7.0)
    s += 1.5056327351493116e-7 / (z + 8.0)
    t = z + 7.5
    return 0.91893853320467274 + (z + 0.5) * core.log(t) - t + core.log(s)


@jit
def _sinpi_wide(x):
    r = x - 2.0 * rint(x * 0.5)
    return _sinpi_reduced(r)


@jit
def lgamma(arg0):
    expect("lgamma", "fp32 fp64", arg0)
    x = wide(arg0)
    reflected = core.log(_PI / core.abs(_sinpi_wide(x))) - _lgamma_lanczos(1.0 - x)
    out = core.where(x < 0.5, reflected, _lgamma_lanczos(core.maximum(x, 0.5)))
    out = core.where(core.abs(x) == float("inf"), float("inf"), out)
    return out.to(arg0.dtype)


@jit
def tgamma(arg0):
    expect("tgamma", "fp32 fp64", arg0)
    x = wide(arg0)
    positive = core.exp(_lgamma_lanczos(core.maximum(x, 0.5)))
    reflected = _PI / (_sinpi_wide(x) * core.exp(_lgamma_lanczos(core.maximum(1.0 - x, 0.5))))
    out = core.where(x < 0.5, reflected, positive)
    out = core.where(x == float("inf"), x, out)
    out = core.where((x == -float("inf")) | ((x < 0) & (x == core.floor(x))), float("nan"), out)
    return out.to(arg0.dtype)

