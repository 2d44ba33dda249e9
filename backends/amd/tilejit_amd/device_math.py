"""fp64 math (and accurate f32 through it) for AMDGPU, as LLVM IR functions (a small stand-in for ocml).

LLVM's AMDGPU target lowers `llvm.exp.f64`, `llvm.sin.f64`, ... to library calls, and AMD's device
library (ocml bitcode) is not available without ROCm. The AMD ISA table (`isa.py`) therefore names
the functions below as library calls (`__tilejit_amd_exp_f64`, ...), and the toolchain links their
definitions into each kernel module that calls them (`link_device_math`), as clang links ocml.

Every function is branch-free straight-line code built from operations AMDGPU has instructions for
(fma, rint, floor, ldexp, frexp, sqrt, fdiv), with the special values (0, -0, inf, nan) chosen by
`select` at the end. The methods are the classic ones (fdlibm, Cody & Waite):

- exp/exp2/expm1: x = n ln2 + r, |r| <= ln2/2 (r kept as a double-double), Taylor series of e^r to
  degree 14, then `llvm.ldexp`.
- log/log2/log10: `llvm.frexp`, m in [sqrt(1/2), sqrt(2)), log(1 + f) = f - hf^2 + s (hf^2 + R(s^2))
  with s = f / (2 + f) (the atanh series), the leading part kept as a double-double.
- sin/cos/tan: k = rint(x 2/pi), r = x - k pi/2 with pi/2 in three parts (fma, exact for
  |k| < 2^20), Taylor polynomials of sin/cos on |r| <= pi/4. Accurate for |x| <= 2^20 pi/2
  (about 1.6e6); beyond that the reduction loses bits (no Payne-Hanek), inf gives nan.
- pow: exp2(y log2|x|) with log2 and the product as double-doubles, C99 special cases.
- sinh/cosh/tanh from expm1/exp; atan with fdlibm's reduction (breakpoints 7/16, 11/16, 19/16,
  39/16) and its Taylor series; atan2, asin (atan2(x, sqrt((1-x)(1+x)))) and acos from atan.
- erf: Taylor series for |x| < 1.5, 1 - erfc (continued fraction) beyond; cbrt: Newton's method.

f32 versions (`__tilejit_amd_<fn>_f32`, see F32_VIA_F64) widen to f64, call these and round back.

`tests/amd/test_amd_device_math.py` JIT-compiles the same IR for the host CPU and compares it with
NumPy over many inputs (ulp errors), then compiles it for gfx942 and gfx1100.
"""
from __future__ import annotations

import math
from typing import Callable, Dict, Tuple

import llvmlite.ir as llir

from tilejit.errors import CompilationError

F64 = llir.DoubleType()
I32 = llir.IntType(32)
I64 = llir.IntType(64)
I1 = llir.IntType(1)

LN2_HI = 6.93147180369123816490e-01      # 32 significant bits: n * LN2_HI is exact for |n| < 2^21
LN2_LO = 1.90821492927058770002e-10
LN2 = math.log(2.0)
LN2_TAIL = 2.3190468138462996e-17        # ln 2 - LN2
LOG2E = 1.4426950408889634
LOG2E_TAIL = 2.0355273740931033e-17      # 1/ln 2 - LOG2E
LOG10_2_HI = 3.01029995663611771306e-01  # log10(2), 32 significant bits
LOG10_2_LO = 3.69423907715893078616e-13
INV_LN10 = 4.34294481903251816668e-01    # 1/ln 10
INV_LN10_TAIL = 1.09831965021676510e-17
PIO2_1 = 1.5707963267948966              # pi/2 = PIO2_1 + PIO2_2 + PIO2_3 (+ 2^-160)
PIO2_2 = 6.123233995736766e-17
PIO2_3 = -1.4973849048591698e-33
TWO_OVER_PI = 0.6366197723675814
PI_HI = math.pi
PI_LO = 1.2246467991473532e-16
# atan(0.5), atan(1), atan(1.5), atan(inf) as double-doubles (fdlibm's atanhi/atanlo).
ATAN_HI = (4.63647609000806093515e-01, 7.85398163397448278999e-01, 9.82793723247329054082e-01,
           1.57079632679489655800e+00)
ATAN_LO = (2.26987774529616870924e-17, 3.06161699786838301793e-17, 1.39033110312309984516e-17,
           6.12323399573676603587e-17)

# Taylor coefficients, highest degree last.
_EXP_TAYLOR = [1.0 / math.factorial(k) for k in range(2, 15)]            # e^r - 1 - r = r^2 (...)
_SIN_TAYLOR = [(-1) ** k / math.factorial(2 * k + 1) for k in range(1, 10)]   # in z = r^2
_COS_TAYLOR = [(-1) ** k / math.factorial(2 * k) for k in range(2, 10)]      # from z^2 / 24
_LOG_ATANH = [2.0 / (2 * k + 1) for k in range(1, 13)]                        # R(z) = z (2/3 + ...)
_ATAN_TAYLOR = [(-1) ** k / (2 * k + 1) for k in range(1, 30)]                # atan(t) = t + t z (...)


class _Math:
    """An IRBuilder for doubles with the handful of operations the functions below are built of."""

    def __init__(self, builder: llir.IRBuilder):
        self.b = builder

    def c(self, value: float):
        return llir.Constant(F64, value)

    def _intrinsic(self, name, ret, args):
        module = self.b.module
        fn = module.globals.get(name)
        if fn is None:
            fn = llir.Function(module, llir.FunctionType(ret, [a.type for a in args]), name)
        return self.b.call(fn, list(args))

    def fma(self, a, b, c):
        return self._intrinsic("llvm.fma.f64", F64, [a, b, c])

    def unary(self, name, x):
        return self._intrinsic(f"llvm.{name}.f64", F64, [x])

    def copysign(self, magnitude, sign):
        return self._intrinsic("llvm.copysign.f64", F64, [magnitude, sign])

    def ldexp(self, x, n_i32):
        return self._intrinsic("llvm.ldexp.f64.i32", F64, [x, n_i32])

    def frexp(self, x):
        pair = self._intrinsic("llvm.frexp.f64.i32", llir.LiteralStructType([F64, I32]), [x])
        return self.b.extract_value(pair, 0), self.b.extract_value(pair, 1)

    def add(self, a, b):
        return self.b.fadd(a, b)

    def sub(self, a, b):
        return self.b.fsub(a, b)

    def mul(self, a, b):
        return self.b.fmul(a, b)

    def div(self, a, b):
        return self.b.fdiv(a, b)

    def lt(self, a, b):
        return self.b.fcmp_ordered("<", a, b)

    def gt(self, a, b):
        return self.b.fcmp_ordered(">", a, b)

    def ge(self, a, b):
        return self.b.fcmp_ordered(">=", a, b)

    def eq(self, a, b):
        return self.b.fcmp_ordered("==", a, b)

    def ne(self, a, b):
        return self.b.fcmp_unordered("!=", a, b)

    def isnan(self, x):
        return self.b.fcmp_unordered("uno", x, x)

    def isinf(self, x):
        return self.eq(self.unary("fabs", x), self.c(math.inf))

    def select(self, cond, a, b):
        return self.b.select(cond, a, b)

    def signbit(self, x):
        return self.b.icmp_signed("<", self.b.bitcast(x, I64), llir.Constant(I64, 0))

    def horner(self, x, coeffs):
        """coeffs[0] + x (coeffs[1] + x (...)) with fma."""
        acc = self.c(coeffs[-1])
        for k in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, self.c(k))
        return acc

    def two_sum_fast(self, a, b):
        """(s, e) with s + e == a + b exactly, for |a| >= |b|."""
        s = self.add(a, b)
        return s, self.sub(b, self.sub(s, a))


# --- exponentials -------------------------------------------------------------------------------

def _exp_reduced(m: _Math, r, r_lo):
    """e^(r + r_lo) - 1 for |r| <= ln2/2 + a little, r_lo tiny; returned as (leading r, rest)."""
    q = m.mul(m.mul(r, r), m.horner(r, _EXP_TAYLOR))
    # e^(r + lo) - 1 = (e^r - 1) + lo e^r = r + q + lo (1 + r) to within lo r^2.
    return r, m.add(q, m.fma(r_lo, r, r_lo))


def _clamp(m: _Math, x, limit):
    """x clamped to [-limit, limit]; nan stays nan (handled by the callers' final select)."""
    return m.select(m.gt(x, m.c(limit)), m.c(limit), m.select(m.lt(x, m.c(-limit)), m.c(-limit), x))


def _exp2_dd(m: _Math, hi, lo):
    """2^(hi + lo) with hi clamped so that the result saturates to inf / 0 correctly."""
    big = m.gt(m.unary("fabs", hi), m.c(1100.0))
    hi = _clamp(m, hi, 1100.0)
    lo = m.select(big, m.c(0.0), lo)
    n = m.unary("rint", hi)
    r = m.sub(hi, n)                               # exact
    t = m.mul(r, m.c(LN2))                         # (r + lo) ln2 as t + t_lo
    t_lo = m.add(m.fma(r, m.c(LN2), m.mul(t, m.c(-1.0))), m.fma(r, m.c(LN2_TAIL), m.mul(lo, m.c(LN2))))
    lead, rest = _exp_reduced(m, t, t_lo)
    y = m.add(m.c(1.0), m.add(lead, rest))
    return _scale(m, y, n)


def _scale(m: _Math, y, n_f64):
    """y * 2^n; n is split in two so that y * 2^1024 (y < 1) and subnormal results round once."""
    n = m.b.fptosi(n_f64, I32)
    half = m.b.sdiv(n, llir.Constant(I32, 2))
    return m.ldexp(m.ldexp(y, half), m.b.sub(n, half))


def _exp(m: _Math, x):
    xc = _clamp(m, x, 746.0)
    n = m.unary("rint", m.mul(xc, m.c(LOG2E)))
    hi = m.fma(m.mul(n, m.c(-1.0)), m.c(LN2_HI), xc)   # exact: n LN2_HI has <= 43 bits
    r = m.fma(m.mul(n, m.c(-1.0)), m.c(LN2_LO), hi)
    r_lo = m.fma(m.mul(n, m.c(-1.0)), m.c(LN2_LO), m.sub(hi, r))   # what rounding r dropped
    lead, rest = _exp_reduced(m, r, r_lo)
    y = _scale(m, m.add(m.c(1.0), m.add(lead, rest)), n)
    return m.select(m.isnan(x), x, y)


def _exp2(m: _Math, x):
    y = _exp2_dd(m, x, m.c(0.0))
    return m.select(m.isnan(x), x, y)


def _expm1(m: _Math, x):
    xc = _clamp(m, x, 746.0)
    n = m.unary("rint", m.mul(xc, m.c(LOG2E)))
    hi = m.fma(m.mul(n, m.c(-1.0)), m.c(LN2_HI), xc)
    r = m.fma(m.mul(n, m.c(-1.0)), m.c(LN2_LO), hi)
    r_lo = m.fma(m.mul(n, m.c(-1.0)), m.c(LN2_LO), m.sub(hi, r))
    lead, rest = _exp_reduced(m, r, r_lo)
    # e^x - 1 = 2^n (lead + rest) + (2^n - 1); 2^n - 1 is exact for |n| <= 53.
    n_i = m.b.fptosi(_clamp(m, n, 60.0), I32)
    pow2 = m.ldexp(m.c(1.0), n_i)
    small = m.add(m.ldexp(m.add(lead, rest), n_i), m.sub(pow2, m.c(1.0)))
    y = m.select(m.gt(n, m.c(56.0)), _exp(m, x), small)
    y = m.select(m.eq(x, m.c(0.0)), x, y)            # keeps -0
    return m.select(m.isnan(x), x, y)


# --- logarithms ---------------------------------------------------------------------------------

def _log_parts(m: _Math, x):
    """(e, hi, lo) with log(x) = e ln2 + hi + lo, |lo| << |hi|, for finite x > 0 (subnormals too)."""
    mant, e = m.frexp(x)                              # x = mant 2^e, mant in [0.5, 1)
    low = m.lt(mant, m.c(math.sqrt(0.5)))
    mant = m.select(low, m.mul(mant, m.c(2.0)), mant)
    e = m.b.sub(e, m.b.zext(low, I32))
    f = m.sub(mant, m.c(1.0))                         # exact (Sterbenz)
    d = m.add(m.c(2.0), f)
    d_lo = m.add(m.sub(m.c(2.0), d), f)               # 2 + f = d + d_lo exactly
    s = m.div(f, d)
    # What the rounding of s lost (pow needs log2 to ~2^-60): f = (s + s_lo)(d + d_lo).
    s_lo = m.div(m.sub(m.fma(m.mul(s, m.c(-1.0)), d, f), m.mul(s, d_lo)), d)
    z = m.mul(s, s)
    big_r = m.mul(z, m.horner(z, _LOG_ATANH))
    hf = m.mul(m.c(0.5), f)
    hfsq = m.mul(hf, f)
    hfsq_lo = m.fma(hf, f, m.mul(hfsq, m.c(-1.0)))    # hf f - hfsq, exact
    # log(1 + f) = f - hfsq + s w, w = hfsq + R, every rounding of the large terms carried along:
    # pow magnifies the error of log2 by up to 2^10, so it must be near 2^-63 (hi, lo together).
    hi = m.sub(f, hfsq)
    hi_err = m.sub(m.sub(f, hi), hfsq)                # exact (Sterbenz)
    w = m.add(hfsq, big_r)
    w_err = m.add(m.sub(big_r, m.sub(w, hfsq)), hfsq_lo)
    p = m.mul(s, w)
    p_lo = m.add(m.fma(s, w, m.mul(p, m.c(-1.0))), m.fma(s, w_err, m.mul(s_lo, w)))
    hi, p_err = m.two_sum_fast(hi, p)
    lo = m.add(p_err, m.add(hi_err, m.sub(p_lo, hfsq_lo)))
    return m.b.sitofp(e, F64), hi, lo


def _log_specials(m: _Math, x, y):
    y = m.select(m.eq(x, m.c(0.0)), m.c(-math.inf), y)
    y = m.select(m.lt(x, m.c(0.0)), m.c(math.nan), y)
    y = m.select(m.eq(x, m.c(math.inf)), x, y)
    return m.select(m.isnan(x), x, y)


def _log(m: _Math, x):
    e, hi, lo = _log_parts(m, x)
    y = m.add(m.fma(e, m.c(LN2_HI), hi), m.fma(e, m.c(LN2_LO), lo))
    return _log_specials(m, x, y)


def _log2_dd(m: _Math, x):
    """log2(x) as a double-double (for pow): e + (hi + lo) / ln2."""
    e, hi, lo = _log_parts(m, x)
    v_hi = m.mul(hi, m.c(LOG2E))
    v_lo = m.add(m.fma(hi, m.c(LOG2E), m.mul(v_hi, m.c(-1.0))),
                 m.fma(lo, m.c(LOG2E), m.mul(hi, m.c(LOG2E_TAIL))))
    s_hi = m.add(e, v_hi)
    # e + v_hi as a two-sum (either may be the larger).
    bb = m.sub(s_hi, e)
    err = m.add(m.sub(e, m.sub(s_hi, bb)), m.sub(v_hi, bb))
    return s_hi, m.add(err, v_lo)


def _log2(m: _Math, x):
    s_hi, s_lo = _log2_dd(m, x)
    return _log_specials(m, x, m.add(s_hi, s_lo))


def _log10(m: _Math, x):
    e, hi, lo = _log_parts(m, x)
    v_hi = m.mul(hi, m.c(INV_LN10))
    v_lo = m.add(m.fma(hi, m.c(INV_LN10), m.mul(v_hi, m.c(-1.0))),
                 m.fma(lo, m.c(INV_LN10), m.mul(hi, m.c(INV_LN10_TAIL))))
    y = m.add(m.fma(e, m.c(LOG10_2_HI), v_hi), m.fma(e, m.c(LOG10_2_LO), v_lo))
    return _log_specials(m, x, y)


def _log1p(m: _Math, x):
    # log(1 + x) computed on u = 1 + x, corrected by c = x - (u - 1) (what the rounding of u lost).
    u = m.add(m.c(1.0), x)
    corr = m.div(m.sub(x, m.sub(u, m.c(1.0))), u)
    y = m.add(_log(m, u), corr)
    y = m.select(m.lt(m.unary("fabs", x), m.c(2.0 ** -54)), x, y)   # tiny and -0: x itself
    y = m.select(m.eq(x, m.c(-1.0)), m.c(-math.inf), y)
    y = m.select(m.lt(x, m.c(-1.0)), m.c(math.nan), y)
    y = m.select(m.eq(x, m.c(math.inf)), x, y)
    return m.select(m.isnan(x), x, y)


def _pow(m: _Math, x, y):
    ax = m.unary("fabs", x)
    l_hi, l_lo = _log2_dd(m, ax)
    # log2(0) = -inf and log2(inf) = inf, with no tail (_log2_dd handles finite x > 0 only).
    l_hi = m.select(m.eq(ax, m.c(0.0)), m.c(-math.inf), m.select(m.isinf(ax), m.c(math.inf), l_hi))
    l_lo = m.select(m.isinf(l_hi), m.c(0.0), l_lo)
    p_hi = m.mul(y, l_hi)
    p_lo = m.fma(y, l_lo, m.fma(y, l_hi, m.mul(p_hi, m.c(-1.0))))
    p_lo = m.select(m.isinf(p_hi), m.c(0.0), p_lo)
    r = _exp2_dd(m, p_hi, p_lo)
    r = m.select(m.isnan(p_hi), m.c(math.nan), r)
    # Sign and domain: y an odd integer flips the sign of a negative x (-0 included).
    is_int = m.eq(m.unary("floor", y), y)
    half = m.mul(y, m.c(0.5))
    odd = m.b.and_(is_int, m.ne(m.unary("floor", half), half))
    r = m.select(m.b.and_(odd, m.signbit(x)), m.mul(r, m.c(-1.0)), r)
    finite_neg_x = m.b.and_(m.lt(x, m.c(0.0)), m.gt(x, m.c(-math.inf)))
    non_int_y = m.b.and_(m.b.not_(is_int), m.b.not_(m.isinf(y)))
    r = m.select(m.b.and_(finite_neg_x, non_int_y), m.c(math.nan), r)
    r = m.select(m.b.or_(m.isnan(x), m.isnan(y)), m.add(x, y), r)
    one = m.b.or_(m.eq(x, m.c(1.0)), m.eq(y, m.c(0.0)))
    one = m.b.or_(one, m.b.and_(m.eq(x, m.c(-1.0)), m.isinf(y)))
    return m.select(one, m.c(1.0), r)


# --- trigonometry -------------------------------------------------------------------------------

def _reduce_pio2(m: _Math, x):
    """(r, quadrant) with x = k pi/2 + r, |r| <= pi/4 (about), quadrant = k mod 4 as i32."""
    k = m.unary("rint", m.mul(x, m.c(TWO_OVER_PI)))
    nk = m.mul(k, m.c(-1.0))
    r = m.fma(nk, m.c(PIO2_1), x)
    r = m.fma(nk, m.c(PIO2_2), r)
    r = m.fma(nk, m.c(PIO2_3), r)
    quarter = m.unary("floor", m.mul(k, m.c(0.25)))
    q = m.fma(quarter, m.c(-4.0), k)                   # k mod 4, exact
    return r, m.b.fptosi(m.select(m.isnan(q), m.c(0.0), q), I32)


def _sin_poly(m: _Math, r):
    z = m.mul(r, r)
    return m.fma(m.mul(r, z), m.horner(z, _SIN_TAYLOR), r)


def _cos_poly(m: _Math, r):
    z = m.mul(r, r)
    hz = m.mul(m.c(0.5), z)
    w = m.sub(m.c(1.0), hz)
    # 1 - z/2 + z^2 (1/24 - ...), the rounding of 1 - z/2 added back.
    tail = m.add(m.sub(m.sub(m.c(1.0), w), hz), m.mul(m.mul(z, z), m.horner(z, _COS_TAYLOR)))
    return m.add(w, tail)


def _quadrant_is(m: _Math, q, value):
    return m.b.icmp_signed("==", q, llir.Constant(I32, value))


def _sin_cos(m: _Math, x, want_cos: bool):
    r, q = _reduce_pio2(m, x)
    s, c = _sin_poly(m, r), _cos_poly(m, r)
    if want_cos:
        q = m.b.add(q, llir.Constant(I32, 1))
        q = m.b.and_(q, llir.Constant(I32, 3))
    # sin(r + q pi/2) for q = 0..3: sin r, cos r, -sin r, -cos r.
    y = m.select(m.b.trunc(q, I1), c, s)
    y = m.select(m.b.icmp_signed(">=", q, llir.Constant(I32, 2)), m.mul(y, m.c(-1.0)), y)
    if not want_cos:
        y = m.select(m.eq(x, m.c(0.0)), x, y)         # sin(-0) = -0
    return m.select(m.isinf(x), m.c(math.nan), m.select(m.isnan(x), x, y))


def _tan(m: _Math, x):
    r, q = _reduce_pio2(m, x)
    s, c = _sin_poly(m, r), _cos_poly(m, r)
    odd = m.b.trunc(q, I1)
    y = m.select(odd, m.div(m.mul(c, m.c(-1.0)), s), m.div(s, c))
    y = m.select(m.eq(x, m.c(0.0)), x, y)
    return m.select(m.isinf(x), m.c(math.nan), m.select(m.isnan(x), x, y))


# --- hyperbolic ---------------------------------------------------------------------------------

def _sinh(m: _Math, x):
    a = m.unary("fabs", x)
    t = _expm1(m, a)
    near = m.mul(m.c(0.5), m.sub(m.mul(m.c(2.0), t), m.div(m.mul(t, t), m.add(t, m.c(1.0)))))
    mid = m.mul(m.c(0.5), m.add(t, m.div(t, m.add(t, m.c(1.0)))))
    w = _exp(m, m.mul(m.c(0.5), a))                   # e^a / 2 = (w / 2) w, finite up to the limit
    far = m.mul(m.mul(m.c(0.5), w), w)
    y = m.select(m.lt(a, m.c(1.0)), near, m.select(m.lt(a, m.c(22.0)), mid, far))
    y = m.copysign(y, x)
    return m.select(m.isnan(x), x, y)


def _cosh(m: _Math, x):
    a = m.unary("fabs", x)
    t = _expm1(m, a)
    near = m.add(m.c(1.0), m.div(m.mul(t, t), m.mul(m.c(2.0), m.add(m.c(1.0), t))))
    e = _exp(m, a)
    mid = m.add(m.mul(m.c(0.5), e), m.div(m.c(0.5), e))
    w = _exp(m, m.mul(m.c(0.5), a))
    far = m.mul(m.mul(m.c(0.5), w), w)
    y = m.select(m.lt(a, m.c(0.3465735902799726)), near, m.select(m.lt(a, m.c(22.0)), mid, far))
    return m.select(m.isnan(x), x, y)


def _tanh(m: _Math, x):
    a = m.unary("fabs", x)
    t_big = _expm1(m, m.mul(m.c(2.0), a))
    big = m.sub(m.c(1.0), m.div(m.c(2.0), m.add(t_big, m.c(2.0))))
    t_small = _expm1(m, m.mul(m.c(-2.0), a))
    small = m.div(m.mul(t_small, m.c(-1.0)), m.add(t_small, m.c(2.0)))
    y = m.select(m.ge(a, m.c(1.0)), big, small)
    y = m.select(m.ge(a, m.c(22.0)), m.c(1.0), y)
    y = m.copysign(y, x)
    return m.select(m.isnan(x), x, y)


# --- inverse trigonometry -----------------------------------------------------------------------

def _atan_nonneg(m: _Math, a):
    """atan(a) for a >= 0 (inf included), fdlibm's reduction to |t| < 7/16 and a Taylor series."""
    t0 = a
    t1 = m.div(m.sub(m.mul(m.c(2.0), a), m.c(1.0)), m.add(m.c(2.0), a))
    t2 = m.div(m.sub(a, m.c(1.0)), m.add(a, m.c(1.0)))
    t3 = m.div(m.sub(a, m.c(1.5)), m.add(m.c(1.0), m.mul(m.c(1.5), a)))
    t4 = m.div(m.c(-1.0), a)
    bounds = [m.lt(a, m.c(7.0 / 16)), m.lt(a, m.c(11.0 / 16)), m.lt(a, m.c(19.0 / 16)),
              m.lt(a, m.c(39.0 / 16))]
    t, hi, lo = t4, m.c(ATAN_HI[3]), m.c(ATAN_LO[3])
    for bound, ti, k in zip(reversed(bounds), (t3, t2, t1), (2, 1, 0)):
        t = m.select(bound, ti, t)
        hi = m.select(bound, m.c(ATAN_HI[k]), hi)
        lo = m.select(bound, m.c(ATAN_LO[k]), lo)
    direct = bounds[0]
    t = m.select(direct, t0, t)
    hi = m.select(direct, m.c(0.0), hi)
    lo = m.select(direct, m.c(0.0), lo)
    z = m.mul(t, t)
    corr = m.mul(m.mul(t, z), m.horner(z, _ATAN_TAYLOR))    # atan(t) - t
    return m.add(hi, m.add(t, m.add(corr, lo)))


def _atan(m: _Math, x):
    y = m.copysign(_atan_nonneg(m, m.unary("fabs", x)), x)
    return m.select(m.isnan(x), x, y)


def _atan2(m: _Math, y, x):
    ay, ax = m.unary("fabs", y), m.unary("fabs", x)
    a = _atan_nonneg(m, m.div(ay, ax))
    a = m.select(m.eq(ay, m.c(0.0)), m.c(0.0), a)
    a = m.select(m.b.and_(m.isinf(ax), m.isinf(ay)), m.c(math.pi / 4), a)
    # x < 0 (or -0): pi - a, with pi as a double-double.
    flipped = m.sub(m.c(PI_HI), m.sub(a, m.c(PI_LO)))
    r = m.select(m.signbit(x), flipped, a)
    r = m.copysign(r, y)
    return m.select(m.b.or_(m.isnan(x), m.isnan(y)), m.add(x, y), r)


def _asin(m: _Math, x):
    root = m.unary("sqrt", m.mul(m.sub(m.c(1.0), x), m.add(m.c(1.0), x)))
    return _atan2(m, x, root)


def _acos(m: _Math, x):
    root = m.unary("sqrt", m.mul(m.sub(m.c(1.0), x), m.add(m.c(1.0), x)))
    return _atan2(m, root, x)


# --- erf and cbrt -------------------------------------------------------------------------------

TWO_OVER_SQRT_PI = 1.1283791670955126
TWO_OVER_SQRT_PI_TAIL = 1.533545961316588e-17     # 2/sqrt(pi) - TWO_OVER_SQRT_PI
INV_SQRT_PI = 0.5641895835477563
# erf(x) = 2/sqrt(pi) sum_n (-1)^n x^(2n+1) / (n! (2n+1)): coefficients of z^n, n >= 1, over
# 2/sqrt(pi). 30 terms bring the truncation under 2^-60 for |x| < 1.5 (where the alternating sum
# loses at most a bit to cancellation).
_ERF_TAYLOR = [(-1) ** n * TWO_OVER_SQRT_PI / (math.factorial(n) * (2 * n + 1)) for n in range(1, 30)]
ERF_TAYLOR_LIMIT = 1.5
# erfc(x) = e^(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))): depth 100 converges to
# below 2^-60 relative for x >= 1.5 (checked against mpmath while choosing it).
ERFC_CF_DEPTH = 100
ERF_ONE = 6.0                                     # erf(x) rounds to 1 for x >= 5.93
# A cubic fit of cbrt on [0.5, 4) (1.8% relative error), refined by Newton's method.
_CBRT_GUESS = [0.5725443027486034, 0.5222023616036013, -0.11029026083539716, 0.010886453522085306]


def _exp_minus_square(m: _Math, a):
    """e^(-a^2) with a^2 carried as a double-double (its rounding would cost up to a^2 ulp)."""
    sq = m.mul(a, a)
    sq_lo = m.fma(a, a, m.mul(sq, m.c(-1.0)))
    return m.mul(_exp(m, m.mul(sq, m.c(-1.0))), m.sub(m.c(1.0), sq_lo))


def _erf(m: _Math, x):
    a = m.unary("fabs", x)
    z = m.mul(x, x)
    # Small |x|: the Taylor series, its leading coefficient split so x 2/sqrt(pi) rounds once.
    tail = m.fma(z, m.horner(z, _ERF_TAYLOR), m.c(TWO_OVER_SQRT_PI_TAIL))
    small = m.fma(x, m.c(TWO_OVER_SQRT_PI), m.mul(x, tail))
    # Large |x|: 1 - erfc, the continued fraction evaluated backwards as p/q (one division).
    t = _clamp(m, a, ERF_ONE)
    t = m.select(m.lt(t, m.c(ERF_TAYLOR_LIMIT)), m.c(ERF_TAYLOR_LIMIT), t)
    p, q = t, m.c(1.0)
    for k in range(ERFC_CF_DEPTH, 0, -1):            # t + (k/2) / (p/q) = (t p + (k/2) q) / p
        p, q = m.fma(t, p, m.mul(m.c(k / 2.0), q)), p
    erfc = m.div(m.mul(m.mul(_exp_minus_square(m, t), m.c(INV_SQRT_PI)), q), p)
    large = m.copysign(m.sub(m.c(1.0), erfc), x)
    y = m.select(m.lt(a, m.c(ERF_TAYLOR_LIMIT)), small, large)
    y = m.select(m.ge(a, m.c(ERF_ONE)), m.copysign(m.c(1.0), x), y)
    return m.select(m.isnan(x), x, y)


def _cbrt(m: _Math, x):
    ax = m.unary("fabs", x)
    mant, e = m.frexp(ax)                             # |x| = mant 2^e, e = 3 q + r, r in {0, 1, 2}
    q = m.unary("floor", m.div(m.b.sitofp(e, F64), m.c(3.0)))
    q_i = m.b.fptosi(q, I32)
    r = m.b.sub(e, m.b.mul(q_i, llir.Constant(I32, 3)))
    a = m.ldexp(mant, r)                              # in [0.5, 4), exact
    y = m.horner(a, _CBRT_GUESS)
    for _ in range(4):                                # 1.8e-2 -> 3e-4 -> 1e-7 -> 1e-14 -> 2^-53
        y = m.mul(m.add(m.add(y, y), m.div(a, m.mul(y, y))), m.c(1.0 / 3.0))
    # Last step on the exact residual a - y^3 (y^3 as a double-double), for a correct final bit.
    y2 = m.mul(y, y)
    y2_lo = m.fma(y, y, m.mul(y2, m.c(-1.0)))
    y3 = m.mul(y2, y)
    y3_lo = m.fma(y2_lo, y, m.fma(y2, y, m.mul(y3, m.c(-1.0))))
    residual = m.sub(m.sub(a, y3), y3_lo)
    y = m.add(y, m.div(residual, m.mul(m.c(3.0), y2)))
    y = m.copysign(m.ldexp(y, q_i), x)
    special = m.b.or_(m.eq(x, m.c(0.0)), m.b.or_(m.isinf(x), m.isnan(x)))
    return m.select(special, m.add(x, x), y)


# --- the library --------------------------------------------------------------------------------

# TTIR op name -> (arity, body builder).
_FUNCTIONS: Dict[str, Tuple[int, Callable]] = {
    "math.exp": (1, _exp), "math.exp2": (1, _exp2), "math.expm1": (1, _expm1),
    "math.log": (1, _log), "math.log2": (1, _log2), "math.log10": (1, _log10), "math.log1p": (1, _log1p),
    "math.powf": (2, _pow),
    "math.sin": (1, lambda m, x: _sin_cos(m, x, False)), "math.cos": (1, lambda m, x: _sin_cos(m, x, True)),
    "math.tan": (1, _tan),
    "math.sinh": (1, _sinh), "math.cosh": (1, _cosh), "math.tanh": (1, _tanh),
    "math.atan": (1, _atan), "math.atan2": (2, _atan2), "math.asin": (1, _asin), "math.acos": (1, _acos),
    "math.erf": (1, _erf), "math.cbrt": (1, _cbrt),
}

# f32 ops computed in f64 (fpext, the f64 function, fptrunc). The f64 results are within a few f64
# ulp, so rounding them to f32 gives the correctly rounded f32 result except within ~2^-26 ulp of a
# halfway point: under 1 f32 ulp always. AMDGPU's own f32 lowering of exp/exp2/log/log2/log10/
# sin/cos/sqrt is already accurate and much cheaper, so those keep the LLVM intrinsics; these
# would otherwise use the core's portable f32 expansions (about 1e-5 absolute error for atan,
# cancellation in sinh/expm1/log1p near 0, exp2(y log2 x) for pow). The price is f64 arithmetic,
# which is slow on consumer RDNA GPUs (1/32 or less of the f32 rate) and fast on CDNA.
F32_VIA_F64 = ("math.tan", "math.sinh", "math.cosh", "math.tanh", "math.atan", "math.atan2",
               "math.asin", "math.acos", "math.erf", "math.cbrt", "math.expm1", "math.log1p", "math.powf")

_TYPES = {"f64": F64, "f32": llir.FloatType()}


def symbol_for(op_name: str, suffix: str = "f64") -> str | None:
    """The library function computing `op_name` on `suffix` ("f64" or "f32"), or None."""
    if op_name not in _FUNCTIONS or suffix not in _TYPES:
        return None
    if suffix == "f32" and op_name not in F32_VIA_F64:
        return None
    return f"__tilejit_amd_{op_name.split('.', 1)[1]}_{suffix}"


def arity(op_name: str) -> int:
    if op_name not in _FUNCTIONS:
        raise CompilationError(f"the AMD device math library has no {op_name}")
    return _FUNCTIONS[op_name][0]


# Every library function: symbol -> (op name, type suffix).
SYMBOLS = {symbol_for(name, suffix): (name, suffix) for suffix in _TYPES for name in _FUNCTIONS
           if symbol_for(name, suffix) is not None}


def define(module: llir.Module, op_name: str, suffix: str = "f64") -> llir.Function:
    """Define (or return) the `suffix` function for `op_name` in `module`."""
    name = symbol_for(op_name, suffix)
    if name is None:
        raise CompilationError(f"the AMD device math library has no {suffix} {op_name}")
    existing = module.globals.get(name)
    if existing is not None and not existing.is_declaration:
        return existing
    n_args, body = _FUNCTIONS[op_name]
    ty = _TYPES[suffix]
    fn = existing or llir.Function(module, llir.FunctionType(ty, [ty] * n_args), name)
    builder = llir.IRBuilder(fn.append_basic_block("entry"))
    if suffix == "f64":
        builder.ret(body(_Math(builder), *fn.args))
    else:
        wide = define(module, op_name, "f64")
        result = builder.call(wide, [builder.fpext(a, F64) for a in fn.args])
        builder.ret(builder.fptrunc(result, ty))
    return fn


def build_library(symbols=(), triple: str = "", data_layout: str = "") -> llir.Module:
    """A module defining the library functions named in `symbols` (all of them when empty)."""
    module = llir.Module(name="tilejit_amd_device_math")
    module.triple = triple
    if data_layout:
        module.data_layout = data_layout
    for symbol in (symbols or sorted(SYMBOLS)):
        if symbol not in SYMBOLS:
            raise CompilationError(f"the AMD device math library has no function {symbol}")
        define(module, *SYMBOLS[symbol])
    return module


def link_device_math(module, data_layout: str = "") -> list[str]:
    """Link into `module` (llvmlite.binding) the definitions of the library functions it declares.

    The definitions become internal, so the hsaco exports none of them. Returns their names.
    """
    import llvmlite.binding as llvm

    wanted = [fn.name for fn in module.functions if fn.is_declaration and fn.name in SYMBOLS]
    if not wanted:
        return []
    library = build_library(wanted, module.triple, data_layout or module.data_layout)
    parsed = llvm.parse_assembly(str(library))
    parsed.verify()
    module.link_in(parsed)
    # An f32 function brings its f64 one along: make every library definition internal.
    for fn in module.functions:
        if fn.name in SYMBOLS and not fn.is_declaration:
            fn.linkage = "internal"
    return wanted
